/* seccomp: every class's program assembles into valid BPF, and the kernel
 * enforces it: each case forks a child that installs a filter and makes a
 * call, and the parent checks the child's fate (exit status 159 and the
 * report line for a forbidden call, a clean exit for an allowed one). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "vmm/seccomp.h"

static void programs_assemble(void **state)
{
	struct sock_filter prog[SC_MAX_INSNS];
	unsigned c;

	(void)state;
	for (c = 0; c < SC_NR_CLASSES; c++) {
		int n = sc_build((enum sc_class)c, prog, SC_MAX_INSNS), i;

		assert_true(n > 8);
		assert_true(n <= BPF_MAXINSNS);
		/* Every jump lands inside the program; it ends in a return. */
		for (i = 0; i < n; i++) {
			if (BPF_CLASS(prog[i].code) == BPF_JMP && BPF_OP(prog[i].code) != BPF_JA) {
				assert_true(i + 1 + prog[i].jt < n);
				assert_true(i + 1 + prog[i].jf < n);
			}
		}
		assert_int_equal(BPF_CLASS(prog[n - 1].code), BPF_RET);
		assert_string_not_equal(sc_class_name((enum sc_class)c), "unknown");
	}
	assert_int_equal(sc_build(SC_NR_CLASSES, prog, SC_MAX_INSNS), -EINVAL);
	assert_int_equal(sc_build(SC_MAIN, prog, 16), -E2BIG);
	assert_string_equal(sc_syscall_name(__NR_personality), "personality");
	assert_null(sc_syscall_name(100000));
}

enum action { DO_PERSONALITY, DO_WRITE, DO_TTY_IOCTL, DO_INET_SOCKET, DO_UNIX_SOCKET, DO_FORK,
	      DO_THREAD, DO_EPOLL_CTL, DO_EXECVE, DO_PACKET_SOCKET, DO_INET_CONNECT, DO_UNIX_CONNECT,
	      DO_GETADDRINFO, DO_OPEN_READ, DO_OPEN_WRITE, DO_MARKER, DO_WINSIZE, DO_KILL_USR1,
	      DO_KILL_TERM, DO_DPRINTF, DO_IDS };

static void *thread_fn(void *arg)
{
	return arg;
}

/* In the child: install class c, do `what`, exit 0 if it returned. */
static void child(enum sc_class c, enum action what)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = 0 };
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	char marker[64];
	char *const argv[] = { (char *)"true", NULL };
	struct winsize ws;
	struct termios t;
	socklen_t len = sizeof(in);
	pthread_t th;
	int fd, lfd = -1, ep = epoll_create1(0), efd = eventfd(0, 0);

	/* Before the filter: a listener to connect to, a name for the file. */
	if (what == DO_INET_CONNECT) {
		in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&in, sizeof(in)) || listen(lfd, 1) ||
		    getsockname(lfd, (struct sockaddr *)&in, &len))
			_exit(4);
	}
	if (what == DO_UNIX_CONNECT) {
		/* abstract: nothing left behind */
		snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1, "test_seccomp.%d", (int)getpid());
		lfd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&un, sizeof(un)) || listen(lfd, 1))
			_exit(4);
	}
	/* The parent removes it (marker_path). */
	snprintf(marker, sizeof(marker), "/tmp/test_seccomp.%d", (int)getpid());
	if (ep < 0 || efd < 0 || sc_install(c))
		_exit(2);
	switch (what) {
	case DO_PERSONALITY:
		syscall(__NR_personality, 0xffffffffu);
		break;
	case DO_WRITE:
		if (write(STDERR_FILENO, "", 0) < 0)
			_exit(3);
		break;
	case DO_TTY_IOCTL:
		ioctl(STDIN_FILENO, TCGETS, &t);
		break;
	case DO_INET_SOCKET:
		socket(AF_INET, SOCK_STREAM, 0);
		break;
	case DO_UNIX_SOCKET:
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0)
			_exit(3);
		close(fd);
		break;
	case DO_FORK:
		if (fork() == 0)
			_exit(0);
		break;
	case DO_THREAD:
		if (pthread_create(&th, NULL, thread_fn, NULL) || pthread_join(th, NULL))
			_exit(3);
		break;
	case DO_EPOLL_CTL:
		if (epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) || epoll_ctl(ep, EPOLL_CTL_MOD, efd, &ev) ||
		    epoll_ctl(ep, EPOLL_CTL_DEL, efd, NULL))
			_exit(3);
		break;
	case DO_EXECVE:
		execve("/bin/true", argv, argv + 1);
		break;
	case DO_PACKET_SOCKET:
		socket(AF_PACKET, SOCK_RAW, 0);
		break;
	case DO_INET_CONNECT:
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&in, sizeof(in)))
			_exit(3);
		close(fd);
		break;
	case DO_UNIX_CONNECT:
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof(un)))
			_exit(3);
		close(fd);
		break;
	case DO_GETADDRINFO:
		/* The resolver under the filter: /etc/hosts, the NSS and
		 * resolver configuration, netlink (AI_ADDRCONFIG) and, for a
		 * name not in /etc/hosts, DNS (a failed lookup is fine: the
		 * calls were allowed). */
		if (getaddrinfo("localhost", "443", &hints, &res) == 0)
			freeaddrinfo(res);
		hints.ai_flags = AI_ADDRCONFIG;
		if (getaddrinfo("localhost", "443", &hints, &res) == 0)
			freeaddrinfo(res);
		if (getaddrinfo("no-such-host.invalid", "443", &hints, &res) == 0)
			freeaddrinfo(res);
		break;
	case DO_OPEN_READ:
		fd = open("/etc/hosts", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
		break;
	case DO_OPEN_WRITE:
		open(marker, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		break;
	case DO_MARKER:
		/* the helper's `synced` marker, as start_helper creates it */
		fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			_exit(3);
		close(fd);
		break;
	case DO_WINSIZE:
		ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
		tcgetattr(STDIN_FILENO, &t);
		break;
	case DO_KILL_USR1:
		kill(getpid(), SIGUSR1);
		break;
	case DO_DPRINTF:
		/* connect_uds's CONNECT line (dprintf asks the position: lseek) */
		if (dprintf(STDERR_FILENO, "%s", "") < 0)
			_exit(3);
		break;
	case DO_KILL_TERM:
		/* the helper's SIGTERM to the VMM, to a pid that is not there */
		kill(0x3ffffff, SIGTERM);
		break;
	case DO_IDS:
		/* virtio-fs: a guest chown is checked against the VMM's ids */
		(void)geteuid();
		(void)getegid();
		break;
	}
	if (lfd >= 0)
		close(lfd);
	_exit(0); /* _exit: no atexit handlers (LeakSanitizer) under the filter */
}

/* Runs child(c, what); returns its wait status, its stderr in err. */
static int run_child(enum sc_class c, enum action what, char *err, size_t len)
{
	int p[2], st = 0;
	ssize_t n, got = 0;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		child(c, what);
	}
	close(p[1]);
	while ((n = read(p[0], err + got, len - 1 - (size_t)got)) > 0)
		got += n;
	err[got] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	{
		char marker[64];

		snprintf(marker, sizeof(marker), "/tmp/test_seccomp.%d", (int)pid);
		unlink(marker); /* DO_MARKER's file; the child could not remove it */
	}
	return st;
}

static void expect_trap(enum sc_class c, enum action what, const char *call)
{
	char err[512], want[96];
	int st = run_child(c, what, err, sizeof(err));

	snprintf(want, sizeof(want), "(%s)", call);
	if (!strstr(err, want))
		fprintf(stderr, "child: status 0x%x: %s\n", st, err);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 128 + SIGSYS);
	assert_non_null(strstr(err, want));
	snprintf(want, sizeof(want), "seccomp: %s thread ", sc_class_name(c));
	assert_non_null(strstr(err, want));
}

static void expect_ok(enum sc_class c, enum action what)
{
	char err[512];
	int st = run_child(c, what, err, sizeof(err));

	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "child: status 0x%x: %s\n", st, err);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void forbidden_calls_trap(void **state)
{
	(void)state;
	expect_trap(SC_VCPU, DO_PERSONALITY, "personality");
	expect_trap(SC_DEVICE, DO_PERSONALITY, "personality");
	expect_trap(SC_MAIN, DO_PERSONALITY, "personality");
	expect_trap(SC_PUBLISH, DO_PERSONALITY, "personality");
	/* Arguments: a vCPU's ioctls are KVM's few, a device's sockets Unix. */
	expect_trap(SC_VCPU, DO_TTY_IOCTL, "ioctl");
	expect_trap(SC_VCPU, DO_UNIX_SOCKET, "socket");
	expect_trap(SC_DEVICE, DO_INET_SOCKET, "socket");
	/* The main thread starts threads, never processes. */
	expect_trap(SC_MAIN, DO_FORK, "clone");
	expect_trap(SC_VCPU, DO_FORK, "clone");
}

/* The egress proxy's threads: TCP out, the resolver's files read-only,
 * nothing else. */
static void egress_class(void **state)
{
	(void)state;
	expect_trap(SC_EGRESS, DO_PERSONALITY, "personality");
	expect_trap(SC_EGRESS, DO_EXECVE, "execve");
	expect_trap(SC_EGRESS, DO_PACKET_SOCKET, "socket");
	expect_trap(SC_EGRESS, DO_FORK, "clone");
	expect_trap(SC_EGRESS, DO_OPEN_WRITE, "openat");
	expect_trap(SC_EGRESS, DO_TTY_IOCTL, "ioctl");
	expect_ok(SC_EGRESS, DO_INET_CONNECT);
	expect_ok(SC_EGRESS, DO_UNIX_CONNECT);
	expect_ok(SC_EGRESS, DO_GETADDRINFO);
	expect_ok(SC_EGRESS, DO_OPEN_READ);
	expect_ok(SC_EGRESS, DO_THREAD);
}

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term++;
}

/* A helper child that breaks its list also stops its parent, the VMM:
 * here, this test, which counts the SIGTERM instead of dying of it. */
static void expect_helper_trap(enum action what, const char *call)
{
	got_term = 0;
	expect_trap(SC_HELPER, what, call);
	assert_int_equal(got_term, 1);
}

/* The helper child: the guest API over a Unix socket, the terminal, its
 * marker file, SIGTERM to its parent. */
static void helper_class(void **state)
{
	struct sigaction sa = { .sa_handler = on_term, .sa_flags = SA_RESTART }, old;

	(void)state;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGTERM, &sa, &old), 0);
	expect_helper_trap(DO_PERSONALITY, "personality");
	expect_helper_trap(DO_EXECVE, "execve");
	expect_helper_trap(DO_INET_SOCKET, "socket");
	expect_helper_trap(DO_PACKET_SOCKET, "socket");
	expect_helper_trap(DO_FORK, "clone");
	expect_helper_trap(DO_OPEN_READ, "openat");
	expect_helper_trap(DO_OPEN_WRITE, "openat");
	expect_helper_trap(DO_KILL_USR1, "kill");
	got_term = 0;
	expect_ok(SC_HELPER, DO_DPRINTF);
	expect_ok(SC_HELPER, DO_UNIX_CONNECT);
	expect_ok(SC_HELPER, DO_MARKER);
	expect_ok(SC_HELPER, DO_WINSIZE);
	expect_ok(SC_HELPER, DO_KILL_TERM);
	expect_ok(SC_HELPER, DO_WRITE);
	assert_int_equal(got_term, 0);
	sigaction(SIGTERM, &old, NULL);
}

static void allowed_calls_pass(void **state)
{
	(void)state;
	expect_ok(SC_VCPU, DO_WRITE);
	/* A device reset on the vCPU thread stops watching backend fds: the
	 * attack guest's reset of a live virtio-net killed the VMM. */
	expect_ok(SC_VCPU, DO_EPOLL_CTL);
	expect_ok(SC_DEVICE, DO_EPOLL_CTL);
	expect_ok(SC_DEVICE, DO_UNIX_SOCKET);
	expect_ok(SC_MAIN, DO_TTY_IOCTL);
	expect_ok(SC_MAIN, DO_INET_SOCKET);
	expect_ok(SC_MAIN, DO_THREAD);
	expect_ok(SC_PUBLISH, DO_THREAD);
	expect_ok(SC_FS, DO_IDS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(programs_assemble),
		cmocka_unit_test(forbidden_calls_trap),
		cmocka_unit_test(allowed_calls_pass),
		cmocka_unit_test(egress_class),
		cmocka_unit_test(helper_class),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
