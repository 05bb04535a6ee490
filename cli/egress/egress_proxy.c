/* The egress proxy's server: see egress.h and docs/egress.md. */
#include "cli/egress/egress.h"
#include "cli/egress/egress_priv.h"
#include "cli/egress/egress_tls.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"
#include "vmm/base/log.h"
#include "vmm/seccomp.h"
#include "vmm/base/thread.h"
#include "vmm/base/unixsock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/pem.h>
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

#define CLIENT_IDLE_MS 60000
/* An intercepted tunnel keeps its upstream connection for the next
 * request (docs/egress.md, "Upstream connections"): one per tunnel, for
 * at most this many requests, idle at most this long (below the shortest
 * keep-alive timeouts servers use, Node's 5 s, so a kept connection is
 * rarely found closed). */
#define UP_KEEP_REQUESTS 100
#define UP_KEEP_IDLE_MS 4000

char *read_small_file(const char *path, size_t max, size_t *len)
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

char *cred_env(const char *name, void *ctx)
{
	const char *v = getenv(name);

	(void)ctx;
	return v ? strdup(v) : NULL;
}

char *cred_file(const char *path, void *ctx)
{
	(void)ctx;
	return read_small_file(path, EG_MAX_CRED, NULL);
}


char *ca_read(const char *path, void *ctx)
{
	(void)ctx;
	return read_small_file(path, POLICY_MAX, NULL);
}

static void free_ssl_ctx(void *ctx)
{
	SSL_CTX_free(ctx);
}

/* The certificates of a PEM text into ctx's store: 0, or -EINVAL if it
 * holds none. */
static int load_cas(SSL_CTX *ctx, const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	STACK_OF(X509_INFO) *infos = b ? PEM_X509_INFO_read_bio(b, NULL, NULL, NULL) : NULL;
	X509_STORE *st = SSL_CTX_get_cert_store(ctx);
	int n = 0, i;

	for (i = 0; infos && i < sk_X509_INFO_num(infos); i++) {
		X509_INFO *x = sk_X509_INFO_value(infos, i);

		if (x->x509 && X509_STORE_add_cert(st, x->x509) == 1)
			n++;
	}
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	BIO_free(b);
	ERR_clear_error();
	return n ? 0 : -EINVAL;
}

/* A policy's text, checked as a whole, into a new snapshot with the TLS
 * context of each rule. 0, or -errno with why[] filled. */
int pol_build(const char *text, size_t len, const struct pol_src *src, struct eg_live **out, char *why,
		     size_t wl)
{
	struct eg_live *l = eg_live_new();
	unsigned i;
	int r;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	l->free_tls = free_ssl_ctx;
	r = eg_policy_parse(text, len, &src->cred, &l->p, why, wl);
	for (i = 0; !r && i < l->p.nr_rules; i++) {
		const struct eg_rule *x = &l->p.rules[i];
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
		char *pem = NULL;

		l->tls[i] = ctx;
		if (!ctx) {
			snprintf(why, wl, "out of memory");
			r = -ENOMEM;
			break;
		}
		SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		if (x->ca_file[0] ? !(pem = src->ca(x->ca_file, src->cred.ctx)) || load_cas(ctx, pem) :
				    SSL_CTX_set_default_verify_paths(ctx) != 1) {
			snprintf(why, wl, "allow[%u]: cannot load the CA certificates%s%s", i,
				 x->ca_file[0] ? " from " : "", x->ca_file);
			r = -EINVAL;
		}
		free(pem);
	}
	if (r) {
		eg_live_put(l);
		return r;
	}
	*out = l;
	return 0;
}

int egress_load(struct egress *e, const char *policy_file, const char *sandbox)
{
	const struct pol_src src = { .cred = { .env = cred_env, .file = cred_file }, .ca = ca_read };
	char why[256] = "";
	struct eg_live *l;
	size_t len;
	char *text;
	int r;

	memset(e, 0, sizeof(*e));
	e->fd = e->log_fd = e->ctl_fd = -1;
	snprintf(e->sandbox, sizeof(e->sandbox), "%s", sandbox);
	text = read_small_file(policy_file, POLICY_MAX, &len);
	if (!text) {
		log_err("--egress-policy %s: cannot read it (%s)", policy_file, errno ? strerror(errno) : "too big");
		return -EINVAL;
	}
	r = pol_build(text, len, &src, &l, why, sizeof(why));
	free(text);
	if (r) {
		log_err("--egress-policy %s: %s", policy_file, why);
		return r;
	}
	if (l->p.ca_shared) {
		char root[PATH_MAX - 16];

		if ((r = sandbox_root(root, sizeof(root)))) {
			eg_live_put(l);
			return r;
		}
		snprintf(e->ca_dir, sizeof(e->ca_dir), "%s/egress-ca", root);
	}
	e->ca_shared = l->p.ca_shared;
	e->rate = l->p.limits.rate;
	atomic_init(&e->max_conns, l->p.limits.max_conns);
	pthread_mutex_init(&e->rl_lock, NULL);
	rl_init(&e->rl, 0, 0, l->p.limits.rate, l->p.limits.burst, log_now_ns());
	log_info("egress policy %s: %u rule%s", policy_file, l->p.nr_rules, l->p.nr_rules == 1 ? "" : "s");
	eg_holder_init(&e->pol, l);
	return 0;
}

/* ---- one connection ------------------------------------------------------ */

struct upstream;

struct conn {
	struct egress *e;
	struct eg_live *pol;     /* the policy the request started under (a reference) */
	struct eg_live *tpol;    /* an intercepted tunnel's request's, while it runs */
	int fd;                  /* the guest's side */
	char buf[EG_MAX_HEAD];   /* the request head, and what followed it */
	size_t len;
	struct eg_request req;
	const struct eg_rule *rule;
	int up;                  /* upstream socket */
	SSL *ssl;
	int status;
	int injected;            /* the credential went upstream */
	const char *reason;
	const char *tls;         /* CONNECT: "intercept" or "pipe" */
	struct upstream *tun_up; /* an intercepted tunnel's current upstream */
	struct upstream *tun_idle; /* and the one kept for its next request */
	uint64_t bytes_up, bytes_down, t0_ns;
};

/* One JSON line per request (docs/egress.md, "The log"). */
static void log_rec(struct egress *e, const struct eg_logrec *l)
{
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
	if (l->path) {
		const char *q = memchr(l->path, '?', l->path_len);

		pl = q ? (size_t)(q - l->path) : l->path_len;
		if (pl >= sizeof(path))
			pl = sizeof(path) - 1;
		memcpy(path, l->path, pl);
	}
	path[pl] = '\0';
	jw_init(&w, line, sizeof(line) - 1);
	jw_obj(&w);
	jw_key(&w, "time");
	jw_str(&w, ts);
	jw_key(&w, "sandbox");
	jw_str(&w, e->sandbox);
	jw_key(&w, "method");
	jw_str(&w, l->method);
	jw_key(&w, "host");
	jw_str(&w, l->host);
	jw_key(&w, "port");
	jw_int(&w, l->port);
	jw_key(&w, "path");
	jw_str(&w, path);
	jw_key(&w, "status");
	jw_int(&w, l->status);
	jw_key(&w, "bytes_up");
	jw_int(&w, (int64_t)l->bytes_up);
	jw_key(&w, "bytes_down");
	jw_int(&w, (int64_t)l->bytes_down);
	jw_key(&w, "duration_ms");
	jw_int(&w, (int64_t)((log_now_ns() - l->t0_ns) / 1000000));
	jw_key(&w, "rule");
	jw_int(&w, l->rule);
	if (l->version) {
		jw_key(&w, "policy");
		jw_int(&w, (int64_t)l->version);
	}
	jw_key(&w, "decision");
	jw_str(&w, !l->reason ? "allow" : l->status == 403 || l->status == 429 || l->status == 503 ? "deny" : "error");
	if (l->tls) {
		jw_key(&w, "tls");
		jw_str(&w, l->tls);
	}
	jw_key(&w, "injected");
	jw_bool(&w, l->injected);
	if (l->reason) {
		jw_key(&w, "reason");
		jw_str(&w, l->reason);
	}
	jw_obj_end(&w);
	if (!jw_done(&w))
		return;
	strcat(line, "\n");
	/* One write per line on an O_APPEND file: lines do not interleave. */
	if (write(e->log_fd, line, strlen(line)) < 0)
		log_warn("egress.log: %s", strerror(errno));
}

static void log_request(struct conn *c)
{
	struct eg_logrec l = {
		.method = c->req.method, .host = c->req.host, .path = c->req.path, .path_len = c->req.path_len,
		.port = c->rule ? c->rule->port : c->req.port, .status = c->status,
		.rule = c->rule ? (int)(c->rule - c->pol->p.rules) : -1, .tls = c->tls,
		.version = c->pol ? c->pol->version : 0, .injected = c->injected, .reason = c->reason,
		.bytes_up = c->bytes_up, .bytes_down = c->bytes_down, .t0_ns = c->t0_ns,
	};

	log_rec(c->e, &l);
}

static void reply(struct conn *c, int status, const char *reason)
{
	static const struct { int code; const char *text; } texts[] = {
		{ 400, "Bad Request" }, { 403, "Forbidden" }, { 404, "Not Found" }, { 429, "Too Many Requests" },
		{ 431, "Request Header Fields Too Large" }, { 502, "Bad Gateway" }, { 503, "Service Unavailable" },
		{ 504, "Gateway Timeout" },
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

/* A pass-through tunnel's first bytes: a TLS ClientHello whose
 * server_name is the CONNECT's host (or none, if the rule allows that),
 * then passed on to the upstream. 0, or -1 (logged as a 403). */
static int hello_check(struct conn *c, size_t extra)
{
	char sni[EG_MAX_HOST + 1];
	unsigned char *h = malloc(EG_HELLO_MAX);
	size_t len = extra;
	int r = -EAGAIN;

	if (!h)
		return -1;
	memcpy(h, c->buf + c->req.head_len, extra);
	if (len)
		r = eg_hello_sni(h, len, sni);
	while (r == -EAGAIN && len < EG_HELLO_MAX) {
		struct pollfd pf = { .fd = c->fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pf, 1, CLIENT_IDLE_MS) != 1 || (n = read(c->fd, h + len, EG_HELLO_MAX - len)) <= 0)
			break;
		len += (size_t)n;
		r = eg_hello_sni(h, len, sni);
	}
	if (r == -ENOENT && !c->rule->require_sni)
		r = 0;
	else if (!r && strcmp(sni, c->req.host))
		r = -EACCES;
	if (r) {
		c->status = 403;
		c->reason = r == -EACCES ? "the ClientHello names another host than the CONNECT" :
			    r == -ENOENT ? "the ClientHello names no host (SNI)" :
			    r == -EAGAIN ? "no complete ClientHello" :
					   "not a TLS ClientHello, or a malformed one";
	} else if (write_full(c->up, h, len)) {
		r = -EIO;
	} else {
		c->bytes_up += len;
	}
	free(h);
	return r ? -1 : 0;
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
	c->tls = "pipe";
	if (hello_check(c, extra))
		return;
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

/* TCP and verified TLS to rule's upstream for host: 0 with *fd and *ssl
 * set (the caller frees them, also on failure), or the status to answer
 * (502, 504) with *why. */
static int upstream_tls(SSL_CTX *ctx, const struct eg_rule *rule, const char *host, int *fd, SSL **ssl,
			const char **why)
{
	*fd = dial(rule, host, rule->port);
	if (*fd < 0) {
		int r = *fd;

		*why = r == -ETIMEDOUT ? "upstream connect timed out" :
		       r == -EHOSTUNREACH ? "upstream not found or unreachable" : "upstream refused the connection";
		return r == -ETIMEDOUT ? 504 : 502;
	}
	errno = 0;
	*ssl = SSL_new(ctx);
	if (!*ssl || SSL_set_fd(*ssl, *fd) != 1 || SSL_set_tlsext_host_name(*ssl, host) != 1 ||
	    SSL_set1_host(*ssl, host) != 1) {
		*why = "TLS setup failed";
		return 502;
	}
	if (SSL_connect(*ssl) != 1) {
		long v = SSL_get_verify_result(*ssl);

		ERR_clear_error();
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			*why = "TLS handshake with the upstream timed out";
			return 504;
		}
		*why = v != X509_V_OK ? "upstream certificate not trusted" : "TLS handshake with the upstream failed";
		return 502;
	}
	return 0;
}

/* A plain request: TLS to the upstream, the head rewritten with the
 * credential, the body streamed up, the response streamed back. */
static void forward(struct conn *c, SSL_CTX *ctx)
{
	char head[EG_MAX_HEAD + EG_MAX_CRED + 256], buf[16384];
	struct eg_chunked ck;
	int64_t left = c->req.content_length > 0 ? c->req.content_length : 0;
	long hl = eg_upstream_head(&c->req, c->rule, 0, head, sizeof(head));
	int r, got = 0;

	c->up = -1;

	if (hl < 0) {
		reply(c, 431, "request head too large");
		return;
	}
	if ((r = upstream_tls(ctx, c->rule, c->req.host, &c->up, &c->ssl, &c->reason))) {
		reply(c, r, c->reason);
		goto out;
	}
	if (ssl_write_all(c->ssl, head, (size_t)hl)) {
		reply(c, 502, "upstream closed the connection");
		goto out;
	}
	explicit_bzero(head, (size_t)hl);
	c->injected = c->rule->cred != NULL;
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

/* The request rate limit: 0 or 429. */
static int admit(struct egress *e)
{
	uint64_t wait = 0;

	pthread_mutex_lock(&e->rl_lock);
	if (e->rate)
		wait = rl_take(&e->rl, 0, log_now_ns());
	pthread_mutex_unlock(&e->rl_lock);
	return wait ? 429 : 0;
}

/* ---- intercepted tunnels ------------------------------------------------- */

struct upstream {
	int fd;
	SSL *ssl;
	uint64_t version;  /* of the policy it was opened under */
	size_t rule;       /* its rule's index there */
	unsigned served;   /* requests sent on it */
	uint64_t idle_ns;  /* since when it is kept */
};

static void up_free(struct upstream *u)
{
	if (!u)
		return;
	if (u->ssl) {
		if (SSL_is_init_finished(u->ssl))
			SSL_shutdown(u->ssl);
		SSL_free(u->ssl);
		ERR_clear_error();
	}
	if (u->fd >= 0)
		close(u->fd);
	free(u);
}

/* A kept connection for this request: the same rule of the same policy
 * version (so the same upstream, TLS context and verification), within
 * the limits, and with nothing to read (an idle connection that is
 * readable was closed by the upstream, or sent what nobody asked for). */
static int up_usable(const struct upstream *u, uint64_t version, size_t rule)
{
	struct pollfd pf = { .fd = u->fd, .events = POLLIN };

	return u->version == version && u->rule == rule && u->served < UP_KEEP_REQUESTS &&
	       log_now_ns() - u->idle_ns < (uint64_t)UP_KEEP_IDLE_MS * 1000000 && !SSL_pending(u->ssl) &&
	       poll(&pf, 1, 0) == 0;
}

static int tun_admit(void *ctx)
{
	return admit(((struct conn *)ctx)->e);
}

static int tun_open(void *ctx, const struct eg_rule *rule, const struct eg_request *r, int fresh, struct eg_stream *up,
		    int *reused, const char **why)
{
	struct conn *c = ctx;
	struct upstream *u = c->tun_idle;
	size_t ri = (size_t)(rule - c->tpol->p.rules);
	int st;

	c->tun_idle = NULL;
	if (u && !fresh && up_usable(u, c->tpol->version, ri)) {
		*reused = 1;
	} else {
		up_free(u);
		if (!(u = calloc(1, sizeof(*u)))) {
			*why = "out of memory";
			return 503;
		}
		st = upstream_tls(c->tpol->tls[ri], rule, r->host, &u->fd, &u->ssl, why);
		if (st) {
			up_free(u);
			return st;
		}
		u->version = c->tpol->version;
		u->rule = ri;
	}
	u->served++;
	egtls_stream(u->ssl, up);
	c->tun_up = u;
	return 0;
}

static void tun_close(void *ctx, struct eg_stream *up, int keep)
{
	struct conn *c = ctx;
	struct upstream *u = c->tun_up;

	(void)up;
	c->tun_up = NULL;
	if (keep && u && !c->tun_idle && u->served < UP_KEEP_REQUESTS) {
		u->idle_ns = log_now_ns();
		c->tun_idle = u;
		return;
	}
	up_free(u);
}

static void tun_log(void *ctx, const struct eg_logrec *l)
{
	struct conn *c = ctx;

	c->bytes_up += l->bytes_up;
	c->bytes_down += l->bytes_down;
	log_rec(c->e, l);
}

/* Each request inside the tunnel: the policy in force when it starts. */
static const struct eg_policy *tun_hold(void *ctx, uint64_t *version)
{
	struct conn *c = ctx;

	c->tpol = eg_holder_get(&c->e->pol);
	*version = c->tpol->version;
	return &c->tpol->p;
}

static void tun_unhold(void *ctx, const struct eg_policy *p)
{
	struct conn *c = ctx;

	(void)p;
	eg_live_put(c->tpol);
	c->tpol = NULL;
}

static uint64_t tun_now(void *ctx)
{
	(void)ctx;
	return log_now_ns();
}

/* CONNECT to a host a rule intercepts: 200, TLS with the guest's client
 * under a leaf for the host, then each request inside on its own
 * (egress_tunnel.h). The CONNECT gets a log line of its own at the end. */
static void intercept(struct conn *c)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct timeval hs = { .tv_sec = 10 }, idle = { .tv_sec = CLIENT_IDLE_MS / 1000 };
	struct eg_tunnel t = {
		.hold = tun_hold, .unhold = tun_unhold, .host = c->req.host, .port = c->req.port,
		.open = tun_open, .close = tun_close, .admit = tun_admit, .log = tun_log, .now_ns = tun_now,
		.ctx = c,
	};
	SSL *s;

	c->tls = "intercept";
	if (!c->e->ca) {
		reply(c, 502, "no CA for interception");
		return;
	}
	if (c->len > c->req.head_len) {
		reply(c, 400, "data after CONNECT before its answer");
		return;
	}
	if (write_full(c->fd, ok, sizeof(ok) - 1))
		return;
	c->status = 200;
	/* the handshake within 10 s, then the idle timeout between reads */
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &hs, sizeof(hs));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &idle, sizeof(idle));
	s = egtls_accept(c->e->ca, c->fd, c->req.host, &c->reason);
	if (!s)
		return;
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
	egtls_stream(s, &t.guest);
	eg_tunnel_serve(&t);
	up_free(c->tun_idle);
	c->tun_idle = NULL;
	SSL_shutdown(s);
	SSL_free(s);
}

/* GET http://EGRESS_CA_HOST/ca.pem: the CA certificate, for guest-init
 * (public: it is what the guest trusts). */
static void serve_ca(struct conn *c)
{
	const char *pem = c->e->ca ? egtls_ca_pem(c->e->ca) : NULL;
	char head[160];
	int n;

	if (!pem || c->req.path_len != 7 || memcmp(c->req.path, "/ca.pem", 7) || strcmp(c->req.method, "GET")) {
		reply(c, 404, pem ? "GET /ca.pem only" : "this sandbox's proxy intercepts nothing: no CA");
		return;
	}
	n = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: application/x-pem-file\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n", strlen(pem));
	if (!write_full(c->fd, head, (size_t)n) && !write_full(c->fd, pem, strlen(pem)))
		c->bytes_down += (uint64_t)n + strlen(pem);
	c->status = 200;
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
	/* The policy in force now decides this connection, to its end (an
	 * intercepted tunnel's requests take the one in force at each). */
	c->pol = eg_holder_get(&e->pol);
	if (!c->req.connect && !strcmp(c->req.host, EGRESS_CA_HOST)) {
		serve_ca(c);
		goto logit;
	}
	if (c->req.connect) {
		int mode = eg_connect_mode(&c->pol->p, &c->req, &c->rule, &why);

		/* an intercepted tunnel's requests count one by one, inside */
		if (mode == EG_PIPE && (r = admit(e)))
			reply(c, r, "request rate limit reached");
		else if (mode == EG_DENY)
			reply(c, 403, why);
		else if (mode == EG_INTERCEPT)
			intercept(c);
		else
			tunnel(c);
		goto logit;
	}
	if ((r = admit(e))) {
		reply(c, r, "request rate limit reached");
		goto logit;
	}
	c->rule = eg_policy_match(&c->pol->p, &c->req, &why);
	if (!c->rule) {
		reply(c, 403, why);
		goto logit;
	}
	forward(c, c->pol->tls[c->rule - c->pol->p.rules]);
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
	eg_live_put(c->pol);
	explicit_bzero(c, sizeof(*c));
	free(c);
	atomic_fetch_sub(&e->conns, 1);
	return NULL;
}

/* Too many connections: 503, and a log line. */
static void busy(struct egress *e, int fd)
{
	static const char msg[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
				  "Content-Length: 34\r\nConnection: close\r\n"
				  "X-Vmm-Egress: too many connections\r\n\r\nvmm egress: too many connections\n";
	struct eg_logrec l = { .method = "-", .host = "", .path = "", .status = 503, .rule = -1,
			       .reason = "too many connections", .t0_ns = log_now_ns() };
	struct timeval tv = { .tv_sec = 1 };

	/* One write, to a new socket: it fits; a peer that does not read
	 * cannot hold the accept thread more than a second. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (!write_full(fd, msg, sizeof(msg) - 1))
		l.bytes_down = sizeof(msg) - 1;
	close(fd);
	log_rec(e, &l);
}

static void *accept_thread(void *arg)
{
	struct egress *e = arg;
	pthread_attr_t attr;

	vmm_thread_name("egress"); /* before its filter; connections inherit the name */
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
	/* The VMM's stack size, not RLIMIT_STACK's 8 MiB per connection
	 * (vmm/base/thread.h). */
	pthread_attr_setstacksize(&attr, VMM_THREAD_STACK);
	for (;;) {
		struct pollfd pf[2] = { { .fd = e->fd, .events = POLLIN }, { .fd = e->ctl_fd, .events = POLLIN } };
		struct conn *c;
		pthread_t t;
		int fd;

		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents & (POLLHUP | POLLERR | POLLNVAL))
			break; /* shut down */
		if (pf[1].revents & POLLIN) {
			fd = accept4(e->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				egress_serve_ctl(e, fd);
		}
		if (!(pf[0].revents & POLLIN))
			continue;
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
		if (atomic_load(&e->conns) >= atomic_load(&e->max_conns) || !(c = calloc(1, sizeof(*c)))) {
			busy(e, fd);
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
	{
		const struct eg_policy *p = &e->pol.cur->p; /* no thread yet */

		for (r = 0; r < (int)p->nr_rules && !p->rules[r].intercept; r++) {
		}
		r = r < (int)p->nr_rules;
	}
	if (r && !e->ca) {
		char cn[128];
		const char *slash = strrchr(log_path, '/');

		/* The CA, before the threads and their filter: files are read
		 * here, never after (docs/egress.md, "HTTPS"). */
		if (!e->ca_dir[0])
			snprintf(e->ca_dir, sizeof(e->ca_dir), "%.*s", slash ? (int)(slash - log_path) : 1,
				 slash ? log_path : ".");
		snprintf(cn, sizeof(cn), "vmm egress CA (%s)", e->ca_shared ? "host" : e->sandbox);
		r = egtls_ca_open(&e->ca, e->ca_dir, cn);
		if (r)
			return r;
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
		goto err_log;
	}
	/* The control socket, next to the log unless named: mode 0600, its
	 * owner's (root's, for a sandbox: not the jail's uid, so neither the
	 * guest nor a VMM it broke into can change the policy). */
	if (!e->ctl_path[0]) {
		const char *slash = strrchr(log_path, '/');

		if (snprintf(e->ctl_path, sizeof(e->ctl_path), "%.*s%s", slash ? (int)(slash - log_path + 1) : 0,
			     log_path, EGRESS_CTL_SOCK) >= (int)sizeof(e->ctl_path)) {
			log_err("egress: the control socket's path is too long");
			r = -ENAMETOOLONG;
			goto err_listen;
		}
	}
	e->ctl_fd = unix_listen(e->ctl_path, 4, 1, "egress control socket");
	if (e->ctl_fd < 0) {
		r = e->ctl_fd;
		goto err_listen;
	}
	return 0;
err_listen:
	close(e->fd);
	e->fd = -1;
	unlink(e->path);
err_log:
	close(e->log_fd);
	e->log_fd = -1;
	return r;
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
	r = -vmm_thread_start(&e->thread, accept_thread, e, 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		close(e->fd);
		e->fd = -1;
		unlink(e->path);
		close(e->ctl_fd);
		e->ctl_fd = -1;
		unlink(e->ctl_path);
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
	if (e->ctl_fd >= 0) {
		close(e->ctl_fd);
		unlink(e->ctl_path);
	}
	e->fd = e->ctl_fd = -1;
}

void egress_release(struct egress *e)
{
	if (atomic_load(&e->conns))
		return; /* a connection still runs: the process exits anyway */
	egtls_ca_free(e->ca);
	pthread_mutex_destroy(&e->rl_lock);
	eg_holder_destroy(&e->pol);
	if (e->log_fd >= 0)
		close(e->log_fd);
	free(e);
}
