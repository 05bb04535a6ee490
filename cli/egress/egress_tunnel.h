/* The egress proxy inside tunnels, its pure half (docs/egress.md,
 * "HTTPS"): the ClientHello's server name, the upstream's response head,
 * and the request loop of an intercepted tunnel over abstract byte
 * streams. No OpenSSL and no sockets here: cli/egress/egress_tls.c gives the loop
 * TLS streams, unit tests and fuzz_egress give it memory. */
#ifndef CLI_EGRESS_TUNNEL_H
#define CLI_EGRESS_TUNNEL_H

#include <stddef.h>
#include <stdint.h>

#include "cli/egress/egress_http.h"

/* TLS record header plus the largest record (RFC 8446 section 5.1). */
#define EG_HELLO_MAX (5 + 16384)

/* The server_name (RFC 6066 section 3) of the TLS ClientHello that
 * starts buf[0..len), lower case, into out[EG_MAX_HOST + 1]. 0; -ENOENT:
 * a well-formed ClientHello without one; -EAGAIN: the first record is not
 * all there yet; -EINVAL: not a ClientHello, malformed, a name that is
 * not a host name, or a ClientHello split over several records. */
int eg_hello_sni(const unsigned char *buf, size_t len, char *out) __attribute__((warn_unused_result));
/* The same from the body of a server_name extension (what OpenSSL's
 * client_hello callback hands over). */
int eg_sni_ext(const unsigned char *p, size_t n, char *out) __attribute__((warn_unused_result));

/* A response head from the upstream. */
struct eg_response {
	int status;
	size_t head_len;        /* up to and including the blank line */
	int64_t content_length; /* -1: none */
	int chunked;            /* the last transfer coding is chunked */
	int until_close;        /* another transfer coding: the body ends with the connection */
	int close;              /* Connection: close, or framing that calls for it */
};
/* 0, -EAGAIN (no blank line yet, len below EG_MAX_HEAD), -E2BIG or -EINVAL. */
int eg_parse_response(const char *buf, size_t len, struct eg_response *r) __attribute__((warn_unused_result));

/* How a response body ends (RFC 9112 section 6.3). */
enum { EG_BODY_NONE, EG_BODY_LENGTH, EG_BODY_CHUNKED, EG_BODY_CLOSE };
int eg_response_body(const char *method, const struct eg_response *r);

/* The response head as the guest gets it: the same lines without
 * Connection, Keep-Alive and Proxy-Connection (hop-by-hop, RFC 9110
 * section 7.6.1), plus Connection: close when close. Its length or -E2BIG. */
long eg_downstream_head(const char *head, const struct eg_response *r, int close, char *out, size_t len);

/* A byte stream: read returns >0, 0 at its end, -ETIMEDOUT (idle) or
 * another -errno; write 0 or -errno. */
struct eg_stream {
	long (*read)(void *ctx, char *buf, size_t len);
	int (*write)(void *ctx, const char *buf, size_t len);
	void *ctx;
};

/* One request's log line (egress.c writes it, docs/egress.md "The log"). */
struct eg_logrec {
	const char *method, *host, *path; /* path: the query is dropped when written */
	size_t path_len;
	unsigned port;
	int status;
	int rule;                 /* its index in the policy, -1: none */
	uint64_t version;         /* of the policy that decided (egress_pol.h), 0: not known */
	const char *tls;          /* "intercept", "pipe" or NULL (plain HTTP) */
	int injected;
	const char *reason;       /* why the proxy answered itself, or NULL */
	uint64_t bytes_up, bytes_down, t0_ns;
};

/* An intercepted tunnel to host:port whose TLS with the guest is up. */
struct eg_tunnel {
	const struct eg_policy *policy; /* what requests are matched against, unless hold is set */
	/* The policy in force when a request starts (a reference, dropped by
	 * unhold once its response is over): a policy changed while the
	 * tunnel is open applies from its next request (egress_pol.h).
	 * *version numbers it for the log. NULL: policy, always. */
	const struct eg_policy *(*hold)(void *ctx, uint64_t *version);
	void (*unhold)(void *ctx, const struct eg_policy *p);
	const char *host;
	unsigned port;
	struct eg_stream guest;
	/* The upstream for rule (of the policy hold returned for r: TLS,
	 * verified): 0 with *up set, or an HTTP status (502, 504) with
	 * *reason. It may hand back the connection an earlier request of the
	 * tunnel left with close(keep = 1), for the same rule of the same
	 * policy; then *reused is 1. fresh: never that, a new connection. */
	int (*open)(void *ctx, const struct eg_rule *rule, const struct eg_request *r, int fresh, struct eg_stream *up,
		    int *reused, const char **reason);
	/* Done with up. keep: its last response ended cleanly, framed, with
	 * nothing after it and no Connection: close, so it may serve the
	 * tunnel's next request (the callee decides, within its limits). */
	void (*close)(void *ctx, struct eg_stream *up, int keep);
	/* 0 if the request may go (the rate limit), else the status (429). */
	int (*admit)(void *ctx);
	void (*log)(void *ctx, const struct eg_logrec *l);
	uint64_t (*now_ns)(void *ctx);
	void *ctx;
};

/* Serves requests on t until the guest ends the tunnel, a request or a
 * response leaves it without framing, or something fails: each request is
 * parsed (eg_parse_tunneled), matched (eg_policy_match), refused inside
 * the tunnel (400/403/429, Connection: close when a body would have to be
 * skipped) or sent upstream with the credential, the response relayed
 * with keep-alive framing. The upstream connection is kept for the next
 * request when its response allows (close(keep)); a request without a
 * body that finds a kept connection dead (a write fails, or it closes
 * before a byte of the response) is sent once more on a new one. One log
 * line each. Returns how many requests it served. */
unsigned eg_tunnel_serve(const struct eg_tunnel *t);

#endif
