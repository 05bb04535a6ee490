/* The split virtqueue (devices/virtqueue.h, virtio 1.2 section 2.7). */
#include "devices/virtqueue.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

/* Offsets inside the avail and used rings (2.7.6, 2.7.8). */
#define AVAIL_FLAGS 0
#define AVAIL_IDX 1
#define AVAIL_RING 2
#define USED_IDX_OFF 2
#define USED_RING_OFF 4

static size_t avail_bytes(uint16_t size) { return 6 + 2 * (size_t)size; }
static size_t used_bytes(uint16_t size) { return 6 + 8 * (size_t)size; }

int vq_init(struct vq *q, const struct gm *gm, const struct vq_config *c, uint16_t max,
	    int event_idx, int indirect, const char **why)
{
	memset(q, 0, sizeof(*q));
	if (c->size == 0 || c->size > max || (c->size & (c->size - 1))) {
		*why = "queue size is 0, above QueueNumMax or not a power of 2";
		return -EINVAL;
	}
	/* 2.7: descriptor table 16-byte aligned, avail 2, used 4. */
	if (c->desc % 16 || c->avail % 2 || c->used % 4) {
		*why = "virtqueue ring misaligned";
		return -EINVAL;
	}
	q->desc = gm_ptr(gm, c->desc, 16 * (uint64_t)c->size);
	q->avail = gm_ptr(gm, c->avail, avail_bytes(c->size));
	q->used = gm_ptr(gm, c->used, used_bytes(c->size));
	if (!q->desc || !q->avail || !q->used) {
		*why = "virtqueue ring outside guest RAM";
		return -EINVAL;
	}
	q->gm = gm;
	q->size = c->size;
	q->event_idx = event_idx;
	q->indirect = indirect;
	return 0;
}

static uint16_t avail_idx(const struct vq *q)
{
	/* Pairs with the driver's write barrier before it publishes avail->idx
	 * (virtio_wmb in virtqueue_add_split): the ring entries it covers are
	 * visible once we see the index. */
	return le16toh(__atomic_load_n(&q->avail[AVAIL_IDX], __ATOMIC_ACQUIRE));
}

uint16_t vq_avail_idx(const struct vq *q)
{
	return avail_idx(q);
}

int vq_has_work(struct vq *q)
{
	return avail_idx(q) != q->last_avail;
}

/* Adds one descriptor's buffer to the chain, enforcing the rules shared by
 * direct and indirect descriptors. */
static int add_buf(struct vq *q, struct vq_chain *c, const struct virtq_desc *d,
		   const char **why)
{
	uint32_t len = le32toh(d->len);
	uint64_t addr = le64toh(d->addr);
	int writable = le16toh(d->flags) & VIRTQ_DESC_F_WRITE;
	unsigned n = c->nr_read + c->nr_write;
	uint8_t *p;

	if (len == 0)
		return 0; /* nothing to transfer: harmless, skipped */
	if (n >= VQ_MAX_CHAIN) {
		*why = "descriptor chain too long";
		return -EINVAL;
	}
	/* 2.7.4.2: the driver places device-writable descriptors after the
	 * readable ones. */
	if (!writable && c->nr_write) {
		*why = "readable descriptor after a writable one";
		return -EINVAL;
	}
	p = gm_ptr(q->gm, addr, len);
	if (!p) {
		*why = "descriptor buffer outside guest RAM";
		return -EINVAL;
	}
	if (writable) {
		if (c->write_len + len > UINT32_MAX) {
			*why = "chain's writable length overflows 32 bits";
			return -EINVAL;
		}
		/* Handed out for writing: dirty for the next diff snapshot (a
		 * device fills and pushes a chain before its loop parks, so the
		 * write lands before the pause that reads the bitmap). */
		if (!q->unwritten)
			gm_mark_host(q->gm, p, len);
		c->write_len += len;
		c->nr_write++;
	} else {
		if (c->read_len + len > UINT32_MAX) {
			*why = "chain's readable length overflows 32 bits";
			return -EINVAL;
		}
		c->read_len += len;
		c->nr_read++;
	}
	c->buf[n].p = p;
	c->buf[n].len = len;
	return 0;
}

static int walk_indirect(struct vq *q, struct vq_chain *c, const struct virtq_desc *d,
			 const char **why)
{
	uint32_t len = le32toh(d->len);
	const struct virtq_desc *table;
	unsigned n, i, hops = 0;

	/* 2.7.5.3: only if negotiated, a whole number of descriptors, and
	 * never combined with NEXT on the same descriptor. */
	if (!q->indirect) {
		*why = "indirect descriptor without VIRTIO_F_INDIRECT_DESC";
		return -EINVAL;
	}
	if (le16toh(d->flags) & VIRTQ_DESC_F_NEXT) {
		*why = "indirect descriptor with NEXT set";
		return -EINVAL;
	}
	if (len == 0 || len % sizeof(struct virtq_desc) || len / sizeof(struct virtq_desc) > VQ_MAX_CHAIN) {
		*why = "indirect table length invalid";
		return -EINVAL;
	}
	n = len / sizeof(struct virtq_desc);
	table = gm_ptr(q->gm, le64toh(d->addr), len);
	if (!table) {
		*why = "indirect table outside guest RAM";
		return -EINVAL;
	}
	i = 0;
	for (;;) {
		struct virtq_desc e;
		uint16_t flags;
		int r;

		/* Copy once: the guest may rewrite the table under us. */
		memcpy(&e, &table[i], sizeof(e));
		flags = le16toh(e.flags);
		if (flags & VIRTQ_DESC_F_INDIRECT) {
			*why = "indirect descriptor inside an indirect table";
			return -EINVAL;
		}
		r = add_buf(q, c, &e, why);
		if (r)
			return r;
		if (!(flags & VIRTQ_DESC_F_NEXT))
			return 0;
		i = le16toh(e.next);
		if (i >= n) {
			*why = "indirect next index out of range";
			return -EINVAL;
		}
		if (++hops >= n) {
			*why = "indirect descriptor chain loops";
			return -EINVAL;
		}
	}
}

int vq_pop(struct vq *q, struct vq_chain *c, const char **why)
{
	uint16_t idx = avail_idx(q), head, i;
	unsigned hops = 0;

	if (idx == q->last_avail)
		return 0;
	/* The driver can be at most a full ring ahead of us (2.7.13.3). */
	if ((uint16_t)(idx - q->last_avail) > q->size) {
		*why = "avail index moved more than the queue size";
		return -EINVAL;
	}
	head = le16toh(q->avail[AVAIL_RING + q->last_avail % q->size]);
	if (head >= q->size) {
		*why = "avail ring entry out of range";
		return -EINVAL;
	}
	q->last_avail++;
	c->head = head;
	c->nr_read = c->nr_write = 0;
	c->read_len = c->write_len = 0;
	i = head;
	for (;;) {
		struct virtq_desc d;
		uint16_t flags;
		int r;

		memcpy(&d, &q->desc[i], sizeof(d));
		flags = le16toh(d.flags);
		if (flags & VIRTQ_DESC_F_INDIRECT)
			r = walk_indirect(q, c, &d, why);
		else
			r = add_buf(q, c, &d, why);
		if (r)
			return r;
		if (!(flags & VIRTQ_DESC_F_NEXT) || (flags & VIRTQ_DESC_F_INDIRECT))
			return 1;
		i = le16toh(d.next);
		if (i >= q->size) {
			*why = "next descriptor index out of range";
			return -EINVAL;
		}
		/* A chain visits at most `size` descriptors: more is a loop. */
		if (++hops >= q->size) {
			*why = "descriptor chain loops";
			return -EINVAL;
		}
	}
}

void vq_unpop(struct vq *q)
{
	q->last_avail--;
}

void vq_unpop_n(struct vq *q, uint16_t n)
{
	q->last_avail = (uint16_t)(q->last_avail - n);
}

void vq_push(struct vq *q, uint16_t head, uint32_t len)
{
	struct virtq_used_elem e = { .id = htole32(head), .len = htole32(len) };
	uint16_t *idxp = (uint16_t *)(q->used + USED_IDX_OFF);

	memcpy(q->used + USED_RING_OFF + 8 * (size_t)(q->used_idx % q->size), &e, sizeof(e));
	q->used_idx++;
	gm_mark_host(q->gm, q->used, used_bytes(q->size));
	/* Release: the element is visible before the index that publishes it.
	 * Pairs with the driver's read barrier after it reads used->idx
	 * (virtio_rmb in virtqueue_get_buf_ctx_split). */
	__atomic_store_n(idxp, htole16(q->used_idx), __ATOMIC_RELEASE);
}

int vq_should_notify(struct vq *q)
{
	uint16_t old = q->signalled, now = q->used_idx;
	int valid = q->signalled_valid;

	/* Full barrier: our used->idx store must be visible before we read
	 * the driver's used_event / flags, pairing with the driver's barrier
	 * between writing used_event and re-reading used->idx
	 * (virtqueue_enable_cb_delayed). Otherwise both sides may skip. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	q->signalled = now;
	q->signalled_valid = 1;
	if (q->event_idx) {
		uint16_t used_event = le16toh(__atomic_load_n(&q->avail[AVAIL_RING + q->size],
							      __ATOMIC_RELAXED));

		/* vring_need_event() (2.7.10): notify if used_event lies in
		 * (old, now]. */
		return !valid || (uint16_t)(now - used_event - 1) < (uint16_t)(now - old);
	}
	return !(le16toh(__atomic_load_n(&q->avail[AVAIL_FLAGS], __ATOMIC_RELAXED)) &
		 VIRTQ_AVAIL_F_NO_INTERRUPT);
}

void vq_set_avail_event(struct vq *q)
{
	vq_notify_after(q, q->last_avail);
}

void vq_notify_after(struct vq *q, uint16_t idx)
{
	uint16_t *ev = (uint16_t *)(q->used + USED_RING_OFF + 8 * (size_t)q->size);

	if (!q->event_idx)
		return;
	__atomic_store_n(ev, htole16(idx), __ATOMIC_RELAXED);
	gm_mark_host(q->gm, ev, sizeof(*ev));
	/* Full barrier: avail_event must be visible before we re-check
	 * avail->idx, pairing with the driver's barrier between publishing
	 * avail->idx and reading avail_event (virtqueue_kick_prepare_split). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- cursors ---------------------------------------------------------- */

void vq_reader_init(struct vq_reader *r, const struct vq_chain *c)
{
	r->buf = c->buf;
	r->nr = c->nr_read;
	r->i = 0;
	r->off = 0;
	r->left = c->read_len;
}

void vq_writer_init(struct vq_writer *w, const struct vq_chain *c)
{
	w->buf = c->buf + c->nr_read;
	w->nr = c->nr_write;
	w->i = 0;
	w->off = 0;
	w->left = c->write_len;
}

/* Shared walk for both cursors: the next contiguous piece of at most n
 * bytes, advancing the cursor. */
static size_t cursor_next(const struct vq_buf *buf, unsigned nr, unsigned *i, uint32_t *off,
			  uint64_t *left, size_t n, uint8_t **p)
{
	size_t chunk;

	while (*i < nr && *off == buf[*i].len) {
		(*i)++;
		*off = 0;
	}
	if (*i >= nr || *left == 0 || n == 0)
		return 0;
	chunk = buf[*i].len - *off;
	if (chunk > n)
		chunk = n;
	if (chunk > *left)
		chunk = (size_t)*left;
	*p = buf[*i].p + *off;
	*off += (uint32_t)chunk;
	*left -= chunk;
	return chunk;
}

size_t vq_read(struct vq_reader *r, void *dst, size_t n)
{
	size_t done = 0, k;
	uint8_t *p;

	while ((k = cursor_next(r->buf, r->nr, &r->i, &r->off, &r->left, n - done, &p))) {
		memcpy((uint8_t *)dst + done, p, k);
		done += k;
	}
	return done;
}

size_t vq_write(struct vq_writer *w, const void *src, size_t n)
{
	size_t done = 0, k;
	uint8_t *p;

	while ((k = cursor_next(w->buf, w->nr, &w->i, &w->off, &w->left, n - done, &p))) {
		memcpy(p, (const uint8_t *)src + done, k);
		done += k;
	}
	return done;
}

static int cursor_iov(const struct vq_buf *buf, unsigned nr, unsigned *i, uint32_t *off,
		      uint64_t *left, uint64_t len, struct iovec *iov, int max)
{
	int n = 0;

	if (len > *left)
		return -EINVAL;
	while (len) {
		uint8_t *p;
		size_t k;

		if (n == max)
			return -E2BIG;
		k = cursor_next(buf, nr, i, off, left, len > SIZE_MAX ? SIZE_MAX : (size_t)len, &p);
		if (!k)
			return -EINVAL;
		iov[n].iov_base = p;
		iov[n].iov_len = k;
		n++;
		len -= k;
	}
	return n;
}

int vq_reader_iov(struct vq_reader *r, uint64_t len, struct iovec *iov, int max)
{
	return cursor_iov(r->buf, r->nr, &r->i, &r->off, &r->left, len, iov, max);
}

int vq_writer_iov(struct vq_writer *w, uint64_t len, struct iovec *iov, int max)
{
	return cursor_iov(w->buf, w->nr, &w->i, &w->off, &w->left, len, iov, max);
}

int vq_writer_split_tail(struct vq_writer *w, uint64_t n, struct vq_writer *tail)
{
	uint64_t skip;

	if (n > w->left)
		return -ENOSPC;
	/* Walk a copy of the cursor to where the tail starts. */
	*tail = *w;
	skip = w->left - n;
	while (skip) {
		uint8_t *p;
		size_t k = cursor_next(tail->buf, tail->nr, &tail->i, &tail->off, &tail->left,
				       skip > SIZE_MAX ? SIZE_MAX : (size_t)skip, &p);

		if (!k)
			return -ENOSPC;
		skip -= k;
	}
	tail->left = n;
	w->left -= n;
	return 0;
}
