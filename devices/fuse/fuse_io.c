/* The FUSE server's open files (fuse_internal.h): OPEN and OPENDIR,
 * CREATE, READ and WRITE (straight between the guest's buffers and the
 * host file), FLUSH, FSYNC(DIR), RELEASE(DIR), FALLOCATE, LSEEK. */
#include "devices/fuse/fuse_internal.h"
#include "devices/fuse/fuse_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Guest buffers one READ or WRITE may span: max_pages (256) plus slack for
 * misaligned and split ones. */
#define FUSE_MAX_IOV 260

/* Guest open flags we pass on; creation flags are ours to decide. */
static int open_flags(const struct fuse_server *s, uint32_t f, int *out)
{
	int fl = (int)f & (O_ACCMODE | O_APPEND | O_TRUNC | O_NONBLOCK | O_DSYNC | O_SYNC | O_NOATIME);

	if ((fl & O_ACCMODE) == O_ACCMODE)
		return -EINVAL;
	if (s->ro && ((fl & O_ACCMODE) != O_RDONLY || (fl & O_TRUNC)))
		return -EROFS;
	*out = fl;
	return 0;
}

static uint32_t fopen_flags(const struct fuse_server *s)
{
	return s->cache == FUSE_CACHE_NONE ? FOPEN_DIRECT_IO : 0;
}

int fuse_op_open(struct req *q, int dir)
{
	const struct fuse_open_in *o = (const void *)q->body;
	struct fuse_open_out out;
	struct fuse_inode *n;
	int fl, fd, r;

	NEED(q, *o);
	if ((r = fuse_ino_get(q->s, q->h.nodeid, &n)))
		return r;
	if (dir) {
		if (n->type != S_IFDIR)
			return -ENOTDIR;
		fl = O_RDONLY;
	} else {
		if (n->type == S_IFDIR)
			return -EISDIR;
		if ((r = open_flags(q->s, o->flags, &fl)))
			return r;
	}
	if ((fd = fuse_reopen(q->s, n, fl)) < 0)
		return fd;
	/* O_TRUNC emptied it: the same as a truncating SETATTR. */
	if ((fl & O_TRUNC) && (r = fpriv_kill(q->s->proc_fd, fd))) {
		close(fd);
		return r;
	}
	memset(&out, 0, sizeof(out));
	if ((r = fuse_fh_alloc(q->s, fd, q->h.nodeid, dir, (uint32_t)(fl & ~O_TRUNC), &out.fh)))
		return r;
	out.open_flags = dir ? 0 : fopen_flags(q->s);
	if ((r = fuse_reply(q, &out, sizeof(out)))) {
		fuse_fh_free(q->s, out.fh);
		return r;
	}
	return 0;
}

int fuse_op_create(struct req *q)
{
	struct fuse_server *s = q->s;
	const struct fuse_create_in *c = (const void *)q->body;
	const uint8_t *p = q->body + sizeof(*c);
	struct {
		struct fuse_entry_out e;
		struct fuse_open_out o;
	} out;
	struct fuse_inode *d;
	const char *name;
	struct stat st;
	uint64_t nodeid;
	size_t left;
	char b[16];
	int fl, fd, pfd, r;

	NEED(q, *c);
	left = q->blen - sizeof(*c);
	if ((r = fuse_take_new_name(&p, &left, &name)) || (r = fuse_ino_get(s, q->h.nodeid, &d)))
		return r;
	if ((r = open_flags(s, c->flags, &fl)))
		return r;
	fd = openat(d->fd, name, fl | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, fpriv_mode(S_IFREG, c->mode));
	if (fd < 0 && errno == EEXIST && !(c->flags & O_EXCL)) {
		/* It exists: opened the way OPEN opens, through its own O_PATH
		 * inode, and only if it is a regular file. An open by name would
		 * open a FIFO (blocking this device until a partner comes: found
		 * by fuzz_fuse) or a device node of the host. */
		int pf = openat(d->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

		if (pf < 0)
			return -errno;
		if (fstat(pf, &st) < 0) {
			r = -errno;
			close(pf);
			return r;
		}
		if (!S_ISREG(st.st_mode)) {
			r = S_ISDIR(st.st_mode) ? -EISDIR : S_ISLNK(st.st_mode) ? -ELOOP : -EACCES;
			close(pf);
			return r;
		}
		fuse_fd_name(b, pf);
		fd = openat(s->proc_fd, b, fl | O_CLOEXEC);
		close(pf);
	}
	if (fd < 0)
		return -errno;
	fl |= O_CREAT | O_NOFOLLOW | (c->flags & O_EXCL);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = -EIO;
		goto err_close;
	}
	if ((c->flags & O_EXCL) && (st.st_mode & 07777) != fpriv_mode(S_IFREG, c->mode))
		(void)fchmod(fd, fpriv_mode(S_IFREG, c->mode)); /* not narrowed by the VMM's umask */
	/* An existing file O_TRUNC emptied: as a WRITE would. */
	if ((fl & O_TRUNC) && (r = fpriv_kill(s->proc_fd, fd)))
		goto err_close;
	/* The inode: an O_PATH descriptor of this very file. */
	fuse_fd_name(b, fd);
	pfd = openat(s->proc_fd, b, O_PATH | O_CLOEXEC);
	if (pfd < 0) {
		r = -errno;
		goto err_close;
	}
	if ((r = fuse_ino_ref(s, pfd, &st, q->h.nodeid, name, &nodeid)))
		goto err_close;
	memset(&out, 0, sizeof(out));
	if ((r = fuse_fh_alloc(s, fd, nodeid, 0, (uint32_t)(fl & ~(O_TRUNC | O_CREAT | O_EXCL | O_NOFOLLOW)), &out.o.fh))) {
		fuse_ino_forget(s, nodeid, 1);
		return r;
	}
	(void)fstat(fd, &st);
	fuse_fill_entry(s, nodeid, &st, &out.e);
	out.o.open_flags = fopen_flags(s);
	if ((r = fuse_reply(q, &out, sizeof(out)))) {
		fuse_fh_free(s, out.o.fh);
		fuse_ino_forget(s, nodeid, 1);
	}
	return r;

err_close:
	close(fd);
	return r;
}

int fuse_op_read(struct req *q)
{
	const struct fuse_read_in *in = (const void *)q->body;
	struct iovec iov[FUSE_MAX_IOV];
	struct fuse_handle *h;
	size_t len;
	ssize_t n;
	int k;

	NEED(q, *in);
	if (!(h = fuse_fh_at(q->s, in->fh, 0)))
		return -EBADF;
	if (in->offset > (uint64_t)INT64_MAX)
		return -EINVAL;
	/* Chunked to the guest's buffer and to what we offered. */
	len = in->size;
	if (len > q->out.left)
		len = q->out.left;
	if (len > FUSE_MAX_WRITE_BYTES)
		len = FUSE_MAX_WRITE_BYTES;
	k = fuse_cur_iov(&q->out, len, iov, FUSE_MAX_IOV);
	if (k < 0)
		return -EINVAL;
	do
		n = preadv(h->fd, iov, k, (off_t)in->offset);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	q->out_len = (size_t)n; /* already in place: fuse_reply() is not used */
	return 1;
}

int fuse_op_write(struct req *q)
{
	struct fuse_server *s = q->s;
	struct fuse_write_in w;
	struct fuse_write_out out;
	struct iovec iov[FUSE_MAX_IOV];
	struct fuse_handle *h;
	struct fuse_reservation res;
	ssize_t n;
	int k, r;

	if (fuse_cur_copy(&q->in, &w, sizeof(w), 1) != sizeof(w))
		return -EINVAL;
	if (w.size != q->in.left || w.size > FUSE_MAX_WRITE_BYTES)
		return -EINVAL; /* the data is exactly what the header says */
	if (s->ro)
		return -EROFS;
	if (!(h = fuse_fh_at(s, w.fh, 0)))
		return -EBADF;
	if (w.offset > (uint64_t)INT64_MAX)
		return -EINVAL;
	k = fuse_cur_iov(&q->in, w.size, iov, FUSE_MAX_IOV);
	if (k < 0)
		return -EINVAL;
	/* Before the data lands, as the kernel's file_remove_privs. */
	if ((r = fpriv_kill(s->proc_fd, h->fd)) || (r = fuse_budget_take(&s->budget, h->fd, w.offset, w.size, 0, &res)))
		return r;
	do
		n = pwritev(h->fd, iov, k, (off_t)w.offset);
	while (n < 0 && errno == EINTR);
	r = n < 0 ? -errno : 0;
	fuse_budget_settle(&s->budget, h->fd, &res);
	if (r)
		return r;
	memset(&out, 0, sizeof(out));
	out.size = (uint32_t)n;
	return fuse_reply(q, &out, sizeof(out));
}

int fuse_op_release(struct req *q, int dir)
{
	const struct fuse_release_in *r = (const void *)q->body;

	NEED(q, *r);
	if (r->fh >= q->s->fh_max || !q->s->fh[r->fh].used || q->s->fh[r->fh].dir != dir)
		return -EBADF;
	/* The guest's last close of a file it flock()ed: its BSD lock goes
	 * (the owner is that open file, fs/fuse/file.c fuse_release). */
	if (!dir && (r->release_flags & FUSE_RELEASE_FLOCK_UNLOCK))
		fuse_lk_drop(q->s, q->s->fh[r->fh].nodeid, r->lock_owner, 1);
	fuse_fh_free(q->s, r->fh);
	return 0;
}

int fuse_op_fsync(struct req *q, int dir)
{
	const struct fuse_fsync_in *f = (const void *)q->body;
	struct fuse_handle *h;
	int r;

	NEED(q, *f);
	if (!(h = fuse_fh_at(q->s, f->fh, dir)))
		return -EBADF;
	r = (f->fsync_flags & FUSE_FSYNC_FDATASYNC) ? fdatasync(h->fd) : fsync(h->fd);
	return r < 0 ? -errno : 0;
}

int fuse_op_flush(struct req *q)
{
	const struct fuse_flush_in *f = (const void *)q->body;
	struct fuse_handle *h;

	NEED(q, *f);
	if (!(h = fuse_fh_at(q->s, f->fh, 0)))
		return -EBADF;
	/* Writes went straight to the host. A close() by a guest process
	 * drops all its POSIX locks on the file (POSIX fcntl; the kernel
	 * unlocks first, this makes sure of it for a dying one). */
	fuse_lk_drop(q->s, h->nodeid, f->lock_owner, 0);
	return 0;
}

int fuse_op_fallocate(struct req *q)
{
	const struct fuse_fallocate_in *f = (const void *)q->body;
	struct fuse_handle *h;
	struct fuse_reservation res;
	int r;

	NEED(q, *f);
	if (q->s->ro)
		return -EROFS;
	if (!(h = fuse_fh_at(q->s, f->fh, 0)))
		return -EBADF;
	if (f->offset > (uint64_t)INT64_MAX || f->length > (uint64_t)INT64_MAX)
		return -EINVAL;
	/* A punched hole or zeroed range adds nothing; an allocation all of it. */
	if ((r = fpriv_kill(q->s->proc_fd, h->fd)) ||
	    (r = fuse_budget_take(&q->s->budget, h->fd, f->offset, f->mode & FALLOC_FL_PUNCH_HOLE ? 0 : f->length, 1, &res)))
		return r;
	r = fallocate(h->fd, (int)f->mode, (off_t)f->offset, (off_t)f->length) < 0 ? -errno : 0;
	fuse_budget_settle(&q->s->budget, h->fd, &res);
	return r;
}

int fuse_op_lseek(struct req *q)
{
	const struct fuse_lseek_in *l = (const void *)q->body;
	struct fuse_lseek_out out;
	struct fuse_handle *h;
	off_t o;

	NEED(q, *l);
	if (!(h = fuse_fh_at(q->s, l->fh, 0)))
		return -EBADF;
	if (l->whence != SEEK_SET && l->whence != SEEK_CUR && l->whence != SEEK_END &&
	    l->whence != SEEK_DATA && l->whence != SEEK_HOLE)
		return -EINVAL;
	if (l->offset > (uint64_t)INT64_MAX)
		return -EINVAL;
	o = lseek(h->fd, (off_t)l->offset, (int)l->whence);
	if (o < 0)
		return -errno;
	out.offset = (uint64_t)o;
	return fuse_reply(q, &out, sizeof(out));
}
