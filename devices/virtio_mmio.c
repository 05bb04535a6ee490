/* The virtio-mmio transport (devices/virtio_mmio.h, virtio 1.2 section 4.2). */
#include "devices/virtio_mmio.h"
#include "vmm/base/kvm.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Register offsets (4.2.2). */
enum {
	REG_MAGIC = 0x000,
	REG_VERSION = 0x004,
	REG_DEVICE_ID = 0x008,
	REG_VENDOR_ID = 0x00c,
	REG_DEVICE_FEATURES = 0x010,
	REG_DEVICE_FEATURES_SEL = 0x014,
	REG_DRIVER_FEATURES = 0x020,
	REG_DRIVER_FEATURES_SEL = 0x024,
	REG_QUEUE_SEL = 0x030,
	REG_QUEUE_NUM_MAX = 0x034,
	REG_QUEUE_NUM = 0x038,
	REG_QUEUE_READY = 0x044,
	REG_QUEUE_NOTIFY = 0x050,
	REG_INTERRUPT_STATUS = 0x060,
	REG_INTERRUPT_ACK = 0x064,
	REG_STATUS = 0x070,
	REG_QUEUE_DESC_LOW = 0x080,
	REG_QUEUE_DESC_HIGH = 0x084,
	REG_QUEUE_DRIVER_LOW = 0x090,
	REG_QUEUE_DRIVER_HIGH = 0x094,
	REG_QUEUE_DEVICE_LOW = 0x0a0,
	REG_QUEUE_DEVICE_HIGH = 0x0a4,
	REG_SHM_SEL = 0x0ac,
	REG_SHM_LEN_LOW = 0x0b0,
	REG_SHM_LEN_HIGH = 0x0b4,
	REG_SHM_BASE_LOW = 0x0b8,
	REG_SHM_BASE_HIGH = 0x0bc,
	REG_CONFIG_GENERATION = 0x0fc,
	REG_CONFIG = 0x100,
};

#define VIRTIO_MMIO_MAGIC 0x74726976 /* "virt" */
#define VIRTIO_MMIO_VENDOR 0x00564d4d /* "MMV\0": vmm */

int virtio_has_feature(const struct virtio_dev *d, unsigned bit)
{
	return (d->driver_features >> bit) & 1;
}

int virtio_live(const struct virtio_dev *d)
{
	uint32_t s = atomic_load_explicit(&d->status, memory_order_acquire);

	return (s & VIRTIO_STATUS_DRIVER_OK) &&
	       !(s & (VIRTIO_STATUS_NEEDS_RESET | VIRTIO_STATUS_FAILED));
}

static void raise_irq(struct virtio_dev *d, uint32_t bits)
{
	uint64_t one = 1;

	atomic_fetch_or(&d->isr, bits);
	if (write(d->irq_fd, &one, sizeof(one)) < 0) {
		/* counter saturated: an interrupt is pending anyway */
	}
}

void virtio_queue_used(struct virtio_dev *d, unsigned q)
{
	if (vq_should_notify(&d->q[q].vq))
		raise_irq(d, VIRTIO_MMIO_INT_VRING);
}

uint64_t virtio_serve_queue_rl(struct virtio_dev *d, unsigned qi, struct vq_chain *chain,
			       virtio_chain_fn *fn, struct ratelimit *rl)
{
	struct vq *q = &d->q[qi].vq;
	const char *why = NULL;
	uint64_t wait = 0;
	int pushed = 0, r;

	for (;;) {
		while ((r = vq_pop(q, chain, &why)) > 0) {
			int64_t len;

			/* The chain's size stands for the request's cost. */
			if (rl && (wait = rl_take(rl, chain->read_len + chain->write_len, log_now_ns()))) {
				vq_unpop(q);
				goto out;
			}
			len = fn(d, chain);
			if (len == VIRTIO_CHAIN_HELD)
				continue;
			if (len < 0)
				goto out;
			vq_push(q, chain->head, (uint32_t)len);
			pushed = 1;
		}
		if (r < 0) {
			virtio_needs_reset(d, why);
			goto out;
		}
		vq_set_avail_event(q);
		if (!vq_has_work(q))
			break;
	}
out:
	if (pushed)
		virtio_queue_used(d, qi);
	return wait;
}

void virtio_serve_queue(struct virtio_dev *d, unsigned qi, struct vq_chain *chain, virtio_chain_fn *fn)
{
	(void)virtio_serve_queue_rl(d, qi, chain, fn, NULL);
}

void virtio_needs_reset(struct virtio_dev *d, const char *why)
{
	uint32_t old = atomic_fetch_or(&d->status, VIRTIO_STATUS_NEEDS_RESET);

	if (old & VIRTIO_STATUS_NEEDS_RESET)
		return;
	if (log_ratelimit_ok(&d->rl))
		log_warn("%s: guest error, device needs reset: %s", d->name, why);
	atomic_fetch_add(&d->config_gen, 1);
	raise_irq(d, VIRTIO_MMIO_INT_CONFIG);
}

void virtio_config_changed(struct virtio_dev *d)
{
	atomic_fetch_add(&d->config_gen, 1);
	raise_irq(d, VIRTIO_MMIO_INT_CONFIG);
}

static void notify_handler(struct evloop *l, struct evloop_source *src, uint32_t events)
{
	struct virtio_queue *vq = src->arg;
	struct virtio_dev *d = container_of(l, struct virtio_dev, loop);
	unsigned q = (unsigned)(vq - d->q);
	uint64_t v;

	(void)events;
	if (read(vq->notify_fd, &v, sizeof(v)) < 0)
		return;
	if (virtio_live(d) && vq->ready)
		d->ops->queue_notify(d, q);
}

/* Called with d->lock held, from a vCPU thread. The device thread is
 * paused meanwhile, so no request is half done when state is cleared. */
static void virtio_reset(struct virtio_dev *d)
{
	unsigned i;

	evloop_pause(&d->loop);
	atomic_store(&d->status, 0);
	atomic_store(&d->isr, 0);
	d->driver_features = 0;
	d->dev_feat_sel = d->drv_feat_sel = d->queue_sel = 0;
	for (i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		memset(&d->q[i].cfg, 0, sizeof(d->q[i].cfg));
		memset(&d->q[i].vq, 0, sizeof(d->q[i].vq));
		d->q[i].ready = 0;
	}
	if (d->ops->reset)
		d->ops->reset(d);
	evloop_resume(&d->loop);
}

static struct virtio_queue *selected(struct virtio_dev *d)
{
	/* QueueSel is guest-written: index only after the check. */
	return d->queue_sel < d->ops->nr_queues ? &d->q[d->queue_sel] : NULL;
}

/* Queue registers may change only between FEATURES_OK and DRIVER_OK
 * (4.2.3.2), and only for a queue that is not live yet. */
static struct virtio_queue *queue_writable(struct virtio_dev *d)
{
	uint32_t s = atomic_load(&d->status);
	struct virtio_queue *q = selected(d);

	if (!q || !(s & VIRTIO_STATUS_FEATURES_OK) || (s & VIRTIO_STATUS_DRIVER_OK))
		return NULL;
	return q;
}

static int features_ok(struct virtio_dev *d)
{
	/* Modern devices need VERSION_1 (6.1); anything not offered was
	 * already masked off when the driver wrote it. */
	return virtio_has_feature(d, VIRTIO_F_VERSION_1);
}

static void write_status(struct virtio_dev *d, uint32_t v)
{
	uint32_t s = atomic_load(&d->status) & ~(uint32_t)VIRTIO_STATUS_NEEDS_RESET;
	uint32_t added = v & ~s;
	unsigned i;

	if (v == 0) {
		virtio_reset(d);
		return;
	}
	v &= ~(uint32_t)VIRTIO_STATUS_NEEDS_RESET; /* device-owned bit */
	if (v & VIRTIO_STATUS_FAILED) {
		atomic_fetch_or(&d->status, VIRTIO_STATUS_FAILED);
		return;
	}
	/* 2.1.2 / 3.1.1: bits are only added, one step at a time, in order. */
	if ((v & s) != s || !added)
		goto invalid;
	if (added == VIRTIO_STATUS_ACKNOWLEDGE && s == 0)
		goto accept;
	if (added == VIRTIO_STATUS_DRIVER && s == VIRTIO_STATUS_ACKNOWLEDGE)
		goto accept;
	if (added == VIRTIO_STATUS_FEATURES_OK && s == (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER)) {
		/* 3.1.1: if the features are unacceptable, FEATURES_OK stays
		 * clear and the driver sees it when it reads status back. */
		if (!features_ok(d)) {
			if (log_ratelimit_ok(&d->rl))
				log_warn("%s: driver features 0x%llx refused (no VERSION_1)", d->name,
					 (unsigned long long)d->driver_features);
			return;
		}
		goto accept;
	}
	if (added == VIRTIO_STATUS_DRIVER_OK &&
	    s == (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK)) {
		atomic_store_explicit(&d->driver_ok_ns, log_now_ns(), memory_order_relaxed);
		atomic_fetch_or_explicit(&d->status, VIRTIO_STATUS_DRIVER_OK, memory_order_release);
		/* Serve whatever the driver queued before DRIVER_OK. */
		for (i = 0; i < d->ops->nr_queues; i++) {
			uint64_t one = 1;

			if (d->q[i].ready && write(d->q[i].notify_fd, &one, sizeof(one)) < 0) {
				/* saturated: already pending */
			}
		}
		return;
	}
invalid:
	if (log_ratelimit_ok(&d->rl))
		log_warn("%s: invalid status transition 0x%x -> 0x%x ignored", d->name, s, v);
	return;
accept:
	atomic_fetch_or(&d->status, added);
}

static void set_half(uint64_t *v, int high, uint32_t val)
{
	if (high)
		*v = (*v & 0xffffffffull) | ((uint64_t)val << 32);
	else
		*v = (*v & ~0xffffffffull) | val;
}

/* Queue `i`'s ring (q->cfg) validated and q->vq set up for it: 0, or
 * -EINVAL with `why` set. */
static int queue_init(struct virtio_dev *d, struct virtio_queue *q, unsigned i, const char **why)
{
	if (vq_init(&q->vq, d->gm, &q->cfg, d->ops->queue_max, virtio_has_feature(d, VIRTIO_F_EVENT_IDX),
		    virtio_has_feature(d, VIRTIO_F_INDIRECT_DESC), why))
		return -EINVAL;
	q->vq.unwritten = d->ops->queue_unwritten && d->ops->queue_unwritten(d, i);
	return 0;
}

static void queue_ready(struct virtio_dev *d, struct virtio_queue *q, uint32_t v)
{
	const char *why = NULL;

	if (!v) {
		q->ready = 0;
		return;
	}
	/* Validate the whole ring placement once, here (2.7). */
	if (queue_init(d, q, (unsigned)(q - d->q), &why)) {
		virtio_needs_reset(d, why);
		return;
	}
	q->ready = 1;
}

static void reg_write(struct virtio_dev *d, uint32_t off, uint32_t v)
{
	struct virtio_queue *q;
	uint32_t s = atomic_load(&d->status);

	switch (off) {
	case REG_DEVICE_FEATURES_SEL:
		d->dev_feat_sel = v;
		break;
	case REG_DRIVER_FEATURES_SEL:
		d->drv_feat_sel = v;
		break;
	case REG_DRIVER_FEATURES:
		/* Only while negotiating (DRIVER set, FEATURES_OK not yet). */
		if (!(s & VIRTIO_STATUS_DRIVER) || (s & VIRTIO_STATUS_FEATURES_OK) || d->drv_feat_sel > 1)
			break;
		/* Mask anything we never offered. */
		set_half(&d->driver_features, d->drv_feat_sel == 1,
			 v & (uint32_t)(d->features >> (32 * d->drv_feat_sel)));
		break;
	case REG_QUEUE_SEL:
		d->queue_sel = v;
		break;
	case REG_QUEUE_NUM:
		if ((q = queue_writable(d)) && !q->ready)
			q->cfg.size = (uint16_t)(v > 0xffff ? 0 : v);
		break;
	case REG_QUEUE_READY:
		if ((q = queue_writable(d)))
			queue_ready(d, q, v);
		break;
	case REG_QUEUE_DESC_LOW:
	case REG_QUEUE_DESC_HIGH:
		if ((q = queue_writable(d)) && !q->ready)
			set_half(&q->cfg.desc, off == REG_QUEUE_DESC_HIGH, v);
		break;
	case REG_QUEUE_DRIVER_LOW:
	case REG_QUEUE_DRIVER_HIGH:
		if ((q = queue_writable(d)) && !q->ready)
			set_half(&q->cfg.avail, off == REG_QUEUE_DRIVER_HIGH, v);
		break;
	case REG_QUEUE_DEVICE_LOW:
	case REG_QUEUE_DEVICE_HIGH:
		if ((q = queue_writable(d)) && !q->ready)
			set_half(&q->cfg.used, off == REG_QUEUE_DEVICE_HIGH, v);
		break;
	case REG_QUEUE_NOTIFY:
		/* Normally caught by the ioeventfd; this is the fallback. */
		if (v < d->ops->nr_queues) {
			uint64_t one = 1;

			if (write(d->q[v].notify_fd, &one, sizeof(one)) < 0) {
				/* saturated: already pending */
			}
		}
		break;
	case REG_INTERRUPT_ACK:
		atomic_fetch_and(&d->isr, ~v);
		break;
	case REG_STATUS:
		write_status(d, v);
		break;
	case REG_SHM_SEL:
		break;
	default:
		if (log_ratelimit_ok(&d->rl))
			log_debug("%s: write to read-only or unknown register 0x%x", d->name, off);
	}
}

static uint32_t reg_read(struct virtio_dev *d, uint32_t off)
{
	struct virtio_queue *q = selected(d);

	switch (off) {
	case REG_MAGIC:
		return VIRTIO_MMIO_MAGIC;
	case REG_VERSION:
		return 2;
	case REG_DEVICE_ID:
		return d->ops->device_id;
	case REG_VENDOR_ID:
		return VIRTIO_MMIO_VENDOR;
	case REG_DEVICE_FEATURES:
		return d->dev_feat_sel > 1 ? 0 : (uint32_t)(d->features >> (32 * d->dev_feat_sel));
	case REG_QUEUE_NUM_MAX:
		return q ? d->ops->queue_max : 0;
	case REG_QUEUE_READY:
		return q ? (uint32_t)q->ready : 0;
	case REG_INTERRUPT_STATUS:
		return atomic_load(&d->isr);
	case REG_STATUS:
		return atomic_load(&d->status);
	case REG_QUEUE_NUM:
		return q ? q->cfg.size : 0;
	case REG_QUEUE_DESC_LOW:
	case REG_QUEUE_DESC_HIGH:
		return q ? (uint32_t)(q->cfg.desc >> (off == REG_QUEUE_DESC_HIGH ? 32 : 0)) : 0;
	case REG_QUEUE_DRIVER_LOW:
	case REG_QUEUE_DRIVER_HIGH:
		return q ? (uint32_t)(q->cfg.avail >> (off == REG_QUEUE_DRIVER_HIGH ? 32 : 0)) : 0;
	case REG_QUEUE_DEVICE_LOW:
	case REG_QUEUE_DEVICE_HIGH:
		return q ? (uint32_t)(q->cfg.used >> (off == REG_QUEUE_DEVICE_HIGH ? 32 : 0)) : 0;
	case REG_SHM_LEN_LOW:
	case REG_SHM_LEN_HIGH:
	case REG_SHM_BASE_LOW:
	case REG_SHM_BASE_HIGH:
		return 0xffffffff; /* no shared memory regions */
	case REG_CONFIG_GENERATION:
		return atomic_load(&d->config_gen);
	default:
		return 0;
	}
}

static void mmio_read(struct bus_dev *b, uint64_t off, void *data, unsigned len)
{
	struct virtio_dev *d = container_of(b, struct virtio_dev, bus);

	memset(data, 0, len);
	if (off >= REG_CONFIG) {
		uint64_t c = off - REG_CONFIG;

		/* Config space: any width, bounds-checked; past the end reads 0. */
		if (c < d->config_len && len <= d->config_len - c) {
			pthread_mutex_lock(&d->lock);
			memcpy(data, d->config + c, len);
			pthread_mutex_unlock(&d->lock);
		}
		return;
	}
	/* 4.2.2.2: registers are read with aligned 32-bit accesses only. */
	if (len != 4 || off % 4)
		return;
	pthread_mutex_lock(&d->lock);
	{
		uint32_t v = reg_read(d, (uint32_t)off);

		memcpy(data, &v, 4);
	}
	pthread_mutex_unlock(&d->lock);
}

static void mmio_write(struct bus_dev *b, uint64_t off, const void *data, unsigned len)
{
	struct virtio_dev *d = container_of(b, struct virtio_dev, bus);
	uint32_t v;

	if (off >= REG_CONFIG) {
		uint64_t c = off - REG_CONFIG;

		if (d->ops->config_write && c < d->config_len && len <= d->config_len - c) {
			pthread_mutex_lock(&d->lock);
			d->ops->config_write(d, (uint32_t)c, data, len);
			pthread_mutex_unlock(&d->lock);
		}
		return;
	}
	if (len != 4 || off % 4)
		return;
	memcpy(&v, data, 4);
	pthread_mutex_lock(&d->lock);
	reg_write(d, (uint32_t)off, v);
	pthread_mutex_unlock(&d->lock);
}

static const struct bus_ops virtio_mmio_ops = {
	.read = mmio_read,
	.write = mmio_write,
};

static int kvm_wire(struct virtio_dev *d, uint64_t base, int assign)
{
	unsigned i;
	int r;

	if (d->vm_fd < 0)
		return 0;
	for (i = 0; i < d->ops->nr_queues; i++) {
		struct kvm_ioeventfd io = {
			.datamatch = i,
			.addr = base + REG_QUEUE_NOTIFY,
			.len = 4,
			.fd = d->q[i].notify_fd,
			.flags = KVM_IOEVENTFD_FLAG_DATAMATCH |
				 (assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN),
		};
		r = kvm_ioctl_ptr(d->vm_fd, KVM_IOEVENTFD, &io);
		if (r < 0 && assign)
			return r;
	}
	{
		struct kvm_irqfd irqfd = {
			.fd = (uint32_t)d->irq_fd,
			.gsi = d->irq,
			.flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN,
		};
		r = kvm_ioctl_ptr(d->vm_fd, KVM_IRQFD, &irqfd);
		if (r < 0 && assign)
			return r;
	}
	return 0;
}

int virtio_mmio_init(struct virtio_dev *d, const struct virtio_dev_ops *ops, const char *name,
		     int vm_fd, const struct gm *gm, uint64_t base, unsigned irq,
		     uint64_t features, uint8_t *config, uint32_t config_len)
{
	const struct log_ratelimit rl = LOG_RATELIMIT_INIT;
	unsigned i;
	int r;

	memset(d, 0, sizeof(*d));
	if (ops->nr_queues == 0 || ops->nr_queues > VIRTIO_MAX_QUEUES || ops->queue_max == 0 ||
	    ops->queue_max > VQ_MAX_SIZE || (ops->queue_max & (ops->queue_max - 1)) ||
	    config_len > VIRTIO_MMIO_SIZE - REG_CONFIG)
		return -EINVAL;
	d->bus.base = base;
	d->bus.len = VIRTIO_MMIO_SIZE;
	d->bus.ops = &virtio_mmio_ops;
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->bus.name = d->name;
	d->ops = ops;
	d->gm = gm;
	d->vm_fd = vm_fd;
	d->irq = irq;
	d->features = features | (1ull << VIRTIO_F_VERSION_1);
	d->config = config;
	d->config_len = config_len;
	d->rl = rl;
	d->irq_fd = -1;
	for (i = 0; i < VIRTIO_MAX_QUEUES; i++)
		d->q[i].notify_fd = -1;
	r = evloop_init(&d->loop, d->name);
	if (r)
		return r;
	pthread_mutex_init(&d->lock, NULL);
	d->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->irq_fd < 0) {
		r = -errno;
		goto err;
	}
	for (i = 0; i < ops->nr_queues; i++) {
		d->q[i].notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (d->q[i].notify_fd < 0) {
			r = -errno;
			goto err;
		}
		r = evloop_add(&d->loop, &d->q[i].notify_src, d->q[i].notify_fd, EPOLLIN, notify_handler,
			       &d->q[i]);
		if (r)
			goto err;
	}
	r = kvm_wire(d, base, 1);
	if (r)
		goto err;
	r = evloop_start(&d->loop);
	if (r)
		goto err_unwire;
	return 0;

err_unwire:
	kvm_wire(d, base, 0);
err:
	virtio_mmio_destroy(d);
	return r;
}

void virtio_mmio_destroy(struct virtio_dev *d)
{
	unsigned i;

	evloop_destroy(&d->loop);
	if (d->irq_fd >= 0)
		kvm_wire(d, d->bus.base, 0);
	for (i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		if (d->q[i].notify_fd >= 0)
			close(d->q[i].notify_fd);
		d->q[i].notify_fd = -1;
	}
	if (d->irq_fd >= 0)
		close(d->irq_fd);
	d->irq_fd = -1;
	pthread_mutex_destroy(&d->lock);
}

int virtio_mmio_cmdline(const struct virtio_dev *d, char *buf, size_t len)
{
	int n = snprintf(buf, len, "virtio_mmio.device=4K@0x%llx:%u",
			 (unsigned long long)d->bus.base, d->irq);

	return n < 0 || (size_t)n >= len ? -E2BIG : 0;
}

/* Snapshot record of the transport (docs/snapshot.md): the registers the
 * driver wrote and each queue's placement and indices. */
void virtio_mmio_save(const struct virtio_dev *d, struct sbuf *b)
{
	unsigned i;

	sb_u32(b, d->ops->device_id);
	sb_u64(b, d->features);
	sb_u64(b, d->driver_features);
	sb_u32(b, atomic_load(&d->status));
	sb_u32(b, d->dev_feat_sel);
	sb_u32(b, d->drv_feat_sel);
	sb_u32(b, d->queue_sel);
	sb_u32(b, atomic_load(&d->isr));
	sb_u32(b, atomic_load(&d->config_gen));
	sb_u32(b, d->ops->nr_queues);
	for (i = 0; i < d->ops->nr_queues; i++) {
		const struct virtio_queue *q = &d->q[i];

		sb_u16(b, q->cfg.size);
		sb_u8(b, (uint8_t)q->ready);
		sb_u64(b, q->cfg.desc);
		sb_u64(b, q->cfg.avail);
		sb_u64(b, q->cfg.used);
		sb_u16(b, q->vq.last_avail);
		sb_u16(b, q->vq.used_idx);
		sb_u16(b, q->vq.signalled);
		sb_u8(b, (uint8_t)q->vq.signalled_valid);
	}
}

/* The states a driver can reach (3.1.1), NEEDS_RESET and FAILED aside. */
static int status_reachable(uint32_t s)
{
	const uint32_t A = VIRTIO_STATUS_ACKNOWLEDGE, D = VIRTIO_STATUS_DRIVER,
		       F = VIRTIO_STATUS_FEATURES_OK, O = VIRTIO_STATUS_DRIVER_OK;

	s &= ~(uint32_t)(VIRTIO_STATUS_NEEDS_RESET | VIRTIO_STATUS_FAILED);
	return s == 0 || s == A || s == (A | D) || s == (A | D | F) || s == (A | D | F | O);
}

int virtio_mmio_restore(struct virtio_dev *d, struct srd *r, const char **why)
{
	struct virtio_queue qs[VIRTIO_MAX_QUEUES];
	uint64_t features, drv;
	uint32_t status, dsel, vsel, qsel, isr, gen, nq;
	uint16_t last[VIRTIO_MAX_QUEUES], used[VIRTIO_MAX_QUEUES], sig[VIRTIO_MAX_QUEUES];
	uint8_t sigv[VIRTIO_MAX_QUEUES];
	unsigned i;

	if (sr_u32(r) != d->ops->device_id) {
		*why = "a device of another type sits in this slot";
		return -EINVAL;
	}
	features = sr_u64(r);
	drv = sr_u64(r);
	status = sr_u32(r);
	dsel = sr_u32(r);
	vsel = sr_u32(r);
	qsel = sr_u32(r);
	isr = sr_u32(r);
	gen = sr_u32(r);
	nq = sr_u32(r);
	if (r->err)
		return -EINVAL;
	if (nq != d->ops->nr_queues) {
		*why = "queue count differs from this device's";
		return -EINVAL;
	}
	memset(qs, 0, sizeof(qs));
	for (i = 0; i < nq; i++) {
		qs[i].cfg.size = sr_u16(r);
		qs[i].ready = sr_u8(r);
		qs[i].cfg.desc = sr_u64(r);
		qs[i].cfg.avail = sr_u64(r);
		qs[i].cfg.used = sr_u64(r);
		last[i] = sr_u16(r);
		used[i] = sr_u16(r);
		sig[i] = sr_u16(r);
		sigv[i] = sr_u8(r);
	}
	if (r->err)
		return -EINVAL;
	/* The same checks live register writes go through. */
	if (features != d->features) {
		*why = "the device offers other features than when the snapshot was taken";
		return -EINVAL;
	}
	if (drv & ~features) {
		*why = "driver features include bits the device never offered";
		return -EINVAL;
	}
	if (!status_reachable(status)) {
		*why = "device status is not one a driver can reach";
		return -EINVAL;
	}
	if ((status & VIRTIO_STATUS_FEATURES_OK) && !((drv >> VIRTIO_F_VERSION_1) & 1)) {
		*why = "FEATURES_OK without VERSION_1";
		return -EINVAL;
	}
	if (isr & ~(uint32_t)(VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG)) {
		*why = "interrupt status has undefined bits";
		return -EINVAL;
	}
	d->driver_features = drv; /* vq_init below reads the negotiated bits */
	for (i = 0; i < nq; i++) {
		if (qs[i].ready > 1) {
			*why = "queue ready flag is neither 0 nor 1";
			return -EINVAL;
		}
		if (!qs[i].ready)
			continue;
		if (!(status & VIRTIO_STATUS_FEATURES_OK)) {
			*why = "a queue is ready before FEATURES_OK";
			return -EINVAL;
		}
		if (queue_init(d, &qs[i], i, why))
			return -EINVAL;
		if ((uint16_t)(last[i] - used[i]) > qs[i].cfg.size) {
			*why = "queue indices further apart than the queue size";
			return -EINVAL;
		}
		qs[i].vq.last_avail = last[i];
		qs[i].vq.used_idx = used[i];
		qs[i].vq.signalled = sig[i];
		qs[i].vq.signalled_valid = sigv[i] ? 1 : 0;
	}
	/* Everything checked: commit. */
	pthread_mutex_lock(&d->lock);
	d->dev_feat_sel = dsel;
	d->drv_feat_sel = vsel;
	d->queue_sel = qsel;
	for (i = 0; i < nq; i++) {
		d->q[i].cfg = qs[i].cfg;
		d->q[i].vq = qs[i].vq;
		d->q[i].ready = qs[i].ready;
	}
	atomic_store(&d->isr, isr);
	atomic_store(&d->config_gen, gen);
	atomic_store(&d->status, status);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

void virtio_mmio_restart(struct virtio_dev *d)
{
	unsigned i;

	if (atomic_load(&d->isr))
		raise_irq(d, 0);
	for (i = 0; i < d->ops->nr_queues; i++) {
		uint64_t one = 1;

		if (d->q[i].ready && write(d->q[i].notify_fd, &one, sizeof(one)) < 0) {
			/* saturated: already pending */
		}
	}
}
