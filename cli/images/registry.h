/* A client of the OCI distribution API (distribution-spec spec.md) over
 * libcurl: manifests and blobs of one repository, with anonymous access,
 * the bearer-token flow of a WWW-Authenticate challenge (Docker's token
 * spec) and basic auth from ~/.docker/config.json or a --creds-file.
 *
 * Blobs go into the content-addressed cache (oci_image.h) through
 * NAME.partial under an flock on NAME.lock, are checked against their
 * digest and size while they stream and renamed into place only when they
 * match: a second pull of the same blob waits and then finds it; an
 * interrupted download resumes from its .partial (HTTP Range). A cached
 * blob is hashed again before it is used; blob files are 0600 in a 0700
 * folder (oci_cache_dir).
 *
 * Credentials (docs/security.md, "Registry credentials"): a challenge is
 * taken only from a response of the registry's own host (not from a host
 * a redirect led to), and Basic credentials go only to a token realm on
 * that host; any other realm gets the credentials file's entry for the
 * realm's own host if it has one, else the token is fetched anonymously.
 *
 * Nothing here prints: what a pull does as it goes is told to the verb
 * through reg_opts.note, failures come back as -errno and a message. */
#ifndef CLI_REGISTRY_H
#define CLI_REGISTRY_H

#include "cli/images/oci_image.h"

#include <stddef.h>

struct registry;

/* What a pull is doing, for its verb to show. */
enum reg_event {
	REG_EV_BYTES,   /* a blob is streaming: have of want bytes (at most 4 a second) */
	REG_EV_DONE,    /* a blob is in the cache, downloaded and checked */
	REG_EV_CACHED,  /* a blob was in the cache already (and hashed again) */
	REG_EV_WAITING, /* another pull is fetching the blob: waiting for its lock */
	REG_EV_REFETCH, /* the cached copy did not match its digest: removed, fetching again */
	REG_EV_RETRY,   /* a request failed (why) and is tried again in wait_s seconds */
};
struct reg_note {
	enum reg_event ev;
	const char *label;   /* "layer 2/5 sha256:abcd..." (or a path for a manifest) */
	uint64_t have, want; /* bytes */
	double secs;         /* since the blob's download started */
	const char *why;     /* REG_EV_RETRY */
	long wait_s;         /* REG_EV_RETRY */
};

struct reg_opts {
	const char *creds_file; /* docker config.json format, or one line USER:PASSWORD */
	const char *ca_file;    /* trust this CA bundle (else $SSL_CERT_FILE, else the system's) */
	int insecure;           /* plain HTTP: only for an http:// reference */
	uint64_t max_blob;      /* no blob larger than this is fetched (oci_limits.blob; 0: OCI_SIZE_ABSURD) */
	void (*note)(void *arg, const struct reg_note *n); /* NULL: nothing shown */
	void *note_arg;
};

/* 0 or -errno with err set. */
int reg_open(struct registry **out, const struct oci_ref *ref, const struct reg_opts *o, char *err, size_t errlen);
void reg_close(struct registry *r);

/* GET /v2/REPO/manifests/REFERENCE (a tag or digest): the body (malloc'd),
 * its Content-Type and sha256 digest (checked against REFERENCE when it is
 * a digest). 0 or -errno with err set. */
int reg_manifest(struct registry *r, const char *reference, char **body, size_t *len, char *ctype, size_t ctlen,
		 char digest[OCI_DIGEST_MAX], char *err, size_t errlen);

/* Makes sure the blob is in the cache (cache_dir from oci_cache_dir),
 * downloading and checking it if not. label names it in progress lines and
 * errors ("layer 2/5"). 0 or -errno with err set. */
int reg_blob(struct registry *r, const struct oci_desc *d, const char *cache_dir, const char *label, char *err,
	     size_t errlen);

/* Parses a WWW-Authenticate value: scheme ("Bearer"/"Basic") and the
 * realm, service and scope parameters (empty if absent). 0 or -EINVAL. */
int reg_parse_challenge(const char *h, char *scheme, size_t slen, char *realm, size_t rlen, char *service,
			size_t svlen, char *scope, size_t sclen);

/* The "Basic BASE64" credentials for registry in a docker config.json text
 * (auths.HOST.auth, or username/password), or from "USER:PASSWORD". */
int reg_creds_lookup(const char *text, const char *registry, char *out, size_t len);

/* host[:port] of an http(s) URL, lowercased, without a default port (443
 * for https, 80 for http). -EINVAL for anything else, userinfo ("@")
 * included. */
int reg_url_host(const char *url, char *out, size_t len);

/* The Basic credentials (creds_text: the credentials file, or NULL) to send
 * to a token realm URL for the registry of ref: the registry's own when the
 * realm is on the registry's host (api_host or the registry name; for
 * docker.io also Docker Hub's token service auth.docker.io), else the
 * file's entry for the realm's host (a docker config.json auths key). ""
 * means anonymous. 0, or -EINVAL for a realm that is not a URL. */
int reg_realm_creds(const char *creds_text, const struct oci_ref *ref, const char *realm, char *out, size_t len);

/* Whether a response from url may challenge for the registry of ref: only
 * one from the registry's own host (api_host). */
int reg_challenge_host_ok(const struct oci_ref *ref, const char *url);

#endif
