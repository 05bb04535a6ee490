/* virtio-fs device (virtio 1.2 section 5.11). Each request is one chain:
 * the readable part holds struct fuse_in_header and its arguments, the
 * writable part receives struct fuse_out_header and the reply (5.11.6).
 * The FUSE server (fuse.c) sees the chain only as iovecs. */
#include "devices/virtio_fs.h"
#include "vmm/base/kvopt.h"

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int fs_tag_valid(const char *tag)
{
	size_t i, n = strlen(tag);

	if (n == 0 || n >= VIRTIO_FS_TAG_LEN || !strcmp(tag, ".") || !strcmp(tag, ".."))
		return 0;
	for (i = 0; i < n; i++) {
		char c = tag[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int fs_guest_path_valid(const char *p)
{
	size_t i, n = strlen(p);

	if (n < 2 || n > 100 || p[0] != '/' || strstr(p, "//") || p[n - 1] == '/')
		return 0;
	for (i = 0; i < n; i++) {
		char c = p[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-' || c == '/'))
			return 0;
		/* a part that is "." or ".." */
		if (c == '.' && p[i - 1] == '/' &&
		    (p[i + 1] == '/' || !p[i + 1] || (p[i + 1] == '.' && (p[i + 2] == '/' || !p[i + 2]))))
			return 0;
	}
	return 1;
}

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

static int64_t fs_chain(struct virtio_dev *d, const struct vq_chain *c)
{
	return virtio_fs_handle(container_of(d, struct virtio_fs, vdev), c);
}

static void fs_queue_notify(struct virtio_dev *d, unsigned qi)
{
	/* 5.11.2: hiprio and request queues carry the same FUSE requests
	 * (the hiprio one only FORGETs and INTERRUPTs); one thread serves
	 * both, so the server needs no locks. */
	virtio_serve_queue(d, qi, &container_of(d, struct virtio_fs, vdev)->chain, fs_chain);
}

static void fs_reset(struct virtio_dev *d)
{
	/* The guest's FUSE session is gone with the reset: so are its inodes. */
	fuse_server_reset(&container_of(d, struct virtio_fs, vdev)->srv);
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
	if (f->usage_map)
		munmap(f->usage_map, sizeof(int64_t));
	f->usage_map = NULL;
}

static int fs_map_usage(struct virtio_fs *f, const struct fs_options *o)
{
	struct stat st;
	void *m;
	int fd, r = 0;

	if (!o->usage)
		return 0;
	fd = open(o->usage, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		r = -errno;
	else if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(int64_t))
		r = -EINVAL;
	else if ((m = mmap(NULL, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		r = -errno;
	else
		f->usage_map = m;
	if (fd >= 0)
		close(fd);
	if (r)
		log_err("--fs %s: usage file %s: %s", o->tag, o->usage, strerror(-r));
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
	r = virtio_mmio_init(&f->vdev, &fs_ops, name, vm_fd, gm, base, irq, features,
			     (uint8_t *)&f->config, sizeof(f->config));
	if (r) {
		log_err("--fs %s: cannot set up the device: %s", o->tag, strerror(-r));
		fuse_server_destroy(&f->srv);
		fs_unmap_usage(f);
		return r;
	}
	return 0;
}

void virtio_fs_destroy(struct virtio_fs *f)
{
	virtio_mmio_destroy(&f->vdev); /* stops the loop thread first */
	fuse_server_destroy(&f->srv);
	fs_unmap_usage(f);
}
