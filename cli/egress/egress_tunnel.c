/* The egress proxy inside tunnels, pure half: see egress_tunnel.h. */
#include "cli/egress/egress_tunnel.h"
#include "vmm/base/http.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the ClientHello ------------------------------------------------------ */

/* A bounds-checked cursor over untrusted bytes. */
struct rd {
	const unsigned char *p;
	size_t n;
	int bad;
};

static unsigned get(struct rd *r, size_t k)
{
	unsigned v = 0;

	if (r->bad || r->n < k) {
		r->bad = 1;
		return 0;
	}
	while (k--) {
		v = v << 8 | *r->p++;
		r->n--;
	}
	return v;
}

/* k bytes as a sub-cursor. */
static struct rd sub(struct rd *r, size_t k)
{
	struct rd s = { .p = r->p, .n = k, .bad = r->bad || r->n < k };

	if (s.bad) {
		r->bad = 1;
		s.n = 0;
		return s;
	}
	r->p += k;
	r->n -= k;
	return s;
}

int eg_sni_ext(const unsigned char *p, size_t n, char *out)
{
	struct rd r = { .p = p, .n = n }, list;
	int found = 0;

	/* ServerNameList: server_name_list<1..2^16-1> (RFC 6066 section 3) */
	list = sub(&r, get(&r, 2));
	if (r.bad || r.n || !list.n)
		return -EINVAL;
	while (list.n) {
		unsigned type = get(&list, 1);
		struct rd name = sub(&list, get(&list, 2));
		size_t i;

		/* host_name (0) is the only type; one of each type */
		if (list.bad || type != 0 || found || !name.n || name.n > EG_MAX_HOST)
			return -EINVAL;
		for (i = 0; i < name.n; i++) {
			unsigned char c = name.p[i];

			if (!isalnum(c) && c != '-' && c != '.' && c != '_')
				return -EINVAL;
			out[i] = (char)tolower(c);
		}
		out[i] = '\0';
		if (out[0] == '.' || out[i - 1] == '.' || strstr(out, ".."))
			return -EINVAL;
		found = 1;
	}
	return 0;
}

int eg_hello_sni(const unsigned char *buf, size_t len, char *out)
{
	struct rd rec, hs, ch, exts;
	unsigned rl, hl;
	int seen = 0, rc = -ENOENT;

	/* TLSPlaintext: handshake (22), legacy_record_version 3.x, length
	 * up to 2^14 (RFC 8446 section 5.1) */
	if ((len >= 1 && buf[0] != 22) || (len >= 2 && buf[1] != 3))
		return -EINVAL;
	if (len < 5)
		return -EAGAIN;
	rl = (unsigned)buf[3] << 8 | buf[4];
	if (!rl || rl > 16384)
		return -EINVAL;
	if (len < 5 + (size_t)rl)
		return -EAGAIN;
	rec = (struct rd){ .p = buf + 5, .n = rl };
	/* Handshake: client_hello (1), uint24 length, all in this record */
	if (get(&rec, 1) != 1)
		return -EINVAL;
	hl = get(&rec, 3);
	if (rec.bad || hl > rec.n)
		return -EINVAL;
	hs = sub(&rec, hl);
	ch = hs;
	get(&ch, 2);                   /* legacy_version */
	sub(&ch, 32);                  /* random */
	hl = get(&ch, 1);              /* legacy_session_id<0..32> */
	if (hl > 32)
		return -EINVAL;
	sub(&ch, hl);
	hl = get(&ch, 2);              /* cipher_suites<2..2^16-2> */
	if (hl < 2 || hl % 2)
		return -EINVAL;
	sub(&ch, hl);
	hl = get(&ch, 1);              /* legacy_compression_methods<1..2^8-1> */
	if (!hl)
		return -EINVAL;
	sub(&ch, hl);
	if (ch.bad)
		return -EINVAL;
	if (!ch.n)
		return -ENOENT;        /* no extensions at all (TLS 1.0-era) */
	exts = sub(&ch, get(&ch, 2));
	if (ch.bad || ch.n)
		return -EINVAL;
	while (exts.n) {
		unsigned type = get(&exts, 2);
		struct rd body = sub(&exts, get(&exts, 2));

		if (exts.bad)
			return -EINVAL;
		if (type == 0) {       /* server_name, at most once (RFC 8446 section 4.2) */
			if (seen++)
				return -EINVAL;
			rc = eg_sni_ext(body.p, body.n, out);
			if (rc)
				return rc;
		}
	}
	return rc;
}

/* ---- the upstream's response --------------------------------------------- */

static int hdr_is(const char *p, size_t n, const char *name)
{
	return n == strlen(name) && !strncasecmp(p, name, n);
}

int eg_parse_response(const char *buf, size_t len, struct eg_response *r)
{
	size_t scan = len < EG_MAX_HEAD ? len : EG_MAX_HEAD, i;
	const char *end, *p, *eol;
	int te = 0;

	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	end = memmem(buf, scan, "\r\n\r\n", 4);
	if (!end)
		return len >= EG_MAX_HEAD ? -E2BIG : -EAGAIN;
	r->head_len = (size_t)(end - buf) + 4;
	if (memchr(buf, '\0', r->head_len))
		return -EINVAL;
	/* status-line = HTTP-version SP status-code SP [ reason-phrase ] */
	if (r->head_len < 16 || memcmp(buf, "HTTP/1.", 7) || (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ' ||
	    (buf[12] != ' ' && buf[12] != '\r'))
		return -EINVAL;
	for (i = 9; i < 12; i++) {
		if (!isdigit((unsigned char)buf[i]))
			return -EINVAL;
		r->status = r->status * 10 + (buf[i] - '0');
	}
	if (r->status < 100)
		return -EINVAL;
	if (buf[7] == '0')
		r->close = 1;
	eol = memmem(buf, r->head_len, "\r\n", 2);
	for (p = eol + 2; p < end + 2; p = eol + 2) {
		const char *colon, *v, *ve;
		size_t nl;

		eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || colon == p || *p == ' ' || *p == '\t')
			return -EINVAL;
		nl = (size_t)(colon - p);
		for (v = p; v < colon; v++)
			if (*v == ' ' || *v == '\t' || (unsigned char)*v < 0x21 || *v == 0x7f)
				return -EINVAL;
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++) {
		}
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--) {
		}
		for (i = 0; v + i < ve; i++)
			if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
				return -EINVAL;
		if (hdr_is(p, nl, "Content-Length")) {
			int64_t n = 0;

			if (v == ve || ve - v > 15)
				return -EINVAL;
			for (i = 0; v + i < ve; i++) {
				if (!isdigit((unsigned char)v[i]))
					return -EINVAL;
				n = n * 10 + (v[i] - '0');
			}
			if (r->content_length >= 0 && r->content_length != n)
				return -EINVAL;
			r->content_length = n;
		} else if (hdr_is(p, nl, "Transfer-Encoding")) {
			const char *last = ve;

			/* the last coding decides (RFC 9112 section 6.3) */
			while (last > v && last[-1] != ',')
				last--;
			while (last < ve && (*last == ' ' || *last == '\t'))
				last++;
			te = 1;
			r->chunked = ve - last == 7 && !strncasecmp(last, "chunked", 7);
		} else if (hdr_is(p, nl, "Connection") && http_has_token(v, (size_t)(ve - v), "close")) {
			r->close = 1;
		}
	}
	if (te) {
		/* Transfer-Encoding overrides Content-Length, and such a
		 * message ends the connection (RFC 9112 section 6.3, 3.) */
		if (r->content_length >= 0)
			r->close = 1;
		r->content_length = -1;
		r->until_close = !r->chunked;
	}
	return 0;
}

int eg_response_body(const char *method, const struct eg_response *r)
{
	if (!strcmp(method, "HEAD") || r->status < 200 || r->status == 204 || r->status == 304)
		return EG_BODY_NONE;
	if (r->chunked)
		return EG_BODY_CHUNKED;
	if (r->until_close || r->content_length < 0)
		return EG_BODY_CLOSE;
	return r->content_length ? EG_BODY_LENGTH : EG_BODY_NONE;
}

long eg_downstream_head(const char *head, const struct eg_response *r, int close, char *out, size_t len)
{
	const char *p = head, *end = head + r->head_len - 2, *eol;
	size_t used = 0;

	for (; p < end; p = eol + 2) {
		const char *colon;
		size_t n;

		eol = memmem(p, (size_t)(end - p), "\r\n", 2);
		colon = p == head ? NULL : memchr(p, ':', (size_t)(eol - p));
		if (colon && (hdr_is(p, (size_t)(colon - p), "Connection") ||
			      hdr_is(p, (size_t)(colon - p), "Keep-Alive") ||
			      hdr_is(p, (size_t)(colon - p), "Proxy-Connection")))
			continue;
		n = (size_t)(eol - p) + 2;
		if (n > len - used)
			return -E2BIG;
		memcpy(out + used, p, n);
		used += n;
	}
	if (close) {
		if (19 > len - used)
			return -E2BIG;
		memcpy(out + used, "Connection: close\r\n", 19);
		used += 19;
	}
	if (2 > len - used)
		return -E2BIG;
	memcpy(out + used, "\r\n", 2);
	return (long)(used + 2);
}

/* ---- the request loop ---------------------------------------------------- */

struct loop {
	const struct eg_tunnel *t;
	char in[EG_MAX_HEAD];       /* the guest's bytes: a head, a body, the next request */
	size_t in_len;
	char rb[EG_MAX_HEAD];       /* the upstream's */
	size_t rb_len;
	char out[EG_MAX_HEAD + EG_MAX_CRED + 256];
	char path[512];
	struct eg_request req;
	struct eg_logrec lg;
	unsigned served;
	size_t consumed;  /* of in[]: the request, once its body is sent */
	int retry_ok;     /* no response byte yet on a kept connection: the caller may send again */
	int up_clean;     /* the upstream connection may serve another request */
};

static void finish(struct loop *L)
{
	L->t->log(L->t->ctx, &L->lg);
	L->served++;
}

static uint64_t now(const struct eg_tunnel *t)
{
	return t->now_ns ? t->now_ns(t->ctx) : 0;
}

/* The proxy's own answer inside the tunnel. */
static void answer(struct loop *L, int status, const char *reason, int close)
{
	static const struct { int code; const char *text; } texts[] = {
		{ 400, "Bad Request" }, { 403, "Forbidden" }, { 429, "Too Many Requests" },
		{ 431, "Request Header Fields Too Large" }, { 502, "Bad Gateway" },
		{ 503, "Service Unavailable" }, { 504, "Gateway Timeout" },
	};
	const char *text = "Error";
	char msg[512];
	size_t i;
	int n;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (texts[i].code == status)
			text = texts[i].text;
	L->lg.status = status;
	L->lg.reason = reason;
	n = snprintf(msg, sizeof(msg),
		     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%s"
		     "X-Vmm-Egress: %s\r\n\r\nvmm egress: %s\n",
		     status, text, strlen(reason) + 13, close ? "Connection: close\r\n" : "", reason, reason);
	if (n > 0 && (size_t)n < sizeof(msg) && !L->t->guest.write(L->t->guest.ctx, msg, (size_t)n))
		L->lg.bytes_down += (uint64_t)n;
}

static void drop_head(struct loop *L, size_t n)
{
	memmove(L->in, L->in + n, L->in_len - n);
	L->in_len -= n;
}

/* The guest asked to close after this request. */
static int wants_close(const struct eg_request *r, const char *head)
{
	const char *eol = memchr(head, '\n', r->head_len);
	unsigned i;

	if (eol && eol - head >= 2 && eol[-2] == '0')
		return 1; /* HTTP/1.0: it gets close, keep-alive asked for or not */
	for (i = 0; i < r->nr_headers; i++)
		if (hdr_is(r->h[i].name, r->h[i].name_len, "Connection") &&
		    http_has_token(r->h[i].value, r->h[i].value_len, "close"))
			return 1;
	return 0;
}

/* The request body, from what followed the head and then the guest, to
 * up. 0, or the status to answer (0 with lg.status 0 if the guest left). */
static int send_body(struct loop *L, const struct eg_stream *up)
{
	const struct eg_tunnel *t = L->t;
	size_t off = L->req.head_len;
	int64_t left = L->req.content_length > 0 ? L->req.content_length : 0;
	int done = !L->req.chunked && !left;
	struct eg_chunked ck;

	eg_chunked_init(&ck);
	while (!done) {
		size_t take;

		if (off == L->in_len) {
			long n = t->guest.read(t->guest.ctx, L->in, sizeof(L->in));

			off = L->in_len = 0;
			if (n <= 0) {
				L->lg.reason = "the sandbox stopped sending the body";
				return -1;
			}
			L->in_len = (size_t)n;
		}
		if (L->req.chunked) {
			long k = eg_chunked_feed(&ck, L->in + off, L->in_len - off, &done);

			if (k < 0)
				return 400;
			take = (size_t)k;
		} else {
			take = L->in_len - off < (uint64_t)left ? L->in_len - off : (size_t)left;
			left -= (int64_t)take;
			done = !left;
		}
		if (take && up->write(up->ctx, L->in + off, take))
			return 502;
		L->lg.bytes_up += take;
		off += take;
	}
	L->consumed = off; /* what follows is the next request */
	return 0;
}

/* The response, head rewritten, body relayed as framed. 1 if the tunnel
 * must end after it, -1 if it broke, -2 (nothing answered to the guest)
 * if retry_ok and the upstream closed before a byte of it. */
static int relay_response(struct loop *L, const struct eg_stream *up, int close)
{
	const struct eg_tunnel *t = L->t;
	struct eg_response resp;
	struct eg_chunked ck;
	int64_t left;
	size_t off;
	long dh;
	int mode, done, rc;

	L->rb_len = 0;
	for (;;) {
		rc = -EAGAIN;
		while (rc == -EAGAIN) {
			long n = up->read(up->ctx, L->rb + L->rb_len, sizeof(L->rb) - L->rb_len);

			if (n <= 0) {
				if (L->lg.status)
					return -1; /* after a 1xx */
				if (L->retry_ok && !L->rb_len && n != -ETIMEDOUT)
					return -2; /* a kept connection the upstream had closed */
				answer(L, n == -ETIMEDOUT ? 504 : 502,
				       n == -ETIMEDOUT ? "upstream did not answer in time" :
							 "upstream closed without an answer", 1);
				return -1;
			}
			L->rb_len += (size_t)n;
			rc = eg_parse_response(L->rb, L->rb_len, &resp);
		}
		if (rc || resp.status == 101) {
			answer(L, 502, "the upstream's response head is malformed", 1);
			return -1;
		}
		if (resp.status >= 200)
			break;
		/* 1xx (103 Early Hints...): passed on, then the real one */
		if (t->guest.write(t->guest.ctx, L->rb, resp.head_len))
			return -1;
		L->lg.bytes_down += resp.head_len;
		L->lg.status = resp.status;
		memmove(L->rb, L->rb + resp.head_len, L->rb_len - resp.head_len);
		L->rb_len -= resp.head_len;
	}
	mode = eg_response_body(L->req.method, &resp);
	/* The upstream's Connection: close is about its own connection (one
	 * per request here); the guest's ends only if the body is framed by
	 * the end of the connection. */
	close |= mode == EG_BODY_CLOSE;
	dh = eg_downstream_head(L->rb, &resp, close, L->out, sizeof(L->out));
	if (dh < 0) {
		answer(L, 502, "the upstream's response head is too large", 1);
		return -1;
	}
	if (t->guest.write(t->guest.ctx, L->out, (size_t)dh))
		return -1;
	L->lg.status = resp.status;
	L->lg.bytes_down += (uint64_t)dh;
	off = resp.head_len;
	left = resp.content_length;
	done = mode == EG_BODY_NONE;
	eg_chunked_init(&ck);
	while (!done) {
		size_t take;

		if (off == L->rb_len) {
			long n = up->read(up->ctx, L->rb, sizeof(L->rb));

			off = L->rb_len = 0;
			if (n == 0 && mode == EG_BODY_CLOSE)
				break;
			if (n <= 0) {
				L->lg.reason = "the upstream's response ended early";
				return -1;
			}
			L->rb_len = (size_t)n;
		}
		if (mode == EG_BODY_CHUNKED) {
			long k = eg_chunked_feed(&ck, L->rb + off, L->rb_len - off, &done);

			if (k < 0) {
				L->lg.reason = "the upstream's chunked body is malformed";
				return -1;
			}
			take = (size_t)k;
		} else if (mode == EG_BODY_LENGTH) {
			take = L->rb_len - off < (uint64_t)left ? L->rb_len - off : (size_t)left;
			left -= (int64_t)take;
			done = !left;
		} else {
			take = L->rb_len - off;
		}
		if (take && t->guest.write(t->guest.ctx, L->rb + off, take))
			return -1;
		L->lg.bytes_down += take;
		off += take;
	}
	/* Reusable: the upstream did not ask to close, the body was framed
	 * by its length or chunks, and nothing came after it. */
	L->up_clean = !resp.close && mode != EG_BODY_CLOSE && off == L->rb_len;
	return close;
}

/* One request. 0: the tunnel goes on; 1: it ends. */
static int serve_one(struct loop *L)
{
	const struct eg_tunnel *t = L->t;
	const struct eg_policy *pol = NULL;
	const struct eg_rule *rule;
	struct eg_stream up;
	const char *why = NULL;
	int r = -EAGAIN, has_body, close, st, reused, attempt, keep = 0;
	size_t pl;
	long hl;

	memset(&L->lg, 0, sizeof(L->lg));
	L->lg.t0_ns = now(t);
	L->lg.host = t->host;
	L->lg.port = t->port;
	L->lg.tls = "intercept";
	L->lg.rule = -1;
	L->lg.method = "-";
	L->lg.path = "";
	if (L->in_len)
		r = eg_parse_tunneled(L->in, L->in_len, t->host, t->port, &L->req, &why);
	while (r == -EAGAIN) {
		long n = t->guest.read(t->guest.ctx, L->in + L->in_len, sizeof(L->in) - L->in_len);

		if (n <= 0) {
			if (!L->in_len)
				return 1; /* between requests: the guest is done */
			L->lg.reason = "the sandbox went away in the middle of a request head";
			goto logit;
		}
		L->in_len += (size_t)n;
		r = eg_parse_tunneled(L->in, L->in_len, t->host, t->port, &L->req, &why);
	}
	if (r) {
		answer(L, r == -E2BIG ? 431 : 400, why, 1);
		goto logit;
	}
	L->lg.method = L->req.method;
	pl = strcspn(L->req.path, "?");
	pl = pl < L->req.path_len ? pl : L->req.path_len;
	pl = pl < sizeof(L->path) - 1 ? pl : sizeof(L->path) - 1;
	memcpy(L->path, L->req.path, pl);
	L->path[pl] = '\0';
	L->lg.path = L->path;
	L->lg.path_len = pl;
	has_body = L->req.chunked || L->req.content_length > 0;
	close = wants_close(&L->req, L->in);
	/* Refused: answered in the tunnel, which goes on if nothing of the
	 * request is left to skip. */
	if (t->admit && (st = t->admit(t->ctx))) {
		answer(L, st, "request rate limit reached", has_body || close);
		goto refused;
	}
	/* The policy of this request: the one in force now, kept to its end. */
	pol = t->hold ? t->hold(t->ctx, &L->lg.version) : t->policy;
	rule = pol ? eg_policy_match(pol, &L->req, &why) : NULL;
	if (!rule) {
		answer(L, 403, pol ? why : "no policy", has_body || close);
		goto refused;
	}
	L->lg.rule = (int)(rule - pol->rules);
	/* A kept connection may have been closed by the upstream while idle:
	 * then a request without a body (nothing of it consumed) goes once
	 * more, on a new connection (RFC 9112 section 9.3.1). */
	for (attempt = 0;; attempt++) {
		hl = eg_upstream_head(&L->req, rule, 1, L->out, sizeof(L->out));
		if (hl < 0) {
			answer(L, 431, "request head too large", 1);
			goto logit;
		}
		reused = 0;
		if ((st = t->open(t->ctx, rule, &L->req, attempt > 0, &up, &reused, &why))) {
			explicit_bzero(L->out, (size_t)hl);
			answer(L, st, why, 1);
			goto logit;
		}
		reused = reused && !attempt;
		r = up.write(up.ctx, L->out, (size_t)hl);
		explicit_bzero(L->out, (size_t)hl);
		if (r && !reused) {
			answer(L, 502, "upstream closed the connection", 1);
			r = 1;
			goto out_up;
		}
		if (!r) {
			L->lg.injected = rule->cred != NULL;
			if (L->req.expect_continue && has_body && L->in_len == L->req.head_len) {
				static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

				if (!t->guest.write(t->guest.ctx, cont, sizeof(cont) - 1))
					L->lg.bytes_down += sizeof(cont) - 1;
			}
			st = send_body(L, &up);
			if (st) {
				const char *bad = st == 400 ? "broken chunked body" : "upstream closed the connection";

				if (st > 0)
					answer(L, st, bad, 1);
				r = 1;
				goto out_up;
			}
			L->retry_ok = reused && !has_body;
			L->up_clean = 0;
			r = relay_response(L, &up, close);
			if (r != -2)
				break;
		}
		t->close(t->ctx, &up, 0);
	}
	/* Not after a chunked request body: its chunks go up as the guest
	 * framed them, and where the upstream reads them differently from
	 * eg_chunked_feed the rest would be a request nobody checked on a
	 * connection kept for the next. */
	keep = r >= 0 && L->up_clean && !L->req.chunked;
	r = r != 0;
	if (!r)
		drop_head(L, L->consumed);
out_up:
	t->close(t->ctx, &up, keep);
	finish(L);
	if (t->unhold && pol)
		t->unhold(t->ctx, pol);
	return r;
refused:
	finish(L);
	if (t->unhold && pol)
		t->unhold(t->ctx, pol);
	if (has_body || close)
		return 1;
	drop_head(L, L->req.head_len);
	return 0;
logit:
	finish(L);
	if (t->unhold && pol)
		t->unhold(t->ctx, pol);
	return 1;
}

unsigned eg_tunnel_serve(const struct eg_tunnel *t)
{
	struct loop *L = calloc(1, sizeof(*L));
	unsigned n;

	if (!L)
		return 0;
	L->t = t;
	while (!serve_one(L)) {
	}
	n = L->served;
	explicit_bzero(L, sizeof(*L));
	free(L);
	return n;
}
