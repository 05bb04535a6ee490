/* The JSON reader and writer both sides share (vmm/wire/json.h). */
#include "vmm/wire/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
	const char *p, *end;
	struct json_arena *a;
	const char *err;
	int depth;
	unsigned line;          /* of ps->p, from 1 */
	const char *line_start; /* the byte after the last newline */
};

static struct json_pos here(const struct parser *ps)
{
	return (struct json_pos){ ps->line, (unsigned)(ps->p - ps->line_start) };
}

static void *arena_alloc(struct parser *ps, size_t n)
{
	struct json_arena *a = ps->a;
	size_t off = (a->used + 7) & ~(size_t)7;
	void *r;

	if (off > a->size || n > a->size - off) {
		ps->err = "request too large";
		return NULL;
	}
	r = a->buf + off;
	a->used = off + n;
	memset(r, 0, n);
	return r;
}

static void skip_ws(struct parser *ps)
{
	/* A newline can only be whitespace: JSON strings escape theirs. */
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		if (*ps->p++ == '\n') {
			ps->line++;
			ps->line_start = ps->p;
		}
}

static int hex4(const char *p, unsigned *v)
{
	unsigned i, r = 0;

	for (i = 0; i < 4; i++) {
		char c = p[i];

		r <<= 4;
		if (c >= '0' && c <= '9')
			r |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			r |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			r |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*v = r;
	return 0;
}

static size_t utf8_put(char *out, unsigned cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Parses a string at ps->p (after the opening quote). */
static int parse_string(struct parser *ps, const char **out, size_t *outlen)
{
	const char *start = ps->p;
	size_t max = 0;
	char *dst, *d;

	/* First pass: find the end, bound the decoded size. */
	while (ps->p < ps->end && *ps->p != '"') {
		if (*ps->p == '\\') {
			ps->p++;
			if (ps->p >= ps->end)
				break;
		} else if ((unsigned char)*ps->p < 0x20) {
			ps->err = "control character in string";
			return -1;
		}
		ps->p++;
		max++;
	}
	if (ps->p >= ps->end) {
		ps->err = "unterminated string";
		return -1;
	}
	dst = arena_alloc(ps, max * 2 + 1);
	if (!dst)
		return -1;
	d = dst;
	for (const char *s = start; s < ps->p; s++) {
		unsigned cp, lo;

		if (*s != '\\') {
			*d++ = *s;
			continue;
		}
		s++;
		switch (*s) {
		case '"': *d++ = '"'; break;
		case '\\': *d++ = '\\'; break;
		case '/': *d++ = '/'; break;
		case 'b': *d++ = '\b'; break;
		case 'f': *d++ = '\f'; break;
		case 'n': *d++ = '\n'; break;
		case 'r': *d++ = '\r'; break;
		case 't': *d++ = '\t'; break;
		case 'u':
			if (ps->p - s < 5 || hex4(s + 1, &cp)) {
				ps->err = "bad \\u escape";
				return -1;
			}
			s += 4;
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (ps->p - s < 7 || s[1] != '\\' || s[2] != 'u' || hex4(s + 3, &lo) ||
				    lo < 0xdc00 || lo > 0xdfff) {
					ps->err = "bad surrogate pair";
					return -1;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				s += 6;
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				ps->err = "lone low surrogate";
				return -1;
			}
			if (cp == 0) {
				ps->err = "NUL in string";
				return -1;
			}
			d += utf8_put(d, cp);
			break;
		default:
			ps->err = "bad escape";
			return -1;
		}
	}
	*d = '\0';
	ps->p++; /* closing quote */
	*out = dst;
	*outlen = (size_t)(d - dst);
	return 0;
}

static struct json *parse_value(struct parser *ps);

static struct json *parse_container(struct parser *ps, int obj)
{
	struct json *v = arena_alloc(ps, sizeof(*v)), **tail;

	if (!v)
		return NULL;
	if (++ps->depth > JSON_MAX_DEPTH) {
		ps->err = "nested too deep";
		return NULL;
	}
	v->type = obj ? JSON_OBJ : JSON_ARR;
	v->begin = here(ps);
	tail = &v->u.kids.first;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
		ps->p++;
		ps->depth--;
		v->end = here(ps);
		return v;
	}
	for (;;) {
		const char *key = NULL;
		size_t klen;
		struct json *e;
		struct json_pos key_end = { 0, 0 };

		skip_ws(ps);
		if (obj) {
			if (ps->p >= ps->end || *ps->p != '"') {
				ps->err = "expected a key";
				return NULL;
			}
			ps->p++;
			if (parse_string(ps, &key, &klen))
				return NULL;
			key_end = here(ps);
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				ps->err = "expected ':'";
				return NULL;
			}
			ps->p++;
		}
		e = parse_value(ps);
		if (!e)
			return NULL;
		e->key = key;
		e->key_end = key_end;
		*tail = e;
		tail = &e->next;
		v->u.kids.count++;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
			ps->p++;
			ps->depth--;
			v->end = here(ps);
			return v;
		}
		ps->err = obj ? "expected ',' or '}'" : "expected ',' or ']'";
		return NULL;
	}
}

static int literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
		return 0;
	ps->p += n;
	return 1;
}

static struct json *parse_value(struct parser *ps)
{
	struct json *v;

	skip_ws(ps);
	if (ps->p >= ps->end) {
		ps->err = "unexpected end";
		return NULL;
	}
	if (*ps->p == '{' || *ps->p == '[')
		return parse_container(ps, *ps->p == '{');
	v = arena_alloc(ps, sizeof(*v));
	if (!v)
		return NULL;
	v->begin = here(ps);
	if (*ps->p == '"') {
		ps->p++;
		v->type = JSON_STR;
		if (parse_string(ps, &v->u.str.s, &v->u.str.len))
			return NULL;
	} else if (literal(ps, "true")) {
		v->type = JSON_BOOL;
		v->u.boolean = 1;
	} else if (literal(ps, "false")) {
		v->type = JSON_BOOL;
	} else if (literal(ps, "null")) {
		v->type = JSON_NULL;
	} else if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
		char tmp[64];
		size_t n = 0;
		char *end;

		while (ps->p < ps->end && n < sizeof(tmp) - 1 &&
		       strchr("+-0123456789.eE", *ps->p))
			tmp[n++] = *ps->p++;
		tmp[n] = '\0';
		v->type = JSON_NUM;
		v->num_integral = !strpbrk(tmp, ".eE");
		v->u.num = strtod(tmp, &end);
		if (*end || n == 0) {
			ps->err = "bad number";
			return NULL;
		}
	} else {
		ps->err = "unexpected character";
		return NULL;
	}
	v->end = here(ps);
	return v;
}

struct json *json_parse(const char *text, size_t len, struct json_arena *a, const char **err)
{
	struct parser ps = { text, text + len, a, NULL, 0, 1, text };
	struct json *v = parse_value(&ps);

	if (v) {
		skip_ws(&ps);
		if (ps.p != ps.end) {
			ps.err = "trailing characters";
			v = NULL;
		}
	}
	if (!v)
		*err = ps.err ? ps.err : "invalid JSON";
	return v;
}

const struct json *json_get(const struct json *obj, const char *key)
{
	const struct json *e;

	if (!obj || obj->type != JSON_OBJ)
		return NULL;
	for (e = obj->u.kids.first; e; e = e->next)
		if (e->key && !strcmp(e->key, key))
			return e;
	return NULL;
}

int json_get_str(const struct json *obj, const char *key, const char **out)
{
	const struct json *v = json_get(obj, key);

	if (!v || v->type != JSON_STR)
		return -1;
	*out = v->u.str.s;
	return 0;
}

int json_get_int(const struct json *obj, const char *key, int64_t *out)
{
	const struct json *v = json_get(obj, key);

	/* Range first: converting an out-of-range double is undefined. */
	if (!v || v->type != JSON_NUM || !(v->u.num <= 9007199254740992.0 && v->u.num >= -9007199254740992.0) ||
	    v->u.num != (double)(int64_t)v->u.num)
		return -1;
	*out = (int64_t)v->u.num;
	return 0;
}

int json_get_bool(const struct json *obj, const char *key, int *out)
{
	const struct json *v = json_get(obj, key);

	if (!v || v->type != JSON_BOOL)
		return -1;
	*out = v->u.boolean;
	return 0;
}

/* ---- writer ------------------------------------------------------------ */

static void put(struct json_writer *w, const char *s, size_t n)
{
	if (w->err)
		return;
	if (w->len + n + 1 > w->size) {
		w->err = 1;
		return;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void comma(struct json_writer *w)
{
	if (w->need_comma)
		put(w, ",", 1);
	w->need_comma = 1;
}

void jw_init(struct json_writer *w, char *buf, size_t size)
{
	w->buf = buf;
	w->size = size;
	w->len = 0;
	w->err = size == 0;
	w->need_comma = 0;
	if (size)
		buf[0] = '\0';
}

void jw_obj(struct json_writer *w) { comma(w); put(w, "{", 1); w->need_comma = 0; }
void jw_obj_end(struct json_writer *w) { put(w, "}", 1); w->need_comma = 1; }
void jw_arr(struct json_writer *w) { comma(w); put(w, "[", 1); w->need_comma = 0; }
void jw_arr_end(struct json_writer *w) { put(w, "]", 1); w->need_comma = 1; }

void jw_raw(struct json_writer *w, const char *json)
{
	comma(w);
	put(w, json, strlen(json));
	w->need_comma = 1;
}

void jw_key(struct json_writer *w, const char *key)
{
	jw_str(w, key);
	put(w, ":", 1);
	w->need_comma = 0;
}

/* One byte of a string, escaped where JSON needs it (bytes >= 0x80 as-is). */
static void put_byte(struct json_writer *w, unsigned char c)
{
	char esc[8];

	if (c == '"' || c == '\\') {
		esc[0] = '\\';
		esc[1] = (char)c;
		put(w, esc, 2);
	} else if (c < 0x20 || c == 0x7f) {
		snprintf(esc, sizeof(esc), "\\u%04x", c);
		put(w, esc, 6);
	} else {
		put(w, (const char *)&c, 1);
	}
}

void jw_strn(struct json_writer *w, const char *s, size_t n)
{
	comma(w);
	put(w, "\"", 1);
	for (size_t i = 0; i < n; i++)
		put_byte(w, (unsigned char)s[i]);
	put(w, "\"", 1);
}

void jw_str(struct json_writer *w, const char *s) { jw_strn(w, s, strlen(s)); }

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t k = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 9;
	unsigned cp = k == 1 ? c & 0x1fu : k == 2 ? c & 0x0fu : c & 0x07u;

	if (k == 9 || n <= k)
		return 0;
	for (size_t j = 1; j <= k; j++) {
		if ((s[j] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[j] & 0x3fu);
	}
	if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return k + 1;
}

void jw_text(struct json_writer *w, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	comma(w);
	put(w, "\"", 1);
	while (i < n) {
		size_t k = u[i] < 0x80 ? 1 : utf8_len(u + i, n - i);

		if (!k) {
			put(w, "\xef\xbf\xbd", 3); /* U+FFFD */
			i++;
		} else if (k > 1) {
			put(w, s + i, k);
			i += k;
		} else {
			put_byte(w, u[i++]);
		}
	}
	put(w, "\"", 1);
}

void jw_int(struct json_writer *w, int64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%lld", (long long)v);

	comma(w);
	put(w, tmp, (size_t)n);
}

void jw_bool(struct json_writer *w, int v)
{
	comma(w);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_null(struct json_writer *w)
{
	comma(w);
	put(w, "null", 4);
}

const char *jw_done(struct json_writer *w)
{
	return w->err ? NULL : w->buf;
}
