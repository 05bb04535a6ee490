/* Protocol Buffers' wire format (protobuf.dev, "Encoding"), as much of it
 * as vmm's peers need (containerd's ttrpc for vmm oci, E2B's Connect
 * protocol for vmm e2b): a writer of varint and length-delimited fields
 * into a caller's buffer, and a reader that walks a message's fields,
 * bounds-checked, without a schema (the schemas are the callers'). */
#ifndef VMM_WIRE_PB_H
#define VMM_WIRE_PB_H

#include <stddef.h>
#include <stdint.h>

/* Writes into buf[0..cap); an overflow sets err (-E2BIG) and every later
 * call does nothing, so a message is built with no checks between fields
 * and checked once at the end (pb_done). */
struct pb_writer {
	uint8_t *buf;
	size_t cap, len;
	int err;
};

void pb_init(struct pb_writer *w, void *buf, size_t cap);
/* The raw pieces: bytes as they are, a varint, a field's tag (its number
 * and wire type). */
void pb_put(struct pb_writer *w, const void *data, size_t n);
void pb_put_varint(struct pb_writer *w, uint64_t v);
void pb_tag(struct pb_writer *w, unsigned field, unsigned wire);
/* A varint field (wire type 0). proto3 leaves a field at its default
 * out: pb_uint writes nothing for 0. */
void pb_uint(struct pb_writer *w, unsigned field, uint64_t v);
/* A length-delimited field (wire type 2): bytes, a string, or a nested
 * message already encoded. Written even when empty. */
void pb_bytes(struct pb_writer *w, unsigned field, const void *data, size_t n);
/* A string field; proto3 leaves an empty one out. */
void pb_str(struct pb_writer *w, unsigned field, const char *s);
/* google.protobuf.Any { string type_url = 1; bytes value = 2; } as field. */
void pb_any(struct pb_writer *w, unsigned field, const char *type_url, const void *value, size_t n);
/* The message's length, or w->err. */
int pb_done(const struct pb_writer *w);

/* One field of a message being read. */
struct pb_entry {
	unsigned num;        /* field number */
	unsigned wire;       /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
	uint64_t v;          /* wire types 0, 1, 5 */
	const uint8_t *data; /* wire type 2 */
	size_t len;
};

struct pb_reader {
	const uint8_t *p, *end;
};

void pb_reader_init(struct pb_reader *r, const void *data, size_t n);
/* The next field into f: 1, 0 at the message's end, or -EPROTO for bytes
 * that are not a message (a varint over 10 bytes, a length past the end,
 * field number 0, the deprecated groups, an unknown wire type). */
int pb_next(struct pb_reader *r, struct pb_entry *f);
/* The length-delimited field numbered num of the message data[0..n) (a
 * nested message, bytes; the last when it comes twice, as protobuf takes
 * a singular field) in *out and *len: 0, -ENOENT (absent) or -EPROTO (the
 * bytes are not a message, wherever in it). */
int pb_get_bytes(const void *data, size_t n, unsigned num, const uint8_t **out, size_t *len);
/* The first string field numbered num of the message data[0..n) into buf
 * (NUL-terminated): 0, -ENOENT (absent), -E2BIG (too long for buf),
 * -EINVAL (a NUL in it) or -EPROTO. */
int pb_get_str(const void *data, size_t n, unsigned num, char *buf, size_t len);

/* Copies the message in[0..n) into w, every field as it is but those
 * numbered skip (to be written anew after): 0 or -EPROTO. */
int pb_copy_except(struct pb_writer *w, const void *in, size_t n, unsigned skip);

#endif
