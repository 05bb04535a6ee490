/* cli/util's file helpers: cli_write_text (the whole text, truncating,
 * never through a symbolic link, a full disk reported) with cli_read_text
 * reading it back, and cli_rm_tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/util/util.h"

static char dir[] = "/tmp/vmm-util-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return cli_rm_tree(dir);
}

static void write_then_read(void **state)
{
	char p[PATH_MAX], buf[64];
	struct stat st;

	(void)state;
	snprintf(p, sizeof(p), "%s/a", dir);
	assert_int_equal(cli_write_text(p, "a longer first text\n", 0640), 0);
	assert_int_equal(cli_write_text(p, "short\n", 0640), 0); /* truncated, not overlaid */
	assert_int_equal(cli_read_text(p, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "short\n");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640 & ~(unsigned)umask(022));
}

static void never_through_a_link(void **state)
{
	char p[PATH_MAX], target[PATH_MAX], buf[64];

	(void)state;
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(p, sizeof(p), "%s/link", dir);
	assert_int_equal(cli_write_text(target, "kept\n", 0600), 0);
	assert_int_equal(symlink(target, p), 0);
	assert_int_equal(cli_write_text(p, "planted\n", 0600), -ELOOP);
	assert_int_equal(cli_read_text(target, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "kept\n");
}

static void full_disk_is_reported(void **state)
{
	(void)state;
	if (access("/dev/full", W_OK)) {
		print_message("skip: no writable /dev/full on this host\n");
		skip();
	}
	assert_int_equal(cli_write_text("/dev/full", "x", 0600), -ENOSPC);
}

static void missing_folder(void **state)
{
	char p[PATH_MAX];

	(void)state;
	snprintf(p, sizeof(p), "%s/no/such/file", dir);
	assert_int_equal(cli_write_text(p, "x", 0600), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(write_then_read),
		cmocka_unit_test(never_through_a_link),
		cmocka_unit_test(full_disk_is_reported),
		cmocka_unit_test(missing_folder),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
