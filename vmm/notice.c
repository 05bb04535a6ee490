/* The guest's ready notice (vmm/notice.h, docs/vsock.md). */
#include "vmm/notice.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vmm/wire/proto.h"
#include "vmm/base/log.h"
#include "vmm/base/unixsock.h"

void notice_init(struct notice *n)
{
	memset(n, 0, sizeof(*n));
	n->listen_fd = -1;
	n->conn_fd = -1;
}

int notice_open(struct notice *n, const char *uds, unsigned port)
{
	int w = snprintf(n->path, sizeof(n->path), "%s_%u", uds, port), fd;

	if (w < 0 || (size_t)w >= sizeof(n->path)) {
		n->path[0] = '\0';
		log_warn("vsock socket %s: too long for the ready notice's socket", uds);
		return -ENAMETOOLONG;
	}
	fd = unix_listen(n->path, 4, 1, "ready notice socket");
	if (fd < 0) {
		n->path[0] = '\0';
		return fd;
	}
	n->listen_fd = fd;
	return 0;
}

void notice_close(struct notice *n)
{
	if (n->conn_fd >= 0)
		close(n->conn_fd);
	if (n->listen_fd >= 0) {
		close(n->listen_fd);
		if (n->path[0])
			unlink(n->path);
	}
	notice_init(n);
}

unsigned notice_pollfds(const struct notice *n, struct pollfd *p)
{
	unsigned k = 0;

	if (n->listen_fd >= 0) {
		p[k].fd = n->listen_fd;
		p[k].events = POLLIN;
		p[k++].revents = 0;
	}
	if (n->conn_fd >= 0) {
		p[k].fd = n->conn_fd;
		p[k].events = POLLIN;
		p[k++].revents = 0;
	}
	return k;
}

int notice_take(struct notice *n, const char *buf, size_t len)
{
	static const char want[] = READY_NOTICE;
	size_t wl = sizeof(want) - 1, k = 0;
	int done = 0;

	if (n->len < wl) {
		k = len < wl - n->len ? len : wl - n->len;
		if (memcmp(want + n->len, buf, k))
			return -1;
		memcpy(n->line + n->len, buf, k);
		n->len += k;
		done = n->len == wl;
	}
	for (; k < len; k++) {
		if (buf[k] != NOTICE_SETTLED && buf[k] != NOTICE_PENDING)
			return -1;
		n->state = buf[k];
	}
	return done;
}

int notice_events(struct notice *n, const struct pollfd *p, unsigned nfds)
{
	int ready = 0;
	unsigned i;

	for (i = 0; i < nfds; i++) {
		if (!p[i].revents)
			continue;
		if (p[i].fd == n->listen_fd && n->listen_fd >= 0) {
			int c = accept4(n->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (c < 0)
				continue;
			/* One notice connection at a time: a new one means the
			 * guest's old one is gone (a restore reset it). */
			if (n->conn_fd >= 0)
				close(n->conn_fd);
			n->conn_fd = c;
			n->len = 0;
			n->state = 0;
		} else if (p[i].fd == n->conn_fd && n->conn_fd >= 0) {
			char buf[sizeof(n->line)];
			ssize_t r = read(n->conn_fd, buf, sizeof(buf));
			int t;

			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			t = r > 0 ? notice_take(n, buf, (size_t)r) : -1;
			if (t < 0 || (t == 0 && r == 0)) {
				/* Closed, or not a notice: dropped. The guest
				 * connects again after a restore. */
				close(n->conn_fd);
				n->conn_fd = -1;
				n->len = 0;
				n->state = 0;
			} else if (t == 1) {
				n->count++;
				ready = 1;
			}
		}
	}
	return ready;
}

int notice_settle(struct notice *n, int timeout_ms, unsigned *ready)
{
	struct timespec t0, t;
	int drained = 0;

	*ready = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p[NOTICE_POLLFDS];
		unsigned k = notice_pollfds(n, p);
		long left;
		int r;

		if (!k)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left < 0)
			left = 0;
		/* What is queued is taken first, whatever it says; then a wait
		 * only while the guest says PENDING. A guest that keeps
		 * writing is read until the time is up, no longer. */
		r = poll(p, k, drained && n->state == NOTICE_PENDING ? (int)left : 0);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			*ready += (unsigned)notice_events(n, p, k);
		else if (r == 0)
			drained = 1;
		if (drained && n->state != NOTICE_PENDING)
			return 0;
		if (!left)
			return n->state == NOTICE_PENDING ? -ETIMEDOUT : 0;
	}
}
