/* The guest's ready notice (docs/vsock.md, "Ready notice"): the VMM
 * listens on vsock's host side for port API_NOTICE_PORT ("<uds>_1025");
 * guest-init connects there once its API listens and again after a
 * restore, writing READY_NOTICE, and keeps the connection. Served by
 * vm_run's main thread (non-blocking); nothing here is global. */
#ifndef VMM_NOTICE_H
#define VMM_NOTICE_H

#include <poll.h>
#include <stddef.h>

#define NOTICE_POLLFDS 2

struct notice {
	int listen_fd;   /* -1: none */
	int conn_fd;     /* the guest's notice connection, -1: none */
	char path[108];  /* what listen_fd is bound to, unlinked at close */
	char line[16];   /* what the connection sent so far */
	size_t len;
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
/* Takes bytes a connection sent (exposed for tests): 1 when `line` now
 * holds exactly READY_NOTICE, 0 for more to come, -1 if it can never be. */
int notice_take(struct notice *n, const char *buf, size_t len);

#endif
