/* A drive's size limit inside the FUSE server (fuse.h, struct
 * fuse_budget; docs/virtio-fs.md, "Drives"). What counts is the space the
 * host file system gives the drive's regular files: st_blocks * 512, as
 * `du` sees it. Several VMMs serve one drive, each its own process, so the
 * count lives in one 8-byte page they all map shared, and changes only by
 * atomic adds:
 *   - before a WRITE or FALLOCATE, the bytes it may add are reserved with
 *     one fetch-add; past the limit the reservation is undone and the
 *     request fails with ENOSPC before the host file is touched, so
 *     concurrent writers in several sandboxes never pass the limit
 *     together;
 *   - after it, the reservation is replaced by the file's real change in
 *     st_blocks (a write over existing data adds nothing);
 *   - a truncate, an unlink or a rename over a file gives its blocks back.
 * The CLI sets the count from a walk of the folder at each mount no other
 * sandbox holds (cli/drive/), which corrects what host processes or an
 * unlinked file still open changed behind the count's back. */
#include "devices/fuse/fuse_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

static int64_t blocks_of(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -1;
	return (int64_t)st.st_blocks * 512;
}

int64_t fuse_budget_need(const struct stat *st, uint64_t off, uint64_t len, int whole)
{
	uint64_t end = off + len, size = (uint64_t)st->st_size;

	/* A sparse file's holes may lie anywhere below its size: count the
	 * whole write, as for fallocate. */
	if (whole || (uint64_t)st->st_blocks * 512 < size)
		return (int64_t)len;
	return end > size ? (int64_t)(end - size) : 0;
}

int fuse_budget_take(struct fuse_server *s, int fd, uint64_t off, uint64_t len, int whole,
		     struct fuse_reservation *res)
{
	struct stat st;
	int64_t need;

	res->before = -1;
	res->reserved = 0;
	if (!s->budget.used)
		return 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	need = fuse_budget_need(&st, off, len, whole);
	if (need > 0 && __atomic_add_fetch(s->budget.used, need, __ATOMIC_SEQ_CST) > (int64_t)s->budget.limit) {
		__atomic_sub_fetch(s->budget.used, need, __ATOMIC_SEQ_CST);
		return -ENOSPC;
	}
	res->before = (int64_t)st.st_blocks * 512;
	res->reserved = need > 0 ? need : 0;
	return 0;
}

void fuse_budget_settle(struct fuse_server *s, int fd, const struct fuse_reservation *res)
{
	int64_t after;

	if (!s->budget.used || res->before < 0)
		return;
	after = blocks_of(fd);
	if (after < 0)
		after = res->before; /* cannot tell: keep what was there */
	__atomic_add_fetch(s->budget.used, after - res->before - res->reserved, __ATOMIC_SEQ_CST);
}

int64_t fuse_budget_freed(const struct fuse_server *s, int dirfd, const char *name)
{
	struct stat st;

	if (!s->budget.used || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	/* Another name keeps a linked file's blocks. */
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
		return 0;
	return (int64_t)st.st_blocks * 512;
}

void fuse_budget_give_back(struct fuse_server *s, int64_t bytes)
{
	if (s->budget.used && bytes > 0)
		__atomic_sub_fetch(s->budget.used, bytes, __ATOMIC_SEQ_CST);
}
