/* libFuzzer target: the egress proxy's request-head parser, the chunked
 * framer on what follows the head, and the policy matcher and upstream
 * head on what parses, as the proxy runs them on every guest request;
 * the same bytes as a ClientHello (eg_hello_sni), as the guest's side of
 * an intercepted tunnel (eg_tunnel_serve, requests inside it) and, split
 * at the first 0xff, as an upstream's response relayed into the tunnel.
 * Oracle: whatever a rule allows has a path inside the rule's prefix with
 * no byte, escape or segment docs/egress.md refuses, and its upstream head
 * one Host, at most one framing header, no override or forwarding header
 * and the credential once. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/egress/egress_http.h"
#include "cli/egress/egress_tunnel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static char *env_cred(const char *name, void *ctx)
{
	(void)name;
	(void)ctx;
	return strdup("sk-fuzz");
}

static char *file_cred(const char *path, void *ctx)
{
	(void)path;
	(void)ctx;
	return NULL;
}

/* The path part decoded once: it must not hold '/', '\\', ';', '.' or '%'
 * that were escaped, controls or non-ASCII, and no segment may be dots
 * (and spaces) only. Written apart from check_path on purpose. */
static int path_ok(const char *p, size_t n)
{
	static const char allowed[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				      "-._~!$&'()*+,=:@%";
	const char *qm = memchr(p, '?', n);
	size_t q = qm ? (size_t)(qm - p) : n, i, sl = 0, k;
	char seg[EG_MAX_HEAD];

	if (!q || p[0] != '/')
		return 0;
	for (i = 1; i <= q; i++) {
		int only_dots = 1, dot = 0;
		unsigned v;

		if (i < q && p[i] != '/') {
			if (!p[i] || !memchr(allowed, p[i], sizeof(allowed) - 1))
				return 0;
			v = (unsigned char)p[i];
			if (v == '%') {
				if (i + 2 >= q || !isxdigit((unsigned char)p[i + 1]) || !isxdigit((unsigned char)p[i + 2]) ||
				    sscanf(p + i + 1, "%2x", &v) != 1)
					return 0;
				if (v < 0x20 || v > 0x7e || strchr("/\\;.%", (int)v))
					return 0;
				i += 2;
			}
			seg[sl++] = (char)v;
			continue;
		}
		for (k = 0; k < sl; k++) {
			dot |= seg[k] == '.';
			only_dots &= seg[k] == '.' || seg[k] == ' ';
		}
		if (dot && only_dots)
			return 0;
		sl = 0;
	}
	return 1;
}

static size_t count(const char *hay, const char *needle)
{
	size_t k = 0;
	const char *s = hay;

	while ((s = strcasestr(s, needle))) {
		k++;
		s++;
	}
	return k;
}

static void check_allowed(const struct eg_request *r, const struct eg_rule *rule, const char *head)
{
	static const char *const never[] = { "\nX-HTTP-Method:", "\nX-HTTP-Method-Override:", "\nX-Method-Override:",
					     "\nX-Original-URL:", "\nX-Original-URI:", "\nX-Original-Method:",
					     "\nX-Rewrite-URL:", "\nX-Forwarded-", "\nForwarded:", "\nX-Real-IP:",
					     "\nProxy-Connection:", "\nProxy-Authorization:", "\nConnection: k" };
	size_t pl = strlen(rule->path_prefix), i;

	if (!path_ok(r->path, r->path_len))
		abort();
	if (pl && (r->path_len < pl || memcmp(r->path, rule->path_prefix, pl) ||
		   (r->path_len > pl && rule->path_prefix[pl - 1] != '/' && r->path[pl] != '/' && r->path[pl] != '?')))
		abort();
	if (memchr(r->path, '#', r->path_len))
		abort();
	for (i = 0; i < r->path_len; i++)
		if ((unsigned char)r->path[i] <= 0x20 || (unsigned char)r->path[i] >= 0x7f)
			abort();
	if (count(head, "\nHost:") != 1 || count(head, "\nContent-Length:") + count(head, "\nTransfer-Encoding:") > 1)
		abort();
	for (i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (strcasestr(head, never[i]))
			abort();
	if (rule->cred) {
		char line[80];

		snprintf(line, sizeof(line), "\n%s: %s\r", rule->header, rule->cred);
		if (count(head, line) != 1)
			abort();
		snprintf(line, sizeof(line), "\n%s:", rule->header);
		if (count(head, line) != 1)
			abort();
	}
}

/* ---- a tunnel over memory ------------------------------------------------ */

struct mem {
	const char *p;
	size_t n, off;
	size_t wrote;
	unsigned opens, logs;
	const char *cred;
	const char *resp;
	size_t resp_len, resp_off;
	int kept; /* the loop kept the upstream connection: the next open reuses it */
};

static long m_read(void *ctx, char *buf, size_t len)
{
	struct mem *m = ctx;
	size_t k = m->n - m->off;

	k = k < len ? k : len;
	k = k < 333 ? k : 333; /* pieces: heads and bodies split anywhere */
	memcpy(buf, m->p + m->off, k);
	m->off += k;
	return (long)k;
}

static int m_write(void *ctx, const char *buf, size_t len)
{
	struct mem *m = ctx;

	/* the credential never goes back to the guest, unless the upstream
	 * sent it (responses are relayed unchanged: docs/egress.md) */
	if (memmem(buf, len, m->cred, strlen(m->cred)) && !memmem(m->resp, m->resp_len, m->cred, strlen(m->cred)))
		abort();
	m->wrote += len;
	return 0;
}

static long u_read(void *ctx, char *buf, size_t len)
{
	struct mem *m = ctx;
	size_t k = m->resp_len - m->resp_off;

	k = k < len ? k : len;
	memcpy(buf, m->resp + m->resp_off, k);
	m->resp_off += k;
	return (long)k;
}

static int u_write(void *ctx, const char *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
	return 0;
}

static int u_open(void *ctx, const struct eg_rule *rule, const struct eg_request *r, int fresh, struct eg_stream *s,
		  int *reused, const char **why)
{
	struct mem *m = ctx;

	(void)why;
	/* only what the policy allows reaches an upstream, for the tunnel's host */
	if (!rule || strcmp(r->host, "api.example.com") || r->port != 443 || r->connect)
		abort();
	if (!path_ok(r->path, r->path_len))
		abort();
	m->opens++;
	/* a kept connection goes on where the last response ended (bytes
	 * after it included), or starts the canned response again */
	*reused = m->kept && !fresh;
	if (!*reused || m->resp_off == m->resp_len)
		m->resp_off = 0;
	m->kept = 0;
	s->read = u_read;
	s->write = u_write;
	s->ctx = m;
	return 0;
}

static void u_close(void *ctx, struct eg_stream *s, int keep)
{
	struct mem *m = ctx;

	(void)s;
	m->kept = keep;
}

static void u_log(void *ctx, const struct eg_logrec *l)
{
	struct mem *m = ctx;

	if (!l->method || !l->host || (l->status && (l->status < 100 || l->status > 999)))
		abort();
	m->logs++;
}

static void fuzz_tunnel(const struct eg_policy *p, const char *buf, size_t len)
{
	const char *ff = memchr(buf, 0xff, len);
	struct mem m = { .p = buf, .n = ff ? (size_t)(ff - buf) : len, .cred = "sk-fuzz" };
	struct eg_tunnel t = {
		.policy = p, .host = "api.example.com", .port = 443,
		.guest = { .read = m_read, .write = m_write, .ctx = &m },
		.open = u_open, .close = u_close, .log = u_log, .ctx = &m,
	};
	unsigned served;

	m.resp = ff ? ff + 1 : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	m.resp_len = ff ? len - (size_t)(ff - buf) - 1 : strlen(m.resp);
	served = eg_tunnel_serve(&t);
	if (served != m.logs || m.opens > served)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static const char policy[] =
		"{\"allow\":[{\"host\":\"api.example.com\",\"path_prefix\":\"/v1\",\"methods\":[\"GET\",\"POST\"],"
		"\"inject\":{\"header\":\"Authorization\",\"value_env\":\"K\",\"prefix\":\"Bearer \"}},"
		"{\"host\":\"*.example.org\",\"port\":8443}]}";
	static const struct eg_cred_source src = { .env = env_cred, .file = file_cred };
	static char out[EG_MAX_HEAD + EG_MAX_CRED + 256];
	const char *buf = (const char *)data, *why = NULL;
	struct eg_policy p;
	struct eg_request r;
	char msg[256];
	char sni[EG_MAX_HOST + 1];
	int rc = eg_hello_sni(data, len, sni);

	/* a name is a host name: lower case letters, digits, '-', '.', '_' */
	if (rc == 0) {
		size_t i, n = strlen(sni);

		if (!n || n > EG_MAX_HOST || sni[0] == '.' || sni[n - 1] == '.')
			abort();
		for (i = 0; i < n; i++)
			if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789-._", sni[i]))
				abort();
	} else if (rc != -ENOENT && rc != -EAGAIN && rc != -EINVAL) {
		abort();
	}
	if (eg_policy_parse(policy, sizeof(policy) - 1, &src, &p, msg, sizeof(msg)))
		abort();
	fuzz_tunnel(&p, buf, len);
	eg_policy_free(&p);
	rc = eg_parse_request(buf, len, &r, &why);
	if (rc == -EAGAIN)
		return 0;
	if (rc) {
		if (!why || (rc != -EINVAL && rc != -E2BIG))
			abort();
		return 0;
	}
	if (r.head_len > len || r.head_len > EG_MAX_HEAD || r.nr_headers > EG_MAX_HEADERS)
		abort();
	if (eg_policy_parse(policy, sizeof(policy) - 1, &src, &p, msg, sizeof(msg)))
		abort();
	{
		const struct eg_rule *rule = eg_policy_match(&p, &r, &why);
		long n;

		if (!rule && !why)
			abort();
		n = eg_upstream_head(&r, rule ? rule : &p.rules[0], 0, out, sizeof(out) - 1);
		if (n < 0 || (size_t)n >= sizeof(out))
			abort();
		out[n] = '\0';
		if (rule && !r.connect)
			check_allowed(&r, rule, out);
	}
	if (r.chunked) {
		struct eg_chunked c;
		int done;
		long k;

		eg_chunked_init(&c);
		k = eg_chunked_feed(&c, buf + r.head_len, len - r.head_len, &done);
		if (k > (long)(len - r.head_len) || (k >= 0 && !done && (size_t)k != len - r.head_len))
			abort();
	}
	eg_policy_free(&p);
	return 0;
}
