/* virtio-rng (virtio 1.2 section 5.4): the guest puts device-writable
 * buffers on its one queue, the device fills them from getrandom(2) and
 * hands them back. Its loop runs under the device seccomp class
 * (getrandom is in every class's common set). */
#include "devices/virtio_rng.h"
#include "vmm/base/kvopt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

static long host_random(void *buf, size_t len)
{
	ssize_t n;

	do
		n = getrandom(buf, len, 0);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : (long)n;
}

int64_t virtio_rng_handle(struct virtio_rng *r, const struct vq_chain *c)
{
	struct vq_writer w;
	uint64_t want, done = 0;
	int i, n;

	/* 5.4.6.2: the driver MUST NOT place driver-readable buffers in
	 * the queue; a chain with no room at all is no request either. */
	if (c->nr_read || c->write_len == 0)
		return -1;
	want = c->write_len < RNG_MAX_REQ ? c->write_len : RNG_MAX_REQ;
	vq_writer_init(&w, c);
	n = vq_writer_iov(&w, want, r->iov, VQ_MAX_CHAIN);
	if (n < 0)
		return -1; /* cannot happen: a chain has at most VQ_MAX_CHAIN buffers */
	r->reqs++;
	for (i = 0; i < n; i++) {
		size_t off = 0;

		while (off < r->iov[i].iov_len) {
			long got = r->fill((uint8_t *)r->iov[i].iov_base + off, r->iov[i].iov_len - off);

			if (got <= 0) {
				/* 5.4.6.1 wants at least one byte; with none
				 * to give, the buffer goes back empty and
				 * Linux's driver asks again. */
				r->fails++;
				return (int64_t)done;
			}
			off += (size_t)got;
			done += (uint64_t)got;
		}
	}
	r->bytes += done;
	return (int64_t)done;
}

static int64_t rng_chain(struct virtio_dev *d, const struct vq_chain *c)
{
	int64_t len = virtio_rng_handle(container_of(d, struct virtio_rng, vdev), c);

	if (len < 0)
		virtio_needs_reset(d, "virtio-rng request with a driver-readable buffer or no room (5.4.6.2)");
	return len;
}

static void rng_queue_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_rng *r = container_of(d, struct virtio_rng, vdev);
	uint64_t wait;

	if (r->timer_fd < 0) {
		virtio_serve_queue(d, qi, &r->chain, rng_chain);
		return;
	}
	if (r->throttled)
		return; /* the timer resumes us */
	wait = virtio_serve_queue_rl(d, qi, &r->chain, rng_chain, &r->rl);
	if (wait) {
		struct itimerspec its = { .it_value = { .tv_sec = (time_t)(wait / 1000000000ull),
							.tv_nsec = (long)(wait % 1000000000ull) } };

		r->waits++;
		if (timerfd_settime(r->timer_fd, 0, &its, NULL) == 0)
			r->throttled = 1;
	}
}

static void rng_timer(struct evloop *l, struct evloop_source *s, uint32_t events)
{
	struct virtio_rng *r = s->arg;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(r->timer_fd, &v, sizeof(v)) < 0 && errno == EAGAIN)
		return;
	r->throttled = 0;
	if (virtio_live(&r->vdev) && r->vdev.q[0].ready)
		rng_queue_notify(&r->vdev, 0);
}

static void rng_reset(struct virtio_dev *d)
{
	container_of(d, struct virtio_rng, vdev)->throttled = 0;
}

static const struct virtio_dev_ops rng_ops = {
	.device_id = VIRTIO_ID_RNG,
	.nr_queues = 1,
	.queue_max = RNG_QUEUE_SIZE,
	.queue_notify = rng_queue_notify,
	.reset = rng_reset,
};

int rng_options_parse(const char *s, struct rng_options *o, const char **why)
{
	char *copy, *cur, *key, *v;
	int r = 0;

	memset(o, 0, sizeof(*o));
	if (!s[0] || !strcmp(s, "on"))
		return 0;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	cur = copy;
	while ((key = kvopt_next(&cur, &v))) {
		if (v && (!strcmp(key, "bps") || !strcmp(key, "ops"))) {
			if (rl_parse_rate(v, key[0] == 'b' ? &o->rl.bytes_per_s : &o->rl.ops_per_s)) {
				*why = "bps= and ops= are numbers per second, with an optional k, M or G";
				r = -EINVAL;
				break;
			}
		} else {
			*why = "unknown --entropy option ([bps=RATE][,ops=RATE])";
			r = -EINVAL;
			break;
		}
	}
	free(copy);
	return r;
}

int virtio_rng_init(struct virtio_rng *r, const struct rng_options *o, int vm_fd, const struct gm *gm,
		    uint64_t base, unsigned irq)
{
	int e;

	memset(r, 0, sizeof(*r));
	r->timer_fd = -1;
	r->fill = host_random;
	r->limits = o->rl;
	if (o->rl.bytes_per_s || o->rl.ops_per_s) {
		rl_init_limits(&r->rl, &o->rl, log_now_ns());
		r->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (r->timer_fd < 0) {
			e = -errno;
			log_err("entropy device: timerfd: %s", strerror(errno));
			return e;
		}
	}
	e = virtio_mmio_init(&r->vdev, &rng_ops, "virtio-rng", vm_fd, gm, base, irq,
			     (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC), NULL, 0);
	if (e) {
		log_err("entropy device: cannot set it up: %s", strerror(-e));
		goto err_timer;
	}
	if (r->timer_fd >= 0) {
		/* Sources are added while the loop is paused (evloop.h). */
		evloop_pause(&r->vdev.loop);
		e = evloop_add(&r->vdev.loop, &r->timer_src, r->timer_fd, EPOLLIN, rng_timer, r);
		evloop_resume(&r->vdev.loop);
		if (e) {
			virtio_mmio_destroy(&r->vdev);
			goto err_timer;
		}
	}
	return 0;

err_timer:
	if (r->timer_fd >= 0)
		close(r->timer_fd);
	r->timer_fd = -1;
	return e;
}

void virtio_rng_destroy(struct virtio_rng *r)
{
	virtio_mmio_destroy(&r->vdev);
	if (r->timer_fd >= 0)
		close(r->timer_fd);
	r->timer_fd = -1;
}
