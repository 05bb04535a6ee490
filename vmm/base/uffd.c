/* Guest memory served by a page-fault handler (vmm/base/uffd.h). */
#include "vmm/base/uffd.h"
#include "vmm/base/log.h"
#include "vmm/base/unixsock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef USERFAULTFD_IOC_NEW /* linux/userfaultfd.h before 6.1 */
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

_Static_assert(GM_PAGE_SIZE == 4096, "the handshake's page_size is the host's base page");

/* Firecracker's chain of error names down to the Uffd backend's. */
#define FC_UFFD_FAULT "Load snapshot error: Failed to restore from snapshot: Failed to load guest memory: " \
		      "Error creating guest memory from uffd: "

void uffd_conn_init(struct uffd_conn *c)
{
	c->uffd = -1;
	c->sock = -1;
}

void uffd_conn_close(struct uffd_conn *c)
{
	if (c->sock >= 0)
		close(c->sock);
	if (c->uffd >= 0)
		close(c->uffd);
	uffd_conn_init(c);
}

void uffd_backend_init(struct uffd_backend *b)
{
	memset(&b->gm, 0, sizeof(b->gm));
	b->gm.fd = -1;
	uffd_conn_init(&b->conn);
}

void uffd_backend_close(struct uffd_backend *b)
{
	if (b->gm.map)
		gm_destroy(&b->gm);
	uffd_conn_close(&b->conn);
	uffd_backend_init(b);
}

int uffd_mappings_json(const struct gm *gm, char *out, size_t cap)
{
	size_t len = 0;
	unsigned i;
	int n;

	if (cap < 3)
		return -ENOSPC;
	out[len++] = '[';
	for (i = 0; i < gm->nr; i++) {
		/* Field order and names as Firecracker's serde writes
		 * GuestRegionUffdMapping; page_size_kib (deprecated) is in
		 * bytes too. */
		n = snprintf(out + len, cap - len,
			     "%s{\"base_host_virt_addr\":%llu,\"size\":%llu,\"offset\":%llu,"
			     "\"page_size\":%llu,\"page_size_kib\":%llu}",
			     i ? "," : "", (unsigned long long)(uintptr_t)gm->r[i].host,
			     (unsigned long long)gm->r[i].size, (unsigned long long)gm->r[i].file_off,
			     GM_PAGE_SIZE, GM_PAGE_SIZE);
		if (n < 0 || (size_t)n >= cap - len)
			return -ENOSPC;
		len += (size_t)n;
	}
	if (cap - len < 2)
		return -ENOSPC;
	out[len++] = ']';
	out[len] = '\0';
	return (int)len;
}

int uffd_create(void)
{
	/* Non-blocking and close-on-exec, as Firecracker's; kernel faults
	 * too (no UFFD_USER_MODE_ONLY): KVM touches guest memory. */
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_EVENT_REMOVE };
	int fd, dev, e;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		/* vm.unprivileged_userfaultfd=0 refuses the call to a user
		 * without CAP_SYS_PTRACE; /dev/userfaultfd (Linux 6.1) is
		 * governed by its file mode instead. */
		e = -errno;
		dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev < 0)
			return errno == ENOENT ? e : -errno;
		fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		e = fd < 0 ? -errno : 0;
		close(dev);
		if (fd < 0)
			return e;
	}
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int uffd_send_handshake(int sock, const char *msg, size_t len, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *c;
	ssize_t n;

	memset(&ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* One message, a few hundred bytes: a stream socket takes it whole
	 * or not at all; a handler reads it with one recvmsg. */
	return (size_t)n == len ? 0 : -EIO;
}

static int uffd_connect(const char *path)
{
	return unix_connect(path, 0); /* any length (vmm/base/unixsock.h) */
}

/* "<what>: <strerror> (os error N)", as Rust prints an io::Error. */
static int fault(char *why, size_t len, const char *what, int e)
{
	if (e == -ENAMETOOLONG && strstr(what, "UDS"))
		snprintf(why, len, FC_UFFD_FAULT "%s: path must be shorter than SUN_LEN", what);
	else
		snprintf(why, len, FC_UFFD_FAULT "%s: %s (os error %d)", what, strerror(-e), -e);
	return e;
}

int uffd_backend_open(struct uffd_backend *b, const char *sock_path, const struct gm_region *regions,
		      unsigned nr, char *why, size_t why_len)
{
	char msg[64 + GM_MAX_REGIONS * 160];
	unsigned i;
	int r, len;

	uffd_backend_init(b);
	why[0] = '\0';
	if ((r = gm_create_anon(&b->gm, regions, nr))) {
		fault(why, why_len, "Failed to restore guest memory", r);
		goto err;
	}
	if ((r = uffd_create()) < 0) {
		/* Firecracker's words; then what to do about it. */
		fault(why, why_len, "Failed to UFFD object", r);
		if (r == -EPERM || r == -EACCES)
			snprintf(why + strlen(why), why_len - strlen(why),
				 " (userfaultfd(2) needs vm.unprivileged_userfaultfd=1 or CAP_SYS_PTRACE; "
				 "/dev/userfaultfd needs read-write access)");
		goto err;
	}
	b->conn.uffd = r;
	for (i = 0; i < b->gm.nr; i++) {
		struct uffdio_register reg = {
			.range = { .start = (uintptr_t)b->gm.r[i].host, .len = b->gm.r[i].size },
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};

		if (ioctl(b->conn.uffd, UFFDIO_REGISTER, &reg) < 0) {
			r = fault(why, why_len, "Failed to register memory address range with the userfaultfd object",
				  -errno);
			goto err;
		}
	}
	len = uffd_mappings_json(&b->gm, msg, sizeof(msg));
	if (len < 0) {
		r = fault(why, why_len, "Failed to restore guest memory", len);
		goto err;
	}
	if ((r = uffd_connect(sock_path)) < 0) {
		fault(why, why_len, "Failed to connect to UDS Unix stream", r);
		goto err;
	}
	b->conn.sock = r;
	/* Firecracker's words, its typo included: clients match on them. */
	if ((r = uffd_send_handshake(b->conn.sock, msg, (size_t)len, b->conn.uffd))) {
		fault(why, why_len, "Failed to sends file descriptor", r);
		goto err;
	}
	log_info("guest memory (%llu MiB, %u regions) handed to the page-fault handler at %s",
		 (unsigned long long)(b->gm.total >> 20), b->gm.nr, sock_path);
	return 0;

err:
	log_err("Uffd memory backend %s: %s", sock_path, why);
	uffd_backend_close(b);
	return r;
}
