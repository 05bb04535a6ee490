/* virtio-balloon (virtio 1.2 section 5.5): the host asks the guest to give
 * back memory (num_pages), the guest hands over page frame numbers on the
 * inflate queue and the host frees them (gm_discard), takes them back on
 * the deflate queue; memory statistics on the stats queue, polled every
 * stats_polling_interval_s; free page reporting hands over free ranges.
 * Firecracker's /balloon routes drive it (vmm/api/fcapi_dev.c). */
#ifndef DEVICES_VIRTIO_BALLOON_H
#define DEVICES_VIRTIO_BALLOON_H

#include <stdint.h>

#include "devices/virtio_mmio.h"

#define VIRTIO_ID_BALLOON 5

/* Feature bits (5.5.3). */
#define VIRTIO_BALLOON_F_MUST_TELL_HOST 0
#define VIRTIO_BALLOON_F_STATS_VQ 1
#define VIRTIO_BALLOON_F_DEFLATE_ON_OOM 2
#define VIRTIO_BALLOON_F_FREE_PAGE_HINT 3
#define VIRTIO_BALLOON_F_PAGE_POISON 4
#define VIRTIO_BALLOON_F_REPORTING 5

/* 5.5.6: page frame numbers count 4 KiB pages whatever the guest's size. */
#define BALLOON_PFN_SHIFT 12
#define BALLOON_PAGES_PER_MIB 256u
#define BALLOON_QUEUE_SIZE 256

/* Statistics tags (5.5.6.3, and Linux's later ones). */
#define VIRTIO_BALLOON_S_SWAP_IN 0
#define VIRTIO_BALLOON_S_SWAP_OUT 1
#define VIRTIO_BALLOON_S_MAJFLT 2
#define VIRTIO_BALLOON_S_MINFLT 3
#define VIRTIO_BALLOON_S_MEMFREE 4
#define VIRTIO_BALLOON_S_MEMTOT 5
#define VIRTIO_BALLOON_S_AVAIL 6
#define VIRTIO_BALLOON_S_CACHES 7
#define VIRTIO_BALLOON_S_HTLB_PGALLOC 8
#define VIRTIO_BALLOON_S_HTLB_PGFAIL 9
#define VIRTIO_BALLOON_S_OOM_KILL 10
#define VIRTIO_BALLOON_S_ALLOC_STALL 11
#define VIRTIO_BALLOON_S_ASYNC_SCAN 12
#define VIRTIO_BALLOON_S_DIRECT_SCAN 13
#define VIRTIO_BALLOON_S_ASYNC_RECLAIM 14
#define VIRTIO_BALLOON_S_DIRECT_RECLAIM 15
#define BALLOON_NR_STATS 16

struct virtio_balloon_stat {
	uint16_t tag;
	uint64_t val;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_balloon_stat) == 10, "balloon stat is 10 bytes (5.5.6.3)");

/* Config space (5.5.4), little-endian. */
struct virtio_balloon_config {
	uint32_t num_pages;  /* device: pages the host wants */
	uint32_t actual;     /* driver: pages in the balloon */
	uint32_t free_page_hint_cmd_id;
	uint32_t poison_val;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_balloon_config) == 16, "balloon config is 16 bytes (5.5.4)");

struct balloon_options {
	uint32_t amount_mib;       /* target */
	int deflate_on_oom;
	uint32_t stats_interval_s; /* 0: no statistics queue */
	int free_page_reporting;
};

/* The queues' roles; their indices depend on the features the driver
 * took (5.5.2: absent queues take no index). */
enum balloon_q { BQ_INFLATE, BQ_DEFLATE, BQ_STATS, BQ_REPORTING, BQ_NONE };

struct balloon_stats {
	int valid[BALLOON_NR_STATS];
	uint64_t val[BALLOON_NR_STATS];
	uint64_t updates;    /* stats buffers read */
};

struct virtio_balloon {
	struct virtio_dev vdev;
	struct balloon_options opt;
	struct virtio_balloon_config config; /* under vdev.lock */
	struct vq_chain chain;
	pthread_mutex_t lock;     /* stats, interval and held buffer against the main thread */
	struct balloon_stats stats;
	uint32_t stats_interval_s;
	int stats_held;           /* the driver's stats buffer waits for the next poll */
	uint16_t stats_head;
	int timer_fd;             /* statistics poll, -1 without statistics */
	struct evloop_source timer_src;
	/* Counters. */
	uint64_t inflated, deflated, reported, discard_fails; /* pages */
	uint64_t inflate_chains, deflate_chains, report_chains; /* requests */
	_Atomic uint64_t last_report_ns; /* CLOCK_MONOTONIC, the last report served; 0: none */
};

/* What a queue index means under the negotiated features. */
enum balloon_q balloon_queue_role(uint64_t driver_features, unsigned qi);

/* One inflate/deflate request: a readable array of le32 PFNs, each a 4 KiB
 * page inside guest RAM (checked before any is touched); inflated pages
 * are given back to the host. -1 if the chain breaks a rule (a writable
 * buffer, a length not a multiple of 4, a PFN outside RAM): the device
 * then needs reset. Device thread only (exposed for the fuzzer). */
int64_t virtio_balloon_pfns(struct virtio_balloon *b, const struct vq_chain *c, int inflate);
/* One statistics buffer: readable virtio_balloon_stat entries (unknown
 * tags ignored, 5.5.6.3.2; a trailing partial entry ignored). -1 for a
 * writable buffer. */
int virtio_balloon_read_stats(struct virtio_balloon *b, const struct vq_chain *c);
/* One free page report: every buffer a free range of guest RAM, given
 * back to the host. Returns 0 (the used length). */
int64_t virtio_balloon_report(struct virtio_balloon *b, const struct vq_chain *c);

/* How long (ns) until the guest's free page reporting has handed over
 * what it will report soon, as far as the device can tell: 0 when
 * reporting is off, or the first pass (Linux's PAGE_REPORTING_DELAY
 * after the driver came up) is over and no report came for a while.
 * Any thread; `now` is CLOCK_MONOTONIC ns (log_now_ns). */
uint64_t virtio_balloon_report_wait_ns(struct virtio_balloon *b, uint64_t now);

int virtio_balloon_init(struct virtio_balloon *b, const struct balloon_options *o, int vm_fd, const struct gm *gm,
			uint64_t base, unsigned irq) __attribute__((warn_unused_result));
void virtio_balloon_destroy(struct virtio_balloon *b);

/* Main thread (PATCH /balloon): the new target; the driver gets a config
 * change interrupt. */
void virtio_balloon_set_target(struct virtio_balloon *b, uint32_t amount_mib);
/* Main thread (PATCH /balloon/statistics): the new interval, with a poll
 * at once. -EINVAL if statistics were off at boot or s is 0 (Firecracker:
 * they cannot be turned on or off after boot). */
int virtio_balloon_set_interval(struct virtio_balloon *b, uint32_t s) __attribute__((warn_unused_result));
/* Main thread: a consistent copy of the target, actual and statistics. */
void virtio_balloon_get(struct virtio_balloon *b, uint32_t *target_pages, uint32_t *actual_pages,
			struct balloon_stats *st);

/* Snapshots: target, actual, the interval and the held stats buffer. */
void virtio_balloon_save(struct virtio_balloon *b, struct sbuf *s);
int virtio_balloon_restore(struct virtio_balloon *b, struct srd *r, const char **why)
	__attribute__((warn_unused_result));
/* After a restore: re-arm the statistics timer. */
void virtio_balloon_restart(struct virtio_balloon *b);

/* Parses "SIZE_MIB[,deflate_on_oom][,stats=SECONDS][,reporting]"
 * (vmm run --balloon). 0 or -EINVAL (why set). */
int balloon_options_parse(const char *s, struct balloon_options *o, const char **why);

#endif
