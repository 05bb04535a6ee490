/* guest-init/applets.c: busybox applet links from a build-time list. */
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

#include "guest-init/applets.h"

struct dir {
	char path[64];
	int fd;
};

static int setup(void **state)
{
	struct dir *d = calloc(1, sizeof(*d));

	assert_non_null(d);
	snprintf(d->path, sizeof(d->path), "/tmp/test_applets.XXXXXX");
	assert_non_null(mkdtemp(d->path));
	d->fd = open(d->path, O_RDONLY | O_DIRECTORY);
	assert_true(d->fd >= 0);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dir *d = *state;
	char cmd[128];

	close(d->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->path);
	assert_int_equal(system(cmd), 0);
	free(d);
	return 0;
}

static void link_target(int fd, const char *name, const char *want)
{
	char buf[PATH_MAX];
	ssize_t n = readlinkat(fd, name, buf, sizeof(buf) - 1);

	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

static void links_each_line(void **state)
{
	struct dir *d = *state;
	const char list[] = "ls\ncat\r\nwc\n\n[\n[[";
	unsigned made = 99;

	assert_int_equal(applets_link(d->fd, list, strlen(list), "/bin/busybox", &made), 0);
	assert_int_equal(made, 5);
	link_target(d->fd, "ls", "/bin/busybox");
	link_target(d->fd, "cat", "/bin/busybox"); /* CRLF taken as a line end */
	link_target(d->fd, "wc", "/bin/busybox");
	link_target(d->fd, "[", "/bin/busybox");
	link_target(d->fd, "[[", "/bin/busybox"); /* no newline at the end */
}

static void skips_bad_names(void **state)
{
	struct dir *d = *state;
	char list[NAME_MAX + 64];
	unsigned made = 0;
	struct stat st;
	size_t n;

	/* ".", "..", a path, an over-long name, an embedded NUL. */
	n = (size_t)snprintf(list, sizeof(list), ".\n..\n../evil\nsub/x\n");
	memset(list + n, 'a', NAME_MAX + 1);
	n += NAME_MAX + 1;
	list[n++] = '\n';
	memcpy(list + n, "nu\0l\nok\n", 8);
	n += 8;
	assert_int_equal(applets_link(d->fd, list, n, "/bin/busybox", &made), 0);
	assert_int_equal(made, 1);
	link_target(d->fd, "ok", "/bin/busybox");
	assert_int_equal(fstatat(d->fd, "../evil", &st, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(fstatat(d->fd, "nu", &st, AT_SYMLINK_NOFOLLOW), -1);
}

static void keeps_existing_entries(void **state)
{
	struct dir *d = *state;
	unsigned made = 0;
	char buf[16];
	int fd;

	fd = openat(d->fd, "ls", O_CREAT | O_WRONLY, 0755);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "real", 4), 4);
	close(fd);
	assert_int_equal(applets_link(d->fd, "ls\ncat\n", 7, "/bin/busybox", &made), 0);
	assert_int_equal(made, 1);
	fd = openat(d->fd, "ls", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), 4);
	close(fd);
	assert_memory_equal(buf, "real", 4);
	link_target(d->fd, "cat", "/bin/busybox");
}

static void reports_first_failure_and_goes_on(void **state)
{
	struct dir *d = *state;
	unsigned made = 0;
	int rfd;

	/* A descriptor that is not a directory: every symlinkat fails
	 * (ENOTDIR), and each is still tried. */
	rfd = openat(d->fd, "f", O_CREAT | O_RDWR, 0644);
	assert_true(rfd >= 0);
	assert_int_equal(applets_link(rfd, "a\nb\n", 4, "/bin/busybox", &made), -ENOTDIR);
	assert_int_equal(made, 0);
	close(rfd);
}

static void install_reads_the_list(void **state)
{
	struct dir *d = *state;
	char list[128], bin[128];
	unsigned made = 0;
	FILE *f;

	snprintf(list, sizeof(list), "%s/applets", d->path);
	snprintf(bin, sizeof(bin), "%s/bin", d->path);
	assert_int_equal(mkdir(bin, 0755), 0);
	assert_int_equal(applets_install(list, bin, "/bin/busybox", &made), -ENOENT);
	f = fopen(list, "w");
	assert_non_null(f);
	fputs("ls\ncat\n", f);
	fclose(f);
	assert_int_equal(applets_install(list, bin, "/bin/busybox", &made), 0);
	assert_int_equal(made, 2);
	/* Again: nothing new, no error. */
	assert_int_equal(applets_install(list, bin, "/bin/busybox", &made), 0);
	assert_int_equal(made, 0);
	/* A list that is not a regular file, or is too big. */
	assert_int_equal(applets_install(bin, bin, "/bin/busybox", &made), -EINVAL);
	assert_int_equal(truncate(list, APPLETS_LIST_MAX + 1), 0);
	assert_int_equal(applets_install(list, bin, "/bin/busybox", &made), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(links_each_line, setup, teardown),
		cmocka_unit_test_setup_teardown(skips_bad_names, setup, teardown),
		cmocka_unit_test_setup_teardown(keeps_existing_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(reports_first_failure_and_goes_on, setup, teardown),
		cmocka_unit_test_setup_teardown(install_reads_the_list, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
