/* HTTP/1.1 request parsing and responses: see http.h (RFC 9112). */
#include "vmm/base/http.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int refuse(struct http_request *req, int status, const char *why)
{
	req->status = status;
	req->why = why;
	return -EPROTO;
}

/* tchar (RFC 9110 5.6.2) */
static int is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Finds "\r\n" in [p, end); NULL if absent. */
static const char *find_crlf(const char *p, const char *end)
{
	for (; p + 1 < end; p++)
		if (p[0] == '\r' && p[1] == '\n')
			return p;
	return NULL;
}

static int parse_request_line(const char *p, const char *end, struct http_request *req,
			      int *http10)
{
	const char *sp1, *sp2, *q;
	size_t n;

	sp1 = memchr(p, ' ', (size_t)(end - p));
	if (!sp1 || sp1 == p)
		return refuse(req, 400, "malformed request line");
	n = (size_t)(sp1 - p);
	for (q = p; q < sp1; q++)
		if (!is_tchar(*q))
			return refuse(req, 400, "malformed request method");
	if (n >= sizeof(req->method_name))
		return refuse(req, 400, "unknown request method");
	memcpy(req->method_name, p, n);
	req->method_name[n] = '\0';
	req->method = !strcmp(req->method_name, "GET")     ? HTTP_GET
		      : !strcmp(req->method_name, "PUT")   ? HTTP_PUT
		      : !strcmp(req->method_name, "PATCH") ? HTTP_PATCH
							   : HTTP_OTHER;
	p = sp1 + 1;
	sp2 = memchr(p, ' ', (size_t)(end - p));
	if (!sp2 || sp2 == p)
		return refuse(req, 400, "malformed request line");
	for (q = p; q < sp2; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return refuse(req, 400, "invalid character in the request target");
	/* Absolute form (RFC 9112 3.2.2), as Firecracker's server takes it:
	 * "http://host/path" is "/path", "http://host" is "/". */
	if ((size_t)(sp2 - p) >= 7 && !strncasecmp(p, "http://", 7)) {
		const char *slash = memchr(p + 7, '/', (size_t)(sp2 - p - 7));

		if (slash == p + 7)
			return refuse(req, 400, "the request target has no host");
		p = slash ? slash : sp2;
	} else if (*p != '/') {
		return refuse(req, 400, "the request target must be a path (or http://host/path)");
	}
	q = memchr(p, '?', (size_t)(sp2 - p));
	n = (size_t)((q ? q : sp2) - p);
	if (n >= sizeof(req->path))
		return refuse(req, 414, "request path too long");
	memcpy(req->path, p, n);
	req->path[n] = '\0';
	if (n == 0) {
		req->path[0] = '/';
		req->path[1] = '\0';
	}
	/* One trailing slash is dropped, as Firecracker's router does
	 * ("/machine-config/" is "/machine-config"). */
	if (n > 1 && req->path[n - 1] == '/')
		req->path[n - 1] = '\0';
	p = sp2 + 1;
	n = (size_t)(end - p);
	if (n == 8 && !memcmp(p, "HTTP/1.1", 8))
		*http10 = 0;
	else if (n == 8 && !memcmp(p, "HTTP/1.0", 8))
		*http10 = 1;
	else if (n >= 5 && !memcmp(p, "HTTP/", 5))
		return refuse(req, 505, "only HTTP/1.1 and HTTP/1.0 are supported");
	else
		return refuse(req, 400, "malformed request line");
	return 0;
}

int http_has_token(const char *v, size_t n, const char *token)
{
	size_t tl = strlen(token), i = 0;

	while (i < n) {
		size_t s, e;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == tl && !strncasecmp(v + s, token, tl))
			return 1;
	}
	return 0;
}

int http_parse(const char *buf, size_t len, struct http_request *req)
{
	return http_parse_limit(buf, len, req, HTTP_MAX_BODY);
}

int http_parse_limit(const char *buf, size_t len, struct http_request *req, size_t max_body)
{
	const char *p = buf, *end, *eol, *hdr_end = NULL;
	size_t scan = len < HTTP_MAX_HEADER ? len : HTTP_MAX_HEADER, clen = 0, total;
	int http10 = 0, have_clen = 0, conn_close = 0, conn_keep = 0, r;

	memset(req, 0, sizeof(*req));
	/* RFC 9112 2.2: empty lines before a request line may be ignored. */
	while (scan >= 2 && p[0] == '\r' && p[1] == '\n') {
		p += 2;
		scan -= 2;
	}
	/* The end of the header block, within the limit. */
	for (end = p; end + 3 < p + scan; end++)
		if (end[0] == '\r' && end[1] == '\n' && end[2] == '\r' && end[3] == '\n') {
			hdr_end = end + 2; /* the empty line */
			break;
		}
	if (!hdr_end) {
		/* A request line that can never be valid: say so now. */
		eol = find_crlf(p, p + scan);
		if (eol && (r = parse_request_line(p, eol, req, &http10)))
			return r;
		if (memmem(p, scan, "\n\n", 2) || memmem(p, scan, "\n\r\n", 3) ||
		    (!eol && memchr(p, '\n', scan)))
			return refuse(req, 400, "lines must end in CRLF");
		if (scan >= HTTP_MAX_HEADER - (size_t)(p - buf))
			return refuse(req, 431, "request line and headers longer than 8 KiB");
		return 0;
	}
	eol = find_crlf(p, hdr_end + 2);
	if ((r = parse_request_line(p, eol, req, &http10)))
		return r;
	for (p = eol + 2; p < hdr_end; p = eol + 2) {
		const char *colon, *v, *ve;
		size_t nl, vl;

		eol = find_crlf(p, hdr_end + 2);
		if (*p == ' ' || *p == '\t')
			return refuse(req, 400, "folded header lines are not accepted");
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || colon == p)
			return refuse(req, 400, "malformed header line");
		nl = (size_t)(colon - p);
		for (v = p; v < colon; v++)
			if (!is_tchar(*v))
				return refuse(req, 400, "malformed header name");
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++) {
		}
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--) {
		}
		for (const char *c = v; c < ve; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				return refuse(req, 400, "control character in a header value");
		vl = (size_t)(ve - v);
		if (nl == 14 && !strncasecmp(p, "Content-Length", nl)) {
			size_t x = 0, i;

			if (vl == 0)
				return refuse(req, 400, "empty Content-Length");
			if (vl > 12) {
				r = refuse(req, 400, "the request body is larger than the server's limit");
				req->too_large = 1;
				return r;
			}
			for (i = 0; i < vl; i++) {
				if (v[i] < '0' || v[i] > '9')
					return refuse(req, 400, "Content-Length is not a number");
				x = x * 10 + (size_t)(v[i] - '0');
			}
			if (have_clen && x != clen)
				return refuse(req, 400, "conflicting Content-Length headers");
			have_clen = 1;
			clen = x;
		} else if (nl == 17 && !strncasecmp(p, "Transfer-Encoding", nl)) {
			return refuse(req, 411, "Transfer-Encoding (chunked bodies) is not supported: send Content-Length");
		} else if (nl == 10 && !strncasecmp(p, "Connection", nl)) {
			conn_close |= http_has_token(v, vl, "close");
			conn_keep |= http_has_token(v, vl, "keep-alive");
		} else if (nl == 6 && !strncasecmp(p, "Expect", nl)) {
			if (vl != 12 || strncasecmp(v, "100-continue", 12))
				return refuse(req, 417, "only Expect: 100-continue is understood");
			req->expect_continue = 1;
		}
	}
	/* Firecracker answers 400 with a fault_message here, not 413. */
	if (clen > max_body) {
		snprintf(req->why_buf, sizeof(req->why_buf),
			 "Request payload with size %zu is larger than the limit of %zu allowed by server.", clen,
			 max_body);
		r = refuse(req, 400, req->why_buf);
		req->too_large = 1;
		return r;
	}
	req->keep_alive = http10 ? conn_keep && !conn_close : !conn_close;
	total = (size_t)(hdr_end + 2 - buf);
	if (len - total < clen)
		return 0; /* the body is still coming */
	req->expect_continue = 0;
	req->body = clen ? hdr_end + 2 : NULL;
	req->body_len = clen;
	return (int)(total + clen);
}

const char *http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 417: return "Expectation Failed";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

size_t http_response(char *out, size_t cap, int status, const char *body, size_t body_len,
		     int keep_alive)
{
	return http_response_hdr(out, cap, status, body, body_len, keep_alive, NULL);
}

size_t http_response_hdr(char *out, size_t cap, int status, const char *body, size_t body_len,
			 int keep_alive, const char *extra)
{
	int n;

	n = snprintf(out, cap, "HTTP/1.1 %d %s\r\nServer: vmm\r\n%s%sContent-Length: %zu\r\n%s\r\n", status,
		     http_reason(status), extra ? extra : "",
		     body_len ? "Content-Type: application/json\r\n" : "", body_len,
		     keep_alive ? "" : "Connection: close\r\n");
	if (n < 0 || (size_t)n + body_len > cap)
		return 0;
	if (body_len)
		memcpy(out + n, body, body_len);
	return (size_t)n + body_len;
}

size_t http_fault(char *out, size_t cap, const char *msg)
{
	struct json_writer w;
	const char *s;

	jw_init(&w, out, cap);
	jw_obj(&w);
	jw_key(&w, "fault_message");
	jw_str(&w, msg);
	jw_obj_end(&w);
	s = jw_done(&w);
	return s ? strlen(s) : 0;
}

int http_header(const char *buf, size_t len, const char *name, char *out, size_t outlen)
{
	size_t nl = strlen(name);
	const char *p = buf, *end = buf + len, *eol;
	int found = 0;

	if (outlen)
		out[0] = '\0';
	/* past the request line; the block ends at the empty line */
	eol = find_crlf(p, end);
	while (eol && (p = eol + 2) < end) {
		const char *v, *ve;

		eol = find_crlf(p, end);
		if (!eol || eol == p)
			break;
		if ((size_t)(eol - p) <= nl || p[nl] != ':' || strncasecmp(p, name, nl))
			continue;
		if (found)
			return -EEXIST; /* given twice: ambiguous, refused */
		for (v = p + nl + 1; v < eol && (*v == ' ' || *v == '\t'); v++) {
		}
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--) {
		}
		if ((size_t)(ve - v) >= outlen)
			return -E2BIG;
		memcpy(out, v, (size_t)(ve - v));
		out[ve - v] = '\0';
		found = 1;
	}
	return found ? 0 : -ENOENT;
}
