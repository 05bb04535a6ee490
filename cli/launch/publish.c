/* Published ports: see publish.h. */
#include "cli/launch/publish.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/wire/proto.h"
#include "vmm/base/log.h"
#include "vmm/seccomp.h"
#include "vmm/base/thread.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int parse_port(const char *s, size_t n, unsigned *port)
{
	char buf[8];
	char *end;
	unsigned long v;

	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	v = strtoul(buf, &end, 10);
	if (*end || v == 0 || v > 65535)
		return -EINVAL;
	*port = (unsigned)v;
	return 0;
}

int publish_parse(const char *s, struct publish *p)
{
	const char *last = strrchr(s, ':'), *first;
	unsigned host_port;
	char addr[64];

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->stop_fd = -1;
	p->addr.sin_family = AF_INET;
	p->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!last)
		return -EINVAL;
	if (strcmp(last + 1, "*") && parse_port(last + 1, strlen(last + 1), &p->guest_port))
		return -EINVAL; /* "*": each connection's own destination port (guest_port 0) */
	first = memrchr(s, ':', (size_t)(last - s));
	if (first) {
		if ((size_t)(first - s) >= sizeof(addr))
			return -EINVAL;
		memcpy(addr, s, (size_t)(first - s));
		addr[first - s] = '\0';
		if (inet_pton(AF_INET, addr, &p->addr.sin_addr) != 1)
			return -EINVAL;
		s = first + 1;
	}
	if (parse_port(s, (size_t)(last - s), &host_port))
		return -EINVAL;
	p->addr.sin_port = htons((uint16_t)host_port);
	return 0;
}

void publish_format(const struct publish *p, char *buf, size_t len)
{
	char a[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &p->addr.sin_addr, a, sizeof(a));
	if (p->guest_port)
		snprintf(buf, len, "%s:%u:%u", a, ntohs(p->addr.sin_port), p->guest_port);
	else
		snprintf(buf, len, "%s:%u:*", a, ntohs(p->addr.sin_port));
}

struct conn {
	struct publish *p;
	int fd;
};

/* The port a connection was first addressed to, before a NAT rule sent it
 * here (netfilter's SO_ORIGINAL_DST: REDIRECT in the nat table's OUTPUT
 * chain); a connection that was not redirected (or not tracked) gives its
 * own local port.
 * 0 when unknown. */
static unsigned conn_dest_port(int fd)
{
	struct sockaddr_in dst;
	socklen_t len = sizeof(dst);

	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &dst, &len) < 0 || len < sizeof(dst) ||
	    dst.sin_family != AF_INET) {
		/* not tracked (no conntrack, or never redirected): its own */
		len = sizeof(dst);
		if (getsockname(fd, (struct sockaddr *)&dst, &len) < 0 || dst.sin_family != AF_INET)
			return 0;
	}
	return ntohs(dst.sin_port);
}

/* One connection: open the guest side, then carry bytes both ways,
 * passing each end of stream on as a half-close. */
static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct publish *p = c->p;
	char fields[64], buf[65536];
	uint8_t type;
	size_t len;
	unsigned port = p->guest_port ? p->guest_port : conn_dest_port(c->fd);
	int g = -1, open_in = 1, open_out = 1;

	if (!port) {
		close(c->fd);
		goto out;
	}
	snprintf(fields, sizeof(fields), "\"op\":\"connect\",\"port\":%u", port);
	/* The API itself not answering yet (a sandbox just woken from
	 * standby: its connection waited in the keeper's backlog and the
	 * guest is still taking its restore): retried for up to 30 s. A guest
	 * port nobody listens on is an answer, and closes the client at once. */
	for (int tries = 0; (g = api_open(p->api, fields)) < 0 && tries < 150; tries++)
		usleep(200000);
	if (g < 0 || frame_read(g, &type, buf, sizeof(buf) - 1, &len) || type != F_RESULT) {
		/* Nothing listens there (or the API is down): the client gets
		 * a closed connection at once, not a hang. */
		if (g >= 0)
			close(g);
		close(c->fd);
		goto out;
	}
	while (open_in || open_out) {
		struct pollfd f[2] = { { .fd = open_in ? c->fd : -1, .events = POLLIN },
				       { .fd = open_out ? g : -1, .events = POLLIN } };
		ssize_t n;

		if (poll(f, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (f[0].revents) {
			n = read(c->fd, buf, sizeof(buf));
			if (n <= 0 || write_full(g, buf, (size_t)n)) {
				open_in = 0;
				shutdown(g, SHUT_WR);
			}
		}
		if (f[1].revents) {
			n = read(g, buf, sizeof(buf));
			if (n <= 0 || write_full(c->fd, buf, (size_t)n)) {
				open_out = 0;
				shutdown(c->fd, SHUT_WR);
			}
		}
	}
	close(g);
	close(c->fd);
out:
	atomic_fetch_sub(&p->conns, 1);
	free(c);
	return NULL;
}

static void *accept_thread(void *arg)
{
	struct publish *p = arg;
	pthread_attr_t attr;

	vmm_thread_name("publish"); /* before its filter; connections inherit the name */
	/* Its connection threads inherit the filter. */
	if (p->seccomp) {
		int r = sc_install(SC_PUBLISH);

		if (r) {
			log_err("--publish: cannot install the seccomp filter (%s): port not served",
				strerror(-r));
			return NULL;
		}
		sc_test_violate(SC_PUBLISH);
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The VMM's stack size, not RLIMIT_STACK's 8 MiB per connection
	 * (vmm/base/thread.h). */
	pthread_attr_setstacksize(&attr, VMM_THREAD_STACK);
	for (;;) {
		struct pollfd w[2] = { { .fd = p->fd, .events = POLLIN }, { .fd = p->stop_fd, .events = POLLIN } };
		struct conn *c;
		pthread_t t;
		int fd;

		if (poll(w, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (w[1].revents)
			break; /* publish_stop */
		fd = accept4(p->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
				if (errno != EINTR && errno != ECONNABORTED)
					usleep(100000); /* out of fds: wait, do not spin */
				continue;
			}
			break; /* the listening socket was shut down */
		}
		if (atomic_load(&p->conns) >= PUBLISH_MAX_CONNS || !(c = malloc(sizeof(*c)))) {
			close(fd);
			continue;
		}
		c->p = p;
		c->fd = fd;
		atomic_fetch_add(&p->conns, 1);
		if (pthread_create(&t, &attr, conn_thread, c)) {
			atomic_fetch_sub(&p->conns, 1);
			close(fd);
			free(c);
		}
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

int publish_start(struct publish *p, const struct sandbox_addr *api)
{
	sigset_t all, old;
	char what[96];
	int one = 1, r;

	snprintf(p->uds, sizeof(p->uds), "%s", api->uds);
	snprintf(p->token, sizeof(p->token), "%s", api->token ? api->token : "");
	p->api_copy = *api;
	p->api_copy.uds = p->uds;
	p->api_copy.token = api->token ? p->token : NULL;
	p->api = &p->api_copy;
	publish_format(p, what, sizeof(what));
	/* A sandbox woken from standby: its keeper's socket, which listened
	 * all along (cli/sandbox/sandbox_standby.h); connections wait in its backlog. */
	p->fd = standby_listen_fd(what);
	if (p->fd >= 0)
		goto serve;
	p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->fd < 0)
		return -errno;
	setsockopt(p->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* "*" (a pod's port-forward): bound even before the namespace's lo
	 * is up, so that a pod never fails to start for it */
	if (!p->guest_port)
		setsockopt(p->fd, SOL_IP, IP_FREEBIND, &one, sizeof(one));
	if (bind(p->fd, (struct sockaddr *)&p->addr, sizeof(p->addr)) < 0 || listen(p->fd, 64) < 0) {
		r = -errno;
		log_err("--publish %s: %s", what, strerror(errno));
		close(p->fd);
		p->fd = -1;
		return r;
	}
serve:
	p->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (p->stop_fd < 0) {
		r = -errno;
		close(p->fd);
		p->fd = -1;
		return r;
	}
	/* Process-directed signals stay the main thread's (vm_run takes them). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = vmm_thread_start(&p->thread, accept_thread, p, 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		close(p->stop_fd);
		p->stop_fd = -1;
		close(p->fd);
		p->fd = -1;
		return -r;
	}
	p->started = 1;
	return 0;
}

void publish_stop(struct publish *p)
{
	if (p->started) {
		/* Not shutdown() of the listening socket: a standby keeper
		 * holds the same socket (cli/sandbox/sandbox_standby.h) and must keep it
		 * listening while the sandbox sleeps. */
		uint64_t one = 1;

		if (write(p->stop_fd, &one, sizeof(one)) < 0) {
			/* an eventfd at its limit is already readable */
		}
		pthread_join(p->thread, NULL);
		p->started = 0;
	}
	if (p->stop_fd >= 0)
		close(p->stop_fd);
	p->stop_fd = -1;
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}
