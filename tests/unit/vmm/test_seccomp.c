/* seccomp: every class's program assembles into valid BPF, and the kernel
 * enforces it: each case forks a child that installs a filter and makes a
 * call, and the parent checks the child's fate (exit status 159 and the
 * report line for a forbidden call, a clean exit for an allowed one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
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
	      DO_KILL_TERM, DO_DPRINTF, DO_IDS, DO_OVERCOMMIT, DO_AFFINITY };

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
		/* the helper's `synced` marker, as helper_start creates it */
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
	case DO_OVERCOMMIT:
		/* glibc's probe on a thread heap's first shrink: refused with
		 * EACCES where the list has no openat, not trapped */
		fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
		if (fd >= 0 || errno != EACCES)
			_exit(3);
		break;
	case DO_AFFINITY: {
		/* glibc's CPU count for the ninth arena */
		cpu_set_t set;

		if (sched_getaffinity(0, sizeof(set), &set) == 0 || errno != EPERM)
			_exit(3);
		break;
	}
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

/* glibc's lazy probes inside malloc and free (seccomp.c, quiet_calls)
 * answer an errno in the classes that do not list them. */
static void lazy_probes_answer_errno(void **state)
{
	static const enum sc_class quiet[] = { SC_VCPU, SC_DEVICE, SC_PUBLISH };
	size_t i;

	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	skip(); /* ASan builds allow both for the sanitizer's runtime */
#endif
	for (i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
		expect_ok(quiet[i], DO_OVERCOMMIT);
		expect_ok(quiet[i], DO_AFFINITY);
	}
	/* Where an argument rule covers openat (the helper) other opens
	 * still trap: helper_class. */
}

/* ---- malloc, free and realloc under every filter -------------------- */

#define CHURN_THREADS 12 /* past glibc's arena_test (8): the CPU count probe */
#if defined(__SANITIZE_ADDRESS__)
#define CHURN_BLOCKS 1536 /* ASan's allocator, not glibc's: a short run */
#else
#define CHURN_BLOCKS 16384 /* per class, over all the threads: 115k in all */
#endif
#define CHURN_BATCH 64

struct churn {
	enum sc_class c;
	int own_filter; /* install c on the thread (else it inherited it) */
	int threads;    /* c may start threads */
	pthread_barrier_t *start;
	int failed;
};

static void *churn_leaf(void *arg)
{
	free(malloc(200 << 10));
	return arg;
}

/* Big blocks (1..300 KiB: on both sides of the mmap threshold) freed in
 * patterns that consolidate into the top chunk and trim the heap: every
 * other one first, then the rest from the top down; some shrunk by
 * realloc first; a short-lived thread now and then where c allows it;
 * malloc_trim at the end. */
static void *churn_fn(void *arg)
{
	struct churn *ch = arg;
	unsigned seed = (unsigned)(uintptr_t)ch, round, i;
	void *blk[CHURN_BATCH];
	pthread_t th;

	if (ch->own_filter && sc_install(ch->c)) {
		ch->failed = 1;
		return NULL;
	}
	/* All alive at once before the first malloc: without one arena for
	 * all, each gets an arena of its own. */
	pthread_barrier_wait(ch->start);
	for (round = 0; round < CHURN_BLOCKS / CHURN_THREADS / CHURN_BATCH; round++) {
		for (i = 0; i < CHURN_BATCH; i++) {
			size_t n = 1 + (size_t)rand_r(&seed) % (300 << 10);

			blk[i] = malloc(n);
			if (!blk[i]) {
				ch->failed = 1;
				return NULL;
			}
			((char *)blk[i])[n - 1] = 1;
		}
		for (i = 0; i < CHURN_BATCH; i += 4) {
			void *p = realloc(blk[i], 1 + i);

			if (p)
				blk[i] = p;
		}
		for (i = 1; i < CHURN_BATCH; i += 2)
			free(blk[i]);
		for (i = CHURN_BATCH; i-- > 0;)
			if (!(i & 1))
				free(blk[i]);
		if (ch->threads && round % 16 == 0) {
			if (pthread_create(&th, NULL, churn_leaf, NULL) || pthread_join(th, NULL)) {
				ch->failed = 1;
				return NULL;
			}
		}
	}
	malloc_trim(0);
	return NULL;
}

/* The arenas glibc made: the heaps malloc_info lists. */
static int nr_arenas(void)
{
	char *buf = NULL, *at;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int n = 0;

	if (!f)
		return -1;
	if (malloc_info(0, f)) {
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	for (at = buf; (at = strstr(at, "<heap nr=")); at++)
		n++;
	free(buf);
	return n;
}

/* In a child: the process set up as the VMM's main() does, then
 * CHURN_THREADS threads under class c's filter churning big blocks. Exits
 * 0 if they all finished, 3 if malloc failed, 5 if more than one arena
 * exists afterwards; a trapped call exits 159. */
static void churn_child(enum sc_class c)
{
	static const int may_thread[SC_NR_CLASSES] = { [SC_MAIN] = 1, [SC_PUBLISH] = 1,
						      [SC_EGRESS] = 1 };
	struct churn ch[CHURN_THREADS];
	pthread_t th[CHURN_THREADS];
	pthread_barrier_t start;
	int i, n;

	if (sc_process_init() || pthread_barrier_init(&start, NULL, CHURN_THREADS))
		_exit(2);
	/* Classes that start threads pass their filter on (the main thread,
	 * published ports, the egress proxy); the others install it on a
	 * running thread (vCPUs, device loops). */
	if (may_thread[c] && sc_install(c))
		_exit(2);
	for (i = 0; i < CHURN_THREADS; i++) {
		ch[i] = (struct churn){ c, !may_thread[c], may_thread[c], &start, 0 };
		if (pthread_create(&th[i], NULL, churn_fn, &ch[i]))
			_exit(2);
	}
	for (i = 0; i < CHURN_THREADS; i++)
		if (pthread_join(th[i], NULL) || ch[i].failed)
			_exit(3);
	n = nr_arenas();
	if (n != 1 && n != -1)
		_exit(5);
	_exit(0);
}

/* The guest decides which thread frees a big block (a vsock connection's
 * buffers on the device loop, hundreds of them on a vCPU thread by a
 * reset): no allocation pattern may reach a call outside a class's list.
 * Under glibc's per-thread arenas the first heap shrink opened
 * /proc/sys/vm/overcommit_memory and the VMM died with 159. */
static void malloc_churn_every_class(void **state)
{
	struct sigaction sa = { .sa_handler = on_term, .sa_flags = SA_RESTART }, old;
	unsigned c, failed = 0;

	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	/* ASan replaces malloc: glibc's arenas, which this pins, are not what
	 * runs (and glibc's thread-exit arena bookkeeping asserted once in a
	 * forked ASan child: "a->attached_threads > 0"). The plain build runs it. */
	skip();
#endif
	/* A helper child that traps sends its parent, here this test, SIGTERM. */
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGTERM, &sa, &old), 0);
	got_term = 0;
	for (c = 0; c < SC_NR_CLASSES; c++) {
		int p[2], st = 0;
		char err[512];
		ssize_t n, got = 0;
		pid_t pid;

		assert_int_equal(pipe(p), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			dup2(p[1], STDERR_FILENO);
			close(p[0]);
			churn_child((enum sc_class)c);
		}
		close(p[1]);
		while ((n = read(p[0], err + got, sizeof(err) - 1 - (size_t)got)) > 0)
			got += n;
		err[got] = '\0';
		close(p[0]);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "%s: child status 0x%x: %s\n", sc_class_name((enum sc_class)c),
				st, err);
			failed++;
		}
	}
	sigaction(SIGTERM, &old, NULL);
	assert_int_equal(failed, 0);
	assert_int_equal(got_term, 0);
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
		cmocka_unit_test(lazy_probes_answer_errno),
		cmocka_unit_test(malloc_churn_every_class),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
