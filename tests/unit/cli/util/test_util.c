/* cli/util's file helpers: cli_write_text (the whole text, truncating,
 * never through a symbolic link, a full disk reported) with cli_read_text
 * reading it back, cli_rm_tree, and the mounts below a folder counted and
 * detached (cli_mounts_under, cli_unmount_under). */
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
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* In a child with a mount namespace of its own: dir a tmpfs, with two
 * more below it. Exit 0: counted with and without dir, the two below
 * detached deepest first and dir's own left; 77: no mount namespace. */
static int unmount_child(void)
{
	char a[PATH_MAX], b[PATH_MAX];

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("none", dir, "tmpfs", 0, NULL) < 0)
		return 77;
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/a/b", dir);
	if (mkdir(a, 0700) || mount("none", a, "tmpfs", 0, NULL) || mkdir(b, 0700) || mount("none", b, "tmpfs", 0, NULL))
		return 1;
	if (cli_mounts_under(dir, 0, NULL, 0) != 2 || cli_mounts_under(dir, 1, NULL, 0) != 3)
		return 2;
	if (cli_unmount_under(dir, 0) != 0 || cli_mounts_under(dir, 1, NULL, 0) != 1)
		return 3;
	return cli_unmount_under(dir, 1) == 0 ? 0 : 4;
}

static void mounts_below_detached(void **state)
{
	pid_t pid;
	int st;

	(void)state;
	if (geteuid() != 0) {
		print_message("skip: mounting needs root\n");
		skip();
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(unmount_child());
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77) {
		print_message("skip: no mount namespace here (unshare or mount refused)\n");
		skip();
	}
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(write_then_read),
		cmocka_unit_test(never_through_a_link),
		cmocka_unit_test(full_disk_is_reported),
		cmocka_unit_test(missing_folder),
		cmocka_unit_test(mounts_below_detached),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
