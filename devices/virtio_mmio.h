/* virtio-mmio transport, version 2 (virtio 1.2 section 4.2). The register
 * file, the device status state machine, feature negotiation, config space
 * and reset; queue notifications arrive on eventfds (KVM ioeventfd) and
 * interrupts leave through an eventfd (KVM irqfd), so the vCPU threads
 * never run device work: each device has its own event-loop thread.
 *
 * Devices plug in with a small const ops table and embed struct virtio_dev
 * (reach the device with container_of). */
#ifndef DEVICES_VIRTIO_MMIO_H
#define DEVICES_VIRTIO_MMIO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "devices/virtqueue.h"
#include "vmm/base/bus.h"
#include "vmm/base/evloop.h"
#include "vmm/base/log.h"
#include "vmm/base/ratelimit.h"
#include "vmm/base/snapfmt.h"

#define VIRTIO_MMIO_SIZE 0x1000
#define VIRTIO_MMIO_BASE 0xd0000000ull /* first device; each next +0x1000 */
#define VIRTIO_MMIO_IRQ_BASE 5         /* first device's GSI; up to 23 */
#define VIRTIO_MAX_QUEUES 8

/* Device status bits (2.1). */
#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 64
#define VIRTIO_STATUS_FAILED 128

/* Reserved feature bits (6). */
#define VIRTIO_F_INDIRECT_DESC 28
#define VIRTIO_F_EVENT_IDX 29
#define VIRTIO_F_VERSION_1 32

/* InterruptStatus bits (4.2.2). */
#define VIRTIO_MMIO_INT_VRING 1
#define VIRTIO_MMIO_INT_CONFIG 2

struct virtio_dev;

struct virtio_dev_ops {
	uint32_t device_id;
	unsigned nr_queues;
	uint16_t queue_max;
	/* Runs on the device's event-loop thread when queue `q` was notified
	 * and the device is live (DRIVER_OK, not NEEDS_RESET). */
	void (*queue_notify)(struct virtio_dev *d, unsigned q);
	/* Optional: driver writes to config space (offset checked). */
	void (*config_write)(struct virtio_dev *d, uint32_t off, const void *data, unsigned len);
	/* Optional: the device was reset (its loop is paused meanwhile). */
	void (*reset)(struct virtio_dev *d);
	/* Optional: nonzero when the device never writes queue `q`'s
	 * device-writable buffers (with the features negotiated): they are
	 * then not marked dirty for diff snapshots (struct vq's unwritten). */
	int (*queue_unwritten)(const struct virtio_dev *d, unsigned q);
};

struct virtio_queue {
	struct vq_config cfg;
	int ready;
	struct vq vq;
	int notify_fd; /* eventfd, registered as a KVM ioeventfd */
	struct evloop_source notify_src;
};

struct virtio_dev {
	struct bus_dev bus;
	const struct virtio_dev_ops *ops;
	const struct gm *gm;
	int vm_fd;           /* -1: no KVM (unit tests); eventfds still work */
	unsigned irq;
	char name[24];
	uint64_t features;   /* offered */
	uint64_t driver_features;
	uint32_t dev_feat_sel, drv_feat_sel, queue_sel;
	_Atomic uint32_t status;
	_Atomic uint32_t isr;
	_Atomic uint32_t config_gen;
	/* CLOCK_MONOTONIC ns when this process saw the driver set DRIVER_OK;
	 * 0 if it never did (a restored device came up in its snapshot). */
	_Atomic uint64_t driver_ok_ns;
	uint8_t *config;     /* device-owned config space */
	uint32_t config_len;
	pthread_mutex_t lock;/* register accesses from vCPU threads */
	struct virtio_queue q[VIRTIO_MAX_QUEUES];
	int irq_fd;          /* eventfd, registered as a KVM irqfd */
	struct evloop loop;
	struct log_ratelimit rl;
};

/* Sets up the transport at `base` with interrupt `irq`, offering
 * `features` (VERSION_1 is always added). The device's config space is
 * config[0..config_len). Starts the device's event-loop thread. */
int virtio_mmio_init(struct virtio_dev *d, const struct virtio_dev_ops *ops, const char *name,
		     int vm_fd, const struct gm *gm, uint64_t base, unsigned irq,
		     uint64_t features, uint8_t *config, uint32_t config_len)
	__attribute__((warn_unused_result));
void virtio_mmio_destroy(struct virtio_dev *d);

/* Device side, from its event-loop thread. */
int virtio_has_feature(const struct virtio_dev *d, unsigned bit);
/* The driver used buffers of queue q: interrupt it if it wants one. */
void virtio_queue_used(struct virtio_dev *d, unsigned q);
/* Serves queue q until it is empty: pops each chain into *chain, calls fn,
 * pushes the chain back with the length fn returns. fn returns -1 after it
 * put the device in NEEDS_RESET; a broken ring does that here. After the
 * ring is empty it re-arms EVENT_IDX and looks once more, so a buffer added
 * meanwhile is not missed, then interrupts the driver if it wants one. */
typedef int64_t virtio_chain_fn(struct virtio_dev *d, const struct vq_chain *chain);
/* fn's answer for a chain the device keeps to push itself later (a
 * request that waits: virtio-fs's SETLKW); serving goes on. */
#define VIRTIO_CHAIN_HELD (-2)
void virtio_serve_queue(struct virtio_dev *d, unsigned q, struct vq_chain *chain, virtio_chain_fn *fn);
/* The same, each chain first admitted by the limiter `rl` (its byte size
 * as the cost): returns 0 once the ring is empty, or the ns to wait before
 * calling again (the chain that did not pass stays in the ring). */
uint64_t virtio_serve_queue_rl(struct virtio_dev *d, unsigned qi, struct vq_chain *chain,
			       virtio_chain_fn *fn, struct ratelimit *rl);
/* The guest broke a rule: DEVICE_NEEDS_RESET, a config interrupt, one
 * rate-limited log line. The device stops serving until the driver resets
 * it; the VMM and other devices carry on (2.1.1). */
void virtio_needs_reset(struct virtio_dev *d, const char *why);
/* The device changed its config space. */
void virtio_config_changed(struct virtio_dev *d);
/* Is the device live (DRIVER_OK and not NEEDS_RESET/FAILED)? */
int virtio_live(const struct virtio_dev *d);

/* "virtio_mmio.device=4K@0xd0000000:5" for the kernel command line. */
int virtio_mmio_cmdline(const struct virtio_dev *d, char *buf, size_t len);

/* Snapshots (docs/snapshot.md). Save: the transport's registers and each
 * queue's placement and indices. Restore (device loop paused): every value
 * goes through the checks a live driver's writes go through (reachable
 * status, offered features, each ready ring validated against guest RAM)
 * before any is applied; -EINVAL with *why otherwise, device untouched. */
void virtio_mmio_save(const struct virtio_dev *d, struct sbuf *b);
int virtio_mmio_restore(struct virtio_dev *d, struct srd *r, const char **why)
	__attribute__((warn_unused_result));
/* After a restore: re-raise a pending interrupt, look at every ready queue. */
void virtio_mmio_restart(struct virtio_dev *d);

#endif
