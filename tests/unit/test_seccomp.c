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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
	      DO_THREAD, DO_EPOLL_CTL };

static void *thread_fn(void *arg)
{
	return arg;
}

/* In the child: install class c, do `what`, exit 0 if it returned. */
static void child(enum sc_class c, enum action what)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct termios t;
	pthread_t th;
	int fd, ep = epoll_create1(0), efd = eventfd(0, 0);

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
	}
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
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(programs_assemble),
		cmocka_unit_test(forbidden_calls_trap),
		cmocka_unit_test(allowed_calls_pass),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
