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
#define VIRTIO_FS_LK_RETRY_NS 2000000 /* how often a waiting SETLKW tries again: 2 ms */

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

/* A SETLKW chain the device holds until the lock is decided: where its
 * reply header goes (16 bytes: at most 16 non-empty buffers). */
#define VIRTIO_FS_PARK_IOV 16
struct fs_parked {
	uint8_t used;
	uint16_t head;
	uint64_t unique;
	int nout;
	struct iovec out[VIRTIO_FS_PARK_IOV];
};

struct virtio_fs {
	struct virtio_dev vdev;
	struct fuse_server srv;
	struct virtio_fs_config config;
	struct log_ratelimit rl;
	uint64_t bad_chains;
	/* Waiting SETLKWs (as many as the server allows), retried every
	 * VIRTIO_FS_LK_RETRY_NS by the timer while any waits. */
	struct fs_parked parked[FUSE_LK_WAITERS_MAX];
	int timer_fd;
	struct evloop_source timer_src;
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

/* Answers every waiting SETLKW now (granted, or EINTR), e.g. before a
 * snapshot: neither the VM nor a clone of it is left with a request that
 * no one will answer. The device's loop must not be running. */
void virtio_fs_quiesce(struct virtio_fs *f);
/* Retries the waiting SETLKWs and pushes those decided. Device thread
 * (exposed for tests). */
void virtio_fs_lk_poll(struct virtio_fs *f);

int virtio_fs_init(struct virtio_fs *f, const struct fs_options *o, int vm_fd, const struct gm *gm,
		   uint64_t base, unsigned irq, unsigned index) __attribute__((warn_unused_result));
void virtio_fs_destroy(struct virtio_fs *f);

#endif
