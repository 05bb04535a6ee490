/* The FUSE server's entry and attribute operations (fuse_internal.h):
 * LOOKUP, FORGET and BATCH_FORGET, GETATTR, SETATTR, READLINK, STATFS,
 * ACCESS; the entry and attribute replies the other files use too. */
#include "devices/fuse/fuse_internal.h"
#include "devices/fuse/fuse_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

static void fill_attr(const struct fuse_server *s, const struct stat *st, struct fuse_attr *a)
{
	(void)s;
	memset(a, 0, sizeof(*a));
	a->ino = (uint64_t)st->st_ino;
	a->size = (uint64_t)st->st_size;
	a->blocks = (uint64_t)st->st_blocks;
	a->atime = (uint64_t)st->st_atim.tv_sec;
	a->mtime = (uint64_t)st->st_mtim.tv_sec;
	a->ctime = (uint64_t)st->st_ctim.tv_sec;
	a->atimensec = (uint32_t)st->st_atim.tv_nsec;
	a->mtimensec = (uint32_t)st->st_mtim.tv_nsec;
	a->ctimensec = (uint32_t)st->st_ctim.tv_nsec;
	a->mode = st->st_mode;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = (uint32_t)st->st_rdev;
	a->blksize = (uint32_t)st->st_blksize;
}

static uint64_t valid_secs(const struct fuse_server *s)
{
	return s->cache == FUSE_CACHE_NONE ? 0 : 1;
}

void fuse_fill_entry(const struct fuse_server *s, uint64_t nodeid, const struct stat *st,
		       struct fuse_entry_out *e)
{
	memset(e, 0, sizeof(*e));
	e->nodeid = nodeid;
	e->generation = nodeid ? s->ino[nodeid - 1].gen : 0;
	e->entry_valid = valid_secs(s);
	e->attr_valid = valid_secs(s);
	fill_attr(s, st, &e->attr);
}

/* LOOKUP-like: resolves name in parent and replies with an entry. */
int fuse_entry_reply(struct req *q, uint64_t parent, const char *name)
{
	struct fuse_server *s = q->s;
	struct fuse_inode *p;
	struct fuse_entry_out e;
	struct stat st;
	uint64_t nodeid;
	int fd, r;

	if ((r = fuse_ino_get(s, parent, &p)))
		return r;
	if (p->type != S_IFDIR)
		return -ENOTDIR;
	if (!strcmp(name, ".") || (!strcmp(name, "..") && parent == FUSE_ROOT_ID)) {
		/* ".." at the root is the root: the guest never gets above it. */
		fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		name = NULL;
	} else if (!strcmp(name, "..")) {
		/* Below the root its parent is inside the tree as well. */
		fd = openat(p->fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		name = NULL;
	} else {
		fd = fuse_open_child(s, p->fd, name);
		if (fd < 0)
			return fd;
	}
	if ((r = fuse_stat_fd(fd, &st))) {
		close(fd);
		return r;
	}
	if ((r = fuse_ino_ref(s, fd, &st, parent, name, &nodeid)))
		return r;
	fuse_fill_entry(s, nodeid, &st, &e);
	if ((r = fuse_reply(q, &e, sizeof(e)))) {
		fuse_ino_forget(s, nodeid, 1);
		return r;
	}
	return 0;
}

int fuse_op_lookup(struct req *q)
{
	const uint8_t *p = q->body;
	size_t left = q->blen;
	const char *name;
	int r;

	if ((r = fuse_take_name(&p, &left, &name)))
		return r;
	return fuse_entry_reply(q, q->h.nodeid, name);
}

int fuse_op_forget(struct req *q)
{
	const struct fuse_forget_in *f = (const void *)q->body;

	NEED(q, *f);
	fuse_ino_forget(q->s, q->h.nodeid, f->nlookup);
	return 0;
}

int fuse_op_batch_forget(struct req *q)
{
	const struct fuse_batch_forget_in *b = (const void *)q->body;
	struct fuse_forget_one one;
	uint32_t i;

	NEED(q, *b);
	if (b->count > (q->blen - sizeof(*b)) / sizeof(one))
		return -EINVAL;
	for (i = 0; i < b->count; i++) {
		memcpy(&one, q->body + sizeof(*b) + i * sizeof(one), sizeof(one));
		fuse_ino_forget(q->s, one.nodeid, one.nlookup);
	}
	return 0;
}

static int attr_reply(struct req *q, const struct stat *st)
{
	struct fuse_attr_out a;

	memset(&a, 0, sizeof(a));
	a.attr_valid = valid_secs(q->s);
	fill_attr(q->s, st, &a.attr);
	return fuse_reply(q, &a, sizeof(a));
}

int fuse_op_getattr(struct req *q)
{
	struct fuse_inode *n;
	struct stat st;
	int r;

	NEED(q, struct fuse_getattr_in);
	if ((r = fuse_ino_get(q->s, q->h.nodeid, &n)) || (r = fuse_stat_fd(n->fd, &st)))
		return r;
	return attr_reply(q, &st);
}

int fuse_op_setattr(struct req *q)
{
	struct fuse_server *s = q->s;
	const struct fuse_setattr_in *a = (const void *)q->body;
	struct fuse_reservation res;
	struct fuse_inode *n;
	struct stat st;
	char p[16];
	int r;

	NEED(q, *a);
	if ((r = fuse_ino_get(s, q->h.nodeid, &n)))
		return r;
	fuse_fd_name(p, n->fd);
	if ((a->valid & FATTR_MODE) && n->type == S_IFLNK)
		return -EOPNOTSUPP;
	/* Checked before anything changes: a refused chown leaves the mode
	 * alone too. */
	if ((a->valid & (FATTR_UID | FATTR_GID)) &&
	    ((r = fuse_stat_fd(n->fd, &st)) ||
	     (r = fpriv_chown_ok(&st, a->valid & FATTR_UID ? a->uid : (uid_t)-1,
				 a->valid & FATTR_GID ? a->gid : (gid_t)-1))))
		return r;
	if ((a->valid & FATTR_MODE) && fchmodat(s->proc_fd, p, fpriv_mode(n->type, a->mode), 0) < 0)
		return -errno;
	if (a->valid & (FATTR_UID | FATTR_GID)) {
		uid_t uid = a->valid & FATTR_UID ? a->uid : (uid_t)-1;
		gid_t gid = a->valid & FATTR_GID ? a->gid : (gid_t)-1;

		if (fchownat(n->fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		/* The kernel clears the bits on chown for root too, but keeps
		 * S_ISGID without group execute: none stay. */
		if ((r = fpriv_kill(s->proc_fd, n->fd)))
			return r;
	}
	if (a->valid & FATTR_SIZE) {
		const struct fuse_handle *h = a->valid & FATTR_FH ? fuse_fh_at(s, a->fh, 0) : NULL;
		int fd = h ? h->fd : -1;

		if (a->size > (uint64_t)INT64_MAX)
			return -EFBIG;
		if (fd < 0 && (fd = fuse_reopen(s, n, O_WRONLY)) < 0)
			return fd;
		if (!(r = fpriv_kill(s->proc_fd, fd)) && !(r = fuse_budget_take(&s->budget, fd, 0, 0, 0, &res))) {
			r = ftruncate(fd, (off_t)a->size) < 0 ? -errno : 0;
			fuse_budget_settle(&s->budget, fd, &res); /* a truncate down gives back */
		}
		if (!h)
			close(fd);
		if (r)
			return r;
	}
	if (a->valid & (FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW)) {
		struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };

		if (a->valid & FATTR_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (a->valid & FATTR_ATIME)
			ts[0] = (struct timespec){ (time_t)a->atime, a->atimensec % 1000000000 };
		if (a->valid & FATTR_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (a->valid & FATTR_MTIME)
			ts[1] = (struct timespec){ (time_t)a->mtime, a->mtimensec % 1000000000 };
		if (n->type == S_IFLNK)
			r = utimensat(n->fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
		else
			r = utimensat(s->proc_fd, p, ts, 0);
		if (r < 0)
			return -errno;
	}
	if ((r = fuse_stat_fd(n->fd, &st)))
		return r;
	return attr_reply(q, &st);
}

int fuse_op_readlink(struct req *q)
{
	struct fuse_inode *n;
	ssize_t len;
	int r;

	if ((r = fuse_ino_get(q->s, q->h.nodeid, &n)))
		return r;
	if (n->type != S_IFLNK)
		return -EINVAL;
	len = readlinkat(n->fd, "", (char *)q->s->reply, PATH_MAX);
	if (len < 0)
		return -errno;
	if ((size_t)len > q->out.left)
		return -ERANGE;
	q->out_len = (size_t)len;
	return 0;
}

int fuse_op_statfs(struct req *q)
{
	struct fuse_statfs_out out;
	struct fuse_inode *n;
	struct statfs st;
	int r;

	if ((r = fuse_ino_get(q->s, q->h.nodeid, &n)))
		return r;
	if (fstatfs(n->fd, &st) < 0)
		return -errno;
	memset(&out, 0, sizeof(out));
	out.st.blocks = st.f_blocks;
	out.st.bfree = st.f_bfree;
	out.st.bavail = st.f_bavail;
	out.st.files = st.f_files;
	out.st.ffree = st.f_ffree;
	out.st.bsize = (uint32_t)st.f_bsize;
	out.st.namelen = (uint32_t)st.f_namelen;
	out.st.frsize = (uint32_t)st.f_frsize;
	return fuse_reply(q, &out, sizeof(out));
}

int fuse_op_access(struct req *q)
{
	const struct fuse_access_in *a = (const void *)q->body;
	struct fuse_inode *n;
	char b[16];
	int r;

	NEED(q, *a);
	if ((r = fuse_ino_get(q->s, q->h.nodeid, &n)))
		return r;
	if ((a->mask & W_OK) && q->s->ro)
		return -EROFS;
	if (n->type == S_IFLNK)
		return 0; /* a symlink's permissions are not checked */
	fuse_fd_name(b, n->fd);
	return faccessat(q->s->proc_fd, b, (int)(a->mask & (R_OK | W_OK | X_OK)), 0) < 0 ? -errno : 0;
}
