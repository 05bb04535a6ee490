/* Starting a command for the sandbox API: environment, pipes or a pty,
 * a new session, default signal dispositions; an exec failure is reported
 * back through a close-on-exec pipe. */
#include "guest-init/ops.h"
#include "guest-init/guest_egress.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* extra[]: the egress proxy's variables (NULL-terminated), before the
 * request's own, which override them. */
static void default_env(const struct api_request *r, const char *const *extra, char **env, unsigned max)
{
	static const char *const base[] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LANG=C.UTF-8",
	};
	unsigned n = 0, i, j;

	for (i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		size_t k = strchr(base[i], '=') - base[i] + 1;
		int overridden = 0;

		for (j = 0; j < r->envc; j++)
			if (!strncmp(r->env[j], base[i], k))
				overridden = 1;
		if (!overridden)
			env[n++] = (char *)base[i];
	}
	if (r->pty)
		env[n++] = "TERM=xterm-256color";
	for (i = 0; extra && extra[i]; i++) {
		size_t k = strchr(extra[i], '=') - extra[i] + 1;
		int overridden = 0;

		for (j = 0; j < r->envc; j++)
			if (!strncmp(r->env[j], extra[i], k))
				overridden = 1;
		if (!overridden)
			env[n++] = (char *)extra[i];
	}
	for (j = 0; j < r->envc && n + 1 < max; j++)
		env[n++] = (char *)r->env[j];
	env[n] = NULL;
}

/* A container's process (vmm oci) gets its own environment only, as runc
 * gives it (TERM with a pty if it has none). */
static void container_env(const struct api_request *r, char **env, unsigned max)
{
	unsigned n = 0, j;
	int term = 0;

	for (j = 0; j < r->envc && n + 2 < max; j++) {
		env[n++] = (char *)r->env[j];
		term |= !strncmp(r->env[j], "TERM=", 5);
	}
	if (r->pty && !term)
		env[n++] = "TERM=xterm";
	env[n] = NULL;
}

/* A pod's container (docs/kubernetes.md, "What a pod is"): into its
 * cgroup (cgroup v2: writing "0" to cgroup.procs moves the writer), then
 * into its mount namespace: a new one (its init: the mounts made for it
 * under its root are copied, and none it makes leaks back to the guest),
 * or the one a path names (/proc/PID/ns/mnt of its init: an exec).
 * -1 with errno. */
static int pod_setup(const struct api_request *r)
{
	int fd;

	if (r->cgroup) {
		char p[PATH_MAX];
		ssize_t n;

		if (snprintf(p, sizeof(p), "%s/cgroup.procs", r->cgroup) >= (int)sizeof(p))
			return errno = ENAMETOOLONG, -1;
		if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
			return -1;
		n = write(fd, "0", 1);
		close(fd);
		if (n != 1)
			return -1;
	}
	if (!r->mntns)
		return 0;
	if (!strcmp(r->mntns, "new"))
		return unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ? -1 : 0;
	if ((fd = open(r->mntns, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (setns(fd, CLONE_NEWNS) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* A container's init in a PID namespace (its own or its pod's) and a
 * mount namespace of its own: a proc filesystem shows the processes of
 * the namespace its mounter was in, and the one its mount script made
 * (from the guest's) shows all, so ROOT/proc is mounted again from here,
 * as runc's init mounts the container's proc (runtime-spec config.md,
 * "Mounts"). A root with no proc directory: nothing. */
static int pidns_proc(const struct api_request *r)
{
	char p[PATH_MAX];
	struct stat st;

	if (!r->pidns || !r->root || !r->mntns || strcmp(r->mntns, "new"))
		return 0;
	if (snprintf(p, sizeof(p), "%s/proc", r->root) >= (int)sizeof(p))
		return errno = ENAMETOOLONG, -1;
	if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	(void)umount2(p, MNT_DETACH);
	return mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/* The fork of a command: into a new PID namespace (pidns "new": clone
 * with CLONE_NEWPID makes the child its PID 1), or one named by path
 * (setns applies to the children made after it: this fork only, then
 * ours again), or plain. guest-init is single-threaded, so the raw clone
 * is a fork. The pid as this namespace sees it, or -1 with errno. */
static pid_t spawn_fork(const struct api_request *r)
{
	int fd, self, e;
	pid_t pid;

	if (!r->pidns)
		return fork();
	if (!strcmp(r->pidns, "new"))
		return (pid_t)syscall(SYS_clone, SIGCHLD | CLONE_NEWPID, NULL, NULL, NULL, NULL);
	if ((self = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if ((fd = open(r->pidns, O_RDONLY | O_CLOEXEC)) < 0 || setns(fd, CLONE_NEWPID) < 0) {
		e = errno;
		if (fd >= 0)
			close(fd);
		close(self);
		return errno = e, -1;
	}
	close(fd);
	pid = fork();
	e = errno;
	if (pid != 0)
		(void)setns(self, CLONE_NEWPID); /* our own active namespace: allowed */
	close(self);
	errno = e;
	return pid;
}

/* In the child, before the working directory: the container's root, its
 * limits, groups, gid and uid, no_new_privs; execvpe searches the PATH
 * of its environment, so that is the container's. -1 with errno. */
static int container_setup(const struct api_request *r)
{
	unsigned i;

	if (pod_setup(r) < 0 || pidns_proc(r) < 0)
		return -1;
	if (r->root) {
		const char *path = NULL;

		for (i = 0; i < r->envc; i++)
			if (!strncmp(r->env[i], "PATH=", 5))
				path = r->env[i] + 5;
		if (setenv("PATH", path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1) ||
		    chroot(r->root) < 0 || chdir("/") < 0)
			return -1;
	}
	for (i = 0; i < r->nrlimits; i++) {
		struct rlimit rl = {
			.rlim_cur = r->rlimits[i].soft == UINT64_MAX ? RLIM_INFINITY : r->rlimits[i].soft,
			.rlim_max = r->rlimits[i].hard == UINT64_MAX ? RLIM_INFINITY : r->rlimits[i].hard,
		};

		if (setrlimit(r->rlimits[i].res, &rl) < 0)
			return -1;
	}
	if (r->ngroups || r->gid >= 0) {
		gid_t g[API_MAX_GROUPS];

		for (i = 0; i < r->ngroups; i++)
			g[i] = r->groups[i];
		if (setgroups(r->ngroups, g) < 0)
			return -1;
	}
	if (r->gid >= 0 && setgid((gid_t)r->gid) < 0)
		return -1;
	if (r->uid >= 0 && setuid((uid_t)r->uid) < 0)
		return -1;
	if (r->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return 0;
}

/* The child becomes user (USER, UID, USER:GROUP, UID:GID; names from the
 * guest's /etc/passwd and /etc/group, as Docker's USER): its groups, gid,
 * uid. A UID without a passwd entry and no group runs with group 0, as
 * Docker does. 0 or an errno. */
static int spawn_become(const char *user)
{
	char name[66], *grp, *end;
	struct passwd *pw = NULL;
	uid_t uid;
	gid_t gid = 0;

	snprintf(name, sizeof(name), "%s", user);
	if ((grp = strchr(name, ':')))
		*grp++ = '\0';
	errno = 0;
	uid = (uid_t)strtoul(name, &end, 10);
	if (!name[0] || *end) {
		if (!(pw = getpwnam(name)))
			return ENOENT;
		uid = pw->pw_uid;
		gid = pw->pw_gid;
	} else if ((pw = getpwuid(uid))) {
		gid = pw->pw_gid;
	}
	if (grp && grp[0]) {
		gid = (gid_t)strtoul(grp, &end, 10);
		if (*end) {
			struct group *g = getgrnam(grp);

			if (!g)
				return ENOENT;
			gid = g->gr_gid;
		}
	}
	if (pw && !grp ? initgroups(pw->pw_name, gid) < 0 : setgroups(0, NULL) < 0)
		return errno;
	if (setgid(gid) < 0 || setuid(uid) < 0)
		return errno;
	return 0;
}

const char *spawn_error_message(const struct api_request *r, const struct exec_io *io, int err, char *buf,
				size_t len)
{
	if (io->cwd_failed == 2) {
		snprintf(buf, len, "user %s: %s", r->user, err == ENOENT ? "not in the sandbox's /etc/passwd or /etc/group" : strerror(err));
		return buf;
	}
	if (io->cwd_failed) {
		snprintf(buf, len, "working directory %s: %s", r->cwd ? r->cwd : "/root", strerror(err));
		return buf;
	}
	return err == ENOENT ? "command not found" : NULL;
}

/* A pty from the container's own devpts (ROOT/dev/pts, or ROOT/dev/ptmx,
 * which the kernel ties to the devpts at ROOT/dev/pts): the process's
 * terminal is then a /dev/pts/N it can see, so tty(1) and ttyname(3)
 * find it (from the guest's /dev/pts, outside its root, they say "not a
 * tty"). The master, with the slave in *slave; -1 when the root has no
 * devpts of its own (the caller uses the guest's). */
static int container_pty(const char *root, int *slave)
{
	static const char *const ptmx[] = { "/dev/pts/ptmx", "/dev/ptmx" };
	char path[PATH_MAX];
	unsigned i;
	int m = -1, n;

	*slave = -1;
	for (i = 0; i < sizeof(ptmx) / sizeof(ptmx[0]) && m < 0; i++) {
		if (snprintf(path, sizeof(path), "%s%s", root, ptmx[i]) >= (int)sizeof(path))
			return -1;
		m = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	}
	if (m < 0)
		return -1;
	if (unlockpt(m) == 0) {
		/* TIOCGPTPEER (Linux 4.13): the peer of this very master,
		 * with no path that could name another instance's */
		*slave = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (*slave < 0 && ioctl(m, TIOCGPTN, &n) == 0 &&
		    snprintf(path, sizeof(path), "%s/dev/pts/%d", root, n) < (int)sizeof(path))
			*slave = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	}
	if (*slave < 0) {
		close(m);
		return -1;
	}
	return m;
}

pid_t spawn_command(const struct api_request *r, const char *const *extra, struct exec_io *io, int *err)
{
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, inp[2] = { -1, -1 }, ep[2];
	char *env[API_MAX_ENV + 24];
	int master = -1, slave = -1;
	pid_t pid;
	ssize_t n;
	int e = 0;

	io->cwd_failed = 0;
	if (r->root)
		container_env(r, env, sizeof(env) / sizeof(env[0]));
	else
		default_env(r, extra, env, sizeof(env) / sizeof(env[0]));
	if (pipe2(ep, O_CLOEXEC) < 0) {
		*err = errno;
		return -1;
	}
	if (r->pty) {
		struct winsize ws = { .ws_row = (unsigned short)r->rows, .ws_col = (unsigned short)r->cols };

		master = r->root ? container_pty(r->root, &slave) : -1;
		if (master < 0)
			master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (master < 0 || (slave < 0 && (grantpt(master) || unlockpt(master) ||
						 (slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0))) {
			*err = errno;
			goto fail;
		}
		ioctl(master, TIOCSWINSZ, &ws);
	} else if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
		   (r->stdin_stream && pipe2(inp, O_CLOEXEC) < 0)) {
		*err = errno;
		goto fail;
	}
	pid = spawn_fork(r);
	if (pid < 0) {
		*err = errno;
		goto fail;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* A clean slate: dispositions ignored anywhere up the chain
		 * would stick across exec (and a shell cannot trap them). */
		for (int sig = 1; sig < 65; sig++)
			signal(sig, SIG_DFL);
		setsid();
		if (r->pty) {
			ioctl(slave, TIOCSCTTY, 0);
			dup2(slave, 0);
			dup2(slave, 1);
			dup2(slave, 2);
		} else {
			int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);

			dup2(r->stdin_stream ? inp[0] : nul, 0);
			dup2(outp[1], 1);
			dup2(errp[1], 2);
			if (nul > 2)
				close(nul); /* not left open in the command */
		}
		int why[2] = { 2, 0 }; /* {2: the user, 1: the working directory, 0: exec; errno} */

		/* The container's root, limits and ids first (vmm oci), then
		 * the image's user (vmm exec -u, USER): both are "the user"
		 * step for the error the caller gets. */
		if (container_setup(r) < 0)
			goto child_fail;
		if (r->user && (errno = spawn_become(r->user)) != 0)
			goto child_fail;
		why[0] = 1;
		if (r->cwd && chdir(r->cwd) < 0)
			goto child_fail;
		if (!r->cwd && chdir("/root") < 0 && chdir("/") < 0)
			goto child_fail;
		why[0] = 0;
		execvpe(r->argv[0], (char *const *)r->argv, env);
child_fail:
		why[1] = errno;
		n = write(ep[1], why, sizeof(why));
		(void)n;
		_exit(127);
	}
	close(ep[1]);
	/* The exec succeeded iff the CLOEXEC pipe closes without a word. */
	{
		int why[2];

		n = read(ep[0], why, sizeof(why));
		e = why[1];
		io->cwd_failed = n == sizeof(why) ? why[0] : 0;
	}
	close(ep[0]);
	if (n == 2 * sizeof(int)) {
		waitpid(pid, NULL, 0);
		*err = e;
		ep[0] = ep[1] = -1;
		goto fail_noep;
	}
	if (r->pty) {
		close(slave);
		io->out = master;
		io->err = -1;
		io->in = master;
		io->pty = 1;
	} else {
		close(outp[1]);
		close(errp[1]);
		io->out = outp[0];
		io->err = errp[0];
		io->pty = 0;
		io->in = -1;
		if (r->stdin_stream) {
			close(inp[0]);
			io->in = inp[1];
			fcntl(io->in, F_SETFL, O_NONBLOCK);
		}
	}
	return pid;
fail:
	close(ep[0]);
	close(ep[1]);
fail_noep:
	if (master >= 0)
		close(master);
	if (slave >= 0)
		close(slave);
	if (outp[0] >= 0) {
		close(outp[0]);
		close(outp[1]);
	}
	if (errp[0] >= 0) {
		close(errp[0]);
		close(errp[1]);
	}
	if (inp[0] >= 0) {
		close(inp[0]);
		close(inp[1]);
	}
	return -1;
}

/* The egress proxy's guest side (guest-init/guest_egress.h) listens on
 * 127.0.0.1:port: commands get the variables HTTP clients look for, and,
 * when the proxy intercepts HTTPS, where the bundle with its CA is
 * (OpenSSL, Python requests, curl, git; Node adds NODE_EXTRA_CA_CERTS to
 * its own). */
void spawn_proxy_env(unsigned port, char buf[EGRESS_ENV][96], const char *vars[EGRESS_ENV + 1])
{
	static const char *const names[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" };
	static const char *const bundle[] = { "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
					      "GIT_SSL_CAINFO" };
	unsigned i, n = 0;

	for (i = 0; i < 4; i++) {
		snprintf(buf[n], 96, "%s=http://127.0.0.1:%u", names[i], port);
		vars[n] = buf[n];
		n++;
	}
	snprintf(buf[n], 96, "NO_PROXY=localhost,127.0.0.1");
	vars[n] = buf[n];
	n++;
	if (access(GEGRESS_BUNDLE, R_OK) == 0) {
		for (i = 0; i < 4; i++) {
			snprintf(buf[n], 96, "%s=%s", bundle[i], GEGRESS_BUNDLE);
			vars[n] = buf[n];
			n++;
		}
		snprintf(buf[n], 96, "NODE_EXTRA_CA_CERTS=%s", GEGRESS_CA);
		vars[n] = buf[n];
		n++;
	}
	vars[n] = NULL;
}
