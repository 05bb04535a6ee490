/* Published ports (--publish [ADDR:]HOST_PORT:GUEST_PORT): the VMM listens
 * on a host TCP port and carries each connection over vsock to the guest
 * API's "connect" operation, which connects to 127.0.0.1:GUEST_PORT in the
 * sandbox (docs/cli.md). A sandbox without a network device can serve a
 * page to the host. */
#ifndef CLI_PUBLISH_H
#define CLI_PUBLISH_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cli/sandbox/sandbox.h"

#define PUBLISH_MAX 16
#define PUBLISH_MAX_CONNS 64 /* concurrent connections per published port */

struct publish {
	struct sockaddr_in addr; /* host side; 127.0.0.1 unless told otherwise */
	unsigned guest_port;      /* 0 ("*"): each connection's destination port */
	int fd;
	int stop_fd;             /* eventfd: publish_stop wakes the accept thread */
	pthread_t thread;
	int started;
	struct sandbox_addr api_copy; /* its strings below: no pointer into the caller */
	char uds[PATH_MAX];
	char token[160];
	const struct sandbox_addr *api;
	_Atomic unsigned conns;
	int seccomp; /* the threads run under SC_PUBLISH (vmm/seccomp.h) */
};

/* Parses "[ADDR:]HOST_PORT:GUEST_PORT"; GUEST_PORT "*" carries each
 * connection to the port it was first addressed to (one that a NAT rule
 * redirected to HOST_PORT: vmm-oci's pod port-forward). 0 or -EINVAL. */
int publish_parse(const char *s, struct publish *p);
/* "127.0.0.1:8080:80" */
void publish_format(const struct publish *p, char *buf, size_t len);
/* Binds and listens (a clear error if the port is taken), then serves on
 * a thread of its own with every signal blocked. 0 or -errno. */
int publish_start(struct publish *p, const struct sandbox_addr *api) __attribute__((warn_unused_result));
void publish_stop(struct publish *p);

#endif
