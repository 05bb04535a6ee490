/* One HTTP request of the gateway's, read from its buffer: vmm's strict
 * parser (vmm/base/http.h) for the request line, the headers and a body
 * of Content-Length bytes, and here what E2B's SDKs send beyond it: a
 * query string (envd's /files?path=...) and a chunked body (RFC 9112
 * section 7.1; decoded in place, its Transfer-Encoding line rewritten as
 * the Content-Length the parser then reads). Also the query's
 * percent-decoding (RFC 3986 section 2.1) and base64 (RFC 4648), which
 * Connect's JSON uses for bytes. Pure (cli/e2b/e2b_priv.h). */
#include "cli/e2b/e2b_priv.h"
#include "vmm/base/http.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The Transfer-Encoding line of the head buf[0..head_len): its start and
 * length without CRLF, or NULL. */
static char *te_line(char *buf, size_t head_len, size_t *n)
{
	char *p = memmem(buf, head_len, "\r\n", 2);

	while (p && (size_t)(p + 2 - buf) < head_len) {
		char *l = p + 2, *e = memmem(l, head_len - (size_t)(l - buf), "\r\n", 2);

		if (!e)
			return NULL;
		if (e - l > 18 && !strncasecmp(l, "Transfer-Encoding:", 18)) {
			*n = (size_t)(e - l);
			return l;
		}
		p = e;
	}
	return NULL;
}

/* The query of the request line's target, if any. */
static int target_query(const char *buf, size_t len, struct e2b_req *r)
{
	const char *sp = memchr(buf, ' ', len), *end, *q;

	r->query[0] = '\0';
	if (!sp)
		return 0;
	end = memchr(sp + 1, ' ', len - (size_t)(sp + 1 - buf));
	if (!end)
		return 0;
	q = memchr(sp + 1, '?', (size_t)(end - sp - 1));
	if (!q)
		return 0;
	if ((size_t)(end - q - 1) >= sizeof(r->query))
		return -E2BIG;
	memcpy(r->query, q + 1, (size_t)(end - q - 1));
	r->query[end - q - 1] = '\0';
	return 0;
}

static long refuse(struct e2b_req *r, int status, const char *why)
{
	r->status = status;
	r->why = why;
	return -EPROTO;
}

long e2b_req_parse(char *buf, size_t len, size_t max_body, struct e2b_req *r)
{
	struct http_request h;
	char *hend = memmem(buf, len, "\r\n\r\n", 4), *te;
	size_t head_len, ten = 0, consumed = 0;
	long n;

	memset(r, 0, sizeof(*r));
	if (hend && (te = te_line(buf, head_len = (size_t)(hend + 4 - buf), &ten))) {
		char v[64];
		size_t blen;
		long k;
		int w;

		if (http_header(buf, head_len, "Transfer-Encoding", v, sizeof(v)) || strcasecmp(v, "chunked"))
			return refuse(r, 501, "only the chunked transfer coding is understood");
		if (http_header(buf, head_len, "Content-Length", v, sizeof(v)) != -ENOENT)
			return refuse(r, 400, "both Transfer-Encoding and Content-Length");
		k = e2b_chunked_decode(buf + head_len, len - head_len, max_body, &blen);
		if (k == -E2BIG)
			return refuse(r, 413, "the request body is larger than the server's limit");
		if (k < 0)
			return refuse(r, 400, "a malformed chunked body");
		if (k == 0) {
			/* more to come; a client waiting for 100 says so */
			r->expect_continue = http_header(buf, head_len, "Expect", v, sizeof(v)) == 0 &&
					     !strcasecmp(v, "100-continue");
			return 0;
		}
		/* "Content-Length:N" and spaces in the line's place (a value's
		 * trailing whitespace is not part of it) */
		w = snprintf(v, sizeof(v), "Content-Length:%zu", blen);
		if (w < 0 || (size_t)w > ten)
			return refuse(r, 413, "the request body is larger than the server's limit");
		memcpy(te, v, (size_t)w);
		memset(te + w, ' ', ten - (size_t)w);
		consumed = head_len + (size_t)k;
		len = head_len + blen;
	}
	n = http_parse_limit(buf, len, &h, max_body);
	if (n < 0)
		return refuse(r, h.too_large ? 413 : h.status, h.why);
	if (n == 0) {
		r->expect_continue = h.expect_continue;
		return 0;
	}
	if (target_query(buf, (size_t)n, r))
		return refuse(r, 414, "the query string is too long");
	snprintf(r->method, sizeof(r->method), "%s", h.method_name);
	snprintf(r->path, sizeof(r->path), "%s", h.path);
	r->head = buf;
	r->head_len = (size_t)n - h.body_len;
	r->body = h.body;
	r->body_len = h.body_len;
	r->keep_alive = h.keep_alive;
	return consumed ? (long)consumed : n;
}

int e2b_req_header(const struct e2b_req *r, const char *name, char *out, size_t len)
{
	return http_header(r->head, r->head_len, name, out, len);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes s[0..n) into out (NUL-terminated). */
static int pct_decode(const char *s, size_t n, char *out, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			int h, l;

			if (i + 2 >= n)
				return -EINVAL;
			h = hexval(s[i + 1]);
			l = hexval(s[i + 2]);
			if (h < 0 || l < 0 || (h == 0 && l == 0))
				return -EINVAL;
			c = (char)(h << 4 | l);
			i += 2;
		}
		if (o + 1 >= len)
			return -E2BIG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

int e2b_query_get(const char *query, const char *key, char *out, size_t len)
{
	const char *p = query;

	while (*p) {
		size_t n = strcspn(p, "&"), kl = strcspn(p, "=&");
		char k[128];

		/* kl <= n: "key=value", or "key" alone (an empty value) */
		if (pct_decode(p, kl, k, sizeof(k)) == 0 && !strcmp(k, key))
			return kl < n ? pct_decode(p + kl + 1, n - kl - 1, out, len) : pct_decode("", 0, out, len);
		p += n;
		if (*p == '&')
			p++;
	}
	return -ENOENT;
}

size_t e2b_b64_encode(const void *in, size_t n, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

long e2b_b64_decode(const char *in, size_t n, void *out, size_t cap)
{
	int k;

	if (n % 4 || n / 4 * 3 > cap)
		return -EINVAL;
	if (n == 0)
		return 0;
	k = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
	if (k < 0)
		return -EINVAL;
	/* EVP_DecodeBlock counts the padding's zero bytes: take them off */
	if (in[n - 1] == '=')
		k--;
	if (in[n - 2] == '=')
		k--;
	return k;
}
