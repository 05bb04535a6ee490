/* A tar stream writer and a safe extractor (docs/api.md, ops tar_get and
 * tar_put; vmm cp -r and vmm cp -), shared by guest-init (static musl)
 * and the host CLI. POSIX ustar (IEEE 1003.1-2001, "pax" format) with pax
 * extended headers for long names, link targets and sizes; GNU tar's
 * ././@LongLink ('L'/'K') and base-256 numbers are read too, since GNU
 * tar writes them by default.
 *
 * The extractor is the boundary: an archive is hostile. Every name is
 * relative, with no "..", at most max_depth components and PATH_MAX
 * bytes; every directory on the way is opened from the destination's fd
 * with O_NOFOLLOW one component at a time, so no entry is written through
 * a symbolic link (one the archive made or one already there); symbolic
 * links are made as links and never followed; a hard link must name an
 * entry inside the destination. A file is written under a temporary name
 * and renamed into place once whole: a truncated archive leaves no half
 * file. Directory modes and times are set last (deepest first). */
#ifndef GUEST_TAR_H
#define GUEST_TAR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TAR_BLOCK 512
#define TAR_DEPTH_DEFAULT 1024
#define TAR_DEPTH_MAX 4096
#define TAR_ENTRIES_DEFAULT 1000000
#define TAR_PAX_MAX (256u * 1024) /* bytes of one pax or GNU long-name header's data */

struct tar_limits {
	unsigned max_depth;     /* components in a name (0: TAR_DEPTH_DEFAULT) */
	uint64_t max_entries;   /* entries in an archive (0: TAR_ENTRIES_DEFAULT) */
};

struct tar_stats {
	uint64_t files, dirs, links, skipped, bytes;
};

/* ---- writer ------------------------------------------------------------- */

/* Where the archive goes: 0 or -errno. */
typedef int (*tar_out_fn)(void *ctx, const void *buf, size_t len);

struct tar_w {
	tar_out_fn out;
	void *ctx;
	struct tar_limits lim;
	int follow;             /* archive what symbolic links point to */
	struct tar_stats st;
	char err[320];          /* why it failed */
};

/* Archives `path` (relative to dirfd, or absolute) as `arcname`: a
 * directory with everything under it ("." for arcname: its content, names
 * relative to it), a file, or a symbolic link. Sockets, devices and fifos
 * are skipped (counted). The walk holds one directory fd at a time
 * (iterative; any depth up to the limit). 0 or -errno (w->err). */
int tar_w_path(struct tar_w *w, int dirfd, const char *path, const char *arcname);
/* The end-of-archive blocks. 0 or -errno. */
int tar_w_finish(struct tar_w *w);

/* ---- extractor ---------------------------------------------------------- */

struct tar_dirfix;

struct tar_x {
	int root;               /* the destination directory (the caller's fd) */
	struct tar_limits lim;
	int owner;              /* set uid/gid from the archive (the caller checks it may) */
	mode_t mode_mask;       /* applied to every mode (e.g. 0777 & ~umask; 0: 07777) */
	struct tar_stats st;
	char err[320];

	/* parser state */
	int state;
	unsigned char hdr[TAR_BLOCK];
	size_t hdr_have;
	uint64_t left, pad;     /* the entry's data bytes and padding still to come */
	uint64_t pad_for;       /* the padding after this entry's data */
	int zeros;              /* zero blocks in a row */
	uint64_t entries;
	char *ext;              /* a pax / GNU long header's data being read */
	size_t ext_len;
	int ext_type;
	/* from pax/GNU headers, for the next entry */
	char *next_path, *next_link;
	int has_size, has_mtime, has_uid, has_gid;
	uint64_t next_size;
	int64_t next_mtime, next_uid, next_gid;
	/* the file being written */
	int fd, parent;
	char tmp[64], final[256];
	mode_t mode;
	int64_t mtime, uid, gid;
	/* the last directory walked to (a cache: archives are depth first) */
	char *cpath;
	int cfd;
	struct tar_dirfix *dirs;
	size_t ndirs, dirs_cap;
	/* temporary names: ".vmm-tar-" tmpid "-" seq, where tmpid is random per
	 * extraction, so an archive cannot name (and so collide with or plant)
	 * the extractor's temporaries */
	char tmpid[24];
	unsigned seq;
};

/* dst: the destination directory's fd (kept open by the caller). */
void tar_x_init(struct tar_x *x, int dst, const struct tar_limits *lim);
/* Feeds archive bytes. 0, or -errno with x->err: the archive is refused
 * (a hostile name, a bad header, a limit) and nothing more is taken. */
int tar_x_feed(struct tar_x *x, const void *buf, size_t len);
/* The stream ended: -EPROTO if it ended inside the archive (truncated),
 * else the directories' modes and times are set. 0 or -errno. */
int tar_x_finish(struct tar_x *x);
/* Frees x; a file half written is removed. */
void tar_x_free(struct tar_x *x);

/* Pure helpers (unit tests, fuzzing). */
/* A header's checksum is right (unsigned sum, or the signed one old tars wrote). */
int tar_checksum_ok(const unsigned char *h);
/* A numeric field: octal (NUL/space ended) or base-256. 0 or -EINVAL. */
int tar_number(const unsigned char *f, size_t n, uint64_t *out);
/* Checks a name and counts its components ("." and empty ones dropped).
 * 0, -EINVAL (absolute, "..", empty), -ENAMETOOLONG, -ELOOP (deeper than
 * max_depth). */
int tar_name_check(const char *name, unsigned max_depth, unsigned *depth);

#endif
