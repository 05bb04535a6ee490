/* A small, strict HTTP/1.1 request parser and response writer for the
 * control API (docs/control-api.md), pure: no sockets, no allocation, so
 * unit tests and the fuzzer reach every byte of it.
 *
 * What it takes: a request line "METHOD /path[?query] HTTP/1.1" (or 1.0;
 * the target may also be http://host/path; one trailing slash is dropped),
 * header lines ending in CRLF, an empty line, and a body of exactly
 * Content-Length bytes. What it refuses, each with its status:
 *   400  a malformed request line or header, a folded header, a bad or
 *        repeated Content-Length, a target that is neither a path nor
 *        http://host/path; a body over the limit (HTTP_MAX_BODY unless
 *        told: Firecracker answers that 400, not 413)
 *   411  Transfer-Encoding (chunked bodies are not supported: send
 *        Content-Length)
 *   414  a path over HTTP_MAX_PATH
 *   417  an Expect other than 100-continue
 *   431  a request line plus headers over HTTP_MAX_HEADER
 *   505  a version other than HTTP/1.0 and HTTP/1.1
 * Content-Type is not checked (bodies are parsed as JSON whatever it says). */
#ifndef VMM_HTTP_H
#define VMM_HTTP_H

#include <stddef.h>

#define HTTP_MAX_HEADER 8192  /* request line and headers, with the empty line */
#define HTTP_MAX_BODY 51200   /* Firecracker's default payload limit */
#define HTTP_MAX_PATH 256

enum http_method { HTTP_GET, HTTP_PUT, HTTP_PATCH, HTTP_OTHER };

struct http_request {
	enum http_method method;
	char method_name[16];
	char path[HTTP_MAX_PATH];   /* NUL-terminated, query string removed */
	const char *body;           /* into the caller's buffer; NULL if none */
	size_t body_len;
	int keep_alive;             /* the connection stays open after the reply */
	int expect_continue;        /* headers done, the client waits for 100 */
	/* on error: */
	int status;
	int too_large;              /* refused for a body over the limit (400 here; MCP says 413) */
	const char *why;            /* a message for fault_message (static, or why_buf) */
	char why_buf[128];
};

/* Parses one request at the start of buf[0..len).
 * Returns the bytes it takes (> 0) once complete; 0 if more bytes are
 * needed (req->expect_continue says whether to send "100 Continue"
 * first); -EPROTO for a request to refuse (req->status, req->why), after
 * which the connection is to be closed. */
int http_parse(const char *buf, size_t len, struct http_request *req);
/* The same with another body limit (--http-api-max-payload-size, the MCP
 * endpoint's messages). */
int http_parse_limit(const char *buf, size_t len, struct http_request *req, size_t max_body);

/* The value of header `name` (case-insensitive, trimmed) in a request
 * head that http_parse accepted (buf from its start). 0, -ENOENT (none),
 * -EEXIST (given twice), -E2BIG (longer than outlen - 1). */
int http_header(const char *buf, size_t len, const char *name, char *out, size_t outlen);

/* Writes a whole response into out (at most cap bytes): status line,
 * Content-Type application/json when there is a body, Content-Length,
 * Connection: close unless keep_alive. Returns its length, or 0 if it does
 * not fit. */
size_t http_response(char *out, size_t cap, int status, const char *body, size_t body_len,
		     int keep_alive);
/* The same with extra header lines (each ending in CRLF; NULL: none). */
size_t http_response_hdr(char *out, size_t cap, int status, const char *body, size_t body_len,
			 int keep_alive, const char *extra);
const char *http_reason(int status);
/* Does the comma-separated header list value[0..n) hold `token`
 * (case-insensitive, RFC 9110 section 5.6.1: "Connection: keep-alive,
 * close")? The one token check of the tree (the API server's and the
 * egress proxy's). */
int http_has_token(const char *v, size_t n, const char *token);

/* A Firecracker error body, {"fault_message":"..."}, JSON-escaped. Returns
 * its length (0 if it did not fit). */
size_t http_fault(char *out, size_t cap, const char *msg);

#endif
