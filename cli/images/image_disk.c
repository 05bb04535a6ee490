/* A sandbox's root disk grown to its size (images.h: image_root_grow):
 * the sandbox's own copy of the image, extended sparsely and its ext4
 * file system grown offline with resize2fs before the guest boots, so
 * `df /` in the sandbox shows the room at once. The image file itself is
 * never touched (it is shared by every sandbox and by warm snapshots). */
#include "cli/images/images.h"
#include "cli/util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* resize2fs's answer when the file system was mounted since its last
 * check (an image a Dockerfile build booted): "Please run 'e2fsck -f'
 * first" and exit status 1. e2fsck -p fixes what is safe to fix unasked;
 * exit 0 or 1 (errors corrected) is fine. */
static int check_fs(const char *path)
{
	const char *fsck[] = { "e2fsck", "-f", "-p", path, NULL };
	int r = cli_run_tool(fsck, 2);

	return r == 0 || r == 1 ? 0 : r < 0 ? r : -EIO;
}

int image_root_grow(const char *path, uint64_t bytes, char *err, size_t len)
{
	char size[32];
	const char *resize[] = { "resize2fs", path, size, NULL };
	struct stat st;
	int fd, r;

	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, len, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	if ((uint64_t)st.st_size > bytes) {
		close(fd);
		snprintf(err, len, "the image is %llu MiB: the disk cannot be smaller",
			 (unsigned long long)(st.st_size >> 20));
		return -EINVAL;
	}
	if ((uint64_t)st.st_size == bytes) {
		close(fd);
		return 0;
	}
	/* A hole: the host pays only for what the guest writes. */
	if (ftruncate(fd, (off_t)bytes) < 0) {
		r = -errno;
		close(fd);
		snprintf(err, len, "extending %s to %llu MiB: %s", path, (unsigned long long)(bytes >> 20),
			 strerror(-r));
		return r;
	}
	close(fd);
	/* In KiB: resize2fs takes a unit suffix; the whole file. */
	snprintf(size, sizeof(size), "%lluK", (unsigned long long)(bytes >> 10));
	r = cli_run_tool(resize, 2);
	if (r == 1 && check_fs(path) == 0)
		r = cli_run_tool(resize, 2);
	if (r == 0)
		return 0;
	if (r == 127)
		snprintf(err, len, "resize2fs not found: install e2fsprogs (it made the image: mkfs.ext4)");
	else
		snprintf(err, len, "resize2fs %s %s failed (exit %d): is the host's file system full?", path, size, r);
	return r < 0 ? r : -EIO;
}
