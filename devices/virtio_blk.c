/* virtio-blk: the request parser is pure (table-tested and fuzzed); the
 * device runs requests with preadv/pwritev/fdatasync/fallocate on its own
 * event-loop thread. A guest write is acknowledged only after pwritev
 * handed it to the host kernel, and FLUSH only after fdatasync. */
#include "devices/virtio_blk.h"
#include "vmm/base/kvopt.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* Is [sector, sector + n) inside the disk? (overflow-safe) */
static int in_range(uint64_t sector, uint64_t n, uint64_t capacity)
{
	return sector <= capacity && n <= capacity - sector;
}

uint8_t blk_parse(const struct virtio_blk_outhdr *hdr, uint64_t read_data, uint64_t write_data,
		  uint64_t capacity, int ro, uint64_t features, struct blk_req *req)
{
	memset(req, 0, sizeof(*req));
	req->type = le32toh(hdr->type);
	req->sector = le64toh(hdr->sector);
	switch (req->type) {
	case VIRTIO_BLK_T_IN:
		req->len = write_data;
		break;
	case VIRTIO_BLK_T_OUT:
		if (ro)
			return VIRTIO_BLK_S_IOERR; /* 5.2.6.2: RO devices fail writes */
		req->len = read_data;
		break;
	case VIRTIO_BLK_T_FLUSH:
		return (features >> VIRTIO_BLK_F_FLUSH) & 1 ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_UNSUPP;
	case VIRTIO_BLK_T_GET_ID:
		return write_data ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		if (!((features >> (req->type == VIRTIO_BLK_T_DISCARD ? VIRTIO_BLK_F_DISCARD
									   : VIRTIO_BLK_F_WRITE_ZEROES)) & 1))
			return VIRTIO_BLK_S_UNSUPP;
		if (ro)
			return VIRTIO_BLK_S_IOERR;
		if (read_data == 0 || read_data % sizeof(struct virtio_blk_discard_wz) ||
		    read_data / sizeof(struct virtio_blk_discard_wz) > BLK_MAX_DISCARD_SEG)
			return VIRTIO_BLK_S_UNSUPP;
		req->nseg = (unsigned)(read_data / sizeof(struct virtio_blk_discard_wz));
		return VIRTIO_BLK_S_OK;
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
	/* IN and OUT: whole sectors, inside the disk. */
	if (req->len % BLK_SECTOR)
		return VIRTIO_BLK_S_IOERR;
	if (!in_range(req->sector, req->len / BLK_SECTOR, capacity))
		return VIRTIO_BLK_S_IOERR;
	return VIRTIO_BLK_S_OK;
}

uint8_t blk_check_segment(const struct virtio_blk_discard_wz *s, uint32_t type, uint64_t capacity)
{
	uint32_t flags = le32toh(s->flags);
	uint32_t n = le32toh(s->num_sectors);

	/* 5.2.6.2: unknown flags, and UNMAP on DISCARD, are unsupported. */
	if (flags & ~(uint32_t)VIRTIO_BLK_WZ_F_UNMAP)
		return VIRTIO_BLK_S_UNSUPP;
	if (type == VIRTIO_BLK_T_DISCARD && flags)
		return VIRTIO_BLK_S_UNSUPP;
	if (n > BLK_MAX_DISCARD_SECTORS)
		return VIRTIO_BLK_S_UNSUPP;
	if (!in_range(le64toh(s->sector), n, capacity))
		return VIRTIO_BLK_S_IOERR;
	return VIRTIO_BLK_S_OK;
}

static uint8_t errno_status(int e)
{
	(void)e; /* EIO, ENOSPC, EDQUOT...: all an I/O error to the guest */
	return VIRTIO_BLK_S_IOERR;
}

static uint8_t do_rw(struct virtio_blk *b, int write, uint64_t sector, struct iovec *iov, int n,
		     uint64_t len)
{
	off_t off = (off_t)(sector * BLK_SECTOR);

	while (len) {
		ssize_t r = write ? pwritev(b->fd, iov, n, off) : preadv(b->fd, iov, n, off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno_status(errno);
		}
		if (r == 0)
			return VIRTIO_BLK_S_IOERR; /* the image shrank under us */
		len -= (uint64_t)r;
		off += r;
		/* Short transfer: drop what was done from the iovecs. */
		while (r > 0 && n > 0) {
			if ((size_t)r >= iov->iov_len) {
				r -= (ssize_t)iov->iov_len;
				iov++;
				n--;
			} else {
				iov->iov_base = (uint8_t *)iov->iov_base + r;
				iov->iov_len -= (size_t)r;
				r = 0;
			}
		}
	}
	return VIRTIO_BLK_S_OK;
}

static uint8_t zero_range(struct virtio_blk *b, uint64_t sector, uint32_t n, int punch)
{
	off_t off = (off_t)(sector * BLK_SECTOR), len = (off_t)n * BLK_SECTOR;
	/* 64 KiB a write from one zeroed page: a 64 KiB array would sit in
	 * the binary's read-only data, among pages every VMM maps. */
	static const uint8_t zeros[4096];
	struct iovec iov[16];

	if (n == 0)
		return VIRTIO_BLK_S_OK;
	if (punch && fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) == 0)
		return VIRTIO_BLK_S_OK;
	if (!punch && fallocate(b->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off, len) == 0)
		return VIRTIO_BLK_S_OK;
	/* Filesystems without hole punching: write the zeros. */
	while (len > 0) {
		size_t left = len > (off_t)(16 * sizeof(zeros)) ? 16 * sizeof(zeros) : (size_t)len;
		int cnt;
		ssize_t w;

		for (cnt = 0; left > 0; cnt++) {
			iov[cnt].iov_base = (void *)zeros;
			iov[cnt].iov_len = left < sizeof(zeros) ? left : sizeof(zeros);
			left -= iov[cnt].iov_len;
		}
		w = pwritev(b->fd, iov, cnt, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return VIRTIO_BLK_S_IOERR;
		off += w;
		len -= w;
	}
	return VIRTIO_BLK_S_OK;
}

static uint8_t do_discard_wz(struct virtio_blk *b, const struct blk_req *req, struct vq_reader *r)
{
	struct virtio_blk_discard_wz seg[BLK_MAX_DISCARD_SEG];
	unsigned i;
	uint8_t st;

	/* Check every segment before touching the image. */
	if (vq_read(r, seg, req->nseg * sizeof(seg[0])) != req->nseg * sizeof(seg[0]))
		return VIRTIO_BLK_S_IOERR;
	for (i = 0; i < req->nseg; i++)
		if ((st = blk_check_segment(&seg[i], req->type, b->capacity)) != VIRTIO_BLK_S_OK)
			return st;
	for (i = 0; i < req->nseg; i++) {
		int punch = req->type == VIRTIO_BLK_T_DISCARD ||
			    (le32toh(seg[i].flags) & VIRTIO_BLK_WZ_F_UNMAP);

		st = zero_range(b, le64toh(seg[i].sector), le32toh(seg[i].num_sectors), punch);
		if (st != VIRTIO_BLK_S_OK)
			return st;
	}
	return VIRTIO_BLK_S_OK;
}

int64_t virtio_blk_handle(struct virtio_blk *b, const struct vq_chain *c)
{
	struct virtio_blk_outhdr hdr;
	struct vq_reader r;
	struct vq_writer w, status;
	struct blk_req req;
	uint64_t written = 0;
	uint8_t st;
	int n;

	vq_reader_init(&r, c);
	vq_writer_init(&w, c);
	/* 5.2.6: header readable, status byte the last writable byte. */
	if (c->read_len < sizeof(hdr) || vq_writer_split_tail(&w, 1, &status))
		return -1;
	vq_read(&r, &hdr, sizeof(hdr));
	st = blk_parse(&hdr, r.left, w.left, b->capacity, b->ro, b->vdev.driver_features, &req);
	if (st != VIRTIO_BLK_S_OK)
		goto done;
	switch (req.type) {
	case VIRTIO_BLK_T_IN:
		n = vq_writer_iov(&w, req.len, b->iov, VQ_MAX_CHAIN);
		st = n < 0 ? VIRTIO_BLK_S_IOERR : do_rw(b, 0, req.sector, b->iov, n, req.len);
		if (st == VIRTIO_BLK_S_OK)
			written = req.len;
		break;
	case VIRTIO_BLK_T_OUT:
		n = vq_reader_iov(&r, req.len, b->iov, VQ_MAX_CHAIN);
		st = n < 0 ? VIRTIO_BLK_S_IOERR : do_rw(b, 1, req.sector, b->iov, n, req.len);
		break;
	case VIRTIO_BLK_T_FLUSH:
		st = fdatasync(b->fd) ? errno_status(errno) : VIRTIO_BLK_S_OK;
		break;
	case VIRTIO_BLK_T_GET_ID:
		written = vq_write(&w, b->serial, VIRTIO_BLK_ID_BYTES);
		break;
	default: /* DISCARD, WRITE_ZEROES */
		st = do_discard_wz(b, &req, &r);
		break;
	}
done:
	if (st != VIRTIO_BLK_S_OK)
		b->errors++;
	b->reqs++;
	vq_write(&status, &st, 1);
	return (int64_t)(written + 1);
}

static int64_t blk_chain(struct virtio_dev *d, const struct vq_chain *c)
{
	int64_t len = virtio_blk_handle(container_of(d, struct virtio_blk, vdev), c);

	if (len < 0)
		virtio_needs_reset(d, "virtio-blk request without header or status byte");
	return len;
}

static void blk_queue_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_blk *b = container_of(d, struct virtio_blk, vdev);
	uint64_t wait;

	if (b->timer_fd < 0) {
		virtio_serve_queue(d, qi, &b->chain, blk_chain);
		return;
	}
	if (b->throttled)
		return; /* the timer resumes us */
	wait = virtio_serve_queue_rl(d, qi, &b->chain, blk_chain, &b->rl);
	if (wait) {
		struct itimerspec its = { .it_value = { .tv_sec = (time_t)(wait / 1000000000ull),
							.tv_nsec = (long)(wait % 1000000000ull) } };

		b->waits++;
		if (timerfd_settime(b->timer_fd, 0, &its, NULL) == 0)
			b->throttled = 1;
	}
}

static void blk_timer(struct evloop *l, struct evloop_source *s, uint32_t events)
{
	struct virtio_blk *b = s->arg;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(b->timer_fd, &v, sizeof(v)) < 0 && errno == EAGAIN)
		return;
	b->throttled = 0;
	if (virtio_live(&b->vdev) && b->vdev.q[0].ready)
		blk_queue_notify(&b->vdev, 0);
}

static void blk_reset(struct virtio_dev *d)
{
	container_of(d, struct virtio_blk, vdev)->throttled = 0;
}

static const struct virtio_dev_ops blk_ops = {
	.device_id = VIRTIO_ID_BLOCK,
	.nr_queues = 1,
	.queue_max = BLK_QUEUE_SIZE,
	.queue_notify = blk_queue_notify,
	.reset = blk_reset,
};

int blk_options_parse(const char *s, struct blk_options *o, const char **why)
{
	char *copy = strdup(s), *cur = copy, *key, *v;
	int r = 0;

	memset(o, 0, sizeof(*o));
	if (!copy)
		return -ENOMEM;
	while ((key = kvopt_next(&cur, &v))) {
		if (!strcmp(key, "path") && v && *v) {
			free(o->path);
			o->path = strdup(v);
			if (!o->path) {
				r = -ENOMEM;
				break;
			}
		} else if (v && (!strcmp(key, "bps") || !strcmp(key, "iops"))) {
			if (rl_parse_rate(v, key[0] == 'b' ? &o->rl.bytes_per_s : &o->rl.ops_per_s)) {
				*why = "bps= and iops= are numbers per second, with an optional k, M or G";
				r = -EINVAL;
				break;
			}
		} else if (!strcmp(key, "ro") && !v) {
			o->ro = 1;
		} else if (!strcmp(key, "root") && !v) {
			o->root = 1;
		} else if (!strcmp(key, "lock") && v && (!strcmp(v, "off") || !strcmp(v, "on"))) {
			o->no_lock = v[1] == 'f';
		} else if (v && (!strcmp(key, "id") || !strcmp(key, "serial"))) {
			if (strlen(v) > VIRTIO_BLK_ID_BYTES) {
				*why = "id/serial is longer than 20 bytes";
				r = -EINVAL;
				break;
			}
			snprintf(o->id, sizeof(o->id), "%s", v);
		} else {
			*why = "unknown --disk option (path=FILE[,ro][,root][,id=ID][,bps=RATE][,iops=RATE][,lock=off])";
			r = -EINVAL;
			break;
		}
	}
	if (!r && !o->path) {
		*why = "--disk needs path=FILE";
		r = -EINVAL;
	}
	free(copy);
	if (r)
		blk_options_free(o);
	return r;
}

void blk_options_free(struct blk_options *o)
{
	free(o->path);
	o->path = NULL;
}

int blk_lock(int fd, int ro)
{
	struct flock fl = { .l_type = ro ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET };

	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	return errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
}

int blk_lock_probe(const char *path, int ro)
{
	struct flock fl = { .l_type = ro ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET };
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		r = -errno;
	else
		r = fl.l_type != F_UNLCK;
	close(fd);
	return r;
}

int virtio_blk_init(struct virtio_blk *b, const struct blk_options *o, int vm_fd,
		    const struct gm *gm, uint64_t base, unsigned irq, unsigned index)
{
	struct stat st;
	uint64_t features;
	char name[24];
	int r;

	memset(b, 0, offsetof(struct virtio_blk, chain)); /* not the scratch (virtio_blk.h) */
	b->timer_fd = -1;
	b->ro = o->ro;
	b->fd = open(o->path, (o->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (b->fd < 0) {
		r = -errno;
		log_err("--disk %s: %s", o->path, strerror(errno));
		return r;
	}
	if (fstat(b->fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
		log_err("--disk %s: not a regular file or block device", o->path);
		r = -EINVAL;
		goto err_close;
	}
	/* Before the guest sees a byte of it: a disk another VMM writes (or
	 * reads, if this one writes) is refused (blk_lock). */
	if (!o->no_lock && (r = blk_lock(b->fd, o->ro))) {
		if (r == -EBUSY) {
			log_err("--disk %s: in use by another process (it holds the disk's lock); stop it, or add "
				"lock=off to share the disk deliberately", o->path);
			goto err_close;
		}
		log_warn("--disk %s: cannot lock it (%s): nothing stops another VMM from opening it too",
			 o->path, strerror(-r));
		r = 0;
	}
	if (S_ISBLK(st.st_mode)) {
		off_t end = lseek(b->fd, 0, SEEK_END);

		st.st_size = end < 0 ? 0 : end;
	}
	b->capacity = (uint64_t)st.st_size / BLK_SECTOR;
	if ((uint64_t)st.st_size % BLK_SECTOR)
		log_warn("--disk %s: size is not a multiple of 512; the last %llu bytes are not visible",
			 o->path, (unsigned long long)((uint64_t)st.st_size % BLK_SECTOR));
	/* GET_ID: the id, or "vmm-disk-N", padded with NULs to 20 bytes. */
	if (o->id[0])
		memcpy(b->serial, o->id, strnlen(o->id, VIRTIO_BLK_ID_BYTES));
	else
		snprintf(b->serial, VIRTIO_BLK_ID_BYTES, "vmm-disk-%u", index);

	features = (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC) |
		   (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_BLK_SIZE) |
		   (1ull << VIRTIO_BLK_F_FLUSH);
	if (o->ro)
		features |= 1ull << VIRTIO_BLK_F_RO;
	else
		features |= (1ull << VIRTIO_BLK_F_DISCARD) | (1ull << VIRTIO_BLK_F_WRITE_ZEROES);
	b->config.capacity = htole64(b->capacity);
	b->config.seg_max = htole32(BLK_SEG_MAX);
	b->config.blk_size = htole32(BLK_SECTOR);
	b->config.num_queues = htole16(1);
	b->config.writeback = 1;
	b->config.max_discard_sectors = htole32(BLK_MAX_DISCARD_SECTORS);
	b->config.max_discard_seg = htole32(BLK_MAX_DISCARD_SEG);
	b->config.discard_sector_alignment = htole32(1);
	b->config.max_write_zeroes_sectors = htole32(BLK_MAX_DISCARD_SECTORS);
	b->config.max_write_zeroes_seg = htole32(BLK_MAX_DISCARD_SEG);
	b->config.write_zeroes_may_unmap = 1;
	snprintf(name, sizeof(name), "virtio-blk%u", index);
	if (o->rl.bytes_per_s || o->rl.ops_per_s) {
		rl_init_limits(&b->rl, &o->rl, log_now_ns());
		b->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (b->timer_fd < 0) {
			r = -errno;
			log_err("--disk %s: timerfd: %s", o->path, strerror(errno));
			goto err_close;
		}
	}
	r = virtio_mmio_init(&b->vdev, &blk_ops, name, vm_fd, gm, base, irq, features,
			     (uint8_t *)&b->config, sizeof(b->config));
	if (r) {
		log_err("--disk %s: cannot set up the device: %s", o->path, strerror(-r));
		goto err_timer;
	}
	if (b->timer_fd >= 0) {
		/* Sources are added while the loop is paused (evloop.h). */
		evloop_pause(&b->vdev.loop);
		r = evloop_add(&b->vdev.loop, &b->timer_src, b->timer_fd, EPOLLIN, blk_timer, b);
		evloop_resume(&b->vdev.loop);
		if (r) {
			virtio_mmio_destroy(&b->vdev);
			goto err_timer;
		}
	}
	return 0;

err_timer:
	if (b->timer_fd >= 0)
		close(b->timer_fd);
	b->timer_fd = -1;
err_close:
	close(b->fd);
	b->fd = -1;
	return r;
}

void virtio_blk_destroy(struct virtio_blk *b)
{
	virtio_mmio_destroy(&b->vdev);
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	if (b->timer_fd >= 0)
		close(b->timer_fd);
	b->timer_fd = -1;
}

/* PATCH /drives/{id} (Firecracker's UpdateGuestDrive): the device's one
 * place that reopens its backing file. Main thread, while the VM runs.
 * The new file is opened and checked first (a refusal changes nothing);
 * then, with the device loop parked between requests, the file, the
 * capacity and the limits are swapped. The capacity is written under the
 * register lock the guest's config reads take, and the config generation
 * moves after it (virtio 1.2 2.5.1: a driver that read the old generation
 * reads again), then a configuration change interrupt (4.2.2, InterruptStatus
 * bit 1) tells the driver to re-read its config space: Linux's virtio-blk
 * then resizes the disk. */
int virtio_blk_update(struct virtio_blk *b, const char *path, const struct rl_limits *rl, const char **why)
{
	uint64_t capacity = b->capacity;
	int fd = -1, timer = -1, r;
	struct stat st;

	if (path) {
		fd = open(path, (b->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			*why = "cannot open the new backing file";
			return r;
		}
		if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
			*why = "the new backing file is not a regular file or block device";
			r = -EINVAL;
			goto err;
		}
		if (S_ISBLK(st.st_mode)) {
			off_t end = lseek(fd, 0, SEEK_END);

			st.st_size = end < 0 ? 0 : end;
		}
		capacity = (uint64_t)st.st_size / BLK_SECTOR;
	}
	if (rl && (rl->bytes_per_s || rl->ops_per_s) && b->timer_fd < 0) {
		timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (timer < 0) {
			r = -errno;
			*why = "timerfd";
			goto err;
		}
	}
	evloop_pause(&b->vdev.loop);
	if (timer >= 0) {
		/* Sources are added while the loop is paused (evloop.h). */
		r = evloop_add(&b->vdev.loop, &b->timer_src, timer, EPOLLIN, blk_timer, b);
		if (r) {
			evloop_resume(&b->vdev.loop);
			*why = "cannot watch the rate limiter's timer";
			close(timer);
			goto err;
		}
		b->timer_fd = timer;
	}
	if (rl)
		rl_init_limits(&b->rl, rl, log_now_ns());
	if (path) {
		close(b->fd);
		b->fd = fd;
		pthread_mutex_lock(&b->vdev.lock);
		b->capacity = capacity;
		b->config.capacity = htole64(capacity);
		pthread_mutex_unlock(&b->vdev.lock);
	}
	evloop_resume(&b->vdev.loop);
	if (path) {
		if (virtio_live(&b->vdev))
			virtio_config_changed(&b->vdev);
		else
			atomic_fetch_add(&b->vdev.config_gen, 1);
	}
	return 0;

err:
	if (fd >= 0)
		close(fd);
	return r;
}

void virtio_blk_limits(const struct virtio_blk *b, struct rl_limits *l)
{
	l->bytes_per_s = b->rl.bytes.rate;
	l->bytes_burst = b->rl.bytes.burst;
	l->ops_per_s = b->rl.ops.rate;
	l->ops_burst = b->rl.ops.burst;
}
