/* The guest's ready notice (docs/vsock.md, "Ready notice"): the VMM
 * listens on vsock's host side for port API_NOTICE_PORT ("<uds>_1025");
 * guest-init connects there once its API listens and again after a
 * restore, writing READY_NOTICE, and keeps the connection; after the line
 * it says whether a snapshot would find a spare API worker waiting
 * (NOTICE_SETTLED, NOTICE_PENDING: one byte per change). Served by vm_run's
 * main thread (non-blocking), and by a snapshot's wait for the guest to
 * settle (notice_settle); nothing here is global. */
#ifndef VMM_NOTICE_H
#define VMM_NOTICE_H

#include <limits.h>
#include <poll.h>
#include <stddef.h>

#define NOTICE_POLLFDS 2

struct notice {
	int listen_fd;   /* -1: none */
	int conn_fd;     /* the guest's notice connection, -1: none */
	char path[PATH_MAX]; /* what listen_fd is bound to (any length), unlinked at close */
	char line[16];   /* what the connection sent so far */
	size_t len;      /* of line; sizeof(READY_NOTICE) - 1 once complete */
	char state;      /* NOTICE_SETTLED or _PENDING as last said, 0: not said */
	unsigned count;  /* notices taken */
};

/* Nothing open (notice_close is then a no-op). */
void notice_init(struct notice *n);
/* Listens on "<uds>_<port>". 0 or -errno (logged). */
int notice_open(struct notice *n, const char *uds, unsigned port)
	__attribute__((warn_unused_result));
void notice_close(struct notice *n);
/* Fills p[] (room for NOTICE_POLLFDS); the count. */
unsigned notice_pollfds(const struct notice *n, struct pollfd *p);
/* Handles what poll returned for notice_pollfds' p[0..nfds). Returns 1
 * when a complete notice came (the caller reports the guest ready), else 0.
 * A connection that sends anything else, or more, is closed. */
int notice_events(struct notice *n, const struct pollfd *p, unsigned nfds);
/* Takes bytes a connection sent (exposed for tests): READY_NOTICE, then
 * state bytes. 1 when these bytes completed the line, else 0; -1 if the
 * line can never be, or a byte after it is not a state. */
int notice_take(struct notice *n, const char *buf, size_t len);
/* Before a snapshot: takes what the guest sent, then waits while it says
 * NOTICE_PENDING, at most timeout_ms. 0 when settled (or it never said:
 * an older guest-init, no notice connection), -ETIMEDOUT. *ready counts
 * ready notices taken meanwhile (the caller marks them, as vm_run does). */
int notice_settle(struct notice *n, int timeout_ms, unsigned *ready);

#endif
