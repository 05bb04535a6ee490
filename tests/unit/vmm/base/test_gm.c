/* Guest memory: layout, range checks (edges, holes, overflow), dump and
 * private mapping, a file copied in by the kernel. */
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#include "vmm/base/gm.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static void layout_small(void **state)
{
	struct gm_region r[GM_MAX_REGIONS];

	(void)state;
	assert_int_equal(gm_x86_layout(512 * MiB, r), 1);
	assert_int_equal(r[0].gpa, 0);
	assert_int_equal(r[0].size, 512 * MiB);
}

static void layout_split(void **state)
{
	struct gm_region r[GM_MAX_REGIONS];

	(void)state;
	assert_int_equal(gm_x86_layout(3 * GiB, r), 1);
	assert_int_equal(gm_x86_layout(5 * GiB, r), 2);
	assert_int_equal(r[0].size, GM_MMIO_GAP_START);
	assert_int_equal(r[1].gpa, 4 * GiB);
	assert_int_equal(r[1].size, 5 * GiB - GM_MMIO_GAP_START);
}

static void layout_invalid(void **state)
{
	struct gm_region r[GM_MAX_REGIONS];

	(void)state;
	assert_int_equal(gm_x86_layout(0, r), -EINVAL);
	assert_int_equal(gm_x86_layout(4097, r), -EINVAL);
	assert_int_equal(gm_x86_layout(UINT64_MAX & ~4095ull, r), -EINVAL);
}

/* Two small regions with a hole between them, like RAM around the gap. */
static int two_regions(void **state)
{
	static const struct gm_region spec[2] = {
		{ .gpa = 0, .size = 64 * 1024 },
		{ .gpa = 1 * MiB, .size = 64 * 1024 },
	};
	struct gm *gm = calloc(1, sizeof(*gm));

	if (!gm || gm_create(gm, spec, 2))
		return -1;
	*state = gm;
	return 0;
}

static int destroy_gm(void **state)
{
	gm_destroy(*state);
	free(*state);
	return 0;
}

/* gm_load_file: a file's bytes land in guest RAM (through the memfd, seen
 * in the mapping) at the gpa asked, from the offset asked, the bytes
 * around them untouched; refused: outside RAM or across the hole
 * (-EINVAL), a file that ends first (-EIO), memory that is not the memfd
 * (-EOPNOTSUPP: a snapshot's private mapping, anonymous memory). */
static void load_file_into_memfd(void **state)
{
	struct gm *gm = *state, anon;
	static const struct gm_region one = { .gpa = 0, .size = 64 * 1024 };
	char path[] = "/tmp/test_gm_load.XXXXXX";
	uint8_t buf[3 * 4096 + 100], got[sizeof(buf)];
	int fd = mkstemp(path);
	size_t i;

	assert_true(fd >= 0);
	unlink(path);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13 + 1);
	assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	memset(gm_ptr(gm, 1 * MiB, 64 * 1024), 0x5a, 64 * 1024);
	/* 2 pages + 50 bytes from offset 4096 + 50, to an unaligned gpa */
	assert_int_equal(gm_load_file(gm, 1 * MiB + 10, fd, 4096 + 50, 2 * 4096 + 50), 0);
	assert_int_equal(gm_read(gm, 1 * MiB + 10, got, 2 * 4096 + 50), 0);
	assert_memory_equal(got, buf + 4096 + 50, 2 * 4096 + 50);
	assert_int_equal(gm_read(gm, 1 * MiB, got, 10), 0);
	for (i = 0; i < 10; i++)
		assert_int_equal(got[i], 0x5a);
	assert_int_equal(gm_read(gm, 1 * MiB + 10 + 2 * 4096 + 50, got, 1), 0);
	assert_int_equal(got[0], 0x5a);
	/* and into region 0, at 0 */
	assert_int_equal(gm_load_file(gm, 0, fd, 0, sizeof(buf)), 0);
	assert_memory_equal(gm_ptr(gm, 0, sizeof(buf)), buf, sizeof(buf));
	/* refused */
	assert_int_equal(gm_load_file(gm, 512 * 1024, fd, 0, 16), -EINVAL);     /* the hole */
	assert_int_equal(gm_load_file(gm, 60 * 1024, fd, 0, 8192), -EINVAL);    /* past region 0 */
	assert_int_equal(gm_load_file(gm, 1 * MiB, fd, 4096, sizeof(buf)), -EIO); /* the file ends */
	assert_int_equal(gm_create_anon(&anon, &one, 1), 0);
	assert_int_equal(gm_load_file(&anon, 0, fd, 0, 16), -EOPNOTSUPP);
	gm_destroy(&anon);
	close(fd);
}

static void ptr_edges(void **state)
{
	struct gm *gm = *state;
	uint64_t end0 = 64 * 1024;

	assert_non_null(gm_ptr(gm, 0, 1));
	assert_non_null(gm_ptr(gm, 0, end0));
	assert_non_null(gm_ptr(gm, end0 - 1, 1));
	assert_null(gm_ptr(gm, end0 - 1, 2));    /* runs one byte past the end */
	assert_null(gm_ptr(gm, end0, 1));        /* first byte of the hole */
	assert_null(gm_ptr(gm, 512 * 1024, 16)); /* inside the hole */
	assert_non_null(gm_ptr(gm, 1 * MiB, 16));
	assert_null(gm_ptr(gm, 1 * MiB - 8, 16)); /* straddles hole and region */
	assert_null(gm_ptr(gm, 1 * MiB + 64 * 1024 - 4, 8));
	/* The two regions are backed by adjacent memfd pages, but a range
	 * spanning both is still refused: they are not adjacent in the guest. */
	assert_null(gm_ptr(gm, 0, end0 + 1));
	assert_ptr_equal((uint8_t *)gm_ptr(gm, 1 * MiB, 1), gm->map + end0);
}

static void ptr_overflow(void **state)
{
	struct gm *gm = *state;

	assert_null(gm_ptr(gm, UINT64_MAX, 1));
	assert_null(gm_ptr(gm, 16, UINT64_MAX));
	assert_null(gm_ptr(gm, 16, UINT64_MAX - 8)); /* 16 + len wraps to 8 */
	assert_null(gm_ptr(gm, UINT64_MAX - 4095, 8192));
	assert_null(gm_ptr(gm, 1 * MiB + 1, UINT64_MAX));
}

static void read_write(void **state)
{
	struct gm *gm = *state;
	char buf[8] = "abcdefg", out[8];

	assert_int_equal(gm_write(gm, 1 * MiB + 100, buf, 8), 0);
	assert_int_equal(gm_read(gm, 1 * MiB + 100, out, 8), 0);
	assert_memory_equal(buf, out, 8);
	assert_int_equal(gm_write(gm, 64 * 1024 - 4, buf, 8), -EFAULT);
	assert_int_equal(gm_read(gm, 64 * 1024 - 4, out, 8), -EFAULT);
}

static void create_rejects_bad_regions(void **state)
{
	struct gm gm;
	struct gm_region overlap[2] = { { .gpa = 0, .size = 8192 }, { .gpa = 4096, .size = 4096 } };
	struct gm_region unaligned[1] = { { .gpa = 100, .size = 4096 } };
	struct gm_region wrap[1] = { { .gpa = UINT64_MAX & ~4095ull, .size = 8192 } };

	(void)state;
	assert_int_equal(gm_create(&gm, overlap, 2), -EINVAL);
	assert_int_equal(gm_create(&gm, unaligned, 1), -EINVAL);
	assert_int_equal(gm_create(&gm, wrap, 1), -EINVAL);
	assert_int_equal(gm_create(&gm, overlap, 0), -EINVAL);
}

static void dump_sparse_and_private_map(void **state)
{
	struct gm *gm = *state, back;
	char path[] = "/tmp/vmm-test-gm-XXXXXX";
	int fd = mkstemp(path);
	struct stat st;
	uint8_t *p;

	assert_true(fd >= 0);
	memset(gm->map, 0, gm->total);
	memcpy(gm_ptr(gm, 4096, 5), "hello", 5);
	memcpy(gm_ptr(gm, 1 * MiB + 8192, 5), "world", 5);
	assert_int_equal(gm_dump(gm, fd), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, (off_t)gm->total);
	/* Two data pages; the zero pages are holes. */
	assert_true(st.st_blocks * 512 <= 4 * 4096);
	assert_int_equal(lseek(fd, 0, SEEK_DATA), 4096);

	assert_int_equal(gm_open_file(&back, path, gm->r, gm->nr), 0);
	assert_memory_equal(gm_ptr(&back, 4096, 5), "hello", 5);
	assert_memory_equal(gm_ptr(&back, 1 * MiB + 8192, 5), "world", 5);
	/* MAP_PRIVATE: writes stay in this mapping, the file keeps the snapshot. */
	p = gm_ptr(&back, 4096, 5);
	memcpy(p, "HELLO", 5);
	{
		char file[5];

		assert_int_equal(pread(fd, file, 5, 4096), 5);
		assert_memory_equal(file, "hello", 5);
	}
	gm_destroy(&back);
	/* A symbolic link to a file of the right size is refused: a
	 * tampered snapshot's "memory" must not hand the guest another file. */
	{
		char link[sizeof(path) + 8];

		snprintf(link, sizeof(link), "%s.link", path);
		unlink(link);
		assert_int_equal(symlink(path, link), 0);
		assert_int_equal(gm_open_file(&back, link, gm->r, gm->nr), -ELOOP);
		unlink(link);
	}
	/* A file of the wrong size is refused. */
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(gm_open_file(&back, path, gm->r, gm->nr), -EINVAL);
	close(fd);
	unlink(path);
}

/* The pages of a snapshot's mapping that differ from its file: written
 * ones only (read, untouched and given back ones read as the file); a
 * shared memfd mapping has no file to differ from. */
static void private_pages(void **state)
{
	struct gm *gm = *state, back;
	char path[] = "/tmp/vmm-test-gm-XXXXXX";
	int fd = mkstemp(path);
	struct dirty d;
	volatile uint8_t sink;
	uint8_t *p;

	assert_true(fd >= 0);
	memset(gm->map, 0, gm->total);
	memcpy(gm_ptr(gm, 4096, 5), "hello", 5);
	assert_int_equal(gm_dump(gm, fd), 0);
	assert_int_equal(gm_private_pages(gm, &d), -EINVAL);
	assert_int_equal(gm_open_file(&back, path, gm->r, gm->nr), 0);
	assert_int_equal(gm_private_pages(&back, &d), 0);
	assert_int_equal(dirty_count(&d), 0);
	dirty_free(&d);
	sink = *(volatile uint8_t *)gm_ptr(&back, 4096, 1);  /* read: still the file's page */
	sink = *(volatile uint8_t *)gm_ptr(&back, 12288, 1); /* a hole, read */
	(void)sink;
	memcpy(gm_ptr(&back, 8192, 1), "x", 1);               /* file offset page 2 */
	memcpy(gm_ptr(&back, 1 * MiB + 4096, 1), "y", 1);     /* region 2: file page 17 */
	p = gm_ptr(&back, 1 * MiB + 8192, 1);                  /* page 18, then given back */
	*p = 1;
	assert_int_equal(gm_private_pages(&back, &d), 0);
	assert_int_equal(dirty_count(&d), 3);
	assert_true(dirty_test(&d, 2) && dirty_test(&d, 17) && dirty_test(&d, 18));
	dirty_free(&d);
	assert_int_equal(madvise(p, 4096, MADV_DONTNEED), 0);
	assert_int_equal(gm_private_pages(&back, &d), 0);
	assert_int_equal(dirty_count(&d), 2);
	assert_false(dirty_test(&d, 18));
	assert_int_equal(*p, 0); /* the file's content again */
	dirty_free(&d);
	gm_destroy(&back);
	close(fd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layout_small),
		cmocka_unit_test(layout_split),
		cmocka_unit_test(layout_invalid),
		cmocka_unit_test(create_rejects_bad_regions),
		cmocka_unit_test_setup_teardown(ptr_edges, two_regions, destroy_gm),
		cmocka_unit_test_setup_teardown(ptr_overflow, two_regions, destroy_gm),
		cmocka_unit_test_setup_teardown(read_write, two_regions, destroy_gm),
		cmocka_unit_test_setup_teardown(dump_sparse_and_private_map, two_regions, destroy_gm),
		cmocka_unit_test_setup_teardown(private_pages, two_regions, destroy_gm),
		cmocka_unit_test_setup_teardown(load_file_into_memfd, two_regions, destroy_gm),
	};

	return cmocka_run_group_tests_name("gm", tests, NULL, NULL);
}
