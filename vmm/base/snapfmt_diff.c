/* Diff snapshot formats and the in-place commit: see snapdiff.h. */
#include "vmm/base/snapfmt_diff.h"
#include "vmm/base/log.h"
#include "vmm/wire/proto.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096ull

/* ---- identity ---------------------------------------------------------- */

int snapid_new(uint8_t id[SNAP_ID_LEN])
{
	size_t got = 0;

	while (got < SNAP_ID_LEN) {
		ssize_t n = getrandom(id + got, SNAP_ID_LEN - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	if (snapid_is_zero(id))
		id[0] = 1; /* zero means "no identity" */
	return 0;
}

int snapid_is_zero(const uint8_t id[SNAP_ID_LEN])
{
	static const uint8_t zero[SNAP_ID_LEN];

	return !memcmp(id, zero, SNAP_ID_LEN);
}

void snapid_save(struct sbuf *b, const struct snap_ident *i)
{
	uint64_t w;

	sb_begin(b, SNAP_TAG_SNID);
	sb_bytes(b, i->id, SNAP_ID_LEN);
	sb_u32(b, i->kind);
	if (i->kind == SNAP_KIND_DIFF) {
		sb_str(b, i->base_dir);
		sb_bytes(b, i->base_id, SNAP_ID_LEN);
		sb_u64(b, i->pages.pages);
		for (w = 0; w < i->pages.words; w++)
			sb_u64(b, __atomic_load_n(&i->pages.w[w], __ATOMIC_RELAXED));
	}
	sb_end(b);
}

static uint32_t peek_tag(const struct srd *r)
{
	uint32_t t;

	if (r->err || r->len - r->off < 4)
		return 0;
	memcpy(&t, r->p + r->off, 4);
	return le32toh(t);
}

int snapid_load(struct srd *r, struct snap_ident *i, uint64_t pages)
{
	uint64_t n, w;

	memset(i, 0, sizeof(*i));
	if (peek_tag(r) != SNAP_TAG_SNID)
		return r->err ? -EINVAL : 0; /* older snapshot: full, no identity */
	if (sr_begin(r, SNAP_TAG_SNID, "identity"))
		return -EINVAL;
	sr_bytes(r, i->id, SNAP_ID_LEN);
	i->kind = sr_u32(r);
	if (!r->err && i->kind > SNAP_KIND_DIFF)
		sr_fail(r, "unknown snapshot kind");
	if (!r->err && i->kind == SNAP_KIND_DIFF) {
		sr_str(r, i->base_dir, sizeof(i->base_dir));
		sr_bytes(r, i->base_id, SNAP_ID_LEN);
		n = sr_u64(r);
		if (!r->err && (n != pages || i->base_dir[0] != '/' || snapid_is_zero(i->base_id)))
			sr_fail(r, "the diff's base record or page bitmap does not fit this snapshot");
		if (!r->err && dirty_init(&i->pages, n))
			sr_fail(r, "no memory for the page bitmap");
		for (w = 0; !r->err && w < i->pages.words; w++)
			i->pages.w[w] = sr_u64(r);
		/* Bits past the last page would name pages that do not exist. */
		if (!r->err && n % 64 && (i->pages.w[i->pages.words - 1] >> (n % 64)))
			sr_fail(r, "the page bitmap lists pages past the end of memory");
	}
	if (sr_end(r, "identity") || r->err) {
		snapid_free(i);
		return -EINVAL;
	}
	return 0;
}

void snapid_free(struct snap_ident *i)
{
	dirty_free(&i->pages);
}

int snap_state_id(const char *dir, uint8_t id[SNAP_ID_LEN])
{
	char p[PATH_MAX];
	uint8_t *file = NULL;
	const uint8_t *body;
	size_t len, body_len;
	const char *why = NULL;
	struct srd r;
	int e;

	memset(id, 0, SNAP_ID_LEN);
	if (snprintf(p, sizeof(p), "%s/state", dir) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	e = snapfile_read(p, &file, &len, &body, &body_len, &why);
	if (e) {
		free(file); /* a file that fails its checks comes back allocated */
		return e;
	}
	/* Walk the sections by their lengths; only SNID's first field. */
	sr_init(&r, body, body_len);
	while (!r.err && r.off + 8 <= r.len) {
		uint32_t tag = sr_u32(&r), n = sr_u32(&r);

		if (n > r.len - r.off)
			break;
		if (tag == SNAP_TAG_SNID && n >= SNAP_ID_LEN) {
			memcpy(id, r.p + r.off, SNAP_ID_LEN);
			break;
		}
		r.off += n;
	}
	free(file);
	return 0;
}

/* ---- page files --------------------------------------------------------- */

/* The next run of set bits at or after *page: [*page, end). 0 at the end. */
static int next_run(const struct dirty *d, uint64_t *page, uint64_t *end)
{
	uint64_t p = dirty_next(d, *page), e = p;

	if (p >= d->pages)
		return 0;
	while (e < d->pages && dirty_test(d, e))
		e++;
	*page = p;
	*end = e;
	return 1;
}

int snapmem_write_pages(const uint8_t *mem, uint64_t total, const struct dirty *d, int fd,
			uint64_t *written)
{
	uint64_t p = 0, e, n = 0;
	int r;

	if (d->pages != total / PAGE)
		return -EINVAL;
	while (next_run(d, &p, &e)) {
		if ((r = pwrite_full(fd, mem + p * PAGE, (e - p) * PAGE, p * PAGE)))
			return r;
		n += (e - p) * PAGE;
		p = e;
	}
	if (ftruncate(fd, (off_t)total) < 0)
		return -errno;
	if (written)
		*written = n;
	return 0;
}

int snapmem_read_pages(uint8_t *mem, uint64_t total, const struct dirty *d, int fd)
{
	uint64_t p = 0, e;
	int r;

	if (d->pages != total / PAGE)
		return -EINVAL;
	while (next_run(d, &p, &e)) {
		if ((r = pread_full(fd, mem + p * PAGE, (e - p) * PAGE, p * PAGE)))
			return r;
		p = e;
	}
	return 0;
}

int snapmem_copy_pages(int dst, int src, const struct dirty *d)
{
	uint8_t *buf = malloc(1u << 20);
	uint64_t p = 0, e;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	while (!r && next_run(d, &p, &e)) {
		while (!r && p < e) {
			uint64_t k = e - p > 256 ? 256 : e - p;

			if (!(r = pread_full(src, buf, k * PAGE, p * PAGE)))
				r = pwrite_full(dst, buf, k * PAGE, p * PAGE);
			p += k;
		}
	}
	free(buf);
	return r;
}

int snapid_replace(const uint8_t *body, size_t len, const struct snap_ident *i, struct sbuf *out)
{
	size_t off = 0;
	int done = 0;

	sb_init(out);
	while (off + 8 <= len) {
		uint32_t tag, n;

		memcpy(&tag, body + off, 4);
		memcpy(&n, body + off + 4, 4);
		tag = le32toh(tag);
		n = le32toh(n);
		if (n > len - off - 8)
			return -EINVAL;
		if (tag == SNAP_TAG_SNID) {
			snapid_save(out, i);
			done = 1;
		} else {
			sb_bytes(out, body + off, 8 + (size_t)n);
		}
		off += 8 + (size_t)n;
	}
	if (off != len || !done)
		return -EINVAL;
	return out->err;
}

/* ---- the journal ---------------------------------------------------------
 *
 *   0  "VMMJRNL\0"
 *   8  u32 version (1)
 *  12  u32 disk mask (bit N: diskN.next replaces diskN)
 *  16  u64 page count N
 *  24  16 bytes: the ID of the state file this journal belongs to
 *  40  u32 CRC-32C of everything from offset 4096 to the end
 *  44  u32 CRC-32C of bytes 0..43
 *  4096               N u64 page numbers (little-endian), ascending,
 *                     padded with zeros to a multiple of 4096
 *  4096 + index size  N pages of 4096 bytes, in the same order
 */
#define JRNL_MAGIC "VMMJRNL"
#define JRNL_HEAD 4096ull

struct jrnl_head {
	uint32_t disk_mask;
	uint64_t n;
	uint8_t id[SNAP_ID_LEN];
	uint32_t crc;
};

static uint64_t index_bytes(uint64_t n)
{
	return (n * 8 + PAGE - 1) / PAGE * PAGE;
}

static int path_in(char *out, size_t cap, const char *dir, const char *name)
{
	int n = snprintf(out, cap, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int fault(const struct snap_fault *f, enum snap_step s)
{
	return f && f->hook && f->hook(f->ctx, s) ? -ECANCELED : 0;
}

static int write_journal(const struct snap_inplace *u, const char *path, uint64_t *written)
{
	uint8_t *head = NULL, *idx = NULL;
	uint64_t n = dirty_count(u->pages), p = 0, e, i = 0, ib = index_bytes(n), off;
	uint32_t crc;
	int fd, r = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	head = calloc(1, JRNL_HEAD);
	idx = calloc(1, ib ? ib : 1);
	if (!head || !idx) {
		r = -ENOMEM;
		goto out;
	}
	while (next_run(u->pages, &p, &e)) {
		for (; p < e; p++) {
			uint64_t le = htole64(p);

			memcpy(idx + 8 * i++, &le, 8);
		}
	}
	crc = snap_crc32c(0, idx, ib);
	off = JRNL_HEAD + ib;
	p = 0;
	while (next_run(u->pages, &p, &e)) {
		uint64_t len = (e - p) * PAGE;

		crc = snap_crc32c(crc, u->mem + p * PAGE, len);
		if ((r = pwrite_full(fd, u->mem + p * PAGE, len, off)))
			goto out;
		off += len;
		p = e;
	}
	if ((r = pwrite_full(fd, idx, ib, JRNL_HEAD)))
		goto out;
	memcpy(head, JRNL_MAGIC, 8);
	{
		uint32_t v = htole32(1), m = htole32(u->disk_mask), c = htole32(crc), hc;
		uint64_t nn = htole64(n);

		memcpy(head + 8, &v, 4);
		memcpy(head + 12, &m, 4);
		memcpy(head + 16, &nn, 8);
		memcpy(head + 24, u->new_id, SNAP_ID_LEN);
		memcpy(head + 40, &c, 4);
		hc = htole32(snap_crc32c(0, head, 44));
		memcpy(head + 44, &hc, 4);
	}
	/* The header last: a journal cut short anywhere fails its checks. */
	if ((r = pwrite_full(fd, head, JRNL_HEAD, 0)))
		goto out;
	if (fsync(fd) < 0)
		r = -errno;
	if (written)
		*written = off;
out:
	free(head);
	free(idx);
	close(fd);
	return r;
}

/* Reads and checks a journal's header: -EINVAL if it is not a whole one. */
static int check_head(int fd, struct jrnl_head *h, uint64_t *size)
{
	uint8_t head[48];
	struct stat st;
	uint32_t v;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < JRNL_HEAD || pread_full(fd, head, sizeof(head), 0))
		return -EINVAL;
	memcpy(&v, head + 44, 4);
	if (memcmp(head, JRNL_MAGIC, 8) || le32toh(v) != snap_crc32c(0, head, 44))
		return -EINVAL;
	memcpy(&v, head + 8, 4);
	if (le32toh(v) != 1)
		return -EINVAL;
	memcpy(&v, head + 12, 4);
	h->disk_mask = le32toh(v);
	memcpy(&h->n, head + 16, 8);
	h->n = le64toh(h->n);
	memcpy(h->id, head + 24, SNAP_ID_LEN);
	memcpy(&v, head + 40, 4);
	h->crc = le32toh(v);
	*size = (uint64_t)st.st_size;
	return 0;
}

/* The body: the size the header implies and, streaming, its checksum.
 * -EBADMSG if either is wrong. */
static int check_body(int fd, const struct jrnl_head *h, uint64_t size)
{
	uint64_t off, end;
	uint32_t crc = 0;
	uint8_t *buf;
	int r = 0;

	if (h->n > (size - JRNL_HEAD) / PAGE)
		return -EBADMSG;
	end = JRNL_HEAD + index_bytes(h->n) + h->n * PAGE;
	if (size != end)
		return -EBADMSG;
	buf = malloc(1u << 20);
	if (!buf)
		return -ENOMEM;
	for (off = JRNL_HEAD; off < end && !r; off += 1u << 20) {
		uint64_t k = end - off < (1u << 20) ? end - off : (1u << 20);

		if (!(r = pread_full(fd, buf, k, off)))
			crc = snap_crc32c(crc, buf, k);
	}
	free(buf);
	return r ? r : crc == h->crc ? 0 : -EBADMSG;
}

/* Copies the journal's pages into the memory file (idempotent). */
static int apply_journal(int jfd, const struct jrnl_head *h, int mfd, uint64_t mem_size)
{
	uint64_t i, ib = index_bytes(h->n);
	uint8_t *idx = malloc(ib ? ib : 1), *page = malloc(PAGE);
	int r = 0;

	if (!idx || !page) {
		r = -ENOMEM;
		goto out;
	}
	if ((r = pread_full(jfd, idx, ib, JRNL_HEAD)))
		goto out;
	for (i = 0; i < h->n; i++) {
		uint64_t pg;

		memcpy(&pg, idx + 8 * i, 8);
		pg = le64toh(pg);
		if (pg >= mem_size / PAGE) {
			r = -EINVAL;
			goto out;
		}
		if ((r = pread_full(jfd, page, PAGE, JRNL_HEAD + ib + i * PAGE)) ||
		    (r = pwrite_full(mfd, page, PAGE, pg * PAGE)))
			goto out;
	}
	if (fsync(mfd) < 0)
		r = -errno;
out:
	free(idx);
	free(page);
	return r;
}

static int rename_disks(const char *dir, uint32_t mask)
{
	char from[PATH_MAX], to[PATH_MAX], a[32], b[32];
	unsigned i;
	int r;

	for (i = 0; i < 32; i++) {
		if (!(mask & (1u << i)))
			continue;
		snprintf(a, sizeof(a), "disk%u.next", i);
		snprintf(b, sizeof(b), "disk%u", i);
		if ((r = path_in(from, sizeof(from), dir, a)) || (r = path_in(to, sizeof(to), dir, b)))
			return r;
		/* Already renamed by an earlier, interrupted recovery: done. */
		if (rename(from, to) < 0 && errno != ENOENT)
			return -errno;
	}
	return 0;
}

static void remove_stale(const char *dir)
{
	char p[PATH_MAX], n[32];
	unsigned i;

	if (!path_in(p, sizeof(p), dir, SNAP_STATE_NEW))
		unlink(p);
	for (i = 0; i < 32; i++) {
		snprintf(n, sizeof(n), "disk%u.next", i);
		if (!path_in(p, sizeof(p), dir, n))
			unlink(p);
	}
}

int snap_inplace_commit(const struct snap_inplace *u, uint64_t *written)
{
	char jp[PATH_MAX], sp[PATH_MAX], snew[PATH_MAX], mp[PATH_MAX];
	uint64_t p = 0, e, half, done = 0, n;
	int mfd = -1, r, committed = 0;

	if ((r = path_in(jp, sizeof(jp), u->dir, SNAP_JOURNAL_FILE)) ||
	    (r = path_in(sp, sizeof(sp), u->dir, "state")) ||
	    (r = path_in(snew, sizeof(snew), u->dir, SNAP_STATE_NEW)) ||
	    (r = path_in(mp, sizeof(mp), u->dir, "memory")))
		return r;
	if (u->pages->pages != u->total / PAGE)
		return -EINVAL;
	/* A journal left by an earlier crash is settled first. */
	if ((r = snap_recover(u->dir)))
		return r;
	/* Never through a link: a tampered snapshot's "memory" could name
	 * any file of the user's, and this writes guest pages into it. */
	mfd = open(mp, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (mfd < 0)
		return -errno;

	/* 1. The redo journal: every new page, durable before anything the
	 *    old state describes is touched. */
	if ((r = write_journal(u, jp, written)) || (r = snap_fsync_dir(u->dir)))
		goto fail;
	if ((r = fault(u->fault, SNAP_STEP_JOURNAL)))
		goto crash;
	/* 2. The new state file beside the old one. */
	unlink(snew);
	if ((r = snapfile_write(snew, u->state)))
		goto fail;
	if ((r = fault(u->fault, SNAP_STEP_STATE_NEW)))
		goto crash;
	/* 3. Commit: the rename is atomic; from here the journal is the truth
	 *    for the pages it holds until they are in the memory file. */
	if (rename(snew, sp) < 0) {
		r = -errno;
		goto fail;
	}
	committed = 1;
	if ((r = snap_fsync_dir(u->dir)))
		goto fail;
	if ((r = fault(u->fault, SNAP_STEP_COMMITTED)))
		goto crash;
	/* 4. The pages into the memory file (from RAM, the journal's twin). */
	n = dirty_count(u->pages);
	half = n / 2;
	while (next_run(u->pages, &p, &e)) {
		uint64_t k = e - p;

		if (done <= half && done + k > half) {
			/* Split the run at the halfway page for the fault hook. */
			uint64_t a = half - done + 1;

			if ((r = pwrite_full(mfd, u->mem + p * PAGE, a * PAGE, p * PAGE)))
				goto fail;
			if ((r = fault(u->fault, SNAP_STEP_MEMORY_HALF)))
				goto crash;
			p += a;
			k -= a;
			done += a;
		}
		if (k && (r = pwrite_full(mfd, u->mem + p * PAGE, k * PAGE, p * PAGE)))
			goto fail;
		done += k;
		p = e;
	}
	if (fsync(mfd) < 0) {
		r = -errno;
		goto fail;
	}
	if ((r = rename_disks(u->dir, u->disk_mask)) || (r = snap_fsync_dir(u->dir)))
		goto fail;
	if ((r = fault(u->fault, SNAP_STEP_MEMORY)))
		goto crash;
	/* 5. The journal has served. */
	if (unlink(jp) < 0) {
		r = -errno;
		goto fail;
	}
	if ((r = snap_fsync_dir(u->dir)))
		goto fail;
	if ((r = fault(u->fault, SNAP_STEP_DONE)))
		goto crash;
	close(mfd);
	return 0;

fail:
	/* Before the commit: the old snapshot stands; drop what was new.
	 * After it: leave the journal, snap_recover finishes the job. */
	if (!committed) {
		unlink(jp);
		remove_stale(u->dir);
		(void)snap_fsync_dir(u->dir);
	}
	close(mfd);
	return r;
crash:
	close(mfd);
	return -ECANCELED;
}

int snap_recover(const char *dir)
{
	char jp[PATH_MAX], mp[PATH_MAX];
	uint8_t id[SNAP_ID_LEN];
	struct jrnl_head h;
	struct stat st;
	uint64_t size = 0;
	int jfd, mfd, r;

	if ((r = path_in(jp, sizeof(jp), dir, SNAP_JOURNAL_FILE)) ||
	    (r = path_in(mp, sizeof(mp), dir, "memory")))
		return r;
	if (lstat(jp, &st) < 0) {
		if (errno != ENOENT)
			return -errno;
		/* No journal: a state.new or diskN.next is from before a commit. */
		if (!path_in(jp, sizeof(jp), dir, SNAP_STATE_NEW) && lstat(jp, &st) == 0) {
			remove_stale(dir);
			(void)snap_fsync_dir(dir);
		}
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	jfd = open(jp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (jfd < 0)
		return -errno;
	r = check_head(jfd, &h, &size);
	if (!r && (r = snap_state_id(dir, id))) {
		close(jfd);
		return r;
	}
	if (r == -EINVAL || memcmp(id, h.id, SNAP_ID_LEN)) {
		/* A torn header, or the state never committed (the commit
		 * follows the journal's fsync): the old snapshot stands. */
		close(jfd);
		log_info("snapshot %s: discarding an update that did not commit", dir);
		if (unlink(jp) < 0)
			return -errno;
		remove_stale(dir);
		return snap_fsync_dir(dir);
	}
	/* Committed: the journal holds pages the memory file may lack. */
	r = check_body(jfd, &h, size);
	if (r) {
		close(jfd);
		if (r == -EBADMSG) {
			log_err("snapshot %s: the state committed but its journal is damaged "
				"(disk corruption?): this snapshot cannot be restored", dir);
			return -EIO;
		}
		return r;
	}
	log_info("snapshot %s: finishing an interrupted in-place update (%llu pages)", dir,
		 (unsigned long long)h.n);
	mfd = open(mp, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (mfd < 0) {
		r = -errno;
		close(jfd);
		return r;
	}
	r = fstat(mfd, &st) < 0 ? -errno : apply_journal(jfd, &h, mfd, (uint64_t)st.st_size);
	close(mfd);
	close(jfd);
	if (!r)
		r = rename_disks(dir, h.disk_mask);
	if (!r)
		r = snap_fsync_dir(dir);
	if (!r && unlink(jp) < 0)
		r = -errno;
	if (!r)
		r = snap_fsync_dir(dir);
	return r;
}
