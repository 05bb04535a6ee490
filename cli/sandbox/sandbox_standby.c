/* Standby on the CLI side: resume in place, wake, the keeper (standby.h). */
#include "cli/sandbox/sandbox_standby.h"
#include "cli/sandbox/api_client.h"
#include "cli/util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmm/base/log.h"
#include "vmm/vm_snapshot.h"
#include "vmm/vm_standby.h"

#define KEEPER_MAX_FDS 17 /* every published port and the control socket */
#define STANDBY_MAX_ARGS 64

int standby_record_args(const struct sandbox *sb, char *const *args, unsigned n)
{
	char buf[8192];
	size_t off = 0;
	unsigned i;

	for (i = 0; i < n; i++) {
		size_t l = strlen(args[i]) + 1;

		if (off + l > sizeof(buf))
			return -E2BIG;
		memcpy(buf + off, args[i], l);
		off += l;
	}
	return sandbox_write_file(sb->dir, STANDBY_ARGS, buf, off);
}

int standby_listen_fd(const char *spec)
{
	const char *env = getenv(STANDBY_FDS_ENV), *p;
	size_t l = strlen(spec);

	for (p = env; p && *p;) {
		char *end;
		long fd = strtol(p, &end, 10);
		const char *e;

		if (end == p || *end != '=')
			return -1;
		e = strchr(end + 1, ';');
		if (!e)
			e = end + 1 + strlen(end + 1);
		if ((size_t)(e - end - 1) == l && !strncmp(end + 1, spec, l) && fd > 2 &&
		    fcntl((int)fd, F_SETFD, FD_CLOEXEC) == 0)
			return (int)fd;
		p = *e ? e + 1 : e;
	}
	return -1;
}

void standby_listen_release(void)
{
	const char *env = getenv(STANDBY_FDS_ENV), *p;

	for (p = env; p && *p;) {
		char *end;
		long fd = strtol(p, &end, 10);
		const char *e;
		int fl;

		if (end == p || *end != '=')
			break;
		e = strchr(end + 1, ';');
		if (!e)
			e = end + 1 + strlen(end + 1);
		/* claimed ones were made close-on-exec by standby_listen_fd */
		if (fd > 2 && fd < INT_MAX && (fl = fcntl((int)fd, F_GETFD)) >= 0 && !(fl & FD_CLOEXEC))
			close((int)fd);
		p = *e ? e + 1 : e;
	}
	unsetenv(STANDBY_FDS_ENV);
}

int standby_keeper_spawn(const struct sandbox *sb, const int *fds, const char *const *spec, unsigned n)
{
	char env[2048] = STANDBY_FDS_ENV "=", exe[PATH_MAX];
	char vmm_pid[24];
	char *argv[] = { "vmm", "__keeper", (char *)sb->name, vmm_pid, NULL };
	char *envp[256];
	unsigned i, ne = 0;
	pid_t pid;

	if (n > KEEPER_MAX_FDS)
		return -E2BIG;
	snprintf(vmm_pid, sizeof(vmm_pid), "%d", (int)getpid());
	for (i = 0; i < n; i++) {
		size_t o = strlen(env);

		snprintf(env + o, sizeof(env) - o, "%s%u=%s", i ? ";" : "", 3 + i, spec[i]);
	}
	/* Our environment (the state directory, the runtime directory),
	 * with this VMM's sockets in place of any it inherited. */
	envp[ne++] = env;
	for (i = 0; environ[i] && ne < 255; i++)
		if (strncmp(environ[i], STANDBY_FDS_ENV "=", sizeof(STANDBY_FDS_ENV)))
			envp[ne++] = environ[i];
	envp[ne] = NULL;
	{
		ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		if (l <= 0)
			return -errno;
		exe[l] = '\0';
	}
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* Only what the keeper needs: its listening sockets at 3..,
		 * nothing else of the VMM's (a disk's fd would keep its lock). */
		int moved[KEEPER_MAX_FDS];
		sigset_t none;

		for (i = 0; i < n; i++) {
			moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
			if (moved[i] < 0)
				_exit(127);
		}
		for (i = 0; i < n; i++)
			if (dup2(moved[i], (int)(3 + i)) < 0)
				_exit(127);
		syscall(SYS_close_range, 3 + n, ~0u, 0);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		execve(exe, argv, envp);
		_exit(127);
	}
	return 0;
}

long long standby_age(const struct sandbox *sb)
{
	char p[PATH_MAX + 32], buf[32];

	snprintf(p, sizeof(p), "%s/" STANDBY_SINCE, sb->dir);
	if (cli_read_text(p, buf, sizeof(buf)))
		return -1;
	return (long long)time(NULL) - atoll(buf);
}

/* The lock file, opened without following a link. */
static int open_lock(const struct sandbox *sb, int create)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof(p), "%s/" STANDBY_LOCK, sb->dir);
	return open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
}

int standby_restore(const struct sandbox *sb)
{
	char buf[8192];
	char *args[STANDBY_MAX_ARGS + 12], state[PATH_MAX + 16], p[PATH_MAX + 32], err[512];
	int nargs = 0, fd, st;
	ssize_t n = 0;
	size_t off = 0;
	pid_t pid;

	snprintf(state, sizeof(state), "%s/" STANDBY_DIR, sb->dir);
	snprintf(p, sizeof(p), "%s/" STANDBY_ARGS, sb->dir);
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	args[nargs++] = "vmm";
	args[nargs++] = "restore";
	args[nargs++] = state;
	args[nargs++] = "-d";
	args[nargs++] = "--in-place";
	args[nargs++] = "--name";
	args[nargs++] = (char *)sb->name;
	while (off < (size_t)n && nargs < STANDBY_MAX_ARGS + 7) {
		args[nargs++] = buf + off;
		off += strlen(buf + off) + 1;
	}
	args[nargs] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* It prints the name: not on the waker's stdout (vmm exec's). */
		int dn = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (dn >= 0)
			dup2(dn, STDOUT_FILENO);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		snprintf(p, sizeof(p), "%s/" STANDBY_ERROR, sb->dir);
		unlink(p);
		return 0;
	}
	snprintf(err, sizeof(err), "the resume failed (exit status %d; vmm logs --vmm %s says why)\n",
		 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), sb->name);
	(void)sandbox_write_file(sb->dir, STANDBY_ERROR, err, strlen(err));
	return -EIO;
}

/* The keeper's pid if it is alive and is the one recorded, else 0. */
static pid_t keeper_pid(const struct sandbox *sb)
{
	char p[PATH_MAX + 32], buf[64], state;
	unsigned long long start, now;
	long pid;

	snprintf(p, sizeof(p), "%s/" STANDBY_KEEPER, sb->dir);
	if (cli_read_text(p, buf, sizeof(buf)) || sscanf(buf, "%ld %llu", &pid, &start) != 2 || pid <= 1)
		return 0;
	if (cli_proc_stat((pid_t)pid, &state, &now) || now != start || state == 'Z')
		return 0;
	return (pid_t)pid;
}

/* Whether another waker holds the wake lock now: a restore under way,
 * during which the sandbox reads as dead (its standby state consumed,
 * the new VMM's pid not yet recorded) or starting (its API not yet
 * answering). */
static int wake_under_way(const struct sandbox *sb)
{
	int fd = open_lock(sb, 0), busy;

	if (fd < 0)
		return 0; /* never on standby */
	busy = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return busy;
}

int standby_wake(const char *name)
{
	struct sandbox_status st;
	pid_t kp;
	int fd, r = 0, i, waiting;

	if ((r = sandbox_status(name, &st)))
		return r;
	waiting = st.state != SB_STANDBY;
	if (waiting && !wake_under_way(&st.sb))
		return 0;
	fd = open_lock(&st.sb, 1);
	if (fd < 0)
		return -errno;
	if (!waiting)
		log_info("waking %s from standby", name);
	if (flock(fd, LOCK_EX) < 0) {
		r = -errno;
		goto out;
	}
	/* Another waker may have restored it while we waited: shared. */
	if ((r = sandbox_status(name, &st)) || st.state != SB_STANDBY)
		goto out;
	kp = keeper_pid(&st.sb);
	if (kp && kill(kp, SIGUSR1) == 0) {
		/* The keeper holds the published ports: it restores (with our
		 * lock standing for it) and exits once the API answers. */
		for (i = 0; i < 3000 && keeper_pid(&st.sb) == kp; i++) {
			const struct timespec t = { 0, 100000000 };

			nanosleep(&t, NULL);
		}
		if ((r = sandbox_status(name, &st)) == 0 && st.state == SB_STANDBY)
			r = -EIO;
	} else {
		r = standby_restore(&st.sb);
	}
	if (r && r != -EIO)
		log_err("%s: cannot wake it from standby: %s", name, strerror(-r));
	else if (r)
		log_err("%s: cannot wake it from standby (vmm inspect %s, vmm logs --vmm %s)", name, name,
			name);
out:
	close(fd);
	return r;
}

/* ---- the keeper ---- */

static void keeper_usage(FILE *out)
{
	fprintf(out, "usage: vmm __keeper NAME [VMM_PID] (internal: started by a sandbox's VMM)\n");
}

/* Accepts and closes what waits on listening socket fd: every socket of
 * ours, or with `env` (STANDBY_FDS_ENV) the control socket only. */
static void drain(int last, const char *env)
{
	int fd;

	for (fd = env ? 3 : last; fd <= last; fd++) {
		char key[16];
		int c, fl;
		size_t kl;
		const char *hit;

		kl = (size_t)snprintf(key, sizeof(key), "%d=control", fd);
		hit = env ? strstr(env, key) : NULL;
		if (env && (!hit || (hit != env && hit[-1] != ';') || (hit[kl] && hit[kl] != ';')))
			continue;
		fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
			continue;
		while ((c = accept4(fd, NULL, NULL, SOCK_CLOEXEC)) >= 0 || errno == EINTR)
			if (c >= 0)
				close(c);
		fcntl(fd, F_SETFL, fl); /* shared with the VMM that takes it over */
	}
}

/* Removes the sandbox once a TTL ran out. */
static int keeper_expire(struct sandbox_status *st, const char *why)
{
	log_info("sandbox %s: %s: removed", st->sb.name, why);
	sandbox_delete(&st->sb);
	return 0;
}

int standby_keeper_main(int argc, char **argv)
{
	struct pollfd p[KEEPER_MAX_FDS + 1];
	struct sandbox_status st;
	long long idle_ttl = 0;
	unsigned n = 0, i;
	pid_t vmm;
	int pidfd, sfd, woken = 0, lock_fd = -1;
	sigset_t sigs;
	char buf[64];

	if (argc < 2 || argc > 3 || argv[1][0] == '-') {
		keeper_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	vmm = argc == 3 ? (pid_t)atoi(argv[2]) : 0;
	/* Our listening sockets are 3.. (standby_keeper_spawn). */
	for (i = 3; i < 3 + KEEPER_MAX_FDS && fcntl((int)i, F_GETFD) >= 0; i++)
		n++;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGUSR1);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	/* The VMM that started us (gone already: ESRCH, nothing to wait for). */
	pidfd = vmm > 0 ? (int)syscall(SYS_pidfd_open, vmm, 0) : -1;
	if (sfd < 0 || (pidfd < 0 && vmm > 0 && errno != ESRCH) || sandbox_status(argv[1], &st))
		return CLI_EXIT_ERROR;
	{
		char state;
		unsigned long long start = 0;
		char pth[PATH_MAX + 32];
		int fd;

		(void)cli_proc_stat(getpid(), &state, &start);
		snprintf(buf, sizeof(buf), "%d %llu\n", (int)getpid(), start);
		snprintf(pth, sizeof(pth), "%s/" STANDBY_KEEPER, st.sb.dir);
		fd = open(pth, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			if (write(fd, buf, strlen(buf)) < 0) {
				/* then no one signals us: ports still wake it */
			}
			close(fd);
		}
	}
	/* The VMM that started us: wait for it to exit. */
	p[0].fd = pidfd;
	p[0].events = POLLIN;
	while (pidfd >= 0 && poll(p, 1, -1) < 0 && errno == EINTR) {
	}
	/* The pidfd says "exited" while the VMM is still a zombie: its
	 * process record then still reads as running. Look again until it is
	 * reaped (or has said standby), for up to 5 s. */
	for (i = 0; i < 100; i++) {
		char zs = 0;
		unsigned long long zstart;

		if (sandbox_status(argv[1], &st) == 0 && st.state == SB_STANDBY)
			break;
		if (vmm <= 0 || cli_proc_stat(vmm, &zs, &zstart) < 0 || zs != 'Z')
			break; /* reaped (or not ours to wait for): what it says now stands */
		usleep(50000);
	}
	if (sandbox_status(argv[1], &st) || st.state != SB_STANDBY)
		return 0; /* it stopped, or runs on: nothing to keep */
	{
		char pth[PATH_MAX + 32], t[32];

		snprintf(pth, sizeof(pth), "%s/" STANDBY_ARGS, st.sb.dir);
		/* --idle-ttl from the recorded options */
		{
			char a[8192];
			int fd = open(pth, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			ssize_t len = fd >= 0 ? read(fd, a, sizeof(a) - 1) : -1;
			size_t off = 0;

			if (fd >= 0)
				close(fd);
			while (len > 0 && off < (size_t)len) {
				if (!strcmp(a + off, "--idle-ttl") && off + strlen(a + off) + 1 < (size_t)len)
					(void)cli_parse_duration(a + off + strlen(a + off) + 1, &idle_ttl);
				off += strlen(a + off) + 1;
			}
		}
		(void)t;
	}
	/* A connection that came while the VMM was on its way out (vmm
	 * suspend itself looks at the control socket until the VMM is gone)
	 * is no request to wake: drop what waits on the control socket. */
	if (n)
		drain(3 + (int)n - 1, getenv(STANDBY_FDS_ENV));
	p[0].fd = sfd;
	p[0].events = POLLIN;
	for (i = 0; i < n; i++) {
		p[1 + i].fd = (int)(3 + i);
		p[1 + i].events = POLLIN;
	}
again:
	woken = 0;
	while (!woken) {
		long long now = (long long)time(NULL), age = standby_age(&st.sb);
		int r;

		if (sandbox_status(argv[1], &st) || st.state != SB_STANDBY)
			return 0; /* removed, stopped or woken by someone else */
		if (st.expires && st.expires <= now)
			return keeper_expire(&st, "its time to live (--ttl) ran out on standby");
		if (idle_ttl && age >= idle_ttl)
			return keeper_expire(&st, "on standby for --idle-ttl");
		r = poll(p, 1 + n, 1000);
		if (r < 0 && errno != EINTR)
			return CLI_EXIT_ERROR;
		if (r <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				woken = 2; /* a waker holds the lock for us */
		}
		for (i = 0; i < n && !woken; i++)
			if (p[1 + i].revents & POLLIN)
				woken = 1;
	}
	if (woken == 1) {
		/* A connection: take the lock, or a waker has it (and will
		 * signal us): then wait for its signal. */
		int fd = lock_fd = open_lock(&st.sb, 1);

		if (fd < 0)
			return CLI_EXIT_ERROR;
		while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			struct signalfd_siginfo si;
			struct pollfd q = { .fd = sfd, .events = POLLIN };

			if (poll(&q, 1, 100) == 1 && read(sfd, &si, sizeof(si)) == sizeof(si))
				break;
		}
		/* the lock (or the waker's) is held until we exit */
		if (sandbox_status(argv[1], &st) || st.state != SB_STANDBY)
			return 0;
	}
	/* Our sockets go to the restored VMM (STANDBY_FDS_ENV is ours). */
	for (i = 0; i < n; i++)
		fcntl((int)(3 + i), F_SETFD, 0);
	log_info("sandbox %s: waking it (%s)", st.sb.name, woken == 1 ? "a connection" : "a request");
	if (standby_restore(&st.sb) == 0)
		return 0;
	/* It stays on standby, its ports listening; the connections that
	 * asked are refused (closed), or they would wake it again at once. */
	for (i = 0; i < n; i++) {
		fcntl((int)(3 + i), F_SETFD, FD_CLOEXEC);
		drain((int)(3 + i), NULL);
	}
	if (lock_fd >= 0)
		close(lock_fd);
	lock_fd = -1;
	goto again;
}

/* Here, not in sandbox.c: reaching a sandbox on standby wakes it
 * (standby_wake), and the sandbox record stays below standby. */
int sandbox_api_addr(const char *arg, int token_given, struct sandbox *sb, struct sandbox_addr *a)
{
	struct sandbox_status st;
	int r = sandbox_lookup(sb, arg);

	if (r)
		return r;
	/* A named sandbox that cannot answer: say why at once (a paused one's
	 * vsock device would hold the connection, unanswered, forever). */
	if (sb->control[0] && sandbox_status(arg, &st) == 0) {
		if (st.state == SB_PAUSED) {
			log_err("%s is paused (vmm resume %s)", arg, arg);
			return -EAGAIN;
		}
		/* On standby: wake it, transparently (the caller waits). Dead
		 * or starting may be another waker's restore under way: wait
		 * for it, then look again (two concurrent execs once found
		 * the sandbox dead, mid-restore). */
		if (st.state == SB_STANDBY ||
		    ((st.state == SB_DEAD || st.state == SB_STARTING) && wake_under_way(&st.sb))) {
			if ((r = standby_wake(arg)))
				return r;
			if ((r = sandbox_status(arg, &st)))
				return r;
		}
		if (st.state == SB_EXITED || st.state == SB_DEAD || st.state == SB_CREATED) {
			if (st.state == SB_CREATED)
				log_err("%s is not running (created: vmm start %s)", arg, arg);
			else
				log_err("%s is not running (%s)", arg, sandbox_state_name(st.state));
			return -ENOTCONN;
		}
	}
	a->uds = sb->vsock;
	/* A named sandbox's own token, unless --token said otherwise. */
	if (sb->control[0] && !token_given)
		a->token = sb->token;
	return 0;
}
