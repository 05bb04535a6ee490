/* Tests devices/fuse/fuse_budget.c: a drive's size limit. Two servers
 * share one counter as two VMMs share the drive's mapped page; writes
 * past the limit are refused before the file changes, and removing a
 * file gives its blocks back. Real files in a temporary folder. */
#include "devices/fuse/fuse_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[] = "/tmp/test_fuse_budget.XXXXXX";

static int open_file(const char *name)
{
	int dfd = open(dir, O_PATH | O_DIRECTORY), fd;

	assert_true(dfd >= 0);
	fd = openat(dfd, name, O_RDWR | O_CREAT | O_TRUNC, 0600);
	close(dfd);
	assert_true(fd >= 0);
	return fd;
}

/* One write as fuse_op_write does it: reserve, write, settle. */
static int budget_write(struct fuse_server *s, int fd, uint64_t off, size_t len)
{
	struct fuse_reservation res;
	char *buf = calloc(1, len);
	int r;

	assert_non_null(buf);
	memset(buf, 'x', len);
	if ((r = fuse_budget_take(&s->budget, fd, off, len, 0, &res))) {
		free(buf);
		return r;
	}
	r = pwrite(fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -errno;
	fuse_budget_settle(&s->budget, fd, &res);
	free(buf);
	return r;
}

static void need_counts_growth_and_holes(void **state)
{
	struct stat st = { .st_size = 8192, .st_blocks = 16 };

	(void)state;
	assert_int_equal(fuse_budget_need(&st, 0, 4096, 0), 0);        /* over data */
	assert_int_equal(fuse_budget_need(&st, 6144, 4096, 0), 2048);  /* past the end */
	assert_int_equal(fuse_budget_need(&st, 0, 4096, 1), 4096);     /* fallocate */
	st.st_blocks = 8;                                                /* sparse */
	assert_int_equal(fuse_budget_need(&st, 0, 4096, 0), 4096);
}

static void limit_shared_by_two_servers(void **state)
{
	int64_t used = 0;
	struct fuse_server a, b;
	struct stat st;
	int fa, fb;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.budget = b.budget = (struct fuse_budget){ .used = &used, .limit = 256 * 1024 };
	fa = open_file("a");
	fb = open_file("b");
	assert_int_equal(budget_write(&a, fa, 0, 128 * 1024), 0);
	assert_true(used >= 128 * 1024);
	/* the other server sees the first one's bytes: 160 KiB more is past */
	assert_int_equal(budget_write(&b, fb, 0, 160 * 1024), -ENOSPC);
	assert_int_equal(fstat(fb, &st), 0);
	assert_int_equal(st.st_size, 0);          /* nothing written */
	assert_int_equal(budget_write(&b, fb, 0, 64 * 1024), 0);
	/* rewriting data already there needs nothing */
	assert_int_equal(budget_write(&a, fa, 0, 128 * 1024), 0);
	assert_true(used <= 256 * 1024);
	close(fa);
	close(fb);
}

static void unlink_and_truncate_give_back(void **state)
{
	int64_t used = 0, before;
	struct fuse_server s;
	struct fuse_reservation res;
	int fd, dfd;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.budget = (struct fuse_budget){ .used = &used, .limit = 1 << 20 };
	fd = open_file("c");
	assert_int_equal(budget_write(&s, fd, 0, 512 * 1024), 0);
	assert_int_equal(budget_write(&s, fd, 512 * 1024, 600 * 1024), -ENOSPC);
	before = used;
	/* a truncate down settles to the smaller file */
	assert_int_equal(fuse_budget_take(&s.budget, fd, 0, 0, 0, &res), 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	fuse_budget_settle(&s.budget, fd, &res);
	assert_true(used < before && used <= 8192);
	/* now the big write fits */
	assert_int_equal(budget_write(&s, fd, 0, 600 * 1024), 0);
	close(fd);
	dfd = open(dir, O_PATH | O_DIRECTORY);
	assert_true(fuse_budget_freed(&s.budget, dfd, "c") >= 600 * 1024);
	fuse_budget_give_back(&s.budget, fuse_budget_freed(&s.budget, dfd, "c"));
	assert_int_equal(unlinkat(dfd, "c", 0), 0);
	assert_true(used <= 8192);
	close(dfd);
}

static void unbounded_without_counter(void **state)
{
	struct fuse_server s;
	int fd;

	(void)state;
	memset(&s, 0, sizeof(s));
	fd = open_file("d");
	assert_int_equal(budget_write(&s, fd, 0, 1 << 20), 0);
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	const char *names[] = { "a", "b", "c", "d" };
	char p[128];

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(need_counts_growth_and_holes),
		cmocka_unit_test(limit_shared_by_two_servers),
		cmocka_unit_test(unlink_and_truncate_give_back),
		cmocka_unit_test(unbounded_without_counter),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
