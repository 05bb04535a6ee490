/* The MCP streamable HTTP transport (MCP 2025-06-18, basic/transports:
 * "Streamable HTTP"; basic/authorization for the bearer token): one
 * endpoint, /mcp. A client POSTs each JSON-RPC message; a request gets its
 * response as one application/json body (this server never streams, which
 * the transport allows), a notification or response 202 Accepted. GET
 * (a server-initiated stream) is 405: this server sends nothing unasked.
 * initialize opens a session (Mcp-Session-Id), which every later request
 * carries; DELETE ends it. Every request carries a sandbox access token
 * (`Authorization: Bearer vmt_...`, cli/tokens.h) with the scope mcp, read
 * from the sandbox's tokens file at each request, so revocation and expiry
 * take effect at once; a session stays bound to the token that opened it.
 * An Origin header that is not a loopback origin (or one --origin names)
 * is refused (403), against DNS rebinding; the address is loopback unless
 * --allow-remote. Connections are served one at a time. */
#define _GNU_SOURCE
#include "mcp.h"
#include "jsonrpc.h"
#include "tokens.h"
#include "../guest-init/proto.h"
#include "../vmm/http.h"
#include "../vmm/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MCP_SESSIONS 64
#define CONN_IDLE_S 30

struct session {
	char id[33];                  /* 128 random bits, hex; "" when free */
	char token_id[TOKEN_ID_LEN + 1];
	struct mcp_server st;
	long long last_used;
};

struct http_server {
	struct mcp_server proto;      /* the template a session starts from */
	const struct mcp_http_opts *o;
	struct session sessions[MCP_SESSIONS];
};

static int send_response(int fd, int status, const char *extra, const char *type, const char *body, size_t len,
			 int keep_alive)
{
	char head[1024];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nServer: vmm\r\n%s%s%sContent-Length: %zu\r\nCache-Control: no-store\r\n%s\r\n",
			 status, http_reason(status), type ? "Content-Type: " : "", type ? type : "", type ? "\r\n" : "",
			 len, keep_alive ? "" : "Connection: close\r\n");

	if (n < 0 || (size_t)n >= sizeof(head))
		return -E2BIG;
	/* extra headers go before Content-Length's line: rebuild with them */
	if (extra && *extra) {
		char *cl = strstr(head, "Content-Length:");
		char tail[512];

		snprintf(tail, sizeof(tail), "%s", cl);
		n = snprintf(cl, sizeof(head) - (size_t)(cl - head), "%s%s", extra, tail) + (int)(cl - head);
		if ((size_t)n >= sizeof(head))
			return -E2BIG;
	}
	if (write_full(fd, head, (size_t)n) || (len && write_full(fd, body, len)))
		return -EPIPE;
	return 0;
}

/* A JSON-RPC error as an HTTP answer (id null: the message was not read). */
static int send_error(int fd, int status, const char *extra, int code, const char *msg, int keep_alive)
{
	char body[1024];
	struct json_writer w;

	jw_init(&w, body, sizeof(body));
	jsonrpc_error(&w, "null", code, msg, NULL);
	return send_response(fd, status, extra, "application/json", body, jw_done(&w) ? w.len : 0, keep_alive);
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

/* One request. 0 to go on with the connection, <0 to close it. */
static int serve_request(struct http_server *hs, int fd, const char *head, size_t head_len,
			 const struct http_request *req)
{
	char val[1024], extra[512], *www = extra;
	const struct token_rec *rec = NULL;
	struct token_rec *recs = NULL;
	struct session *sess = NULL;
	enum token_verdict v;
	struct mcp_reply rep;
	size_t nrecs = 0;
	int ka = req->keep_alive, r;

	extra[0] = '\0';
	if (strcmp(req->path, "/mcp"))
		return send_error(fd, 404, NULL, JSONRPC_INVALID_REQUEST, "no such endpoint: the MCP endpoint is /mcp", ka);
	r = http_header(head, head_len, "Origin", val, sizeof(val));
	if (r != -ENOENT && (r || !origin_ok(val, hs->o->origins)))
		return send_error(fd, 403, NULL, JSONRPC_INVALID_REQUEST, "Origin not allowed", ka);
	/* the token: re-read each time, so rm and expiry act at once */
	r = http_header(head, head_len, "Authorization", val, sizeof(val));
	if (r || strncasecmp(val, "Bearer ", 7)) {
		snprintf(www, sizeof(extra), "WWW-Authenticate: Bearer realm=\"vmm\"\r\n");
		return send_error(fd, 401, extra, JSONRPC_INVALID_REQUEST,
				  "an access token is required (Authorization: Bearer, vmm token create)", ka);
	}
	if ((r = token_load(hs->o->sandbox_dir, &recs, &nrecs))) {
		log_err("mcp: the sandbox's tokens file: %s", strerror(-r));
		return send_error(fd, 500, NULL, JSONRPC_INTERNAL_ERROR, "the tokens file cannot be read", ka);
	}
	v = token_check(recs, nrecs, val + 7, (long long)time(NULL), TOKEN_SCOPE_MCP, &rec);
	if (v == TOKEN_UNKNOWN || v == TOKEN_EXPIRED) {
		free(recs);
		snprintf(www, sizeof(extra), "WWW-Authenticate: Bearer realm=\"vmm\", error=\"invalid_token\", "
					     "error_description=\"%s\"\r\n", token_verdict_str(v));
		return send_error(fd, 401, extra, JSONRPC_INVALID_REQUEST, token_verdict_str(v), ka);
	}
	if (v == TOKEN_OUT_OF_SCOPE) {
		free(recs);
		snprintf(www, sizeof(extra), "WWW-Authenticate: Bearer realm=\"vmm\", error=\"insufficient_scope\", "
					     "scope=\"mcp\"\r\n");
		return send_error(fd, 403, extra, JSONRPC_FORBIDDEN, "the token lacks the scope mcp", ka);
	}
	hs->proto.scopes = rec->scopes;
	{
		char tid[TOKEN_ID_LEN + 1];

		memcpy(tid, rec->id, sizeof(tid));
		free(recs);
		r = http_header(head, head_len, "Mcp-Session-Id", val, sizeof(val));
		if (!r) {
			sess = session_find(hs, val);
			/* another token's session is nobody's for this caller */
			if (!sess || strcmp(sess->token_id, tid))
				return send_error(fd, 404, NULL, JSONRPC_INVALID_REQUEST,
						  "unknown or ended session: initialize again", ka);
			sess->st.scopes = hs->proto.scopes;
			sess->last_used = (long long)time(NULL);
		} else if (r != -ENOENT) {
			return send_error(fd, 400, NULL, JSONRPC_INVALID_REQUEST, "a malformed Mcp-Session-Id", ka);
		}
		if (req->method == HTTP_OTHER && !strcmp(req->method_name, "DELETE")) {
			if (!sess)
				return send_error(fd, 400, NULL, JSONRPC_INVALID_REQUEST, "DELETE needs an Mcp-Session-Id", ka);
			memset(sess, 0, sizeof(*sess));
			return send_response(fd, 204, NULL, NULL, NULL, 0, ka);
		}
		if (req->method != HTTP_OTHER || strcmp(req->method_name, "POST"))
			return send_response(fd, 405, "Allow: POST, DELETE\r\n", NULL, NULL, 0, ka);
		r = http_header(head, head_len, "MCP-Protocol-Version", val, sizeof(val));
		if (r == 0 && !mcp_protocol_known(val))
			return send_error(fd, 400, NULL, JSONRPC_INVALID_REQUEST, "unsupported MCP-Protocol-Version", ka);
		r = http_header(head, head_len, "Accept", val, sizeof(val));
		if (r == 0 && !accept_ok(val))
			return send_error(fd, 406, NULL, JSONRPC_INVALID_REQUEST,
					  "Accept must include application/json", ka);
		if (!req->body_len)
			return send_error(fd, 400, NULL, JSONRPC_PARSE_ERROR, "an empty body: POST one JSON-RPC message", ka);
		if (!sess) {
			/* Only initialize opens a session; anything else needs one. */
			char arena_buf[65536];
			struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
			struct jsonrpc_msg m;
			const char *why;

			if (jsonrpc_parse(req->body, req->body_len, &ar, &m, &why) == 0 && m.method &&
			    !strcmp(m.method, "initialize")) {
				sess = session_new(hs, tid);
				if (!sess)
					return send_error(fd, 500, NULL, JSONRPC_INTERNAL_ERROR, "no session", ka);
				sess->st.scopes = hs->proto.scopes;
				sess->last_used = (long long)time(NULL);
			} else if (jsonrpc_parse(req->body, req->body_len, &ar, &m, &why) == 0 && m.method &&
				   !strcmp(m.method, "ping")) {
				sess = NULL; /* ping is answered without a session */
			} else {
				return send_error(fd, 400, NULL, JSONRPC_INVALID_REQUEST,
						  "Mcp-Session-Id required: send initialize first", ka);
			}
		}
	}
	{
		struct mcp_server tmp = hs->proto;

		r = mcp_handle(sess ? &sess->st : &tmp, req->body, req->body_len, &rep);
	}
	if (r)
		return send_error(fd, 500, NULL, JSONRPC_INTERNAL_ERROR, strerror(-r), ka);
	if (rep.initialize && sess)
		snprintf(extra, sizeof(extra), "Mcp-Session-Id: %s\r\n", sess->id);
	else if (sess && !sess->st.initialized)
		memset(sess, 0, sizeof(*sess)); /* a failed initialize opens nothing */
	if (!rep.text)
		return send_response(fd, 202, extra, NULL, NULL, 0, ka);
	r = send_response(fd, rep.forbidden ? 403 : 200, extra, "application/json", rep.text, rep.len, ka);
	free(rep.text);
	return r;
}

static void serve_conn(struct http_server *hs, int fd)
{
	size_t cap = HTTP_MAX_HEADER + MCP_MESSAGE_MAX, len = 0;
	char *buf = malloc(cap);
	struct timeval tv = { .tv_sec = CONN_IDLE_S };

	if (!buf)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	for (;;) {
		struct http_request req;
		int n = http_parse_limit(buf, len, &req, MCP_MESSAGE_MAX);
		ssize_t k;

		if (n < 0) {
			send_error(fd, req.status, NULL, JSONRPC_INVALID_REQUEST, req.why, 0);
			break;
		}
		if (n > 0) {
			size_t head_len = (size_t)n - req.body_len;

			if (serve_request(hs, fd, buf, head_len, &req) || !req.keep_alive)
				break;
			memmove(buf, buf + n, len - (size_t)n);
			len -= (size_t)n;
			continue;
		}
		if (req.expect_continue && write_full(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
			break;
		if (len == cap)
			break;
		k = read(fd, buf + len, cap - len);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	free(buf);
}

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

static int listen_on(const char *spec, int allow_remote)
{
	char host[256];
	const char *port = NULL, *colon = strrchr(spec, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }, *ai;
	int fd, one = 1, r;

	if (!colon && *spec && strspn(spec, "0123456789") == strlen(spec)) {
		/* a port alone: loopback */
		snprintf(host, sizeof(host), "127.0.0.1");
		port = spec;
		goto resolve;
	}
	if (!colon || (size_t)(colon - spec) >= sizeof(host)) {
		log_err("mcp: --listen wants ADDRESS:PORT (127.0.0.1:8080, [::1]:8080)");
		return -EINVAL;
	}
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	port = colon + 1;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
resolve:
	r = getaddrinfo(host, port, &hints, &ai);
	if (r) {
		log_err("mcp: --listen %s: %s (a numeric address and port)", spec, gai_strerror(r));
		return -EINVAL;
	}
	if (!is_loopback(ai->ai_addr) && !allow_remote) {
		log_err("mcp: %s is not a loopback address: add --allow-remote to serve it (tokens travel in "
			"clear over plain HTTP: put TLS in front)", host);
		freeaddrinfo(ai);
		return -EPERM;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0) {
		r = -errno;
		log_err("mcp: --listen %s: %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return r;
	}
	freeaddrinfo(ai);
	return fd;
}

int mcp_serve_http(struct mcp_server *s, const struct mcp_http_opts *o)
{
	struct http_server *hs = calloc(1, sizeof(*hs));
	sigset_t sigs;
	int lfd, sfd = -1, r = 0;

	if (!hs)
		return -ENOMEM;
	hs->proto = *s;
	hs->o = o;
	lfd = listen_on(o->listen, o->allow_remote);
	if (lfd < 0) {
		free(hs);
		return lfd;
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char a[INET6_ADDRSTRLEN] = "?";
		unsigned port = 0;

		getsockname(lfd, (struct sockaddr *)&ss, &sl);
		if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, a, sizeof(a));
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, a, sizeof(a));
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
		/* one line on stderr that scripts (and the tests) can wait for */
		fprintf(stderr, "vmm mcp: serving sandbox %s on http://%s%s%s:%u/mcp\n", s->name,
			ss.ss_family == AF_INET6 ? "[" : "", a, ss.ss_family == AF_INET6 ? "]" : "", port);
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
			break; /* SIGINT/SIGTERM: done */
		if (!(p[0].revents & POLLIN))
			continue;
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		serve_conn(hs, c);
		close(c);
	}
	if (sfd >= 0)
		close(sfd);
	close(lfd);
	free(hs);
	return r;
}
