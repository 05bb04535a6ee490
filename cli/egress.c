/* The egress proxy's server: see egress.h and docs/egress.md. */
#define _GNU_SOURCE
#include "egress.h"
#include "../guest-init/json.h"
#include "../guest-init/proto.h"
#include "../vmm/log.h"
#include "../vmm/seccomp.h"
#include "../vmm/unixsock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLICY_MAX (1 << 20)
#define CLIENT_IDLE_MS 60000

static char *read_small_file(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t n = 0;
	ssize_t k;

	if (fd < 0)
		return NULL;
	buf = malloc(max + 1);
	if (!buf)
		goto fail;
	while ((k = read(fd, buf + n, max - n)) > 0 && n + (size_t)k <= max) {
		n += (size_t)k;
		if (n == max)
			goto fail; /* too big */
	}
	if (k < 0)
		goto fail;
	close(fd);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

static char *cred_env(const char *name, void *ctx)
{
	const char *v = getenv(name);

	(void)ctx;
	return v ? strdup(v) : NULL;
}

static char *cred_file(const char *path, void *ctx)
{
	(void)ctx;
	return read_small_file(path, EG_MAX_CRED, NULL);
}

int egress_load(struct egress *e, const char *policy_file, const char *sandbox)
{
	const struct eg_cred_source src = { .env = cred_env, .file = cred_file };
	char why[256] = "";
	unsigned i;
	size_t len;
	char *text;
	int r;

	memset(e, 0, sizeof(*e));
	e->fd = e->log_fd = -1;
	snprintf(e->sandbox, sizeof(e->sandbox), "%s", sandbox);
	text = read_small_file(policy_file, POLICY_MAX, &len);
	if (!text) {
		log_err("--egress-policy %s: cannot read it (%s)", policy_file, errno ? strerror(errno) : "too big");
		return -EINVAL;
	}
	r = eg_policy_parse(text, len, &src, &e->policy, why, sizeof(why));
	free(text);
	if (r) {
		log_err("--egress-policy %s: %s", policy_file, why);
		return r;
	}
	for (i = 0; i < e->policy.nr_rules; i++) {
		const struct eg_rule *x = &e->policy.rules[i];
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

		e->tls[i] = ctx;
		if (!ctx) {
			r = -ENOMEM;
			goto err_tls;
		}
		SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		if (x->ca_file[0] ? SSL_CTX_load_verify_locations(ctx, x->ca_file, NULL) != 1 :
				    SSL_CTX_set_default_verify_paths(ctx) != 1) {
			log_err("--egress-policy %s: allow[%u]: cannot load the CA certificates%s%s", policy_file, i,
				x->ca_file[0] ? " from " : "", x->ca_file);
			r = -EINVAL;
			goto err_tls;
		}
	}
	log_info("egress policy %s: %u rule%s", policy_file, e->policy.nr_rules, e->policy.nr_rules == 1 ? "" : "s");
	return 0;
err_tls:
	for (i = 0; i < EG_MAX_RULES; i++)
		SSL_CTX_free(e->tls[i]);
	memset(e->tls, 0, sizeof(e->tls));
	eg_policy_free(&e->policy);
	return r;
}

/* ---- one connection ------------------------------------------------------ */

struct conn {
	struct egress *e;
	int fd;                  /* the guest's side */
	char buf[EG_MAX_HEAD];   /* the request head, and what followed it */
	size_t len;
	struct eg_request req;
	const struct eg_rule *rule;
	int up;                  /* upstream socket */
	SSL *ssl;
	int status;
	const char *reason;
	uint64_t bytes_up, bytes_down, t0_ns;
};

static void log_request(struct conn *c)
{
	struct egress *e = c->e;
	char line[2048], ts[96], path[512];
	struct json_writer w;
	struct timespec now;
	struct tm tm;
	size_t pl = 0;

	if (e->log_fd < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);
	/* The path without its query (which may carry the guest's own
	 * secrets), cut to fit. */
	if (c->req.path) {
		const char *q = memchr(c->req.path, '?', c->req.path_len);

		pl = q ? (size_t)(q - c->req.path) : c->req.path_len;
		if (pl >= sizeof(path))
			pl = sizeof(path) - 1;
		memcpy(path, c->req.path, pl);
	}
	path[pl] = '\0';
	jw_init(&w, line, sizeof(line) - 1);
	jw_obj(&w);
	jw_key(&w, "time");
	jw_str(&w, ts);
	jw_key(&w, "sandbox");
	jw_str(&w, e->sandbox);
	jw_key(&w, "method");
	jw_str(&w, c->req.method);
	jw_key(&w, "host");
	jw_str(&w, c->req.host);
	jw_key(&w, "port");
	jw_int(&w, c->rule ? c->rule->port : c->req.port);
	jw_key(&w, "path");
	jw_str(&w, path);
	jw_key(&w, "status");
	jw_int(&w, c->status);
	jw_key(&w, "bytes_up");
	jw_int(&w, (int64_t)c->bytes_up);
	jw_key(&w, "bytes_down");
	jw_int(&w, (int64_t)c->bytes_down);
	jw_key(&w, "duration_ms");
	jw_int(&w, (int64_t)((log_now_ns() - c->t0_ns) / 1000000));
	jw_key(&w, "injected");
	jw_bool(&w, c->rule && c->rule->cred && !c->req.connect && c->status);
	if (c->reason) {
		jw_key(&w, "reason");
		jw_str(&w, c->reason);
	}
	jw_obj_end(&w);
	if (!jw_done(&w))
		return;
	strcat(line, "\n");
	/* One write per line on an O_APPEND file: lines do not interleave. */
	if (write(e->log_fd, line, strlen(line)) < 0)
		log_warn("egress.log: %s", strerror(errno));
}

static void reply(struct conn *c, int status, const char *reason)
{
	static const struct { int code; const char *text; } texts[] = {
		{ 400, "Bad Request" }, { 403, "Forbidden" }, { 431, "Request Header Fields Too Large" },
		{ 502, "Bad Gateway" }, { 503, "Service Unavailable" }, { 504, "Gateway Timeout" },
	};
	const char *text = "Error";
	char msg[512];
	size_t i;
	int n;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (texts[i].code == status)
			text = texts[i].text;
	c->status = status;
	c->reason = reason;
	n = snprintf(msg, sizeof(msg),
		     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\nX-Vmm-Egress: %s\r\n\r\nvmm egress: %s\n",
		     status, text, strlen(reason) + 13, reason, reason);
	if (n > 0 && (size_t)n < sizeof(msg) && !write_full(c->fd, msg, (size_t)n))
		c->bytes_down += (uint64_t)n;
}

/* Connects to host:port (or the rule's override) within timeout_ms.
 * The socket or -errno (-ETIMEDOUT, -EHOSTUNREACH, ...). */
static int dial(const struct eg_rule *x, const char *host, unsigned port)
{
	char h[EG_MAX_HOST + 8], p[8];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL, *a;
	struct timeval tv = { .tv_sec = x->timeout_ms / 1000, .tv_usec = (x->timeout_ms % 1000) * 1000 };
	int fd = -1, r = -EHOSTUNREACH;

	if (x->connect[0]) {
		char *colon;

		snprintf(h, sizeof(h), "%s", x->connect);
		colon = strrchr(h, ':');
		*colon = '\0';
		snprintf(p, sizeof(p), "%s", colon + 1);
	} else {
		snprintf(h, sizeof(h), "%s", host);
		snprintf(p, sizeof(p), "%u", port);
	}
	if (getaddrinfo(h, p, &hints, &res))
		return -EHOSTUNREACH;
	for (a = res; a; a = a->ai_next) {
		struct pollfd pf;
		int err = 0;
		socklen_t el = sizeof(err);

		fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
			r = -errno;
			goto next;
		}
		pf.fd = fd;
		pf.events = POLLOUT;
		if (poll(&pf, 1, (int)x->timeout_ms) != 1) {
			r = -ETIMEDOUT;
			goto next;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
			r = -(err ? err : errno);
			goto next;
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		freeaddrinfo(res);
		return fd;
next:
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return r;
}

static int dial_failed(struct conn *c, int r)
{
	reply(c, r == -ETIMEDOUT ? 504 : 502, r == -ETIMEDOUT ? "upstream connect timed out" :
				      r == -EHOSTUNREACH ? "upstream not found or unreachable" :
							   "upstream refused the connection");
	return r;
}

/* CONNECT: a byte pipe to the upstream, nothing injected or seen. */
static void tunnel(struct conn *c)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	char buf[16384];
	size_t extra = c->len - c->req.head_len;
	int open_in = 1, open_out = 1;

	c->up = dial(c->rule, c->req.host, c->req.port);
	if (c->up < 0) {
		dial_failed(c, c->up);
		return;
	}
	if (write_full(c->fd, ok, sizeof(ok) - 1))
		return;
	c->status = 200;
	if (extra && write_full(c->up, c->buf + c->req.head_len, extra))
		return;
	c->bytes_up += extra;
	while (open_in || open_out) {
		struct pollfd f[2] = { { .fd = open_in ? c->fd : -1, .events = POLLIN },
				       { .fd = open_out ? c->up : -1, .events = POLLIN } };
		ssize_t n;
		int k = poll(f, 2, CLIENT_IDLE_MS * 5);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break; /* idle for 5 minutes, or poll failed */
		if (f[0].revents) {
			n = read(c->fd, buf, sizeof(buf));
			if (n <= 0 || write_full(c->up, buf, (size_t)n)) {
				open_in = 0;
				shutdown(c->up, SHUT_WR);
			} else {
				c->bytes_up += (uint64_t)n;
			}
		}
		if (f[1].revents) {
			n = read(c->up, buf, sizeof(buf));
			if (n <= 0 || write_full(c->fd, buf, (size_t)n)) {
				open_out = 0;
				shutdown(c->fd, SHUT_WR);
			} else {
				c->bytes_down += (uint64_t)n;
			}
		}
	}
}

static int ssl_write_all(SSL *ssl, const char *p, size_t n)
{
	while (n) {
		int k = SSL_write(ssl, p, n > (1u << 30) ? 1 << 30 : (int)n);

		if (k <= 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Sends a piece of the request body up, framed: returns 1 once the body
 * ended, 0 for more, <0 on a broken body (400) or upstream error. */
static int body_piece(struct conn *c, struct eg_chunked *ck, int64_t *left, const char *p, size_t n)
{
	int done = 0;

	if (c->req.chunked) {
		long k = eg_chunked_feed(ck, p, n, &done);

		if (k < 0)
			return -EINVAL;
		n = (size_t)k;
	} else {
		if ((int64_t)n > *left)
			n = (size_t)*left;
		*left -= (int64_t)n;
		done = *left == 0;
	}
	if (n && ssl_write_all(c->ssl, p, n))
		return -EIO;
	c->bytes_up += n;
	return done;
}

/* A plain request: TLS to the upstream, the head rewritten with the
 * credential, the body streamed up, the response streamed back. */
static void forward(struct conn *c, SSL_CTX *ctx)
{
	char head[EG_MAX_HEAD + EG_MAX_CRED + 256], buf[16384];
	struct eg_chunked ck;
	int64_t left = c->req.content_length > 0 ? c->req.content_length : 0;
	long hl = eg_upstream_head(&c->req, c->rule, head, sizeof(head));
	int r, got = 0;

	if (hl < 0) {
		reply(c, 431, "request head too large");
		return;
	}
	c->up = dial(c->rule, c->req.host, c->rule->port);
	if (c->up < 0) {
		dial_failed(c, c->up);
		goto out;
	}
	errno = 0;
	c->ssl = SSL_new(ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->up) != 1 || SSL_set_tlsext_host_name(c->ssl, c->req.host) != 1 ||
	    SSL_set1_host(c->ssl, c->req.host) != 1) {
		reply(c, 502, "TLS setup failed");
		goto out;
	}
	if (SSL_connect(c->ssl) != 1) {
		long v = SSL_get_verify_result(c->ssl);

		if (errno == EAGAIN || errno == EWOULDBLOCK)
			reply(c, 504, "TLS handshake with the upstream timed out");
		else
			reply(c, 502, v != X509_V_OK ? "upstream certificate not trusted" :
						       "TLS handshake with the upstream failed");
		goto out;
	}
	if (ssl_write_all(c->ssl, head, (size_t)hl)) {
		reply(c, 502, "upstream closed the connection");
		goto out;
	}
	explicit_bzero(head, (size_t)hl);
	/* The body: what came with the head, then the rest as it arrives. */
	eg_chunked_init(&ck);
	r = (c->req.chunked || left) ? 0 : 1;
	/* Expect: 100-continue (curl's large uploads): the upstream is there
	 * and has the head, so the body may come; the upstream never sees
	 * the Expect, so it sends no 100 of its own. */
	if (!r && c->req.expect_continue && c->len == c->req.head_len) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

		if (!write_full(c->fd, cont, sizeof(cont) - 1))
			c->bytes_down += sizeof(cont) - 1;
	}
	if (!r && c->len > c->req.head_len)
		r = body_piece(c, &ck, &left, c->buf + c->req.head_len, c->len - c->req.head_len);
	while (r == 0) {
		struct pollfd pf = { .fd = c->fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pf, 1, CLIENT_IDLE_MS) != 1) {
			r = -ETIMEDOUT;
			break;
		}
		n = read(c->fd, buf, sizeof(buf));
		if (n <= 0) {
			r = -EPIPE;
			break;
		}
		r = body_piece(c, &ck, &left, buf, (size_t)n);
	}
	if (r == -EINVAL) {
		reply(c, 400, "broken chunked body");
		goto out;
	}
	if (r == -ETIMEDOUT || r == -EPIPE) {
		c->status = 0;
		c->reason = r == -EPIPE ? "the sandbox closed before the body ended" : "the sandbox stopped sending the body";
		goto out;
	}
	/* r == -EIO: the upstream may have answered early (say, 413); read it. */
	for (;;) {
		int n = SSL_read(c->ssl, buf, sizeof(buf));

		if (n <= 0) {
			int e = SSL_get_error(c->ssl, n);

			if (!got) {
				int timed_out = e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK);

				reply(c, timed_out ? 504 : 502,
				      timed_out ? "upstream did not answer in time" : "upstream closed without an answer");
			}
			break;
		}
		if (!got)
			c->status = eg_response_status(buf, (size_t)n);
		got = 1;
		if (write_full(c->fd, buf, (size_t)n))
			break;
		c->bytes_down += (uint64_t)n;
	}
out:
	explicit_bzero(head, sizeof(head));
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct egress *e = c->e;
	const char *why = "";
	int r = -EAGAIN;

	c->t0_ns = log_now_ns();
	c->up = -1;
	while (r == -EAGAIN) {
		struct pollfd pf = { .fd = c->fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pf, 1, CLIENT_IDLE_MS) != 1)
			goto out; /* idle: nothing to log */
		n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
		if (n <= 0)
			goto out;
		c->len += (size_t)n;
		r = eg_parse_request(c->buf, c->len, &c->req, &why);
	}
	if (r) {
		reply(c, r == -E2BIG ? 431 : 400, why);
		memset(&c->req, 0, sizeof(c->req));
		snprintf(c->req.method, sizeof(c->req.method), "-");
		goto logit;
	}
	c->rule = eg_policy_match(&e->policy, &c->req, &why);
	if (!c->rule) {
		reply(c, 403, why);
		goto logit;
	}
	if (c->req.connect)
		tunnel(c);
	else
		forward(c, e->tls[c->rule - e->policy.rules]);
logit:
	log_request(c);
out:
	if (c->ssl) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	if (c->up >= 0)
		close(c->up);
	close(c->fd);
	explicit_bzero(c, sizeof(*c));
	free(c);
	atomic_fetch_sub(&e->conns, 1);
	return NULL;
}

static void *accept_thread(void *arg)
{
	struct egress *e = arg;
	pthread_attr_t attr;

	/* Before the first accept; connection threads inherit the filter. */
	if (e->seccomp) {
		int r = sc_install(SC_EGRESS);

		if (r) {
			log_err("egress: cannot install the seccomp filter (%s): the proxy does not serve",
				strerror(-r));
			return NULL;
		}
		sc_test_violate(SC_EGRESS);
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		struct pollfd pf = { .fd = e->fd, .events = POLLIN };
		struct conn *c;
		pthread_t t;
		int fd;

		if (poll(&pf, 1, -1) < 0 && errno != EINTR)
			break;
		if (pf.revents & (POLLHUP | POLLERR | POLLNVAL))
			break; /* shut down */
		fd = accept4(e->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				usleep(100000); /* out of fds: wait, do not spin */
				continue;
			}
			break;
		}
		if (atomic_load(&e->conns) >= EGRESS_MAX_CONNS || !(c = calloc(1, sizeof(*c)))) {
			static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
						   "Connection: close\r\n\r\n";

			if (write(fd, busy, sizeof(busy) - 1) < 0) {
				/* it is going away anyway */
			}
			close(fd);
			continue;
		}
		c->e = e;
		c->fd = fd;
		atomic_fetch_add(&e->conns, 1);
		if (pthread_create(&t, &attr, conn_thread, c)) {
			atomic_fetch_sub(&e->conns, 1);
			close(fd);
			free(c);
		}
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

int egress_open(struct egress *e, const char *vsock_uds, const char *log_path)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int r;

	/* One lookup now, before the filter: the C library reads its NSS
	 * configuration and loads the modules it names (dlopen: files and
	 * calls the proxy's allow-list need not include) on its first use. */
	if (e->seccomp && !getaddrinfo("localhost", "443", &hints, &res))
		freeaddrinfo(res);

	if (snprintf(e->path, sizeof(e->path), "%s_%u", vsock_uds, EGRESS_VSOCK_PORT) >= (int)sizeof(e->path)) {
		log_err("egress: the vsock socket path is too long");
		return -ENAMETOOLONG;
	}
	e->log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (e->log_fd < 0) {
		r = -errno;
		log_err("egress: %s: %s", log_path, strerror(errno));
		return r;
	}
	e->fd = unix_listen(e->path, 64, 1, "egress proxy");
	if (e->fd < 0) {
		r = e->fd;
		close(e->log_fd);
		e->log_fd = -1;
		return r;
	}
	return 0;
}

int egress_launch(struct egress *e)
{
	sigset_t all, old;
	int r;

	/* Every signal blocked in the proxy's threads (connection threads
	 * inherit the mask): process signals stay vm_run's, and the SIGPIPE of
	 * a write to a peer that went away stays pending on the thread, the
	 * write failing with EPIPE, instead of killing the VMM. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = -pthread_create(&e->thread, NULL, accept_thread, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		close(e->fd);
		e->fd = -1;
		unlink(e->path);
		close(e->log_fd);
		e->log_fd = -1;
		return r;
	}
	e->started = 1;
	return 0;
}

int egress_start(struct egress *e, const char *vsock_uds, const char *log_path)
{
	int r = egress_open(e, vsock_uds, log_path);

	return r ? r : egress_launch(e);
}

void egress_stop(struct egress *e)
{
	if (e->started) {
		shutdown(e->fd, SHUT_RDWR);
		pthread_join(e->thread, NULL);
		e->started = 0;
	}
	if (e->fd >= 0) {
		close(e->fd);
		unlink(e->path);
	}
	e->fd = -1;
}

void egress_release(struct egress *e)
{
	unsigned i;

	if (atomic_load(&e->conns))
		return; /* a connection still runs: the process exits anyway */
	for (i = 0; i < EG_MAX_RULES; i++)
		SSL_CTX_free(e->tls[i]);
	eg_policy_free(&e->policy);
	if (e->log_fd >= 0)
		close(e->log_fd);
	free(e);
}
