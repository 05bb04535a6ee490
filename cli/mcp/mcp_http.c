/* The MCP streamable HTTP transport (MCP 2025-06-18, basic/transports:
 * "Streamable HTTP"; basic/authorization for the bearer token): one
 * endpoint, /mcp. A client POSTs each JSON-RPC message; a request gets its
 * response as one application/json body (this server never streams, which
 * the transport allows), a notification or response 202 Accepted. GET
 * (a server-initiated stream) is 405: this server sends nothing unasked.
 * initialize opens a session (Mcp-Session-Id), which every later request
 * carries; DELETE ends it. Every request carries a sandbox access token
 * (`Authorization: Bearer vmt_...`, cli/mcp/mcp_tokens.h) with the scope mcp, read
 * from the sandbox's tokens file at each request, so revocation and expiry
 * take effect at once; a session stays bound to the token that opened it.
 * An Origin header that is not a loopback origin (or one --origin names)
 * is refused (403), against DNS rebinding; the address is loopback unless
 * --allow-remote. Connections are served at once, a thread each, at most
 * max_conns, each bounded by an idle and a request timeout; when all are
 * taken, a newcomer takes the slot of the unauthenticated connection
 * idle the longest, and gets 503 only when every one has shown a valid
 * token (docs/mcp.md "Connections"). */
#include "cli/mcp/mcp.h"
#include "cli/mcp/jsonrpc.h"
#include "cli/mcp/mcp_tokens.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"
#include "vmm/base/http.h"
#include "vmm/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MCP_SESSIONS 64

struct session {
	char id[33];                  /* 128 random bits, hex; "" when free */
	char token_id[TOKEN_ID_LEN + 1];
	struct mcp_server st;
	long long last_used;
};

struct http_server;

/* One accepted connection, served by a thread of its own. */
struct conn {
	struct http_server *hs;
	pthread_t th;
	int fd;      /* the client; -1 once its thread closed it (under hs->lock) */
	int used;    /* the slot holds a thread not yet joined */
	int done;    /* its thread ended: join it (under hs->lock) */
	/* Under hs->lock: the connection has shown a valid token (it is never
	 * evicted), the last time it was accepted or finished a request, and
	 * whether conn_start evicted it (it then cannot become authed). */
	int authed, evicted;
	long long since;
};

struct http_server {
	struct mcp_server proto;      /* the template a session starts from (read-only once serving) */
	const struct mcp_http_opts *o;
	unsigned max_conns, idle_s, request_s;
	int stop[2];                  /* a pipe: readable once shutting down; every wait polls it */
	pthread_mutex_t lock;         /* sessions[], and conns[].fd/.done */
	struct session sessions[MCP_SESSIONS];
	struct conn *conns;           /* [max_conns] */
	/* Refused connections kept a moment after their 503 (refuse_busy):
	 * closing a socket whose request is still unread makes the kernel
	 * send a reset, and a reset can destroy the 503 before the client
	 * reads it. The accepting thread drains them until the client closes
	 * or MCP_HTTP_LINGER_MS pass; fd -1: a free slot. */
	int linger_fd[MCP_HTTP_LINGER];
	long long linger_end[MCP_HTTP_LINGER];
};

/* ---- one connection's I/O: the socket is non-blocking; every wait is a
 * poll on it and on the server's stop pipe, against a deadline ---------- */

/* 1: fd is ready for `events`; 0: the deadline passed; -1: shutdown (or
 * the connection failed). */
static int conn_wait(const struct conn *c, short events, long long deadline)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = c->fd, .events = events }, { .fd = c->hs->stop[0], .events = POLLIN } };
		long long left = deadline - cli_mono_ms();
		int n;

		if (left <= 0)
			return 0;
		n = poll(p, 2, left > INT32_MAX ? INT32_MAX : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[1].revents)
			return -1;
		if (p[0].revents)
			return 1;
	}
}

/* All of buf, within the request timeout (a client that does not read
 * its answer does not hold the connection past it). */
static int conn_write(const struct conn *c, const void *buf, size_t len)
{
	long long deadline = cli_mono_ms() + 1000LL * c->hs->request_s;
	const char *p = buf;

	while (len) {
		ssize_t k = send(c->fd, p, len, MSG_NOSIGNAL);

		if (k > 0) {
			p += k;
			len -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && conn_wait(c, POLLOUT, deadline) == 1)
			continue;
		return -EPIPE;
	}
	return 0;
}

static int send_response(const struct conn *c, int status, const char *extra, const char *type, const char *body,
			 size_t len, int keep_alive)
{
	char head[1024];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nServer: vmm\r\n%s%s%s%sContent-Length: %zu\r\nCache-Control: no-store\r\n%s\r\n",
			 status, http_reason(status), type ? "Content-Type: " : "", type ? type : "", type ? "\r\n" : "",
			 extra ? extra : "", len, keep_alive ? "" : "Connection: close\r\n");

	if (n < 0 || (size_t)n >= sizeof(head))
		return -E2BIG;
	if (conn_write(c, head, (size_t)n) || (len && conn_write(c, body, len)))
		return -EPIPE;
	return 0;
}

/* A JSON-RPC error (id null: the message was not read) as an HTTP answer. */
static size_t error_body(char *body, size_t size, int code, const char *msg)
{
	struct json_writer w;

	jw_init(&w, body, size);
	jsonrpc_error(&w, "null", code, msg, NULL);
	return jw_done(&w) ? w.len : 0;
}

static int send_error(const struct conn *c, int status, const char *extra, int code, const char *msg, int keep_alive)
{
	char body[1024];
	size_t n = error_body(body, sizeof(body), code, msg);

	return send_response(c, status, extra, "application/json", body, n, keep_alive);
}

/* http(s)://localhost, 127.0.0.1 or [::1], any port; or one of the list. */
static int origin_ok(const char *origin, const char *const *allowed)
{
	static const char *const hosts[] = { "localhost", "127.0.0.1", "[::1]" };
	const char *h = !strncmp(origin, "http://", 7) ? origin + 7 : !strncmp(origin, "https://", 8) ? origin + 8 : NULL;
	size_t i;

	for (i = 0; allowed && allowed[i]; i++)
		if (!strcmp(origin, allowed[i]))
			return 1;
	if (!h)
		return 0;
	for (i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		size_t n = strlen(hosts[i]);

		if (!strncmp(h, hosts[i], n) && (h[n] == '\0' || h[n] == ':')) {
			const char *p = h + n + (h[n] == ':');

			while (*p >= '0' && *p <= '9')
				p++;
			if (!*p)
				return 1;
		}
	}
	return 0;
}

static int accept_ok(const char *accept)
{
	/* A client must accept application/json (MCP: it lists both that and
	 * text/event-stream); we only ever answer in JSON. */
	return strcasestr(accept, "application/json") || strstr(accept, "*/*") || strcasestr(accept, "application/*");
}

/* Sessions: the caller holds hs->lock. */
static struct session *session_find(struct http_server *hs, const char *id)
{
	size_t i;

	for (i = 0; i < MCP_SESSIONS; i++)
		if (hs->sessions[i].id[0] && !strcmp(hs->sessions[i].id, id))
			return &hs->sessions[i];
	return NULL;
}

static struct session *session_new(struct http_server *hs, const char *token_id)
{
	struct session *s = &hs->sessions[0];
	unsigned char rnd[16];
	size_t i;

	for (i = 0; i < MCP_SESSIONS; i++) {
		if (!hs->sessions[i].id[0]) {
			s = &hs->sessions[i];
			break;
		}
		if (hs->sessions[i].last_used < s->last_used)
			s = &hs->sessions[i]; /* all in use: the least recently used goes */
	}
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return NULL;
	memset(s, 0, sizeof(*s));
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
	snprintf(s->token_id, sizeof(s->token_id), "%s", token_id);
	s->st = hs->proto;
	return s;
}

/* An answer sent instead of serving: 1 (go on), or <0 (close). */
static int answered(int r)
{
	return r ? r : 1;
}

/* The bearer token: 0 with its id and scopes, or an answer sent (<0 to
 * close the connection, 1 to go on with it). */
static int check_token(struct conn *c, const char *head, size_t head_len, int ka, char *tid, unsigned *scopes,
		       struct token_drives *drives)
{
	struct http_server *hs = c->hs;
	char val[1024], extra[512];
	const struct token_rec *rec = NULL;
	struct token_rec *recs = NULL;
	enum token_verdict v;
	size_t nrecs = 0;
	int r;

	/* re-read each time, so rm and expiry act at once */
	r = http_header(head, head_len, "Authorization", val, sizeof(val));
	if (r || strncasecmp(val, "Bearer ", 7)) {
		snprintf(extra, sizeof(extra), "WWW-Authenticate: Bearer realm=\"vmm\"\r\n");
		return answered(send_error(c, 401, extra, JSONRPC_INVALID_REQUEST,
				  "an access token is required (Authorization: Bearer, vmm token create)", ka));
	}
	if ((r = token_load(hs->o->sandbox_dir, &recs, &nrecs))) {
		log_err("mcp: the sandbox's tokens file: %s", strerror(-r));
		return answered(send_error(c, 500, NULL, JSONRPC_INTERNAL_ERROR, "the tokens file cannot be read", ka));
	}
	v = token_check(recs, nrecs, val + 7, (long long)time(NULL), TOKEN_SCOPE_MCP, &rec);
	if (v == TOKEN_OK) {
		memcpy(tid, rec->id, TOKEN_ID_LEN + 1);
		*scopes = rec->scopes;
		*drives = rec->drives;
		free(recs);
		return 0;
	}
	free(recs);
	if (v == TOKEN_OUT_OF_SCOPE) {
		snprintf(extra, sizeof(extra), "WWW-Authenticate: Bearer realm=\"vmm\", error=\"insufficient_scope\", "
					       "scope=\"mcp\"\r\n");
		return answered(send_error(c, 403, extra, JSONRPC_FORBIDDEN, "the token lacks the scope mcp", ka));
	}
	snprintf(extra, sizeof(extra), "WWW-Authenticate: Bearer realm=\"vmm\", error=\"invalid_token\", "
				       "error_description=\"%s\"\r\n", token_verdict_str(v));
	return answered(send_error(c, 401, extra, JSONRPC_INVALID_REQUEST, token_verdict_str(v), ka));
}

/* Is the body an initialize (1), a ping (2), or something else (0)? */
static int body_method(const struct http_request *req)
{
	char *arena_buf = malloc(65536);
	struct json_arena ar = { arena_buf, 65536, 0 };
	struct jsonrpc_msg m;
	const char *why;
	int r = 0;

	if (arena_buf && jsonrpc_parse(req->body, req->body_len, &ar, &m, &why) == 0 && m.method)
		r = !strcmp(m.method, "initialize") ? 1 : !strcmp(m.method, "ping") ? 2 : 0;
	free(arena_buf);
	return r;
}

/* One request. 0 to go on with the connection, <0 to close it.
 *
 * Concurrency: the session table is shared by every connection's thread.
 * A request copies its session's state out under hs->lock, runs the
 * message on the copy without the lock (a tools/call may run for
 * minutes), and writes what the message changed (initialized, the
 * protocol agreed) back under the lock, to the session of that id if it
 * still exists: a DELETE or an eviction meanwhile wins. */
static int serve_request(struct conn *c, const char *head, size_t head_len, const struct http_request *req)
{
	struct http_server *hs = c->hs;
	char val[1024], extra[512], sid[33] = "", tid[TOKEN_ID_LEN + 1];
	struct mcp_server st = hs->proto;
	struct session *sess;
	struct mcp_reply rep;
	int ka = req->keep_alive, r, opened = 0;

	extra[0] = '\0';
	if (strcmp(req->path, "/mcp"))
		return send_error(c, 404, NULL, JSONRPC_INVALID_REQUEST, "no such endpoint: the MCP endpoint is /mcp", ka);
	r = http_header(head, head_len, "Origin", val, sizeof(val));
	if (r != -ENOENT && (r || !origin_ok(val, hs->o->origins)))
		return send_error(c, 403, NULL, JSONRPC_INVALID_REQUEST, "Origin not allowed", ka);
	r = check_token(c, head, head_len, ka, tid, &st.scopes, &st.drives);
	if (r)
		return r < 0 ? r : 0;
	pthread_mutex_lock(&hs->lock);
	if (!c->evicted)
		c->authed = 1;
	r = c->evicted ? -ECONNRESET : 0;
	pthread_mutex_unlock(&hs->lock);
	if (r)
		return r; /* closed for a newcomer meanwhile: its socket is shut */
	r = http_header(head, head_len, "Mcp-Session-Id", val, sizeof(val));
	if (r == 0) {
		pthread_mutex_lock(&hs->lock);
		sess = session_find(hs, val);
		/* another token's session is nobody's for this caller */
		if (sess && !strcmp(sess->token_id, tid)) {
			unsigned scopes = st.scopes;
			struct token_drives drives = st.drives;

			sess->last_used = (long long)time(NULL);
			st = sess->st;
			st.scopes = scopes; /* the token's as read now */
			st.drives = drives;
			memcpy(sid, sess->id, sizeof(sid));
		}
		pthread_mutex_unlock(&hs->lock);
		if (!sid[0])
			return send_error(c, 404, NULL, JSONRPC_INVALID_REQUEST,
					  "unknown or ended session: initialize again", ka);
	} else if (r != -ENOENT) {
		return send_error(c, 400, NULL, JSONRPC_INVALID_REQUEST, "a malformed Mcp-Session-Id", ka);
	}
	if (req->method == HTTP_OTHER && !strcmp(req->method_name, "DELETE")) {
		if (!sid[0])
			return send_error(c, 400, NULL, JSONRPC_INVALID_REQUEST, "DELETE needs an Mcp-Session-Id", ka);
		pthread_mutex_lock(&hs->lock);
		if ((sess = session_find(hs, sid)))
			memset(sess, 0, sizeof(*sess));
		pthread_mutex_unlock(&hs->lock);
		return send_response(c, 204, NULL, NULL, NULL, 0, ka);
	}
	if (req->method != HTTP_OTHER || strcmp(req->method_name, "POST"))
		return send_response(c, 405, "Allow: POST, DELETE\r\n", NULL, NULL, 0, ka);
	r = http_header(head, head_len, "MCP-Protocol-Version", val, sizeof(val));
	if (r == 0 && !mcp_protocol_known(val))
		return send_error(c, 400, NULL, JSONRPC_INVALID_REQUEST, "unsupported MCP-Protocol-Version", ka);
	r = http_header(head, head_len, "Accept", val, sizeof(val));
	if (r == 0 && !accept_ok(val))
		return send_error(c, 406, NULL, JSONRPC_INVALID_REQUEST, "Accept must include application/json", ka);
	if (!req->body_len)
		return send_error(c, 400, NULL, JSONRPC_PARSE_ERROR, "an empty body: POST one JSON-RPC message", ka);
	if (!sid[0]) {
		/* Only initialize opens a session; ping is answered without
		 * one; anything else needs one. */
		int what = body_method(req);

		if (what == 0)
			return send_error(c, 400, NULL, JSONRPC_INVALID_REQUEST,
					  "Mcp-Session-Id required: send initialize first", ka);
		if (what == 1) {
			unsigned scopes = st.scopes;
			struct token_drives drives = st.drives;

			pthread_mutex_lock(&hs->lock);
			sess = session_new(hs, tid);
			if (sess) {
				sess->last_used = (long long)time(NULL);
				memcpy(sid, sess->id, sizeof(sid));
				st = sess->st;
			}
			pthread_mutex_unlock(&hs->lock);
			if (!sess)
				return send_error(c, 500, NULL, JSONRPC_INTERNAL_ERROR, "no session", ka);
			st.scopes = scopes;
			st.drives = drives;
			opened = 1;
		}
	}
	r = mcp_handle(&st, req->body, req->body_len, &rep);
	if (sid[0]) {
		pthread_mutex_lock(&hs->lock);
		sess = session_find(hs, sid);
		if (sess && opened && !(rep.initialize && st.initialized))
			memset(sess, 0, sizeof(*sess)); /* a failed initialize opens nothing */
		else if (sess)
			sess->st = st;
		pthread_mutex_unlock(&hs->lock);
	}
	if (r)
		return send_error(c, 500, NULL, JSONRPC_INTERNAL_ERROR, strerror(-r), ka);
	if (rep.initialize && st.initialized && sid[0])
		snprintf(extra, sizeof(extra), "Mcp-Session-Id: %s\r\n", sid);
	if (!rep.text)
		return send_response(c, 202, extra, NULL, NULL, 0, ka);
	r = send_response(c, rep.forbidden ? 403 : 200, extra, "application/json", rep.text, rep.len, ka);
	free(rep.text);
	return r;
}

/* Requests on one connection until it ends, idles past idle_s, takes
 * longer than request_s to send one whole request (a slowloris), or the
 * server shuts down. The buffer grows to what the request needs, up to
 * headers plus MCP_MESSAGE_MAX. */
static void serve_conn(struct conn *c)
{
	struct http_server *hs = c->hs;
	size_t cap = 16384, max = HTTP_MAX_HEADER + MCP_MESSAGE_MAX, len = 0;
	char *buf = malloc(cap);
	long long deadline = cli_mono_ms() + 1000LL * hs->idle_s;
	int started = 0; /* a request's first byte arrived: its deadline runs */

	if (!buf)
		return;
	for (;;) {
		struct http_request req;
		int n = len ? http_parse_limit(buf, len, &req, MCP_MESSAGE_MAX) : 0;
		ssize_t k;

		if (n < 0) {
			if (req.too_large)
				send_error(c, 413, NULL, JSONRPC_INVALID_REQUEST, req.why, 0);
			else
				send_error(c, req.status, NULL, JSONRPC_INVALID_REQUEST, req.why, 0);
			break;
		}
		if (n > 0) {
			size_t head_len = (size_t)n - req.body_len;

			if (serve_request(c, buf, head_len, &req) || !req.keep_alive)
				break;
			pthread_mutex_lock(&hs->lock);
			c->since = cli_mono_ms();
			pthread_mutex_unlock(&hs->lock);
			memmove(buf, buf + n, len - (size_t)n);
			len -= (size_t)n;
			/* the next request: idle until its first byte */
			started = len > 0;
			deadline = cli_mono_ms() + 1000LL * (started ? hs->request_s : hs->idle_s);
			continue;
		}
		if (req.expect_continue && conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25))
			break;
		if (len == cap) {
			char *nb;

			if (cap == max)
				break; /* cannot happen: the parser refuses first */
			cap = cap * 4 > max ? max : cap * 4;
			nb = realloc(buf, cap);
			if (!nb)
				break;
			buf = nb;
		}
		k = recv(c->fd, buf + len, cap - len, 0);
		if (k > 0) {
			if (!started) {
				started = 1;
				deadline = cli_mono_ms() + 1000LL * hs->request_s;
			}
			len += (size_t)k;
			continue;
		}
		if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			break;
		k = conn_wait(c, POLLIN, deadline);
		if (k < 0)
			break; /* shutdown */
		if (k == 0) {
			/* idle: close quietly; midway through a request: say why */
			if (started)
				send_error(c, 408, NULL, JSONRPC_INVALID_REQUEST,
					   "the request was not received in time: the connection is closed", 0);
			break;
		}
	}
	free(buf);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct http_server *hs = c->hs;

	serve_conn(c);
	pthread_mutex_lock(&hs->lock);
	close(c->fd);
	c->fd = -1;
	c->done = 1;
	pthread_mutex_unlock(&hs->lock);
	return NULL;
}

/* Joins the connections whose threads ended; the number still served. */
static unsigned conns_reap(struct http_server *hs)
{
	unsigned i, live = 0;

	for (i = 0; i < hs->max_conns; i++) {
		struct conn *c = &hs->conns[i];
		int done;

		if (!c->used)
			continue;
		pthread_mutex_lock(&hs->lock);
		done = c->done;
		pthread_mutex_unlock(&hs->lock);
		if (done) {
			pthread_join(c->th, NULL);
			memset(c, 0, sizeof(*c));
		} else {
			live++;
		}
	}
	return live;
}

static void linger_close(struct http_server *hs, unsigned i)
{
	close(hs->linger_fd[i]);
	hs->linger_fd[i] = -1;
}

/* Reads and drops what a lingering client sent; closes at its EOF, an
 * error, or the slot's end. */
static void linger_drain(struct http_server *hs, unsigned i, long long now)
{
	char buf[4096];
	ssize_t n;
	int k;

	for (k = 0; k < 16; k++) { /* bounded: a client may keep sending */
		n = recv(hs->linger_fd[i], buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			break;
		linger_close(hs, i); /* EOF or an error */
		return;
	}
	if (now >= hs->linger_end[i])
		linger_close(hs, i);
}

/* A connection past the limit: 503, the write side shut, then lingering
 * (above). From the accepting thread, so nothing here blocks (a client
 * that does not read loses the answer). */
static void refuse_busy(struct http_server *hs, int fd)
{
	unsigned i, oldest = 0;
	long long now;
	char body[256], head[512];
	size_t n = error_body(body, sizeof(body), JSONRPC_INTERNAL_ERROR,
			      "too many connections: try again later");
	int h = snprintf(head, sizeof(head),
			 "HTTP/1.1 503 %s\r\nServer: vmm\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 http_reason(503), n);

	if (send(fd, head, (size_t)h, MSG_NOSIGNAL | MSG_DONTWAIT) == h)
		send(fd, body, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	shutdown(fd, SHUT_WR);
	for (i = 0; i < MCP_HTTP_LINGER && hs->linger_fd[i] >= 0; i++)
		if (hs->linger_end[i] < hs->linger_end[oldest])
			oldest = i;
	if (i == MCP_HTTP_LINGER) /* all taken: the oldest goes */
		linger_close(hs, i = oldest);
	now = cli_mono_ms();
	hs->linger_fd[i] = fd;
	hs->linger_end[i] = now + MCP_HTTP_LINGER_MS;
	linger_drain(hs, i, now);
}

/* All slots taken: room for a newcomer by closing the connection that
 * has gone longest without a whole request and has never shown a valid
 * token (slow or idle clients without a token cannot keep authenticated
 * ones out). Its thread is woken by the shutdown and joined: an
 * unauthenticated connection is only ever reading a request or writing
 * an error, both of which end at once on a shut socket, and it cannot
 * become authenticated once evicted (serve_request). 1 if a slot was
 * freed, 0 if every connection is authenticated. */
static int evict_unauthenticated(struct http_server *hs)
{
	struct conn *v = NULL;
	unsigned i;

	pthread_mutex_lock(&hs->lock);
	for (i = 0; i < hs->max_conns; i++) {
		struct conn *c = &hs->conns[i];

		if (c->used && !c->done && !c->authed && (!v || c->since < v->since))
			v = c;
	}
	if (v) {
		v->evicted = 1;
		shutdown(v->fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&hs->lock);
	if (!v)
		return 0;
	pthread_join(v->th, NULL);
	memset(v, 0, sizeof(*v));
	return 1;
}

static void conn_start(struct http_server *hs, int fd, const pthread_attr_t *attr)
{
	unsigned i;
	int r;

	if (conns_reap(hs) >= hs->max_conns && !evict_unauthenticated(hs)) {
		refuse_busy(hs, fd);
		return;
	}
	for (i = 0; hs->conns[i].used; i++) {
	}
	hs->conns[i] = (struct conn){ .hs = hs, .fd = fd, .used = 1, .since = cli_mono_ms() };
	r = pthread_create(&hs->conns[i].th, attr, conn_main, &hs->conns[i]);
	if (r) {
		log_err("mcp: a connection's thread: %s", strerror(r));
		memset(&hs->conns[i], 0, sizeof(hs->conns[i]));
		refuse_busy(hs, fd);
	}
}

/* Shutdown: the stop pipe wakes every connection's wait (and an exec in
 * flight: its sandbox_addr.cancel_fd); the sockets are shut down too, for
 * a thread between waits. Then every thread is joined. */
static void conns_stop(struct http_server *hs)
{
	unsigned i;

	if (write(hs->stop[1], "x", 1) < 0) {
		/* a full pipe is already readable */
	}
	pthread_mutex_lock(&hs->lock);
	for (i = 0; i < hs->max_conns; i++)
		if (hs->conns[i].used && hs->conns[i].fd >= 0)
			shutdown(hs->conns[i].fd, SHUT_RDWR);
	pthread_mutex_unlock(&hs->lock);
	for (i = 0; i < hs->max_conns; i++)
		if (hs->conns[i].used)
			pthread_join(hs->conns[i].th, NULL);
}

int mcp_serve_http(struct mcp_server *s, const struct mcp_http_opts *o)
{
	struct http_server *hs = calloc(1, sizeof(*hs));
	pthread_attr_t attr;
	int lfd = -1, sfd = -1, r = 0;

	if (!hs)
		return -ENOMEM;
	hs->o = o;
	hs->max_conns = o->max_conns ? o->max_conns : MCP_HTTP_MAX_CONNS;
	hs->idle_s = o->idle_timeout_s ? o->idle_timeout_s : MCP_HTTP_IDLE_S;
	hs->request_s = o->request_timeout_s ? o->request_timeout_s : MCP_HTTP_REQUEST_S;
	hs->stop[0] = hs->stop[1] = -1;
	for (unsigned i = 0; i < MCP_HTTP_LINGER; i++)
		hs->linger_fd[i] = -1;
	hs->conns = calloc(hs->max_conns, sizeof(*hs->conns));
	if (!hs->conns) {
		free(hs);
		return -ENOMEM;
	}
	pthread_mutex_init(&hs->lock, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 2u << 20);
	if (pipe2(hs->stop, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	/* the stop pipe's read end is every call's cancel_fd (> 0: see api_client.h) */
	hs->proto = *s;
	hs->proto.addr.cancel_fd = hs->stop[0];
	lfd = cli_listen_tcp("mcp", o->listen, o->allow_remote);
	if (lfd < 0) {
		r = lfd;
		goto out;
	}
	/* before the first thread starts: every thread inherits the mask */
	sfd = cli_stop_signals();
	{
		char a[INET6_ADDRSTRLEN + 16] = "?";

		cli_listen_addr(lfd, a, sizeof(a));
		/* one line (the verb's stderr) that scripts (and the tests) can wait for */
		if (o->notice) {
			fprintf(o->notice, "vmm mcp: serving sandbox %s on http://%s/mcp (at most %u connections)\n",
				s->name, a, hs->max_conns);
			fflush(o->notice);
		}
	}
	for (;;) {
		struct pollfd p[2 + MCP_HTTP_LINGER] = { { .fd = lfd, .events = POLLIN },
							  { .fd = sfd, .events = POLLIN } };
		long long now = cli_mono_ms(), wait = -1;
		unsigned i;
		int c;

		for (i = 0; i < MCP_HTTP_LINGER; i++) {
			p[2 + i] = (struct pollfd){ .fd = hs->linger_fd[i], .events = POLLIN };
			if (hs->linger_fd[i] >= 0 && (wait < 0 || hs->linger_end[i] - now < wait))
				wait = hs->linger_end[i] > now ? hs->linger_end[i] - now : 0;
		}
		if (poll(p, 2 + MCP_HTTP_LINGER, (int)wait) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (p[1].revents)
			break; /* SIGINT/SIGTERM: done */
		now = cli_mono_ms();
		for (i = 0; i < MCP_HTTP_LINGER; i++)
			if (hs->linger_fd[i] >= 0 && (p[2 + i].revents || now >= hs->linger_end[i]))
				linger_drain(hs, i, now);
		if (!(p[0].revents & POLLIN))
			continue;
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			continue;
		conn_start(hs, c, &attr);
	}
	conns_stop(hs);
	for (unsigned i = 0; i < MCP_HTTP_LINGER; i++)
		if (hs->linger_fd[i] >= 0)
			linger_close(hs, i);
out:
	if (sfd >= 0)
		close(sfd);
	if (lfd >= 0)
		close(lfd);
	if (hs->stop[0] >= 0) {
		close(hs->stop[0]);
		close(hs->stop[1]);
	}
	pthread_attr_destroy(&attr);
	pthread_mutex_destroy(&hs->lock);
	free(hs->conns);
	free(hs);
	return r;
}
