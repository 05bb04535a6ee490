/* virtio-balloon (virtio 1.2 section 5.5). Every PFN the guest hands over
 * is checked against guest RAM before any page is touched, and pages go
 * back to the host only through gm_discard (vmm/base/gm.h): the device never
 * turns a guest number into a pointer itself. Its loop runs under the
 * device seccomp class (madvise is in the common set). */
#include "devices/virtio_balloon.h"
#include "vmm/base/kvopt.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define BALLOON_NR_QUEUES 4 /* inflate, deflate, stats, reporting (no hinting) */
#define PFN_BATCH 256

enum balloon_q balloon_queue_role(uint64_t f, unsigned qi)
{
	unsigned next = 2;

	if (qi == 0)
		return BQ_INFLATE;
	if (qi == 1)
		return BQ_DEFLATE;
	/* 5.5.2: statsq, free_page_vq and reporting_vq exist only with their
	 * features, and an absent one takes no index (Linux numbers the
	 * queues it creates in order). */
	if ((f >> VIRTIO_BALLOON_F_STATS_VQ) & 1) {
		if (qi == next)
			return BQ_STATS;
		next++;
	}
	if ((f >> VIRTIO_BALLOON_F_FREE_PAGE_HINT) & 1)
		next++; /* never offered */
	if (((f >> VIRTIO_BALLOON_F_REPORTING) & 1) && qi == next)
		return BQ_REPORTING;
	return BQ_NONE;
}

int64_t virtio_balloon_pfns(struct virtio_balloon *b, const struct vq_chain *c, int inflate)
{
	uint32_t pfn[PFN_BATCH];
	struct vq_reader r;
	unsigned pass;

	/* 5.5.6: the driver hands over an array of 32-bit PFNs, read-only
	 * to the device. */
	if (c->nr_write || c->read_len % sizeof(uint32_t))
		return -1;
	/* Every PFN first: a request with one bad number changes nothing. */
	for (pass = 0; pass < 2; pass++) {
		size_t n;

		vq_reader_init(&r, c);
		while ((n = vq_read(&r, pfn, sizeof(pfn)) / sizeof(pfn[0])) > 0) {
			size_t i;

			for (i = 0; i < n; i++) {
				uint64_t gpa = (uint64_t)le32toh(pfn[i]) << BALLOON_PFN_SHIFT;

				if (pass == 0) {
					if (!gm_ptr(b->vdev.gm, gpa, GM_PAGE_SIZE))
						return -1;
				} else if (inflate) {
					if (gm_discard(b->vdev.gm, gpa, GM_PAGE_SIZE))
						b->discard_fails++;
					b->inflated++;
				} else {
					/* Nothing to do: the page faults back in
					 * when the guest touches it (zeros from the
					 * memfd; a clone's, the snapshot's page). */
					b->deflated++;
				}
			}
		}
	}
	if (inflate)
		b->inflate_chains++;
	else
		b->deflate_chains++;
	return 0;
}

int virtio_balloon_read_stats(struct virtio_balloon *b, const struct vq_chain *c)
{
	struct virtio_balloon_stat s;
	struct balloon_stats st;
	struct vq_reader r;

	if (c->nr_write)
		return -1;
	pthread_mutex_lock(&b->lock);
	st = b->stats;
	pthread_mutex_unlock(&b->lock);
	vq_reader_init(&r, c);
	while (vq_read(&r, &s, sizeof(s)) == sizeof(s)) {
		uint16_t tag = le16toh(s.tag);

		if (tag >= BALLOON_NR_STATS)
			continue; /* 5.5.6.3.2: unknown tags are ignored */
		st.valid[tag] = 1;
		st.val[tag] = le64toh(s.val);
	}
	st.updates++;
	pthread_mutex_lock(&b->lock);
	b->stats = st;
	pthread_mutex_unlock(&b->lock);
	return 0;
}

int64_t virtio_balloon_report(struct virtio_balloon *b, const struct vq_chain *c)
{
	unsigned i;

	/* Linux hands each free range over as a device-writable buffer;
	 * readable ones are taken too. vq_pop checked each lies in RAM. */
	for (i = 0; i < c->nr_read + c->nr_write; i++) {
		if (gm_discard_host(b->vdev.gm, c->buf[i].p, c->buf[i].len))
			b->discard_fails++;
		b->reported += c->buf[i].len / GM_PAGE_SIZE;
	}
	b->report_chains++;
	atomic_store_explicit(&b->last_report_ns, log_now_ns(), memory_order_relaxed);
	return 0;
}

/* Linux (mm/page_reporting.c) makes its first pass PAGE_REPORTING_DELAY
 * (2 s) after the driver registers, just before it sets DRIVER_OK, and
 * a pass hands free ranges over in batches of 32 until none is left.
 * A snapshot taken before that pass ends holds every free block
 * unreported, and each clone of it then reports them all itself: the
 * struct page of every free 4 MiB block is written (54 pages of a
 * 256 MiB guest), private pages each clone pays for. The slack covers a
 * slow guest's start of the pass, the quiet its batches. */
#define REPORT_FIRST_PASS_NS (2000000000ull + 300000000ull)
#define REPORT_QUIET_NS 250000000ull

uint64_t virtio_balloon_report_wait_ns(struct virtio_balloon *b, uint64_t now)
{
	uint64_t ok = atomic_load_explicit(&b->vdev.driver_ok_ns, memory_order_relaxed);
	uint64_t last = atomic_load_explicit(&b->last_report_ns, memory_order_relaxed);
	uint64_t due = 0;

	if (!((b->vdev.driver_features >> VIRTIO_BALLOON_F_REPORTING) & 1) ||
	    !(atomic_load(&b->vdev.status) & VIRTIO_STATUS_DRIVER_OK))
		return 0;
	if (ok)
		due = ok + REPORT_FIRST_PASS_NS;
	if (last && last + REPORT_QUIET_NS > due)
		due = last + REPORT_QUIET_NS;
	return due > now ? due - now : 0;
}

static int64_t inflate_chain(struct virtio_dev *d, const struct vq_chain *c)
{
	int64_t r = virtio_balloon_pfns(container_of(d, struct virtio_balloon, vdev), c, 1);

	if (r < 0)
		virtio_needs_reset(d, "balloon inflate: a writable buffer, a partial PFN or a page outside RAM");
	return r;
}

static int64_t deflate_chain(struct virtio_dev *d, const struct vq_chain *c)
{
	int64_t r = virtio_balloon_pfns(container_of(d, struct virtio_balloon, vdev), c, 0);

	if (r < 0)
		virtio_needs_reset(d, "balloon deflate: a writable buffer, a partial PFN or a page outside RAM");
	return r;
}

static int64_t report_chain(struct virtio_dev *d, const struct vq_chain *c)
{
	return virtio_balloon_report(container_of(d, struct virtio_balloon, vdev), c);
}

/* 5.5.6.3: the driver keeps one buffer on the stats queue; the device
 * reads it and holds it until it wants fresh numbers, then uses it. */
static void serve_stats(struct virtio_balloon *b, unsigned qi)
{
	struct vq *q = &b->vdev.q[qi].vq;
	const char *why = NULL;
	int r, pushed = 0;

	for (;;) {
		while ((r = vq_pop(q, &b->chain, &why)) > 0) {
			if (virtio_balloon_read_stats(b, &b->chain)) {
				virtio_needs_reset(&b->vdev, "balloon statistics in a writable buffer");
				goto out;
			}
			if (b->stats_held) {
				/* A second buffer: give the first back. */
				vq_push(q, b->stats_head, 0);
				pushed = 1;
			}
			b->stats_head = b->chain.head;
			b->stats_held = 1;
		}
		if (r < 0) {
			virtio_needs_reset(&b->vdev, why);
			goto out;
		}
		vq_set_avail_event(q);
		if (!vq_has_work(q))
			break;
	}
out:
	if (pushed)
		virtio_queue_used(&b->vdev, qi);
}

static int stats_queue(const struct virtio_balloon *b, unsigned *qi)
{
	unsigned i;

	for (i = 2; i < BALLOON_NR_QUEUES; i++) {
		if (balloon_queue_role(b->vdev.driver_features, i) == BQ_STATS) {
			*qi = i;
			return 1;
		}
	}
	return 0;
}

static void balloon_queue_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_balloon *b = container_of(d, struct virtio_balloon, vdev);

	switch (balloon_queue_role(d->driver_features, qi)) {
	case BQ_INFLATE:
		virtio_serve_queue(d, qi, &b->chain, inflate_chain);
		break;
	case BQ_DEFLATE:
		virtio_serve_queue(d, qi, &b->chain, deflate_chain);
		break;
	case BQ_STATS:
		serve_stats(b, qi);
		break;
	case BQ_REPORTING:
		virtio_serve_queue(d, qi, &b->chain, report_chain);
		break;
	case BQ_NONE:
		break; /* a queue the negotiated features do not have */
	}
}

/* The statistics poll: hand the held buffer back; the driver refills it. */
static void balloon_timer(struct evloop *l, struct evloop_source *s, uint32_t events)
{
	struct virtio_balloon *b = s->arg;
	unsigned qi;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(b->timer_fd, &v, sizeof(v)) < 0)
		return;
	if (!virtio_live(&b->vdev) || !b->stats_held || !stats_queue(b, &qi) || !b->vdev.q[qi].ready)
		return;
	b->stats_held = 0;
	vq_push(&b->vdev.q[qi].vq, b->stats_head, 0);
	virtio_queue_used(&b->vdev, qi);
}

/* The driver writes `actual` (5.5.6: after it changed the balloon); the
 * other fields are the device's. Under vdev.lock (the transport). */
static void balloon_config_write(struct virtio_dev *d, uint32_t off, const void *data, unsigned len)
{
	struct virtio_balloon *b = container_of(d, struct virtio_balloon, vdev);
	const uint32_t at = offsetof(struct virtio_balloon_config, actual);

	if (off >= at && off < at + 4 && len <= at + 4 - off)
		memcpy((uint8_t *)&b->config + off, data, len);
}

static void balloon_reset(struct virtio_dev *d)
{
	struct virtio_balloon *b = container_of(d, struct virtio_balloon, vdev);

	/* The driver's buffers are gone with its queues. */
	b->stats_held = 0;
	b->config.actual = 0;
}

/* The reporting queue's buffers are free ranges the host discards
 * (virtio_balloon_report), never writes: a diff snapshot need not hold
 * them. Marked, a guest whose first reporting pass went on after a
 * resume made the next suspend write all of its free memory. */
static int balloon_queue_unwritten(const struct virtio_dev *d, unsigned q)
{
	return balloon_queue_role(d->driver_features, q) == BQ_REPORTING;
}

static const struct virtio_dev_ops balloon_ops = {
	.device_id = VIRTIO_ID_BALLOON,
	.nr_queues = BALLOON_NR_QUEUES,
	.queue_max = BALLOON_QUEUE_SIZE,
	.queue_notify = balloon_queue_notify,
	.config_write = balloon_config_write,
	.reset = balloon_reset,
	.queue_unwritten = balloon_queue_unwritten,
};

static void arm_timer(struct virtio_balloon *b, uint32_t s, int now)
{
	struct itimerspec its = { .it_interval = { .tv_sec = s }, .it_value = { .tv_sec = s } };

	if (b->timer_fd < 0 || !s)
		return;
	if (now) {
		its.it_value.tv_sec = 0;
		its.it_value.tv_nsec = 1;
	}
	if (timerfd_settime(b->timer_fd, 0, &its, NULL) < 0)
		log_warn("balloon: cannot arm the statistics timer: %s", strerror(errno));
}

int virtio_balloon_init(struct virtio_balloon *b, const struct balloon_options *o, int vm_fd, const struct gm *gm,
			uint64_t base, unsigned irq)
{
	uint64_t features = 1ull << VIRTIO_F_INDIRECT_DESC;
	int e;

	memset(b, 0, sizeof(*b));
	b->timer_fd = -1;
	b->opt = *o;
	if ((uint64_t)o->amount_mib * BALLOON_PAGES_PER_MIB > gm->total / GM_PAGE_SIZE) {
		log_err("balloon: %u MiB is more than the guest's memory", o->amount_mib);
		return -EINVAL;
	}
	b->config.num_pages = htole32(o->amount_mib * BALLOON_PAGES_PER_MIB);
	b->stats_interval_s = o->stats_interval_s;
	if (o->deflate_on_oom)
		features |= 1ull << VIRTIO_BALLOON_F_DEFLATE_ON_OOM;
	if (o->free_page_reporting)
		features |= 1ull << VIRTIO_BALLOON_F_REPORTING;
	if ((e = -pthread_mutex_init(&b->lock, NULL)))
		return e;
	if (o->stats_interval_s) {
		features |= 1ull << VIRTIO_BALLOON_F_STATS_VQ;
		b->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (b->timer_fd < 0) {
			e = -errno;
			log_err("balloon: timerfd: %s", strerror(errno));
			goto err_lock;
		}
	}
	e = virtio_mmio_init(&b->vdev, &balloon_ops, "virtio-balloon", vm_fd, gm, base, irq, features,
			     (uint8_t *)&b->config, sizeof(b->config));
	if (e) {
		log_err("balloon: cannot set up the device: %s", strerror(-e));
		goto err_timer;
	}
	if (b->timer_fd >= 0) {
		/* Sources are added while the loop is paused (evloop.h). */
		evloop_pause(&b->vdev.loop);
		e = evloop_add(&b->vdev.loop, &b->timer_src, b->timer_fd, EPOLLIN, balloon_timer, b);
		evloop_resume(&b->vdev.loop);
		if (e) {
			virtio_mmio_destroy(&b->vdev);
			goto err_timer;
		}
		arm_timer(b, o->stats_interval_s, 0);
	}
	return 0;

err_timer:
	if (b->timer_fd >= 0)
		close(b->timer_fd);
	b->timer_fd = -1;
err_lock:
	pthread_mutex_destroy(&b->lock);
	return e;
}

void virtio_balloon_destroy(struct virtio_balloon *b)
{
	virtio_mmio_destroy(&b->vdev);
	if (b->timer_fd >= 0)
		close(b->timer_fd);
	b->timer_fd = -1;
	pthread_mutex_destroy(&b->lock);
}

void virtio_balloon_set_target(struct virtio_balloon *b, uint32_t amount_mib)
{
	pthread_mutex_lock(&b->vdev.lock);
	b->opt.amount_mib = amount_mib;
	b->config.num_pages = htole32(amount_mib * BALLOON_PAGES_PER_MIB);
	pthread_mutex_unlock(&b->vdev.lock);
	/* 5.5.6: the driver re-reads num_pages on a configuration change. */
	if (virtio_live(&b->vdev))
		virtio_config_changed(&b->vdev);
	else
		atomic_fetch_add(&b->vdev.config_gen, 1);
}

int virtio_balloon_set_interval(struct virtio_balloon *b, uint32_t s)
{
	if (b->timer_fd < 0 || !s)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	b->stats_interval_s = s;
	pthread_mutex_unlock(&b->lock);
	arm_timer(b, s, 1);
	return 0;
}

void virtio_balloon_get(struct virtio_balloon *b, uint32_t *target_pages, uint32_t *actual_pages,
			struct balloon_stats *st)
{
	pthread_mutex_lock(&b->vdev.lock);
	*target_pages = le32toh(b->config.num_pages);
	*actual_pages = le32toh(b->config.actual);
	pthread_mutex_unlock(&b->vdev.lock);
	if (st) {
		pthread_mutex_lock(&b->lock);
		*st = b->stats;
		pthread_mutex_unlock(&b->lock);
	}
}

void virtio_balloon_save(struct virtio_balloon *b, struct sbuf *s)
{
	sb_u32(s, le32toh(b->config.num_pages));
	sb_u32(s, le32toh(b->config.actual));
	sb_u32(s, b->stats_interval_s);
	sb_u8(s, (uint8_t)b->stats_held);
	sb_u16(s, b->stats_head);
}

int virtio_balloon_restore(struct virtio_balloon *b, struct srd *r, const char **why)
{
	uint32_t target = sr_u32(r), actual = sr_u32(r), interval = sr_u32(r);
	uint8_t held = sr_u8(r);
	uint16_t head = sr_u16(r);
	unsigned qi;

	if (r->err)
		return -EINVAL;
	if (target > b->vdev.gm->total / GM_PAGE_SIZE) {
		*why = "balloon target larger than guest memory";
		return -EINVAL;
	}
	if (held > 1 || (held && (!stats_queue(b, &qi) || !b->vdev.q[qi].ready || head >= b->vdev.q[qi].vq.size))) {
		*why = "balloon statistics buffer on no statistics queue";
		return -EINVAL;
	}
	if ((interval != 0) != (b->timer_fd >= 0)) {
		*why = "balloon statistics configured differently";
		return -EINVAL;
	}
	b->config.num_pages = htole32(target);
	b->config.actual = htole32(actual);
	b->opt.amount_mib = target / BALLOON_PAGES_PER_MIB;
	b->stats_interval_s = interval;
	b->stats_held = held;
	b->stats_head = head;
	return 0;
}

void virtio_balloon_restart(struct virtio_balloon *b)
{
	arm_timer(b, b->stats_interval_s, 0);
}

int balloon_options_parse(const char *s, struct balloon_options *o, const char **why)
{
	char *copy = strdup(s), *cur = copy, *tok, *val, *end;
	int r = 0, first = 1;
	unsigned long v;

	memset(o, 0, sizeof(*o));
	if (!copy)
		return -ENOMEM;
	for (; (tok = kvopt_next(&cur, &val)); first = 0) {
		if (first && tok[0] >= '0' && tok[0] <= '9') {
			errno = 0;
			v = strtoul(tok, &end, 10);
			if (errno || *end || val || v > UINT32_MAX / BALLOON_PAGES_PER_MIB)
				goto bad;
			o->amount_mib = (uint32_t)v;
		} else if (!strcmp(tok, "deflate_on_oom") && !val) {
			o->deflate_on_oom = 1;
		} else if (!strcmp(tok, "reporting") && !val) {
			o->free_page_reporting = 1;
		} else if (!strcmp(tok, "stats") && val) {
			errno = 0;
			v = strtoul(val, &end, 10);
			if (errno || *end || !val[0] || v > UINT32_MAX)
				goto bad;
			o->stats_interval_s = (uint32_t)v;
		} else {
			goto bad;
		}
	}
	free(copy);
	return r;
bad:
	*why = "--balloon takes MIB[,deflate_on_oom][,stats=SECONDS][,reporting]";
	free(copy);
	return -EINVAL;
}
