/* virtio-blk (virtio 1.2 section 5.2) over a raw image file. */
#ifndef DEVICES_VIRTIO_BLK_H
#define DEVICES_VIRTIO_BLK_H

#include <stdint.h>
#include <sys/uio.h>

#include "devices/virtio_mmio.h"

#define VIRTIO_ID_BLOCK 2

/* Request types (5.2.6). */
#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_T_DISCARD 11
#define VIRTIO_BLK_T_WRITE_ZEROES 13
#define VIRTIO_BLK_S_OK 0
#define VIRTIO_BLK_S_IOERR 1
#define VIRTIO_BLK_S_UNSUPP 2

/* Feature bits (5.2.3). */
#define VIRTIO_BLK_F_SIZE_MAX 1
#define VIRTIO_BLK_F_SEG_MAX 2
#define VIRTIO_BLK_F_RO 5
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH 9
#define VIRTIO_BLK_F_DISCARD 13
#define VIRTIO_BLK_F_WRITE_ZEROES 14

#define VIRTIO_BLK_ID_BYTES 20
#define BLK_SECTOR 512u
#define BLK_QUEUE_SIZE 256
#define BLK_SEG_MAX 254            /* data segments per request */
#define BLK_MAX_DISCARD_SECTORS (1u << 22)
#define BLK_MAX_DISCARD_SEG 32

struct virtio_blk_outhdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_blk_outhdr) == 16, "request header is 16 bytes (5.2.6)");

struct virtio_blk_discard_wz {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_blk_discard_wz) == 16, "discard segment is 16 bytes (5.2.6)");
#define VIRTIO_BLK_WZ_F_UNMAP 1

/* Config space (5.2.4), little-endian, laid out as the spec does. */
struct virtio_blk_config {
	uint64_t capacity;
	uint32_t size_max;
	uint32_t seg_max;
	struct {
		uint16_t cylinders;
		uint8_t heads;
		uint8_t sectors;
	} geometry;
	uint32_t blk_size;
	struct {
		uint8_t physical_block_exp;
		uint8_t alignment_offset;
		uint16_t min_io_size;
		uint32_t opt_io_size;
	} topology;
	uint8_t writeback;
	uint8_t unused0;
	uint16_t num_queues;
	uint32_t max_discard_sectors;
	uint32_t max_discard_seg;
	uint32_t discard_sector_alignment;
	uint32_t max_write_zeroes_sectors;
	uint32_t max_write_zeroes_seg;
	uint8_t write_zeroes_may_unmap;
	uint8_t unused1[3];
} __attribute__((packed));
_Static_assert(offsetof(struct virtio_blk_config, max_discard_sectors) == 36, "blk config layout (5.2.4)");
_Static_assert(sizeof(struct virtio_blk_config) == 60, "blk config size (5.2.4)");

/* A parsed request. The pure parser decides what can be decided without
 * the image: type, range against capacity, sizes, read-only. */
struct blk_req {
	uint32_t type;
	uint64_t sector;
	uint64_t len;      /* data bytes (IN: to the guest, OUT: from it) */
	unsigned nseg;     /* DISCARD/WRITE_ZEROES segments */
};

/* hdr: the request header; read_data/write_data: readable bytes after the
 * header and writable bytes before the status byte. Returns
 * VIRTIO_BLK_S_OK if the request is to be executed (*req filled), or the
 * status to complete it with at once. */
uint8_t blk_parse(const struct virtio_blk_outhdr *hdr, uint64_t read_data, uint64_t write_data,
		  uint64_t capacity, int ro, uint64_t features, struct blk_req *req);
/* Checks one DISCARD/WRITE_ZEROES segment. */
uint8_t blk_check_segment(const struct virtio_blk_discard_wz *s, uint32_t type, uint64_t capacity);

struct blk_options {
	char *path;        /* owned: blk_options_free() */
	int ro;
	int root;
	char id[24];       /* serial reported by GET_ID (20 bytes used) */
	struct rl_limits rl; /* bytes and requests (bps=, iops=), 0: none */
	int no_lock;       /* lock=off: take no lock on the image (blk_lock) */
};

struct virtio_blk {
	struct virtio_dev vdev;
	int fd;
	int ro;
	uint64_t capacity; /* sectors */
	char serial[VIRTIO_BLK_ID_BYTES];
	struct virtio_blk_config config;
	uint64_t reqs, errors;
	struct ratelimit rl;
	int timer_fd;      /* -1 without a limit */
	int throttled;     /* waiting for the timer */
	uint64_t waits;    /* times the limiter made the queue wait */
	struct evloop_source timer_src;
	/* Scratch for the request in hand, last and never cleared (each
	 * request writes what it reads): 32 KiB that stay untouched pages
	 * but for the few a chain uses. */
	struct vq_chain chain;
	struct iovec iov[VQ_MAX_CHAIN];
};

/* Runs one request; returns bytes written to the guest (incl. status), or
 * -1 if the chain cannot even carry a status (the device needs reset).
 * Device thread only (exposed for the fuzzer). */
int64_t virtio_blk_handle(struct virtio_blk *b, const struct vq_chain *c);

int virtio_blk_init(struct virtio_blk *b, const struct blk_options *o, int vm_fd,
		    const struct gm *gm, uint64_t base, unsigned irq, unsigned index)
	__attribute__((warn_unused_result));
void virtio_blk_destroy(struct virtio_blk *b);
/* A running device's new backing file (path, NULL: keep it; opened as the
 * device was, read-only or not) and/or limits (rl, NULL: keep them):
 * Firecracker's PATCH /drives/{id}. A new file's size becomes the capacity
 * and the driver gets a configuration change interrupt. Main thread.
 * 0, or -errno with *why set, the device unchanged. */
int virtio_blk_update(struct virtio_blk *b, const char *path, const struct rl_limits *rl, const char **why)
	__attribute__((warn_unused_result));
/* The limits in force. */
void virtio_blk_limits(const struct virtio_blk *b, struct rl_limits *l);

/* Parses "path=FILE[,ro][,root][,id=ID][,serial=ID][,bps=RATE][,iops=RATE]
 * [,lock=on|off]". 0 or -EINVAL (why set). */
int blk_options_parse(const char *s, struct blk_options *o, const char **why);
void blk_options_free(struct blk_options *o);

/* Disk image locks, as QEMU takes them: an OFD lock (F_OFD_SETLK) on the
 * whole file, exclusive for a writable disk, shared for a read-only one,
 * so no two VMMs write one image and none reads an image another writes.
 * OFD locks belong to the open file description: two opens conflict even
 * in one process, and the lock goes with the last descriptor closed.
 * virtio_blk_init takes it unless lock=off. 0, -EBUSY (another open file
 * holds a conflicting lock), or -errno (the filesystem cannot lock). */
int blk_lock(int fd, int ro) __attribute__((warn_unused_result));
/* Would blk_lock on `path` be refused? 1 yes, 0 no, -errno (cannot tell:
 * missing file, no locks there). Takes no lock. */
int blk_lock_probe(const char *path, int ro);

#endif
