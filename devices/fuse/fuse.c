/* FUSE passthrough server (see fuse.h and docs/virtio-fs.md): the request
 * path. The operations live in fuse_attr.c, fuse_dir.c, fuse_io.c and
 * fuse_xattr.c, the inode and handle tables in fuse_table.c
 * (fuse_internal.h).
 *
 * Request path: the header is checked against the readable length before
 * anything else is read; the body (all but WRITE's data) is copied into a
 * bounded buffer and each operation checks its own argument size; names
 * must be NUL-terminated inside the body, non-empty, without '/'. Then the
 * operation runs with *at() calls on the inode's O_PATH descriptor. */
#include "devices/fuse/fuse.h"
#include "devices/fuse/fuse_internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/fuse.h>
#include <string.h>

_Static_assert(sizeof(struct fuse_in_header) == 40, "fuse_in_header is 40 bytes");
_Static_assert(sizeof(struct fuse_out_header) == 16, "fuse_out_header is 16 bytes");
_Static_assert(sizeof(struct fuse_entry_out) == 128, "fuse_entry_out is 128 bytes");
_Static_assert(sizeof(struct fuse_init_out) == 64, "fuse_init_out is 64 bytes");
_Static_assert(sizeof(struct fuse_open_out) == 16, "CREATE replies entry then open, unpadded");

/* ---- cursors over the request's and the reply's buffers ---- */

static void cur_init(struct cur *c, const struct iovec *iov, int n)
{
	int i;

	c->iov = iov;
	c->n = n;
	c->off = 0;
	c->left = 0;
	for (i = 0; i < n; i++)
		c->left += iov[i].iov_len;
}

static void cur_skip_empty(struct cur *c)
{
	while (c->n && c->off == c->iov->iov_len) {
		c->iov++;
		c->n--;
		c->off = 0;
	}
}

/* Copies n bytes between the cursor's buffers and p (to p if `get`). */
size_t fuse_cur_copy(struct cur *c, void *p, size_t n, int get)
{
	size_t done = 0;

	while (done < n && c->left) {
		size_t k;

		cur_skip_empty(c);
		k = c->iov->iov_len - c->off;
		if (k > n - done)
			k = n - done;
		if (get)
			memcpy((uint8_t *)p + done, (uint8_t *)c->iov->iov_base + c->off, k);
		else
			memcpy((uint8_t *)c->iov->iov_base + c->off, (const uint8_t *)p + done, k);
		c->off += k;
		c->left -= k;
		done += k;
	}
	return done;
}

/* Up to max iovecs for the next len bytes (which must be left); advances. */
int fuse_cur_iov(struct cur *c, size_t len, struct iovec *iov, int max)
{
	int k = 0;

	while (len) {
		size_t take;

		cur_skip_empty(c);
		if (k == max || !c->n)
			return -E2BIG;
		take = c->iov->iov_len - c->off;
		if (take > len)
			take = len;
		iov[k].iov_base = (uint8_t *)c->iov->iov_base + c->off;
		iov[k].iov_len = take;
		k++;
		c->off += take;
		c->left -= take;
		len -= take;
	}
	return k;
}

/* ---- names and replies ---- */

/* A name from the body: NUL within the `left` bytes, not empty, no '/'.
 * Advances *p past it. */
int fuse_take_name(const uint8_t **p, size_t *left, const char **name)
{
	const uint8_t *nul = memchr(*p, '\0', *left);
	size_t len;

	if (!nul)
		return -EINVAL;
	len = (size_t)(nul - *p);
	if (len == 0 || memchr(*p, '/', len))
		return -EINVAL;
	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	*name = (const char *)*p;
	*p = nul + 1;
	*left -= len + 1;
	return 0;
}

/* A name for a new entry: "." and ".." never are. */
int fuse_take_new_name(const uint8_t **p, size_t *left, const char **name)
{
	int r = fuse_take_name(p, left, name);

	if (!r && (!strcmp(*name, ".") || !strcmp(*name, "..")))
		return -EINVAL;
	return r;
}

/* The payload (copied after the header at the end). */
int fuse_reply(struct req *q, const void *p, size_t n)
{
	if (n > q->out.left)
		return -EINVAL; /* the guest's buffer is too small for it */
	memcpy(q->s->reply, p, n);
	q->out_len = n;
	return 0;
}

/* ---- the session and the dispatch ---- */

static int op_init(struct req *q)
{
	struct fuse_server *s = q->s;
	const struct fuse_init_in *in = (const void *)q->body;
	struct fuse_init_out out;
	uint32_t offer;

	/* major, minor, max_readahead, flags: what every 7.x client sends. */
	if (q->blen < 16)
		return -EINVAL;
	memset(&out, 0, sizeof(out));
	out.major = FUSE_KERNEL_VERSION;
	out.minor = FUSE_OUR_MINOR;
	if (in->major < 7 || (in->major == 7 && in->minor < FUSE_MIN_MINOR)) {
		if (log_ratelimit_ok(&s->rl))
			log_warn("virtio-fs %s: the guest speaks FUSE %u.%u, we need 7.%u or later", s->tag,
				 in->major, in->minor, FUSE_MIN_MINOR);
		return -EPROTO;
	}
	if (in->major > 7) {
		/* The client retries with ours (only major/minor are read). */
		return fuse_reply(q, &out, 8);
	}
	/* Only what is implemented: locks served on the host (fuse_lock.c),
	 * no writeback cache, no DAX,
	 * no export (no LOOKUP of "." by handle), no ACLs or killpriv. */
	/* The reply must fit before the session opens: a FUSE_INIT that got
	 * EINVAL for a too-small buffer must not leave the server initialized
	 * (and the old session dropped) behind the guest's back. */
	if (q->out.left < sizeof(out))
		return -EINVAL;
	offer = FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_BIG_WRITES | FUSE_PARALLEL_DIROPS |
		FUSE_MAX_PAGES | FUSE_POSIX_LOCKS | FUSE_FLOCK_LOCKS;
	/* READDIRPLUS fills the guest's dentry cache; with cache=none every
	 * entry expires at once, so it would only cost lookups (and guest
	 * time: tens of ms per entry on a ring-0-emulating host). */
	if (s->cache != FUSE_CACHE_NONE)
		offer |= FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO;
	out.flags = in->flags & offer;
	out.max_readahead = in->max_readahead < FUSE_MAX_READAHEAD ? in->max_readahead : FUSE_MAX_READAHEAD;
	out.max_background = 64;
	out.congestion_threshold = 48;
	out.max_write = FUSE_MAX_WRITE_BYTES;
	out.time_gran = 1;
	out.max_pages = FUSE_MAX_PAGES_OFFER;
	fuse_server_reset(s); /* a new session: nothing of an old one survives */
	s->minor = in->minor < FUSE_OUR_MINOR ? in->minor : FUSE_OUR_MINOR;
	s->initialized = 1;
	return fuse_reply(q, &out, sizeof(out));
}

/* Operations that change the drive (EROFS on a read-only one). */
static int writes(uint32_t op)
{
	switch (op) {
	case FUSE_SETATTR: case FUSE_SYMLINK: case FUSE_MKNOD: case FUSE_MKDIR: case FUSE_UNLINK:
	case FUSE_RMDIR: case FUSE_RENAME: case FUSE_RENAME2: case FUSE_LINK: case FUSE_CREATE:
	case FUSE_WRITE: case FUSE_SETXATTR: case FUSE_REMOVEXATTR: case FUSE_FALLOCATE:
		return 1;
	default:
		return 0;
	}
}

/* 0 (or 1: READ's data is already in place) with the payload ready, or -errno. */
static int dispatch(struct req *q)
{
	uint32_t op = q->h.opcode;

	if (!q->s->initialized && op != FUSE_INIT)
		return -EIO;
	if (q->s->ro && writes(op))
		return -EROFS;
	switch (op) {
	case FUSE_INIT: return op_init(q);
	case FUSE_DESTROY: fuse_server_reset(q->s); return 0;
	case FUSE_LOOKUP: return fuse_op_lookup(q);
	case FUSE_FORGET: return fuse_op_forget(q);
	case FUSE_BATCH_FORGET: return fuse_op_batch_forget(q);
	case FUSE_GETATTR: return fuse_op_getattr(q);
	case FUSE_SETATTR: return fuse_op_setattr(q);
	case FUSE_READLINK: return fuse_op_readlink(q);
	case FUSE_SYMLINK: return fuse_op_symlink(q);
	case FUSE_MKNOD: return fuse_op_mknod(q);
	case FUSE_MKDIR: return fuse_op_mkdir(q);
	case FUSE_UNLINK: return fuse_op_unlink(q, 0);
	case FUSE_RMDIR: return fuse_op_unlink(q, 1);
	case FUSE_RENAME: return fuse_op_rename(q);
	case FUSE_RENAME2: return fuse_op_rename2(q);
	case FUSE_LINK: return fuse_op_link(q);
	case FUSE_OPEN: return fuse_op_open(q, 0);
	case FUSE_CREATE: return fuse_op_create(q);
	case FUSE_READ: return fuse_op_read(q);
	case FUSE_WRITE: return fuse_op_write(q);
	case FUSE_FLUSH: return fuse_op_flush(q);
	case FUSE_RELEASE: return fuse_op_release(q, 0);
	case FUSE_FSYNC: return fuse_op_fsync(q, 0);
	case FUSE_OPENDIR: return fuse_op_open(q, 1);
	case FUSE_READDIR: return fuse_op_readdir(q, 0);
	case FUSE_READDIRPLUS: return fuse_op_readdir(q, 1);
	case FUSE_RELEASEDIR: return fuse_op_release(q, 1);
	case FUSE_FSYNCDIR: return fuse_op_fsync(q, 1);
	case FUSE_STATFS: return fuse_op_statfs(q);
	case FUSE_ACCESS: return fuse_op_access(q);
	case FUSE_FALLOCATE: return fuse_op_fallocate(q);
	case FUSE_LSEEK: return fuse_op_lseek(q);
	case FUSE_GETXATTR: return fuse_op_getxattr(q);
	case FUSE_SETXATTR: return fuse_op_setxattr(q);
	case FUSE_LISTXATTR: return fuse_op_listxattr(q);
	case FUSE_REMOVEXATTR: return fuse_op_removexattr(q);
	case FUSE_GETLK: return fuse_op_getlk(q);
	case FUSE_SETLK: return fuse_op_setlk(q, 0);
	case FUSE_SETLKW: return fuse_op_setlk(q, 1);
	case FUSE_INTERRUPT: return fuse_op_interrupt(q);
	default: return -ENOSYS;
	}
}

/* Requests the kernel expects no answer to (FUSE_INTERRUPT's is only
 * ever EAGAIN, to have it sent again, which we never ask for). */
static int no_reply(uint32_t op)
{
	return op == FUSE_FORGET || op == FUSE_BATCH_FORGET || op == FUSE_INTERRUPT;
}

int64_t fuse_handle(struct fuse_server *s, const struct iovec *in, int nin,
		    const struct iovec *out, int nout)
{
	struct fuse_out_header oh;
	struct cur reply_hdr;
	struct req q;
	size_t total;
	int r;

	memset(&q, 0, sizeof(q));
	q.s = s;
	cur_init(&q.in, in, nin);
	cur_init(&q.out, out, nout);
	total = q.in.left;
	if (fuse_cur_copy(&q.in, &q.h, sizeof(q.h), 1) != sizeof(q.h))
		return -EINVAL; /* nothing to answer */
	s->reqs++;
	/* FORGETs and INTERRUPT have no reply (and no writable part in the chain). */
	if (!no_reply(q.h.opcode) && q.out.left < sizeof(oh))
		return -EINVAL;
	reply_hdr = q.out;
	fuse_cur_copy(&q.out, &oh, sizeof(oh), 1); /* skip; written at the end */
	if (q.h.len != total || q.h.len < sizeof(q.h)) {
		r = -EINVAL; /* the header lies about the request's length */
		goto done;
	}
	q.blen = q.h.len - sizeof(q.h);
	if (q.h.opcode == FUSE_WRITE) {
		q.body = s->body; /* op_write reads its own way through q.in */
		q.blen = 0;
	} else if (q.blen > FUSE_MAX_BODY) {
		r = -E2BIG;
		goto done;
	} else {
		fuse_cur_copy(&q.in, s->body, q.blen, 1);
		s->body[q.blen] = 0; /* never relied upon: names are checked within blen */
		q.body = s->body;
	}
	r = dispatch(&q);
	if (r == FUSE_WAIT)
		return FUSE_WAIT; /* answered later (fuse_lk_poll) */
done:
	if (no_reply(q.h.opcode))
		return 0;
	if (r < 0) {
		s->errors++;
		q.out_len = 0;
	} else if (r == 0 && q.out_len) {
		fuse_cur_copy(&q.out, s->reply, q.out_len, 0);
	}
	oh.len = (uint32_t)(sizeof(oh) + (r < 0 ? 0 : q.out_len));
	oh.error = r < 0 ? r : 0;
	oh.unique = q.h.unique;
	fuse_cur_copy(&reply_hdr, &oh, sizeof(oh), 0);
	return oh.len;
}
