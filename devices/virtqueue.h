/* Split virtqueue core (virtio 1.2 section 2.7). Everything the guest puts
 * in a ring is validated here, once: ring placement at setup, then every
 * chain when it is popped. Devices never see a raw descriptor: they get a
 * validated chain of host buffers (readable ones first, then writable ones)
 * and read or write it through cursors. */
#ifndef DEVICES_VIRTQUEUE_H
#define DEVICES_VIRTQUEUE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vmm/base/gm.h"

#define VQ_MAX_SIZE 1024u     /* largest queue size a device offers */
#define VQ_MAX_CHAIN 1024u    /* descriptors in one chain, indirect ones included */

/* Descriptor flags (2.7.5). */
#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1
#define VIRTQ_USED_F_NO_NOTIFY 1

struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
} __attribute__((packed));
_Static_assert(sizeof(struct virtq_desc) == 16, "virtq_desc is 16 bytes (2.7.5)");

struct virtq_used_elem {
	uint32_t id;
	uint32_t len;
} __attribute__((packed));
_Static_assert(sizeof(struct virtq_used_elem) == 8, "virtq_used_elem is 8 bytes (2.7.8)");

/* Queue configuration as the driver wrote it through the transport. */
struct vq_config {
	uint16_t size;
	uint64_t desc;
	uint64_t avail;
	uint64_t used;
};

struct vq {
	const struct gm *gm;
	uint16_t size;
	int event_idx;      /* VIRTIO_F_EVENT_IDX negotiated */
	int indirect;       /* VIRTIO_F_INDIRECT_DESC negotiated */
	struct virtq_desc *desc;
	uint16_t *avail;    /* flags, idx, ring[size], used_event */
	uint8_t *used;      /* flags, idx, ring[size], avail_event */
	uint16_t last_avail;/* next avail entry the device will take */
	uint16_t used_idx;  /* shadow of used->idx */
	uint16_t signalled; /* used_idx when the driver was last notified */
	int signalled_valid;
	/* Its writable buffers are never written (set after vq_init): not
	 * marked dirty as they are popped. The balloon's reporting queue,
	 * whose buffers are free ranges the host discards. */
	int unwritten;
};

/* Validates a queue the driver set up (2.7: size a power of 2 up to
 * `max`, alignment of each part, and each part's whole byte range in RAM).
 * Returns 0, or -EINVAL with `why` set. */
int vq_init(struct vq *q, const struct gm *gm, const struct vq_config *c, uint16_t max,
	    int event_idx, int indirect, const char **why) __attribute__((warn_unused_result));

struct vq_buf {
	uint8_t *p;
	uint32_t len;
};

/* A validated descriptor chain: `nr_read` readable buffers, then
 * `nr_write` writable ones, all checked to lie in guest RAM. */
struct vq_chain {
	uint16_t head;
	unsigned nr_read, nr_write;
	uint64_t read_len, write_len; /* each at most UINT32_MAX */
	struct vq_buf buf[VQ_MAX_CHAIN];
};

/* Takes the next available chain. Returns 1 with *c filled, 0 if the ring
 * is empty, or -EINVAL (why set) if the guest broke a rule: the device must
 * then go to DEVICE_NEEDS_RESET. */
int vq_pop(struct vq *q, struct vq_chain *c, const char **why)
	__attribute__((warn_unused_result));
/* Gives back the chain just popped, untouched (the device found nothing to
 * put in it after all): the next pop returns it again. */
void vq_unpop(struct vq *q);
/* Gives back the last `n` chains popped, none of them pushed yet (e.g. a
 * frame that needed more buffers than the ring held). */
void vq_unpop_n(struct vq *q, uint16_t n);
/* Returns a chain to the driver with `len` bytes written. */
void vq_push(struct vq *q, uint16_t head, uint32_t len);
/* After pushes: does the driver want an interrupt (EVENT_IDX or the
 * NO_INTERRUPT flag)? Records that it was notified. */
int vq_should_notify(struct vq *q);
/* Tells the driver (EVENT_IDX) to notify at the next buffer it adds. */
void vq_set_avail_event(struct vq *q);
/* ... once its avail index moves past `idx` (2.7.10), even while buffers
 * before it are still unused. */
void vq_notify_after(struct vq *q, uint16_t idx);
/* The driver's current avail index (acquire: the entries it covers are
 * visible). */
uint16_t vq_avail_idx(const struct vq *q);
/* Is there anything to pop? */
int vq_has_work(struct vq *q);

/* Cursor over the readable part of a chain. */
struct vq_reader {
	const struct vq_buf *buf;
	unsigned nr, i;
	uint32_t off;
	uint64_t left;
};
void vq_reader_init(struct vq_reader *r, const struct vq_chain *c);
/* Copies up to n bytes; returns how many were copied. */
size_t vq_read(struct vq_reader *r, void *dst, size_t n);
/* Up to max iovecs covering the next `len` bytes (which must be left);
 * advances. Returns the count, or -E2BIG if more than max would be needed. */
int vq_reader_iov(struct vq_reader *r, uint64_t len, struct iovec *iov, int max);

/* Cursor over the writable part of a chain. */
struct vq_writer {
	const struct vq_buf *buf;
	unsigned nr, i;
	uint32_t off;
	uint64_t left;
};
void vq_writer_init(struct vq_writer *w, const struct vq_chain *c);
size_t vq_write(struct vq_writer *w, const void *src, size_t n);
int vq_writer_iov(struct vq_writer *w, uint64_t len, struct iovec *iov, int max);
/* Splits the last `n` writable bytes off into *tail (e.g. virtio-blk's
 * status byte); *w keeps the rest. -ENOSPC if fewer than n are left. */
int vq_writer_split_tail(struct vq_writer *w, uint64_t n, struct vq_writer *tail);

#endif
