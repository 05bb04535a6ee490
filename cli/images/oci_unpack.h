/* Unpacking OCI layers onto a root tree (docs/images.md, image-spec
 * layer.md): tar streams, plain, gzip (zlib) or zstd (libzstd), found by
 * their magic bytes; whiteouts (.wh.NAME) and opaque directories
 * (.wh..wh..opq); hard links within the image; device nodes skipped with a
 * note; owners (when root), modes, times and xattrs kept.
 *
 * No entry reaches outside the root: names with ".." are refused, every
 * parent directory is opened with openat2(RESOLVE_IN_ROOT) from the root's
 * descriptor (so a symbolic link in the image, absolute or relative,
 * resolves inside the root as it would in the sandbox), and the last
 * component is created with the *at() calls that never follow it. */
#ifndef CLI_OCI_UNPACK_H
#define CLI_OCI_UNPACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli/images/oci_image.h"

struct tar_hdr {
	char name[4097];
	char link[4097];
	char type;          /* '0' file, '1' hard link, '2' symlink, '3' char, '4' block,
			       '5' dir, '6' fifo, 'x'/'g' pax, 'L'/'K' GNU long names */
	uint32_t mode;
	uint32_t uid, gid;
	uint64_t size;
	int64_t mtime;
};
/* One 512-byte header block: 0, 1 for an all-zero block (the end), or
 * -EINVAL (bad checksum or field). Long names come from pax/GNU records,
 * which the reader applies. */
int tar_header_parse(const unsigned char blk[512], struct tar_hdr *h);
/* pax extended header records ("LEN key=value\n"...) into h (path,
 * linkpath, size, uid, gid, mtime); xattrs (SCHILY.xattr.NAME) into
 * xbuf as NAME\0VALUELEN(4 bytes LE)VALUE...; 0 or -EINVAL. */
int tar_pax_parse(const char *rec, size_t len, struct tar_hdr *h, char *xbuf, size_t xcap, size_t *xlen);

struct unpack_stats {
	uint64_t entries, bytes;      /* entries applied, file bytes written */
	uint64_t tar_bytes;           /* the decompressed stream's bytes (all of it) */
	unsigned devices;             /* device nodes skipped */
	char first_device[128];
	unsigned whiteouts;
	int chown_skipped;            /* not root: owners not kept */
};

/* Applies the layer read from fd onto the tree open at rootfd, checking the
 * bytes read against digest and the uncompressed tar against diff_id (either
 * may be NULL). 0, or -errno with err set to a short reason (the caller
 * names the layer); a digest mismatch is -EBADMSG, a truncated stream
 * -EPIPE, an entry that escapes -EXDEV. */
int oci_unpack_fd(int rootfd, int fd, const char *digest, const char *diff_id, struct unpack_stats *st, char *err,
		  size_t errlen);
/* Bounds on one layer (docs/security.md, "Image size caps"): the bytes
 * it decompresses to (headers, padding and what follows the end marker
 * count) and its tar entries. Past either the layer fails with -EFBIG and
 * err says which, naming the setting (`what`). */
struct unpack_limits {
	uint64_t tar_bytes;
	const char *tar_what;     /* "the per-layer cap (--max-layer-unpacked, ...)" */
	uint64_t entries;
	const char *entries_what;
};
/* oci_unpack_fd with limits (oci_unpack_fd takes the defaults and the
 * environment's settings: oci_limits_init). */
int oci_unpack_fd_limited(int rootfd, int fd, const char *digest, const char *diff_id, const struct unpack_limits *lim,
			  struct unpack_stats *st, char *err, size_t errlen);
/* The same over a buffer (tests, fuzzing). */
int oci_unpack_mem(int rootfd, const void *buf, size_t len, struct unpack_stats *st, char *err, size_t errlen);
int oci_unpack_mem_limited(int rootfd, const void *buf, size_t len, const struct unpack_limits *lim,
			   struct unpack_stats *st, char *err, size_t errlen);
/* The limits of one layer of an image from its caps: the per-layer cap or
 * what is left of the per-image one (image_used bytes already unpacked),
 * whichever is lower, and the entries cap. */
void oci_unpack_limits(const struct oci_limits *l, uint64_t image_used, struct unpack_limits *out);

/* Writes a file at path (relative to the root, parents created) inside the
 * root, never following a link out of it: the contents of srcfd, or
 * data/len when srcfd < 0. With only_if_missing, an existing entry (even a
 * dangling link) is left alone. 0 or -errno. */
int oci_root_put(int rootfd, const char *path, int srcfd, const void *data, size_t len, mode_t mode,
		 int only_if_missing);
/* Opens path for reading with every component resolved inside the root. */
int oci_root_open(int rootfd, const char *path);
/* mkdir -p inside the root (RESOLVE_IN_ROOT); the new directory's fd. */
int oci_root_mkdirs(int rootfd, const char *path, mode_t mode);

#endif
