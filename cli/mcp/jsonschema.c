/* The JSON Schema subset of cli/mcp/jsonschema.h. */
#include "cli/mcp/jsonschema.h"
#include "vmm/wire/json.h"

#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(char *why, size_t whylen, const char *where, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(why, whylen, "%s%s", where, *where ? ": " : "");

	if (n < 0 || (size_t)n >= whylen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(why + n, whylen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int type_is(const struct json *v, const char *t, size_t tlen)
{
#define IS(name) (tlen == sizeof(name) - 1 && !memcmp(t, name, tlen))
	if (IS("object"))
		return v->type == JSON_OBJ;
	if (IS("array"))
		return v->type == JSON_ARR;
	if (IS("string"))
		return v->type == JSON_STR;
	if (IS("boolean"))
		return v->type == JSON_BOOL;
	if (IS("null"))
		return v->type == JSON_NULL;
	if (IS("number"))
		return v->type == JSON_NUM;
	if (IS("integer"))
		/* range first: converting an out-of-range double is undefined */
		return v->type == JSON_NUM && v->u.num <= 9007199254740992.0 && v->u.num >= -9007199254740992.0 &&
		       v->u.num == (double)(int64_t)v->u.num;
#undef IS
	return 0;
}

static const char *type_name(const struct json *v)
{
	static const char *const names[] = {
		[JSON_NULL] = "null", [JSON_BOOL] = "a boolean", [JSON_NUM] = "a number",
		[JSON_STR] = "a string", [JSON_ARR] = "an array", [JSON_OBJ] = "an object",
	};

	return names[v->type];
}

/* Appends to a message list, cut short at the buffer's end: a schema's
 * type or enum list can be longer than any message (n stays within cap,
 * so the next append never points past the buffer). */
static void list_add(char *buf, size_t cap, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*n + 1 >= cap)
		return;
	va_start(ap, fmt);
	w = vsnprintf(buf + *n, cap - *n, fmt, ap);
	va_end(ap);
	if (w > 0)
		*n = *n + (size_t)w < cap ? *n + (size_t)w : cap - 1;
}

static int check_type(const struct json *t, const struct json *v, const char *where, char *why, size_t whylen)
{
	const struct json *e;
	char want[128] = "";
	size_t n = 0;

	if (t->type == JSON_STR) {
		if (type_is(v, t->u.str.s, t->u.str.len))
			return 0;
		return fail(why, whylen, where, "must be %s %s, not %s", strchr("aeiou", t->u.str.s[0]) ? "an" : "a",
			    t->u.str.s, type_name(v));
	}
	if (t->type != JSON_ARR)
		return 0;
	for (e = t->u.kids.first; e; e = e->next) {
		if (e->type != JSON_STR)
			continue;
		if (type_is(v, e->u.str.s, e->u.str.len))
			return 0;
		list_add(want, sizeof(want), &n, "%s%s", n ? " or " : "", e->u.str.s);
	}
	return fail(why, whylen, where, "must be %s, not %s", want, type_name(v));
}

static int num_of(const struct json *schema, const char *key, double *out)
{
	const struct json *k = json_get(schema, key);

	if (!k || k->type != JSON_NUM)
		return 0;
	*out = k->u.num;
	return 1;
}

static int check_enum(const struct json *en, const struct json *v, const char *where, char *why, size_t whylen)
{
	const struct json *e;
	char list[256] = "";
	size_t n = 0;

	for (e = en->u.kids.first; e; e = e->next) {
		if (e->type == JSON_STR && v->type == JSON_STR && e->u.str.len == v->u.str.len &&
		    !memcmp(e->u.str.s, v->u.str.s, v->u.str.len))
			return 0;
		if (e->type == JSON_NUM && v->type == JSON_NUM && e->u.num == v->u.num)
			return 0;
		if (e->type == JSON_STR)
			list_add(list, sizeof(list), &n, "%s\"%s\"", n ? ", " : "", e->u.str.s);
		else if (e->type == JSON_NUM)
			list_add(list, sizeof(list), &n, "%s%g", n ? ", " : "", e->u.num);
	}
	return fail(why, whylen, where, "must be one of %s", list);
}

/* "where.key" (or "key" at the top) into buf. */
static const char *member(char *buf, size_t len, const char *where, const char *key)
{
	snprintf(buf, len, "%s%s%s", where, *where ? "." : "", key);
	return buf;
}

int jsonschema_check(const struct json *schema, const struct json *v, const char *where, char *why, size_t whylen)
{
	const struct json *t, *k, *props, *e;
	double lim;
	char sub[256];

	if (!schema || schema->type != JSON_OBJ)
		return 0;
	t = json_get(schema, "type");
	if (t && check_type(t, v, where, why, whylen))
		return -1;
	k = json_get(schema, "enum");
	if (k && k->type == JSON_ARR && check_enum(k, v, where, why, whylen))
		return -1;
	if (v->type == JSON_NUM) {
		if (num_of(schema, "minimum", &lim) && v->u.num < lim)
			return fail(why, whylen, where, "must be at least %g", lim);
		if (num_of(schema, "maximum", &lim) && v->u.num > lim)
			return fail(why, whylen, where, "must be at most %g", lim);
	}
	if (v->type == JSON_STR) {
		if (num_of(schema, "minLength", &lim) && (double)v->u.str.len < lim)
			return fail(why, whylen, where, lim == 1 ? "must not be empty" : "must be at least %g bytes long",
				    lim);
		if (num_of(schema, "maxLength", &lim) && (double)v->u.str.len > lim)
			return fail(why, whylen, where, "must be at most %g bytes long", lim);
	}
	if (v->type == JSON_ARR) {
		size_t i = 0;

		if (num_of(schema, "minItems", &lim) && (double)v->u.kids.count < lim)
			return fail(why, whylen, where, "must have at least %g items", lim);
		if (num_of(schema, "maxItems", &lim) && (double)v->u.kids.count > lim)
			return fail(why, whylen, where, "must have at most %g items", lim);
		k = json_get(schema, "items");
		for (e = v->u.kids.first; k && e; e = e->next, i++) {
			snprintf(sub, sizeof(sub), "%s[%zu]", where, i);
			if (jsonschema_check(k, e, sub, why, whylen))
				return -1;
		}
	}
	if (v->type != JSON_OBJ)
		return 0;
	props = json_get(schema, "properties");
	k = json_get(schema, "required");
	for (e = k && k->type == JSON_ARR ? k->u.kids.first : NULL; e; e = e->next)
		if (e->type == JSON_STR && !json_get(v, e->u.str.s))
			return fail(why, whylen, member(sub, sizeof(sub), where, e->u.str.s), "is required");
	k = json_get(schema, "additionalProperties");
	for (e = v->u.kids.first; e; e = e->next) {
		const struct json *ps = json_get(props, e->key);
		const struct json *dup;

		/* A member given twice is ambiguous: refuse it rather than pick one. */
		for (dup = e->next; dup; dup = dup->next)
			if (!strcmp(dup->key, e->key))
				return fail(why, whylen, member(sub, sizeof(sub), where, e->key), "is given twice");
		if (!ps) {
			if (k && k->type == JSON_BOOL && !k->u.boolean)
				return fail(why, whylen, member(sub, sizeof(sub), where, e->key),
					    "is not a known argument");
			continue;
		}
		if (jsonschema_check(ps, e, member(sub, sizeof(sub), where, e->key), why, whylen))
			return -1;
	}
	return 0;
}
