/* Protocol Buffers' wire format: see pb.h. */
#include "vmm/wire/pb.h"

#include <errno.h>
#include <string.h>

void pb_init(struct pb_writer *w, void *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->err = 0;
}

void pb_put(struct pb_writer *w, const void *data, size_t n)
{
	if (w->err)
		return;
	if (n > w->cap - w->len) {
		w->err = -E2BIG;
		return;
	}
	memcpy(w->buf + w->len, data, n);
	w->len += n;
}

/* A varint: seven bits a byte, least significant first, the top bit
 * set on every byte but the last. */
void pb_put_varint(struct pb_writer *w, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	pb_put(w, b, n);
}

/* A field's tag: its number and wire type, as a varint. */
void pb_tag(struct pb_writer *w, unsigned field, unsigned wire)
{
	pb_put_varint(w, (uint64_t)field << 3 | wire);
}

void pb_uint(struct pb_writer *w, unsigned field, uint64_t v)
{
	if (!v)
		return;
	pb_tag(w, field, 0);
	pb_put_varint(w, v);
}

void pb_bytes(struct pb_writer *w, unsigned field, const void *data, size_t n)
{
	pb_tag(w, field, 2);
	pb_put_varint(w, n);
	pb_put(w, data, n);
}

void pb_str(struct pb_writer *w, unsigned field, const char *s)
{
	if (s && s[0])
		pb_bytes(w, field, s, strlen(s));
}

/* How many bytes v takes as a varint. */
static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >>= 7)
		n++;
	return n;
}

void pb_any(struct pb_writer *w, unsigned field, const char *type_url, const void *value, size_t n)
{
	size_t ulen = strlen(type_url);

	/* the Any's own length first: its two fields' tags (one byte each),
	 * lengths and contents */
	pb_tag(w, field, 2);
	pb_put_varint(w, 1 + varint_len(ulen) + ulen + 1 + varint_len(n) + n);
	pb_bytes(w, 1, type_url, ulen);
	pb_bytes(w, 2, value, n);
}

int pb_done(const struct pb_writer *w)
{
	return w->err ? w->err : (int)w->len;
}

void pb_reader_init(struct pb_reader *r, const void *data, size_t n)
{
	r->p = data;
	r->end = data ? r->p + n : r->p; /* no message at all (NULL): an empty one */
}

static int get_varint(struct pb_reader *r, uint64_t *v)
{
	uint64_t x = 0;
	unsigned shift;

	for (shift = 0; shift < 70; shift += 7) {
		uint8_t b;

		if (r->p >= r->end)
			return -EPROTO;
		b = *r->p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EPROTO;
}

static int get_fixed(struct pb_reader *r, size_t n, uint64_t *v)
{
	uint64_t x = 0;

	if ((size_t)(r->end - r->p) < n)
		return -EPROTO;
	for (size_t i = 0; i < n; i++)
		x |= (uint64_t)r->p[i] << (8 * i); /* little-endian */
	r->p += n;
	*v = x;
	return 0;
}

int pb_next(struct pb_reader *r, struct pb_entry *f)
{
	uint64_t tag, n;

	if (r->p >= r->end)
		return 0;
	if (get_varint(r, &tag) || tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
		return -EPROTO;
	memset(f, 0, sizeof(*f));
	f->num = (unsigned)(tag >> 3);
	f->wire = (unsigned)(tag & 7);
	switch (f->wire) {
	case 0:
		return get_varint(r, &f->v) ? -EPROTO : 1;
	case 1:
		return get_fixed(r, 8, &f->v) ? -EPROTO : 1;
	case 5:
		return get_fixed(r, 4, &f->v) ? -EPROTO : 1;
	case 2:
		if (get_varint(r, &n) || n > (uint64_t)(r->end - r->p))
			return -EPROTO;
		f->data = r->p;
		f->len = (size_t)n;
		r->p += n;
		return 1;
	default: /* 3 and 4: groups, deprecated; 6 and 7: none */
		return -EPROTO;
	}
}

int pb_get_bytes(const void *data, size_t n, unsigned num, const uint8_t **out, size_t *len)
{
	struct pb_reader r;
	struct pb_entry f;
	int got, found = 0;

	pb_reader_init(&r, data, n);
	while ((got = pb_next(&r, &f)) > 0)
		if (f.num == num && f.wire == 2) {
			*out = f.data;
			*len = f.len;
			found = 1;
		}
	return got < 0 ? got : found ? 0 : -ENOENT;
}

int pb_get_str(const void *data, size_t n, unsigned num, char *buf, size_t len)
{
	struct pb_reader r;
	struct pb_entry f;
	int got;

	pb_reader_init(&r, data, n);
	while ((got = pb_next(&r, &f)) > 0) {
		if (f.num != num || f.wire != 2)
			continue;
		if (f.len >= len)
			return -E2BIG;
		if (memchr(f.data, '\0', f.len))
			return -EINVAL;
		memcpy(buf, f.data, f.len);
		buf[f.len] = '\0';
		return 0;
	}
	return got < 0 ? got : -ENOENT;
}

int pb_copy_except(struct pb_writer *w, const void *in, size_t n, unsigned skip)
{
	struct pb_reader r;
	struct pb_entry f;
	int got;

	pb_reader_init(&r, in, n);
	for (;;) {
		const uint8_t *at = r.p;

		if ((got = pb_next(&r, &f)) <= 0)
			return got;
		if (f.num != skip)
			pb_put(w, at, (size_t)(r.p - at)); /* its raw bytes: tag, length, value */
	}
}
