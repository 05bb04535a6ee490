/* virtio-blk: request parser table tests, then the device end to end over
 * the transport on a temporary image (no KVM). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "devices/virtio_blk.h"
#include "tests/unit/virtio_driver.h"
#include "tests/unit/vq_builder.h"

#define CAP 2048 /* sectors: a 1 MiB image */
#define ALLF ((1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_BLK_F_DISCARD) | (1ull << VIRTIO_BLK_F_WRITE_ZEROES))

static uint8_t parse(uint32_t type, uint64_t sector, uint64_t rd, uint64_t wr, int ro, uint64_t feat,
		     struct blk_req *req)
{
	struct virtio_blk_outhdr h = { .type = type, .sector = sector };

	return blk_parse(&h, rd, wr, CAP, ro, feat, req);
}

static void parse_table(void **state)
{
	static const struct {
		uint32_t type;
		uint64_t sector, rd, wr;
		int ro;
		uint64_t feat;
		uint8_t want;
		uint64_t len;
	} t[] = {
		{ VIRTIO_BLK_T_IN, 0, 0, 512, 0, ALLF, VIRTIO_BLK_S_OK, 512 },
		{ VIRTIO_BLK_T_IN, CAP - 1, 0, 512, 0, ALLF, VIRTIO_BLK_S_OK, 512 },      /* last sector */
		{ VIRTIO_BLK_T_IN, CAP - 1, 0, 1024, 0, ALLF, VIRTIO_BLK_S_IOERR, 0 },   /* one past */
		{ VIRTIO_BLK_T_IN, CAP, 0, 512, 0, ALLF, VIRTIO_BLK_S_IOERR, 0 },
		{ VIRTIO_BLK_T_IN, UINT64_MAX, 0, 512, 0, ALLF, VIRTIO_BLK_S_IOERR, 0 }, /* wraps */
		{ VIRTIO_BLK_T_IN, 0, 0, 100, 0, ALLF, VIRTIO_BLK_S_IOERR, 0 },          /* not whole sectors */
		{ VIRTIO_BLK_T_IN, 0, 0, 0, 0, ALLF, VIRTIO_BLK_S_OK, 0 },               /* empty read */
		{ VIRTIO_BLK_T_IN, 0, 0, 512, 1, ALLF, VIRTIO_BLK_S_OK, 512 },           /* reads on RO: fine */
		{ VIRTIO_BLK_T_OUT, 10, 4096, 0, 0, ALLF, VIRTIO_BLK_S_OK, 4096 },
		{ VIRTIO_BLK_T_OUT, 10, 4096, 0, 1, ALLF, VIRTIO_BLK_S_IOERR, 0 },       /* RO */
		{ VIRTIO_BLK_T_OUT, CAP - 4, 4096, 0, 0, ALLF, VIRTIO_BLK_S_IOERR, 0 },
		{ VIRTIO_BLK_T_OUT, 0, 513, 0, 0, ALLF, VIRTIO_BLK_S_IOERR, 0 },
		{ VIRTIO_BLK_T_FLUSH, 0, 0, 0, 0, ALLF, VIRTIO_BLK_S_OK, 0 },
		{ VIRTIO_BLK_T_FLUSH, 0, 0, 0, 0, 0, VIRTIO_BLK_S_UNSUPP, 0 },
		{ VIRTIO_BLK_T_GET_ID, 0, 0, 20, 0, ALLF, VIRTIO_BLK_S_OK, 0 },
		{ VIRTIO_BLK_T_GET_ID, 0, 0, 0, 0, ALLF, VIRTIO_BLK_S_IOERR, 0 },
		{ VIRTIO_BLK_T_DISCARD, 0, 16, 0, 0, ALLF, VIRTIO_BLK_S_OK, 0 },
		{ VIRTIO_BLK_T_DISCARD, 0, 16, 0, 0, 0, VIRTIO_BLK_S_UNSUPP, 0 },
		{ VIRTIO_BLK_T_DISCARD, 0, 16, 0, 1, ALLF, VIRTIO_BLK_S_IOERR, 0 },
		{ VIRTIO_BLK_T_DISCARD, 0, 20, 0, 0, ALLF, VIRTIO_BLK_S_UNSUPP, 0 },     /* partial segment */
		{ VIRTIO_BLK_T_DISCARD, 0, 0, 0, 0, ALLF, VIRTIO_BLK_S_UNSUPP, 0 },
		{ VIRTIO_BLK_T_DISCARD, 0, 16 * 33, 0, 0, ALLF, VIRTIO_BLK_S_UNSUPP, 0 },/* too many */
		{ VIRTIO_BLK_T_WRITE_ZEROES, 0, 32, 0, 0, ALLF, VIRTIO_BLK_S_OK, 0 },
		{ VIRTIO_BLK_T_WRITE_ZEROES, 0, 32, 0, 0, 0, VIRTIO_BLK_S_UNSUPP, 0 },
		{ 99, 0, 0, 0, 0, ALLF, VIRTIO_BLK_S_UNSUPP, 0 },                         /* unknown type */
		{ 2, 0, 0, 0, 0, ALLF, VIRTIO_BLK_S_UNSUPP, 0 },                          /* legacy SCSI */
	};
	struct blk_req req;
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint8_t st = parse(t[i].type, t[i].sector, t[i].rd, t[i].wr, t[i].ro, t[i].feat, &req);

		if (st != t[i].want)
			fail_msg("row %u: status %u, want %u", i, st, t[i].want);
		if (st == VIRTIO_BLK_S_OK && (t[i].type == VIRTIO_BLK_T_IN || t[i].type == VIRTIO_BLK_T_OUT))
			assert_int_equal(req.len, t[i].len);
	}
}

static void segment_checks(void **state)
{
	struct virtio_blk_discard_wz s = { .sector = 0, .num_sectors = 8, .flags = 0 };

	(void)state;
	assert_int_equal(blk_check_segment(&s, VIRTIO_BLK_T_DISCARD, CAP), VIRTIO_BLK_S_OK);
	s.flags = VIRTIO_BLK_WZ_F_UNMAP;
	assert_int_equal(blk_check_segment(&s, VIRTIO_BLK_T_DISCARD, CAP), VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(blk_check_segment(&s, VIRTIO_BLK_T_WRITE_ZEROES, CAP), VIRTIO_BLK_S_OK);
	s.flags = 4;
	assert_int_equal(blk_check_segment(&s, VIRTIO_BLK_T_WRITE_ZEROES, CAP), VIRTIO_BLK_S_UNSUPP);
	s.flags = 0;
	s.sector = CAP - 4;
	assert_int_equal(blk_check_segment(&s, VIRTIO_BLK_T_DISCARD, CAP), VIRTIO_BLK_S_IOERR);
	s.sector = UINT64_MAX - 2;
	assert_int_equal(blk_check_segment(&s, VIRTIO_BLK_T_DISCARD, CAP), VIRTIO_BLK_S_IOERR);
	s.sector = 0;
	s.num_sectors = BLK_MAX_DISCARD_SECTORS + 1;
	assert_int_equal(blk_check_segment(&s, VIRTIO_BLK_T_DISCARD, CAP), VIRTIO_BLK_S_UNSUPP);
}

static void options(void **state)
{
	struct blk_options o;
	const char *why = NULL;

	(void)state;
	assert_int_equal(blk_options_parse("path=/x.img,ro,root,id=abc", &o, &why), 0);
	assert_string_equal(o.path, "/x.img");
	assert_true(o.ro && o.root);
	assert_string_equal(o.id, "abc");
	blk_options_free(&o);
	assert_int_equal(blk_options_parse("path=/x.img,serial=0123456789abcdefghij", &o, &why), 0);
	blk_options_free(&o);
	assert_int_equal(blk_options_parse("path=/x.img,serial=0123456789abcdefghijk", &o, &why), -EINVAL);
	assert_int_equal(blk_options_parse("ro", &o, &why), -EINVAL);
	assert_int_equal(blk_options_parse("path=/x,bogus", &o, &why), -EINVAL);
	assert_int_equal(blk_options_parse("path=", &o, &why), -EINVAL);
	assert_int_equal(blk_options_parse("path=/x.img,bps=10M,iops=1k", &o, &why), 0);
	assert_int_equal(o.rl.bytes_per_s, 10000000);
	assert_int_equal(o.rl.ops_per_s, 1000);
	blk_options_free(&o);
	assert_int_equal(blk_options_parse("path=/x.img,iops=lots", &o, &why), -EINVAL);
	assert_int_equal(blk_options_parse("path=/x.img,lock=off", &o, &why), 0);
	assert_true(o.no_lock);
	blk_options_free(&o);
	assert_int_equal(blk_options_parse("path=/x.img,lock=on", &o, &why), 0);
	assert_false(o.no_lock);
	blk_options_free(&o);
	assert_int_equal(blk_options_parse("path=/x.img,lock=maybe", &o, &why), -EINVAL);
}

/* ---- disk locks ---------------------------------------------------------- */

/* Opens `path` as a device would (rw or ro, lock=off or not): 0 or the
 * error virtio_blk_init returned. */
static int open_disk(struct virtio_blk *b, struct vqb *q, const char *path, int ro, int no_lock)
{
	struct blk_options o = { .ro = ro, .no_lock = no_lock };

	o.path = (char *)path;
	return virtio_blk_init(b, &o, -1, &q->gm, 0xd0000000, 5, 0);
}

/* Two VMMs on one image: OFD locks conflict between two open file
 * descriptions, even in one process, which is what this checks. */
static void disk_locks(void **state)
{
	struct virtio_blk a, b;
	struct vqb q;
	char path[] = "/tmp/vmm-test-lock-XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, CAP * 512), 0);
	close(fd);
	assert_int_equal(vqb_init(&q, 16), 0);

	/* rw + rw: refused, and the probe says so beforehand */
	assert_int_equal(blk_lock_probe(path, 0), 0);
	assert_int_equal(open_disk(&a, &q, path, 0, 0), 0);
	assert_int_equal(blk_lock_probe(path, 0), 1);
	assert_int_equal(blk_lock_probe(path, 1), 1);
	assert_int_equal(open_disk(&b, &q, path, 0, 0), -EBUSY);
	/* rw + ro: refused (the reader would see a disk changing under it) */
	assert_int_equal(open_disk(&b, &q, path, 1, 0), -EBUSY);
	/* lock=off: the deliberate case */
	assert_int_equal(open_disk(&b, &q, path, 0, 1), 0);
	virtio_blk_destroy(&b);
	/* closing the device releases its lock */
	virtio_blk_destroy(&a);
	assert_int_equal(blk_lock_probe(path, 0), 0);

	/* ro + ro: both fine; then rw refused until both are gone */
	assert_int_equal(open_disk(&a, &q, path, 1, 0), 0);
	assert_int_equal(open_disk(&b, &q, path, 1, 0), 0);
	assert_int_equal(blk_lock_probe(path, 1), 0);
	assert_int_equal(blk_lock_probe(path, 0), 1);
	virtio_blk_destroy(&a);
	assert_int_equal(open_disk(&a, &q, path, 0, 0), -EBUSY);
	virtio_blk_destroy(&b);
	assert_int_equal(open_disk(&a, &q, path, 0, 0), 0);
	virtio_blk_destroy(&a);

	unlink(path);
	vqb_destroy(&q);
}

/* ---- the device over the transport ------------------------------------ */

struct fx {
	struct vqb b;
	struct virtio_blk blk;
	char path[64];
	int ro;
};

static uint64_t setup_iops;
static const char *setup_dir = "/tmp";

static int setup_common(void **state, int ro)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct blk_options o = { 0 };
	uint8_t pattern[512];
	int fd;
	unsigned i;

	if (!f || vqb_init(&f->b, 16))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/vmm-test-blk-XXXXXX", setup_dir);
	fd = mkstemp(f->path);
	if (fd < 0 || ftruncate(fd, CAP * 512))
		return -1;
	for (i = 0; i < 512; i++)
		pattern[i] = (uint8_t)i;
	if (pwrite(fd, pattern, 512, 512 * 7) != 512)
		return -1;
	close(fd);
	o.path = f->path;
	o.ro = ro;
	o.rl.ops_per_s = setup_iops;
	snprintf(o.id, sizeof(o.id), "test-serial");
	if (virtio_blk_init(&f->blk, &o, -1, &f->b.gm, 0xd0000000, 5, 0))
		return -1;
	f->ro = ro;
	*state = f;
	return 0;
}

static int setup_rw(void **state) { return setup_common(state, 0); }
static int setup_ro(void **state) { return setup_common(state, 1); }
/* On tmpfs, which has no FALLOC_FL_ZERO_RANGE: WRITE_ZEROES writes them. */
static int setup_shm(void **state)
{
	int r;

	setup_dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	r = setup_common(state, 0);
	setup_dir = "/tmp";
	return r;
}
static int setup_limited(void **state)
{
	int r;

	setup_iops = 10; /* 10 requests per second, a burst of 10 */
	r = setup_common(state, 0);
	setup_iops = 0;
	return r;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	virtio_blk_destroy(&f->blk);
	unlink(f->path);
	vqb_destroy(&f->b);
	free(f);
	return 0;
}

#define F_BLK ((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC) | ALLF)

static void start(struct fx *f)
{
	struct vq_config c = vqb_config(&f->b);

	assert_true(vd_setup(&f->blk.vdev, F_BLK, &c) & VIRTIO_STATUS_DRIVER_OK);
}

/* Submits [hdr][data][status] (data readable for OUT-like types, writable
 * for IN/GET_ID) and waits for completion. Returns the status byte, data
 * buffer address in *data. */
static uint8_t submit(struct fx *f, uint32_t type, uint64_t sector, uint32_t len, int data_writable,
		      const void *payload, uint64_t *data, uint32_t *used_len)
{
	struct virtio_blk_outhdr h = { .type = type, .sector = sector };
	uint32_t lens[3] = { 16, len, 1 };
	int w[3] = { 0, data_writable, 1 };
	uint16_t before = vqb_used_idx(&f->b), head;
	unsigned n = len ? 3 : 2;
	struct virtq_desc *d;
	uint8_t st;

	if (!len) {
		lens[1] = 1;
		w[1] = 1;
	}
	head = vqb_chain(&f->b, n, lens, w);
	d = vqb_desc(&f->b, head);
	memcpy(gm_ptr(&f->b.gm, d->addr, 16), &h, 16);
	if (len) {
		struct virtq_desc *dd = vqb_desc(&f->b, (uint16_t)(head + 1));

		*data = dd->addr;
		if (payload)
			memcpy(gm_ptr(&f->b.gm, dd->addr, len), payload, len);
	}
	vqb_set_used_event(&f->b, before);
	vd_notify(&f->blk.vdev, 0);
	assert_true(vd_wait_irq(&f->blk.vdev) & VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vqb_used_idx(&f->b), (uint16_t)(before + 1));
	*used_len = vqb_used(&f->b, before).len;
	st = *(uint8_t *)gm_ptr(&f->b.gm, vqb_desc(&f->b, (uint16_t)(head + n - 1))->addr, 1);
	if (f->b.next_desc > 12)
		f->b.next_desc = 0; /* recycle descriptors: every request completed */
	return st;
}

static void read_write_flush(void **state)
{
	struct fx *f = *state;
	uint8_t buf[1024], back[1024];
	uint64_t data;
	uint32_t used;
	unsigned i;
	int fd;

	start(f);
	/* Read sector 7: the pattern the image was made with. */
	assert_int_equal(submit(f, VIRTIO_BLK_T_IN, 7, 512, 1, NULL, &data, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 513);
	for (i = 0; i < 512; i++)
		assert_int_equal(((uint8_t *)gm_ptr(&f->b.gm, data, 512))[i], (uint8_t)i);
	/* Write two sectors, flush, and find them in the file. */
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7);
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, 100, 1024, 0, buf, &data, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 1);
	assert_int_equal(submit(f, VIRTIO_BLK_T_FLUSH, 0, 0, 0, NULL, &data, &used), VIRTIO_BLK_S_OK);
	fd = open(f->path, O_RDONLY);
	assert_int_equal(pread(fd, back, 1024, 100 * 512), 1024);
	close(fd);
	assert_memory_equal(buf, back, 1024);
	/* Past the end, and not a whole sector. */
	assert_int_equal(submit(f, VIRTIO_BLK_T_IN, CAP, 512, 1, NULL, &data, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, CAP - 1, 1024, 0, buf, &data, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, 0, 100, 0, buf, &data, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(submit(f, 77, 0, 0, 0, NULL, &data, &used), VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(f->blk.vdev.status & VIRTIO_STATUS_NEEDS_RESET, 0);
}

/* The limiter delays requests beyond the burst; none is lost or failed. */
static void rate_limited(void **state)
{
	struct fx *f = *state;
	uint64_t data;
	uint32_t used;
	unsigned i;

	start(f);
	for (i = 0; i < 14; i++)
		assert_int_equal(submit(f, VIRTIO_BLK_T_IN, i, 512, 1, NULL, &data, &used), VIRTIO_BLK_S_OK);
	assert_true(f->blk.waits > 0);
	assert_int_equal(f->blk.reqs, 14);
	assert_int_equal(f->blk.errors, 0);
}

static void get_id(void **state)
{
	struct fx *f = *state;
	uint64_t data;
	uint32_t used;

	start(f);
	assert_int_equal(submit(f, VIRTIO_BLK_T_GET_ID, 0, 20, 1, NULL, &data, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 21);
	assert_string_equal((char *)gm_ptr(&f->b.gm, data, 20), "test-serial");
}

static void discard_and_write_zeroes(void **state)
{
	struct fx *f = *state;
	struct virtio_blk_discard_wz seg[2] = {
		{ .sector = 0, .num_sectors = 2048 }, /* the whole 1 MiB */
	};
	uint8_t ones[4096], back[4096], zero[4096] = { 0 };
	uint64_t data;
	uint32_t used;
	struct stat st;
	int fd;

	start(f);
	memset(ones, 0xff, sizeof(ones));
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, 8, 4096, 0, ones, &data, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(submit(f, VIRTIO_BLK_T_FLUSH, 0, 0, 0, NULL, &data, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(submit(f, VIRTIO_BLK_T_DISCARD, 0, 16, 0, seg, &data, &used), VIRTIO_BLK_S_OK);
	fd = open(f->path, O_RDONLY);
	assert_int_equal(pread(fd, back, 4096, 8 * 512), 4096);
	assert_memory_equal(back, zero, 4096);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_blocks * 512 < 1 << 20); /* a hole now */
	/* WRITE_ZEROES with UNMAP, then one out of range (nothing happens). */
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, 8, 4096, 0, ones, &data, &used), VIRTIO_BLK_S_OK);
	seg[0] = (struct virtio_blk_discard_wz){ .sector = 8, .num_sectors = 4, .flags = VIRTIO_BLK_WZ_F_UNMAP };
	assert_int_equal(submit(f, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, 0, seg, &data, &used), VIRTIO_BLK_S_OK);
	seg[1] = (struct virtio_blk_discard_wz){ .sector = CAP, .num_sectors = 1 };
	seg[0] = (struct virtio_blk_discard_wz){ .sector = 12, .num_sectors = 4 };
	assert_int_equal(submit(f, VIRTIO_BLK_T_WRITE_ZEROES, 0, 32, 0, seg, &data, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(pread(fd, back, 4096, 8 * 512), 4096);
	assert_memory_equal(back, zero, 2048);                 /* sectors 8..11 zeroed */
	assert_memory_equal(back + 2048, ones + 2048, 2048);   /* 12..15 untouched */
	close(fd);
}

/* WRITE_ZEROES where the file system cannot zero a range: the zeros are
 * written out, 64 KiB at a time from one zeroed page, up to the exact
 * end (here 100 KiB + 3 sectors from sector 5), and nothing either side. */
static void write_zeroes_written_out(void **state)
{
	struct fx *f = *state;
	struct virtio_blk_discard_wz seg = { .sector = 5, .num_sectors = 203 };
	static uint8_t img[CAP * 512];
	uint64_t data;
	uint32_t used;
	unsigned i;
	int fd;

	if (strncmp(f->path, "/dev/shm/", 9)) {
		skip(); /* no /dev/shm here */
		return;
	}
	fd = open(f->path, O_RDWR);
	assert_true(fd >= 0);
	if (fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 0, 512) == 0) {
		close(fd);
		skip(); /* this tmpfs zeroes ranges: the write-out is not reached */
		return;
	}
	memset(img, 0xa5, sizeof(img));
	assert_int_equal(pwrite(fd, img, sizeof(img), 0), (ssize_t)sizeof(img));
	start(f);
	assert_int_equal(submit(f, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, 0, &seg, &data, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(pread(fd, img, sizeof(img), 0), (ssize_t)sizeof(img));
	for (i = 0; i < sizeof(img); i++)
		if (img[i] != (i >= 5 * 512 && i < 208 * 512 ? 0 : 0xa5))
			fail_msg("byte %u is 0x%02x", i, img[i]);
	close(fd);
}

static void read_only_refuses_writes(void **state)
{
	struct fx *f = *state;
	uint8_t buf[512], back[512];
	struct virtio_blk_discard_wz seg = { .sector = 0, .num_sectors = 8 };
	uint64_t data;
	uint32_t used;
	int fd;

	memset(buf, 0xee, sizeof(buf));
	start(f);
	assert_int_equal(f->blk.vdev.driver_features & (1ull << VIRTIO_BLK_F_DISCARD), 0);
	assert_true(f->blk.vdev.features & (1ull << VIRTIO_BLK_F_RO));
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, 7, 512, 0, buf, &data, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(submit(f, VIRTIO_BLK_T_DISCARD, 0, 16, 0, &seg, &data, &used), VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(submit(f, VIRTIO_BLK_T_IN, 7, 512, 1, NULL, &data, &used), VIRTIO_BLK_S_OK);
	fd = open(f->path, O_RDONLY);
	assert_int_equal(pread(fd, back, 512, 7 * 512), 512);
	close(fd);
	assert_int_equal(back[1], 1); /* unchanged */
}

static void malformed_requests(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->blk.vdev;
	const uint32_t lens[] = { 8, 1 }; /* header too short */
	const int w[] = { 0, 1 };
	const uint32_t lens2[] = { 16 };  /* no status byte at all */
	const int w2[] = { 0 };
	struct vq_config c;

	start(f);
	vqb_chain(&f->b, 2, lens, w);
	vd_notify(d, 0);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_CONFIG);
	assert_true(vd_rd(d, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
	/* Reset, start over, then a request without a status byte. */
	vqb_destroy(&f->b);
	assert_int_equal(vqb_init(&f->b, 16), 0);
	d->gm = &f->b.gm;
	c = vqb_config(&f->b);
	assert_true(vd_setup(d, F_BLK, &c) & VIRTIO_STATUS_DRIVER_OK);
	vqb_chain(&f->b, 1, lens2, w2);
	vd_notify(d, 0);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_CONFIG);
	assert_true(vd_rd(d, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
}

static void host_errors_are_ioerr(void **state)
{
	struct fx *f = *state;
	struct rlimit old, lim = { .rlim_cur = 512 * 1024, .rlim_max = RLIM_INFINITY };
	uint8_t buf[4096];
	uint64_t data;
	uint32_t used;

	/* A file-size limit makes the host's pwritev fail (EFBIG) past
	 * 512 KiB, as a full disk would (ENOSPC): the guest gets IOERR and
	 * the device keeps serving. */
	memset(buf, 0x42, sizeof(buf));
	start(f);
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim.rlim_max = old.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, 1500, 4096, 0, buf, &data, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, 16, 4096, 0, buf, &data, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(submit(f, VIRTIO_BLK_T_OUT, 1500, 4096, 0, buf, &data, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(f->blk.vdev.status & VIRTIO_STATUS_NEEDS_RESET, 0);
	assert_true(f->blk.errors >= 1);
}

static void config_space(void **state)
{
	struct fx *f = *state;
	uint64_t cap;

	f->blk.vdev.bus.ops->read(&f->blk.vdev.bus, 0x100, &cap, 8);
	assert_int_equal(cap, CAP);
}

/* PATCH /drives (virtio_blk_update): a live driver sees the new capacity
 * in config space, a new config generation (virtio 1.2 2.5.1) and a
 * configuration change interrupt (4.2.2); the new file serves reads. A
 * file that cannot be opened changes nothing. */
static void update_backing_file(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->blk.vdev;
	char path[64];
	const char *why = NULL;
	uint32_t gen, lo, hi;
	int fd;

	start(f);
	gen = vd_rd(d, 0x0fc);
	assert_int_equal(vd_rd(d, 0x100), CAP);
	assert_int_not_equal(virtio_blk_update(&f->blk, "/nonexistent/disk", NULL, &why), 0);
	assert_non_null(why);
	assert_int_equal(vd_rd(d, 0x0fc), gen);
	assert_int_equal(vd_rd(d, 0x100), CAP);
	snprintf(path, sizeof(path), "/tmp/vmm-test-blk-new-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 3 * CAP * 512), 0);
	close(fd);
	assert_int_equal(virtio_blk_update(&f->blk, path, NULL, &why), 0);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_CONFIG);
	assert_int_not_equal(vd_rd(d, 0x0fc), gen);
	lo = vd_rd(d, 0x100);
	hi = vd_rd(d, 0x104);
	assert_int_equal(((uint64_t)hi << 32) | lo, 3 * CAP);
	/* The limiter alone: no new file, no config change. */
	gen = vd_rd(d, 0x0fc);
	{
		struct rl_limits l = { .ops_per_s = 5, .ops_burst = 5 };

		assert_int_equal(virtio_blk_update(&f->blk, NULL, &l, &why), 0);
	}
	assert_int_equal(vd_rd(d, 0x0fc), gen);
	assert_int_equal(f->blk.rl.ops.rate, 5);
	assert_true(f->blk.timer_fd >= 0);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_table),
		cmocka_unit_test(segment_checks),
		cmocka_unit_test(options),
		cmocka_unit_test(disk_locks),
		cmocka_unit_test_setup_teardown(read_write_flush, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(get_id, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(update_backing_file, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(discard_and_write_zeroes, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(write_zeroes_written_out, setup_shm, teardown),
		cmocka_unit_test_setup_teardown(read_only_refuses_writes, setup_ro, teardown),
		cmocka_unit_test_setup_teardown(malformed_requests, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(host_errors_are_ioerr, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(config_space, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(rate_limited, setup_limited, teardown),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests_name("virtio_blk", tests, NULL, NULL);
}
