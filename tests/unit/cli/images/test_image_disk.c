/* cli/images/image_disk.c: a sandbox's copy of an image grown to its disk
 * size: sparse on the host, the ext4 file system filling it, never
 * smaller than the image, e2fsck first when resize2fs asks. Runs the
 * host's mkfs.ext4 and resize2fs; skipped (saying so) without e2fsprogs. */
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

#include "cli/images/images.h"

struct fx {
	char dir[64], image[96], copy[96];
};

static int have(const char *tool)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "PATH=$PATH:/sbin:/usr/sbin command -v %s > /dev/null 2>&1", tool);
	return system(cmd) == 0;
}

static void sh(const char *fmt, const char *a, const char *b)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_image_disk.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->image, sizeof(f->image), "%s/rootfs.ext4", f->dir);
	snprintf(f->copy, sizeof(f->copy), "%s/rootfs.img", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	sh("rm -rf %s%s", f->dir, "");
	free(f);
	return 0;
}

/* A 32 MiB image as vmm image build makes one, and the sandbox's copy. */
static void make_image(struct fx *f)
{
	sh("truncate -s 32M %s && mkfs.ext4 -q -F -L vmm-root %s", f->image, f->image);
	sh("cp --sparse=always %s %s", f->image, f->copy);
}

/* The file system's size in bytes, from its superblock. */
static uint64_t fs_bytes(const char *path)
{
	uint8_t sb[1024];
	uint32_t lo, hi = 0, log;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, sb, sizeof(sb), 1024), (ssize_t)sizeof(sb));
	close(fd);
	memcpy(&lo, sb + 4, 4);
	memcpy(&log, sb + 24, 4);
	memcpy(&hi, sb + 0x150, 4);
	if (!(sb[0x60] & 0x80)) /* INCOMPAT_64BIT */
		hi = 0;
	return ((uint64_t)hi << 32 | lo) << (10 + log);
}

static off_t file_size(const char *p, blkcnt_t *blocks)
{
	struct stat st;

	assert_int_equal(stat(p, &st), 0);
	if (blocks)
		*blocks = st.st_blocks;
	return st.st_size;
}

#define NEED_E2FSPROGS()                                                                                   \
	do {                                                                                               \
		setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);        \
		if (!have("mkfs.ext4") || !have("resize2fs") || !have("e2fsck")) {                        \
			print_message("skip: needs mkfs.ext4, resize2fs and e2fsck (e2fsprogs)\n");        \
			skip();                                                                            \
		}                                                                                          \
	} while (0)

static void grows_sparse(void **state)
{
	struct fx *f = *state;
	char err[512] = "";
	blkcnt_t blocks;

	NEED_E2FSPROGS();
	make_image(f);
	assert_int_equal(fs_bytes(f->copy), 32u << 20);
	assert_int_equal(image_root_grow(f->copy, 1ull << 30, err, sizeof(err)), 0);
	assert_int_equal(file_size(f->copy, &blocks), 1ll << 30);
	assert_int_equal(fs_bytes(f->copy), 1ull << 30);
	/* sparse: far less than the gigabyte is allocated */
	assert_true((uint64_t)blocks * 512 < (64ull << 20));
	/* the image itself is what it was */
	assert_int_equal(file_size(f->image, NULL), 32 << 20);
	assert_int_equal(fs_bytes(f->image), 32u << 20);
	/* the grown file system checks clean */
	sh("e2fsck -fn %s > /dev/null 2>&1%s", f->copy, "");
	/* the same size again: nothing to do */
	assert_int_equal(image_root_grow(f->copy, 1ull << 30, err, sizeof(err)), 0);
}

static void never_smaller(void **state)
{
	struct fx *f = *state;
	char err[512] = "";

	NEED_E2FSPROGS();
	make_image(f);
	assert_int_equal(image_root_grow(f->copy, 16ull << 20, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "the image is 32 MiB"));
	assert_int_equal(file_size(f->copy, NULL), 32 << 20);
}

/* An image a Dockerfile build booted was mounted since its last check:
 * resize2fs wants e2fsck -f first, which the grow runs. */
static void checks_first_when_asked(void **state)
{
	struct fx *f = *state;
	char err[512] = "";

	NEED_E2FSPROGS();
	if (!have("debugfs")) {
		print_message("skip: needs debugfs\n");
		skip();
	}
	make_image(f);
	sh("debugfs -w -R 'ssv mtime 1600000000' %s > /dev/null 2>&1 && "
	   "debugfs -w -R 'ssv lastcheck 1500000000' %s > /dev/null 2>&1", f->copy, f->copy);
	assert_int_equal(image_root_grow(f->copy, 128ull << 20, err, sizeof(err)), 0);
	assert_int_equal(fs_bytes(f->copy), 128u << 20);
}

/* Not a file system: the error says which tool failed. */
static void not_ext4(void **state)
{
	struct fx *f = *state;
	char err[512] = "";

	NEED_E2FSPROGS();
	sh("truncate -s 32M %s%s", f->copy, "");
	assert_true(image_root_grow(f->copy, 64ull << 20, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "resize2fs"));
	assert_int_equal(image_root_grow("/nonexistent/x.img", 64ull << 20, err, sizeof(err)), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(grows_sparse, setup, teardown),
		cmocka_unit_test_setup_teardown(never_smaller, setup, teardown),
		cmocka_unit_test_setup_teardown(checks_first_when_asked, setup, teardown),
		cmocka_unit_test_setup_teardown(not_ext4, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
