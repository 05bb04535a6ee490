/* The ready notice's host side (vmm/notice.c) over real Unix sockets in a
 * scratch directory: the line, split writes, a wrong line, a reconnect;
 * the spare states after the line, and a snapshot's wait for "settled". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmm/wire/proto.h"
#include "vmm/notice.h"

struct fx {
	char dir[32], uds[64];
	struct notice n;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_notice.XXXXXX");
	if (!f || !mkdtemp(f->dir))
		return -1;
	snprintf(f->uds, sizeof(f->uds), "%s/v.sock", f->dir);
	notice_init(&f->n);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	notice_close(&f->n);
	rmdir(f->dir);
	free(f);
	return 0;
}

static int guest_connect(const struct fx *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", f->uds, API_NOTICE_PORT);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* One round of the main loop: poll (blocking until something is there),
 * then the events. */
static int step(struct notice *n)
{
	struct pollfd p[NOTICE_POLLFDS];
	unsigned k = notice_pollfds(n, p);

	assert_true(k > 0);
	assert_true(poll(p, k, 5000) > 0);
	return notice_events(n, p, k);
}

static void notice_in_two_writes(void **state)
{
	struct fx *f = *state;
	char p[160];
	int g;

	assert_int_equal(notice_open(&f->n, f->uds, API_NOTICE_PORT), 0);
	snprintf(p, sizeof(p), "%s_%u", f->uds, API_NOTICE_PORT);
	assert_int_equal(access(p, F_OK), 0);
	g = guest_connect(f);
	assert_int_equal(step(&f->n), 0); /* the accept */
	assert_true(f->n.conn_fd >= 0);
	assert_int_equal(write(g, "rea", 3), 3);
	assert_int_equal(step(&f->n), 0);
	assert_int_equal(write(g, "dy\n", 3), 3);
	assert_int_equal(step(&f->n), 1);
	assert_int_equal(f->n.count, 1);
	/* the connection is kept: the guest's side of a restore breaks it */
	assert_true(f->n.conn_fd >= 0);
	close(g);
	assert_int_equal(step(&f->n), 0);
	assert_int_equal(f->n.conn_fd, -1);
	notice_close(&f->n);
	assert_int_equal(access(p, F_OK), -1); /* unlinked */
}

static void wrong_line_is_dropped(void **state)
{
	struct fx *f = *state;
	char c;
	int g;

	assert_int_equal(notice_open(&f->n, f->uds, API_NOTICE_PORT), 0);
	g = guest_connect(f);
	assert_int_equal(step(&f->n), 0);
	assert_int_equal(write(g, "readx\n", 6), 6);
	assert_int_equal(step(&f->n), 0);
	assert_int_equal(f->n.conn_fd, -1);
	assert_int_equal(f->n.count, 0);
	assert_int_equal(read(g, &c, 1), 0); /* closed on the guest */
	close(g);
}

static void reconnect_replaces_and_counts(void **state)
{
	struct fx *f = *state;
	int g1, g2;

	assert_int_equal(notice_open(&f->n, f->uds, API_NOTICE_PORT), 0);
	g1 = guest_connect(f);
	assert_int_equal(step(&f->n), 0);
	assert_int_equal(write(g1, READY_NOTICE, strlen(READY_NOTICE)), (ssize_t)strlen(READY_NOTICE));
	assert_int_equal(step(&f->n), 1);
	/* a restored guest connects again before the old one is seen gone */
	g2 = guest_connect(f);
	assert_int_equal(step(&f->n), 0);
	assert_int_equal(write(g2, READY_NOTICE, strlen(READY_NOTICE)), (ssize_t)strlen(READY_NOTICE));
	assert_int_equal(step(&f->n), 1);
	assert_int_equal(f->n.count, 2);
	close(g1);
	close(g2);
}

static void take_is_exact(void **state)
{
	struct notice n;

	(void)state;
	notice_init(&n);
	assert_int_equal(notice_take(&n, "ready\n", 6), 1);
	n.len = 0;
	assert_int_equal(notice_take(&n, "ready\nx", 7), -1); /* more than the line */
	n.len = 0;
	assert_int_equal(notice_take(&n, "", 0), 0);
	assert_int_equal(notice_take(&n, "READY", 5), -1);
	/* the states after the line: in the same read, or later */
	n.len = 0;
	n.state = 0;
	assert_int_equal(notice_take(&n, "ready\nP", 7), 1);
	assert_int_equal(n.state, NOTICE_PENDING);
	assert_int_equal(notice_take(&n, "SPS", 3), 0);
	assert_int_equal(n.state, NOTICE_SETTLED);
	assert_int_equal(notice_take(&n, "S\n", 2), -1); /* not a state */
	/* a state before the line is no line */
	n.len = 0;
	assert_int_equal(notice_take(&n, "Sready\n", 7), -1);
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* A snapshot's wait (notice_settle): none without a connection or a
 * state; the bound when the guest stays PENDING; until SETTLED comes. */
static void settle_waits_for_the_spare(void **state)
{
	struct fx *f = *state;
	struct timespec t0;
	unsigned ready = 9;
	pid_t kid;
	int g, st;

	assert_int_equal(notice_open(&f->n, f->uds, API_NOTICE_PORT), 0);
	assert_int_equal(notice_settle(&f->n, 5000, &ready), 0); /* nobody connected */
	assert_int_equal(ready, 0);
	g = guest_connect(f);
	/* the line still queued: taken by the settle, and counted */
	assert_int_equal(write(g, READY_NOTICE, strlen(READY_NOTICE)), (ssize_t)strlen(READY_NOTICE));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(notice_settle(&f->n, 5000, &ready), 0); /* an older guest-init: no state */
	assert_int_equal(ready, 1);
	assert_int_equal(f->n.state, 0);
	assert_true(ms_since(&t0) < 4000); /* not the bound (a bound, not a timing check) */

	/* PENDING and nothing more: the bound, then -ETIMEDOUT */
	assert_int_equal(write(g, "P", 1), 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(notice_settle(&f->n, 300, &ready), -ETIMEDOUT);
	assert_true(ms_since(&t0) >= 290);
	assert_int_equal(ready, 0);

	/* PENDING, then SETTLED from another process a little later */
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		usleep(200 * 1000);
		_exit(write(g, "S", 1) == 1 ? 0 : 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(notice_settle(&f->n, 10000, &ready), 0);
	assert_int_equal(f->n.state, NOTICE_SETTLED);
	assert_true(ms_since(&t0) >= 150); /* it did wait for the byte */
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* queued PENDING then SETTLED: the last one counts, no wait */
	assert_int_equal(write(g, "PS", 2), 2);
	assert_int_equal(notice_settle(&f->n, 10000, &ready), 0);
	assert_int_equal(f->n.state, NOTICE_SETTLED);

	/* the guest goes (a restore's reset): the state is forgotten */
	assert_int_equal(write(g, "P", 1), 1);
	assert_int_equal(step(&f->n), 0);
	assert_int_equal(f->n.state, NOTICE_PENDING);
	close(g);
	assert_int_equal(notice_settle(&f->n, 10000, &ready), 0);
	assert_int_equal(f->n.conn_fd, -1);
	assert_int_equal(f->n.state, 0);
}

static void path_too_long(void **state)
{
	struct fx *f = *state;
	char uds[200];

	memset(uds, 'a', sizeof(uds) - 1);
	uds[sizeof(uds) - 1] = '\0';
	assert_int_equal(notice_open(&f->n, uds, API_NOTICE_PORT), -ENAMETOOLONG);
	assert_int_equal(f->n.listen_fd, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(notice_in_two_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(wrong_line_is_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(reconnect_replaces_and_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(take_is_exact, setup, teardown),
		cmocka_unit_test_setup_teardown(settle_waits_for_the_spare, setup, teardown),
		cmocka_unit_test_setup_teardown(path_too_long, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
