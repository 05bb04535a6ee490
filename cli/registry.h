/* A client of the OCI distribution API (distribution-spec spec.md) over
 * libcurl: manifests and blobs of one repository, with anonymous access,
 * the bearer-token flow of a WWW-Authenticate challenge (Docker's token
 * spec) and basic auth from ~/.docker/config.json or a --creds-file.
 *
 * Blobs go into the content-addressed cache (oci_image.h) through
 * NAME.partial under an flock on NAME.lock, are checked against their
 * digest and size while they stream and renamed into place only when they
 * match: a second pull of the same blob waits and then finds it; an
 * interrupted download resumes from its .partial (HTTP Range). */
#ifndef CLI_REGISTRY_H
#define CLI_REGISTRY_H

#include "oci_image.h"

#include <stddef.h>

struct registry;

struct reg_opts {
	const char *creds_file; /* docker config.json format, or one line USER:PASSWORD */
	const char *ca_file;    /* trust this CA bundle (else $SSL_CERT_FILE, else the system's) */
	int insecure;           /* plain HTTP: only for an http:// reference */
	int quiet;
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

#endif
