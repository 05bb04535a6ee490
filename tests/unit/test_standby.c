/* Standby: idle accounting on a fake clock, and the suspend's write and
 * commit order with a crash injected before every step. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/idle.h"
#include "vmm/standby.h"

#define S 1000000000ull

/* ---- idle accounting (fake clock: the tests pass the time) ---- */

static void idle_after_timeout_only(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 10 * S, 100 * S);
	assert_false(idle_expired(&d, 100 * S));
	assert_false(idle_expired(&d, 109 * S));
	assert_true(idle_expired(&d, 110 * S));
}

static void idle_touch_restarts_the_period(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 10 * S, 0);
	idle_touch(&d, 8 * S);
	assert_false(idle_expired(&d, 17 * S));
	assert_true(idle_expired(&d, 18 * S));
	/* a touch from the past does not move it back */
	idle_touch(&d, 1 * S);
	assert_true(idle_expired(&d, 18 * S));
}

static void idle_open_connection_is_busy(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 10 * S, 0);
	idle_observe(&d, 1, 1, 5 * S);          /* an exec stream opens */
	idle_observe(&d, 1, 1, 100 * S);        /* still open, quiet */
	assert_false(idle_expired(&d, 1000 * S));
	idle_observe(&d, 0, 2, 200 * S);        /* closed: the period starts */
	assert_false(idle_expired(&d, 209 * S));
	idle_observe(&d, 0, 2, 209 * S);
	assert_true(idle_expired(&d, 210 * S));
}

static void idle_short_connection_between_samples_counts(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 10 * S, 0);
	idle_observe(&d, 0, 0, 5 * S);
	/* opened and closed between two samples: only the generation moved */
	idle_observe(&d, 0, 2, 9 * S);
	assert_false(idle_expired(&d, 18 * S));
	assert_true(idle_expired(&d, 19 * S));
}

static void idle_never_without_timeout(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 0, 0);
	assert_false(idle_expired(&d, 1000000 * S));
	assert_int_equal(idle_wait_ms(&d, 5 * S), -1);
}

static void idle_wait_is_bounded(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 3600 * S, 0);
	assert_int_equal(idle_wait_ms(&d, 0), 1000); /* looks again each second */
	idle_init(&d, S / 2, 0);
	assert_int_equal(idle_wait_ms(&d, 0), 501);
	assert_int_equal(idle_wait_ms(&d, S), 0);
}

/* ---- the commit order ---- */

static char root[64];

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/test_standby.XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static void rm_flat(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static int teardown(void **state)
{
	(void)state;
	rm_flat(root);
	return 0;
}

struct fake {
	int gen;
	int fail; /* -errno: the write fails (a full disk) after writing some */
};

static int put(const char *dir, const char *name, const char *text)
{
	char p[256];
	int fd;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

/* Writes the way vm_snapshot does: a partial directory, then renamed. */
static int fake_write(void *ctx, const char *dir)
{
	struct fake *f = ctx;
	char tmp[256], text[32];
	int r;

	snprintf(tmp, sizeof(tmp), "%s.partial-%d", dir, (int)getpid());
	if (mkdir(tmp, 0700) < 0)
		return -errno;
	snprintf(text, sizeof(text), "%d", f->gen);
	if ((r = put(tmp, "memory", text)))
		return r;
	if (f->fail) {
		rm_flat(tmp);
		return f->fail;
	}
	if ((r = put(tmp, "state", text)))
		return r;
	return rename(tmp, dir) < 0 ? -errno : 0;
}

/* The generation a restore would get: the state file's, which must match
 * its memory file's (never a mix). -1: nothing to restore. */
static int restorable(void)
{
	char p[256], st[32] = "", mem[32] = "";
	FILE *f;

	if (!standby_valid(root))
		return -1;
	snprintf(p, sizeof(p), "%s/standby/state", root);
	f = fopen(p, "r");
	assert_non_null(f);
	assert_non_null(fgets(st, sizeof(st), f));
	fclose(f);
	snprintf(p, sizeof(p), "%s/standby/memory", root);
	f = fopen(p, "r");
	assert_non_null(f);
	assert_non_null(fgets(mem, sizeof(mem), f));
	fclose(f);
	assert_string_equal(st, mem);
	return atoi(st);
}

static void commit_first_and_second(void **state)
{
	struct fake f = { .gen = 1 };
	struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
	char p[256];

	(void)state;
	assert_int_equal(restorable(), -1);
	assert_int_equal(standby_commit(root, &w), 0);
	assert_int_equal(restorable(), 1);
	/* a resume consumes it: never restored twice */
	assert_int_equal(standby_consume(root), 0);
	assert_int_equal(restorable(), -1);
	f.gen = 2;
	assert_int_equal(standby_commit(root, &w), 0);
	assert_int_equal(restorable(), 2);
	snprintf(p, sizeof(p), "%s/" STANDBY_NEW, root);
	assert_int_equal(access(p, F_OK), -1); /* the old one is gone */
}

static void failed_write_leaves_the_old_state(void **state)
{
	struct fake f = { .gen = 1 };
	struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
	char p[256];

	(void)state;
	assert_int_equal(standby_commit(root, &w), 0);
	f.gen = 2;
	f.fail = -ENOSPC;
	assert_int_equal(standby_commit(root, &w), -ENOSPC);
	assert_int_equal(restorable(), 1);
	snprintf(p, sizeof(p), "%s/" STANDBY_NEW, root);
	assert_int_equal(access(p, F_OK), -1);
}

/* Killed before each step of the second suspend (the first resume has
 * consumed the first state, as it does before the guest runs): what is
 * left restores as nothing (the sandbox is dead: its disks moved on since
 * the first state) or as the new state, whole; and the next suspend
 * cleans up and commits. Never the consumed state, never a mix. */
static void crash_at_every_step(void **state)
{
	int step;

	(void)state;
	for (step = STANDBY_STEP_CLEAN; step < STANDBY_STEP_DONE; step++) {
		struct fake f = { .gen = 1 };
		struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
		int got;

		rm_flat(root);
		assert_int_equal(mkdir(root, 0700), 0);
		assert_int_equal(standby_commit(root, &w), 0);
		assert_int_equal(standby_consume(root), 0);
		f.gen = 2;
		w.crash_at = step;
		assert_int_equal(standby_commit(root, &w), -EINTR);
		got = restorable();
		if (step <= STANDBY_STEP_COMMIT)
			assert_int_equal(got, -1);
		else
			assert_int_equal(got, 2);
		/* the next suspend after a restart */
		f.gen = 3;
		w.crash_at = -1;
		assert_int_equal(standby_commit(root, &w), 0);
		assert_int_equal(restorable(), 3);
	}
}

/* A crash in the middle of the write (vm_snapshot's partial directory
 * left behind) is cleaned by the next suspend. */
static void partial_leftover_is_removed(void **state)
{
	struct fake f = { .gen = 5 };
	struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
	char p[256];

	(void)state;
	snprintf(p, sizeof(p), "%s/" STANDBY_NEW ".partial-99999", root);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(put(p, "memory", "junk"), 0);
	assert_int_equal(standby_commit(root, &w), 0);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(restorable(), 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(idle_after_timeout_only),
		cmocka_unit_test(idle_touch_restarts_the_period),
		cmocka_unit_test(idle_open_connection_is_busy),
		cmocka_unit_test(idle_short_connection_between_samples_counts),
		cmocka_unit_test(idle_never_without_timeout),
		cmocka_unit_test(idle_wait_is_bounded),
		cmocka_unit_test_setup_teardown(commit_first_and_second, setup, teardown),
		cmocka_unit_test_setup_teardown(failed_write_leaves_the_old_state, setup, teardown),
		cmocka_unit_test_setup_teardown(crash_at_every_step, setup, teardown),
		cmocka_unit_test_setup_teardown(partial_leftover_is_removed, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
