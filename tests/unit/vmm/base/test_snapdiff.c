/* Dirty tracking and diff snapshots without KVM: the bitmap (ranges across
 * word edges, KVM-layout merges, take/merge back, concurrent marks from
 * several threads), gm marking the pages it hands out for writing, the
 * identity section, the diff page writer/reader over fake memory, and the
 * in-place commit killed after each of its steps (fault injection): what
 * the next open finds is always the old snapshot or the new one, whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/virtqueue.h"
#include "vmm/base/dirty.h"
#include "vmm/base/gm.h"
#include "vmm/base/snapfmt_diff.h"
#include "vmm/base/snapfmt.h"

#define PG 4096ull

static char *tmpdir(void)
{
	char *d = strdup("/tmp/test_snapdiff.XXXXXX");

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void rm_rf(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* ---- bitmap ---- */

static void bitmap_ranges(void **state)
{
	struct dirty d;

	(void)state;
	assert_int_equal(dirty_init(&d, 200), 0);
	dirty_mark(&d, 0, 1);                 /* page 0 */
	dirty_mark(&d, 62 * PG + 5, 3 * PG);  /* pages 62..65: crosses a word */
	dirty_mark(&d, 127 * PG, 1);          /* last bit of word 1 */
	dirty_mark(&d, 199 * PG, 10 * PG);    /* clipped at the end */
	dirty_mark(&d, 100 * PG, 0);          /* nothing */
	assert_int_equal(dirty_count(&d), 1 + 4 + 1 + 1);
	assert_true(dirty_test(&d, 62) && dirty_test(&d, 65) && !dirty_test(&d, 66) && !dirty_test(&d, 61));
	assert_true(dirty_test(&d, 127) && dirty_test(&d, 199) && !dirty_test(&d, 100));
	assert_int_equal(dirty_next(&d, 1), 62);
	assert_int_equal(dirty_next(&d, 66), 127);
	assert_int_equal(dirty_next(&d, 128), 199);
	assert_int_equal(dirty_next(&d, 200), 200);
	/* A whole-word range and one spanning three words. */
	dirty_clear(&d);
	dirty_mark(&d, 64 * PG, 64 * PG);
	assert_int_equal(dirty_count(&d), 64);
	assert_int_equal(d.w[1], ~0ull);
	dirty_mark(&d, 10 * PG, 180 * PG);
	assert_int_equal(dirty_count(&d), 180);
	dirty_free(&d);
}

static void bitmap_kvm_merge_take(void **state)
{
	struct dirty d, out, wrong;
	uint64_t kvm[2] = { 0x8000000000000001ull, 0xffull }; /* pages 0, 63, 64..71 */

	(void)state;
	assert_int_equal(dirty_init(&d, 1000), 0);
	assert_int_equal(dirty_init(&out, 1000), 0);
	assert_int_equal(dirty_init(&wrong, 999), 0);
	/* A slot that starts on a word boundary (word OR) and one that does
	 * not (bit by bit); only the first nbits count. */
	dirty_or_bits(&d, 128, kvm, 70);
	assert_int_equal(dirty_count(&d), 2 + 6);
	assert_true(dirty_test(&d, 128) && dirty_test(&d, 191) && dirty_test(&d, 197) && !dirty_test(&d, 198));
	dirty_or_bits(&d, 3, kvm, 128);
	assert_true(dirty_test(&d, 3) && dirty_test(&d, 66) && dirty_test(&d, 74) && !dirty_test(&d, 75));
	uint64_t before = dirty_count(&d);

	/* take: moves every bit, leaves none. */
	dirty_mark(&out, 999 * PG, 1); /* cleared by take */
	assert_int_equal(dirty_take(&d, &out), 0);
	assert_int_equal(dirty_count(&d), 0);
	assert_int_equal(dirty_count(&out), before);
	assert_false(dirty_test(&out, 999));
	/* A failed snapshot gives them back; new marks meanwhile stay. */
	dirty_mark(&d, 500 * PG, 1);
	assert_int_equal(dirty_merge(&d, &out), 0);
	assert_int_equal(dirty_count(&d), before + 1);
	assert_int_equal(dirty_merge(&d, &wrong), -EINVAL);
	assert_int_equal(dirty_take(&d, &wrong), -EINVAL);
	dirty_free(&d);
	dirty_free(&out);
	dirty_free(&wrong);
}

struct marker {
	struct dirty *d;
	unsigned k;
};

static void *mark_thread(void *arg)
{
	struct marker *m = arg;
	uint64_t p;

	/* Thread k marks every page p with p % 4 == k, plus page 0 for all:
	 * neighbours share every word, so lost updates would show. */
	for (int rep = 0; rep < 20; rep++)
		for (p = m->k; p < 4096; p += 4) {
			dirty_mark(m->d, p * PG, 1);
			dirty_mark(m->d, 0, 1);
		}
	return NULL;
}

static void bitmap_concurrent(void **state)
{
	struct dirty d, out;
	pthread_t t[4];
	struct marker m[4];
	uint64_t total = 0;

	(void)state;
	assert_int_equal(dirty_init(&d, 4096), 0);
	assert_int_equal(dirty_init(&out, 4096), 0);
	for (unsigned i = 0; i < 4; i++) {
		m[i] = (struct marker){ &d, i };
		assert_int_equal(pthread_create(&t[i], NULL, mark_thread, &m[i]), 0);
	}
	/* Take while they mark: a bit lands in `out` or stays, never lost. */
	for (int i = 0; i < 50; i++) {
		assert_int_equal(dirty_take(&d, &out), 0);
		total += dirty_count(&out) ? 1 : 0;
		assert_int_equal(dirty_merge(&d, &out), 0);
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(dirty_count(&d), 4096);
	(void)total;
	dirty_free(&d);
	dirty_free(&out);
}

/* gm: writes through gm_write/gm_ptr_w/gm_discard and the virtqueue's
 * writable buffers and used ring are marked; reads are not. */
static void gm_marks_writes(void **state)
{
	struct gm gm;
	uint8_t buf[64] = { 1 };
	const uint8_t *rd;

	(void)state;
	assert_int_equal(gm_create_x86(&gm, 1 << 20), 0);
	gm_mark_host(&gm, gm.map, 1); /* tracking off: nothing, no crash */
	assert_int_equal(gm_track_dirty(&gm), 0);
	assert_int_equal(gm.dirty.pages, 256);
	assert_int_equal(gm_write(&gm, 5 * PG + 4090, buf, 10), 0); /* pages 5 and 6 */
	rd = gm_ptr(&gm, 9 * PG, 100);
	assert_non_null(rd);
	assert_non_null(gm_ptr_w(&gm, 20 * PG, 1));
	assert_int_equal(gm_discard(&gm, 30 * PG, 2 * PG), 0);
	assert_true(dirty_test(&gm.dirty, 5) && dirty_test(&gm.dirty, 6));
	assert_false(dirty_test(&gm.dirty, 9)); /* read only */
	assert_true(dirty_test(&gm.dirty, 20) && dirty_test(&gm.dirty, 30) && dirty_test(&gm.dirty, 31));
	assert_int_equal(dirty_count(&gm.dirty), 5);
	gm_mark_host(&gm, buf, 1); /* not guest RAM: ignored */
	assert_int_equal(dirty_count(&gm.dirty), 5);

	/* A virtqueue: descriptor table at page 40, avail 41, used 42; one
	 * readable buffer (page 50) and one writable (pages 60-61). */
	{
		struct vq_config c = { .size = 4, .desc = 40 * PG, .avail = 41 * PG, .used = 42 * PG };
		struct virtq_desc *desc = gm_ptr(&gm, 40 * PG, 64);
		uint16_t *avail = gm_ptr(&gm, 41 * PG, 16);
		struct vq q;
		struct vq_chain *ch = calloc(1, sizeof(*ch));
		const char *why = NULL;

		assert_non_null(ch);
		desc[0] = (struct virtq_desc){ .addr = 50 * PG, .len = 100, .flags = VIRTQ_DESC_F_NEXT, .next = 1 };
		desc[1] = (struct virtq_desc){ .addr = 60 * PG + 10, .len = PG, .flags = VIRTQ_DESC_F_WRITE };
		avail[2] = 0;
		avail[1] = 1;
		dirty_clear(&gm.dirty);
		assert_int_equal(vq_init(&q, &gm, &c, 16, 0, 0, &why), 0);
		assert_int_equal(vq_pop(&q, ch, &why), 1);
		assert_true(dirty_test(&gm.dirty, 60) && dirty_test(&gm.dirty, 61));
		assert_false(dirty_test(&gm.dirty, 50) || dirty_test(&gm.dirty, 40) || dirty_test(&gm.dirty, 41));
		assert_false(dirty_test(&gm.dirty, 42));
		vq_push(&q, ch->head, 7);
		assert_true(dirty_test(&gm.dirty, 42));
		assert_int_equal(dirty_count(&gm.dirty), 3);

		/* A queue whose buffers the device never writes (the balloon's
		 * reporting queue): its writable buffer is not marked, its
		 * used ring is. */
		avail[2 + 1] = 0;
		avail[1] = 2;
		dirty_clear(&gm.dirty);
		q.unwritten = 1;
		assert_int_equal(vq_pop(&q, ch, &why), 1);
		assert_int_equal(ch->nr_write, 1);
		assert_int_equal(dirty_count(&gm.dirty), 0);
		vq_push(&q, ch->head, 0);
		assert_true(dirty_test(&gm.dirty, 42));
		assert_int_equal(dirty_count(&gm.dirty), 1);
		free(ch);
	}
	gm_destroy(&gm);
}

/* gm over a memory file (MAP_PRIVATE, as a restore and a resumed standby
 * map it): a page the balloon gives back reads the file's page again and
 * is not marked (a diff against that file holds it already); a page the
 * guest wrote and then gave back stays marked by that write. */
static void gm_private_discard_unmarked(void **state)
{
	struct gm_region r = { .gpa = 0, .size = 64 * PG };
	char *dir = tmpdir(), path[512];
	uint8_t *pages = malloc(64 * PG), buf[8] = { 0xee };
	const uint8_t *p;
	struct gm gm;
	int fd;

	(void)state;
	assert_non_null(pages);
	for (unsigned i = 0; i < 64; i++)
		memset(pages + i * PG, 0x10 + i, PG);
	snprintf(path, sizeof(path), "%s/memory", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, pages, 64 * PG), (ssize_t)(64 * PG));
	close(fd);
	assert_int_equal(gm_open_file(&gm, path, &r, 1), 0);
	assert_int_equal(gm_track_dirty(&gm), 0);
	assert_int_equal(gm_write(&gm, 3 * PG, buf, sizeof(buf)), 0);
	assert_non_null(gm_ptr_w(&gm, 7 * PG, PG));
	memset(gm_ptr(&gm, 7 * PG, PG), 0xee, PG);
	assert_int_equal(gm_discard(&gm, 3 * PG, PG), 0);
	assert_int_equal(gm_discard(&gm, 20 * PG, 4 * PG), 0);
	assert_int_equal(gm_discard_host(&gm, gm_ptr(&gm, 30 * PG, PG), PG), 0);
	p = gm_ptr(&gm, 0, 64 * PG);
	assert_int_equal(p[3 * PG], 0x13); /* the file's page again */
	assert_int_equal(p[21 * PG + 100], 0x10 + 21);
	assert_int_equal(p[7 * PG], 0xee); /* written, not given back */
	assert_true(dirty_test(&gm.dirty, 3) && dirty_test(&gm.dirty, 7));
	for (unsigned i = 20; i < 24; i++)
		assert_false(dirty_test(&gm.dirty, i));
	assert_false(dirty_test(&gm.dirty, 30));
	assert_int_equal(dirty_count(&gm.dirty), 2);
	gm_destroy(&gm);
	free(pages);
	rm_rf(dir);
	free(dir);
}

/* ---- identity ---- */

static void ident_roundtrip(void **state)
{
	struct snap_ident a = { .kind = SNAP_KIND_DIFF }, b;
	struct sbuf sb;
	struct srd r;

	(void)state;
	assert_int_equal(snapid_new(a.id), 0);
	assert_int_equal(snapid_new(a.base_id), 0);
	assert_false(snapid_is_zero(a.id));
	assert_memory_not_equal(a.id, a.base_id, SNAP_ID_LEN);
	snprintf(a.base_dir, sizeof(a.base_dir), "/snap/base");
	assert_int_equal(dirty_init(&a.pages, 130), 0);
	dirty_mark(&a.pages, 3 * PG, 2 * PG);
	dirty_mark(&a.pages, 129 * PG, 1);
	sb_init(&sb);
	snapid_save(&sb, &a);
	assert_int_equal(sb.err, 0);
	sr_init(&r, sb.p, sb.len);
	assert_int_equal(snapid_load(&r, &b, 130), 0);
	assert_memory_equal(a.id, b.id, SNAP_ID_LEN);
	assert_memory_equal(a.base_id, b.base_id, SNAP_ID_LEN);
	assert_string_equal(b.base_dir, "/snap/base");
	assert_int_equal(b.kind, SNAP_KIND_DIFF);
	assert_int_equal(dirty_count(&b.pages), 3);
	assert_true(dirty_test(&b.pages, 129));
	snapid_free(&b);
	/* The guest's page count must match the bitmap's. */
	sr_init(&r, sb.p, sb.len);
	assert_int_equal(snapid_load(&r, &b, 131), -EINVAL);
	/* A bit past the last page is refused (130 pages: word 2 holds 2). */
	{
		size_t last = sb.len - 8;
		uint64_t w;

		memcpy(&w, sb.p + last, 8);
		w |= 1ull << 5;
		memcpy(sb.p + last, &w, 8);
		sr_init(&r, sb.p, sb.len);
		assert_int_equal(snapid_load(&r, &b, 130), -EINVAL);
	}
	/* No SNID section (an older snapshot): a full one, ID zero. */
	sr_init(&r, (const uint8_t *)"MEMR\0\0\0\0", 8);
	assert_int_equal(snapid_load(&r, &b, 130), 0);
	assert_true(snapid_is_zero(b.id));
	assert_int_equal(b.kind, SNAP_KIND_FULL);
	sb_free(&sb);
	snapid_free(&a);
}

/* ---- page files ---- */

static void diff_pages_roundtrip(void **state)
{
	const uint64_t n = 300;
	uint8_t *mem = malloc(n * PG), *base = malloc(n * PG), *expect = malloc(n * PG);
	char *dir = tmpdir(), path[512];
	struct dirty d;
	struct stat st;
	uint64_t written = 0, p;
	int fd;

	(void)state;
	assert_non_null(mem);
	assert_non_null(base);
	assert_non_null(expect);
	for (p = 0; p < n; p++) {
		memset(base + p * PG, (int)(p & 0x7f) | 0x80, PG);
		memset(mem + p * PG, (int)(p & 0x7f), PG);
	}
	assert_int_equal(dirty_init(&d, n), 0);
	dirty_mark(&d, 0, PG);
	dirty_mark(&d, 63 * PG, 3 * PG);  /* a run across a word edge */
	dirty_mark(&d, 299 * PG, PG);     /* the last page */
	memset(mem + 64 * PG, 0, PG);     /* a dirtied page that is now zeros */
	snprintf(path, sizeof(path), "%s/memory", dir);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(snapmem_write_pages(mem, n * PG, &d, fd, &written), 0);
	assert_int_equal(written, 5 * PG);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, (off_t)(n * PG)); /* laid out as a full one */
	/* Overlaid on the base: the diff's pages, the base's elsewhere, the
	 * zero page included (the bitmap decides, not the holes). */
	memcpy(expect, base, n * PG);
	memcpy(expect, mem, PG);
	memcpy(expect + 63 * PG, mem + 63 * PG, 3 * PG);
	memcpy(expect + 299 * PG, mem + 299 * PG, PG);
	assert_int_equal(snapmem_read_pages(base, n * PG, &d, fd), 0);
	assert_memory_equal(base, expect, n * PG);
	/* A short diff file is an error, not zeros. */
	assert_int_equal(ftruncate(fd, 100 * PG), 0);
	assert_int_equal(snapmem_read_pages(base, n * PG, &d, fd), -EIO);
	close(fd);
	dirty_free(&d);
	free(mem);
	free(base);
	free(expect);
	rm_rf(dir);
	free(dir);
}

/* ---- in-place commit with fault injection ---- */

#define IP_PAGES 200ull

struct ip_fixture {
	char *dir;
	uint8_t *old_mem, *new_mem;
	uint8_t old_id[SNAP_ID_LEN], new_id[SNAP_ID_LEN];
	struct dirty pages;
	struct sbuf new_state;
};

static void write_file(const char *dir, const char *name, const void *p, size_t n)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	assert_int_equal(fsync(fd), 0);
	close(fd);
}

static int read_file(const char *dir, const char *name, void *p, size_t n)
{
	char path[512];
	int fd;
	ssize_t g;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	g = read(fd, p, n);
	close(fd);
	return g == (ssize_t)n ? 0 : -EIO;
}

static int exists(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

static void state_with_id(struct sbuf *b, const uint8_t id[SNAP_ID_LEN])
{
	struct snap_ident i = { .kind = SNAP_KIND_FULL };

	memcpy(i.id, id, SNAP_ID_LEN);
	sb_init(b);
	sb_begin(b, SNAP_TAG('C', 'O', 'N', 'F'));
	sb_u64(b, IP_PAGES * PG);
	sb_end(b);
	snapid_save(b, &i);
}

static void ip_setup(struct ip_fixture *f)
{
	struct sbuf old;
	char path[512];
	uint64_t p;

	f->dir = tmpdir();
	f->old_mem = malloc(IP_PAGES * PG);
	f->new_mem = malloc(IP_PAGES * PG);
	assert_non_null(f->old_mem);
	assert_non_null(f->new_mem);
	assert_int_equal(snapid_new(f->old_id), 0);
	assert_int_equal(snapid_new(f->new_id), 0);
	for (p = 0; p < IP_PAGES; p++)
		memset(f->old_mem + p * PG, (int)(p % 100), PG);
	memcpy(f->new_mem, f->old_mem, IP_PAGES * PG);
	assert_int_equal(dirty_init(&f->pages, IP_PAGES), 0);
	for (p = 10; p < IP_PAGES; p += 7) {
		memset(f->new_mem + p * PG, 0xA0 | (int)(p & 0xf), PG);
		dirty_mark(&f->pages, p * PG, PG);
	}
	/* The existing snapshot: state (old ID), memory (old), disk0 (old). */
	state_with_id(&old, f->old_id);
	snprintf(path, sizeof(path), "%s/state", f->dir);
	assert_int_equal(snapfile_write(path, &old), 0);
	sb_free(&old);
	write_file(f->dir, "memory", f->old_mem, IP_PAGES * PG);
	write_file(f->dir, "disk0", "old-disk", 8);
	write_file(f->dir, "disk0.next", "new-disk", 8);
	state_with_id(&f->new_state, f->new_id);
}

static void ip_teardown(struct ip_fixture *f)
{
	rm_rf(f->dir);
	free(f->dir);
	free(f->old_mem);
	free(f->new_mem);
	dirty_free(&f->pages);
	sb_free(&f->new_state);
}

/* Either the old snapshot or the new one, whole; nothing left over. */
static int ip_outcome(struct ip_fixture *f)
{
	uint8_t id[SNAP_ID_LEN], *mem = malloc(IP_PAGES * PG);
	char disk[9] = { 0 };
	int which;

	assert_non_null(mem);
	assert_int_equal(snap_state_id(f->dir, id), 0);
	assert_int_equal(read_file(f->dir, "memory", mem, IP_PAGES * PG), 0);
	assert_int_equal(read_file(f->dir, "disk0", disk, 8), 0);
	if (!memcmp(id, f->old_id, SNAP_ID_LEN)) {
		assert_memory_equal(mem, f->old_mem, IP_PAGES * PG);
		assert_string_equal(disk, "old-disk");
		which = 0;
	} else {
		assert_memory_equal(id, f->new_id, SNAP_ID_LEN);
		assert_memory_equal(mem, f->new_mem, IP_PAGES * PG);
		assert_string_equal(disk, "new-disk");
		which = 1;
	}
	assert_false(exists(f->dir, SNAP_JOURNAL_FILE));
	assert_false(exists(f->dir, SNAP_STATE_NEW));
	assert_false(exists(f->dir, "disk0.next"));
	free(mem);
	return which;
}

static int crash_at(void *ctx, enum snap_step s)
{
	return (int)s == *(int *)ctx;
}

static void inplace_no_fault(void **state)
{
	struct ip_fixture f;
	uint64_t written = 0;

	(void)state;
	ip_setup(&f);
	struct snap_inplace u = { .dir = f.dir, .mem = f.new_mem, .total = IP_PAGES * PG, .pages = &f.pages,
				  .state = &f.new_state, .disk_mask = 1 };
	memcpy(u.new_id, f.new_id, SNAP_ID_LEN);
	assert_int_equal(snap_inplace_commit(&u, &written), 0);
	/* Journal: header page + index page + the 28 dirty pages. */
	assert_int_equal(written, (2 + dirty_count(&f.pages)) * PG);
	assert_int_equal(ip_outcome(&f), 1);
	ip_teardown(&f);
}

/* A tampered snapshot whose "memory" is a symbolic link to another file:
 * the update refuses it and never writes guest pages into that file. */
static void inplace_memory_link(void **state)
{
	struct ip_fixture f;
	char mem[512], victim[512];
	uint8_t *got = malloc(IP_PAGES * PG);

	(void)state;
	assert_non_null(got);
	ip_setup(&f);
	snprintf(mem, sizeof(mem), "%s/memory", f.dir);
	snprintf(victim, sizeof(victim), "%s/victim", f.dir);
	assert_int_equal(rename(mem, victim), 0);
	assert_int_equal(symlink(victim, mem), 0);
	struct snap_inplace u = { .dir = f.dir, .mem = f.new_mem, .total = IP_PAGES * PG, .pages = &f.pages,
				  .state = &f.new_state, .disk_mask = 1 };
	memcpy(u.new_id, f.new_id, SNAP_ID_LEN);
	assert_int_equal(snap_inplace_commit(&u, NULL), -ELOOP);
	assert_int_equal(read_file(f.dir, "victim", got, IP_PAGES * PG), 0);
	assert_memory_equal(got, f.old_mem, IP_PAGES * PG);
	assert_false(exists(f.dir, SNAP_JOURNAL_FILE));
	free(got);
	ip_teardown(&f);
}

static void inplace_crash_each_step(void **state)
{
	(void)state;
	for (int step = 0; step < SNAP_STEP_COUNT; step++) {
		struct ip_fixture f;
		struct snap_fault fault = { crash_at, &step };

		ip_setup(&f);
		struct snap_inplace u = { .dir = f.dir, .mem = f.new_mem, .total = IP_PAGES * PG,
					  .pages = &f.pages, .state = &f.new_state, .disk_mask = 1,
					  .fault = &fault };
		memcpy(u.new_id, f.new_id, SNAP_ID_LEN);
		assert_int_equal(snap_inplace_commit(&u, NULL), -ECANCELED);
		/* The process is gone; what the next open does: */
		if (step == SNAP_STEP_MEMORY_HALF) {
			/* Really torn: some new pages in, some not. */
			uint8_t *mem = malloc(IP_PAGES * PG);

			assert_int_equal(read_file(f.dir, "memory", mem, IP_PAGES * PG), 0);
			assert_memory_equal(mem + 10 * PG, f.new_mem + 10 * PG, PG);
			assert_memory_equal(mem + 192 * PG, f.old_mem + 192 * PG, PG);
			free(mem);
		}
		assert_int_equal(snap_recover(f.dir), 0);
		print_message("crash after step %d: the %s snapshot\n", step,
			      ip_outcome(&f) ? "new" : "old");
		assert_int_equal(ip_outcome(&f), step >= SNAP_STEP_COMMITTED ? 1 : 0);
		/* Recovery is idempotent. */
		assert_int_equal(snap_recover(f.dir), 0);
		ip_outcome(&f);
		ip_teardown(&f);
	}
}

/* A journal cut short (the crash hit while it was being written) or
 * flipped by the disk: the old snapshot, never a half-applied one. */
static void inplace_torn_journal(void **state)
{
	for (int variant = 0; variant < 3; variant++) {
		struct ip_fixture f;
		int step = SNAP_STEP_COMMITTED;
		struct snap_fault fault = { crash_at, &step };
		char jp[512];
		int fd;

		(void)state;
		ip_setup(&f);
		struct snap_inplace u = { .dir = f.dir, .mem = f.new_mem, .total = IP_PAGES * PG,
					  .pages = &f.pages, .state = &f.new_state, .disk_mask = 1,
					  .fault = &fault };
		memcpy(u.new_id, f.new_id, SNAP_ID_LEN);
		if (variant < 2)
			step = SNAP_STEP_JOURNAL;
		assert_int_equal(snap_inplace_commit(&u, NULL), -ECANCELED);
		snprintf(jp, sizeof(jp), "%s/%s", f.dir, SNAP_JOURNAL_FILE);
		fd = open(jp, O_RDWR);
		assert_true(fd >= 0);
		if (variant == 0) {
			assert_int_equal(ftruncate(fd, 3 * PG), 0);
		} else {
			/* A flipped byte in a page: the checksum refuses it. */
			assert_int_equal(pwrite(fd, "X", 1, 2 * PG + 77), 1);
		}
		close(fd);
		if (variant < 2) {
			/* The state never committed: the old snapshot. */
			assert_int_equal(snap_recover(f.dir), 0);
			assert_int_equal(ip_outcome(&f), 0);
		} else {
			/* It committed, then the journal rotted: its pages cannot
			 * be trusted, so the snapshot is refused, not half-applied,
			 * and the journal stays for a human to look at. */
			assert_int_equal(snap_recover(f.dir), -EIO);
			assert_true(exists(f.dir, SNAP_JOURNAL_FILE));
		}
		ip_teardown(&f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bitmap_ranges),
		cmocka_unit_test(bitmap_kvm_merge_take),
		cmocka_unit_test(bitmap_concurrent),
		cmocka_unit_test(gm_marks_writes),
		cmocka_unit_test(gm_private_discard_unmarked),
		cmocka_unit_test(ident_roundtrip),
		cmocka_unit_test(diff_pages_roundtrip),
		cmocka_unit_test(inplace_no_fault),
		cmocka_unit_test(inplace_memory_link),
		cmocka_unit_test(inplace_crash_each_step),
		cmocka_unit_test(inplace_torn_journal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
