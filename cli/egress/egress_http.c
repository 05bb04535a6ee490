/* The egress proxy's parser, policy and header rewriting: see egress_http.h. */
#include "cli/egress/egress_http.h"
#include "vmm/wire/json.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int fail(const char **why, const char *msg)
{
	*why = msg;
	return -EINVAL;
}

/* RFC 9110 section 5.6.2 tchar */
static int is_tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_host_char(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_';
}

static int name_is(const struct eg_header *h, const char *name)
{
	return h->name_len == strlen(name) && !strncasecmp(h->name, name, h->name_len);
}

/* "host[:port]" into r->host/r->port. */
static int parse_authority(const char *s, size_t n, struct eg_request *r, int port_required, const char **why)
{
	size_t i, hl = n;
	const char *colon = memchr(s, ':', n);

	if (colon) {
		unsigned long v = 0;
		size_t pl = n - (size_t)(colon - s) - 1;

		hl = (size_t)(colon - s);
		if (pl == 0 || pl > 5)
			return fail(why, "bad port");
		for (i = 0; i < pl; i++) {
			if (!isdigit((unsigned char)colon[1 + i]))
				return fail(why, "bad port");
			v = v * 10 + (unsigned long)(colon[1 + i] - '0');
		}
		if (v == 0 || v > 65535)
			return fail(why, "bad port");
		r->port = (unsigned)v;
	} else if (port_required) {
		return fail(why, "CONNECT needs host:port");
	}
	if (hl == 0 || hl > EG_MAX_HOST)
		return fail(why, "bad host");
	for (i = 0; i < hl; i++) {
		if (!is_host_char((unsigned char)s[i]))
			return fail(why, "bad host (names and IPv4 addresses only)");
		r->host[i] = (char)tolower((unsigned char)s[i]);
	}
	r->host[hl] = '\0';
	if (r->host[0] == '.' || r->host[hl - 1] == '.' || strstr(r->host, ".."))
		return fail(why, "bad host");
	return 0;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (char)tolower((unsigned char)ch);
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* RFC 3986 section 3.3: pchar = unreserved / pct-encoded / sub-delims / ":" /
 * "@", minus ";" (a path parameter: servers such as Tomcat drop ";..." from
 * a segment, so "/v1/..;/admin" is "/v1/../admin" to them). */
static int is_path_char(unsigned char c)
{
	return isalnum(c) || (c && strchr("-._~!$&'()*+,=:@/", c));
}

/* Checks an origin-form path and query (docs/egress.md, "Paths"): the
 * path is RFC 3986 pchars and '/', percent-escapes of printable ASCII
 * other than '/', '\', '.', ';' and '%' (which would change the segments
 * for an upstream that decodes them, once or twice), and no segment of
 * only dots and spaces ("..", "...", ".. " are the parent to some server);
 * the query any printable ASCII but '#'. Refused rather than normalised:
 * the upstream, not this proxy, decides what a path means. */
static int check_path(const char *p, size_t n, const char **why)
{
	size_t i, seg = 0, dots = 0, other = 0;

	for (i = 0; i < n && p[i] != '?'; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '/') {
			if (i > seg && dots && !other)
				return fail(why, "dot segment in the path");
			seg = i + 1;
			dots = other = 0;
			continue;
		}
		if (c == '%') {
			int hi = i + 2 < n ? hexval(p[i + 1]) : -1, lo = i + 2 < n ? hexval(p[i + 2]) : -1;

			if (hi < 0 || lo < 0)
				return fail(why, "bad percent-escape in the path");
			c = (unsigned char)(hi * 16 + lo);
			if (c < 0x20 || c >= 0x7f || strchr("/\\.;%", c))
				return fail(why, "percent-escape of a control, non-ASCII, '/', '\\', '.', ';' or '%' in the path");
			i += 2;
			if (c == ' ')
				continue;
			other = 1;
			continue;
		}
		if (!is_path_char(c))
			return fail(why, "character not allowed in the path");
		if (c == '.')
			dots = 1;
		else
			other = 1;
	}
	if (i > seg && dots && !other)
		return fail(why, "dot segment in the path");
	for (; i < n; i++)
		if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f || p[i] == '#')
			return fail(why, "character not allowed in the query");
	return 0;
}

/* A tunnel's context for the parser: the host and port of the CONNECT. */
struct tun {
	const char *host;
	unsigned port;
};

static int parse_target(const char *t, size_t n, struct eg_request *r, const struct tun *tun, const char **why)
{
	const char *auth, *slash;
	size_t i, skip;

	for (i = 0; i < n; i++)
		if ((unsigned char)t[i] <= 0x20 || t[i] == 0x7f)
			return fail(why, "bad request target");
	if (tun && r->connect)
		return fail(why, "CONNECT inside a tunnel");
	if (r->connect)
		return parse_authority(t, n, r, 1, why);
	if (tun && t[0] == '/') {
		/* origin-form (RFC 9112 section 3.2.1): the tunnel names the host */
		snprintf(r->host, sizeof(r->host), "%s", tun->host);
		r->port = tun->port;
		r->path = t;
		r->path_len = n;
		return check_path(r->path, r->path_len, why);
	}
	if (n > 7 && !strncasecmp(t, "http://", 7)) {
		skip = 7;
	} else if (n > 8 && !strncasecmp(t, "https://", 8)) {
		skip = 8;
		r->https = 1;
	} else {
		return fail(why, "not a proxy request (the target must be http://HOST/PATH)");
	}
	auth = t + skip;
	slash = memchr(auth, '/', n - skip);
	if (memchr(auth, '?', slash ? (size_t)(slash - auth) : n - skip) ||
	    memchr(auth, '@', slash ? (size_t)(slash - auth) : n - skip))
		return fail(why, "bad request target");
	if (parse_authority(auth, slash ? (size_t)(slash - auth) : n - skip, r, 0, why))
		return -EINVAL;
	if (tun) {
		/* absolute-form inside a tunnel (RFC 9112 section 3.2.2): only
		 * for the tunnel's own host and port */
		if (strcmp(r->host, tun->host) || (r->port && r->port != tun->port))
			return fail(why, "the request names another host than its tunnel");
		r->port = tun->port;
		r->https = 1;
	}
	if (slash) {
		r->path = slash;
		r->path_len = n - (size_t)(slash - t);
	} else {
		r->path = "/";
		r->path_len = 1;
	}
	return check_path(r->path, r->path_len, why);
}

static int parse_content_length(const struct eg_header *h, int64_t *out, const char **why)
{
	int64_t v = 0;
	size_t i;

	if (!h->value_len || h->value_len > 15)
		return fail(why, "bad Content-Length");
	for (i = 0; i < h->value_len; i++) {
		if (!isdigit((unsigned char)h->value[i]))
			return fail(why, "bad Content-Length");
		v = v * 10 + (h->value[i] - '0');
	}
	if (*out >= 0 && *out != v)
		return fail(why, "conflicting Content-Length headers");
	*out = v;
	return 0;
}

/* Host: HOST or HOST:PORT, the tunnel's (names compared without case). */
static int host_is_tunnel(const struct eg_header *h, const struct tun *tun)
{
	size_t hl = strlen(tun->host);
	char port[8];

	if (h->value_len < hl || strncasecmp(h->value, tun->host, hl))
		return 0;
	if (h->value_len == hl)
		return 1;
	snprintf(port, sizeof(port), ":%u", tun->port);
	return h->value_len == hl + strlen(port) && !memcmp(h->value + hl, port, strlen(port));
}

static int parse(const char *buf, size_t len, struct eg_request *r, const struct tun *tun, const char **why)
{
	const char *end, *p, *eol, *sp1, *sp2;
	size_t scan = len < EG_MAX_HEAD ? len : EG_MAX_HEAD;
	int te = 0, hosts = 0;

	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	*why = NULL;
	end = memmem(buf, scan, "\r\n\r\n", 4);
	if (!end) {
		if (len >= EG_MAX_HEAD) {
			*why = "request head too long";
			return -E2BIG;
		}
		return -EAGAIN;
	}
	r->head_len = (size_t)(end - buf) + 4;
	if (memchr(buf, '\0', r->head_len))
		return fail(why, "NUL in the request head");
	/* request-line = method SP request-target SP HTTP-version */
	eol = memmem(buf, r->head_len, "\r\n", 2);
	sp1 = memchr(buf, ' ', (size_t)(eol - buf));
	if (!sp1 || sp1 == buf || (size_t)(sp1 - buf) >= sizeof(r->method))
		return fail(why, "bad request line");
	sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1)
		return fail(why, "bad request line");
	for (p = buf; p < sp1; p++)
		if (!is_tchar((unsigned char)*p))
			return fail(why, "bad method");
	memcpy(r->method, buf, (size_t)(sp1 - buf));
	r->method[sp1 - buf] = '\0';
	if (eol - sp2 - 1 != 8 || (memcmp(sp2 + 1, "HTTP/1.1", 8) && memcmp(sp2 + 1, "HTTP/1.0", 8)))
		return fail(why, "not HTTP/1.x");
	r->connect = !strcmp(r->method, "CONNECT");
	if (parse_target(sp1 + 1, (size_t)(sp2 - sp1 - 1), r, tun, why))
		return -EINVAL;
	if (tun)
		r->https = 1;
	/* field-line = field-name ":" OWS field-value OWS */
	for (p = eol + 2; p < end + 2; p = eol + 2) {
		struct eg_header *h;
		const char *colon, *v, *ve;

		eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
		if (r->nr_headers == EG_MAX_HEADERS) {
			*why = "too many headers";
			return -E2BIG;
		}
		if (*p == ' ' || *p == '\t')
			return fail(why, "folded header lines are not accepted");
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || colon == p)
			return fail(why, "bad header line");
		h = &r->h[r->nr_headers++];
		h->name = p;
		h->name_len = (size_t)(colon - p);
		for (v = p; v < colon; v++)
			if (!is_tchar((unsigned char)*v))
				return fail(why, "bad header name");
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++) {
		}
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--) {
		}
		for (p = v; p < ve; p++)
			if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
				return fail(why, "bad header value");
		h->value = v;
		h->value_len = (size_t)(ve - v);
		if (name_is(h, "Content-Length") && parse_content_length(h, &r->content_length, why))
			return -EINVAL;
		/* RFC 9112 section 3.2: more than one Host is a 400. */
		if (name_is(h, "Host") && hosts++)
			return fail(why, "more than one Host header");
		if (tun && name_is(h, "Host") && !host_is_tunnel(h, tun))
			return fail(why, "the Host header names another host than its tunnel");
		if (name_is(h, "Expect") && h->value_len == 12 && !strncasecmp(h->value, "100-continue", 12))
			r->expect_continue = 1;
		if (name_is(h, "Transfer-Encoding")) {
			if (te || h->value_len != 7 || strncasecmp(h->value, "chunked", 7))
				return fail(why, "only Transfer-Encoding: chunked is accepted");
			te = 1;
		}
	}
	r->chunked = te;
	if (te && r->content_length >= 0)
		return fail(why, "both Content-Length and Transfer-Encoding");
	if (r->connect && (te || r->content_length > 0))
		return fail(why, "CONNECT with a body");
	/* RFC 9112 section 3.2: an HTTP/1.1 request without Host is a 400 */
	if (tun && !hosts)
		return fail(why, "no Host header");
	return 0;
}

int eg_parse_request(const char *buf, size_t len, struct eg_request *r, const char **why)
{
	return parse(buf, len, r, NULL, why);
}

int eg_parse_tunneled(const char *buf, size_t len, const char *host, unsigned port, struct eg_request *r,
		      const char **why)
{
	const struct tun tun = { .host = host, .port = port };

	return parse(buf, len, r, &tun, why);
}

/* ---- chunked bodies ---------------------------------------------------- */

enum { CK_SIZE, CK_EXT, CK_SIZE_LF, CK_DATA, CK_DATA_CR, CK_DATA_LF, CK_TRAILER, CK_TRAILER_LF, CK_DONE };

void eg_chunked_init(struct eg_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CK_SIZE;
}

long eg_chunked_feed(struct eg_chunked *c, const char *buf, size_t len, int *done)
{
	size_t i = 0;

	*done = c->state == CK_DONE;
	while (i < len && c->state != CK_DONE) {
		char ch = buf[i];

		switch (c->state) {
		case CK_SIZE:
			if (hexval(ch) >= 0) {
				if (++c->digits > 15)
					return -EINVAL;
				c->left = c->left * 16 + (uint64_t)hexval(ch);
			} else if (c->digits && (ch == ';' || ch == ' ' || ch == '\t')) {
				c->state = CK_EXT;
			} else if (c->digits && ch == '\r') {
				c->state = CK_SIZE_LF;
			} else {
				return -EINVAL;
			}
			i++;
			break;
		case CK_EXT:
			if (++c->line > 4096)
				return -EINVAL;
			if (ch == '\r')
				c->state = CK_SIZE_LF;
			else if (ch == '\n' || ch == '\0')
				return -EINVAL;
			i++;
			break;
		case CK_SIZE_LF:
			if (ch != '\n')
				return -EINVAL;
			i++;
			c->digits = 0;
			c->line = 0;
			c->state = c->left ? CK_DATA : CK_TRAILER;
			break;
		case CK_DATA: {
			size_t n = len - i < c->left ? len - i : (size_t)c->left;

			i += n;
			c->left -= n;
			if (!c->left)
				c->state = CK_DATA_CR;
			break;
		}
		case CK_DATA_CR:
			if (ch != '\r')
				return -EINVAL;
			c->state = CK_DATA_LF;
			i++;
			break;
		case CK_DATA_LF:
			if (ch != '\n')
				return -EINVAL;
			c->state = CK_SIZE;
			i++;
			break;
		case CK_TRAILER:
			/* trailer lines until an empty one */
			if (ch == '\r') {
				c->state = CK_TRAILER_LF;
			} else if (ch == '\n' || ch == '\0' || ++c->line > 4096) {
				return -EINVAL;
			}
			i++;
			break;
		case CK_TRAILER_LF:
			if (ch != '\n')
				return -EINVAL;
			i++;
			if (c->line == 0) {
				c->state = CK_DONE;
			} else {
				c->line = 0;
				c->state = CK_TRAILER;
			}
			break;
		default:
			return -EINVAL;
		}
	}
	*done = c->state == CK_DONE;
	return (long)i;
}

/* ---- the policy ---------------------------------------------------------- */

static int bad(char *why, size_t len, unsigned i, const char *msg)
{
	snprintf(why, len, "allow[%u]: %s", i, msg);
	return -EINVAL;
}

static int valid_host_pattern(const char *h)
{
	size_t i, n = strlen(h);

	if (!strncmp(h, "*.", 2))
		h += 2, n -= 2;
	if (n == 0 || n > EG_MAX_HOST || h[0] == '.' || h[n - 1] == '.' || strstr(h, ".."))
		return 0;
	for (i = 0; i < n; i++)
		if (!is_host_char((unsigned char)h[i]))
			return 0;
	return 1;
}

static int copy_str(const struct json *o, const char *key, char *dst, size_t len, int required)
{
	const char *s;

	if (!json_get(o, key))
		return required ? -1 : 0;
	if (json_get_str(o, key, &s) || strlen(s) >= len || (required && !s[0]))
		return -1;
	snprintf(dst, len, "%s", s);
	return 0;
}

static int parse_inject(const struct json *inj, const struct eg_cred_source *src, struct eg_rule *r, unsigned i,
			char *why, size_t wl)
{
	const char *env = NULL, *file = NULL, *prefix = "";
	char *val = NULL;
	size_t n, k;

	if (inj->type != JSON_OBJ)
		return bad(why, wl, i, "\"inject\" must be an object");
	if (copy_str(inj, "header", r->header, sizeof(r->header), 1))
		return bad(why, wl, i, "\"inject\" needs \"header\": a header name");
	for (k = 0; r->header[k]; k++)
		if (!is_tchar((unsigned char)r->header[k]))
			return bad(why, wl, i, "\"header\" is not a header name");
	if (!strcasecmp(r->header, "Host") || !strcasecmp(r->header, "Content-Length") ||
	    !strcasecmp(r->header, "Transfer-Encoding") || !strcasecmp(r->header, "Connection"))
		return bad(why, wl, i, "that header cannot be injected");
	if (json_get(inj, "prefix") && json_get_str(inj, "prefix", &prefix))
		return bad(why, wl, i, "\"prefix\" must be a string");
	if (json_get(inj, "value_env") && json_get_str(inj, "value_env", &env))
		return bad(why, wl, i, "\"value_env\" must be a string");
	if (json_get(inj, "value_file") && json_get_str(inj, "value_file", &file))
		return bad(why, wl, i, "\"value_file\" must be a string");
	if (!env == !file)
		return bad(why, wl, i, "\"inject\" needs one of \"value_env\" and \"value_file\"");
	val = env ? src->env(env, src->ctx) : src->file(file, src->ctx);
	if (!val) {
		snprintf(why, wl, env ? "allow[%u]: the credential variable %s is not set" :
					"allow[%u]: the credential file %s cannot be read", i, env ? env : file);
		return -EINVAL;
	}
	n = strlen(val);
	while (n && (val[n - 1] == '\n' || val[n - 1] == '\r'))
		val[--n] = '\0';
	if (!n || n + strlen(prefix) >= EG_MAX_CRED) {
		free(val);
		return bad(why, wl, i, "the credential is empty or too long");
	}
	r->cred = malloc(n + strlen(prefix) + 1);
	if (!r->cred) {
		free(val);
		return -ENOMEM;
	}
	snprintf(r->cred, n + strlen(prefix) + 1, "%s%s", prefix, val);
	explicit_bzero(val, n);
	free(val);
	for (k = 0; r->cred[k]; k++)
		if ((unsigned char)r->cred[k] < 0x20 || r->cred[k] == 0x7f)
			return bad(why, wl, i, "the credential holds control characters");
	return 0;
}

static int parse_rule(const struct json *o, const struct eg_cred_source *src, struct eg_rule *r, unsigned i,
		      char *why, size_t wl)
{
	const struct json *m, *e;
	const char *perr;
	int64_t v;
	size_t k;

	if (o->type != JSON_OBJ)
		return bad(why, wl, i, "each rule is an object");
	r->port = 443;
	r->tunnel = 1;
	r->timeout_ms = 30000;
	if (copy_str(o, "host", r->host, sizeof(r->host), 1) || !valid_host_pattern(r->host))
		return bad(why, wl, i, "\"host\" must be a host name or *.domain");
	for (k = 0; r->host[k]; k++)
		r->host[k] = (char)tolower((unsigned char)r->host[k]);
	if (json_get(o, "port")) {
		if (json_get_int(o, "port", &v) || v < 1 || v > 65535)
			return bad(why, wl, i, "\"port\" must be 1..65535");
		r->port = (unsigned)v;
	}
	if (copy_str(o, "path_prefix", r->path_prefix, sizeof(r->path_prefix), 0) ||
	    (r->path_prefix[0] && r->path_prefix[0] != '/'))
		return bad(why, wl, i, "\"path_prefix\" must start with /");
	if (strchr(r->path_prefix, '?') || check_path(r->path_prefix, strlen(r->path_prefix), &perr))
		return bad(why, wl, i, "\"path_prefix\" must be a path a request may have (see docs/egress.md)");
	if ((m = json_get(o, "methods"))) {
		if (m->type != JSON_ARR || !m->u.kids.count || m->u.kids.count > EG_MAX_METHODS)
			return bad(why, wl, i, "\"methods\" must be an array of 1 to 8 methods");
		for (e = m->u.kids.first; e; e = e->next) {
			if (e->type != JSON_STR || !e->u.str.len || e->u.str.len >= sizeof(r->methods[0]))
				return bad(why, wl, i, "\"methods\" entries are methods such as \"GET\"");
			for (k = 0; k < e->u.str.len; k++)
				if (!is_tchar((unsigned char)e->u.str.s[k]))
					return bad(why, wl, i, "\"methods\" entries are methods such as \"GET\"");
			snprintf(r->methods[r->nr_methods++], sizeof(r->methods[0]), "%s", e->u.str.s);
		}
	}
	if (json_get(o, "tunnel") && json_get_bool(o, "tunnel", &r->tunnel))
		return bad(why, wl, i, "\"tunnel\" must be a boolean");
	r->intercept = json_get(o, "inject") != NULL;
	if (json_get(o, "intercept") && json_get_bool(o, "intercept", &r->intercept))
		return bad(why, wl, i, "\"intercept\" must be a boolean");
	if (!r->intercept && json_get(o, "inject"))
		return bad(why, wl, i, "a rule that injects intercepts its tunnels (\"intercept\" cannot be false)");
	r->require_sni = 1;
	if (json_get(o, "require_sni") && json_get_bool(o, "require_sni", &r->require_sni))
		return bad(why, wl, i, "\"require_sni\" must be a boolean");
	if (copy_str(o, "connect", r->connect, sizeof(r->connect), 0))
		return bad(why, wl, i, "\"connect\" must be \"ADDR:PORT\"");
	if (r->connect[0]) {
		char *c = strrchr(r->connect, ':');
		char *end;
		unsigned long p;

		if (!c || c == r->connect || (p = strtoul(c + 1, &end, 10)) == 0 || p > 65535 || *end)
			return bad(why, wl, i, "\"connect\" must be \"ADDR:PORT\"");
	}
	if (copy_str(o, "ca_file", r->ca_file, sizeof(r->ca_file), 0))
		return bad(why, wl, i, "\"ca_file\" must be a path");
	if (json_get(o, "timeout_ms")) {
		if (json_get_int(o, "timeout_ms", &v) || v < 100 || v > 3600000)
			return bad(why, wl, i, "\"timeout_ms\" must be 100..3600000");
		r->timeout_ms = (unsigned)v;
	}
	if ((m = json_get(o, "inject")))
		return parse_inject(m, src, r, i, why, wl);
	return 0;
}

/* "ca" and "limits" (docs/egress.md). */
static int parse_top(const struct json *root, int *ca_shared, struct eg_limits *l, char *why, size_t wl)
{
	static const struct { const char *key; size_t off; int64_t max; } lim[] = {
		{ "requests_per_second", offsetof(struct eg_limits, rate), 100000 },
		{ "burst", offsetof(struct eg_limits, burst), 100000 },
		{ "max_connections", offsetof(struct eg_limits, max_conns), EG_MAX_CONNS },
	};
	const struct json *o, *k;
	const char *ca;
	size_t i;
	int64_t v;

	if (json_get(root, "ca")) {
		if (json_get_str(root, "ca", &ca) || (strcmp(ca, "sandbox") && strcmp(ca, "host"))) {
			snprintf(why, wl, "\"ca\" is \"sandbox\" or \"host\"");
			return -EINVAL;
		}
		*ca_shared = !strcmp(ca, "host");
	}
	l->max_conns = EG_MAX_CONNS;
	if (!(o = json_get(root, "limits")))
		return 0;
	if (o->type != JSON_OBJ) {
		snprintf(why, wl, "\"limits\" must be an object");
		return -EINVAL;
	}
	for (k = o->u.kids.first; k; k = k->next) {
		for (i = 0; i < sizeof(lim) / sizeof(lim[0]); i++)
			if (!strcmp(k->key, lim[i].key))
				break;
		if (i == sizeof(lim) / sizeof(lim[0]) || json_get_int(o, k->key, &v) || v < 1 || v > lim[i].max) {
			snprintf(why, wl, "limits: \"%s\" is not one of requests_per_second, burst (1..100000) "
				 "and max_connections (1..%d)", k->key, EG_MAX_CONNS);
			return -EINVAL;
		}
		*(unsigned *)((char *)l + lim[i].off) = (unsigned)v;
	}
	return 0;
}

int eg_policy_parse(const char *text, size_t len, const struct eg_cred_source *src, struct eg_policy *p,
		    char *why, size_t wl)
{
	static const size_t arena_size = 1 << 18;
	struct json_arena a = { .size = arena_size };
	const struct json *root, *allow, *e;
	const char *err;
	unsigned i = 0;
	int r = -EINVAL;

	memset(p, 0, sizeof(*p));
	a.buf = malloc(arena_size);
	if (!a.buf)
		return -ENOMEM;
	root = json_parse(text, len, &a, &err);
	if (!root) {
		snprintf(why, wl, "not JSON: %s", err);
		goto out;
	}
	allow = root->type == JSON_OBJ ? json_get(root, "allow") : NULL;
	if (!allow || allow->type != JSON_ARR || allow->u.kids.count > EG_MAX_RULES) {
		snprintf(why, wl, "the policy is an object with \"allow\": an array of at most %d rules",
			 EG_MAX_RULES);
		goto out;
	}
	if (parse_top(root, &p->ca_shared, &p->limits, why, wl))
		goto out;
	for (e = allow->u.kids.first; e; e = e->next, i++) {
		p->nr_rules = i + 1;
		r = parse_rule(e, src, &p->rules[i], i, why, wl);
		if (r)
			goto out;
	}
	r = 0;
out:
	free(a.buf);
	if (r)
		eg_policy_free(p);
	return r;
}

void eg_policy_free(struct eg_policy *p)
{
	unsigned i;

	for (i = 0; i < p->nr_rules; i++) {
		if (p->rules[i].cred) {
			explicit_bzero(p->rules[i].cred, strlen(p->rules[i].cred));
			free(p->rules[i].cred);
		}
		p->rules[i].cred = NULL;
	}
	p->nr_rules = 0;
}

static int host_matches(const char *pattern, const char *host)
{
	size_t pl, hl = strlen(host);

	if (strncmp(pattern, "*.", 2))
		return !strcmp(pattern, host);
	pattern += 1; /* ".example.com" */
	pl = strlen(pattern);
	return hl > pl && !strcmp(host + hl - pl, pattern);
}

/* A path prefix matches at a segment boundary or as written with a
 * trailing slash; "/v1" allows /v1 and /v1/x, not /v10. The parser
 * refused dot segments and escapes that could move a path out of it
 * (check_path). */
static int path_matches(const char *prefix, const char *path, size_t n)
{
	size_t pl = strlen(prefix);

	if (!pl)
		return 1;
	if (n < pl || memcmp(path, prefix, pl))
		return 0;
	return prefix[pl - 1] == '/' || n == pl || path[pl] == '/' || path[pl] == '?';
}

/* Headers that make some servers or frameworks take another method or
 * path than the request line's (Symfony, Laravel, Google APIs, IIS
 * URL Rewrite...): a rule's methods and path prefix would mean nothing. */
static int overrides(const struct eg_request *r)
{
	static const char *const names[] = { "X-HTTP-Method", "X-HTTP-Method-Override", "X-Method-Override",
					     "X-Original-URL", "X-Rewrite-URL", "X-Original-URI",
					     "X-Original-Method" };
	size_t i, k;

	for (i = 0; i < r->nr_headers; i++)
		for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (name_is(&r->h[i], names[k]))
				return 1;
	return 0;
}

int eg_connect_mode(const struct eg_policy *p, const struct eg_request *r, const struct eg_rule **rule,
		    const char **why)
{
	const struct eg_rule *pipe = NULL;
	int host_seen = 0, port_seen = 0;
	unsigned i;

	*rule = NULL;
	for (i = 0; i < p->nr_rules; i++) {
		const struct eg_rule *x = &p->rules[i];

		if (!host_matches(x->host, r->host))
			continue;
		host_seen = 1;
		if (r->port != x->port)
			continue;
		port_seen = 1;
		if (x->intercept) {
			*rule = x;
			return EG_INTERCEPT;
		}
		if (x->tunnel && !pipe)
			pipe = x;
	}
	if (pipe) {
		*rule = pipe;
		return EG_PIPE;
	}
	*why = !host_seen ? "host not allowed" : !port_seen ? "port not allowed" : "tunnels to this host are not allowed";
	return EG_DENY;
}

const struct eg_rule *eg_policy_match(const struct eg_policy *p, const struct eg_request *r, const char **why)
{
	unsigned i, j;
	int host_seen = 0, port_seen = 0, path_seen = 0;

	if (!r->connect && overrides(r)) {
		*why = "method-override and URL-rewrite headers are not allowed";
		return NULL;
	}
	for (i = 0; i < p->nr_rules; i++) {
		const struct eg_rule *x = &p->rules[i];

		if (!host_matches(x->host, r->host))
			continue;
		host_seen = 1;
		/* CONNECT names the upstream's port; a plain request's port
		 * is http's (80, or none) or the upstream's. */
		if (r->connect ? r->port != x->port : (r->port && r->port != 80 && r->port != x->port))
			continue;
		port_seen = 1;
		if (r->connect) {
			const struct eg_rule *t;

			return eg_connect_mode(p, r, &t, why) == EG_DENY ? NULL : t;
		}
		if (!path_matches(x->path_prefix, r->path, r->path_len))
			continue;
		path_seen = 1;
		if (!x->nr_methods)
			return x;
		for (j = 0; j < x->nr_methods; j++)
			if (!strcmp(x->methods[j], r->method))
				return x;
	}
	*why = !host_seen ? "host not allowed" :
	       !port_seen ? "port not allowed" :
	       r->connect ? "tunnels to this host are not allowed" :
	       !path_seen ? "path not allowed" : "method not allowed";
	return NULL;
}

/* ---- the upstream request -------------------------------------------- */

struct out {
	char *buf;
	size_t len, used;
	int err;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->err || n > o->len - o->used) {
		o->err = 1;
		return;
	}
	if (n) /* s may be NULL for an empty value */
		memcpy(o->buf + o->used, s, n);
	o->used += n;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* Hop-by-hop (RFC 9110 section 7.6.1) and proxy headers; the ones the
 * proxy writes itself (Host, the framing: one Content-Length or
 * Transfer-Encoding as parsed) or answers (Expect: the proxy sends the
 * 100); and what describes proxies in front of the server (Forwarded,
 * X-Forwarded-*, X-Real-IP): the only one is this proxy, so the guest's
 * copy is a claim nobody checked, and X-Forwarded-Host/-Prefix steer
 * routing and URL building in some frameworks. */
static int dropped(const struct eg_header *h, const struct eg_rule *rule)
{
	static const char *const names[] = { "Host", "Connection", "Proxy-Connection", "Keep-Alive",
					     "Proxy-Authorization", "Proxy-Authenticate", "TE", "Upgrade", "Expect",
					     "Content-Length", "Transfer-Encoding", "Forwarded", "X-Real-IP" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (name_is(h, names[i]))
			return 1;
	if (h->name_len >= 12 && !strncasecmp(h->name, "X-Forwarded-", 12))
		return 1;
	return rule->header[0] && name_is(h, rule->header);
}

long eg_upstream_head(const struct eg_request *r, const struct eg_rule *rule, int keep_alive, char *buf, size_t len)
{
	struct out o = { .buf = buf, .len = len };
	char port[16] = "";
	unsigned i;

	if (rule->port != 443)
		snprintf(port, sizeof(port), ":%u", rule->port);
	puts_(&o, r->method);
	puts_(&o, " ");
	put(&o, r->path, r->path_len);
	puts_(&o, " HTTP/1.1\r\nHost: ");
	puts_(&o, r->host);
	puts_(&o, port);
	puts_(&o, "\r\n");
	for (i = 0; i < r->nr_headers; i++) {
		const struct eg_header *h = &r->h[i];

		if (dropped(h, rule))
			continue;
		put(&o, h->name, h->name_len);
		puts_(&o, ": ");
		put(&o, h->value, h->value_len);
		puts_(&o, "\r\n");
	}
	if (r->chunked) {
		puts_(&o, "Transfer-Encoding: chunked\r\n");
	} else if (r->content_length >= 0) {
		char cl[48];

		snprintf(cl, sizeof(cl), "Content-Length: %lld\r\n", (long long)r->content_length);
		puts_(&o, cl);
	}
	if (rule->header[0] && rule->cred) {
		puts_(&o, rule->header);
		puts_(&o, ": ");
		puts_(&o, rule->cred);
		puts_(&o, "\r\n");
	}
	/* HTTP/1.1 connections persist unless one side says close (RFC 9112
	 * section 9.3): a kept upstream connection needs no header. */
	puts_(&o, keep_alive ? "\r\n" : "Connection: close\r\n\r\n");
	return o.err ? -E2BIG : (long)o.used;
}

int eg_response_status(const char *buf, size_t len)
{
	int s = 0;
	size_t i;

	if (len < 12 || memcmp(buf, "HTTP/1.", 7) || buf[8] != ' ')
		return 0;
	for (i = 9; i < 12; i++) {
		if (!isdigit((unsigned char)buf[i]))
			return 0;
		s = s * 10 + (buf[i] - '0');
	}
	return s;
}
