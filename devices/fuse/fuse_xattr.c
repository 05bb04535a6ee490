/* The FUSE server's extended attributes (fuse_internal.h): GETXATTR,
 * LISTXATTR, SETXATTR, REMOVEXATTR, through the magic link to the inode;
 * only the user. namespace is the guest's (fuse_priv.h). */
#include "devices/fuse/fuse_internal.h"
#include "devices/fuse/fuse_priv.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/xattr.h>

/* xattrs: through the magic link to the inode (never on a symlink). */
static int xattr_path(struct req *q, char path[40], struct fuse_inode **n)
{
	int r;

	if ((r = fuse_ino_get(q->s, q->h.nodeid, n)))
		return r;
	if ((*n)->type == S_IFLNK)
		return -EOPNOTSUPP;
	snprintf(path, 40, "/proc/self/fd/%d", (*n)->fd);
	return 0;
}

static int xattr_value(struct req *q, ssize_t got, uint32_t want)
{
	struct fuse_getxattr_out out;

	if (got < 0)
		return -errno;
	if (want == 0) {
		memset(&out, 0, sizeof(out));
		out.size = (uint32_t)got;
		return fuse_reply(q, &out, sizeof(out));
	}
	if ((size_t)got > q->out.left)
		return -ERANGE;
	q->out_len = (size_t)got;
	return 0;
}

int fuse_op_getxattr(struct req *q)
{
	const struct fuse_getxattr_in *g = (const void *)q->body;
	const uint8_t *p = q->body + sizeof(*g);
	struct fuse_inode *n;
	const char *name;
	char path[40];
	size_t left, cap;
	const uint8_t *nul;
	int r;

	NEED(q, *g);
	left = q->blen - sizeof(*g);
	nul = memchr(p, '\0', left);
	if (!nul || nul == p)
		return -EINVAL;
	name = (const char *)p;
	if ((r = xattr_path(q, path, &n)))
		return r;
	if (!fpriv_xattr_ok(name))
		return -ENODATA; /* the host's labels are not the guest's business */
	cap = g->size > FUSE_MAX_REPLY ? FUSE_MAX_REPLY : g->size;
	return xattr_value(q, getxattr(path, name, g->size ? q->s->reply : NULL, cap), g->size);
}

int fuse_op_listxattr(struct req *q)
{
	const struct fuse_getxattr_in *g = (const void *)q->body;
	struct fuse_inode *n;
	char path[40];
	ssize_t got;
	int r;

	NEED(q, *g);
	if ((r = xattr_path(q, path, &n)))
		return r;
	/* The whole list (at most XATTR_LIST_MAX, 64 KiB), then only the
	 * names the guest may see: their length is the answer to a size
	 * query as well. */
	got = listxattr(path, (char *)q->s->reply, FUSE_MAX_REPLY);
	if (got < 0)
		return -errno;
	got = (ssize_t)fpriv_xattr_filter((char *)q->s->reply, (size_t)got);
	if (g->size && (size_t)got > g->size)
		return -ERANGE;
	return xattr_value(q, got, g->size);
}

int fuse_op_setxattr(struct req *q)
{
	/* Without FUSE_SETXATTR_EXT (not offered) the argument is 8 bytes. */
	struct { uint32_t size, flags; } a;
	const uint8_t *p = q->body + FUSE_COMPAT_SETXATTR_IN_SIZE, *nul;
	struct fuse_inode *n;
	const char *name;
	char path[40];
	size_t left;
	int r;

	if (q->blen < FUSE_COMPAT_SETXATTR_IN_SIZE)
		return -EINVAL;
	memcpy(&a, q->body, sizeof(a));
	left = q->blen - FUSE_COMPAT_SETXATTR_IN_SIZE;
	nul = memchr(p, '\0', left);
	if (!nul || nul == p)
		return -EINVAL;
	name = (const char *)p;
	left -= (size_t)(nul - p) + 1;
	if (a.size != left)
		return -EINVAL; /* the value is exactly what is left */
	if (q->s->ro)
		return -EROFS;
	if (!fpriv_xattr_ok(name))
		return -EOPNOTSUPP; /* security.capability above all (docs/virtio-fs.md) */
	if ((r = xattr_path(q, path, &n)))
		return r;
	if (setxattr(path, name, nul + 1, a.size, (int)a.flags) < 0)
		return -errno;
	return 0;
}

int fuse_op_removexattr(struct req *q)
{
	const uint8_t *nul = memchr(q->body, '\0', q->blen);
	struct fuse_inode *n;
	char path[40];
	int r;

	if (!nul || nul == q->body)
		return -EINVAL;
	if (q->s->ro)
		return -EROFS;
	if (!fpriv_xattr_ok((const char *)q->body))
		return -EOPNOTSUPP;
	if ((r = xattr_path(q, path, &n)))
		return r;
	return removexattr(path, (const char *)q->body) < 0 ? -errno : 0;
}
