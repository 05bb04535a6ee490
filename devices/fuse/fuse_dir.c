/* The FUSE server's directory operations (fuse_internal.h): entries
 * made, removed, renamed and linked (MKDIR, MKNOD, SYMLINK, UNLINK,
 * RMDIR, RENAME, RENAME2, LINK), and READDIR(PLUS). */
#include "devices/fuse/fuse_internal.h"
#include "devices/fuse/fuse_priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The entry for a name just created in parent: looked up once more (it
 * is a new inode, so nothing is followed and the result is ours). */
static int created(struct req *q, uint64_t parent, const char *name, uint32_t mode)
{
	struct fuse_inode *p = &q->s->ino[parent - 1];
	int fd = fuse_open_child(q->s, p->fd, name);
	struct stat st;
	char b[16];

	if (fd >= 0 && mode != (uint32_t)-1 && fuse_stat_fd(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		/* The VMM's own umask must not narrow what the guest asked for;
		 * a setgid parent's S_ISGID, which mkdir passed on, stays. */
		mode_t want = fpriv_mode(S_IFDIR, mode) | (st.st_mode & S_ISGID);

		fuse_fd_name(b, fd);
		if ((st.st_mode & 07777) != want)
			(void)fchmodat(q->s->proc_fd, b, want, 0);
	}
	if (fd >= 0)
		close(fd);
	return fuse_entry_reply(q, parent, name);
}

int fuse_op_mkdir(struct req *q)
{
	const struct fuse_mkdir_in *m = (const void *)q->body;
	const uint8_t *p = q->body + sizeof(*m);
	size_t left;
	struct fuse_inode *d;
	const char *name;
	int r;

	NEED(q, *m);
	left = q->blen - sizeof(*m);
	if ((r = fuse_take_new_name(&p, &left, &name)) || (r = fuse_ino_get(q->s, q->h.nodeid, &d)))
		return r;
	if (mkdirat(d->fd, name, fpriv_mode(S_IFDIR, m->mode)) < 0)
		return -errno;
	return created(q, q->h.nodeid, name, m->mode);
}

int fuse_op_mknod(struct req *q)
{
	const struct fuse_mknod_in *m = (const void *)q->body;
	const uint8_t *p = q->body + sizeof(*m);
	size_t left;
	struct fuse_inode *d;
	const char *name;
	int r;

	NEED(q, *m);
	left = q->blen - sizeof(*m);
	if ((r = fuse_take_new_name(&p, &left, &name)) || (r = fuse_ino_get(q->s, q->h.nodeid, &d)))
		return r;
	if (!S_ISREG(m->mode) && !S_ISFIFO(m->mode))
		return -EPERM; /* devices and sockets stay the host's business */
	if (mknodat(d->fd, name, (m->mode & S_IFMT) | fpriv_mode(m->mode & S_IFMT, m->mode), 0) < 0)
		return -errno;
	return created(q, q->h.nodeid, name, (uint32_t)-1);
}

int fuse_op_symlink(struct req *q)
{
	const uint8_t *p = q->body;
	size_t left = q->blen;
	const char *name, *target;
	const uint8_t *nul;
	struct fuse_inode *d;
	int r;

	if ((r = fuse_take_new_name(&p, &left, &name)))
		return r;
	nul = memchr(p, '\0', left);
	if (!nul || nul == p)
		return -EINVAL;
	if ((size_t)(nul - p) >= PATH_MAX)
		return -ENAMETOOLONG;
	target = (const char *)p; /* stored as is: the server never follows it */
	if ((r = fuse_ino_get(q->s, q->h.nodeid, &d)))
		return r;
	if (symlinkat(target, d->fd, name) < 0)
		return -errno;
	return created(q, q->h.nodeid, name, (uint32_t)-1);
}

int fuse_op_unlink(struct req *q, int dir)
{
	const uint8_t *p = q->body;
	size_t left = q->blen;
	struct fuse_inode *d;
	const char *name;
	int64_t freed;
	int r;

	if ((r = fuse_take_new_name(&p, &left, &name)) || (r = fuse_ino_get(q->s, q->h.nodeid, &d)))
		return r;
	freed = dir ? 0 : fuse_budget_freed(&q->s->budget, d->fd, name);
	if (unlinkat(d->fd, name, dir ? AT_REMOVEDIR : 0) < 0)
		return -errno;
	fuse_budget_give_back(&q->s->budget, freed);
	return 0;
}

/* After a rename: the inode now at (dir, name) is recorded there. */
static void renamed(struct fuse_server *s, uint64_t dir, const char *name)
{
	struct stat st;
	uint32_t i;

	if (fstatat(s->ino[dir - 1].fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	i = fuse_ino_find(s, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
	if (i > 1)
		(void)fuse_set_name(&s->ino[i - 1], dir, name);
}

static int do_rename(struct req *q, uint64_t newdir, uint32_t flags, const uint8_t *p, size_t left)
{
	struct fuse_inode *od, *nd;
	const char *oldname, *newname;
	int64_t freed;
	int r;

	if ((r = fuse_take_new_name(&p, &left, &oldname)) || (r = fuse_take_new_name(&p, &left, &newname)))
		return r;
	if (flags & ~(uint32_t)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL; /* RENAME_WHITEOUT: overlayfs' business, not offered */
	if ((r = fuse_ino_get(q->s, q->h.nodeid, &od)) || (r = fuse_ino_get(q->s, newdir, &nd)))
		return r;
	/* A rename over a file frees it (an exchange keeps both). */
	freed = flags & RENAME_EXCHANGE ? 0 : fuse_budget_freed(&q->s->budget, nd->fd, newname);
	if (flags)
		r = renameat2(od->fd, oldname, nd->fd, newname, flags);
	else
		r = renameat(od->fd, oldname, nd->fd, newname);
	if (r < 0)
		return -errno;
	fuse_budget_give_back(&q->s->budget, freed);
	renamed(q->s, newdir, newname);
	if (flags & RENAME_EXCHANGE)
		renamed(q->s, q->h.nodeid, oldname);
	return 0;
}

int fuse_op_rename(struct req *q)
{
	const struct fuse_rename_in *m = (const void *)q->body;

	NEED(q, *m);
	return do_rename(q, m->newdir, 0, q->body + sizeof(*m), q->blen - sizeof(*m));
}

int fuse_op_rename2(struct req *q)
{
	const struct fuse_rename2_in *m = (const void *)q->body;

	NEED(q, *m);
	return do_rename(q, m->newdir, m->flags, q->body + sizeof(*m), q->blen - sizeof(*m));
}

int fuse_op_link(struct req *q)
{
	const struct fuse_link_in *m = (const void *)q->body;
	const uint8_t *p = q->body + sizeof(*m);
	struct fuse_inode *src, *d;
	const char *name;
	size_t left;
	char b[16];
	int r;

	NEED(q, *m);
	left = q->blen - sizeof(*m);
	if ((r = fuse_take_new_name(&p, &left, &name)) || (r = fuse_ino_get(q->s, m->oldnodeid, &src)) ||
	    (r = fuse_ino_get(q->s, q->h.nodeid, &d)))
		return r;
	if (src->type == S_IFDIR)
		return -EPERM;
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH: link through the magic
	 * link instead, which lands on the inode itself (a symlink too). */
	fuse_fd_name(b, src->fd);
	if (linkat(q->s->proc_fd, b, d->fd, name, AT_SYMLINK_FOLLOW) < 0)
		return -errno;
	return fuse_entry_reply(q, q->h.nodeid, name);
}

/* READDIR and READDIRPLUS: entries from the host directory at `offset`
 * (a getdents64 cookie), as many as fit in the guest's buffer. */
int fuse_op_readdir(struct req *q, int plus)
{
	struct fuse_server *s = q->s;
	const struct fuse_read_in *in = (const void *)q->body;
	struct fuse_handle *h;
	struct fuse_inode *dir;
	size_t room, used = 0;
	ssize_t n;
	int r;

	NEED(q, *in);
	if (!(h = fuse_fh_at(s, in->fh, 1)))
		return -EBADF;
	if ((r = fuse_ino_get(s, h->nodeid, &dir)))
		return r;
	room = in->size;
	if (room > q->out.left)
		room = q->out.left;
	if (room > FUSE_MAX_REPLY)
		room = FUSE_MAX_REPLY;
	if (in->offset > (uint64_t)INT64_MAX || lseek(h->fd, (off_t)in->offset, SEEK_SET) < 0)
		return -EINVAL;
	for (;;) {
		size_t off = 0;

		n = getdents64(h->fd, s->dents, DENTS_BUF);
		if (n < 0) {
			/* What was gathered goes out (an empty reply would read
			 * as the end of the directory and, for READDIRPLUS,
			 * strand the lookups already counted for it). */
			q->out_len = used;
			return used ? 0 : -errno;
		}
		if (n == 0)
			break;
		while (off < (size_t)n) {
			const struct dirent64 *de = (const void *)(s->dents + off);
			size_t nlen = strlen(de->d_name);
			size_t esz = FUSE_DIRENT_ALIGN((plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET) + nlen);
			struct fuse_dirent *fd;
			uint8_t *e = s->reply + used;

			off += de->d_reclen;
			if (used + esz > room) {
				q->out_len = used;
				return used ? 0 : -EINVAL; /* too small for even one entry */
			}
			memset(e, 0, esz);
			if (plus) {
				struct fuse_direntplus *dp = (void *)e;
				int is_dot = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
				int cfd = is_dot ? -ENOENT : fuse_open_child(s, dir->fd, de->d_name);
				struct stat st;
				uint64_t nodeid = 0;

				if (cfd >= 0 && fuse_stat_fd(cfd, &st) == 0) {
					if (fuse_ino_ref(s, cfd, &st, h->nodeid, de->d_name, &nodeid) == 0)
						fuse_fill_entry(s, nodeid, &st, &dp->entry_out);
					/* else: nodeid 0, the guest just gets the name */
				} else if (cfd >= 0) {
					close(cfd);
				} else if (!is_dot) {
					continue; /* gone since getdents: skip it */
				}
				fd = &dp->dirent;
			} else {
				fd = (void *)e;
			}
			fd->ino = de->d_ino;
			fd->off = (uint64_t)de->d_off;
			fd->namelen = (uint32_t)nlen;
			fd->type = de->d_type;
			memcpy(fd->name, de->d_name, nlen);
			used += esz; /* the next READDIR seeks to the last fd->off itself */
		}
	}
	q->out_len = used;
	return 0;
}
