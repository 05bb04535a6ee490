/* The FUSE server's state (fuse_internal.h): the inode table (nodeid =
 * slot + 1, a hash on the host's (dev, ino), a free list), the file
 * handles, the host calls that resolve a name or reopen an inode, setup
 * and teardown, and the snapshot of the tables (fuse.h). */
#include "devices/fuse/fuse.h"
#include "devices/fuse/fuse_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- the inode table ---- */

static uint32_t hash_of(uint64_t dev, uint64_t ino)
{
	uint64_t h = (dev * 0x9e3779b97f4a7c15ull) ^ (ino * 0xc2b2ae3d27d4eb4full);

	return (uint32_t)(h ^ (h >> 29));
}

static struct fuse_inode *ino_at(struct fuse_server *s, uint64_t nodeid)
{
	if (nodeid == 0 || nodeid > s->ino_cap || !s->ino[nodeid - 1].used)
		return NULL;
	return &s->ino[nodeid - 1];
}

/* A live inode for nodeid: -ESTALE if unknown or stale. */
int fuse_ino_get(struct fuse_server *s, uint64_t nodeid, struct fuse_inode **out)
{
	struct fuse_inode *n = ino_at(s, nodeid);

	if (!n || n->fd < 0)
		return -ESTALE;
	*out = n;
	return 0;
}

uint32_t fuse_ino_find(struct fuse_server *s, uint64_t dev, uint64_t ino)
{
	uint32_t i = s->hash[hash_of(dev, ino) & s->hash_mask];

	while (i) {
		const struct fuse_inode *n = &s->ino[i - 1];

		if (n->dev == dev && n->ino == ino && n->fd >= 0)
			return i;
		i = n->hnext;
	}
	return 0;
}

static void hash_insert(struct fuse_server *s, uint32_t slot)
{
	uint32_t *b = &s->hash[hash_of(s->ino[slot].dev, s->ino[slot].ino) & s->hash_mask];

	s->ino[slot].hnext = *b;
	*b = slot + 1;
}

static void hash_remove(struct fuse_server *s, uint32_t slot)
{
	uint32_t *p = &s->hash[hash_of(s->ino[slot].dev, s->ino[slot].ino) & s->hash_mask];

	while (*p) {
		if (*p == slot + 1) {
			*p = s->ino[slot].hnext;
			return;
		}
		p = &s->ino[*p - 1].hnext;
	}
}

int fuse_set_name(struct fuse_inode *n, uint64_t parent, const char *name)
{
	char *copy = strdup(name);

	if (!copy)
		return -ENOMEM;
	free(n->name);
	n->name = copy;
	n->parent = parent;
	return 0;
}

/* Adds slots (doubling, up to the limit) to the free list. */
static int grow(struct fuse_server *s)
{
	uint32_t cap = s->ino_cap * 2 > s->ino_max ? s->ino_max : s->ino_cap * 2;
	struct fuse_inode *p;
	uint32_t i;

	if (cap <= s->ino_cap)
		return -ENFILE;
	p = realloc(s->ino, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p + s->ino_cap, 0, (cap - s->ino_cap) * sizeof(*p));
	for (i = cap; i-- > s->ino_cap;) {
		p[i].fd = -1;
		p[i].fnext = s->free_ino;
		s->free_ino = i + 1;
	}
	s->ino = p;
	s->ino_cap = cap;
	return 0;
}

/* A free slot (growing the table up to its limit), or -ENFILE. */
static int slot_alloc(struct fuse_server *s, uint32_t *slot)
{
	int r;

	if (!s->free_ino && (r = grow(s))) {
		if (r == -ENFILE && log_ratelimit_ok(&s->rl))
			log_warn("virtio-fs %s: inode table full (%u inodes the guest has not forgotten); "
				 "lookups fail with ENFILE", s->tag, s->ino_max);
		return r;
	}
	*slot = s->free_ino - 1;
	s->free_ino = s->ino[*slot].fnext;
	return 0;
}

static void slot_free(struct fuse_server *s, uint32_t slot)
{
	struct fuse_inode *n = &s->ino[slot];

	if (n->fd >= 0) {
		hash_remove(s, slot);
		close(n->fd);
	}
	free(n->name);
	memset(n, 0, sizeof(*n));
	n->fd = -1;
	n->fnext = s->free_ino;
	s->free_ino = slot + 1;
	s->nr_ino--;
}

/* Takes a reference on the inode `fd` (O_PATH, consumed) denotes, found
 * as `name` in `parent`: the existing entry if the host inode is known.
 * name NULL ("." or ".."): where it lives is not learnt from this. */
int fuse_ino_ref(struct fuse_server *s, int fd, const struct stat *st, uint64_t parent,
		   const char *name, uint64_t *nodeid)
{
	uint32_t i = fuse_ino_find(s, (uint64_t)st->st_dev, (uint64_t)st->st_ino), slot;
	struct fuse_inode *n;
	int r;

	if (i) {
		n = &s->ino[i - 1];
		close(fd);
		if (i != 1 && name)
			(void)fuse_set_name(n, parent, name); /* keeps the old one on ENOMEM */
		n->nlookup++;
		*nodeid = i;
		return 0;
	}
	if ((r = slot_alloc(s, &slot))) {
		close(fd);
		return r;
	}
	n = &s->ino[slot];
	memset(n, 0, sizeof(*n));
	n->fd = fd;
	n->used = 1;
	n->type = st->st_mode & S_IFMT;
	n->dev = (uint64_t)st->st_dev;
	n->ino = (uint64_t)st->st_ino;
	n->gen = ++s->next_gen;
	n->nlookup = 1;
	s->nr_ino++;
	hash_insert(s, slot);
	if ((r = fuse_set_name(n, name ? parent : 0, name ? name : ""))) {
		slot_free(s, slot);
		return r;
	}
	*nodeid = slot + 1;
	return 0;
}

void fuse_ino_forget(struct fuse_server *s, uint64_t nodeid, uint64_t nlookup)
{
	struct fuse_inode *n = ino_at(s, nodeid);

	if (!n || nodeid == FUSE_ROOT_ID)
		return; /* the root lives as long as the server */
	n->nlookup = nlookup >= n->nlookup ? 0 : n->nlookup - nlookup;
	if (!n->nlookup) {
		fuse_lk_drop_node(s, nodeid);
		slot_free(s, (uint32_t)(nodeid - 1));
	}
}

/* ---- file handles: fh = index ---- */

struct fuse_handle *fuse_fh_at(struct fuse_server *s, uint64_t fh, int dir)
{
	if (fh >= s->fh_max || !s->fh[fh].used || s->fh[fh].fd < 0 || s->fh[fh].dir != dir)
		return NULL;
	return &s->fh[fh];
}

int fuse_fh_alloc(struct fuse_server *s, int fd, uint64_t nodeid, int dir, uint32_t flags,
		    uint64_t *fh)
{
	uint32_t i;

	for (i = 0; i < s->fh_max; i++) {
		if (!s->fh[i].used) {
			s->fh[i] = (struct fuse_handle){ .fd = fd, .used = 1, .dir = (uint8_t)dir,
							 .flags = flags, .nodeid = nodeid };
			*fh = i;
			return 0;
		}
	}
	if (log_ratelimit_ok(&s->rl))
		log_warn("virtio-fs %s: %u files open at once; opens fail with ENFILE", s->tag, s->fh_max);
	close(fd);
	return -ENFILE;
}

void fuse_fh_free(struct fuse_server *s, uint64_t fh)
{
	if (fh >= s->fh_max || !s->fh[fh].used)
		return;
	if (s->fh[fh].fd >= 0)
		close(s->fh[fh].fd);
	s->fh[fh] = (struct fuse_handle){ .fd = -1 };
}

/* ---- host calls ---- */

/* The one place a name is resolved: exactly one component under dirfd,
 * no symlink followed (a trailing one is opened itself, O_PATH). */
int fuse_open_child(struct fuse_server *s, int dirfd, const char *name)
{
	int fd;

	if (!s->no_openat2) {
		struct open_how how = {
			.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
		};

		fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
		if (fd >= 0)
			return fd;
		if (errno != ENOSYS)
			return -errno;
		s->no_openat2 = 1;
	}
	/* name is one component (no '/', not ".."): O_NOFOLLOW is enough. */
	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* "/proc/self/fd/N" relative to proc_fd: reopens an inode. Only for
 * non-symlinks: through the magic link the inode itself is reached. */
void fuse_fd_name(char buf[16], int fd)
{
	snprintf(buf, 16, "%d", fd);
}

int fuse_reopen(struct fuse_server *s, const struct fuse_inode *n, int flags)
{
	char p[16];
	int fd;

	if (n->type == S_IFLNK)
		return -ELOOP;
	if (n->type == S_IFDIR)
		fd = openat(n->fd, ".", flags | O_DIRECTORY | O_CLOEXEC);
	else if (n->type != S_IFREG)
		return -EACCES; /* FIFOs and devices are the guest kernel's, never opened here */
	else {
		fuse_fd_name(p, n->fd);
		fd = openat(s->proc_fd, p, flags | O_CLOEXEC);
	}
	return fd < 0 ? -errno : fd;
}

int fuse_stat_fd(int fd, struct stat *st)
{
	return fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* ---- setup ---- */

static void drop_all(struct fuse_server *s)
{
	uint32_t i;

	fuse_lk_reset(s);
	for (i = 0; i < s->fh_max; i++)
		fuse_fh_free(s, i);
	for (i = 1; i < s->ino_cap; i++)
		if (s->ino[i].used)
			slot_free(s, i);
}

void fuse_server_reset(struct fuse_server *s)
{
	drop_all(s);
	s->ino[0].nlookup = 1;
	s->initialized = 0;
}

int fuse_server_init(struct fuse_server *s, const struct fuse_params *p)
{
	struct rlimit rl;
	struct stat st;
	uint32_t fdroom;
	int r;

	memset(s, 0, sizeof(*s));
	s->root_fd = s->proc_fd = -1;
	s->ro = p->ro;
	s->budget = p->budget;
	s->cache = p->cache;
	s->rl = (struct log_ratelimit)LOG_RATELIMIT_INIT;
	snprintf(s->tag, sizeof(s->tag), "%s", p->tag ? p->tag : "");
	s->root_fd = open(p->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (s->root_fd < 0) {
		r = -errno;
		log_err("--fs %s: %s: %s", s->tag, p->path, strerror(errno));
		return r;
	}
	s->proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (s->proc_fd < 0) {
		r = -errno;
		log_err("--fs %s: /proc/self/fd: %s (is /proc mounted?)", s->tag, strerror(errno));
		goto err;
	}
	if ((r = fuse_stat_fd(s->root_fd, &st)))
		goto err;
	/* Every inode holds a descriptor: the table stays well inside the
	 * process's descriptor limit (raised to its hard limit). */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			(void)setrlimit(RLIMIT_NOFILE, &rl);
			(void)getrlimit(RLIMIT_NOFILE, &rl);
		}
	} else {
		rl.rlim_cur = 1024;
	}
	s->fh_max = p->max_handles ? p->max_handles : FUSE_HANDLES_MAX;
	s->ino_max = p->max_inodes ? p->max_inodes : FUSE_INODES_MAX;
	fdroom = rl.rlim_cur > 2048 + s->fh_max ? (uint32_t)(rl.rlim_cur - 2048 - s->fh_max) : 64;
	if (!p->max_inodes && s->ino_max > fdroom)
		s->ino_max = fdroom;
	if (s->ino_max < 2)
		s->ino_max = 2;
	s->ino_cap = s->ino_max < 256 ? s->ino_max : 256;
	s->ino = calloc(s->ino_cap, sizeof(*s->ino));
	s->fh = calloc(s->fh_max, sizeof(*s->fh));
	for (s->hash_mask = 1; s->hash_mask < s->ino_max; s->hash_mask <<= 1)
		;
	s->hash = calloc(s->hash_mask, sizeof(*s->hash));
	s->hash_mask--;
	s->body = malloc(FUSE_MAX_BODY + 1);
	s->reply = malloc(FUSE_MAX_REPLY);
	s->dents = malloc(DENTS_BUF);
	if (!s->ino || !s->fh || !s->hash || !s->body || !s->reply || !s->dents) {
		r = -ENOMEM;
		goto err;
	}
	for (uint32_t i = 0; i < s->fh_max; i++)
		s->fh[i].fd = -1;
	for (uint32_t i = s->ino_cap; i-- > 1;) {
		s->ino[i].fd = -1;
		s->ino[i].fnext = s->free_ino;
		s->free_ino = i + 1;
	}
	/* The root: nodeid 1, never forgotten. */
	s->ino[0] = (struct fuse_inode){ .fd = s->root_fd, .used = 1, .type = S_IFDIR, .nlookup = 1,
					 .dev = (uint64_t)st.st_dev, .ino = (uint64_t)st.st_ino };
	s->nr_ino = 1;
	s->next_gen = 1;
	hash_insert(s, 0);
	return 0;

err:
	fuse_server_destroy(s);
	return r;
}

void fuse_server_destroy(struct fuse_server *s)
{
	if (s->ino && s->fh)
		drop_all(s);
	if (s->root_fd >= 0)
		close(s->root_fd);
	if (s->proc_fd >= 0)
		close(s->proc_fd);
	free(s->ino);
	free(s->fh);
	free(s->hash);
	free(s->body);
	free(s->reply);
	free(s->dents);
	memset(s, 0, sizeof(*s));
	s->root_fd = s->proc_fd = -1;
}

/* ---- snapshots ---- */

void fuse_save(const struct fuse_server *s, struct sbuf *b)
{
	uint32_t i, n = 0;

	sb_u32(b, (uint32_t)s->initialized);
	sb_u32(b, s->minor);
	sb_u64(b, s->next_gen);
	for (i = 1; i < s->ino_cap; i++)
		n += s->ino[i].used;
	sb_u32(b, n);
	for (i = 1; i < s->ino_cap; i++) {
		const struct fuse_inode *x = &s->ino[i];

		if (!x->used)
			continue;
		sb_u64(b, i + 1);
		sb_u64(b, x->parent);
		sb_u64(b, x->gen);
		sb_u64(b, x->nlookup);
		sb_u32(b, x->type);
		sb_str(b, x->name ? x->name : "");
	}
	for (i = 0, n = 0; i < s->fh_max; i++)
		n += s->fh[i].used;
	sb_u32(b, n);
	for (i = 0; i < s->fh_max; i++) {
		if (!s->fh[i].used)
			continue;
		sb_u32(b, i);
		sb_u64(b, s->fh[i].nodeid);
		sb_u32(b, s->fh[i].flags);
		sb_u8(b, s->fh[i].dir);
	}
}

/* One saved inode, resolved again under its (already resolved) parent. */
static void resolve(struct fuse_server *s, uint32_t slot)
{
	struct fuse_inode *n = &s->ino[slot];
	const struct fuse_inode *p = ino_at(s, n->parent);
	struct stat st;
	int fd;

	if (!p || p->fd < 0 || !n->name[0] || strchr(n->name, '/') || !strcmp(n->name, "..") ||
	    !strcmp(n->name, "."))
		return;
	fd = fuse_open_child(s, p->fd, n->name);
	if (fd < 0)
		return;
	if (fuse_stat_fd(fd, &st) || (st.st_mode & S_IFMT) != n->type ||
	    fuse_ino_find(s, (uint64_t)st.st_dev, (uint64_t)st.st_ino)) {
		close(fd); /* another kind of file now, or known under another nodeid: stale */
		return;
	}
	n->fd = fd;
	n->dev = (uint64_t)st.st_dev;
	n->ino = (uint64_t)st.st_ino;
	hash_insert(s, slot);
}

int fuse_restore(struct fuse_server *s, struct srd *r)
{
	uint32_t i, n, k, nfh, progress;
	int e = 0;

	fuse_server_reset(s);
	s->initialized = (int)sr_u32(r);
	s->minor = sr_u32(r);
	s->next_gen = sr_u64(r);
	n = sr_u32(r);
	if (n >= s->ino_max) {
		sr_fail(r, "virtio-fs: more inodes than this drive's table holds");
		return -EINVAL;
	}
	for (k = 0; k < n && !r->err; k++) {
		uint64_t nodeid = sr_u64(r);
		struct fuse_inode *x;
		char name[NAME_MAX + 1];

		/* Nodeids come back as they were: the table grows as far as the
		 * highest (not to its limit at once, which made every clone hold
		 * its whole table, 1.2 MiB at 16 K inodes, resident). */
		while (nodeid > s->ino_cap && nodeid <= s->ino_max && !e)
			e = grow(s);
		if (e)
			break;
		if (nodeid < 2 || nodeid > s->ino_cap || s->ino[nodeid - 1].used) {
			sr_fail(r, "virtio-fs: a nodeid out of range or twice");
			break;
		}
		x = &s->ino[nodeid - 1];
		x->parent = sr_u64(r);
		x->gen = sr_u64(r);
		x->nlookup = sr_u64(r);
		x->type = sr_u32(r) & S_IFMT;
		sr_str(r, name, sizeof(name));
		x->name = strdup(name);
		if (!x->name) {
			e = -ENOMEM;
			break;
		}
		x->used = 1;
		x->fd = -1;
		s->nr_ino++;
	}
	{
		/* Unlink the used slots from the free list. */
		uint32_t *pp = &s->free_ino;

		while (*pp) {
			if (s->ino[*pp - 1].used)
				*pp = s->ino[*pp - 1].fnext;
			else
				pp = &s->ino[*pp - 1].fnext;
		}
	}
	if (!r->err && !e) {
		/* Parents before children, whatever their nodeids: one pass
		 * per level of depth, until nothing more resolves. */
		do {
			progress = 0;
			for (i = 1; i < s->ino_cap; i++) {
				if (s->ino[i].used && s->ino[i].fd < 0) {
					resolve(s, i);
					progress += s->ino[i].fd >= 0;
				}
			}
		} while (progress);
		for (i = 1, k = 0; i < s->ino_cap; i++)
			k += s->ino[i].used && s->ino[i].fd < 0;
		if (k)
			log_warn("virtio-fs %s: %u inodes the guest knew are gone from the host since the "
				 "snapshot; they answer ESTALE", s->tag, k);
	}
	nfh = sr_u32(r);
	for (k = 0; k < nfh && !r->err && !e; k++) {
		uint32_t fh = sr_u32(r);
		uint64_t nodeid = sr_u64(r);
		uint32_t flags = sr_u32(r);
		uint8_t dir = sr_u8(r);
		struct fuse_inode *x = ino_at(s, nodeid);
		int fd;

		if (fh >= s->fh_max || s->fh[fh].used || (flags & ~(uint32_t)(O_ACCMODE | O_APPEND | O_NONBLOCK |
								  O_DSYNC | O_SYNC | O_NOATIME))) {
			sr_fail(r, "virtio-fs: a file handle out of range, twice, or with odd flags");
			break;
		}
		fd = x && x->fd >= 0 ? fuse_reopen(s, x, dir ? O_RDONLY : (int)flags) : -1;
		if (s->ro && (flags & O_ACCMODE) != O_RDONLY) {
			if (fd >= 0)
				close(fd);
			fd = -1;
		}
		s->fh[fh] = (struct fuse_handle){ .fd = fd < 0 ? -1 : fd, .used = 1, .dir = dir,
						  .flags = flags, .nodeid = nodeid };
	}
	if (r->err || e) {
		fuse_server_reset(s);
		return e ? e : -EINVAL;
	}
	return 0;
}
