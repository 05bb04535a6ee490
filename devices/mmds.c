/* The MMDS data store and its guest-facing HTTP: see mmds.h, docs/mmds.md. */
#include "devices/mmds.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

/* Parsing a store or a patch: every node and string lives in the arena.
 * A node is about 56 bytes and the smallest JSON value two ("0,"). */
static size_t arena_for(size_t len)
{
	return 32 * len + 4096;
}

int mmds_init(struct mmds *m)
{
	memset(m, 0, sizeof(*m));
	m->limit = MMDS_DEFAULT_LIMIT;
	m->version = MMDS_V1;
	m->ipv4 = MMDS_DEFAULT_IPV4;
	return -pthread_mutex_init(&m->lock, NULL);
}

void mmds_destroy(struct mmds *m)
{
	free(m->json);
	free(m->arena);
	pthread_mutex_destroy(&m->lock);
	memset(m, 0, sizeof(*m));
}

static int fail(char *why, size_t n, int e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return e;
}

int mmds_parse_ipv4(const char *s, uint32_t *ip)
{
	unsigned a, b, c, d;
	char tail;

	if (sscanf(s, "%3u.%3u.%3u.%3u%c", &a, &b, &c, &d, &tail) != 4 || a != 169 || b != 254 ||
	    c < 1 || c > 254 || d > 255)
		return -EINVAL;
	*ip = (a << 24) | (b << 16) | (c << 8) | d;
	return 0;
}

/* ---- canonical JSON: keys sorted, duplicates resolved (the last wins, as
 * serde_json, which Firecracker uses, does), no blanks ------------------- */

struct member {
	const struct json *v;
	unsigned order;
};

static int member_cmp(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int c = strcmp(x->v->key, y->v->key);

	return c ? c : (x->order < y->order ? -1 : 1);
}

/* The members of an object, sorted, one per key (the last given). *out is
 * malloc'd (NULL for an empty object); returns the count or -ENOMEM. */
static long members(const struct json *o, struct member **out)
{
	const struct json *k;
	struct member *v;
	size_t n = 0, i, j = 0;

	*out = NULL;
	if (!o || o->type != JSON_OBJ || !o->u.kids.count)
		return 0;
	v = calloc(o->u.kids.count, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (k = o->u.kids.first; k && n < o->u.kids.count; k = k->next, n++)
		v[n] = (struct member){ k, (unsigned)n };
	qsort(v, n, sizeof(*v), member_cmp);
	for (i = 0; i < n; i++) {
		if (i + 1 < n && !strcmp(v[i].v->key, v[i + 1].v->key))
			continue; /* a later one of the same key follows */
		v[j++] = v[i];
	}
	*out = v;
	return (long)j;
}

/* The shortest decimal that reads back as the same double. */
static void write_num(struct json_writer *w, const struct json *v)
{
	char buf[40];
	int p;

	if (v->num_integral && v->u.num > -9.2e18 && v->u.num < 9.2e18) {
		snprintf(buf, sizeof(buf), "%lld", (long long)v->u.num);
	} else {
		for (p = 15; p <= 17; p++) {
			snprintf(buf, sizeof(buf), "%.*g", p, v->u.num);
			if (strtod(buf, NULL) == v->u.num)
				break;
		}
	}
	jw_raw(w, buf);
}

static int write_value(struct json_writer *w, const struct json *v)
{
	const struct json *k;
	struct member *mv;
	long n, i;

	switch (v->type) {
	case JSON_NULL:
		jw_null(w);
		return 0;
	case JSON_BOOL:
		jw_bool(w, v->u.boolean);
		return 0;
	case JSON_NUM:
		write_num(w, v);
		return 0;
	case JSON_STR:
		jw_strn(w, v->u.str.s, v->u.str.len);
		return 0;
	case JSON_ARR:
		jw_arr(w);
		for (k = v->u.kids.first; k; k = k->next)
			if (write_value(w, k))
				return -ENOMEM;
		jw_arr_end(w);
		return 0;
	case JSON_OBJ:
		if ((n = members(v, &mv)) < 0)
			return -ENOMEM;
		jw_obj(w);
		for (i = 0; i < n; i++) {
			jw_key(w, mv[i].v->key);
			if (write_value(w, mv[i].v)) {
				free(mv);
				return -ENOMEM;
			}
		}
		jw_obj_end(w);
		free(mv);
		return 0;
	}
	return 0;
}

/* RFC 7396 section 2: MergePatch(Target, Patch). target may be NULL. */
static int write_merged(struct json_writer *w, const struct json *t, const struct json *p)
{
	struct member *tv = NULL, *pv = NULL;
	long tn, pn, i = 0, j = 0;
	int r = -ENOMEM;

	if (p->type != JSON_OBJ)
		return write_value(w, p);
	if ((tn = members(t && t->type == JSON_OBJ ? t : NULL, &tv)) < 0 || (pn = members(p, &pv)) < 0)
		goto out;
	jw_obj(w);
	while (i < tn || j < pn) {
		int c = i >= tn ? 1 : j >= pn ? -1 : strcmp(tv[i].v->key, pv[j].v->key);

		if (c < 0) {
			jw_key(w, tv[i].v->key);
			if (write_value(w, tv[i++].v))
				goto out;
			continue;
		}
		if (pv[j].v->type != JSON_NULL) {
			jw_key(w, pv[j].v->key);
			if (write_merged(w, c == 0 ? tv[i].v : NULL, pv[j].v))
				goto out;
		}
		if (c == 0)
			i++;
		j++;
	}
	jw_obj_end(w);
	r = 0;
out:
	free(tv);
	free(pv);
	return r;
}

static struct json *parse(const char *text, size_t len, char **arena, const char **err)
{
	struct json_arena a = { .size = arena_for(len) };
	struct json *root;

	*arena = a.buf = malloc(a.size);
	if (!a.buf) {
		*err = "out of memory";
		return NULL;
	}
	root = json_parse(text, len, &a, err);
	if (!root) {
		free(a.buf);
		*arena = NULL;
	}
	return root;
}

/* Replaces the store with new_json (canonical, owned). Lock held. */
static int install(struct mmds *m, char *new_json, char *why, size_t n)
{
	const char *err = NULL;
	char *arena;
	struct json *tree = parse(new_json, strlen(new_json), &arena, &err);

	if (!tree) {
		free(new_json);
		return fail(why, n, -ENOMEM, "MMDS: %s", err ? err : "out of memory");
	}
	free(m->json);
	free(m->arena);
	m->json = new_json;
	m->tree = tree;
	m->arena = arena;
	return 0;
}

/* Parses body, then writes what `patch` (or a plain PUT) makes of the
 * store, within the limit. */
static int update(struct mmds *m, const char *body, size_t len, int patch, char *why, size_t n)
{
	const char *err = NULL;
	char *arena = NULL, *out;
	struct json_writer w;
	struct json *v;
	int r;

	v = parse(body, len, &arena, &err);
	if (!v)
		return fail(why, n, -EINVAL, "MMDS: invalid JSON: %s", err ? err : "parse error");
	pthread_mutex_lock(&m->lock);
	out = malloc(m->limit + 1);
	if (!out) {
		r = fail(why, n, -ENOMEM, "MMDS: out of memory");
		goto out;
	}
	jw_init(&w, out, m->limit + 1);
	r = patch ? write_merged(&w, m->tree, v) : write_value(&w, v);
	if (r) {
		free(out);
		r = fail(why, n, -ENOMEM, "MMDS: out of memory");
		goto out;
	}
	if (!jw_done(&w)) {
		free(out);
		r = fail(why, n, -EFBIG, "The MMDS patch request doesn't fit. The MMDS data store size limit is %zu bytes.",
			 m->limit);
		goto out;
	}
	r = install(m, out, why, n);
out:
	pthread_mutex_unlock(&m->lock);
	free(arena);
	return r;
}

int mmds_put(struct mmds *m, const char *json, size_t len, char *why, size_t n)
{
	return update(m, json, len, 0, why, n);
}

int mmds_patch(struct mmds *m, const char *json, size_t len, char *why, size_t n)
{
	return update(m, json, len, 1, why, n);
}

char *mmds_get(struct mmds *m)
{
	char *s;

	pthread_mutex_lock(&m->lock);
	s = strdup(m->json ? m->json : "{}");
	pthread_mutex_unlock(&m->lock);
	return s;
}

/* ---- the guest's HTTP ---------------------------------------------------- */

struct req {
	char method[8];
	char path[1024];
	int http10;
	int keep_alive, close;
	int json;                 /* Accept: application/json */
	const char *token;        /* X-metadata-token / X-aws-ec2-metadata-token */
	size_t token_len;
	const char *ttl;          /* the TTL header's value */
	size_t ttl_len;
	const char *ttl_name;     /* as the guest spelled it */
	size_t ttl_name_len;
	int forwarded;            /* X-Forwarded-For present */
};

static const char *find_crlf2(const char *b, size_t len)
{
	size_t i;

	for (i = 0; i + 3 < len; i++)
		if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n')
			return b + i;
	return NULL;
}

static int header_is(const char *name, size_t nlen, const char *want)
{
	return nlen == strlen(want) && !strncasecmp(name, want, nlen);
}

static void trim(const char **v, size_t *len)
{
	while (*len && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*len)--;
	}
	while (*len && ((*v)[*len - 1] == ' ' || (*v)[*len - 1] == '\t'))
		(*len)--;
}

/* Content-Length of the headers in b[0..hlen), -1 if malformed, 0 if none. */
static long content_length(const char *b, size_t hlen)
{
	const char *p = memchr(b, '\n', hlen), *end = b + hlen;

	while (p && p < end) {
		const char *line = p + 1, *eol = memchr(line, '\n', (size_t)(end - line));
		const char *colon;
		size_t ll;

		if (!eol)
			eol = end;
		ll = (size_t)(eol - line);
		colon = memchr(line, ':', ll);
		if (colon && header_is(line, (size_t)(colon - line), "Content-Length")) {
			char num[24];
			const char *v = colon + 1;
			size_t vl = (size_t)(eol - v);
			char *e;
			long n;

			if (vl && v[vl - 1] == '\r')
				vl--;
			trim(&v, &vl);
			if (!vl || vl >= sizeof(num))
				return -1;
			memcpy(num, v, vl);
			num[vl] = '\0';
			n = strtol(num, &e, 10);
			return *e || n < 0 ? -1 : n;
		}
		p = eol;
	}
	return 0;
}

long mmds_request_complete(const char *buf, size_t len)
{
	const char *e = find_crlf2(buf, len < MMDS_MAX_REQUEST ? len : MMDS_MAX_REQUEST);
	size_t hlen;
	long cl;

	if (!e)
		return len >= MMDS_MAX_REQUEST ? -1 : 0;
	hlen = (size_t)(e - buf) + 4;
	cl = content_length(buf, hlen);
	if (cl < 0 || hlen + (size_t)cl > MMDS_MAX_REQUEST)
		return -1;
	return hlen + (size_t)cl <= len ? (long)(hlen + (size_t)cl) : 0;
}

/* Request line and the headers MMDS reads. -EINVAL if malformed. */
static int parse_req(const char *b, size_t len, struct req *q)
{
	const char *end = find_crlf2(b, len), *eol, *sp1, *sp2, *p;
	size_t ulen;

	memset(q, 0, sizeof(*q));
	if (!end)
		return -EINVAL;
	end += 2; /* the last header line's CRLF */
	eol = memchr(b, '\n', (size_t)(end - b));
	if (!eol || eol == b || eol[-1] != '\r')
		return -EINVAL;
	sp1 = memchr(b, ' ', (size_t)(eol - b));
	if (!sp1 || sp1 == b || (size_t)(sp1 - b) >= sizeof(q->method))
		return -EINVAL;
	memcpy(q->method, b, (size_t)(sp1 - b));
	sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (!sp2)
		return -EINVAL;
	if ((size_t)(eol - 1 - sp2 - 1) == 8 && !memcmp(sp2 + 1, "HTTP/1.0", 8))
		q->http10 = 1;
	else if ((size_t)(eol - 1 - sp2 - 1) != 8 || memcmp(sp2 + 1, "HTTP/1.1", 8))
		return -EINVAL;
	p = sp1 + 1;
	ulen = (size_t)(sp2 - p);
	/* absolute form: http://169.254.169.254/path */
	if (ulen > 7 && !strncasecmp(p, "http://", 7)) {
		const char *slash = memchr(p + 7, '/', ulen - 7);

		if (!slash) {
			p = "/";
			ulen = 1;
		} else {
			ulen -= (size_t)(slash - p);
			p = slash;
		}
	}
	{
		const char *qm = memchr(p, '?', ulen);

		if (qm)
			ulen = (size_t)(qm - p);
	}
	if (!ulen || ulen >= sizeof(q->path))
		return -EINVAL;
	memcpy(q->path, p, ulen);
	q->path[ulen] = '\0';
	for (p = eol + 1; p < end; p = eol + 1) {
		const char *colon, *v;
		size_t nl, vl;

		eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol || eol == p || eol[-1] != '\r')
			return -EINVAL;
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon)
			return -EINVAL;
		nl = (size_t)(colon - p);
		v = colon + 1;
		vl = (size_t)(eol - 1 - v);
		trim(&v, &vl);
		if (header_is(p, nl, "Accept")) {
			q->json = memmem(v, vl, "application/json", 16) != NULL;
		} else if (header_is(p, nl, "Connection")) {
			if (vl == 5 && !strncasecmp(v, "close", 5))
				q->close = 1;
			else if (vl == 10 && !strncasecmp(v, "keep-alive", 10))
				q->keep_alive = 1;
		} else if (header_is(p, nl, "X-metadata-token") || header_is(p, nl, "X-aws-ec2-metadata-token")) {
			q->token = v;
			q->token_len = vl;
		} else if (header_is(p, nl, "X-metadata-token-ttl-seconds") ||
			   header_is(p, nl, "X-aws-ec2-metadata-token-ttl-seconds")) {
			q->ttl = v;
			q->ttl_len = vl;
			q->ttl_name = p;
			q->ttl_name_len = nl;
		} else if (header_is(p, nl, "X-Forwarded-For")) {
			q->forwarded = 1;
		}
	}
	return 0;
}

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 413: return "Payload Too Large";
	case 500: return "Internal Server Error";
	default: return "Not Implemented";
	}
}

static char *build(const struct req *q, int status, const char *type, const char *extra, const char *body,
		   size_t blen, size_t *out_len)
{
	char head[512];
	int hl = snprintf(head, sizeof(head),
			  "HTTP/1.%c %d %s\r\nServer: Firecracker API\r\nConnection: %s\r\n%sContent-Type: %s\r\n"
			  "Content-Length: %zu\r\n\r\n",
			  q && q->http10 ? '0' : '1', status, reason(status),
			  q && !q->close && (!q->http10 || q->keep_alive) ? "keep-alive" : "close", extra ? extra : "",
			  type, blen);
	char *r;

	if (hl < 0 || (size_t)hl >= sizeof(head))
		return NULL;
	r = malloc((size_t)hl + blen + 1);
	if (!r)
		return NULL;
	memcpy(r, head, (size_t)hl);
	if (blen)
		memcpy(r + hl, body, blen);
	r[hl + blen] = '\0';
	*out_len = (size_t)hl + blen;
	return r;
}

static char *text(const struct req *q, int *status, int code, size_t *out_len, const char *fmt, ...)
{
	char body[1200];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(body))
		n = sizeof(body) - 1;
	*status = code;
	return build(q, code, "text/plain", NULL, body, (size_t)n, out_len);
}

static int token_valid(struct mmds *m, const char *t, size_t len, uint64_t now)
{
	unsigned i;

	if (!t || !len)
		return 0;
	for (i = 0; i < MMDS_MAX_TOKENS; i++) {
		struct mmds_token *k = &m->tokens[i];

		if (k->value[0] && k->expires > now && strlen(k->value) == len && !memcmp(k->value, t, len))
			return 1;
	}
	return 0;
}

static int token_new(struct mmds *m, unsigned ttl, uint64_t now, char out[45])
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char raw[33];
	struct mmds_token *slot = &m->tokens[0];
	unsigned i, j = 0;

	if (getrandom(raw, 32, 0) != 32)
		return -EIO;
	raw[32] = 0;
	for (i = 0; i < 33; i += 3) {
		unsigned v = (unsigned)raw[i] << 16 | (unsigned)raw[i + 1] << 8 | raw[i + 2];

		out[j++] = b64[(v >> 18) & 63];
		out[j++] = b64[(v >> 12) & 63];
		out[j++] = b64[(v >> 6) & 63];
		out[j++] = b64[v & 63];
	}
	out[43] = '=';
	out[44] = '\0';
	/* a free or expired slot, else the one that expires first */
	for (i = 0; i < MMDS_MAX_TOKENS; i++) {
		struct mmds_token *k = &m->tokens[i];

		if (!k->value[0] || k->expires <= now) {
			slot = k;
			break;
		}
		if (k->expires < slot->expires)
			slot = k;
	}
	memcpy(slot->value, out, 45);
	slot->expires = now + (uint64_t)ttl * 1000000000ull;
	return 0;
}

/* RFC 6901: the path, "//" collapsed and a trailing "/" dropped as
 * Firecracker does, resolved against the store. */
static const struct json *lookup(const struct json *root, char *path)
{
	const struct json *v = root;
	char *p = path, *seg;

	if (*p == '/')
		p++;
	while (v && *p) {
		char *o, *i;

		seg = p;
		p = strchr(seg, '/');
		if (p)
			*p++ = '\0';
		else
			p = seg + strlen(seg);
		if (!*seg)
			continue; /* "//" or a trailing "/" */
		for (i = o = seg; *i; i++) {
			if (*i == '~' && i[1] == '0') {
				*o++ = '~';
				i++;
			} else if (*i == '~' && i[1] == '1') {
				*o++ = '/';
				i++;
			} else {
				*o++ = *i;
			}
		}
		*o = '\0';
		if (v->type == JSON_OBJ) {
			const struct json *k, *hit = NULL;

			for (k = v->u.kids.first; k; k = k->next)
				if (!strcmp(k->key, seg))
					hit = k; /* the last of duplicates, as stored */
			v = hit;
		} else if (v->type == JSON_ARR) {
			char *e;
			unsigned long idx = strtoul(seg, &e, 10);
			const struct json *k = v->u.kids.first;

			if (*e || (seg[0] == '0' && seg[1]) || seg[0] == '-' || seg[0] == '+')
				return NULL;
			while (k && idx--)
				k = k->next;
			v = k;
		} else {
			return NULL;
		}
	}
	return v;
}

static char *get(struct mmds *m, const struct req *q, int *status, size_t *out_len)
{
	static const struct json empty = { .type = JSON_OBJ };
	char path[sizeof(q->path)];
	const struct json *v;
	struct json_writer w;
	char *body, *r;
	size_t cap;

	memcpy(path, q->path, sizeof(path));
	v = lookup(m->tree ? m->tree : &empty, path);
	if (!v)
		return text(q, status, 404, out_len, "Resource not found: %s.", q->path);
	cap = (m->json ? strlen(m->json) : 2) + 16;
	body = malloc(cap);
	if (!body)
		return NULL;
	if (q->json && !m->imds_compat) {
		jw_init(&w, body, cap);
		if (write_value(&w, v) || !jw_done(&w)) {
			free(body);
			return text(q, status, 500, out_len, "MMDS: could not format the value.");
		}
		*status = 200;
		r = build(q, 200, "application/json", NULL, body, w.len, out_len);
	} else if (v->type == JSON_OBJ) {
		struct member *mv;
		long n = members(v, &mv), i;
		size_t len = 0;

		if (n < 0) {
			free(body);
			return NULL;
		}
		/* IMDS: one key per line, objects with a trailing "/" */
		for (i = 0; i < n; i++) {
			size_t kl = strlen(mv[i].v->key);

			if (len + kl + 3 > cap)
				break; /* cannot happen: keys are in the store */
			if (i)
				body[len++] = '\n';
			memcpy(body + len, mv[i].v->key, kl);
			len += kl;
			if (mv[i].v->type == JSON_OBJ)
				body[len++] = '/';
		}
		free(mv);
		*status = 200;
		r = build(q, 200, "text/plain", NULL, body, len, out_len);
	} else if (v->type == JSON_STR) {
		*status = 200;
		r = build(q, 200, "text/plain", NULL, v->u.str.s, v->u.str.len, out_len);
	} else {
		r = text(q, status, 501, out_len, "Cannot retrieve value. The value has an unsupported type.");
	}
	free(body);
	return r;
}

char *mmds_respond(struct mmds *m, const char *reqb, size_t len, uint64_t now, size_t *out_len, int *status,
		   int *close)
{
	struct req q;
	char *r;

	*close = 0;
	pthread_mutex_lock(&m->lock);
	m->stats.rx_requests++;
	if (parse_req(reqb, len, &q)) {
		m->stats.rx_bad++;
		*close = 1;
		r = text(NULL, status, 400, out_len, "Invalid HTTP request.");
		goto out;
	}
	*close = q.close || (q.http10 && !q.keep_alive);
	if (!strcmp(q.method, "GET")) {
		int valid = token_valid(m, q.token, q.token_len, now);

		if (!q.token)
			m->stats.rx_no_token++;
		else if (!valid)
			m->stats.rx_invalid_token++;
		/* V1 answers whatever the token (only counted); V2 needs a live one */
		if (m->version == MMDS_V2 && !q.token)
			r = text(&q, status, 401, out_len,
				 "No MMDS token provided. Use `X-metadata-token` or `X-aws-ec2-metadata-token` header "
				 "to specify the session token.");
		else if (m->version == MMDS_V2 && !valid)
			r = text(&q, status, 401, out_len, "MMDS token not valid.");
		else
			r = get(m, &q, status, out_len);
	} else if (!strcmp(q.method, "PUT")) {
		char path[sizeof(q.path)], *s, *d, tok[45], num[16], hdr[128];
		unsigned long ttl;
		char *e;

		/* "//" collapsed, as for reads */
		for (s = q.path, d = path; *s; s++)
			if (!(s[0] == '/' && s[1] == '/'))
				*d++ = *s;
		*d = '\0';
		if (q.forwarded) {
			r = text(&q, status, 400, out_len, "Invalid header. Reason: Unsupported header name. Key: X-Forwarded-For");
		} else if (strcmp(path, "/latest/api/token")) {
			r = text(&q, status, 404, out_len, "Resource not found: %s.", q.path);
		} else if (!q.ttl) {
			r = text(&q, status, 400, out_len,
				 "Token time to live value not found. Use `X-metadata-token-ttl-seconds` or "
				 "`X-aws-ec2-metadata-token-ttl-seconds` header to specify the token's lifetime.");
		} else if (q.ttl_len == 0 || q.ttl_len >= sizeof(num) ||
			   (memcpy(num, q.ttl, q.ttl_len), num[q.ttl_len] = '\0', ttl = strtoul(num, &e, 10), *e) ||
			   num[0] == '-' || num[0] == '+') {
			r = text(&q, status, 400, out_len, "Invalid header. Reason: Invalid value. Key:%.*s; Value:%.*s",
				 (int)q.ttl_name_len, q.ttl_name, (int)(q.ttl_len < 64 ? q.ttl_len : 64), q.ttl);
		} else if (ttl < 1 || ttl > MMDS_TOKEN_TTL_MAX) {
			r = text(&q, status, 400, out_len,
				 "Invalid time to live value provided for token: %lu. Please provide a value between 1 "
				 "and %u.", ttl, MMDS_TOKEN_TTL_MAX);
		} else if (token_new(m, (unsigned)ttl, now, tok)) {
			m->stats.tx_errors++;
			r = text(&q, status, 500, out_len, "MMDS: no randomness for a token.");
		} else {
			snprintf(hdr, sizeof(hdr), "%.*s: %lu\r\n", (int)q.ttl_name_len, q.ttl_name, ttl);
			*status = 200;
			r = build(&q, 200, "text/plain", hdr, tok, 44, out_len);
		}
	} else {
		r = text(&q, status, 405, out_len, "Not allowed HTTP method.");
		if (r) {
			/* RFC 9110 15.5.6: a 405 names the methods allowed */
			char *k = strstr(r, "Content-Type:"), *nr = malloc(*out_len + 32);

			if (k && nr) {
				size_t pre = (size_t)(k - r);

				memcpy(nr, r, pre);
				memcpy(nr + pre, "Allow: GET, PUT\r\n", 17);
				memcpy(nr + pre + 17, k, *out_len - pre + 1);
				*out_len += 17;
				free(r);
				r = nr;
			} else {
				free(nr);
			}
		}
	}
out:
	pthread_mutex_unlock(&m->lock);
	return r;
}
