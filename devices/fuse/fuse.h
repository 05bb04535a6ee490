/* A FUSE passthrough server for virtio-fs (docs/virtio-fs.md), pure of
 * virtio: it takes one request as readable buffers and writes its reply
 * into writable buffers. It speaks FUSE 7.31 and later, as Linux's
 * virtiofs client does (structures from <linux/fuse.h>).
 *
 * The guest never leaves the shared directory: every inode is an O_PATH
 * file descriptor; a lookup resolves exactly one validated name relative
 * to its parent's descriptor (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
 * | RESOLVE_NO_MAGICLINKS, O_NOFOLLOW); symlinks are returned, never
 * followed; files are reopened from their own inode, never by path.
 * Nothing it sends makes a host file setuid, setgid (but a directory),
 * capable or another user's (fuse_priv.h).
 *
 * All state hangs off struct fuse_server; one thread at a time (the
 * device's event loop) may use a server. */
#ifndef DEVICES_FUSE_H
#define DEVICES_FUSE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "vmm/base/log.h"
#include "vmm/base/snapfmt.h"

#define FUSE_MIN_MINOR 31                /* oldest protocol we accept: 7.31 */
#define FUSE_OUR_MINOR 31                /* what we answer (structures we use exist since) */
#define FUSE_MAX_WRITE_BYTES (1u << 20) /* max_write and max read size offered */
#define FUSE_MAX_PAGES_OFFER 256         /* = FUSE_MAX_WRITE_BYTES / 4 KiB */
#define FUSE_MAX_READAHEAD (1u << 20)
#define FUSE_MAX_BODY (64u * 1024 + 512) /* largest request body but WRITE's (SETXATTR's value) */
#define FUSE_MAX_REPLY (64u * 1024 + 64) /* largest reply built in memory (not READ's data) */
#define FUSE_INODES_MAX 65536u           /* default inode table limit (also capped by RLIMIT_NOFILE) */
#define FUSE_HANDLES_MAX 1024u           /* open files and directories */
#define FUSE_LOCKS_MAX 256u              /* lock descriptors: (inode, guest lock owner, kind) */
#define FUSE_LK_WAITERS_MAX 32u          /* SETLKW requests waiting at once */
/* fuse_handle(): the request waits (a SETLKW on a held lock). Nothing is
 * written yet; the caller keeps the reply buffers and learns the outcome
 * from fuse_lk_poll() under s->wait_unique. */
#define FUSE_WAIT (-EINPROGRESS)

enum fuse_cache {
	FUSE_CACHE_NONE, /* no guest caching: timeouts 0, direct I/O (shared drives see each other) */
	FUSE_CACHE_AUTO, /* 1 s attribute/entry timeouts, page cache dropped at open */
};

/* A drive's size limit (docs/virtio-fs.md, "Drives"): `used` is a byte
 * count shared by every VMM serving the drive (a MAP_SHARED page), changed
 * only with atomic adds; a write or fallocate that would take it past
 * `limit` fails with ENOSPC. used NULL: unbounded. fuse_budget.c. */
struct fuse_budget {
	int64_t *used;
	uint64_t limit;
};

struct stat;
/* The count is a drive's `usage` file (8 bytes) mapped shared: 0, or
 * -errno (b untouched). Unmap: used back to NULL. */
int fuse_budget_map(struct fuse_budget *b, const char *usage_path, uint64_t limit);
void fuse_budget_unmap(struct fuse_budget *b);
/* What one WRITE, FALLOCATE or truncate reserved, to settle after it. The
 * FUSE server and the MCP endpoint's writes on a drive (cli/mcp) both
 * account through these, so every writer keeps the one count exact. */
struct fuse_reservation {
	int64_t before;   /* the file's bytes before; -1: nothing to settle */
	int64_t reserved;
};
/* The bytes a request of len at off on a file in state st may add (whole:
 * all of len, as for fallocate). */
int64_t fuse_budget_need(const struct stat *st, uint64_t off, uint64_t len, int whole);
/* Reserves them on the regular file fd: 0, or -ENOSPC past the limit
 * (nothing reserved). */
int fuse_budget_take(struct fuse_budget *b, int fd, uint64_t off, uint64_t len, int whole,
		     struct fuse_reservation *res);
/* After the request (done or failed): the file's real change replaces the
 * reservation. */
void fuse_budget_settle(struct fuse_budget *b, int fd, const struct fuse_reservation *res);
/* The bytes removing dirfd/name would free (its last link), to give back
 * once it is gone. */
int64_t fuse_budget_freed(const struct fuse_budget *b, int dirfd, const char *name);
void fuse_budget_give_back(struct fuse_budget *b, int64_t bytes);

struct fuse_inode {
	int fd;            /* O_PATH; -1: stale (vanished across a restore) */
	uint8_t used;
	uint32_t type;     /* S_IFMT bits: an inode never changes its type */
	uint64_t nlookup;  /* references the guest holds (FORGET drops them) */
	uint64_t gen;
	uint64_t dev, ino; /* host identity, for the hash */
	uint64_t parent;   /* nodeid of the directory it was last seen in */
	char *name;        /* its name there (snapshots re-resolve it) */
	uint32_t hnext;    /* hash chain: slot + 1, 0 ends */
	uint32_t fnext;    /* free list: slot + 1, 0 ends */
};

struct fuse_handle {
	int fd;            /* -1: free, or stale after a restore (EBADF) */
	uint8_t used, dir;
	uint32_t flags;    /* open flags, for a restore's reopen */
	uint64_t nodeid;
};

/* One guest lock owner's host descriptor on one inode (fuse_lock.c): a
 * POSIX owner's open-file-description (F_OFD_*) locks, or a BSD owner's
 * flock() lock, held on a descriptor of its own so that owners exclude
 * each other on the host as they do in one kernel. */
struct fuse_lock {
	int fd;
	uint8_t used;
	uint8_t flock;     /* flock() rather than OFD byte-range locks */
	uint8_t remote;    /* on a network file system: fuse_fs_remote() */
	uint64_t nodeid, owner;
};

/* A SETLKW that found its range held: retried by fuse_lk_poll(). */
struct fuse_lk_waiter {
	uint8_t used, interrupted;
	uint32_t lock;     /* index into fuse_server.locks */
	uint64_t unique;
	short type;        /* F_RDLCK or F_WRLCK */
	uint64_t start, end;
};

/* The outcome of a waiting SETLKW: the reply's error (0: granted). */
struct fuse_lk_done {
	uint64_t unique;
	int error;
};

struct fuse_server {
	int root_fd;       /* O_PATH of the shared directory */
	int proc_fd;       /* /proc/self/fd, to reopen an O_PATH inode */
	int ro;
	enum fuse_cache cache;
	int no_openat2;    /* the host kernel lacks openat2: O_NOFOLLOW fallback */
	char tag[40];      /* for log lines */
	/* Negotiated by INIT. */
	int initialized;
	uint32_t minor;
	/* Inodes: nodeid = slot + 1; slot 0 is the root (FUSE_ROOT_ID). */
	struct fuse_inode *ino;
	uint32_t ino_cap, ino_max, nr_ino, free_ino;
	uint32_t *hash;    /* (dev, ino) -> slot + 1 */
	uint32_t hash_mask;
	uint64_t next_gen;
	/* File handles: fh = index. */
	struct fuse_handle *fh;
	uint32_t fh_max;
	/* Scratch for one request. */
	uint8_t *body;     /* FUSE_MAX_BODY + 1 */
	uint8_t *reply;    /* FUSE_MAX_REPLY */
	uint8_t *dents;    /* host getdents64 buffer */
	/* Locks (fuse_lock.c): at most FUSE_LOCKS_MAX descriptors and
	 * FUSE_LK_WAITERS_MAX waiters, whatever the guest asks. */
	struct fuse_lock locks[FUSE_LOCKS_MAX];
	struct fuse_lk_waiter waiters[FUSE_LK_WAITERS_MAX];
	uint32_t nr_waiters;
	uint64_t wait_unique; /* the request fuse_handle() answered FUSE_WAIT for */
	struct log_ratelimit rl;
	uint64_t reqs, errors;
	struct fuse_budget budget;
};

struct fuse_params {
	const char *path;  /* the shared directory */
	const char *tag;
	int ro;
	enum fuse_cache cache;
	uint32_t max_inodes;  /* 0: default */
	uint32_t max_handles; /* 0: default */
	struct fuse_budget budget;
};

int fuse_server_init(struct fuse_server *s, const struct fuse_params *p)
	__attribute__((warn_unused_result));
void fuse_server_destroy(struct fuse_server *s);
/* The guest's FUSE session ended (DESTROY, device reset): every inode but
 * the root and every handle is dropped; the next request must be INIT. */
void fuse_server_reset(struct fuse_server *s);

/* Handles one request: `in` holds the readable bytes (header and
 * arguments), `out` the writable ones. Returns the reply's length (0 for
 * FORGET/BATCH_FORGET, which have none), or -EINVAL if there is no
 * header to answer or no room for a reply header (nothing was written). */
int64_t fuse_handle(struct fuse_server *s, const struct iovec *in, int nin,
		    const struct iovec *out, int nout);

/* Retries every waiting SETLKW (non-blocking, on the host): fills up to
 * `max` outcomes (granted, failed, interrupted by FUSE_INTERRUPT) and
 * returns how many; those waiters are gone. */
/* 1 if a statfs f_type names a network file system (NFS, SMB/CIFS,
 * Ceph), whose host cache a granted lock drops (fuse_lock.c). */
int fuse_fs_remote(unsigned long f_type);
unsigned fuse_lk_poll(struct fuse_server *s, struct fuse_lk_done *out, unsigned max);
/* Every waiting SETLKW ends with EINTR at the next fuse_lk_poll(). */
void fuse_lk_interrupt_all(struct fuse_server *s);
/* SETLKW requests still waiting. */
static inline unsigned fuse_lk_waiting(const struct fuse_server *s) { return s->nr_waiters; }

/* Snapshots: the inode table (nodeid, parent, name, generation,
 * references) and the open handles, never file contents. Restore rebuilds
 * it by re-resolving every name from the root; an inode whose name is gone
 * turns stale (ESTALE), a handle on it EBADF. */
void fuse_save(const struct fuse_server *s, struct sbuf *b);
int fuse_restore(struct fuse_server *s, struct srd *r) __attribute__((warn_unused_result));

#endif
