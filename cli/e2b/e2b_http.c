/* The gateway's HTTP server (`vmm e2b serve`, docs/e2b.md): a thread per
 * connection (at most E2B_MAX_CONNS; past that 503), HTTP/1.1 keep-alive,
 * requests read with cli/e2b/e2b_req.c, answers whole (Content-Length)
 * or, for Connect's server streams and file downloads, chunked. A request
 * carrying E2b-Sandbox-Id is envd's (the SDKs send every in-sandbox call
 * there once E2B_SANDBOX_URL is set: e2b_envd), any other the control
 * plane's (e2b_control). A thread reaps sandboxes past their timeout. */
#include "cli/e2b/e2b_priv.h"
#include "cli/util/util.h"
#include "vmm/base/http.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define E2B_MAX_CONNS 128
#define E2B_IDLE_MS 60000     /* a keep-alive connection idle this long is closed */
#define E2B_REQUEST_MS 120000 /* a request (a large upload) must arrive within this */
#define E2B_SEND_S 30         /* a client that reads nothing for this long is dropped */

static int write_all(struct e2b_conn *c, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t k = send(c->fd, p, len, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EPIPE;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

int e2b_send(struct e2b_conn *c, int status, const char *type, const void *body, size_t len, const char *extra)
{
	char head[1024];
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nServer: vmm\r\n%s%s%sContent-Length: %zu\r\n%s%s\r\n",
			 status, http_reason(status), type ? "Content-Type: " : "", type ? type : "", type ? "\r\n" : "",
			 len, extra ? extra : "", c->keep_alive ? "" : "Connection: close\r\n");

	if (n < 0 || (size_t)n >= sizeof(head))
		return -E2BIG;
	if (write_all(c, head, (size_t)n) || (len && write_all(c, body, len)))
		return -EPIPE;
	return 0;
}

int e2b_send_error(struct e2b_conn *c, int status, const char *fmt, ...)
{
	char msg[1024], body[2048];
	struct json_writer w;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* openapi.yml's Error: {"code":HTTP status,"message":...} */
	jw_init(&w, body, sizeof(body));
	jw_obj(&w);
	jw_key(&w, "code");
	jw_int(&w, status);
	jw_key(&w, "message");
	jw_text(&w, msg, strlen(msg));
	jw_obj_end(&w);
	if (!jw_done(&w))
		return e2b_send(c, status, NULL, NULL, 0, NULL);
	return e2b_send(c, status, "application/json", body, w.len, NULL);
}

int e2b_send_json(struct e2b_conn *c, int status, struct json_writer *w)
{
	if (!jw_done(w))
		return e2b_send_error(c, 500, "the answer is too large");
	return e2b_send(c, status, "application/json", w->buf, w->len, NULL);
}

int e2b_stream_begin(struct e2b_conn *c, int status, const char *type)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nServer: vmm\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n%s\r\n",
			 status, http_reason(status), type, c->keep_alive ? "" : "Connection: close\r\n");

	c->streaming = 1;
	return write_all(c, head, (size_t)n);
}

int e2b_stream_write(struct e2b_conn *c, const void *data, size_t len)
{
	char hdr[24];
	size_t n = e2b_chunk_header(hdr, len);

	if (!len)
		return 0;
	if (write_all(c, hdr, n) || write_all(c, data, len) || write_all(c, "\r\n", 2))
		return -EPIPE;
	return 0;
}

int e2b_stream_end(struct e2b_conn *c)
{
	c->streaming = 0;
	return write_all(c, "0\r\n\r\n", 5);
}

int e2b_client_gone(const struct e2b_conn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };

	return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR));
}

/* One request: routed, answered. 0 to go on, < 0 to close. */
static int serve_one(struct e2b_conn *c, const struct e2b_req *r)
{
	char sid[128];
	int k;

	c->keep_alive = r->keep_alive;
	k = e2b_req_header(r, "E2b-Sandbox-Id", sid, sizeof(sid));
	if (k == 0)
		k = e2b_envd(c, r);
	else
		k = e2b_control(c, r);
	return k ? k : (c->keep_alive ? 0 : -1);
}

/* Requests on one connection until it closes, idles or fails. */
static void serve_conn(struct e2b_conn *c)
{
	size_t cap = 65536, len = 0, max = HTTP_MAX_HEADER + 2 * (size_t)E2B_BODY_MAX;
	char *buf = malloc(cap);
	long long deadline = cli_mono_ms() + E2B_IDLE_MS;

	while (buf) {
		struct e2b_req r = { 0 }; /* with nothing read yet, no 100 Continue is due */
		long n = len ? e2b_req_parse(buf, len, E2B_BODY_MAX, &r) : 0;
		struct pollfd p[2] = { { .fd = c->fd, .events = POLLIN }, { .fd = c->srv->stop[0], .events = POLLIN } };
		long long left;
		ssize_t k;

		if (n < 0) {
			c->keep_alive = 0;
			e2b_send_error(c, r.status, "%s", r.why ? r.why : "a malformed request");
			break;
		}
		if (n > 0) {
			if (serve_one(c, &r))
				break;
			memmove(buf, buf + n, len - (size_t)n);
			len -= (size_t)n;
			deadline = cli_mono_ms() + (len ? E2B_REQUEST_MS : E2B_IDLE_MS);
			continue;
		}
		if (r.expect_continue && write_all(c, "HTTP/1.1 100 Continue\r\n\r\n", 25))
			break;
		if (len == cap) {
			char *nb;

			if (cap >= max)
				break;
			cap = cap * 4 > max ? max : cap * 4;
			nb = realloc(buf, cap);
			if (!nb)
				break;
			buf = nb;
		}
		left = deadline - cli_mono_ms();
		if (left <= 0 || poll(p, 2, (int)left) <= 0 || p[1].revents)
			break;
		k = recv(c->fd, buf + len, cap - len, 0);
		if (k <= 0)
			break;
		if (!len)
			deadline = cli_mono_ms() + E2B_REQUEST_MS;
		len += (size_t)k;
	}
	free(buf);
}

static void *conn_main(void *arg)
{
	struct e2b_conn *c = arg;
	struct e2b_server *srv = c->srv;

	serve_conn(c);
	close(c->fd);
	free(c);
	pthread_mutex_lock(&srv->lock);
	srv->conns--;
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

static void conn_start(struct e2b_server *srv, int fd, const pthread_attr_t *attr)
{
	struct timeval tv = { .tv_sec = E2B_SEND_S };
	struct e2b_conn *c;
	pthread_t th;
	int busy;

	pthread_mutex_lock(&srv->lock);
	busy = srv->conns >= E2B_MAX_CONNS;
	if (!busy)
		srv->conns++;
	pthread_mutex_unlock(&srv->lock);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c = busy ? NULL : calloc(1, sizeof(*c));
	if (!c) {
		struct e2b_conn tmp = { .srv = srv, .fd = fd };

		e2b_send_error(&tmp, 503, "the gateway serves %u connections at once", E2B_MAX_CONNS);
		close(fd);
		if (!busy) {
			pthread_mutex_lock(&srv->lock);
			srv->conns--;
			pthread_mutex_unlock(&srv->lock);
		}
		return;
	}
	c->srv = srv;
	c->fd = fd;
	if (pthread_create(&th, attr, conn_main, c)) {
		close(fd);
		free(c);
		pthread_mutex_lock(&srv->lock);
		srv->conns--;
		pthread_mutex_unlock(&srv->lock);
	}
}

/* Once a second: sandboxes past their end (e2b_reap). */
static void *reaper_main(void *arg)
{
	struct e2b_server *srv = arg;

	for (;;) {
		struct pollfd p = { .fd = srv->stop[0], .events = POLLIN };

		if (poll(&p, 1, 1000) != 0)
			return NULL;
		e2b_reap(srv);
	}
}

int e2b_serve(const struct e2b_serve_opts *o)
{
	struct e2b_server srv = { .o = o, .stop = { -1, -1 } };
	char addr[128], root[PATH_MAX];
	pthread_attr_t attr;
	pthread_t reaper;
	int lfd, sfd = -1, r = 0, have_reaper = 0;

	if ((r = sandbox_root(root, sizeof(root))))
		return r;
	snprintf(srv.keys_dir, sizeof(srv.keys_dir), "%s/.e2b", root);
	lfd = cli_listen_tcp("vmm e2b serve", o->listen, o->allow_remote);
	if (lfd < 0)
		return lfd;
	pthread_mutex_init(&srv.lock, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 4u << 20);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pipe2(srv.stop, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	/* before the first thread starts: every thread inherits the mask */
	sfd = cli_stop_signals();
	if (pthread_create(&reaper, NULL, reaper_main, &srv) == 0)
		have_reaper = 1;
	cli_listen_addr(lfd, addr, sizeof(addr));
	/* one line (the verb's stderr) that scripts (and the tests) can wait for */
	if (o->notice) {
		fprintf(o->notice, "vmm e2b: serving the E2B API on http://%s (E2B_API_URL and E2B_SANDBOX_URL)\n",
			addr);
		fflush(o->notice);
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = lfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		int c;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (p[1].revents)
			break; /* SIGINT/SIGTERM */
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0)
			conn_start(&srv, c, &attr);
	}
	/* Connections end at their next wait; the process exits after. */
	if (write(srv.stop[1], "x", 1) < 0)
		r = r ? r : -errno;
	if (have_reaper)
		pthread_join(reaper, NULL);
	e2b_watchers_free(&srv);
out:
	if (sfd >= 0)
		close(sfd);
	close(lfd);
	pthread_attr_destroy(&attr);
	return r;
}
