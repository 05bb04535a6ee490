/* The egress proxy's pure half (docs/egress.md): the HTTP request-head
 * parser, the chunked-body framer, the policy (parsed from JSON, matched
 * against requests) and the upstream request head with the credential
 * injected. No I/O here: unit tests and fuzz_egress reach all of it. */
#ifndef CLI_EGRESS_HTTP_H
#define CLI_EGRESS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define EG_MAX_HEAD 16384   /* bytes of a request line and headers */
#define EG_MAX_HEADERS 64
#define EG_MAX_HOST 253
#define EG_MAX_RULES 32
#define EG_MAX_METHODS 8
#define EG_MAX_CRED 4096    /* bytes of an injected header value */

struct eg_header {
	const char *name, *value; /* into the request buffer, not NUL-terminated */
	size_t name_len, value_len;
};

struct eg_request {
	char method[16];
	int connect;               /* CONNECT host:port (a tunnel) */
	int https;                 /* the guest wrote https:// (absolute-form), or inside a TLS tunnel */
	char host[EG_MAX_HOST + 1]; /* lower case */
	unsigned port;             /* from the target; 0: not given */
	const char *path;          /* origin-form path and query, into the buffer */
	size_t path_len;
	struct eg_header h[EG_MAX_HEADERS];
	unsigned nr_headers;
	int64_t content_length;    /* -1: none */
	int chunked;               /* Transfer-Encoding: chunked */
	int expect_continue;       /* Expect: 100-continue (the proxy answers it) */
	size_t head_len;           /* bytes up to and including the blank line */
};

/* Parses the request head at buf[0..len). 0: complete (r->head_len tells
 * where the body starts); -EAGAIN: no blank line yet and len is below
 * EG_MAX_HEAD; -E2BIG: head too long or too many headers; -EINVAL:
 * malformed, not a proxy request, or a path outside the allowed
 * characters, escapes and segments of docs/egress.md (*why says what). */
int eg_parse_request(const char *buf, size_t len, struct eg_request *r, const char **why)
	__attribute__((warn_unused_result));
/* The same for a request inside an intercepted tunnel to host:port: the
 * target is origin-form ("/path?q"), or absolute-form naming that host
 * and port; the Host header is required and names them too; CONNECT is a
 * 400. r->host and r->port are the tunnel's. */
int eg_parse_tunneled(const char *buf, size_t len, const char *host, unsigned port, struct eg_request *r,
		      const char **why) __attribute__((warn_unused_result));

/* A chunked body, framed as it streams past (RFC 9112 section 7.1):
 * extensions and trailers are passed through, sizes checked. */
struct eg_chunked {
	int state;
	uint64_t left;   /* data bytes left in this chunk */
	unsigned digits; /* hex digits of the size line */
	unsigned line;   /* bytes of the current size/trailer line */
};
void eg_chunked_init(struct eg_chunked *c);
/* Consumes from buf[0..len): returns how many bytes belong to the body
 * (all of them until the end), sets *done at its last byte; -EINVAL if
 * the framing is broken. */
long eg_chunked_feed(struct eg_chunked *c, const char *buf, size_t len, int *done);

struct eg_rule {
	char host[EG_MAX_HOST + 1]; /* lower case; "*.example.com": any subdomain */
	unsigned port;              /* the upstream's (TLS) port, default 443 */
	char path_prefix[256];      /* "" : any */
	char methods[EG_MAX_METHODS][16];
	unsigned nr_methods;        /* 0: any */
	int tunnel;                 /* a pass-through CONNECT allowed (default 1) */
	int intercept;              /* CONNECT is intercepted (default: when inject is set) */
	int require_sni;            /* a pass-through's ClientHello names the host (default 1) */
	char header[64];            /* the header to inject; "" : none */
	char *cred;                 /* its value (prefix included), heap; never logged */
	char connect[EG_MAX_HOST + 8]; /* "ADDR:PORT" instead of host:port; "" : none */
	char ca_file[256];          /* "" : the system's CAs */
	unsigned timeout_ms;        /* connect and idle (default 30000) */
};

struct eg_limits {
	unsigned rate;       /* requests per second (tunnelled ones included); 0: none */
	unsigned burst;      /* requests at once above the rate (default: one second's) */
	unsigned max_conns;  /* connections at once (default and at most EG_MAX_CONNS) */
};
#define EG_MAX_CONNS 64

struct eg_policy {
	struct eg_rule rules[EG_MAX_RULES];
	unsigned nr_rules;
	int ca_shared;       /* "ca": "host": one CA for every sandbox of the host */
	struct eg_limits limits;
};

/* Where a credential comes from, for eg_policy_parse: look up an
 * environment variable or read a file. Returns a heap string or NULL. */
struct eg_cred_source {
	char *(*env)(const char *name, void *ctx);
	char *(*file)(const char *path, void *ctx);
	void *ctx;
};

/* Parses a policy file's text. 0, or -EINVAL with why[] filled. */
int eg_policy_parse(const char *text, size_t len, const struct eg_cred_source *src, struct eg_policy *p,
		    char *why, size_t whylen) __attribute__((warn_unused_result));
void eg_policy_free(struct eg_policy *p);

/* The rule that allows r, or NULL with *why (a reason for the 403).
 * A request with a method-override or URL-rewrite header
 * (X-HTTP-Method-Override, X-Original-URL...) matches no rule. */
const struct eg_rule *eg_policy_match(const struct eg_policy *p, const struct eg_request *r, const char **why);

/* What becomes of CONNECT r: EG_INTERCEPT (a rule for its host and port
 * injects or says "intercept": TLS ends in the proxy, each request inside
 * is matched on its own), EG_PIPE (a rule allows a pass-through tunnel:
 * *rule), or EG_DENY with *why. */
enum { EG_DENY, EG_PIPE, EG_INTERCEPT };
int eg_connect_mode(const struct eg_policy *p, const struct eg_request *r, const struct eg_rule **rule,
		    const char **why);

/* Writes the upstream request head for r under rule: origin-form request
 * line, Host, the guest's headers minus hop-by-hop ones, Proxy-*,
 * Forwarded, X-Forwarded-*, X-Real-IP, the framing headers and the rule's
 * header (the guest's own copy is dropped), then one Content-Length or
 * Transfer-Encoding: chunked as parsed, the credential and, unless
 * keep_alive (an intercepted tunnel's upstream, kept for its next
 * request), Connection: close. Returns its length, or -E2BIG. */
long eg_upstream_head(const struct eg_request *r, const struct eg_rule *rule, int keep_alive, char *out,
		      size_t len);

/* The status code of a response that starts with buf, or 0. */
int eg_response_status(const char *buf, size_t len);

#endif
