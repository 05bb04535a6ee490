/* The sandbox API's frames, read and written (vmm/wire/proto.h). */
#include "vmm/wire/proto.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The one read-all/write-all loop of the tree (the frames here, guest-init,
 * the CLI, the VMM's files): n bytes at the file offset, or at off (pread,
 * pwrite) when at; EINTR retried, large counts cut to 1 GiB a call. 0, or
 * -1 with errno set: 0 at end of file, ENOSPC for a write that took
 * nothing. *done (when given): the bytes moved, whichever. */
static int io_full_n(int fd, uint8_t *p, size_t n, int wr, int at, uint64_t off, size_t *done)
{
	size_t moved = 0;
	int r = 0;

	while (n) {
		size_t k = n > (1u << 30) ? (1u << 30) : n;
		ssize_t d = wr ? (at ? pwrite(fd, p, k, (off_t)off) : write(fd, p, k))
			       : (at ? pread(fd, p, k, (off_t)off) : read(fd, p, k));

		if (d < 0 && errno == EINTR)
			continue;
		if (d == 0)
			errno = wr ? ENOSPC : 0;
		if (d <= 0) {
			r = -1;
			break;
		}
		p += d;
		n -= (size_t)d;
		off += (uint64_t)d;
		moved += (size_t)d;
	}
	if (done)
		*done = moved;
	return r;
}

static int io_full(int fd, uint8_t *p, size_t n, int wr, int at, uint64_t off)
{
	return io_full_n(fd, p, n, wr, at, off, NULL);
}

ssize_t read_upto(int fd, void *buf, size_t n)
{
	size_t done;

	if (io_full_n(fd, buf, n, 0, 0, 0, &done) && errno)
		return -errno;
	return (ssize_t)done;
}

int write_full(int fd, const void *buf, size_t n)
{
	return io_full(fd, (uint8_t *)buf, n, 1, 0, 0);
}

int read_full(int fd, void *buf, size_t n)
{
	return io_full(fd, buf, n, 0, 0, 0);
}

int pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
	return io_full(fd, (uint8_t *)buf, n, 1, 1, off) ? -errno : 0;
}

int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	return io_full(fd, buf, n, 0, 1, off) ? (errno ? -errno : -EIO) : 0;
}

int frame_write(int fd, uint8_t type, const void *data, size_t len)
{
	uint8_t hdr[FRAME_HDR] = { 0 };

	if (len > FRAME_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	hdr[0] = (uint8_t)len;
	hdr[1] = (uint8_t)(len >> 8);
	hdr[2] = (uint8_t)(len >> 16);
	hdr[3] = (uint8_t)(len >> 24);
	hdr[4] = type;
	if (write_full(fd, hdr, sizeof(hdr)))
		return -1;
	return len ? write_full(fd, data, len) : 0;
}

int frame_read(int fd, uint8_t *type, void *buf, size_t max, size_t *len)
{
	uint8_t hdr[FRAME_HDR];
	uint32_t n;

	if (read_full(fd, hdr, sizeof(hdr)))
		return -1;
	n = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
	if (n > max || n > FRAME_MAX)
		return -2;
	*type = hdr[4];
	*len = n;
	return n ? read_full(fd, buf, n) : 0;
}

static const struct {
	int e;
	const char *name;
} names[] = {
	{ EPERM, "EPERM" }, { ENOENT, "ENOENT" }, { ESRCH, "ESRCH" }, { EINTR, "EINTR" },
	{ EIO, "EIO" }, { E2BIG, "E2BIG" }, { ENOEXEC, "ENOEXEC" }, { EBADF, "EBADF" },
	{ ECHILD, "ECHILD" }, { EAGAIN, "EAGAIN" }, { ENOMEM, "ENOMEM" }, { EACCES, "EACCES" },
	{ EFAULT, "EFAULT" }, { EBUSY, "EBUSY" }, { EEXIST, "EEXIST" }, { EXDEV, "EXDEV" },
	{ ENOTDIR, "ENOTDIR" }, { EISDIR, "EISDIR" }, { EINVAL, "EINVAL" }, { EMFILE, "EMFILE" },
	{ ETXTBSY, "ETXTBSY" }, { EFBIG, "EFBIG" }, { ENOSPC, "ENOSPC" }, { EROFS, "EROFS" },
	{ EMLINK, "EMLINK" }, { EPIPE, "EPIPE" }, { ENAMETOOLONG, "ENAMETOOLONG" },
	{ ENOSYS, "ENOSYS" }, { ENOTEMPTY, "ENOTEMPTY" }, { ELOOP, "ELOOP" },
	{ EMSGSIZE, "EMSGSIZE" }, { EPROTO, "EPROTO" }, { ETIMEDOUT, "ETIMEDOUT" },
	{ EDQUOT, "EDQUOT" }, { ENOTSUP, "ENOTSUP" }, { ECANCELED, "ECANCELED" },
};

const char *errno_name(int e)
{
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].e == e)
			return names[i].name;
	return "EIO";
}

int errno_from_name(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i].name, name))
			return names[i].e;
	return EIO;
}

void splice_streams(int a, int b, char *buf, size_t len)
{
	int open_ab = 1, open_ba = 1;

	while (open_ab || open_ba) {
		struct pollfd p[2] = { { .fd = open_ab ? a : -1, .events = POLLIN },
				       { .fd = open_ba ? b : -1, .events = POLLIN } };
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents) {
			n = read(a, buf, len);
			if (n <= 0 || write_full(b, buf, (size_t)n)) {
				open_ab = 0;
				shutdown(b, SHUT_WR);
			}
		}
		if (p[1].revents) {
			n = read(b, buf, len);
			if (n <= 0 || write_full(a, buf, (size_t)n)) {
				open_ba = 0;
				shutdown(a, SHUT_WR);
			}
		}
	}
}
