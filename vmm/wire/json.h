/* A small JSON reader and writer for the sandbox API, shared by guest-init
 * (musl) and the host client. The reader parses into a caller-provided
 * arena (bounded memory: a request can never allocate more than the arena
 * holds), with a depth limit. Strings are UTF-8 without NUL bytes. */
#ifndef GUEST_JSON_H
#define GUEST_JSON_H

#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

/* A place in the text as serde_json reports one: line from 1, column the
 * bytes since the line's start (so the column of a token's last byte, once
 * it has been read). */
struct json_pos {
	unsigned line, col;
};

struct json {
	enum json_type type;
	const char *key;        /* set for object members */
	struct json *next;      /* next element / member */
	int num_integral;       /* JSON_NUM written without fraction or exponent */
	/* Where the value begins (before its first byte) and ends (after
	 * its last), and an object member's key ends (after its quote). */
	struct json_pos begin, end, key_end;
	union {
		int boolean;
		double num;
		struct { const char *s; size_t len; } str;
		struct { struct json *first; size_t count; } kids;
	} u;
};

struct json_arena {
	char *buf;
	size_t size, used;
};

#define JSON_MAX_DEPTH 16

/* Parses text[0..len) completely (trailing whitespace only). Returns the
 * root or NULL with *err set (a static message). */
struct json *json_parse(const char *text, size_t len, struct json_arena *a, const char **err);

const struct json *json_get(const struct json *obj, const char *key);
/* Typed lookups: return 0 and set *out, or -1 if missing or mistyped. */
int json_get_str(const struct json *obj, const char *key, const char **out);
int json_get_int(const struct json *obj, const char *key, int64_t *out);
int json_get_bool(const struct json *obj, const char *key, int *out);

/* Writer into a fixed buffer; on overflow `err` is set and further calls
 * do nothing. Commas are placed automatically. */
struct json_writer {
	char *buf;
	size_t size, len;
	int err;
	int need_comma;
};
void jw_init(struct json_writer *w, char *buf, size_t size);
void jw_obj(struct json_writer *w);
void jw_obj_end(struct json_writer *w);
void jw_arr(struct json_writer *w);
void jw_arr_end(struct json_writer *w);
void jw_key(struct json_writer *w, const char *key);
void jw_str(struct json_writer *w, const char *s);
void jw_strn(struct json_writer *w, const char *s, size_t n);
/* As jw_strn, with each byte that does not start valid UTF-8 written as
 * U+FFFD, so the text is valid JSON for strict decoders. */
void jw_text(struct json_writer *w, const char *s, size_t n);
void jw_int(struct json_writer *w, int64_t v);
void jw_bool(struct json_writer *w, int v);
void jw_null(struct json_writer *w);
/* A value that is already JSON (the caller's own, valid), as it is. */
void jw_raw(struct json_writer *w, const char *json);
/* NUL-terminated result, or NULL if it did not fit. */
const char *jw_done(struct json_writer *w);

#endif
