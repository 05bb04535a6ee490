/* The microVM metadata service (MMDS), as Firecracker's clients know it
 * (docs/mmds.md): a JSON data store the host fills through the control API
 * (PUT/PATCH/GET /mmds, PUT /mmds/config) and the guest reads over HTTP at a
 * link-local address (169.254.169.254 unless configured) through the
 * network interfaces named in the config. The virtio-net device hands the
 * frames for that address to mmds_net (devices/mmds_net.h), a small ARP and
 * TCP responder, which passes each whole HTTP request here.
 *
 * This module is the store and the guest-facing HTTP semantics: JSON
 * pointer paths, the IMDS and JSON output formats, V1 and V2 (session
 * tokens) access. It is shared by every interface and the API thread:
 * every entry point takes the store's lock. */
#ifndef DEVICES_MMDS_H
#define DEVICES_MMDS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct json;

#define MMDS_DEFAULT_IPV4 0xa9fea9feu /* 169.254.169.254, host order */
#define MMDS_DEFAULT_LIMIT 51200u     /* bytes of JSON: Firecracker's default */
#define MMDS_TOKEN_TTL_MAX 21600u     /* seconds (6 h), as Firecracker */
#define MMDS_MAX_REQUEST 16384u       /* one guest HTTP request, headers and body */
#define MMDS_MAX_TOKENS 64            /* live session tokens; the oldest goes first */

enum mmds_version { MMDS_V1 = 1, MMDS_V2 = 2 };

struct mmds_token {
	char value[45];   /* base64 of 32 random bytes, NUL-terminated */
	uint64_t expires; /* monotonic ns */
};

struct mmds_stats {
	uint64_t rx_requests, rx_bad, rx_no_token, rx_invalid_token, tx_errors;
};

struct mmds {
	pthread_mutex_t lock;
	char *json;              /* the store as canonical JSON (keys sorted, no
				  * blanks); NULL: nothing put yet */
	struct json *tree;       /* json parsed, for the guest's reads */
	char *arena;             /* tree's memory */
	size_t limit;            /* --mmds-size-limit */
	enum mmds_version version;
	uint32_t ipv4;           /* host order */
	int imds_compat;         /* always IMDS format, whatever Accept says */
	struct mmds_token tokens[MMDS_MAX_TOKENS];
	struct mmds_stats stats;
};

int mmds_init(struct mmds *m);
void mmds_destroy(struct mmds *m);

/* Host side (the control API). Each returns 0, or -EINVAL / -EFBIG /
 * -ENOMEM with why[] set; on failure the store is unchanged. */
int mmds_put(struct mmds *m, const char *json, size_t len, char *why, size_t n);
/* RFC 7396 JSON merge patch. */
int mmds_patch(struct mmds *m, const char *json, size_t len, char *why, size_t n);
/* The whole store as JSON ("{}" before the first PUT), malloc'd. */
char *mmds_get(struct mmds *m);
/* PUT /mmds/config's address: a link-local 169.254.x.y, x in 1..254
 * (Firecracker's rule). 0 or -EINVAL. */
int mmds_parse_ipv4(const char *s, uint32_t *ip);

/* Guest side: one whole HTTP/1.x request in req[0..len) (as long as
 * mmds_request_complete says), answered: returns the response (malloc'd,
 * *out_len bytes; NULL only when out of memory), its status in *status,
 * and *close set when the connection is to be closed after it. now:
 * monotonic ns (token expiry; a parameter, so tests drive the clock). */
char *mmds_respond(struct mmds *m, const char *req, size_t len, uint64_t now, size_t *out_len,
		   int *status, int *close);
/* How long the request at the start of buf[0..len) is: its length once
 * headers and body are all there, 0 while more is to come, or -1 if it can
 * never be valid (too large, no Content-Length on a body). */
long mmds_request_complete(const char *buf, size_t len);

#endif
