/* virtio-fs device (virtio 1.2 section 5.11). Each request is one chain:
 * the readable part holds struct fuse_in_header and its arguments, the
 * writable part receives struct fuse_out_header and the reply (5.11.6).
 * The FUSE server (fuse.c) sees the chain only as iovecs.
 *
 * A SETLKW whose range is held is not answered at once: the device keeps
 * its chain (parked) and a timer retries the lock every
 * VIRTIO_FS_LK_RETRY_NS until it is granted, fails or is interrupted
 * (FUSE_INTERRUPT), then pushes the chain; the other requests go on
 * meanwhile (the used ring takes chains in any order, 2.7.8). */
#include "devices/virtio_fs.h"
#include "vmm/base/kvopt.h"

#include <endian.h>
#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* One owned string option: replaces what it held. 0 or -ENOMEM. */
static int fs_set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -ENOMEM;
}

int fs_options_parse(const char *s, struct fs_options *o, const char **why)
{
	char *copy = strdup(s), *cur = copy, *key, *v;
	int r = 0;

	memset(o, 0, sizeof(*o));
	if (!copy)
		return -ENOMEM;
	while ((key = kvopt_next(&cur, &v))) {
		if (!strcmp(key, "path") && v && *v) {
			if ((r = fs_set_str(&o->path, v)))
				break;
		} else if (!strcmp(key, "at") && v && fs_guest_path_valid(v)) {
			if ((r = fs_set_str(&o->at, v)))
				break;
		} else if (!strcmp(key, "usage") && v && v[0] == '/') {
			if ((r = fs_set_str(&o->usage, v)))
				break;
		} else if (!strcmp(key, "limit") && v && *v) {
			char *end;

			o->limit = strtoull(v, &end, 10);
			if (*end || !o->limit) {
				*why = "limit=BYTES: a positive number of bytes";
				r = -EINVAL;
				break;
			}
		} else if (!strcmp(key, "tag") && v) {
			if (!fs_tag_valid(v)) {
				*why = "tag must be 1 to 35 of A-Z a-z 0-9 . _ - (and not . or ..)";
				r = -EINVAL;
				break;
			}
			snprintf(o->tag, sizeof(o->tag), "%s", v);
		} else if (!strcmp(key, "ro") && !v) {
			o->ro = 1;
		} else if (!strcmp(key, "cache") && v && !strcmp(v, "none")) {
			o->cache = FUSE_CACHE_NONE;
		} else if (!strcmp(key, "cache") && v && !strcmp(v, "auto")) {
			o->cache = FUSE_CACHE_AUTO;
		} else {
			*why = "unknown --fs option (tag=NAME,path=DIR[,ro][,cache=none|auto][,at=/DIR]"
			       "[,limit=BYTES,usage=FILE])";
			r = -EINVAL;
			break;
		}
	}
	if (!r && (!o->path || !o->tag[0])) {
		*why = "--fs needs tag=NAME and path=DIR";
		r = -EINVAL;
	} else if (!r && !o->limit != !o->usage) {
		*why = "limit=BYTES and usage=FILE go together";
		r = -EINVAL;
	}
	free(copy);
	if (r)
		fs_options_free(o);
	return r;
}

void fs_options_free(struct fs_options *o)
{
	free(o->path);
	free(o->at);
	free(o->usage);
	o->path = o->at = o->usage = NULL;
}

/* Keeps the chain of the SETLKW the server just parked: where its reply
 * header goes. */
static int64_t park(struct virtio_fs *f, const struct vq_chain *c, int nout)
{
	struct fs_parked *p = NULL;
	size_t want = sizeof(struct fuse_out_header);
	unsigned i;

	for (i = 0; i < FUSE_LK_WAITERS_MAX && !p; i++)
		if (!f->parked[i].used)
			p = &f->parked[i];
	if (!p)
		return 0; /* cannot be: the server parks no more than there are slots */
	memset(p, 0, sizeof(*p));
	for (i = 0; i < (unsigned)nout && want && p->nout < VIRTIO_FS_PARK_IOV; i++) {
		size_t k = f->out[i].iov_len < want ? f->out[i].iov_len : want;

		if (!k)
			continue;
		p->out[p->nout].iov_base = f->out[i].iov_base;
		p->out[p->nout++].iov_len = k;
		want -= k;
	}
	p->used = 1;
	p->head = c->head;
	p->unique = f->srv.wait_unique;
	return VIRTIO_CHAIN_HELD;
}

int64_t virtio_fs_handle(struct virtio_fs *f, const struct vq_chain *c)
{
	struct vq_reader r;
	struct vq_writer w;
	int nin, nout;
	int64_t len;

	vq_reader_init(&r, c);
	vq_writer_init(&w, c);
	/* The chain is already validated (in guest RAM, readable before
	 * writable); at most VQ_MAX_CHAIN buffers, so these cannot fail. */
	nin = vq_reader_iov(&r, c->read_len, f->in, VQ_MAX_CHAIN);
	nout = vq_writer_iov(&w, c->write_len, f->out, VQ_MAX_CHAIN);
	if (nin < 0 || nout < 0)
		return 0;
	len = fuse_handle(&f->srv, f->in, nin, f->out, nout);
	if (len == FUSE_WAIT)
		return park(f, c, nout);
	if (len < 0) {
		/* No header to answer, or no room for the reply header: the
		 * buffer goes back unused (5.11.6 has no way to say more);
		 * the device and the other requests carry on. */
		f->bad_chains++;
		if (log_ratelimit_ok(&f->rl))
			log_warn("%s: a request without a FUSE header or room for the reply; returned unused",
				 f->vdev.name);
		return 0;
	}
	return len;
}

/* Writes the reply header of a decided SETLKW and pushes its chain. */
static void unpark(struct virtio_fs *f, const struct fuse_lk_done *d)
{
	struct fuse_out_header oh = { .len = sizeof(oh), .error = d->error, .unique = d->unique };
	const uint8_t *src = (const uint8_t *)&oh;
	unsigned i;
	int k;

	for (i = 0; i < FUSE_LK_WAITERS_MAX; i++) {
		struct fs_parked *p = &f->parked[i];

		if (!p->used || p->unique != d->unique)
			continue;
		for (k = 0; k < p->nout; k++) {
			memcpy(p->out[k].iov_base, src, p->out[k].iov_len);
			gm_mark_host(f->vdev.gm, p->out[k].iov_base, p->out[k].iov_len);
			src += p->out[k].iov_len;
		}
		vq_push(&f->vdev.q[VIRTIO_FS_QUEUE_REQUEST].vq, p->head,
			(uint32_t)(src - (const uint8_t *)&oh));
		p->used = 0;
		return;
	}
}

static void arm_timer(struct virtio_fs *f)
{
	struct itimerspec its = { 0 };

	if (f->timer_fd < 0)
		return;
	if (fuse_lk_waiting(&f->srv)) {
		its.it_value.tv_nsec = VIRTIO_FS_LK_RETRY_NS;
		its.it_interval.tv_nsec = VIRTIO_FS_LK_RETRY_NS;
	}
	(void)timerfd_settime(f->timer_fd, 0, &its, NULL);
}

void virtio_fs_lk_poll(struct virtio_fs *f)
{
	struct fuse_lk_done done[FUSE_LK_WAITERS_MAX];
	unsigned i, n;

	if (!fuse_lk_waiting(&f->srv))
		return;
	n = fuse_lk_poll(&f->srv, done, FUSE_LK_WAITERS_MAX);
	for (i = 0; i < n; i++)
		unpark(f, &done[i]);
	if (n)
		virtio_queue_used(&f->vdev, VIRTIO_FS_QUEUE_REQUEST);
}

void virtio_fs_quiesce(struct virtio_fs *f)
{
	fuse_lk_interrupt_all(&f->srv);
	virtio_fs_lk_poll(f);
	arm_timer(f);
}

static void fs_timer(struct evloop *l, struct evloop_source *src, uint32_t events)
{
	struct virtio_fs *f = src->arg;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(f->timer_fd, &v, sizeof(v)) < 0 && errno == EAGAIN)
		return;
	if (virtio_live(&f->vdev) && f->vdev.q[VIRTIO_FS_QUEUE_REQUEST].ready)
		virtio_fs_lk_poll(f);
	arm_timer(f);
}

static int64_t fs_chain(struct virtio_dev *d, const struct vq_chain *c)
{
	return virtio_fs_handle(container_of(d, struct virtio_fs, vdev), c);
}

static void fs_queue_notify(struct virtio_dev *d, unsigned qi)
{
	/* 5.11.2: hiprio and request queues carry the same FUSE requests
	 * (the hiprio one only FORGETs and INTERRUPTs); one thread serves
	 * both, so the server needs no locks. */
	struct virtio_fs *f = container_of(d, struct virtio_fs, vdev);

	virtio_serve_queue(d, qi, &f->chain, fs_chain);
	/* An UNLOCK or INTERRUPT just served may decide a waiter; the timer
	 * runs while any is left. */
	if (f->vdev.q[VIRTIO_FS_QUEUE_REQUEST].ready)
		virtio_fs_lk_poll(f);
	arm_timer(f);
}

static void fs_reset(struct virtio_dev *d)
{
	struct virtio_fs *f = container_of(d, struct virtio_fs, vdev);

	/* The guest's FUSE session is gone with the reset: so are its inodes,
	 * its locks and the chains of its waiting SETLKWs (the rings too). */
	fuse_server_reset(&f->srv);
	memset(f->parked, 0, sizeof(f->parked));
	/* The timer is left alone (this is a vCPU thread): it finds no
	 * waiter at its next tick and stops. */
}

static const struct virtio_dev_ops fs_ops = {
	.device_id = VIRTIO_ID_FS,
	.nr_queues = 2,
	.queue_max = VIRTIO_FS_QUEUE_SIZE,
	.queue_notify = fs_queue_notify,
	.reset = fs_reset,
};

/* The drive's byte count: the 8-byte file every VMM sharing the drive
 * maps shared, so each one's writes count against the one limit. */
static void fs_unmap_usage(struct virtio_fs *f)
{
	struct fuse_budget b = { .used = f->usage_map };

	fuse_budget_unmap(&b);
	f->usage_map = NULL;
}

static int fs_map_usage(struct virtio_fs *f, const struct fs_options *o)
{
	struct fuse_budget b;
	int r;

	if (!o->usage)
		return 0;
	if ((r = fuse_budget_map(&b, o->usage, o->limit)))
		log_err("--fs %s: usage file %s: %s", o->tag, o->usage, strerror(-r));
	else
		f->usage_map = b.used;
	return r;
}

int virtio_fs_init(struct virtio_fs *f, const struct fs_options *o, int vm_fd, const struct gm *gm,
		   uint64_t base, unsigned irq, unsigned index)
{
	const struct log_ratelimit rl = LOG_RATELIMIT_INIT;
	struct fuse_params p = { .path = o->path, .tag = o->tag, .ro = o->ro, .cache = o->cache };
	uint64_t features = (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC);
	char name[24];
	int r;

	memset(f, 0, offsetof(struct virtio_fs, chain)); /* not the scratch (virtio_fs.h) */
	f->rl = rl;
	f->timer_fd = -1;
	if (!fs_tag_valid(o->tag)) {
		log_err("--fs: invalid tag '%s'", o->tag);
		return -EINVAL;
	}
	if ((r = fs_map_usage(f, o)))
		return r;
	p.budget = (struct fuse_budget){ .used = f->usage_map, .limit = o->limit };
	if ((r = fuse_server_init(&f->srv, &p))) {
		fs_unmap_usage(f);
		return r;
	}
	/* 5.11.4: the tag is UTF-8, NUL-padded (not terminated if 36 bytes). */
	memcpy(f->config.tag, o->tag, strnlen(o->tag, VIRTIO_FS_TAG_LEN));
	f->config.num_request_queues = htole32(1);
	snprintf(name, sizeof(name), "virtio-fs%u", index);
	f->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (f->timer_fd < 0) {
		r = -errno;
		log_err("--fs %s: timerfd: %s", o->tag, strerror(errno));
		goto err_srv;
	}
	r = virtio_mmio_init(&f->vdev, &fs_ops, name, vm_fd, gm, base, irq, features,
			     (uint8_t *)&f->config, sizeof(f->config));
	if (r) {
		log_err("--fs %s: cannot set up the device: %s", o->tag, strerror(-r));
		goto err_timer;
	}
	/* Sources are added while the loop is paused (evloop.h). */
	evloop_pause(&f->vdev.loop);
	r = evloop_add(&f->vdev.loop, &f->timer_src, f->timer_fd, EPOLLIN, fs_timer, f);
	evloop_resume(&f->vdev.loop);
	if (r) {
		log_err("--fs %s: cannot watch the lock timer: %s", o->tag, strerror(-r));
		virtio_mmio_destroy(&f->vdev);
		goto err_timer;
	}
	return 0;

err_timer:
	close(f->timer_fd);
	f->timer_fd = -1;
err_srv:
	fuse_server_destroy(&f->srv);
	fs_unmap_usage(f);
	return r;
}

void virtio_fs_destroy(struct virtio_fs *f)
{
	virtio_mmio_destroy(&f->vdev); /* stops the loop thread first */
	fuse_server_destroy(&f->srv);  /* closes the lock descriptors: the host drops their locks */
	fs_unmap_usage(f);
	if (f->timer_fd >= 0)
		close(f->timer_fd);
	f->timer_fd = -1;
}
