/* Snapshot state file container and field-by-field (de)serialisation. */
#include "vmm/base/snapfmt.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sb_init(struct sbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void sb_free(struct sbuf *b)
{
	free(b->p);
	sb_init(b);
}

static uint8_t *sb_room(struct sbuf *b, size_t n)
{
	if (b->err)
		return NULL;
	if (n > SNAP_MAX_BODY || b->len + n > SNAP_MAX_BODY) {
		b->err = -E2BIG;
		return NULL;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return NULL;
		}
		b->p = p;
		b->cap = cap;
	}
	b->len += n;
	return b->p + b->len - n;
}

static void put_le(struct sbuf *b, uint64_t v, unsigned n)
{
	uint8_t *p = sb_room(b, n);
	unsigned i;

	if (p)
		for (i = 0; i < n; i++)
			p[i] = (uint8_t)(v >> (8 * i));
}

void sb_u8(struct sbuf *b, uint8_t v) { put_le(b, v, 1); }
void sb_u16(struct sbuf *b, uint16_t v) { put_le(b, v, 2); }
void sb_u32(struct sbuf *b, uint32_t v) { put_le(b, v, 4); }
void sb_u64(struct sbuf *b, uint64_t v) { put_le(b, v, 8); }

void sb_bytes(struct sbuf *b, const void *src, size_t n)
{
	uint8_t *p = sb_room(b, n);

	if (p && n)
		memcpy(p, src, n);
}

void sb_str(struct sbuf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	sb_u32(b, (uint32_t)n);
	sb_bytes(b, s, n);
}

void sb_begin(struct sbuf *b, uint32_t tag)
{
	sb_u32(b, tag);
	b->sect = b->len;
	sb_u32(b, 0);
}

void sb_end(struct sbuf *b)
{
	size_t n;
	unsigned i;

	if (b->err || !b->sect)
		return;
	n = b->len - b->sect - 4;
	for (i = 0; i < 4; i++)
		b->p[b->sect + i] = (uint8_t)(n >> (8 * i));
	b->sect = 0;
}

void sr_init(struct srd *r, const uint8_t *p, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->p = p;
	r->len = len;
	r->sect_end = len;
}

void sr_fail(struct srd *r, const char *why)
{
	if (!r->err) {
		r->err = 1;
		r->why = why;
	}
}

static const uint8_t *sr_take(struct srd *r, size_t n)
{
	if (r->err)
		return NULL;
	if (n > r->sect_end - r->off) {
		sr_fail(r, "a section ends before its fields do (truncated or corrupted)");
		return NULL;
	}
	r->off += n;
	return r->p + r->off - n;
}

static uint64_t get_le(struct srd *r, unsigned n)
{
	const uint8_t *p = sr_take(r, n);
	uint64_t v = 0;
	unsigned i;

	if (p)
		for (i = 0; i < n; i++)
			v |= (uint64_t)p[i] << (8 * i);
	return v;
}

uint8_t sr_u8(struct srd *r) { return (uint8_t)get_le(r, 1); }
uint16_t sr_u16(struct srd *r) { return (uint16_t)get_le(r, 2); }
uint32_t sr_u32(struct srd *r) { return (uint32_t)get_le(r, 4); }
uint64_t sr_u64(struct srd *r) { return get_le(r, 8); }

void sr_bytes(struct srd *r, void *dst, size_t n)
{
	const uint8_t *p = sr_take(r, n);

	if (p)
		memcpy(dst, p, n);
	else
		memset(dst, 0, n);
}

void sr_str(struct srd *r, char *dst, size_t cap)
{
	uint32_t n = sr_u32(r);
	const uint8_t *p;

	dst[0] = '\0';
	if (r->err)
		return;
	if (n >= cap) {
		sr_fail(r, "a string is longer than its field allows");
		return;
	}
	p = sr_take(r, n);
	if (!p)
		return;
	if (memchr(p, '\0', n)) {
		sr_fail(r, "a string holds a NUL byte");
		return;
	}
	memcpy(dst, p, n);
	dst[n] = '\0';
}

int sr_begin(struct srd *r, uint32_t tag, const char *name)
{
	uint32_t t, n;

	(void)name;
	r->sect_end = r->len;
	t = sr_u32(r);
	n = sr_u32(r);
	if (r->err)
		return -1;
	if (t != tag) {
		sr_fail(r, "sections out of order (not a state file this version wrote)");
		return -1;
	}
	if (n > r->len - r->off) {
		sr_fail(r, "a section is longer than the file");
		return -1;
	}
	r->sect_end = r->off + n;
	return 0;
}

int sr_end(struct srd *r, const char *name)
{
	(void)name;
	if (!r->err && r->off != r->sect_end)
		sr_fail(r, "a section holds more than its fields (written by another version?)");
	r->sect_end = r->len;
	return r->err ? -1 : 0;
}

/* CRC-32C (Castagnoli), reflected, bitwise: state files are small. */
uint32_t snap_crc32c(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	unsigned k;

	crc = ~crc;
	while (n--) {
		crc ^= *b++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return ~crc;
}

static void le32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

int snapfile_write(const char *path, const struct sbuf *body)
{
	uint8_t h[SNAP_HEADER] = { 0 };
	int fd, r;

	if (body->err)
		return body->err;
	memcpy(h, SNAP_MAGIC, 8);
	le32(h + 8, SNAP_VERSION);
	le32(h + 12, 0);
	le32(h + 16, (uint32_t)body->len);
	le32(h + 20, (uint32_t)((uint64_t)body->len >> 32));
	le32(h + 24, snap_crc32c(0, body->p, body->len));
	le32(h + 28, snap_crc32c(0, h, 28));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	r = write_full(fd, h, sizeof(h)) ? -errno : 0;
	if (!r)
		r = write_full(fd, body->p, body->len) ? -errno : 0;
	if (!r && fsync(fd) < 0)
		r = -errno;
	close(fd);
	if (r)
		unlink(path);
	return r;
}

int snapfile_check(const uint8_t *f, size_t len, const uint8_t **body, size_t *body_len,
		   const char **why)
{
	uint64_t n;

	if (len < SNAP_HEADER) {
		*why = "too short to be a state file (truncated?)";
		return -EINVAL;
	}
	if (memcmp(f, SNAP_MAGIC, 8)) {
		*why = "not a vmm snapshot state file (bad magic)";
		return -EINVAL;
	}
	if (rd32(f + 28) != snap_crc32c(0, f, 28)) {
		*why = "the state file's header is corrupted (checksum mismatch)";
		return -EINVAL;
	}
	if (rd32(f + 8) != SNAP_VERSION) {
		*why = "the snapshot was written in another format version than this vmm reads";
		return -EINVAL;
	}
	n = rd64(f + 16);
	if (n != len - SNAP_HEADER) {
		*why = n > len - SNAP_HEADER ? "the state file is truncated"
					      : "the state file has bytes past its end";
		return -EINVAL;
	}
	if (rd32(f + 24) != snap_crc32c(0, f + SNAP_HEADER, (size_t)n)) {
		*why = "the state file is corrupted (checksum mismatch)";
		return -EINVAL;
	}
	*body = f + SNAP_HEADER;
	*body_len = (size_t)n;
	return 0;
}

int snapfile_read(const char *path, uint8_t **file, size_t *len, const uint8_t **body,
		  size_t *body_len, const char **why)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), e;

	*file = NULL;
	if (fd < 0) {
		e = errno;
		*why = e == ENOENT ? "no state file (not a snapshot directory, or an unfinished snapshot)"
				   : "cannot open the state file";
		return -e;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > SNAP_MAX_BODY + SNAP_HEADER) {
		close(fd);
		*why = "the state file is not a regular file of a plausible size";
		return -EINVAL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	n = read_upto(fd, buf, (size_t)st.st_size);
	got = n > 0 ? (size_t)n : 0; /* a read error: too short, refused below */
	close(fd);
	*file = buf;
	*len = got;
	return snapfile_check(buf, got, body, body_len, why);
}

int snap_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}
