/* Shared by the FUSE server's files (fuse.h), for no one else:
 *   fuse.c        the request path: header and body checked, names taken,
 *                 the reply built, INIT, the dispatch
 *   fuse_table.c  the server's state: the inode and handle tables, the
 *                 host calls that resolve and reopen inodes, setup and
 *                 teardown, snapshots
 *   fuse_attr.c   LOOKUP, FORGET, GETATTR, SETATTR, READLINK, STATFS, ACCESS
 *   fuse_dir.c    MKDIR, MKNOD, SYMLINK, UNLINK, RMDIR, RENAME(2), LINK,
 *                 READDIR(PLUS)
 *   fuse_io.c     OPEN(DIR), CREATE, READ, WRITE, FLUSH, FSYNC(DIR),
 *                 RELEASE(DIR), FALLOCATE, LSEEK
 *   fuse_xattr.c  GETXATTR, LISTXATTR, SETXATTR, REMOVEXATTR
 *   fuse_lock.c   GETLK, SETLK, SETLKW, INTERRUPT: locks held on the host
 *   fuse_budget.c a drive's size limit, shared by the VMMs serving it
 * What the guest may put on the host is fuse_priv.h's policy. */
#ifndef DEVICES_FUSE_INTERNAL_H
#define DEVICES_FUSE_INTERNAL_H

#include <linux/fuse.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "devices/fuse/fuse.h"

#define DENTS_BUF (32u << 10) /* the host getdents64 buffer (fuse_server.dents) */

/* ---- fuse.c: the request ---- */

/* A cursor over the request's or the reply's buffers. */
struct cur {
	const struct iovec *iov;
	int n;
	size_t off;  /* in iov[0] */
	size_t left; /* bytes in all */
};

/* One request's context. */
struct req {
	struct fuse_server *s;
	struct fuse_in_header h;
	const uint8_t *body;
	size_t blen;
	struct cur in;  /* after the fixed part (WRITE's data) */
	struct cur out; /* after the reply header */
	size_t out_len; /* payload bytes written */
};

/* The body holds at least the operation's fixed argument. */
#define NEED(q, type) do { if ((q)->blen < sizeof(type)) return -EINVAL; } while (0)

/* Copies n bytes between the cursor's buffers and p (to p if `get`). */
size_t fuse_cur_copy(struct cur *c, void *p, size_t n, int get);
/* Up to max iovecs for the next len bytes (which must be left); advances.
 * -E2BIG if they take more. */
int fuse_cur_iov(struct cur *c, size_t len, struct iovec *iov, int max);
/* The reply's payload (copied after the header at the end): -EINVAL if
 * the guest's buffer is too small for it. */
int fuse_reply(struct req *q, const void *p, size_t n);
/* A name from the body: NUL within the `left` bytes, not empty, no '/',
 * at most NAME_MAX. Advances *p past it. */
int fuse_take_name(const uint8_t **p, size_t *left, const char **name);
/* A name for a new entry: the same, and never "." or "..". */
int fuse_take_new_name(const uint8_t **p, size_t *left, const char **name);

/* ---- fuse_table.c: inodes, handles, host calls ---- */

/* A live inode for nodeid: -ESTALE if unknown or stale. */
int fuse_ino_get(struct fuse_server *s, uint64_t nodeid, struct fuse_inode **out);
/* The nodeid of a live inode with this host identity, or 0. */
uint32_t fuse_ino_find(struct fuse_server *s, uint64_t dev, uint64_t ino);
/* Records where an inode was last seen (0 or -ENOMEM: the old name kept). */
int fuse_set_name(struct fuse_inode *n, uint64_t parent, const char *name);
/* Takes a reference on the inode `fd` (O_PATH, consumed) denotes, found
 * as `name` in `parent`: the existing entry if the host inode is known.
 * name NULL ("." or ".."): where it lives is not learnt from this. */
int fuse_ino_ref(struct fuse_server *s, int fd, const struct stat *st, uint64_t parent,
		 const char *name, uint64_t *nodeid);
/* Drops nlookup references; the last one frees the slot (never the root). */
void fuse_ino_forget(struct fuse_server *s, uint64_t nodeid, uint64_t nlookup);
/* An open handle of that kind (dir or not) with a descriptor, or NULL. */
struct fuse_handle *fuse_fh_at(struct fuse_server *s, uint64_t fh, int dir);
/* A new handle for fd (consumed, closed on failure: -ENFILE). */
int fuse_fh_alloc(struct fuse_server *s, int fd, uint64_t nodeid, int dir, uint32_t flags,
		  uint64_t *fh);
void fuse_fh_free(struct fuse_server *s, uint64_t fh);
/* The one place a name is resolved: exactly one component under dirfd,
 * no symlink followed (a trailing one is opened itself, O_PATH). */
int fuse_open_child(struct fuse_server *s, int dirfd, const char *name);
/* "N" for fd, relative to proc_fd (/proc/self/fd): the inode itself. */
void fuse_fd_name(char buf[16], int fd);
/* An inode opened for I/O from its own O_PATH descriptor, never by name:
 * directories and regular files only. A descriptor or -errno. */
int fuse_reopen(struct fuse_server *s, const struct fuse_inode *n, int flags);
/* fstat of an O_PATH descriptor. 0 or -errno. */
int fuse_stat_fd(int fd, struct stat *st);

/* ---- fuse_attr.c: entries and attributes ---- */

void fuse_fill_entry(const struct fuse_server *s, uint64_t nodeid, const struct stat *st,
		     struct fuse_entry_out *e);
/* LOOKUP-like: resolves name in parent and replies with an entry. */
int fuse_entry_reply(struct req *q, uint64_t parent, const char *name);

/* ---- fuse_budget.c: a drive's size limit (fuse.h, struct fuse_budget) ---- */

/* ---- the operations: 0 with the reply's payload ready, or -errno
 * (READ: 1, its data already in place) ---- */

/* fuse_attr.c */
int fuse_op_lookup(struct req *q);
int fuse_op_forget(struct req *q);
int fuse_op_batch_forget(struct req *q);
int fuse_op_getattr(struct req *q);
int fuse_op_setattr(struct req *q);
int fuse_op_readlink(struct req *q);
int fuse_op_statfs(struct req *q);
int fuse_op_access(struct req *q);
/* fuse_dir.c */
int fuse_op_mkdir(struct req *q);
int fuse_op_mknod(struct req *q);
int fuse_op_symlink(struct req *q);
int fuse_op_unlink(struct req *q, int dir);
int fuse_op_rename(struct req *q);
int fuse_op_rename2(struct req *q);
int fuse_op_link(struct req *q);
int fuse_op_readdir(struct req *q, int plus);
/* fuse_io.c */
int fuse_op_open(struct req *q, int dir);
int fuse_op_create(struct req *q);
int fuse_op_read(struct req *q);
int fuse_op_write(struct req *q);
int fuse_op_release(struct req *q, int dir);
int fuse_op_fsync(struct req *q, int dir);
int fuse_op_flush(struct req *q);
int fuse_op_fallocate(struct req *q);
int fuse_op_lseek(struct req *q);
/* fuse_xattr.c */
int fuse_op_getxattr(struct req *q);
int fuse_op_listxattr(struct req *q);
int fuse_op_setxattr(struct req *q);
int fuse_op_removexattr(struct req *q);
/* fuse_lock.c (SETLKW may return FUSE_WAIT) */
int fuse_op_getlk(struct req *q);
int fuse_op_setlk(struct req *q, int wait);
int fuse_op_interrupt(struct req *q);
/* Releases the owner's POSIX (flk 0) or BSD (flk 1) locks on the inode. */
void fuse_lk_drop(struct fuse_server *s, uint64_t nodeid, uint64_t owner, int flk);
/* Releases every owner's locks on the inode (its last reference went). */
void fuse_lk_drop_node(struct fuse_server *s, uint64_t nodeid);
/* Releases every lock and forgets every waiter (the session ended). */
void fuse_lk_reset(struct fuse_server *s);

#endif
