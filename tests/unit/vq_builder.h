/* Test helper: lays out a split virtqueue and descriptor chains in fake
 * guest memory, the way a driver would. Header-only, for unit tests and
 * fuzzers. Memory map of the fake guest (one RAM region of VQB_RAM bytes),
 * relative to the queue's base (0, or 1 MiB apart for more queues sharing
 * the memory, see vqb_init_view):
 *   0x1000 descriptor table, 0x5000 avail ring, 0x6000 used ring,
 *   0x10000.. indirect tables, 0x20000.. data buffers. */
#ifndef TESTS_VQ_BUILDER_H
#define TESTS_VQ_BUILDER_H

#include <stdint.h>
#include <string.h>

#include "devices/virtqueue.h"
#include "vmm/base/gm.h"

#define VQB_RAM (4u << 20)
#define VQB_SPAN (1u << 20) /* per queue */
#define VQB_DESC 0x1000u
#define VQB_AVAIL 0x5000u
#define VQB_USED 0x6000u
#define VQB_INDIRECT 0x10000u
#define VQB_DATA 0x20000u

struct vqb {
	struct gm gm;         /* a copy for views: shares the owner's mapping */
	uint64_t base;
	uint16_t size;
	uint16_t next_desc;   /* next free descriptor */
	uint16_t avail_idx;
	uint64_t next_data;   /* next free data address */
	uint64_t next_ind;
};

static inline int vqb_init(struct vqb *b, uint16_t size)
{
	const struct gm_region r = { .gpa = 0, .size = VQB_RAM };

	memset(b, 0, sizeof(*b));
	if (gm_create(&b->gm, &r, 1))
		return -1;
	b->size = size;
	b->next_data = VQB_DATA;
	b->next_ind = VQB_INDIRECT;
	return 0;
}

/* A second (third...) queue in the same memory, `index` MiB further up. */
static inline void vqb_init_view(struct vqb *b, const struct vqb *owner, unsigned index, uint16_t size)
{
	memset(b, 0, sizeof(*b));
	b->gm = owner->gm;
	b->base = (uint64_t)index * VQB_SPAN;
	b->size = size;
	b->next_data = b->base + VQB_DATA;
	b->next_ind = b->base + VQB_INDIRECT;
}

static inline void vqb_destroy(struct vqb *b) { gm_destroy(&b->gm); }

static inline struct vq_config vqb_config(const struct vqb *b)
{
	struct vq_config c = { .size = b->size, .desc = b->base + VQB_DESC, .avail = b->base + VQB_AVAIL,
			       .used = b->base + VQB_USED };

	return c;
}

static inline struct virtq_desc *vqb_desc(struct vqb *b, uint16_t i)
{
	return (struct virtq_desc *)gm_ptr(&b->gm, b->base + VQB_DESC + 16u * i, 16);
}

/* Writes descriptor i. */
static inline void vqb_set(struct vqb *b, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
			   uint16_t next)
{
	struct virtq_desc *d = vqb_desc(b, i);

	d->addr = addr;
	d->len = len;
	d->flags = flags;
	d->next = next;
}

/* Allocates a data buffer (filled with `fill`) and returns its address. */
static inline uint64_t vqb_buf(struct vqb *b, uint32_t len, uint8_t fill)
{
	uint64_t a = b->next_data;

	memset(gm_ptr(&b->gm, a, len), fill, len);
	b->next_data += (len + 15) & ~15u;
	return a;
}

/* Publishes head as the next avail entry. */
static inline void vqb_publish(struct vqb *b, uint16_t head)
{
	uint16_t *avail = gm_ptr(&b->gm, b->base + VQB_AVAIL, 6 + 2u * b->size);

	avail[2 + b->avail_idx % b->size] = head;
	b->avail_idx++;
	avail[1] = b->avail_idx;
}

/* Sets avail->idx directly (to test index jumps). */
static inline void vqb_set_avail_idx(struct vqb *b, uint16_t idx)
{
	uint16_t *avail = gm_ptr(&b->gm, b->base + VQB_AVAIL, 4);

	avail[1] = idx;
}

/* Builds a direct chain of n buffers (lens[i], writable if w[i]) starting
 * at the next free descriptor, publishes it, returns the head. */
static inline uint16_t vqb_chain(struct vqb *b, unsigned n, const uint32_t *lens, const int *w)
{
	uint16_t head = b->next_desc;
	unsigned i;

	for (i = 0; i < n; i++) {
		uint16_t idx = (uint16_t)(b->next_desc + i);

		vqb_set(b, idx, vqb_buf(b, lens[i], (uint8_t)(0x10 + i)), lens[i],
			(uint16_t)((w[i] ? VIRTQ_DESC_F_WRITE : 0) | (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0)),
			(uint16_t)(idx + 1));
	}
	b->next_desc = (uint16_t)(b->next_desc + n);
	vqb_publish(b, head);
	return head;
}

/* Builds an indirect table of n buffers, a direct descriptor pointing to
 * it, publishes it, returns the head. */
static inline uint16_t vqb_indirect(struct vqb *b, unsigned n, const uint32_t *lens, const int *w)
{
	uint64_t table = b->next_ind;
	struct virtq_desc *t = gm_ptr(&b->gm, table, 16u * n);
	uint16_t head = b->next_desc++;
	unsigned i;

	for (i = 0; i < n; i++) {
		t[i].addr = vqb_buf(b, lens[i], (uint8_t)(0x20 + i));
		t[i].len = lens[i];
		t[i].flags = (uint16_t)((w[i] ? VIRTQ_DESC_F_WRITE : 0) | (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0));
		t[i].next = (uint16_t)(i + 1);
	}
	b->next_ind += 16u * n;
	vqb_set(b, head, table, 16u * n, VIRTQ_DESC_F_INDIRECT, 0);
	vqb_publish(b, head);
	return head;
}

/* EVENT_IDX: the driver asks for an interrupt once used->idx passes idx
 * (Linux sets it to the last used index it has seen). */
static inline void vqb_set_used_event(struct vqb *b, uint16_t idx)
{
	*(uint16_t *)gm_ptr(&b->gm, b->base + VQB_AVAIL + 4 + 2u * b->size, 2) = idx;
}

static inline uint16_t vqb_used_idx(struct vqb *b)
{
	return *(uint16_t *)gm_ptr(&b->gm, b->base + VQB_USED + 2, 2);
}

static inline struct virtq_used_elem vqb_used(struct vqb *b, uint16_t i)
{
	struct virtq_used_elem e;

	memcpy(&e, gm_ptr(&b->gm, b->base + VQB_USED + 4 + 8u * (i % b->size), 8), 8);
	return e;
}

#endif
