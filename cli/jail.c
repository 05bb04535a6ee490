/* The jailer: see jail.h. */
#define _GNU_SOURCE
#include "jail.h"
#include "../vmm/log.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CG_ROOT "/sys/fs/cgroup"

int jail_add(struct jail *j, const char *path, int rw)
{
	if (!path || !*path)
		return 0;
	if (j->nr_paths == JAIL_MAX_PATHS)
		return -ENOSPC;
	j->paths[j->nr_paths].path = path;
	j->paths[j->nr_paths].rw = rw;
	j->nr_paths++;
	return 0;
}

int jail_parse_cpu(const char *s, unsigned *milli)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < 0.01 || v > 1024)
		return -EINVAL;
	*milli = (unsigned)(v * 1000 + 0.5);
	return 0;
}

static int write_file(const char *dir, const char *file, const char *val)
{
	char p[PATH_MAX];
	int fd, r = 0;
	size_t n = strlen(val);

	if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		r = -errno;
	close(fd);
	if (r)
		log_err("jail: cannot write '%s' to %s: %s", val, p, strerror(-r));
	return r;
}

static int make_group(char *out, size_t len, const char *ctrl, const char *name)
{
	char parent[PATH_MAX];

	snprintf(parent, sizeof(parent), "%s%s%s/vmm", CG_ROOT, *ctrl ? "/" : "", ctrl);
	if (mkdir(parent, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (snprintf(out, len, "%s/%s", parent, name) >= (int)len)
		return -ENAMETOOLONG;
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int jail_cgroup(struct jail *j, const char *name, unsigned nr_vcpus)
{
	char v[64], pid[24];
	struct stat st;
	int r;

	(void)nr_vcpus;
	if (!j->cpu_milli && !j->mem_bytes && !j->pids)
		return 0;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (stat(CG_ROOT "/cgroup.controllers", &st) == 0) {
		/* v2: one hierarchy; the parent hands its children the controllers. */
		if ((r = write_file(CG_ROOT, "cgroup.subtree_control", "+cpu +memory +pids")) ||
		    (r = make_group(j->cgroup[0], sizeof(j->cgroup[0]), "", name)) ||
		    (r = write_file(CG_ROOT "/vmm", "cgroup.subtree_control", "+cpu +memory +pids")))
			goto fail;
		if (j->cpu_milli) {
			snprintf(v, sizeof(v), "%u 100000", j->cpu_milli * 100);
			if ((r = write_file(j->cgroup[0], "cpu.max", v)))
				goto fail;
		}
		if (j->mem_bytes) {
			snprintf(v, sizeof(v), "%llu", (unsigned long long)j->mem_bytes);
			if ((r = write_file(j->cgroup[0], "memory.max", v)))
				goto fail;
		}
		if (j->pids) {
			snprintf(v, sizeof(v), "%u", j->pids);
			if ((r = write_file(j->cgroup[0], "pids.max", v)))
				goto fail;
		}
		if ((r = write_file(j->cgroup[0], "cgroup.procs", pid)))
			goto fail;
		return 0;
	}
	/* v1: one hierarchy per controller. */
	if (j->cpu_milli) {
		snprintf(v, sizeof(v), "%u", j->cpu_milli * 100);
		if ((r = make_group(j->cgroup[0], sizeof(j->cgroup[0]), "cpu", name)) ||
		    (r = write_file(j->cgroup[0], "cpu.cfs_period_us", "100000")) ||
		    (r = write_file(j->cgroup[0], "cpu.cfs_quota_us", v)) ||
		    (r = write_file(j->cgroup[0], "cgroup.procs", pid)))
			goto fail;
	}
	if (j->mem_bytes) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)j->mem_bytes);
		if ((r = make_group(j->cgroup[1], sizeof(j->cgroup[1]), "memory", name)) ||
		    (r = write_file(j->cgroup[1], "memory.limit_in_bytes", v)) ||
		    (r = write_file(j->cgroup[1], "cgroup.procs", pid)))
			goto fail;
	}
	if (j->pids) {
		snprintf(v, sizeof(v), "%u", j->pids);
		if ((r = make_group(j->cgroup[2], sizeof(j->cgroup[2]), "pids", name)) ||
		    (r = write_file(j->cgroup[2], "pids.max", v)) ||
		    (r = write_file(j->cgroup[2], "cgroup.procs", pid)))
			goto fail;
	}
	return 0;
fail:
	log_err("jail: cannot set up the sandbox's cgroup under %s: %s", CG_ROOT, strerror(-r));
	return r;
}

/* mkdir -p of path's directories (and path itself if dir). */
static int mkdirs(char *path, int last_too)
{
	char *s;

	for (s = path + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			*s = '/';
			return -errno;
		}
		*s = '/';
	}
	if (last_too && mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int bind_one(const char *root, const char *src, int rw)
{
	char dst[PATH_MAX];
	struct stat st;
	unsigned long ro = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID;
	int fd, r;

	if (src[0] != '/' || stat(src, &st) < 0) {
		log_err("jail: %s: %s", src, src[0] == '/' ? strerror(errno) : "not an absolute path");
		return -EINVAL;
	}
	if (snprintf(dst, sizeof(dst), "%s%s", root, src) >= (int)sizeof(dst))
		return -ENAMETOOLONG;
	if ((r = mkdirs(dst, S_ISDIR(st.st_mode))))
		return r;
	if (!S_ISDIR(st.st_mode)) {
		fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return -errno;
	if (!S_ISCHR(st.st_mode))
		ro |= MS_NODEV;
	if (!rw && mount(NULL, dst, NULL, ro, NULL) < 0)
		return -errno;
	return 0;
}

/* The sandbox folder and what is in it (it is flat) change hands. */
static void hand_over(const char *dir, uid_t uid, gid_t gid)
{
	char p[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (lchown(dir, uid, gid) < 0)
		log_warn("jail: cannot hand %s over: %s", dir, strerror(errno));
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) < (int)sizeof(p) &&
		    lchown(p, uid, gid) < 0)
			log_debug("jail: chown %s: %s", p, strerror(errno));
	}
	closedir(d);
}

/* A root process outside the jail that waits for the VMM to exit (the
 * pipe's end), then removes what the unprivileged VMM cannot: the sandbox
 * folder in the root-owned state directory, and the cgroups. */
static int start_reaper(const struct jail *j, const char *folder)
{
	int p[2], i;
	char c;
	pid_t pid;

	if (pipe(p) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		close(p[1]);
		setsid();
		while (read(p[0], &c, 1) > 0) {
		}
		/* `vmm snapshot --stop` of a jailed sandbox may still be moving
		 * the snapshot out of the folder: give it a moment. */
		for (i = 0; i < 50 && rmdir(folder) < 0 && errno == ENOTEMPTY; i++)
			usleep(100000);
		/* A detached sandbox's record stays for `vmm ls`/`logs`/`rm`:
		 * it goes back to root, whose tools look only at their own. */
		if (i == 50)
			hand_over(folder, 0, 0);
		for (i = 0; i < 3; i++) {
			char top[PATH_MAX], *v;

			if (!j->cgroup[i][0])
				continue;
			/* Out of the group first: ".../vmm/NAME" -> "...". */
			snprintf(top, sizeof(top), "%s", j->cgroup[i]);
			if ((v = strstr(top, "/vmm/")))
				*v = '\0';
			write_file(top, "cgroup.procs", "0");
			rmdir(j->cgroup[i]);
		}
		_exit(0);
	}
	close(p[0]); /* the write end stays open, unwritten, until we exit */
	return 0;
}

int jail_enter(struct jail *j, const char *root, const char *folder)
{
	char old[PATH_MAX];
	unsigned i;
	int r;

	if ((r = start_reaper(j, folder))) {
		log_err("jail: fork: %s", strerror(-r));
		return r;
	}
	if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0) {
		r = -errno;
		log_err("jail: unshare (mount, network, IPC, UTS namespaces): %s", strerror(errno));
		return r;
	}
	/* Nothing we mount from here on leaks back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		goto err;
	if (mkdir(root, 0755) < 0 && errno != EEXIST)
		goto err;
	if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755") < 0)
		goto err;
	for (i = 0; i < j->nr_paths; i++) {
		r = bind_one(root, j->paths[i].path, j->paths[i].rw);
		if (r) {
			log_err("jail: cannot bind %s into the jail: %s", j->paths[i].path, strerror(-r));
			return r;
		}
	}
	snprintf(old, sizeof(old), "%s/.old", root);
	if (mkdir(old, 0700) < 0 || syscall(SYS_pivot_root, root, old) < 0 || chdir("/") < 0 ||
	    umount2("/.old", MNT_DETACH) < 0 || rmdir("/.old") < 0)
		goto err;
	/* The jail's own skeleton is read-only; the binds keep their modes. */
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) < 0)
		goto err;
	/* The mountpoint in the sandbox folder: gone once nothing is mounted
	 * on it in this namespace (best effort; sandbox_remove expects files). */
	if (rmdir(root) < 0)
		log_debug("jail: %s stays: %s", root, strerror(errno));
	return 0;
err:
	r = -errno;
	log_err("jail: cannot build the jail's root at %s: %s", root, strerror(errno));
	return r;
}

int jail_drop(struct jail *j, const char *owned_dir)
{
	struct rlimit files = { 4096, 4096 }, procs = { 1024, 1024 }, core = { 0, 0 };
	int cap;

	/* The sandbox's folder becomes the jailed VMM's: it writes its exit
	 * record there and removes the folder at the end. */
	if (owned_dir)
		hand_over(owned_dir, j->uid, j->gid);
	if (setrlimit(RLIMIT_NOFILE, &files) < 0 || setrlimit(RLIMIT_NPROC, &procs) < 0 ||
	    setrlimit(RLIMIT_CORE, &core) < 0)
		goto err;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		goto err;
	for (cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			goto err;
	/* glibc applies these to every thread of the process; a uid change
	 * away from 0 (real, effective and saved) clears the permitted and
	 * effective capabilities of each thread. */
	if (setgroups(0, NULL) < 0 || setresgid(j->gid, j->gid, j->gid) < 0 ||
	    setresuid(j->uid, j->uid, j->uid) < 0)
		goto err;
	return 0;
err:
	log_err("jail: cannot drop privileges: %s", strerror(errno));
	return -errno;
}
