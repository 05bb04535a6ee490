/* OCI images (docs/images.md): references, digests, the image index,
 * manifest and config documents (OCI image-spec v1 and Docker's v2 schema
 * 2), the content-addressed blob cache, and the image config's defaults as
 * vmm keeps them (config.json in an image version's folder).
 *
 * Everything here is pure parsing and bookkeeping: the registry client is
 * registry.c, unpacking layers oci_unpack.c, the verbs image_oci.c. */
#ifndef CLI_OCI_IMAGE_H
#define CLI_OCI_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define OCI_DIGEST_MAX 72 /* "sha256:" + 64 hex + NUL, rounded */
#define OCI_MAX_LAYERS 128
#define OCI_MEDIA_MAX 128

/* Media types (image-spec media-types.md; Docker's manifest v2 schema 2). */
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_OCI_LAYER "application/vnd.oci.image.layer.v1.tar"
#define MT_OCI_LAYER_GZ "application/vnd.oci.image.layer.v1.tar+gzip"
#define MT_OCI_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"
#define MT_DOCKER_LAYER "application/vnd.docker.image.rootfs.diff.tar.gzip"

/* registry/repository[:tag][@digest], as docker names them: no registry
 * means docker.io, a one-part docker.io name is library/NAME, no tag means
 * latest. "http://" or "https://" in front names the scheme. */
struct oci_ref {
	char registry[256]; /* host[:port] as written ("docker.io") */
	char api_host[256]; /* what to connect to ("registry-1.docker.io") */
	char repo[256];
	char tag[129];
	char digest[OCI_DIGEST_MAX];
	int http; /* an explicit http:// */
};
int oci_parse_ref(const char *s, struct oci_ref *r);

/* "sha256:" and 64 lowercase hex digits (the only algorithm vmm takes). */
int oci_digest_ok(const char *d);

struct oci_desc {
	char media[OCI_MEDIA_MAX];
	char digest[OCI_DIGEST_MAX];
	int64_t size;
};

enum oci_doc { OCI_DOC_BAD, OCI_DOC_INDEX, OCI_DOC_MANIFEST };
/* What a manifest document is, from its mediaType (or the Content-Type it
 * came with when it has none). */
enum oci_doc oci_doc_kind(const char *json, size_t len, const char *content_type);

/* An index / manifest list: the linux/amd64 manifest's descriptor (with
 * layout, an image layout's index.json, the first entry without a platform
 * counts as one). 0, or -EINVAL / -ENOENT with err set. */
int oci_parse_index(const char *json, size_t len, int layout, struct oci_desc *out, char *err, size_t errlen);

struct oci_manifest {
	struct oci_desc config;
	struct oci_desc layers[OCI_MAX_LAYERS];
	unsigned nlayers;
};
/* A manifest (schema 2): config and layer descriptors, each checked
 * (digest form, size, a layer media type vmm unpacks). 0 or -EINVAL. */
int oci_parse_manifest(const char *json, size_t len, struct oci_manifest *m, char *err, size_t errlen);

/* How much a pull or an import may take (docs/security.md, "Image size
 * caps"): settings with generous defaults, from the environment and then
 * the verb's flags. Download caps are checked against the manifest's
 * descriptors before any byte is fetched and again while each blob
 * streams; unpack caps while each layer is decompressed. */
#define OCI_SIZE_ABSURD (1ull << 50) /* a descriptor size past 1 PiB is malformed, whatever the caps */
struct oci_limits {
	uint64_t blob;          /* bytes of one blob as fetched: --max-blob, $VMM_PULL_MAX_BLOB */
	uint64_t image;         /* bytes of all of an image's blobs: --max-image, $VMM_PULL_MAX_IMAGE */
	uint64_t layer_tar;     /* bytes one layer decompresses to: --max-layer-unpacked, $VMM_UNPACK_MAX_LAYER */
	uint64_t image_tar;     /* bytes all layers decompress to: --max-unpacked, $VMM_UNPACK_MAX_IMAGE */
	uint64_t entries;       /* tar entries of one layer: --max-entries, $VMM_UNPACK_MAX_ENTRIES */
};
/* The defaults, then each $VMM_PULL_* / $VMM_UNPACK_* that is set. 0 or
 * -EINVAL with err naming the variable. */
int oci_limits_init(struct oci_limits *l, char *err, size_t errlen);
/* One setting by its flag ("--max-blob") or variable name: a size in MiB
 * ("512", "2G", "1T"; cli_parse_mib) or, for the entries, a count. 1 if
 * name is none of them, 0, or -EINVAL with err set. */
int oci_limits_set(struct oci_limits *l, const char *name, const char *value, char *err, size_t errlen);
/* The manifest's config and layer sizes against the download caps, before
 * anything is fetched. 0 or -EFBIG with err naming the blob and the
 * setting. */
int oci_limits_check(const struct oci_limits *l, const struct oci_manifest *m, char *err, size_t errlen);

/* The image config's defaults (the "config" object of the image config;
 * config.json in a version's folder has the same shape). Strings point
 * into pool. */
#define OCI_MAX_ENV 128
#define OCI_MAX_ARGS 64
#define OCI_MAX_PORTS 32
struct oci_defaults {
	const char *env[OCI_MAX_ENV + 1];
	unsigned nenv;
	const char *entrypoint[OCI_MAX_ARGS + 1];
	unsigned nentry;
	const char *cmd[OCI_MAX_ARGS + 1];
	unsigned ncmd;
	const char *workdir, *user; /* "" when unset */
	unsigned ports[OCI_MAX_PORTS]; /* ExposedPorts, TCP only */
	unsigned nports;
	unsigned mem_mib, cpus;     /* labels vmm.mem, vmm.cpus (0: unset) */
	const char *drives;         /* label vmm.drives, "NAME[:DIR][:ro],..." ("" unset;
				       checked where an image takes it: image_drives_set) */
	long long idle_timeout_s;   /* label vmm.idle-timeout (0: unset) */
	char pool[32768];
	size_t used;
};

/* An image config (its "config" object; diff_ids of "rootfs" into
 * diff_ids[] when not NULL, at most max). 0 or -EINVAL with err set. */
int oci_parse_config(const char *json, size_t len, struct oci_defaults *d, char (*diff_ids)[OCI_DIGEST_MAX],
		     unsigned max, unsigned *ndiff, char *err, size_t errlen);
/* config.json of an image version: the same shape as the image config's
 * "config" object. */
int oci_defaults_json(const struct oci_defaults *d, char *buf, size_t len);
int oci_defaults_parse(const char *json, size_t len, struct oci_defaults *d);

/* What a command in a sandbox of the image gets: env = the image's Env with
 * the user's NAME=VALUE replacing same-named ones, the user's cwd else the
 * image's WorkingDir (NULL: guest-init's /root), the user's argv else the
 * image's Entrypoint + Cmd (NULL: none). Pointers into d, user_env or
 * argv. */
struct oci_exec_plan {
	const char *env[OCI_MAX_ENV + 257];
	unsigned nenv;
	const char *cwd;
	const char *user;
	const char *argv[2 * OCI_MAX_ARGS + 1];
	unsigned argc;
	void *defaults; /* the caller's: what the pointers point into, to free */
};
void oci_plan_exec(const struct oci_defaults *d, const char *const *user_env, const char *user_cwd,
		   const char *const *user_argv, struct oci_exec_plan *p);

/* The blob cache: $VMM_CACHE/blobs, else $XDG_CACHE_HOME/vmm/blobs, else
 * ~/.cache/vmm/blobs (created). */
int oci_cache_dir(char *buf, size_t len);
/* DIR/sha256/HEX for a digest (checked first). */
int oci_blob_path(const char *cache, const char *digest, char *buf, size_t len);
/* Whether the cache's filesystem (statvfs) has room for the blobs of m not
 * in it yet: their sizes, less what their .partial files hold. 0, or
 * -ENOSPC with err saying what is needed and what is free. */
int oci_cache_room(const char *cache, const struct oci_manifest *m, char *err, size_t errlen);
/* Removes the .partial files of m's blobs over the blob cap (a download
 * over a cap is not kept to be resumed). */
void oci_cache_drop_over(const char *cache, const struct oci_manifest *m, const struct oci_limits *l);

/* SHA-256 over a stream (OpenSSL). */
struct oci_hash {
	void *ctx;
};
int oci_hash_init(struct oci_hash *h);
void oci_hash_update(struct oci_hash *h, const void *p, size_t n);
/* "sha256:HEX" into out; frees the context. */
void oci_hash_final(struct oci_hash *h, char out[OCI_DIGEST_MAX]);
void oci_hash_free(struct oci_hash *h);
/* The digest of a buffer / a whole file. */
void oci_digest_buf(const void *p, size_t n, char out[OCI_DIGEST_MAX]);
int oci_digest_fd(int fd, char out[OCI_DIGEST_MAX]);

/* Reads a whole small file (at most max bytes) into malloc'd *out. */
int oci_read_file(int dirfd, const char *path, size_t max, char **out, size_t *len);

#endif
