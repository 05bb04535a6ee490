/* The container's cgroup on the host: see oci_cgroup.h. */
#include "cli/oci/oci_cgroup.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int oci_cgroup_dir(const char *mnt, const char *cgroups_path, char *buf, size_t len)
{
	const char *p = cgroups_path;
	char probe[4096];

	if (!p || !p[strspn(p, "/")])
		return -ENOENT; /* none, or the root: nothing of the container's own */
	if (strchr(p, ':'))
		return -ENOTSUP; /* the systemd driver's slice:prefix:name */
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);

		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		p = *end ? end + 1 : end;
	}
	/* a relative path under the hierarchy's root (runc on cgroup v2
	 * takes it under its own cgroup's parent; engines give absolute ones) */
	if (snprintf(buf, len, "%s%s%s", mnt, cgroups_path[0] == '/' ? "" : "/", cgroups_path) >= (int)len)
		return -ENAMETOOLONG;
	if (snprintf(probe, sizeof(probe), "%s/cgroup.controllers", mnt) >= (int)sizeof(probe))
		return -ENAMETOOLONG;
	return access(probe, F_OK) ? -ENOTSUP : 0;
}

/* Writes text into dir/file: 0 or -errno. */
static int cg_write(const char *dir, const char *file, const char *text)
{
	char p[4096];
	int fd, r = 0;

	if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	if ((fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0) /* as `echo +memory >>` */
		return -errno;
	if (write_full(fd, text, strlen(text)))
		r = -errno;
	close(fd);
	return r;
}

/* Switches on in parent's subtree_control what the container's stats
 * need, of the controllers parent has (its cgroup.controllers): each
 * alone, so one the kernel refuses (a parent with processes of its own,
 * a controller held elsewhere) leaves the others. */
static void cg_enable(const char *parent)
{
	static const char *const want[] = { "cpu", "memory", "pids", "io" };
	char p[4096], have[512] = "", *save = NULL;
	FILE *f;

	if (snprintf(p, sizeof(p), "%s/cgroup.controllers", parent) >= (int)sizeof(p) || !(f = fopen(p, "re")))
		return;
	if (!fgets(have, sizeof(have), f))
		have[0] = '\0';
	fclose(f);
	for (char *w = strtok_r(have, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			if (!strcmp(w, want[i])) {
				char word[16];

				snprintf(word, sizeof(word), "+%s", w);
				(void)cg_write(parent, "cgroup.subtree_control", word);
			}
}

int oci_cgroup_join(const char *mnt, const char *dir, pid_t pid, char *why, size_t whylen)
{
	size_t base = strlen(mnt);
	char path[4096];
	int r;

	if (strncmp(dir, mnt, base) || dir[base] != '/' || strlen(dir) >= sizeof(path))
		return cli_seterr(why, whylen, -EINVAL, "%s: not under %s", dir, mnt);
	snprintf(path, sizeof(path), "%s", dir);
	/* each level from the top: its parent's controllers, then itself */
	for (char *s = path + base + 1;; s++) {
		char keep = *s;

		if (keep != '/' && keep != '\0')
			continue;
		*s = '\0';
		{
			char *slash = strrchr(path, '/');

			*slash = '\0';
			cg_enable(path);
			*slash = '/';
		}
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			return cli_seterr(why, whylen, r, "cgroup %s: %s", path, strerror(-r));
		}
		*s = keep;
		if (!keep)
			break;
	}
	if ((r = oci_cgroup_move(dir, pid)))
		return cli_seterr(why, whylen, r, "cgroup %s: joining it: %s", dir, strerror(-r));
	return 0;
}

uint64_t oci_cgroup_mem_limit(const char *mnt, const char *dir)
{
	size_t base = strlen(mnt);
	uint64_t lim = UINT64_MAX;
	char level[4096], text[64];

	if (strncmp(dir, mnt, base) || dir[base] != '/' || strlen(dir) >= sizeof(level))
		return lim;
	snprintf(level, sizeof(level), "%s", dir);
	for (;;) {
		char *slash = strrchr(level, '/');
		int fd;
		ssize_t n;

		if (!slash || (size_t)(slash - level) <= base)
			break; /* the hierarchy's root has no memory.max */
		*slash = '\0';
		if (strlen(level) + sizeof("/memory.max") > sizeof(level))
			break;
		strcat(level, "/memory.max");
		fd = open(level, O_RDONLY | O_CLOEXEC);
		level[strlen(level) - sizeof("/memory.max") + 1] = '\0';
		if (fd < 0)
			continue;
		n = read_upto(fd, text, sizeof(text) - 1);
		close(fd);
		if (n > 0) {
			text[n] = '\0';
			if (text[0] >= '0' && text[0] <= '9' && strtoull(text, NULL, 10) < lim)
				lim = strtoull(text, NULL, 10);
		}
	}
	return lim;
}

int oci_cgroup_move(const char *dir, pid_t pid)
{
	char text[32];

	snprintf(text, sizeof(text), "%d", (int)pid);
	return cg_write(dir, "cgroup.procs", text);
}

int oci_cgroup_self(const char *mnt, char *buf, size_t len)
{
	char line[4096];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int r = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			/* in a cgroup namespace the line may climb ("/../x"):
			 * then the hierarchy's root, where a root process may go */
			if (line[3] != '/' || strstr(line + 3, "/.."))
				line[4] = '\0', line[3] = '/';
			r = snprintf(buf, len, "%s%s", mnt, line + 3) >= (int)len ? -ENAMETOOLONG : 0;
			break;
		}
	fclose(f);
	return r;
}

int oci_cgroup_remove(const char *dir)
{
	for (int tries = 0;; tries++) {
		if (!rmdir(dir) || errno == ENOENT)
			return 0;
		if (errno != EBUSY || tries == 50)
			return -errno;
		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
	}
}

int oci_cgroup_record(const char *state_dir, const char *dir)
{
	char p[4096], text[4096];

	if (snprintf(p, sizeof(p), "%s/cgroup", state_dir) >= (int)sizeof(p) ||
	    snprintf(text, sizeof(text), "%s\n", dir) >= (int)sizeof(text))
		return -ENAMETOOLONG;
	return cli_write_text(p, text, 0644);
}

int oci_cgroup_forget(const char *state_dir, char *why, size_t whylen)
{
	char p[4096], dir[4096];
	size_t n;
	int r;

	if (snprintf(p, sizeof(p), "%s/cgroup", state_dir) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	if ((r = cli_read_text(p, dir, sizeof(dir))) == -ENOENT)
		return 0;
	if (r < 0)
		return cli_seterr(why, whylen, r, "%s: %s", p, strerror(-r));
	n = strlen(dir);
	while (n && dir[n - 1] == '\n')
		dir[--n] = '\0';
	/* only what oci_cgroup_join made: a folder under the hierarchy */
	if (strncmp(dir, OCI_CGROUP_ROOT "/", sizeof(OCI_CGROUP_ROOT)) || strstr(dir, "/.."))
		return cli_seterr(why, whylen, -EINVAL, "%s: names %s, not a cgroup", p, dir);
	r = oci_cgroup_remove(dir);
	if (r == -EBUSY) {
		char self[4096];

		/* what is left in it (a hook's daemon, a stuck helper) goes,
		 * as runc's delete kills the container's processes; never a
		 * cgroup the caller itself is in */
		if (!oci_cgroup_self(OCI_CGROUP_ROOT, self, sizeof(self)) && strcmp(self, dir) &&
		    !cg_write(dir, "cgroup.kill", "1"))
			r = oci_cgroup_remove(dir);
	}
	if (r)
		return cli_seterr(why, whylen, r, "cgroup %s: %s", dir, strerror(-r));
	return 0;
}
