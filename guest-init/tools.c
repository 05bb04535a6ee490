/* nohup, flock and script for images whose busybox lacks them: guest-init
 * runs one when a link to it bears its name (tools.h). Each follows the
 * behaviour users know: POSIX nohup (XCU "nohup"), util-linux flock(1) and
 * script(1) for the options agents' scripts use. */
#include "guest-init/tools.h"
#include "vmm/wire/api.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

const char *const tools_names[] = { GUEST_TOOL_NAMES, NULL };

tool_fn *tools_lookup(const char *argv0)
{
	static tool_fn *const fns[] = { tool_nohup, tool_flock, tool_script }; /* GUEST_TOOL_NAMES' order */
	const char *base;
	unsigned i;

	_Static_assert(sizeof(fns) / sizeof(fns[0]) == sizeof((const char *[]){ GUEST_TOOL_NAMES }) / sizeof(char *),
		       "one function per name");
	if (!argv0)
		return NULL;
	base = strrchr(argv0, '/');
	base = base ? base + 1 : argv0;
	for (i = 0; tools_names[i]; i++)
		if (!strcmp(base, tools_names[i]))
			return fns[i];
	return NULL;
}

/* A command's status as a shell reports it: 128 + N for signal N. */
static int shell_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

/* execvp's failure as POSIX asks of nohup and env: 127 not found, 126
 * found but not run. Prints "NAME: CMD: why" first. */
static int exec_failed(const char *name, const char *cmd)
{
	int e = errno;

	dprintf(2, "%s: %s: %s\n", name, cmd, strerror(e));
	return e == ENOENT ? 127 : 126;
}

/* ---- nohup ---- */

int tool_nohup(int argc, char **argv)
{
	int i = 1;

	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc) {
		dprintf(2, "usage: nohup COMMAND [ARG]...\n");
		return 127;
	}
	/* A terminal that goes away takes its input too. */
	if (isatty(0)) {
		int nul = open("/dev/null", O_RDONLY);

		if (nul >= 0 && nul != 0) {
			dup2(nul, 0);
			close(nul);
		}
	}
	if (isatty(1)) {
		char path[PATH_MAX];
		const char *home = getenv("HOME");
		int fd = open("nohup.out", O_WRONLY | O_CREAT | O_APPEND, 0600);

		snprintf(path, sizeof(path), "nohup.out");
		if (fd < 0 && home && snprintf(path, sizeof(path), "%s/nohup.out", home) < (int)sizeof(path))
			fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd < 0) {
			dprintf(2, "nohup: cannot open nohup.out: %s\n", strerror(errno));
			return 127;
		}
		dprintf(2, "nohup: appending output to '%s'\n", path);
		dup2(fd, 1);
		if (fd != 1)
			close(fd);
	}
	if (isatty(2))
		dup2(1, 2);
	signal(SIGHUP, SIG_IGN);
	execvp(argv[i], argv + i);
	return exec_failed("nohup", argv[i]);
}

/* ---- flock ---- */

static int parse_err(char *err, unsigned len, const char *fmt, const char *what)
{
	snprintf(err, len, fmt, what);
	return -1;
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* One option of flock (long, or one letter of a cluster); *i moves past
 * an argument it takes. 0, or -1 with err. */
static int flock_opt(struct flock_args *a, const char *o, int argc, char **argv, int *i, int last, char *err,
		     unsigned len)
{
	char *end;

	if (!strcmp(o, "s") || !strcmp(o, "-shared")) {
		a->op = LOCK_SH;
	} else if (!strcmp(o, "x") || !strcmp(o, "e") || !strcmp(o, "-exclusive")) {
		a->op = LOCK_EX;
	} else if (!strcmp(o, "u") || !strcmp(o, "-unlock")) {
		a->op = LOCK_UN;
	} else if (!strcmp(o, "n") || !strcmp(o, "-nonblock") || !strcmp(o, "-nb")) {
		a->nonblock = 1;
	} else if (!strcmp(o, "o") || !strcmp(o, "-close")) {
		a->close_fd = 1;
	} else if (!strcmp(o, "w") || !strcmp(o, "-timeout") || !strcmp(o, "-wait") || !strcmp(o, "E") ||
		   !strcmp(o, "-conflict-exit-code")) {
		int is_w = o[0] == 'w' || !strcmp(o, "-timeout") || !strcmp(o, "-wait");
		const char *v;

		if (!last || *i + 1 >= argc)
			return parse_err(err, len, "flock: option -%s needs a value", o);
		v = argv[++*i];
		errno = 0;
		if (is_w) {
			a->timeout = strtod(v, &end);
			if (errno || end == v || *end || a->timeout < 0 || a->timeout > 1e9)
				return parse_err(err, len, "flock: bad timeout '%s'", v);
			if (a->timeout == 0)
				a->nonblock = 1;
		} else {
			long c = strtol(v, &end, 10);

			if (errno || end == v || *end || c < 0 || c > 255)
				return parse_err(err, len, "flock: bad exit code '%s' (0..255)", v);
			a->conflict_code = (int)c;
		}
	} else {
		return parse_err(err, len, "flock: unknown option -%s", o);
	}
	return 0;
}

int flock_parse(int argc, char **argv, struct flock_args *a, char *err, unsigned errlen)
{
	int i;

	memset(a, 0, sizeof(*a));
	a->op = LOCK_EX;
	a->timeout = -1;
	a->conflict_code = 1;
	a->fd = -1;
	for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		const char *s = argv[i] + 1;

		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (s[0] == '-') {
			const char *eq = strchr(s, '=');

			if (eq) { /* --timeout=5 */
				char name[32], *val[2] = { NULL, (char *)eq + 1 };
				int j = 0;

				snprintf(name, sizeof(name), "%.*s", (int)(eq - s), s);
				if (flock_opt(a, name, 2, val, &j, 1, err, errlen))
					return -1;
			} else if (flock_opt(a, s, argc, argv, &i, 1, err, errlen)) {
				return -1;
			}
			continue;
		}
		for (; *s; s++) {
			char one[2] = { *s, '\0' }, *val[2] = { NULL, (char *)s + 1 };
			int j = 0;

			if ((*s == 'w' || *s == 'E') && s[1]) { /* -w5 */
				if (flock_opt(a, one, 2, val, &j, 1, err, errlen))
					return -1;
				break;
			}
			if (flock_opt(a, one, argc, argv, &i, s[1] == '\0', err, errlen))
				return -1;
		}
	}
	if (i >= argc)
		return parse_err(err, errlen, "%s", "usage: flock [-s|-x|-u] [-n] [-w SECS] [-o] FILE|DIR CMD [ARG]... "
						      "| FILE|DIR -c CMD | FD");
	if (i + 1 == argc) {
		if (!all_digits(argv[i]))
			return parse_err(err, errlen, "flock: %s: a command is needed with a file", argv[i]);
		a->fd = atoi(argv[i]);
		return 0;
	}
	a->path = argv[i++];
	if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--command")) {
		if (i + 2 != argc)
			return parse_err(err, errlen, "%s", "flock: -c takes exactly one command string");
		a->shell_cmd = argv[i + 1];
		return 0;
	}
	a->cmd = argv + i;
	return 0;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* The lock on fd, waiting at most a->timeout seconds. 0, 1 when it is
 * busy (or the wait ran out), -1 on another error (errno). */
static int flock_take(int fd, const struct flock_args *a)
{
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct itimerval it = { 0 };
	int r;

	if (a->nonblock || a->op == LOCK_UN) {
		r = flock(fd, a->op | (a->nonblock ? LOCK_NB : 0));
		return r == 0 ? 0 : errno == EWOULDBLOCK ? 1 : -1;
	}
	if (a->timeout > 0) {
		sigemptyset(&sa.sa_mask); /* no SA_RESTART: the alarm ends the wait */
		sigaction(SIGALRM, &sa, &old);
		it.it_value.tv_sec = (time_t)a->timeout;
		it.it_value.tv_usec = (suseconds_t)((a->timeout - (double)it.it_value.tv_sec) * 1e6);
		if (!it.it_value.tv_sec && !it.it_value.tv_usec)
			it.it_value.tv_usec = 1;
		setitimer(ITIMER_REAL, &it, NULL);
	}
	r = flock(fd, a->op);
	if (r < 0)
		r = errno == EINTR && a->timeout > 0 ? 1 : -1;
	if (a->timeout > 0) {
		int e = errno;

		memset(&it, 0, sizeof(it));
		setitimer(ITIMER_REAL, &it, NULL);
		sigaction(SIGALRM, &old, NULL);
		errno = e;
	}
	return r;
}

/* FILE (created if missing) or DIR, opened to lock. */
static int flock_open(const struct flock_args *a)
{
	int cloexec = a->close_fd ? O_CLOEXEC : 0;
	int fd = open(a->path, O_RDONLY | O_NOCTTY | O_CREAT | cloexec, 0666);

	if (fd < 0 && (errno == EISDIR || errno == EACCES || errno == EROFS))
		fd = open(a->path, O_RDONLY | O_NOCTTY | cloexec);
	return fd;
}

int tool_flock(int argc, char **argv)
{
	struct flock_args a;
	char err[256];
	pid_t p;
	int fd, r, st;

	if (flock_parse(argc, argv, &a, err, sizeof(err))) {
		dprintf(2, "%s\n", err);
		return 64; /* EX_USAGE, as util-linux */
	}
	fd = a.fd >= 0 ? a.fd : flock_open(&a);
	if (fd < 0) {
		dprintf(2, "flock: cannot open %s: %s\n", a.path, strerror(errno));
		return 66; /* EX_NOINPUT */
	}
	r = flock_take(fd, &a);
	if (r == 1)
		return a.conflict_code;
	if (r < 0) {
		dprintf(2, "flock: %s: %s\n", a.path ? a.path : argv[argc - 1], strerror(errno));
		return 1;
	}
	if (a.fd >= 0)
		return 0; /* the caller's descriptor keeps the lock */
	/* The lock stays with this process (and, without -o, with the
	 * command's copy of the descriptor) until the command ends. */
	p = fork();
	if (p < 0) {
		dprintf(2, "flock: fork: %s\n", strerror(errno));
		return 71; /* EX_OSERR */
	}
	if (p == 0) {
		if (a.shell_cmd) {
			execl("/bin/sh", "sh", "-c", a.shell_cmd, (char *)NULL);
			_exit(exec_failed("flock", "/bin/sh"));
		}
		execvp(a.cmd[0], a.cmd);
		_exit(exec_failed("flock", a.cmd[0]));
	}
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	return shell_status(st);
}

/* ---- script ---- */

int script_parse(int argc, char **argv, struct script_args *a, char *err, unsigned errlen)
{
	int i, only_args = 0;

	memset(a, 0, sizeof(*a));
	for (i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (only_args || s[0] != '-' || !s[1]) {
			if (a->file)
				return parse_err(err, errlen, "script: unexpected argument '%s'", s);
			a->file = s;
			continue;
		}
		if (!strcmp(s, "--")) {
			only_args = 1;
			continue;
		}
		if (!strcmp(s, "--quiet")) {
			a->quiet = 1;
		} else if (!strcmp(s, "--return")) {
			a->ret = 1;
		} else if (!strcmp(s, "--append")) {
			a->append = 1;
		} else if (!strcmp(s, "--flush")) {
			a->flush = 1;
		} else if (!strcmp(s, "--command")) {
			if (++i >= argc)
				return parse_err(err, errlen, "%s", "script: --command needs a value");
			a->cmd = argv[i];
		} else if (s[1] == '-') {
			return parse_err(err, errlen, "script: unknown option %s", s);
		} else {
			for (s++; *s; s++) {
				if (*s == 'q')
					a->quiet = 1;
				else if (*s == 'e')
					a->ret = 1;
				else if (*s == 'a')
					a->append = 1;
				else if (*s == 'f')
					a->flush = 1;
				else if (*s == 'c') {
					/* -cCMD or -c CMD */
					if (s[1]) {
						a->cmd = s + 1;
					} else if (++i < argc) {
						a->cmd = argv[i];
					} else {
						return parse_err(err, errlen, "%s", "script: -c needs a value");
					}
					break;
				} else {
					char one[2] = { *s, '\0' };

					return parse_err(err, errlen, "script: unknown option -%s", one);
				}
			}
		}
	}
	if (!a->file)
		a->file = "typescript";
	return 0;
}

/* The terminal this script runs in (stdin), put in raw mode while the
 * command has its own; restored by term_restore. */
struct term {
	int is_tty;
	struct termios saved;
	struct winsize ws;
};

static void term_raw(struct term *t)
{
	struct termios raw;

	t->is_tty = isatty(0) && tcgetattr(0, &t->saved) == 0;
	if (!t->is_tty)
		return;
	if (ioctl(0, TIOCGWINSZ, &t->ws) < 0)
		memset(&t->ws, 0, sizeof(t->ws));
	raw = t->saved;
	cfmakeraw(&raw);
	tcsetattr(0, TCSANOW, &raw);
}

static void term_restore(const struct term *t)
{
	if (t->is_tty)
		tcsetattr(0, TCSADRAIN, &t->saved);
}

/* The command's side: a new session on the pty's slave, which becomes
 * its controlling terminal and stdio. Does not return. */
static void __attribute__((noreturn)) script_child(int master, const struct term *t, const struct script_args *a)
{
	const char *shell = getenv("SHELL");
	sigset_t none;
	int slave;

	if (!shell || !shell[0])
		shell = "/bin/sh";
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	slave = open(ptsname(master), O_RDWR);
	close(master);
	if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
		_exit(exec_failed("script", "the terminal"));
	if (t->is_tty) {
		tcsetattr(slave, TCSANOW, &t->saved);
		ioctl(slave, TIOCSWINSZ, &t->ws);
	}
	dup2(slave, 0);
	dup2(slave, 1);
	dup2(slave, 2);
	if (slave > 2)
		close(slave);
	if (a->cmd)
		execl(shell, shell, "-c", a->cmd, (char *)NULL);
	else
		execl(shell, shell, "-i", (char *)NULL);
	_exit(exec_failed("script", shell));
}

static void stamp(int fd, const char *what, const char *extra)
{
	char when[64];
	time_t now = time(NULL);
	struct tm tm;

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S%z", localtime_r(&now, &tm));
	dprintf(fd, "Script %s on %s%s\n", what, when, extra);
}

/* Copies what is readable from master to stdout and the typescript.
 * 0: more may come, 1: the terminal closed (every slave end gone). */
static int script_drain(int master, int log)
{
	char buf[4096];

	for (;;) {
		ssize_t n = read(master, buf, sizeof(buf));

		if (n > 0) {
			if (write_full(1, buf, (size_t)n) < 0 && errno == EPIPE)
				return 1;
			if (log >= 0)
				(void)write_full(log, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && errno == EAGAIN ? 0 : 1; /* EIO: the slave side closed */
	}
}

/* Input to the command: stdin to the master; at stdin's end, an EOF for
 * the command's line discipline (^D) unless stdin was a terminal. 0 while
 * stdin is open. */
static int script_input(int master, const struct term *t)
{
	char buf[4096];
	ssize_t n = read(0, buf, sizeof(buf));

	if (n > 0) {
		(void)write_full(master, buf, (size_t)n);
		return 0;
	}
	if (n < 0 && errno == EINTR)
		return 0;
	if (!t->is_tty) {
		char eot = 4;

		(void)write_full(master, &eot, 1);
	}
	return 1;
}

/* Until the command has exited and its output is read. Its status. */
static int script_relay(int master, int log, int sfd, pid_t child, const struct term *t)
{
	int in_open = 1, exited = 0, closed = 0, st = 0;

	while (!exited) {
		struct pollfd p[3] = { { .fd = closed ? -1 : master, .events = POLLIN },
				       { .fd = sfd, .events = POLLIN },
				       { .fd = in_open ? 0 : -1, .events = POLLIN } };

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			closed = script_drain(master, log);
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR))
			in_open = !script_input(master, t);
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			(void)!read(sfd, &si, sizeof(si));
		}
		/* Once the terminal closed, only the exit is left to wait for. */
		if (waitpid(child, &st, closed ? 0 : WNOHANG) == child)
			exited = 1;
	}
	/* What the command wrote before it exited; a background process
	 * that keeps the terminal open is not waited for. */
	if (!closed)
		script_drain(master, log);
	if (!exited)
		waitpid(child, &st, 0);
	return st;
}

int tool_script(int argc, char **argv)
{
	struct script_args a;
	struct term t;
	char err[256], extra[64];
	sigset_t chld, old;
	int master, log, sfd, st;
	pid_t child;

	if (script_parse(argc, argv, &a, err, sizeof(err))) {
		dprintf(2, "%s\nusage: script [-q] [-e] [-a] [-f] [-c CMD] [FILE]\n", err);
		return 1;
	}
	log = open(a.file, O_WRONLY | O_CREAT | O_CLOEXEC | (a.append ? O_APPEND : O_TRUNC), 0666);
	if (log < 0) {
		dprintf(2, "script: cannot open %s: %s\n", a.file, strerror(errno));
		return 1;
	}
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) || unlockpt(master)) {
		dprintf(2, "script: no pseudo-terminal: %s\n", strerror(errno));
		close(log);
		return 1;
	}
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (!a.quiet) {
		dprintf(1, "Script started, output log file is '%s'.\n", a.file);
		stamp(log, "started", "");
	}
	term_raw(&t);
	child = fork();
	if (child == 0)
		script_child(master, &t, &a);
	if (child < 0) {
		term_restore(&t);
		dprintf(2, "script: fork: %s\n", strerror(errno));
		return 1;
	}
	fcntl(master, F_SETFL, O_NONBLOCK);
	st = script_relay(master, log, sfd, child, &t);
	term_restore(&t);
	if (!a.quiet) {
		snprintf(extra, sizeof(extra), " [COMMAND_EXIT_CODE=\"%d\"]", shell_status(st));
		stamp(log, "done", extra);
		dprintf(1, "Script done.\n");
	}
	close(log);
	close(master);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return a.ret ? shell_status(st) : 0;
}
