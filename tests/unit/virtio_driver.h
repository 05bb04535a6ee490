/* Test helper: a minimal virtio-mmio "driver" that pokes a transport's
 * registers the way Linux's virtio_mmio does. Header-only. */
#ifndef TESTS_VIRTIO_DRIVER_H
#define TESTS_VIRTIO_DRIVER_H

#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "devices/virtio_mmio.h"

static inline uint32_t vd_rd(struct virtio_dev *d, uint32_t off)
{
	uint32_t v;

	d->bus.ops->read(&d->bus, off, &v, 4);
	return v;
}

static inline void vd_wr(struct virtio_dev *d, uint32_t off, uint32_t v)
{
	d->bus.ops->write(&d->bus, off, &v, 4);
}

/* Negotiates `features` (both halves) and sets up queues 0..n-1 from
 * cfg[]. Returns the status read back. */
static inline uint32_t vd_setup_n(struct virtio_dev *d, uint64_t features, const struct vq_config *cfg,
				  unsigned n)
{
	unsigned q;

	vd_wr(d, 0x070, 0);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vd_wr(d, 0x024, 0);
	vd_wr(d, 0x020, (uint32_t)features);
	vd_wr(d, 0x024, 1);
	vd_wr(d, 0x020, (uint32_t)(features >> 32));
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	if (!(vd_rd(d, 0x070) & VIRTIO_STATUS_FEATURES_OK))
		return vd_rd(d, 0x070);
	for (q = 0; q < n; q++) {
		vd_wr(d, 0x030, q);
		vd_wr(d, 0x038, cfg[q].size);
		vd_wr(d, 0x080, (uint32_t)cfg[q].desc);
		vd_wr(d, 0x084, (uint32_t)(cfg[q].desc >> 32));
		vd_wr(d, 0x090, (uint32_t)cfg[q].avail);
		vd_wr(d, 0x094, (uint32_t)(cfg[q].avail >> 32));
		vd_wr(d, 0x0a0, (uint32_t)cfg[q].used);
		vd_wr(d, 0x0a4, (uint32_t)(cfg[q].used >> 32));
		vd_wr(d, 0x044, 1);
	}
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
			       VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
	return vd_rd(d, 0x070);
}

static inline uint32_t vd_setup(struct virtio_dev *d, uint64_t features, const struct vq_config *cfg)
{
	return vd_setup_n(d, features, cfg, 1);
}

/* Waits (up to 5 s) for an interrupt on the device's irq eventfd; returns
 * InterruptStatus then (and acknowledges it), or 0 on timeout. */
static inline uint32_t vd_wait_irq(struct virtio_dev *d)
{
	struct pollfd p = { .fd = d->irq_fd, .events = POLLIN };
	uint64_t v;
	uint32_t isr;

	if (poll(&p, 1, 5000) != 1)
		return 0;
	if (read(d->irq_fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	isr = vd_rd(d, 0x060);
	vd_wr(d, 0x064, isr);
	return isr;
}

static inline void vd_notify(struct virtio_dev *d, uint32_t q)
{
	vd_wr(d, 0x050, q);
}

#endif
