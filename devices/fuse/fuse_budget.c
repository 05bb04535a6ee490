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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int fuse_budget_map(struct fuse_budget *b, const char *usage_path, uint64_t limit)
{
	struct stat st;
	void *m;
	int fd = open(usage_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(int64_t))
		r = -EINVAL;
	else if ((m = mmap(NULL, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		r = -errno;
	else
		*b = (struct fuse_budget){ .used = m, .limit = limit };
	close(fd);
	return r;
}

void fuse_budget_unmap(struct fuse_budget *b)
{
	if (b->used)
		munmap(b->used, sizeof(int64_t));
	b->used = NULL;
}

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

int fuse_budget_take(struct fuse_budget *b, int fd, uint64_t off, uint64_t len, int whole,
		     struct fuse_reservation *res)
{
	struct stat st;
	int64_t need;

	res->before = -1;
	res->reserved = 0;
	if (!b->used)
		return 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	need = fuse_budget_need(&st, off, len, whole);
	if (need > 0 && __atomic_add_fetch(b->used, need, __ATOMIC_SEQ_CST) > (int64_t)b->limit) {
		__atomic_sub_fetch(b->used, need, __ATOMIC_SEQ_CST);
		return -ENOSPC;
	}
	res->before = (int64_t)st.st_blocks * 512;
	res->reserved = need > 0 ? need : 0;
	return 0;
}

void fuse_budget_settle(struct fuse_budget *b, int fd, const struct fuse_reservation *res)
{
	int64_t after;

	if (!b->used || res->before < 0)
		return;
	after = blocks_of(fd);
	if (after < 0)
		after = res->before; /* cannot tell: keep what was there */
	__atomic_add_fetch(b->used, after - res->before - res->reserved, __ATOMIC_SEQ_CST);
}

int64_t fuse_budget_freed(const struct fuse_budget *b, int dirfd, const char *name)
{
	struct stat st;

	if (!b->used || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	/* Another name keeps a linked file's blocks. */
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
		return 0;
	return (int64_t)st.st_blocks * 512;
}

void fuse_budget_give_back(struct fuse_budget *b, int64_t bytes)
{
	if (b->used && bytes > 0)
		__atomic_sub_fetch(b->used, bytes, __ATOMIC_SEQ_CST);
}
