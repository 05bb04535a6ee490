/* The jailer: see jail.h. */
#include "cli/launch/jail.h"
#include "cli/util/util.h"
#include "cli/egress/egress.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CG_ROOT "/sys/fs/cgroup"
#define NETNS_DIR "/var/run/netns"

int jail_add(struct jail *j, const char *path, int flags)
{
	if (!path || !*path)
		return 0;
	if (j->nr_paths == JAIL_MAX_PATHS)
		return -ENOSPC;
	j->paths[j->nr_paths].path = path;
	j->paths[j->nr_paths].flags = flags;
	j->nr_paths++;
	return 0;
}

unsigned long long jail_root_caps(const struct jail *j)
{
	return JAIL_ROOT_CAPS | (j->low_ports ? 1ull << CAP_NET_BIND_SERVICE : 0);
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

/* Writes val into dir/file: an existing one (a cgroup's interface file),
 * or with O_CREAT | O_TRUNC in `create` a file of ours. */
static int write_file_as(const char *dir, const char *file, const char *val, int create)
{
	char p[PATH_MAX];
	int fd, r = 0;
	size_t n = strlen(val);

	if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	fd = open(p, O_WRONLY | O_CLOEXEC | create, 0644);
	if (fd < 0) {
		r = -errno;
		if (create)
			log_err("jail: %s: %s", p, strerror(-r));
		return r;
	}
	if (write(fd, val, n) != (ssize_t)n)
		r = -errno;
	close(fd);
	if (r)
		log_err("jail: cannot write '%s' to %s: %s", val, p, strerror(-r));
	return r;
}

static int write_file(const char *dir, const char *file, const char *val)
{
	return write_file_as(dir, file, val, 0);
}

static int make_group(char *out, size_t len, const char *root, const char *ctrl, const char *name)
{
	char parent[PATH_MAX];

	snprintf(parent, sizeof(parent), "%s%s%s/vmm", root, *ctrl ? "/" : "", ctrl);
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
	const char *root = j->cg_root ? j->cg_root : CG_ROOT;
	char v[64], pid[24], p[PATH_MAX];
	struct stat st;
	int r;

	(void)nr_vcpus;
	if (!j->cpu_milli && !j->mem_bytes && !j->pids)
		return 0;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	snprintf(p, sizeof(p), "%s/cgroup.controllers", root);
	if (stat(p, &st) == 0) {
		/* v2: one hierarchy; the parent hands its children the controllers. */
		snprintf(p, sizeof(p), "%s/vmm", root);
		if ((r = write_file(root, "cgroup.subtree_control", "+cpu +memory +pids")) ||
		    (r = make_group(j->cgroup[0], sizeof(j->cgroup[0]), root, "", name)) ||
		    (r = write_file(p, "cgroup.subtree_control", "+cpu +memory +pids")))
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
		if ((r = make_group(j->cgroup[0], sizeof(j->cgroup[0]), root, "cpu", name)) ||
		    (r = write_file(j->cgroup[0], "cpu.cfs_period_us", "100000")) ||
		    (r = write_file(j->cgroup[0], "cpu.cfs_quota_us", v)) ||
		    (r = write_file(j->cgroup[0], "cgroup.procs", pid)))
			goto fail;
	}
	if (j->mem_bytes) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)j->mem_bytes);
		if ((r = make_group(j->cgroup[1], sizeof(j->cgroup[1]), root, "memory", name)) ||
		    (r = write_file(j->cgroup[1], "memory.limit_in_bytes", v)) ||
		    (r = write_file(j->cgroup[1], "cgroup.procs", pid)))
			goto fail;
	}
	if (j->pids) {
		snprintf(v, sizeof(v), "%u", j->pids);
		if ((r = make_group(j->cgroup[2], sizeof(j->cgroup[2]), root, "pids", name)) ||
		    (r = write_file(j->cgroup[2], "pids.max", v)) ||
		    (r = write_file(j->cgroup[2], "cgroup.procs", pid)))
			goto fail;
	}
	return 0;
fail:
	log_err("jail: cannot set up the sandbox's cgroup under %s: %s", root, strerror(-r));
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

/* src at the same path under root. A bind that follows takes what is
 * mounted below src along and, src being shared (or a slave) on the host,
 * is a slave: what the host mounts there later appears in the jail,
 * nothing the jail mounts goes out. Any other bind is private. */
static int bind_one(const char *root, const char *src, int flags)
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
	if (mount(src, dst, NULL, MS_BIND | (flags & JAIL_FOLLOW ? MS_REC : 0), NULL) < 0)
		return -errno;
	if (!(flags & JAIL_FOLLOW) && mount(NULL, dst, NULL, MS_PRIVATE, NULL) < 0)
		return -errno;
	if (!S_ISCHR(st.st_mode))
		ro |= MS_NODEV;
	if (!(flags & JAIL_RW) && mount(NULL, dst, NULL, ro, NULL) < 0)
		return -errno;
	return 0;
}

/* lchown of dir's entries (one level) and, with self, of dir. */
static void chown_entries(const char *dir, uid_t uid, gid_t gid, int self, int sockets_only)
{
	char p[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d = opendir(dir);

	if (self && lchown(dir, uid, gid) < 0)
		log_warn("jail: cannot hand %s over: %s", dir, strerror(errno));
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p))
			continue;
		if (sockets_only && (lstat(p, &st) < 0 || !S_ISSOCK(st.st_mode)))
			continue;
		/* The egress proxy's control socket stays root's: whoever owns
		 * it sets the sandbox's egress policy (cli/egress/egress_proxy.c). */
		if (sockets_only && !strcmp(e->d_name, EGRESS_CTL_SOCK))
			continue;
		if (lchown(p, uid, gid) < 0)
			log_debug("jail: chown %s: %s", p, strerror(errno));
	}
	closedir(d);
}

/* What the jailed VMM writes once it runs goes in folder/jail-rw, the
 * only place its uid owns: its exit record, `synced`, console.log and
 * its rotation, snapshots on their way out. It connects to the sockets
 * in the folder (guest-initiated vsock connections), so those are its
 * too; it can reach them (0711) but neither list nor change the folder:
 * pid, process, token, config.json and jail-id are root's CLI's to trust. */
static int hand_over_rw(const char *folder, uid_t uid, gid_t gid)
{
	char rw[PATH_MAX];

	if (snprintf(rw, sizeof(rw), "%s/%s", folder, SANDBOX_JAIL_RW) >= (int)sizeof(rw))
		return -ENAMETOOLONG;
	if (chmod(folder, 0711) < 0) {
		log_err("jail: chmod %s: %s", folder, strerror(errno));
		return -errno;
	}
	if (uid == 0) /* root's already; the relay's lock guards the folder */
		return 0;
	chown_entries(rw, uid, gid, 1, 0);
	chown_entries(folder, uid, gid, 0, 1);
	return 0;
}

/* A `.snapshot-*` staged in jail-rw: `vmm snapshot` of a jailed sandbox
 * is still moving it out. */
static int snapshot_staged(const char *rw)
{
	struct dirent *e;
	DIR *d = opendir(rw);
	int found = 0;

	if (!d)
		return 0;
	while (!found && (e = readdir(d)))
		found = !strncmp(e->d_name, ".snapshot-", 10);
	closedir(d);
	return found;
}

/* What the unprivileged VMM cannot remove itself: the sandbox folder in
 * the root-owned state directory, and the cgroups. */
static void clean_up(const struct jail *j, const char *folder)
{
	char rw[PATH_MAX], p[PATH_MAX + 32];
	struct stat st;
	int i, r;

	snprintf(rw, sizeof(rw), "%s/%s", folder, SANDBOX_JAIL_RW);
	/* `vmm snapshot --stop` of a jailed sandbox may still be moving the
	 * snapshot out of the folder: give it a moment. */
	for (i = 0; i < 50 && snapshot_staged(rw); i++)
		usleep(100000);
	snprintf(p, sizeof(p), "%s/exit", rw);
	if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
		/* A detached sandbox's record stays for `vmm ls`/`logs`/`rm`:
		 * what the VMM wrote goes back to root, its process is gone. */
		static const char *const gone[] = { "process", "pid", "control.sock", "vsock.sock" };
		unsigned k;

		for (k = 0; k < sizeof(gone) / sizeof(gone[0]); k++) {
			snprintf(p, sizeof(p), "%s/%s", folder, gone[k]);
			unlink(p);
		}
		chown_entries(rw, 0, 0, 1, 0);
		chown_entries(folder, 0, 0, 0, 1);
	} else if ((r = cli_rm_tree(folder)) && r != -ENOENT) {
		log_warn("jail: cannot remove %s: %s", folder, strerror(-r));
	}
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
}

static void close_from(int lowest)
{
	if (syscall(SYS_close_range, (unsigned)lowest, ~0u, 0) < 0) {
		int fd;

		for (fd = lowest; fd < 65536; fd++)
			close(fd);
	}
}

/* The signals the relay passes on (and waits on, with SIGCHLD). */
static void relay_signals(sigset_t *s)
{
	sigemptyset(s);
	sigaddset(s, SIGCHLD);
	sigaddset(s, SIGTERM);
	sigaddset(s, SIGINT);
	sigaddset(s, SIGHUP);
	sigaddset(s, SIGQUIT);
}

/* The lock's child, given 10 s (a mount over a hung network share could
 * hold it, and the VMM waits for the answer); killed after. 0 or -errno. */
static int wait_lock(pid_t pid)
{
	int st, i;
	pid_t w;

	for (i = 0; i < 1000; i++) {
		if ((w = waitpid(pid, &st, WNOHANG)) == pid)
			return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
		if (w < 0 && errno != EINTR)
			return -errno;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	log_err("jail: locking the jail took over 10 s; given up");
	return -ETIMEDOUT;
}

/* The lock a jail with uid 0 asks for once its VM is built (jail_drop):
 * in a child (setns into a mount namespace needs a process of one
 * thread) that joins the VMM's mount namespace as root, the folder's
 * bind remounted read-only in place (every descriptor the VMM holds on
 * it, such as the vsock device's, turns read-only too; jail-rw and a
 * clone's disk copies are mounts of their own: run_jail_setup). The VMM,
 * root but without CAP_SYS_ADMIN, cannot undo it. 0 or -errno. */
static int lock_jail(pid_t vmm, const char *folder)
{
	char ns[64], rt[64];
	int fd, root, st;
	pid_t pid;

	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)vmm);
	snprintf(rt, sizeof(rt), "/proc/%d/root", (int)vmm);
	if ((fd = open(ns, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	/* The VMM's root, its jail's: setns puts the caller at the root of
	 * the namespace's tree, which under a host that chroots its init
	 * (a switch_root) is not the root the VMM pivoted to. */
	if ((root = open(rt, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		st = -errno;
		close(fd);
		return st;
	}
	pid = fork();
	if (pid == 0) {
		const char *step = NULL;
		int e;

		if (setns(fd, CLONE_NEWNS) < 0 || fchdir(root) < 0 || chroot(".") < 0)
			step = "joining its mount namespace";
		else if (mount(NULL, folder, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			       NULL) < 0)
			step = "making the folder read-only";
		e = step ? errno : 0;
		if (step)
			log_err("jail: locking %s: %s: %s", folder, step, strerror(e));
		_exit(e);
	}
	close(fd);
	close(root);
	if (pid < 0)
		return -errno;
	return wait_lock(pid);
}

/* One request on the relay's line (a byte), answered with the lock's
 * result (an int); the line closes after it. */
static void relay_answer(int *lk, pid_t vmm, const char *folder)
{
	char c;
	int r;

	if (read(*lk, &c, 1) == 1) {
		r = lock_jail(vmm, folder);
		if (write(*lk, &r, sizeof(r)) != (ssize_t)sizeof(r))
			log_debug("jail: the VMM did not wait for its lock");
	}
	close(*lk);
	*lk = -1;
}

/* A stop signal passed on; 1 once the VMM is gone (its status in *st). */
static int relay_signal(const struct signalfd_siginfo *si, pid_t vmm, int *st)
{
	int done = 0, w_st;
	pid_t w;

	if (si->ssi_signo != SIGCHLD) {
		if (si->ssi_code != SI_KERNEL) /* a terminal's signal went to the VMM too */
			kill(vmm, (int)si->ssi_signo);
		return 0;
	}
	/* The VMM, or the egress companion (reaped, not waited for: it
	 * ends with the VMM). */
	while ((w = waitpid(-1, &w_st, WNOHANG)) > 0)
		if (w == vmm) {
			*st = w_st;
			done = 1;
		}
	return done || (w < 0 && errno == ECHILD);
}

/* Outside the jail, as root, holding nothing of the VMM's (its TAPs,
 * console, sockets: every descriptor above stderr is closed but the line
 * `lk` a jail with uid 0 asks its lock on): pass stop signals on to the
 * VMM (`kill`, a supervisor; a terminal's Ctrl-C reaches the VMM itself,
 * being in the same process group), lock the jail when asked, wait for
 * the VMM, clean up, exit with its status. */
static void __attribute__((noreturn)) relay(const struct jail *j, const char *folder, pid_t vmm, int lk)
{
	struct signalfd_siginfo si;
	struct pollfd pf[2];
	sigset_t s;
	int st = 0, sfd;

	if (lk >= 0 && lk != STDERR_FILENO + 1) {
		dup2(lk, STDERR_FILENO + 1);
		lk = STDERR_FILENO + 1;
	}
	close_from(STDERR_FILENO + 1 + (lk >= 0));
	prctl(PR_SET_NAME, "vmm-jail", 0, 0, 0);
	relay_signals(&s);
	if ((sfd = signalfd(-1, &s, SFD_CLOEXEC)) < 0) {
		log_err("jail: the relay cannot take signals: %s", strerror(errno));
		kill(vmm, SIGKILL);
		waitpid(vmm, &st, 0);
		clean_up(j, folder);
		_exit(1);
	}
	for (;;) {
		pf[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = lk, .events = POLLIN };
		if (poll(pf, lk >= 0 ? 2 : 1, -1) < 0)
			continue;
		if (lk >= 0 && pf[1].revents)
			relay_answer(&lk, vmm, folder);
		if ((pf[0].revents & POLLIN) && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
		    relay_signal(&si, vmm, &st))
			break;
	}
	clean_up(j, folder);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* The VMM is its PID namespace's init: the kernel delivers a signal to
 * such a process only if it has a handler for it (or blocks it, as vm_run
 * does). Until vm_run takes the stop signals over, they end it as they
 * would end any process. */
static void init_stop(int sig)
{
	_exit(128 + sig);
}

/* A jail with uid 0, still one thread (every thread made later copies
 * this one's credentials): no groups; exec never grants capabilities nor
 * raises ambient ones (securebits, locked); the bounding set and the
 * permitted and effective sets down to `keep`; no_new_privs. 0 or -errno. */
static int keep_root_caps(unsigned long long keep)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	int cap;

	if (setgroups(0, NULL) < 0 ||
	    prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
					     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
		  0, 0, 0) < 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -errno;
	for (cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (!(keep & (1ull << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	memset(d, 0, sizeof(d));
	d[0].permitted = d[0].effective = (uint32_t)keep;
	d[1].permitted = d[1].effective = (uint32_t)(keep >> 32);
	if (syscall(SYS_capset, &h, d) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

int jail_enter(struct jail *j, const char *root, const char *folder)
{
	static const int stops[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };
	char old[PATH_MAX];
	sigset_t relay_sigs, mask;
	struct sigaction sa;
	int hp[2], lk[2] = { -1, -1 }, r, net;
	unsigned i;
	pid_t pid;

	if (pipe2(hp, O_CLOEXEC) < 0)
		return -errno;
	/* uid 0: the line jail_drop asks the relay for its lock on */
	if ((j->uid == 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lk) < 0) ||
	    unshare(CLONE_NEWPID) < 0) {
		r = -errno;
		log_err("jail: %s: %s", lk[0] < 0 && j->uid == 0 ? "socketpair" : "unshare (PID namespace)",
			strerror(errno));
		close(hp[0]);
		close(hp[1]);
		if (lk[0] >= 0) {
			close(lk[0]);
			close(lk[1]);
		}
		return r;
	}
	/* Blocked before the fork, so the relay misses none. */
	relay_signals(&relay_sigs);
	sigprocmask(SIG_BLOCK, &relay_sigs, &mask);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r = -errno;
		log_err("jail: fork into the PID namespace: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &mask, NULL);
		close(hp[0]);
		close(hp[1]);
		if (lk[0] >= 0) {
			close(lk[0]);
			close(lk[1]);
		}
		return r;
	}
	if (pid > 0) {
		/* Its pid and start time as the host sees them: the sandbox's
		 * record, so that only this process is ever taken for it. */
		struct { pid_t pid; unsigned long long start; } who = { pid, 0 };
		char state;

		if (cli_proc_stat(pid, &state, &who.start) ||
		    write(hp[1], &who, sizeof(who)) != (ssize_t)sizeof(who))
			kill(pid, SIGKILL);
		relay(j, folder, pid, lk[0]);
	}
	/* The VMM, pid 1 in its namespace. */
	close(hp[1]);
	if (lk[0] >= 0)
		close(lk[0]);
	j->lock_fd = lk[1];
	{
		struct { pid_t pid; unsigned long long start; } who;

		r = (int)read(hp[0], &who, sizeof(who));
		close(hp[0]);
		if (r != (int)sizeof(who))
			_exit(1);
		j->host_pid = who.pid;
		j->host_start = who.start;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = init_stop;
	for (i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		sigaction(stops[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &mask, NULL);
	/* The relay gone (killed): so is the VMM. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		log_debug("jail: PR_SET_PDEATHSIG: %s", strerror(errno));
	net = j->netns ? 0 : CLONE_NEWNET;
	if (unshare(CLONE_NEWNS | net | CLONE_NEWIPC | CLONE_NEWUTS) < 0) {
		r = -errno;
		log_err("jail: unshare (mount, network, IPC, UTS namespaces): %s", strerror(errno));
		return r;
	}
	/* Nothing we mount from here on leaks back to the host (a slave
	 * only receives); the binds that do not follow the host's mounts
	 * are made private (bind_one). */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		goto err;
	if (mkdir(root, 0755) < 0 && errno != EEXIST)
		goto err;
	if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755") < 0 ||
	    mount(NULL, root, NULL, MS_PRIVATE, NULL) < 0)
		goto err;
	for (i = 0; i < j->nr_paths; i++) {
		r = bind_one(root, j->paths[i].path, j->paths[i].flags);
		if (r) {
			log_err("jail: cannot bind %s into the jail: %s", j->paths[i].path, strerror(-r));
			return r;
		}
	}
	/* The VMM's own PID namespace's /proc (only it and its children),
	 * without the kernel's other files (subset=pid): the FUSE server keeps
	 * a handle on /proc/self/fd to reopen its O_PATH inodes. With uid 0
	 * it stays, read-only (nothing in it written, and a magic link still
	 * leads to its file's own mount): a socket path too long for an
	 * address (a Kubernetes pod's folder) is reached through
	 * /proc/self/fd/N/NAME (vmm/base/unixsock.h). A whole procfs (before
	 * Linux 5.8) only for an unprivileged VMM: root's would reach
	 * /proc/sys and /proc/sysrq-trigger, which only the effective uid
	 * guards. */
	if (j->proc || j->uid == 0) {
		unsigned long fl = MS_NOSUID | MS_NODEV | MS_NOEXEC | (j->uid == 0 ? MS_RDONLY : 0);

		snprintf(old, sizeof(old), "%s/proc", root);
		if (mkdir(old, 0555) < 0 ||
		    (mount("proc", old, "proc", fl, "subset=pid,hidepid=invisible") < 0 &&
		     (j->uid == 0 || mount("proc", old, "proc", fl, NULL) < 0)))
			goto err;
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
	if (j->uid == 0 && (r = keep_root_caps(jail_root_caps(j)))) {
		log_err("jail: cannot give up root's other capabilities: %s", strerror(-r));
		return r;
	}
	return 0;
err:
	r = -errno;
	log_err("jail: cannot build the jail's root at %s: %s", root, strerror(errno));
	return r;
}

int jail_join_netns(const struct jail *j)
{
	char p[PATH_MAX];
	int fd, r = 0;

	if (!j->netns)
		return 0;
	if (strchr(j->netns, '/'))
		snprintf(p, sizeof(p), "%s", j->netns);
	else if (!*j->netns || !strcmp(j->netns, ".") || !strcmp(j->netns, "..") ||
		 snprintf(p, sizeof(p), "%s/%s", NETNS_DIR, j->netns) >= (int)sizeof(p))
		return -EINVAL;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		r = -errno;
		log_err("--jail-netns %s: %s (make it with `ip netns add NAME`)", p, strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	return r;
}

static int pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* The number on the first line of dir/name, or 0. */
static unsigned read_number(const char *dir, const char *name)
{
	char p[PATH_MAX + 16], buf[32];
	unsigned v = 0;
	FILE *f;

	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p) || !(f = fopen(p, "re")))
		return 0;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%u", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* The id a live jailed sandbox in `dir` holds, or 0. */
static unsigned held_id(const char *dir)
{
	return pid_alive((pid_t)read_number(dir, "pid")) ? read_number(dir, "jail-id") : 0;
}

int jail_pick_id(struct jail *j, const char *state_root, const char *folder)
{
	unsigned char *used = NULL;
	char p[PATH_MAX + 16], text[24];
	struct dirent *e;
	unsigned k, id;
	int lock, r = 0;
	DIR *d;

	snprintf(p, sizeof(p), "%s/.jail-ids", state_root);
	lock = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		r = -errno;
		log_err("jail: %s: %s", p, strerror(errno));
		goto out;
	}
	if (!j->uid_given) {
		used = calloc(JAIL_ID_COUNT / 8, 1);
		d = opendir(state_root);
		if (!used || !d) {
			r = used ? -errno : -ENOMEM;
			if (d)
				closedir(d);
			goto out;
		}
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.' || snprintf(p, sizeof(p), "%s/%s", state_root, e->d_name) >= (int)sizeof(p))
				continue;
			id = held_id(p);
			if (id >= JAIL_DEFAULT_ID && id - JAIL_DEFAULT_ID < JAIL_ID_COUNT)
				used[(id - JAIL_DEFAULT_ID) / 8] |= (unsigned char)(1u << ((id - JAIL_DEFAULT_ID) % 8));
		}
		closedir(d);
		for (k = 0; k < JAIL_ID_COUNT && (used[k / 8] & (1u << (k % 8))); k++) {
		}
		if (k == JAIL_ID_COUNT) {
			r = -EAGAIN;
			log_err("jail: all %u jail ids are held by running sandboxes", JAIL_ID_COUNT);
			goto out;
		}
		j->uid = (uid_t)(JAIL_DEFAULT_ID + k);
	}
	if (!j->gid_given)
		j->gid = (gid_t)j->uid;
	snprintf(text, sizeof(text), "%u\n", (unsigned)j->uid);
	r = write_file_as(folder, "jail-id", text, O_CREAT | O_TRUNC);
out:
	free(used);
	if (lock >= 0)
		close(lock); /* the lock goes with it */
	return r;
}

/* Rlimits, no_new_privs, no bounding set, then the ids (every thread:
 * glibc applies them process-wide), which clears every capability. With
 * uid 0 the VMM gave up the rest in jail_enter (keep_root_caps), and
 * RLIMIT_NPROC would count every process of the host's root: the pids
 * cgroup is the limit there. */
static int drop_privileges(const struct jail *j)
{
	struct rlimit files = { 4096, 4096 }, procs = { 1024, 1024 }, core = { 0, 0 };
	int cap;

	if (setrlimit(RLIMIT_NOFILE, &files) < 0 || setrlimit(RLIMIT_CORE, &core) < 0)
		return -errno;
	if (j->uid == 0)
		return 0;
	if (setrlimit(RLIMIT_NPROC, &procs) < 0)
		return -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	for (cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	/* A uid change away from 0 (real, effective and saved) clears the
	 * permitted and effective capabilities of each thread. */
	if (setgroups(0, NULL) < 0 || setresgid(j->gid, j->gid, j->gid) < 0 ||
	    setresuid(j->uid, j->uid, j->uid) < 0)
		return -errno;
	return 0;
}

int jail_companion(struct jail *j, int (*prepare)(void *), int (*run)(void *), void *arg)
{
	int up[2], life[2], r;
	char c;
	pid_t pid;

	/* It would stay root on the host's network (run_opts refuses
	 * --egress-policy with --jail-uid 0). */
	if (j->uid == 0)
		return -EPERM;
	if (pipe2(up, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(life, O_CLOEXEC) < 0) {
		r = -errno;
		close(up[0]);
		close(up[1]);
		return r;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(up[0]);
		close(up[1]);
		close(life[0]);
		close(life[1]);
		return r;
	}
	if (pid == 0) {
		close(up[0]);
		close(life[1]);
		prctl(PR_SET_NAME, "vmm-companion", 0, 0, 0);
		/* A terminal's signals are for the VMM; this one ends with it. */
		signal(SIGINT, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		r = prepare(arg);
		if (!r && (r = drop_privileges(j)))
			log_err("jail: the companion process cannot drop privileges: %s", strerror(-r));
		if (!r)
			r = run(arg);
		c = r ? 1 : 0;
		if (write(up[1], &c, 1) != 1 || r)
			_exit(1);
		close(up[1]);
		/* Its threads work until the VMM and the relay are gone (the
		 * write end closes with the last of them). */
		for (;;) {
			ssize_t n = read(life[0], &c, 1);

			if (n == 0 || (n < 0 && errno != EINTR))
				_exit(0);
		}
	}
	close(up[1]);
	close(life[0]);
	/* life[1] stays open, unwritten, in the VMM (and its relay). */
	r = (int)read(up[0], &c, 1);
	close(up[0]);
	if (r != 1 || c) {
		close(life[1]);
		waitpid(pid, NULL, 0);
		return -EIO;
	}
	return 0;
}

/* uid 0: the relay locks the jail (lock_jail); its answer. 0 or -errno. */
static int ask_lock(struct jail *j)
{
	char c = 1;
	int r = -EIO;

	if (j->lock_fd < 0 || write(j->lock_fd, &c, 1) != 1 || read(j->lock_fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		r = -EIO;
	if (j->lock_fd >= 0)
		close(j->lock_fd);
	j->lock_fd = -1;
	return r;
}

int jail_drop(struct jail *j, const char *folder)
{
	int r;

	if (folder && (r = hand_over_rw(folder, j->uid, j->gid)))
		return r;
	if (j->uid == 0) {
		if ((r = ask_lock(j))) {
			log_err("jail: the relay cannot make the sandbox's folder read-only in the jail: %s",
				strerror(-r));
			return r;
		}
	} else if (j->proc && umount2("/proc", MNT_DETACH) < 0) {
		/* Open handles (the FUSE server's) keep it; no path reaches it. */
		r = -errno;
		log_err("jail: cannot detach /proc: %s", strerror(errno));
		return r;
	}
	if ((r = drop_privileges(j))) {
		log_err("jail: cannot drop privileges: %s", strerror(-r));
		return r;
	}
	/* The credential change cleared it: the relay gone, the VMM goes. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	return 0;
}
