/* The snapshot state file: a small container (magic, format version, body
 * length, CRC-32C of the body) around a body written field by field in
 * little-endian order, in tagged sections. Never raw structs with pointers:
 * a reader on another build, or a tampered file, gets a clear refusal.
 *
 *   offset 0  "VMMSNAP\0"        magic
 *          8  u32 version         SNAP_VERSION
 *         12  u32 flags           0
 *         16  u64 body length     = file size - 32
 *         24  u32 crc32c(body)
 *         28  u32 crc32c(bytes 0..27)
 *         32  body: sections, each u32 tag, u32 length, then its fields
 */
#ifndef VMM_SNAPFMT_H
#define VMM_SNAPFMT_H

#include <stddef.h>
#include <stdint.h>

#define SNAP_MAGIC "VMMSNAP"
#define SNAP_VERSION 4u
#define SNAP_HEADER 32u
#define SNAP_MAX_BODY (64u << 20) /* a state file is KiBs; anything huge is not ours */

/* Section tags: four characters, readable in a hex dump. */
#define SNAP_TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

/* Writer: grows a heap buffer; on allocation failure `err` sticks. */
struct sbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
	size_t sect; /* offset of the open section's length, or 0 */
};
/* fsync of a directory: a rename or create in it made durable (only
 * read, so a symbolic link to it is as good). 0 or -errno. */
int snap_fsync_dir(const char *dir);

void sb_init(struct sbuf *b);
void sb_free(struct sbuf *b);
void sb_u8(struct sbuf *b, uint8_t v);
void sb_u16(struct sbuf *b, uint16_t v);
void sb_u32(struct sbuf *b, uint32_t v);
void sb_u64(struct sbuf *b, uint64_t v);
void sb_bytes(struct sbuf *b, const void *p, size_t n);
void sb_str(struct sbuf *b, const char *s); /* u32 length, bytes, no NUL */
void sb_begin(struct sbuf *b, uint32_t tag);
void sb_end(struct sbuf *b);

/* Reader over a checked body. Any overrun sets `err` (sticky) and returns
 * zeros, so a parser reads everything and checks `err` once. */
struct srd {
	const uint8_t *p;
	size_t len, off;
	int err;
	const char *why;
	size_t sect_end;
};
void sr_init(struct srd *r, const uint8_t *p, size_t len);
uint8_t sr_u8(struct srd *r);
uint16_t sr_u16(struct srd *r);
uint32_t sr_u32(struct srd *r);
uint64_t sr_u64(struct srd *r);
void sr_bytes(struct srd *r, void *dst, size_t n);
/* A string into dst[cap]: refused (err) if it does not fit with its NUL or
 * holds a NUL. */
void sr_str(struct srd *r, char *dst, size_t cap);
/* Enters the next section, which must carry `tag`. */
int sr_begin(struct srd *r, uint32_t tag, const char *name);
/* Leaves it: the whole section must have been read. */
int sr_end(struct srd *r, const char *name);
/* Marks the reader failed with a reason (the first one sticks). */
void sr_fail(struct srd *r, const char *why);

uint32_t snap_crc32c(uint32_t crc, const void *p, size_t n);

/* Writes header + body to `path` (created 0600, must not exist), fsyncs it.
 * 0 or -errno (ENOSPC: the file is removed). */
int snapfile_write(const char *path, const struct sbuf *body) __attribute__((warn_unused_result));
/* Checks a whole state file image: magic, version, length, checksums.
 * Returns 0 with *body and *body_len set inside `file`, or -EINVAL with *why. */
int snapfile_check(const uint8_t *file, size_t len, const uint8_t **body, size_t *body_len,
		   const char **why);
/* Reads `path` (malloc'd into *file) and checks it. 0, or -errno / -EINVAL
 * with *why. */
int snapfile_read(const char *path, uint8_t **file, size_t *len, const uint8_t **body,
		  size_t *body_len, const char **why) __attribute__((warn_unused_result));

#endif
