/* The Firecracker-compatible API: see fcapi.h and docs/openapi.yaml.
 * Status codes follow Firecracker: 204 for a PUT or PATCH that worked, 200
 * with JSON for a GET, 400 with {"fault_message": ...} for anything
 * refused (bad JSON, an unknown or mistyped field, a missing one, a
 * request in the wrong state, an unknown path or method).
 * This file: the body checks every route uses, the route table and
 * dispatch, --config-file; the routes are in the files fcapi_priv.h
 * lists. */
#include "vmm/api/fcapi.h"
#include "vmm/api/fcapi_priv.h"
#include "vmm/base/log.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#define JSON_ARENA_SIZE (1u << 17)

int fcapi_fail(struct why *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->buf, w->len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* The defaults over a zeroed struct fcapi. */
static void fcapi_defaults(struct fcapi *a, const char *id)
{
	a->id = id;
	a->cfg.vcpus = 1;
	a->cfg.mem_mib = FCAPI_DEFAULT_MEM_MIB;
	a->log_fd = a->metrics_fd = -1;
	(void)mmds_init(&a->mmds); /* a default mutex cannot fail */
}

void fcapi_init(struct fcapi *a, const char *id)
{
	memset(a, 0, sizeof(*a));
	fcapi_defaults(a, id);
}

struct fcapi *fcapi_new(const char *id)
{
	/* No memset: calloc's memory is zero already, and at this size
	 * glibc maps fresh pages for it, so only what the API uses becomes
	 * resident (a `vmm run` that never gets a Firecracker request
	 * touches a few of its 148 KiB; clearing it cost every VMM all of
	 * them, docs/perf.md section 9). */
	struct fcapi *a = calloc(1, sizeof(*a));

	if (a)
		fcapi_defaults(a, id);
	return a;
}

void fcapi_close(struct fcapi *a)
{
	if (a->metrics_fd >= 0) {
		(void)fcapi_flush_metrics(a);
		close(a->metrics_fd);
		a->metrics_fd = -1;
	}
	if (a->log_fd >= 0) {
		log_set_sink(NULL);
		close(a->log_fd);
		a->log_fd = -1;
	}
}

/* ---- body validation ----------------------------------------------------- */

/* A double as Rust's Display writes an f64 (the shortest digits that read
 * back the same, never an exponent), with serde's ".0" when it has no
 * point: serde_json's words for a number it read as a float. */
static void rust_float(double v, char *out, size_t cap)
{
	char digits[40], *e;
	int prec, exp, nd, i;
	size_t o = 0;

	if (!isfinite(v)) { /* 1e999 reads as inf: Rust's Display words */
		snprintf(out, cap, "%s", isnan(v) ? "NaN" : v < 0 ? "-inf" : "inf");
		return;
	}
	for (prec = 0; prec < 17; prec++) {
		snprintf(digits, sizeof(digits), "%.*e", prec, v);
		if (strtod(digits, NULL) == v)
			break;
	}
	e = strchr(digits, 'e');
	exp = atoi(e + 1);
	*e = '\0';
	if (digits[0] == '-' && o + 1 < cap)
		out[o++] = '-';
	/* digits: d[.ddd]; the mantissa's digits without the point */
	{
		char m[24];
		const char *s = digits + (digits[0] == '-');

		for (nd = 0; *s && nd < (int)sizeof(m) - 1; s++)
			if (*s != '.')
				m[nd++] = *s;
		m[nd] = '\0';
		if (exp >= 0) {
			for (i = 0; i <= exp || i < nd; i++) {
				if (i == exp + 1 && o + 1 < cap)
					out[o++] = '.';
				if (o + 1 < cap)
					out[o++] = i < nd ? m[i] : '0';
			}
			if (nd <= exp + 1 && o + 3 < cap) {
				out[o++] = '.';
				out[o++] = '0';
			}
		} else {
			if (o + 2 < cap) {
				out[o++] = '0';
				out[o++] = '.';
			}
			for (i = 1; i < -exp && o + 1 < cap; i++)
				out[o++] = '0';
			for (i = 0; i < nd && o + 1 < cap; i++)
				out[o++] = m[i];
		}
	}
	out[o < cap ? o : cap - 1] = '\0';
}

/* What serde calls a value it did not expect (serde::de::Unexpected). */
static void unexpected(const struct json *v, char *out, size_t cap)
{
	char num[48];

	switch (v->type) {
	case JSON_NULL:
		snprintf(out, cap, "null");
		break;
	case JSON_BOOL:
		snprintf(out, cap, "boolean `%s`", v->u.boolean ? "true" : "false");
		break;
	case JSON_STR:
		snprintf(out, cap, "string \"%.64s\"", v->u.str.s);
		break;
	case JSON_ARR:
		snprintf(out, cap, "sequence");
		break;
	case JSON_OBJ:
		snprintf(out, cap, "map");
		break;
	case JSON_NUM:
		/* serde_json reads an integer as i64/u64 and one beyond u64
		 * (or with a fraction or exponent) as an f64. */
		if (v->num_integral && v->u.num >= -9223372036854775808.0 && v->u.num < 18446744073709551616.0)
			snprintf(out, cap, "integer `%.0f`", v->u.num);
		else {
			rust_float(v->u.num, num, sizeof(num));
			snprintf(out, cap, "floating point `%s`", num);
		}
		break;
	}
}

/* The Rust type serde says it expected. */
static const char *expected(const struct field *f)
{
	if (f->expect)
		return f->expect;
	return f->type == F_STR ? "a string" : f->type == F_BOOL ? "a boolean" : f->type == F_UINT ? "u64"
	       : f->type == F_ARR ? "a sequence" : "a map";
}

/* serde_json's message for a body it could not deserialise: its error, the
 * place, and Firecracker's frame around them (parsed_request.rs). */
int fcapi_deser_fail(struct why *w, struct json_pos at, const char *fmt, ...)
{
	char what[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fcapi_fail(w, FCAPI_DESER "%s at line %u column %u.", what, at.line, at.col);
}

/* serde's unknown-field message names the fields it knows. */
static int unknown_field(const struct json *m, const struct field *f, size_t nf, struct why *w)
{
	char list[256];
	size_t i, o = 0;

	list[0] = '\0';
	for (i = 0; i < nf && o < sizeof(list); i++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s`%s`",
				      i == 0 ? "" : nf == 2 ? " or " : ", ", f[i].name);
	return fcapi_deser_fail(w, m->key_end, "unknown field `%.64s`, %s%s", m->key,
			  nf == 0 ? "there are no fields" : nf > 2 ? "expected one of " : "expected ",
			  nf ? list : "");
}

/* A value of the field's type? 0, or the refusal. */
static int check_type(const struct json *m, const struct field *f, struct why *w)
{
	char got[96];
	/* serde_json complains where it stopped: after a scalar, before
	 * a container it did not want. */
	struct json_pos at = m->type == JSON_OBJ || m->type == JSON_ARR ? m->begin : m->end;

	switch (f->type) {
	case F_STR:
		if (m->type == JSON_STR)
			return 0;
		break;
	case F_BOOL:
		if (m->type == JSON_BOOL)
			return 0;
		break;
	case F_OBJ:
		if (m->type == JSON_OBJ)
			return 0;
		break;
	case F_ARR:
		if (m->type == JSON_ARR)
			return 0;
		break;
	case F_UINT:
		/* 2.0 is refused as Firecracker's serde does: an integer is
		 * written without fraction or exponent. */
		if (m->type == JSON_NUM && m->num_integral && m->u.num < 0 && m->u.num >= -9223372036854775808.0) {
			unexpected(m, got, sizeof(got));
			return fcapi_deser_fail(w, at, "invalid value: %s, expected %s", got, expected(f));
		}
		if (m->type == JSON_NUM && m->num_integral && m->u.num >= 0 && m->u.num <= 9007199254740992.0 &&
		    m->u.num == (double)(uint64_t)m->u.num) {
			/* u8 and u32 fields: serde's range check. */
			uint64_t max = f->expect && !strcmp(f->expect, "u8") ? 255 : f->expect && !strcmp(f->expect, "u32")
				       ? UINT32_MAX : UINT64_MAX;

			if ((uint64_t)m->u.num <= max)
				return 0;
			unexpected(m, got, sizeof(got));
			return fcapi_deser_fail(w, at, "invalid value: %s, expected %s", got, expected(f));
		}
		break;
	}
	unexpected(m, got, sizeof(got));
	return fcapi_deser_fail(w, at, "invalid type: %s, expected %s", got, expected(f));
}

/* The object has only known fields, each once, each of its type (null
 * counts as absent), and every required one: in serde_json's words, which
 * Firecracker's clients match. */
int fcapi_check_fields(const struct json *o, const struct field *f, size_t nf, struct why *w)
{
	const struct json *m, *p;
	size_t i;
	int r;

	if (!o || o->type != JSON_OBJ) {
		char got[96];

		if (!o)
			return fcapi_fail(w, "the request body must be a JSON object");
		unexpected(o, got, sizeof(got));
		return fcapi_deser_fail(w, o->type == JSON_ARR ? o->begin : o->end, "invalid type: %s, expected a map", got);
	}
	for (m = o->u.kids.first; m; m = m->next) {
		for (i = 0; i < nf && strcmp(f[i].name, m->key); i++) {
		}
		if (i == nf)
			return unknown_field(m, f, nf, w);
		for (p = o->u.kids.first; p != m; p = p->next)
			if (!strcmp(p->key, m->key))
				return fcapi_deser_fail(w, m->key_end, "duplicate field `%.64s`", m->key);
		if (m->type == JSON_NULL && !f[i].required)
			continue;
		if ((r = check_type(m, &f[i], w)))
			return r;
	}
	/* serde notices a missing field at the object's end. */
	for (i = 0; i < nf; i++) {
		const struct json *v = json_get(o, f[i].name);

		if (f[i].required && (!v || v->type == JSON_NULL))
			return fcapi_deser_fail(w, o->end, "missing field `%s`", f[i].name);
	}
	return 0;
}

const char *fcapi_get_str(const struct json *o, const char *k)
{
	const struct json *v = json_get(o, k);

	return v && v->type == JSON_STR ? v->u.str.s : NULL;
}

int fcapi_get_bool(const struct json *o, const char *k, int def)
{
	const struct json *v = json_get(o, k);

	return v && v->type == JSON_BOOL ? v->u.boolean : def;
}

int fcapi_has(const struct json *o, const char *k)
{
	const struct json *v = json_get(o, k);

	return v && v->type != JSON_NULL;
}

uint64_t fcapi_get_uint(const struct json *o, const char *k)
{
	const struct json *v = json_get(o, k);

	return v && v->type == JSON_NUM ? (uint64_t)v->u.num : 0;
}

/* Copies a string field into a fixed buffer, refusing what does not fit. */
int fcapi_copy_str(char *dst, size_t cap, const char *src, const char *field, struct why *w)
{
	size_t n = strlen(src);

	if (n >= cap)
		return fcapi_fail(w, "'%s' is too long (at most %zu bytes)", field, cap - 1);
	memcpy(dst, src, n + 1);
	return 0;
}

/* Resource ids: 1..64 of [A-Za-z0-9_-]. */
int fcapi_id_ok(const char *s, size_t max)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

/* The id in the path (NULL: from a config file) and the body's must agree. */
int fcapi_check_id(const char *path_id, const char *body_id, const char *field, size_t max, struct why *w)
{
	if (!fcapi_id_ok(body_id, max))
		return fcapi_fail(w, "'%s' must be 1 to %zu of A-Z a-z 0-9 _ -", field, max);
	if (path_id && strcmp(path_id, body_id))
		return fcapi_fail(w, "The id from the path does not match the id from the body!");
	return 0;
}

/* A path as Firecracker takes it: a relative one is relative to the VMM's
 * working directory, made absolute here (the VM opens it later). */
int fcapi_abs_path(char *dst, size_t cap, const char *src, const char *field, struct why *w)
{
	char cwd[PATH_MAX];

	if (!src[0])
		return fcapi_fail(w, "'%s' must not be empty", field);
	if (src[0] == '/') {
		if (strlen(src) >= cap)
			return fcapi_fail(w, "'%s' is too long", field);
		memcpy(dst, src, strlen(src) + 1);
		return 0;
	}
	while (src[0] == '.' && src[1] == '/')
		for (src += 2; *src == '/'; src++) {
		}
	if (!src[0])
		return fcapi_fail(w, "'%s' names a directory", field);
	if (!getcwd(cwd, sizeof(cwd)))
		return fcapi_fail(w, "'%s': the working directory: %s", field, strerror(errno));
	if ((size_t)snprintf(dst, cap, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", src) >= cap)
		return fcapi_fail(w, "'%s' is too long", field);
	return 0;
}

int fcapi_readable_file(const char *path, const char *field, int want_write, struct why *w)
{
	struct stat st;

	if (path[0] != '/')
		return fcapi_fail(w, "'%s' must be an absolute path", field);
	if (stat(path, &st) < 0)
		return fcapi_fail(w, "'%s' %.200s: %s", field, path, strerror(errno));
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return fcapi_fail(w, "'%s' %.200s: not a regular file or block device", field, path);
	if (access(path, want_write ? R_OK | W_OK : R_OK) < 0)
		return fcapi_fail(w, "'%s' %.200s: %s", field, path, strerror(errno));
	return 0;
}

int fcapi_pre_boot(const struct fcapi *a, struct why *w)
{
	if (a->vm)
		return fcapi_fail(w, MSG_AFTER_START);
	if (a->pending != FCAPI_NONE)
		return fcapi_fail(w, "the microVM is being started");
	return 0;
}

/* A nested object's complaint: serde_json's already says where (line and
 * column); any other gets the field's name in front. */
int fcapi_in_field(struct why *w, const char *field, const char *name)
{
	char inner[384];

	if (!strncmp(w->buf, FCAPI_DESER, strlen(FCAPI_DESER)))
		return -EINVAL;
	snprintf(inner, sizeof(inner), "%s", w->buf);
	return fcapi_fail(w, "'%s%s%s': %s", field, name ? "." : "", name ? name : "", inner);
}

/* Firecracker's TokenBucket {size, one_time_burst, refill_time}: `size`
 * tokens (bytes or operations) refilled over refill_time ms, so a rate of
 * size * 1000 / refill_time per second and a bucket of `size`. A size or
 * refill_time of 0 means no limit, as in Firecracker. */
static int get_bucket(const struct json *lim, const char *field, const char *name, uint64_t *rate,
		      uint64_t *burst, struct why *w)
{
	static const struct field f[] = {
		{ "size", F_UINT, 1, NULL },
		{ "one_time_burst", F_UINT, 0, NULL },
		{ "refill_time", F_UINT, 1, NULL },
	};
	const struct json *b = json_get(lim, name);
	uint64_t size, ms;
	int r;

	*rate = *burst = 0;
	if (!b || b->type == JSON_NULL)
		return 0;
	if ((r = fcapi_check_fields(b, f, 3, w)))
		return fcapi_in_field(w, field, name);
	if (fcapi_get_uint(b, "one_time_burst"))
		return fcapi_fail(w, "'%s.%s.one_time_burst' is not supported (the bucket starts full)", field, name);
	size = fcapi_get_uint(b, "size");
	ms = fcapi_get_uint(b, "refill_time");
	if (!size || !ms)
		return 0;
	if (size > UINT64_MAX / 1000)
		return fcapi_fail(w, "'%s.%s.size' is too large", field, name);
	*rate = size * 1000 / ms ? size * 1000 / ms : 1;
	*burst = size;
	return 0;
}

/* A RateLimiter {bandwidth, ops} (bytes and operations per second). */
int fcapi_get_limiter(const struct json *o, const char *field, struct rl_limits *l, struct why *w)
{
	static const struct field f[] = {
		{ "bandwidth", F_OBJ, 0, NULL },
		{ "ops", F_OBJ, 0, NULL },
	};
	const struct json *lim = json_get(o, field);
	int r;

	memset(l, 0, sizeof(*l));
	if (!lim || lim->type == JSON_NULL)
		return 0;
	if ((r = fcapi_check_fields(lim, f, 2, w)))
		return fcapi_in_field(w, field, NULL);
	if ((r = get_bucket(lim, field, "bandwidth", &l->bytes_per_s, &l->bytes_burst, w)))
		return r;
	return get_bucket(lim, field, "ops", &l->ops_per_s, &l->ops_burst, w);
}

/* ---- GET / and /version ---------------------------------------------------- */

static const char *state_name(const struct fcapi *a)
{
	return !a->vm ? "Not started" : a->vm->paused ? "Paused" : "Running";
}

static size_t get_info(const struct fcapi *a, char *out, size_t cap)
{
	struct json_writer jw;

	jw_init(&jw, out, cap);
	jw_obj(&jw);
	jw_key(&jw, "id");
	jw_str(&jw, a->id ? a->id : "anonymous-instance");
	jw_key(&jw, "state");
	jw_str(&jw, state_name(a));
	jw_key(&jw, "vmm_version");
	jw_str(&jw, fcapi_semver());
	jw_key(&jw, "app_name");
	jw_str(&jw, "vmm");
	jw_obj_end(&jw);
	return jw_done(&jw) ? jw.len : 0;
}

static size_t get_version(char *out, size_t cap)
{
	struct json_writer jw;

	jw_init(&jw, out, cap);
	jw_obj(&jw);
	jw_key(&jw, "firecracker_version");
	jw_str(&jw, fcapi_semver());
	jw_obj_end(&jw);
	return jw_done(&jw) ? jw.len : 0;
}

/* ---- routing ---------------------------------------------------------------- */

/* "/prefix/ID" -> ID, or NULL. */
static const char *path_id(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(path, prefix, n) || !path[n] || strchr(path + n, '/'))
		return NULL;
	return path + n;
}

static int reply(int status, const char *fault, char *out, size_t cap, size_t *len)
{
	*len = fault ? http_fault(out, cap, fault) : 0;
	return status;
}

int fcapi_finish(struct fcapi *a, const char *fault, char *out, size_t cap, size_t *len)
{
	a->pending = FCAPI_NONE;
	return reply(fault ? 400 : 204, fault, out, cap, len);
}

/* Counts a request for the metrics lines: ok/fail per route. */
static void count(struct fcapi *a, enum http_method m, const char *p, int failed)
{
	struct fcapi_counters *n = &a->n;
#define C(ok, bad) do { if (failed) n->bad++; n->ok++; } while (0)
	if (m == HTTP_PUT) {
		if (!strcmp(p, "/actions"))
			C(put_actions, put_actions_fails);
		else if (!strcmp(p, "/boot-source"))
			C(put_boot_source, put_boot_source_fails);
		else if (!strncmp(p, "/drives/", 8))
			C(put_drive, put_drive_fails);
		else if (!strcmp(p, "/logger"))
			C(put_logger, put_logger_fails);
		else if (!strcmp(p, "/machine-config"))
			C(put_machine_cfg, put_machine_cfg_fails);
		else if (!strcmp(p, "/metrics"))
			C(put_metrics, put_metrics_fails);
		else if (!strncmp(p, "/network-interfaces/", 20))
			C(put_network, put_network_fails);
		else if (!strcmp(p, "/vsock"))
			C(put_vsock, put_vsock_fails);
	} else if (m == HTTP_PATCH) {
		if (!strncmp(p, "/drives/", 8))
			C(patch_drive, patch_drive_fails);
		else if (!strncmp(p, "/network-interfaces/", 20))
			C(patch_network, patch_network_fails);
		else if (!strcmp(p, "/machine-config"))
			C(patch_machine_cfg, patch_machine_cfg_fails);
	}
#undef C
}

int fcapi_handle(struct fcapi *a, const struct http_request *req, char *out, size_t cap, size_t *len)
{
	char *arena_buf = NULL, msg[512];
	struct json_arena arena;
	struct why w = { msg, sizeof(msg) };
	const struct json *body = NULL;
	const char *p = req->path, *id, *err = NULL;
	int r = -EINVAL, status;

	msg[0] = '\0';
	*len = 0;
	a->deprecated = 0;
	if (!strcmp(p, "/mmds") || !strcmp(p, "/mmds/config")) {
		status = fcapi_mmds(a, req, out, cap, len);
		if (req->method == HTTP_GET) {
			a->n.get_mmds++;
		} else if (req->method == HTTP_PATCH) {
			a->n.patch_mmds++;
			a->n.patch_mmds_fails += status >= 400;
		} else {
			a->n.put_mmds++;
			a->n.put_mmds_fails += status >= 400;
		}
		return status;
	}
	if (req->method == HTTP_GET) {
		size_t n = 0;

		if (strcmp(p, "/") && strcmp(p, "/machine-config") && strcmp(p, "/version") && strcmp(p, "/vm/config") &&
		    strcmp(p, "/balloon") && strcmp(p, "/balloon/statistics"))
			goto bad_route;
		/* Firecracker refuses a GET that carries a body. */
		if (req->body_len) {
			snprintf(msg, sizeof(msg), "GET request cannot have a body.");
			goto bad;
		}
		if (!strcmp(p, "/")) {
			n = get_info(a, out, cap);
			a->n.get_instance_info++;
		} else if (!strcmp(p, "/machine-config")) {
			n = fcapi_get_machine_config(a, out, cap);
			a->n.get_machine_cfg++;
		} else if (!strcmp(p, "/version")) {
			n = get_version(out, cap);
			a->n.get_version++;
		} else if (!strcmp(p, "/balloon") || !strcmp(p, "/balloon/statistics")) {
			r = p[8] ? fcapi_get_balloon_stats(a, out, cap, &n, &w) : fcapi_get_balloon(a, out, cap, &n, &w);
			if (r)
				goto bad;
		} else {
			n = fcapi_vm_config_json(a, out, cap);
			a->n.get_vm_config++;
		}
		if (!n)
			return reply(500, "reply too long", out, cap, len);
		*len = n;
		return 200;
	}
	if (req->method == HTTP_PATCH ? strcmp(p, "/vm") && strcmp(p, "/machine-config") && !path_id(p, "/drives/") &&
					    !path_id(p, "/network-interfaces/") && strcmp(p, "/balloon") &&
					    strcmp(p, "/balloon/statistics")
	    : req->method != HTTP_PUT ||
		      (strcmp(p, "/boot-source") && strcmp(p, "/machine-config") && !path_id(p, "/drives/") &&
		       !path_id(p, "/network-interfaces/") && !path_id(p, "/fs/") && strcmp(p, "/vsock") &&
		       strcmp(p, "/actions") && strcmp(p, "/snapshot/create") && strcmp(p, "/snapshot/load") &&
		       strcmp(p, "/logger") && strcmp(p, "/metrics") && strcmp(p, "/entropy") && strcmp(p, "/balloon") &&
		       strcmp(p, "/serial") && strcmp(p, "/cpu-config")))
		goto bad_route;
	/* Every PUT and PATCH takes a JSON object (Firecracker's words). */
	if (!req->body_len) {
		snprintf(msg, sizeof(msg), req->method == HTTP_PUT ? "Empty PUT request." : "Empty PATCH request.");
		goto bad;
	}
	arena_buf = malloc(JSON_ARENA_SIZE);
	if (!arena_buf)
		return reply(500, "out of memory", out, cap, len);
	arena = (struct json_arena){ .buf = arena_buf, .size = JSON_ARENA_SIZE };
	body = json_parse(req->body, req->body_len, &arena, &err);
	if (!body) {
		snprintf(msg, sizeof(msg), "invalid JSON body: %s", err ? err : "parse error");
		goto bad;
	}
	if (req->method == HTTP_PATCH) {
		if (!strcmp(p, "/vm"))
			r = fcapi_patch_vm(a, body, &w);
		else if (!strcmp(p, "/machine-config"))
			r = fcapi_put_machine_config(a, body, 1, &w);
		else if ((id = path_id(p, "/drives/")))
			r = fcapi_patch_drive(a, body, id, &w);
		else if ((id = path_id(p, "/network-interfaces/")))
			r = fcapi_patch_net(a, body, id, &w);
		else if (!strcmp(p, "/balloon"))
			r = fcapi_patch_balloon(a, body, &w);
		else if (!strcmp(p, "/balloon/statistics"))
			r = fcapi_patch_balloon_stats(a, body, &w);
		else
			goto bad_route;
	} else if (!strcmp(p, "/boot-source")) {
		r = fcapi_put_boot_source(a, body, &w);
	} else if (!strcmp(p, "/machine-config")) {
		r = fcapi_put_machine_config(a, body, 0, &w);
	} else if ((id = path_id(p, "/drives/"))) {
		r = fcapi_put_drive(a, body, id, &w);
	} else if ((id = path_id(p, "/network-interfaces/"))) {
		r = fcapi_put_net(a, body, id, &w);
	} else if ((id = path_id(p, "/fs/"))) {
		r = fcapi_put_fs(a, body, id, &w);
	} else if (!strcmp(p, "/vsock")) {
		r = fcapi_put_vsock(a, body, &w);
	} else if (!strcmp(p, "/actions")) {
		r = fcapi_put_actions(a, body, &w);
	} else if (!strcmp(p, "/snapshot/create")) {
		r = fcapi_put_snapshot_create(a, body, &w);
	} else if (!strcmp(p, "/snapshot/load")) {
		r = fcapi_put_snapshot_load(a, body, &w);
	} else if (!strcmp(p, "/logger")) {
		r = fcapi_put_logger(a, body, &w);
	} else if (!strcmp(p, "/metrics")) {
		r = fcapi_put_metrics(a, body, &w);
	} else if (!strcmp(p, "/entropy")) {
		r = fcapi_put_entropy(a, body, &w);
	} else if (!strcmp(p, "/balloon")) {
		r = fcapi_put_balloon(a, body, &w);
	} else if (!strcmp(p, "/serial")) {
		r = fcapi_put_serial(a, body, &w);
	} else if (!strcmp(p, "/cpu-config")) {
		r = fcapi_put_cpu_config(a, body, &w);
	} else {
		goto bad_route;
	}
	free(arena_buf);
	count(a, req->method, p, r != 0);
	if (a->deprecated)
		a->n.deprecated_calls++;
	if (r)
		return reply(400, msg, out, cap, len);
	return a->pending != FCAPI_NONE ? 0 : 204;

bad_route:
	snprintf(msg, sizeof(msg), "Invalid request method and/or path: %s %.200s.", req->method_name, p);
bad:
	free(arena_buf);
	count(a, req->method, p, 1);
	status = reply(400, msg, out, cap, len);
	return status;
}

/* ---- --config-file ------------------------------------------------------------ */

int fcapi_apply_config_file(struct fcapi *a, const char *text, size_t len, char *why, size_t n)
{
	struct json_arena arena = { .size = 1u << 20 };
	struct why w = { why, n };
	const struct json *root, *m, *e, *mmds_cfg = NULL;
	const char *err = NULL;
	int r = 0;

	arena.buf = malloc(arena.size);
	if (!arena.buf)
		return -ENOMEM;
	root = json_parse(text, len, &arena, &err);
	if (!root || root->type != JSON_OBJ) {
		r = fcapi_fail(&w, "%s", root ? "the configuration must be a JSON object" : err ? err : "invalid JSON");
		goto out;
	}
	for (m = root->u.kids.first; m && !r; m = m->next) {
		if (!strcmp(m->key, "boot-source")) {
			r = fcapi_put_boot_source(a, m, &w);
		} else if (!strcmp(m->key, "machine-config")) {
			r = fcapi_put_machine_config(a, m, 0, &w);
		} else if (!strcmp(m->key, "vsock")) {
			r = m->type == JSON_NULL ? 0 : fcapi_put_vsock(a, m, &w);
		} else if (!strcmp(m->key, "logger")) {
			r = m->type == JSON_NULL ? 0 : fcapi_put_logger(a, m, &w);
		} else if (!strcmp(m->key, "metrics")) {
			r = m->type == JSON_NULL ? 0 : fcapi_put_metrics(a, m, &w);
		} else if (!strcmp(m->key, "entropy")) {
			r = m->type == JSON_NULL ? 0 : fcapi_put_entropy(a, m, &w);
		} else if (!strcmp(m->key, "balloon")) {
			r = m->type == JSON_NULL ? 0 : fcapi_put_balloon(a, m, &w);
		} else if (!strcmp(m->key, "mmds-config")) {
			mmds_cfg = m; /* once the interfaces are known, below */
		} else if (!strcmp(m->key, "serial")) {
			r = m->type == JSON_NULL ? 0 : fcapi_put_serial(a, m, &w);
		} else if (!strcmp(m->key, "cpu-config")) {
			r = m->type == JSON_NULL ? 0 : fcapi_cpu_config_file(a, m, &w);
		} else if (m->type == JSON_NULL &&
			   (!strcmp(m->key, "pmem") ||
			    !strcmp(m->key, "memory-hotplug"))) {
			r = 0; /* Firecracker's example config has "cpu-config": null */
		} else if (!strcmp(m->key, "drives") || !strcmp(m->key, "network-interfaces") ||
			   !strcmp(m->key, "fs")) {
			if (m->type != JSON_ARR && m->type != JSON_NULL) {
				r = fcapi_fail(&w, "'%s' must be an array", m->key);
				break;
			}
			if (m->type == JSON_NULL)
				continue;
			for (e = m->u.kids.first; e && !r; e = e->next)
				r = m->key[0] == 'd'   ? fcapi_put_drive(a, e, NULL, &w)
				    : m->key[0] == 'n' ? fcapi_put_net(a, e, NULL, &w)
						       : fcapi_put_fs(a, e, NULL, &w);
		} else {
			r = fcapi_fail(&w, "'%.64s' is not supported in a configuration file (boot-source, drives, "
				 "machine-config, network-interfaces, vsock, logger, metrics, entropy, balloon, fs, serial, cpu-config, "
				 "mmds-config; others only as null)",
				 m->key);
			break;
		}
		if (r) {
			char tmp[512];

			snprintf(tmp, sizeof(tmp), "%s", why);
			snprintf(why, n, "%s: %s", m->key, tmp);
		}
	}
	if (!r && mmds_cfg && mmds_cfg->type != JSON_NULL) {
		r = mmds_cfg->type == JSON_OBJ ? fcapi_mmds_config_file(a, mmds_cfg, &w)
					       : fcapi_fail(&w, "'mmds-config' must be an object");
		if (r) {
			char tmp[512];

			snprintf(tmp, sizeof(tmp), "%s", why);
			snprintf(why, n, "mmds-config: %s", tmp);
		}
	}
	if (!r && !a->cfg.has_boot)
		r = fcapi_fail(&w, "the configuration has no boot-source");
out:
	free(arena.buf);
	return r;
}
