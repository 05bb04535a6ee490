/* virtio-fs (virtio 1.2 section 5.11): a host directory shared with the
 * guest, served by the FUSE passthrough server in fuse.c on the device's
 * own event-loop thread. No DAX window, no notification queue. */
#ifndef DEVICES_VIRTIO_FS_H
#define DEVICES_VIRTIO_FS_H

#include <stdint.h>
#include <sys/uio.h>

#include "devices/fuse/fuse.h"
#include "devices/virtio_mmio.h"

#define VIRTIO_ID_FS 26
#define VIRTIO_FS_TAG_LEN 36          /* 5.11.4: tag[36], NUL-padded */
#define VIRTIO_FS_QUEUE_HIPRIO 0      /* 5.11.2: FORGET, BATCH_FORGET, INTERRUPT */
#define VIRTIO_FS_QUEUE_REQUEST 1     /* 5.11.2: requestq0 (we offer one) */
#define VIRTIO_FS_QUEUE_SIZE 1024

/* Config space (5.11.4), little-endian; notify_buf_size only exists with
 * VIRTIO_FS_F_NOTIFICATION, which we do not offer. */
struct virtio_fs_config {
	uint8_t tag[VIRTIO_FS_TAG_LEN];
	uint32_t num_request_queues;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_fs_config) == 40, "virtio-fs config is 40 bytes (5.11.4)");

struct fs_options {
	char tag[VIRTIO_FS_TAG_LEN];  /* 1..35 of [A-Za-z0-9._-], not "." or ".." */
	char *path;                   /* owned: fs_options_free() */
	int ro;
	enum fuse_cache cache;
	/* A drive (docs/virtio-fs.md, "Drives"): where guest-init mounts it
	 * (NULL: /mnt/TAG), and its size limit in bytes (0: none) counted in
	 * the 8-byte file `usage` that every VMM sharing the drive maps. */
	char *at;                     /* owned */
	char *usage;                  /* owned */
	uint64_t limit;
};

/* Parses "tag=NAME,path=DIR[,ro][,cache=none|auto][,at=/GUEST/DIR]
 * [,limit=BYTES,usage=FILE]". 0 or -EINVAL (why set). */
int fs_options_parse(const char *s, struct fs_options *o, const char **why);
void fs_options_free(struct fs_options *o);
/* Is this a tag guest-init can mount at /mnt/TAG? */
int fs_tag_valid(const char *tag);
/* Is this a guest directory guest-init can mount a drive at: absolute,
 * at most 100 of [A-Za-z0-9._/-], no "." or ".." part, not "/"? */
int fs_guest_path_valid(const char *p);

struct virtio_fs {
	struct virtio_dev vdev;
	struct fuse_server srv;
	struct virtio_fs_config config;
	struct log_ratelimit rl;
	uint64_t bad_chains;
	int64_t *usage_map;           /* the drive's shared byte count, or NULL */
	/* Scratch for the request in hand, last and never cleared (each
	 * request writes what it reads): 48 KiB that stay untouched pages
	 * but for the few a chain uses. */
	struct vq_chain chain;
	struct iovec in[VQ_MAX_CHAIN], out[VQ_MAX_CHAIN];
};

/* Handles one chain (exposed for tests and the fuzzer): the length
 * written. Device thread only. */
int64_t virtio_fs_handle(struct virtio_fs *f, const struct vq_chain *c);

int virtio_fs_init(struct virtio_fs *f, const struct fs_options *o, int vm_fd, const struct gm *gm,
		   uint64_t base, unsigned irq, unsigned index) __attribute__((warn_unused_result));
void virtio_fs_destroy(struct virtio_fs *f);

#endif
