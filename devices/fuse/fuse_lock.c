/* The FUSE server's locks (fuse_internal.h): GETLK, SETLK, SETLKW and
 * INTERRUPT, and the release of a guest owner's locks on FLUSH, RELEASE,
 * FORGET and the end of the session. docs/virtio-fs.md says what a guest
 * sees.
 *
 * The guest kernel keeps no lock state of its own once FUSE_POSIX_LOCKS
 * and FUSE_FLOCK_LOCKS are agreed (Linux fs/fuse/file.c hands every
 * fcntl and flock to the server): each request names a lock owner (a
 * POSIX owner is the guest process's file table, a BSD one the guest's
 * open file). One kernel makes owners exclude each other; so must the
 * host. Each (inode, owner, kind) gets a host descriptor of its own,
 * reopened from the inode: POSIX locks become open-file-description
 * locks on it (F_OFD_SETLK: owned by that descriptor, not by the VMM
 * process, so two guest owners conflict as two processes would), BSD
 * locks flock() on it. Closing the descriptor releases all of the
 * owner's locks on the inode, which is exactly what closing any of its
 * files does to a POSIX owner's locks (FLUSH).
 *
 * Nothing here blocks: SETLKW tries once and, if the range is held,
 * parks a waiter (at most FUSE_LK_WAITERS_MAX) that fuse_lk_poll()
 * retries; the device answers it when it is decided. */
#include "devices/fuse/fuse_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <unistd.h>

/* statfs f_type of the network file systems (linux/magic.h and the
 * SMB/Ceph clients' own): their clients keep a page cache that another
 * host's writes do not reach. */
#define NFS_MAGIC 0x6969
#define SMB_MAGIC 0x517B
#define CIFS_MAGIC 0xFF534D42u
#define SMB2_MAGIC 0xFE534D42u
#define CEPH_MAGIC 0x00C36400

int fuse_fs_remote(unsigned long f_type)
{
	switch (f_type & 0xFFFFFFFFu) {
	case NFS_MAGIC: case SMB_MAGIC: case CIFS_MAGIC: case SMB2_MAGIC: case CEPH_MAGIC:
		return 1;
	default:
		return 0;
	}
}

static int fd_remote(int fd)
{
	struct statfs st;

	return fstatfs(fd, &st) == 0 && fuse_fs_remote((unsigned long)st.f_type);
}

/* A lock was granted. On a network file system, what this host cached of
 * the file may be older than what the last holder, on another host, wrote
 * before it unlocked: Linux's NFS client makes a lock a coherence point
 * only by marking its cache for revalidation, and skips even that while it
 * holds a delegation (fs/nfs/file.c, do_setlk). Dropping the inode's clean
 * cached pages (every descriptor of it shares them) makes the guest's next
 * read fetch from the server. drives-nfs saw SQLite from two NFS clients
 * lose 2-3 of 120 commits in two runs of three without this
 * (docs/virtio-fs.md). */
static void granted(const struct fuse_lock *l)
{
	if (l->remote)
		posix_fadvise(l->fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* ---- lock descriptors ---- */

static struct fuse_lock *lock_find(struct fuse_server *s, uint64_t nodeid, uint64_t owner, int flk)
{
	uint32_t i;

	for (i = 0; i < FUSE_LOCKS_MAX; i++) {
		struct fuse_lock *l = &s->locks[i];

		if (l->used && l->nodeid == nodeid && l->owner == owner && l->flock == flk)
			return l;
	}
	return NULL;
}

/* The owner's descriptor on the inode, opened on first use (*fresh set):
 * read-write where the host allows it (a write lock needs a writable
 * descriptor; the guest kernel already refused one on a file it opened
 * read-only), else read-only. -ENOLCK when the table is full. */
static int lock_get(struct fuse_server *s, uint64_t nodeid, uint64_t owner, int flk,
		    struct fuse_lock **out, int *fresh)
{
	struct fuse_inode *n;
	uint32_t i;
	int fd, r;

	*fresh = 0;
	if ((*out = lock_find(s, nodeid, owner, flk)))
		return 0;
	if ((r = fuse_ino_get(s, nodeid, &n)))
		return r;
	if (n->type != S_IFREG)
		return -EINVAL; /* the guest locks regular files only through us */
	for (i = 0; i < FUSE_LOCKS_MAX && s->locks[i].used; i++)
		;
	if (i == FUSE_LOCKS_MAX)
		return -ENOLCK;
	fd = s->ro ? -EROFS : fuse_reopen(s, n, O_RDWR | O_NONBLOCK);
	if (fd < 0)
		fd = fuse_reopen(s, n, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return fd;
	s->locks[i] = (struct fuse_lock){ .fd = fd, .used = 1, .flock = (uint8_t)flk,
					  .remote = (uint8_t)fd_remote(fd), .nodeid = nodeid, .owner = owner };
	*out = &s->locks[i];
	*fresh = 1;
	return 0;
}

/* Waiters on lock l end with `error` (their owner's descriptor is gone). */
static void waiters_fail(struct fuse_server *s, uint32_t l)
{
	uint32_t i;

	for (i = 0; i < FUSE_LK_WAITERS_MAX; i++)
		if (s->waiters[i].used && s->waiters[i].lock == l)
			s->waiters[i].interrupted = 1;
}

/* Closing the descriptor releases every lock the owner had on it. */
static void lock_close(struct fuse_server *s, struct fuse_lock *l)
{
	waiters_fail(s, (uint32_t)(l - s->locks));
	close(l->fd);
	memset(l, 0, sizeof(*l));
}

void fuse_lk_drop(struct fuse_server *s, uint64_t nodeid, uint64_t owner, int flk)
{
	struct fuse_lock *l = lock_find(s, nodeid, owner, flk);

	if (l)
		lock_close(s, l);
}

void fuse_lk_drop_node(struct fuse_server *s, uint64_t nodeid)
{
	uint32_t i;

	for (i = 0; i < FUSE_LOCKS_MAX; i++)
		if (s->locks[i].used && s->locks[i].nodeid == nodeid)
			lock_close(s, &s->locks[i]);
}

void fuse_lk_reset(struct fuse_server *s)
{
	uint32_t i;

	for (i = 0; i < FUSE_LOCKS_MAX; i++)
		if (s->locks[i].used)
			lock_close(s, &s->locks[i]);
	memset(s->waiters, 0, sizeof(s->waiters)); /* the session that asked is gone */
	s->nr_waiters = 0;
}

/* ---- the host calls ---- */

/* A guest range (start..end inclusive, end OFFSET_MAX: to the end of the
 * file) as a struct flock. -EINVAL for a range the kernel never sends. */
static int to_flock(uint32_t type, uint64_t start, uint64_t end, struct flock *fl)
{
	if (type != F_RDLCK && type != F_WRLCK && type != F_UNLCK)
		return -EINVAL;
	if (start > (uint64_t)INT64_MAX || end > (uint64_t)INT64_MAX || end < start)
		return -EINVAL;
	memset(fl, 0, sizeof(*fl));
	fl->l_type = (short)type;
	fl->l_whence = SEEK_SET;
	fl->l_start = (off_t)start;
	fl->l_len = end == (uint64_t)INT64_MAX ? 0 : (off_t)(end - start + 1);
	return 0;
}

/* One non-blocking attempt: 0, -EAGAIN if held, or another -errno. */
static int try_lock(const struct fuse_lock *l, short type, uint64_t start, uint64_t end)
{
	struct flock fl;
	int r;

	if (l->flock) {
		int op = type == F_RDLCK ? LOCK_SH : type == F_WRLCK ? LOCK_EX : LOCK_UN;

		r = flock(l->fd, op | LOCK_NB);
		return r < 0 ? (errno == EWOULDBLOCK ? -EAGAIN : -errno) : 0;
	}
	if ((r = to_flock((uint32_t)type, start, end, &fl)))
		return r;
	r = fcntl(l->fd, F_OFD_SETLK, &fl);
	return r < 0 ? (errno == EACCES ? -EAGAIN : -errno) : 0;
}

/* ---- the operations ---- */

/* The common checks: an open file handle on this inode (the guest locks
 * through an open file), a known kind. */
static int lk_args(struct req *q, const struct fuse_lk_in **in)
{
	const struct fuse_handle *h;

	if (q->blen < sizeof(**in))
		return -EINVAL;
	*in = (const void *)q->body;
	if (!(h = fuse_fh_at(q->s, (*in)->fh, 0)) || h->nodeid != q->h.nodeid)
		return -EBADF;
	if ((*in)->lk_flags & ~(uint32_t)FUSE_LK_FLOCK)
		return -EINVAL;
	return 0;
}

int fuse_op_getlk(struct req *q)
{
	const struct fuse_lk_in *in;
	struct fuse_lk_out out;
	struct fuse_lock *l;
	struct flock fl;
	int fresh, r;

	if ((r = lk_args(q, &in)))
		return r;
	if (in->lk_flags & FUSE_LK_FLOCK)
		return -EINVAL; /* the kernel never tests a BSD lock */
	if ((r = to_flock(in->lk.type, in->lk.start, in->lk.end, &fl)))
		return r;
	if (fl.l_type == F_UNLCK)
		return -EINVAL;
	if ((r = lock_get(q->s, q->h.nodeid, in->owner, 0, &l, &fresh)))
		return r;
	r = fcntl(l->fd, F_OFD_GETLK, &fl) < 0 ? -errno : 0;
	if (fresh)
		lock_close(q->s, l); /* an owner that holds nothing keeps no descriptor */
	if (r)
		return r;
	memset(&out, 0, sizeof(out));
	out.lk.type = (uint32_t)fl.l_type;
	if (fl.l_type != F_UNLCK) {
		out.lk.start = (uint64_t)fl.l_start;
		out.lk.end = fl.l_len == 0 ? (uint64_t)INT64_MAX : (uint64_t)(fl.l_start + fl.l_len - 1);
		out.lk.pid = 0; /* a holder outside this guest has no pid here */
	} else {
		out.lk.start = in->lk.start;
		out.lk.end = in->lk.end;
	}
	return fuse_reply(q, &out, sizeof(out));
}

/* An unlock. One of the whole file (what flock's LOCK_UN always is, and
 * what the guest kernel sends when a file is closed: locks_remove_posix)
 * leaves the owner nothing there: its descriptor goes too, unless a
 * request of the same owner still waits on it. */
static int unlock(struct fuse_server *s, uint64_t nodeid, uint64_t owner, int flk, uint64_t start,
		  uint64_t end)
{
	struct fuse_lock *l = lock_find(s, nodeid, owner, flk);
	uint32_t i;
	int r;

	if (!l)
		return 0; /* nothing held */
	if ((r = try_lock(l, F_UNLCK, start, end)))
		return r;
	if (!flk && (start != 0 || end != (uint64_t)INT64_MAX))
		return 0;
	for (i = 0; i < FUSE_LK_WAITERS_MAX; i++)
		if (s->waiters[i].used && s->waiters[i].lock == (uint32_t)(l - s->locks))
			return 0;
	lock_close(s, l);
	return 0;
}

static int park(struct req *q, uint32_t lock, const struct fuse_lk_in *in)
{
	struct fuse_server *s = q->s;
	uint32_t i;

	for (i = 0; i < FUSE_LK_WAITERS_MAX && s->waiters[i].used; i++)
		;
	if (i == FUSE_LK_WAITERS_MAX)
		return -ENOLCK; /* the guest has enough waiting already */
	s->waiters[i] = (struct fuse_lk_waiter){ .used = 1, .lock = lock, .unique = q->h.unique,
						 .type = (short)in->lk.type, .start = in->lk.start,
						 .end = in->lk.end };
	s->nr_waiters++;
	s->wait_unique = q->h.unique;
	return FUSE_WAIT;
}

int fuse_op_setlk(struct req *q, int wait)
{
	const struct fuse_lk_in *in;
	struct fuse_lock *l;
	struct flock fl;
	int flk, fresh, r;

	if ((r = lk_args(q, &in)))
		return r;
	flk = !!(in->lk_flags & FUSE_LK_FLOCK);
	if ((r = to_flock(in->lk.type, in->lk.start, in->lk.end, &fl)))
		return r;
	if (fl.l_type == F_UNLCK)
		return unlock(q->s, q->h.nodeid, in->owner, flk, in->lk.start, in->lk.end);
	if ((r = lock_get(q->s, q->h.nodeid, in->owner, flk, &l, &fresh)))
		return r;
	r = try_lock(l, fl.l_type, in->lk.start, in->lk.end);
	if (!r)
		granted(l);
	if (r == -EAGAIN && wait)
		r = park(q, (uint32_t)(l - q->s->locks), in);
	if (r && r != FUSE_WAIT && fresh)
		lock_close(q->s, l); /* refused: an owner that holds nothing keeps no descriptor */
	return r;
}

int fuse_op_interrupt(struct req *q)
{
	const struct fuse_interrupt_in *in = (const void *)q->body;
	uint32_t i;

	NEED(q, *in);
	for (i = 0; i < FUSE_LK_WAITERS_MAX; i++)
		if (q->s->waiters[i].used && q->s->waiters[i].unique == in->unique)
			q->s->waiters[i].interrupted = 1;
	return 0; /* INTERRUPT itself has no reply; the interrupted request gets EINTR */
}

unsigned fuse_lk_poll(struct fuse_server *s, struct fuse_lk_done *out, unsigned max)
{
	unsigned k = 0;
	uint32_t i;

	for (i = 0; i < FUSE_LK_WAITERS_MAX && k < max; i++) {
		struct fuse_lk_waiter *w = &s->waiters[i];
		int r;

		if (!w->used)
			continue;
		if (w->interrupted || !s->locks[w->lock].used)
			r = -EINTR;
		else if ((r = try_lock(&s->locks[w->lock], w->type, w->start, w->end)) == -EAGAIN)
			continue;
		else if (!r)
			granted(&s->locks[w->lock]);
		out[k].unique = w->unique;
		out[k].error = r;
		k++;
		memset(w, 0, sizeof(*w));
		s->nr_waiters--;
	}
	return k;
}

void fuse_lk_interrupt_all(struct fuse_server *s)
{
	uint32_t i;

	for (i = 0; i < FUSE_LK_WAITERS_MAX; i++)
		if (s->waiters[i].used)
			s->waiters[i].interrupted = 1;
}
