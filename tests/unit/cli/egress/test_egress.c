/* The egress proxy's pure half: request parser, chunked framing, policy
 * parsing and matching, the upstream head with the credential. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/egress/egress_http.h"

static int parse(const char *s, struct eg_request *r)
{
	const char *why = NULL;
	int rc = eg_parse_request(s, strlen(s), r, &why);

	if (rc && rc != -EAGAIN)
		assert_non_null(why);
	return rc;
}

static void request_forms(void **state)
{
	struct eg_request r;

	(void)state;
	assert_int_equal(parse("GET http://API.Example.com/v1/x?q=1 HTTP/1.1\r\nHost: x\r\n\r\nBODY", &r), 0);
	assert_string_equal(r.method, "GET");
	assert_string_equal(r.host, "api.example.com");
	assert_int_equal(r.port, 0);
	assert_int_equal(r.path_len, strlen("/v1/x?q=1"));
	assert_memory_equal(r.path, "/v1/x?q=1", r.path_len);
	assert_int_equal(r.connect, 0);
	assert_int_equal(r.nr_headers, 1);
	assert_int_equal(r.head_len, strlen("GET http://API.Example.com/v1/x?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"));
	assert_int_equal(r.content_length, -1);

	assert_int_equal(parse("POST http://h:8080 HTTP/1.0\r\n\r\n", &r), 0);
	assert_int_equal(r.port, 8080);
	assert_memory_equal(r.path, "/", 1);

	assert_int_equal(parse("GET https://h/x HTTP/1.1\r\n\r\n", &r), 0);
	assert_int_equal(r.https, 1);

	assert_int_equal(parse("CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", &r), 0);
	assert_int_equal(r.connect, 1);
	assert_int_equal(r.port, 443);
	assert_string_equal(r.host, "api.example.com");
}

/* Requests inside an intercepted tunnel to api.example.com:443. */
static void tunneled_requests(void **state)
{
	static const char *const bad[] = {
		"GET /v1/x HTTP/1.1\r\n\r\n",                               /* no Host */
		"GET /v1/x HTTP/1.1\r\nHost: evil.com\r\n\r\n",
		"GET /v1/x HTTP/1.1\r\nHost: api.example.com:444\r\n\r\n",
		"GET /v1/x HTTP/1.1\r\nHost: api.example.com.evil\r\n\r\n",
		"GET /v1/x HTTP/1.1\r\nHost: api.example.com\r\nHost: api.example.com\r\n\r\n",
		"GET https://evil.com/v1/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"GET https://api.example.com:8443/v1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"GET /v1/../admin HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"GET /v1/%2e%2e/admin HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"GET /v1/..;/admin HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"GET * HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"GET v1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
	};
	struct eg_request r;
	const char *why;
	size_t i;

	(void)state;
#define TP(s) eg_parse_tunneled(s, strlen(s), "api.example.com", 443, &r, &why)
	assert_int_equal(TP("GET /v1/x?q=1 HTTP/1.1\r\nHost: API.example.com\r\n\r\n"), 0);
	assert_string_equal(r.host, "api.example.com");
	assert_int_equal(r.port, 443);
	assert_int_equal(r.https, 1);
	assert_memory_equal(r.path, "/v1/x?q=1", r.path_len);
	assert_int_equal(TP("POST /v1 HTTP/1.1\r\nHost: api.example.com:443\r\nContent-Length: 2\r\n\r\nhi"), 0);
	assert_int_equal(r.content_length, 2);
	assert_int_equal(TP("GET https://api.example.com/v1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n"), 0);
	assert_memory_equal(r.path, "/v1", 3);
	assert_int_equal(TP("GET /v1 HTTP/1.1\r\nHost: api.example.com\r\n"), -EAGAIN);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (TP(bad[i]) != -EINVAL)
			fail_msg("accepted in a tunnel: %s", bad[i]);
#undef TP
}

static void request_errors(void **state)
{
	struct eg_request r;
	static const char *const bad[] = {
		"GET /v1/x HTTP/1.1\r\nHost: h\r\n\r\n",          /* origin-form: not a proxy request */
		"GET http://h/x HTTP/2.0\r\n\r\n",
		"GET http://h/x\r\n\r\n",
		"GET  http://h/x HTTP/1.1\r\n\r\n",
		"G(T http://h/x HTTP/1.1\r\n\r\n",
		"CONNECT h HTTP/1.1\r\n\r\n",                      /* no port */
		"CONNECT h:0 HTTP/1.1\r\n\r\n",
		"CONNECT h:65536 HTTP/1.1\r\n\r\n",
		"GET http://user@h/x HTTP/1.1\r\n\r\n",
		"GET http://h..x/ HTTP/1.1\r\n\r\n",
		"GET http://h:/ HTTP/1.1\r\n\r\n",
		"GET http://[::1]/ HTTP/1.1\r\n\r\n",
		"GET http://h/x HTTP/1.1\r\nNoColon\r\n\r\n",
		"GET http://h/x HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
		"GET http://h/x HTTP/1.1\r\nBad Name: b\r\n\r\n",
		"GET http://h/x HTTP/1.1\r\nA: b\x01\r\n\r\n",
		"POST http://h/x HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
		"POST http://h/x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"POST http://h/x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		"POST http://h/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"CONNECT h:443 HTTP/1.1\r\nContent-Length: 3\r\n\r\n",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &r);

		if (rc != -EINVAL)
			fail_msg("accepted (%d): %s", rc, bad[i]);
	}
	/* A NUL inside the head */
	{
		const char nul[] = "GET http://h/x HTTP/1.1\r\nA: \0b\r\n\r\n";
		const char *why;

		assert_int_equal(eg_parse_request(nul, sizeof(nul) - 1, &r, &why), -EINVAL);
	}
	/* Same value twice is fine */
	assert_int_equal(parse("POST http://h/x HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n", &r), 0);
	assert_int_equal(r.content_length, 5);
	assert_int_equal(parse("POST http://h/x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", &r), 0);
	assert_int_equal(r.chunked, 1);
}

static void request_limits(void **state)
{
	struct eg_request r;
	const char *why;
	char *big = malloc(EG_MAX_HEAD + 100);
	size_t n = 0;
	unsigned i;

	(void)state;
	assert_int_equal(parse("GET http://h/x HTTP/1.1\r\nA: b\r\n", &r), -EAGAIN);
	/* no blank line within EG_MAX_HEAD: too big */
	memset(big, 'a', EG_MAX_HEAD + 100);
	assert_int_equal(eg_parse_request(big, EG_MAX_HEAD, &r, &why), -E2BIG);
	assert_int_equal(eg_parse_request(big, EG_MAX_HEAD - 1, &r, &why), -EAGAIN);
	/* too many headers */
	n = (size_t)sprintf(big, "GET http://h/x HTTP/1.1\r\n");
	for (i = 0; i < EG_MAX_HEADERS + 1; i++)
		n += (size_t)sprintf(big + n, "X%u: y\r\n", i);
	n += (size_t)sprintf(big + n, "\r\n");
	assert_int_equal(eg_parse_request(big, n, &r, &why), -E2BIG);
	/* a long host */
	n = (size_t)sprintf(big, "GET http://");
	memset(big + n, 'h', 300);
	n += 300;
	n += (size_t)sprintf(big + n, "/ HTTP/1.1\r\n\r\n");
	assert_int_equal(eg_parse_request(big, n, &r, &why), -EINVAL);
	free(big);
}

static long feed_all(const char *s, size_t chunk, int *done)
{
	struct eg_chunked c;
	size_t off = 0;

	eg_chunked_init(&c);
	*done = 0;
	while (off < strlen(s) && !*done) {
		size_t n = strlen(s) - off < chunk ? strlen(s) - off : chunk;
		long k = eg_chunked_feed(&c, s + off, n, done);

		if (k < 0)
			return k;
		off += (size_t)k;
	}
	return (long)off;
}

static void chunked_bodies(void **state)
{
	const char *body = "5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\n";
	size_t sizes[] = { 1, 2, 3, 7, 1000 };
	char buf[256];
	size_t i;
	int done;

	(void)state;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		assert_int_equal(feed_all(body, sizes[i], &done), (long)strlen(body));
		assert_true(done);
	}
	/* The body ends where the framing says: the next request stays out. */
	snprintf(buf, sizeof(buf), "%sGET http://evil/ HTTP/1.1\r\n\r\n", "3\r\nabc\r\n0\r\n\r\n");
	assert_int_equal(feed_all(buf, 1000, &done), (long)strlen("3\r\nabc\r\n0\r\n\r\n"));
	assert_true(done);
	/* Not done yet */
	assert_int_equal(feed_all("3\r\nab", 1000, &done), 5);
	assert_false(done);
	/* Broken framing */
	assert_int_equal(feed_all("x\r\n", 1000, &done), -EINVAL);
	assert_int_equal(feed_all("3\r\nabcd\r\n", 1000, &done), -EINVAL);
	assert_int_equal(feed_all("3\nabc\r\n", 1000, &done), -EINVAL);
	assert_int_equal(feed_all("1000000000000000\r\n", 1000, &done), -EINVAL);
	assert_int_equal(feed_all("\r\n", 1000, &done), -EINVAL);
}

/* ---- policy ---- */

static char *fake_env(const char *name, void *ctx)
{
	(void)ctx;
	if (!strcmp(name, "KEY"))
		return strdup("sk-secret\n");
	if (!strcmp(name, "BADKEY"))
		return strdup("a\r\nX-Evil: 1");
	return NULL;
}

static char *fake_file(const char *path, void *ctx)
{
	(void)ctx;
	return !strcmp(path, "/keys/gh") ? strdup("ghp_123") : NULL;
}

static const struct eg_cred_source src = { .env = fake_env, .file = fake_file };

static const char policy_text[] =
	"{\"allow\": ["
	" {\"host\": \"api.example.com\", \"path_prefix\": \"/v1\", \"methods\": [\"GET\", \"POST\"],"
	"  \"inject\": {\"header\": \"Authorization\", \"value_env\": \"KEY\", \"prefix\": \"Bearer \"},"
	"  \"connect\": \"127.0.0.1:8443\", \"ca_file\": \"/tmp/ca.pem\"},"
	" {\"host\": \"*.github.com\", \"port\": 8443, \"tunnel\": false,"
	"  \"inject\": {\"header\": \"X-Token\", \"value_file\": \"/keys/gh\"}},"
	" {\"host\": \"plain.example.org\"}"
	"]}";

static void load(struct eg_policy *p)
{
	char why[256] = "";

	if (eg_policy_parse(policy_text, strlen(policy_text), &src, p, why, sizeof(why)))
		fail_msg("policy: %s", why);
}

static void policy_parse(void **state)
{
	struct eg_policy p;
	char why[256];
	static const char *const bad[] = {
		"[]", "{}", "{\"allow\": 1}", "{\"allow\": [1]}", "{\"allow\": [{}]}",
		"{\"allow\": [{\"host\": \"a b\"}]}", "{\"allow\": [{\"host\": \"h\", \"port\": 0}]}",
		"{\"allow\": [{\"host\": \"h\", \"path_prefix\": \"v1\"}]}",
		"{\"allow\": [{\"host\": \"h\", \"path_prefix\": \"/v1/../admin\"}]}",
		"{\"allow\": [{\"host\": \"h\", \"path_prefix\": \"/v1;x\"}]}",
		"{\"allow\": [{\"host\": \"h\", \"path_prefix\": \"/v1?x\"}]}",
		"{\"allow\": [{\"host\": \"h\", \"path_prefix\": \"/v1%2f\"}]}",
		"{\"allow\": [{\"host\": \"h\", \"methods\": []}]}",
		"{\"allow\": [{\"host\": \"h\", \"methods\": [\"G T\"]}]}",
		"{\"allow\": [{\"host\": \"h\", \"connect\": \"nocolon\"}]}",
		"{\"allow\": [{\"host\": \"h\", \"inject\": {\"header\": \"A\"}}]}",
		"{\"allow\": [{\"host\": \"h\", \"inject\": {\"header\": \"A\", \"value_env\": \"NOPE\"}}]}",
		"{\"allow\": [{\"host\": \"h\", \"inject\": {\"header\": \"A\", \"value_env\": \"KEY\", \"value_file\": \"/keys/gh\"}}]}",
		"{\"allow\": [{\"host\": \"h\", \"inject\": {\"header\": \"A\", \"value_env\": \"BADKEY\"}}]}",
		"{\"allow\": [{\"host\": \"h\", \"inject\": {\"header\": \"Host\", \"value_env\": \"KEY\"}}]}",
		"{\"allow\": [{\"host\": \"h\", \"inject\": {\"header\": \"A:B\", \"value_env\": \"KEY\"}}]}",
	};
	size_t i;

	(void)state;
	load(&p);
	assert_int_equal(p.nr_rules, 3);
	assert_string_equal(p.rules[0].cred, "Bearer sk-secret");
	assert_string_equal(p.rules[0].header, "Authorization");
	assert_int_equal(p.rules[0].port, 443);
	assert_string_equal(p.rules[0].connect, "127.0.0.1:8443");
	assert_string_equal(p.rules[1].cred, "ghp_123");
	assert_int_equal(p.rules[1].tunnel, 0);
	assert_null(p.rules[2].cred);
	eg_policy_free(&p);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		if (eg_policy_parse(bad[i], strlen(bad[i]), &src, &p, why, sizeof(why)) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		assert_true(why[0] != '\0');
		/* the credential never shows up in a message */
		assert_null(strstr(why, "sk-secret"));
	}
}

static const struct eg_rule *match(const struct eg_policy *p, const char *req, const char **why)
{
	struct eg_request r;
	const char *w;

	assert_int_equal(eg_parse_request(req, strlen(req), &r, &w), 0);
	*why = NULL;
	return eg_policy_match(p, &r, why);
}

/* The rule a request gets past the parser and the matcher with, or NULL
 * (a 400 or a 403). */
static const struct eg_rule *allowed(const struct eg_policy *p, const char *req)
{
	struct eg_request r;
	const char *w;

	if (eg_parse_request(req, strlen(req), &r, &w))
		return NULL;
	return eg_policy_match(p, &r, &w);
}

static void policy_match(void **state)
{
	struct eg_policy p;
	const char *why;

	(void)state;
	load(&p);
	assert_ptr_equal(match(&p, "GET http://api.example.com/v1/models HTTP/1.1\r\n\r\n", &why), &p.rules[0]);
	assert_ptr_equal(match(&p, "GET http://api.example.com/v1 HTTP/1.1\r\n\r\n", &why), &p.rules[0]);
	assert_ptr_equal(match(&p, "GET http://api.example.com/v1?x HTTP/1.1\r\n\r\n", &why), &p.rules[0]);
	assert_ptr_equal(match(&p, "POST http://api.example.com:443/v1/x HTTP/1.1\r\n\r\n", &why), &p.rules[0]);
	assert_ptr_equal(match(&p, "POST http://api.example.com:80/v1/x HTTP/1.1\r\n\r\n", &why), &p.rules[0]);
	assert_null(match(&p, "GET http://api.example.com/v10 HTTP/1.1\r\n\r\n", &why));
	assert_string_equal(why, "path not allowed");
	assert_null(allowed(&p, "GET http://api.example.com/v1/../admin HTTP/1.1\r\n\r\n"));
	assert_null(allowed(&p, "GET http://api.example.com/v1/%2e%2e/admin HTTP/1.1\r\n\r\n"));
	assert_null(match(&p, "DELETE http://api.example.com/v1/x HTTP/1.1\r\n\r\n", &why));
	assert_string_equal(why, "method not allowed");
	assert_null(match(&p, "GET http://api.example.com:8080/v1/x HTTP/1.1\r\n\r\n", &why));
	assert_string_equal(why, "port not allowed");
	assert_null(match(&p, "GET http://evil.com/v1/x HTTP/1.1\r\n\r\n", &why));
	assert_string_equal(why, "host not allowed");
	assert_null(match(&p, "GET http://xapi.example.com/v1/x HTTP/1.1\r\n\r\n", &why));
	/* wildcards: subdomains only */
	assert_ptr_equal(match(&p, "PUT http://api.github.com:8443/repos HTTP/1.1\r\n\r\n", &why), &p.rules[1]);
	assert_ptr_equal(match(&p, "GET http://a.b.github.com/ HTTP/1.1\r\n\r\n", &why), &p.rules[1]);
	assert_null(match(&p, "GET http://github.com/ HTTP/1.1\r\n\r\n", &why));
	assert_null(match(&p, "GET http://evilgithub.com/ HTTP/1.1\r\n\r\n", &why));
	/* tunnels */
	assert_ptr_equal(match(&p, "CONNECT api.example.com:443 HTTP/1.1\r\n\r\n", &why), &p.rules[0]);
	assert_null(match(&p, "CONNECT api.example.com:80 HTTP/1.1\r\n\r\n", &why));
	/* a rule that injects intercepts its tunnels, "tunnel": false or not */
	assert_ptr_equal(match(&p, "CONNECT api.github.com:8443 HTTP/1.1\r\n\r\n", &why), &p.rules[1]);
	assert_ptr_equal(match(&p, "CONNECT plain.example.org:443 HTTP/1.1\r\n\r\n", &why), &p.rules[2]);
	eg_policy_free(&p);
	{
		static const char text[] =
			"{\"ca\": \"host\", \"limits\": {\"requests_per_second\": 5, \"max_connections\": 4},"
			" \"allow\": ["
			" {\"host\": \"a.test\", \"path_prefix\": \"/public\"},"
			" {\"host\": \"a.test\", \"inject\": {\"header\": \"K\", \"value_env\": \"KEY\"}},"
			" {\"host\": \"b.test\", \"tunnel\": false},"
			" {\"host\": \"c.test\", \"intercept\": true},"
			" {\"host\": \"d.test\", \"require_sni\": false}]}";
		const struct eg_rule *x;
		struct eg_request r;
		char w[256];

		assert_int_equal(eg_policy_parse(text, strlen(text), &src, &p, w, sizeof(w)), 0);
		assert_int_equal(p.ca_shared, 1);
		assert_int_equal(p.limits.rate, 5);
		assert_int_equal(p.limits.max_conns, 4);
		assert_int_equal(p.rules[4].require_sni, 0);
		assert_int_equal(p.rules[0].require_sni, 1);
#define CONNECT_MODE(req) (assert_int_equal(eg_parse_request(req, strlen(req), &r, &why), 0), \
			   eg_connect_mode(&p, &r, &x, &why))
		/* any rule of the host that injects: intercepted, even after a pass-through one */
		assert_int_equal(CONNECT_MODE("CONNECT a.test:443 HTTP/1.1\r\n\r\n"), EG_INTERCEPT);
		assert_ptr_equal(x, &p.rules[1]);
		assert_int_equal(CONNECT_MODE("CONNECT c.test:443 HTTP/1.1\r\n\r\n"), EG_INTERCEPT);
		assert_int_equal(CONNECT_MODE("CONNECT d.test:443 HTTP/1.1\r\n\r\n"), EG_PIPE);
		assert_ptr_equal(x, &p.rules[4]);
		assert_int_equal(CONNECT_MODE("CONNECT b.test:443 HTTP/1.1\r\n\r\n"), EG_DENY);
		assert_string_equal(why, "tunnels to this host are not allowed");
		assert_int_equal(CONNECT_MODE("CONNECT e.test:443 HTTP/1.1\r\n\r\n"), EG_DENY);
		assert_string_equal(why, "host not allowed");
		assert_int_equal(CONNECT_MODE("CONNECT a.test:8443 HTTP/1.1\r\n\r\n"), EG_DENY);
		assert_string_equal(why, "port not allowed");
#undef CONNECT_MODE
		eg_policy_free(&p);
	}
	{
		static const char *const bad_top[] = {
			"{\"ca\": \"world\", \"allow\": []}",
			"{\"limits\": {\"requests_per_second\": 0}, \"allow\": []}",
			"{\"limits\": {\"max_connections\": 65}, \"allow\": []}",
			"{\"limits\": {\"rps\": 1}, \"allow\": []}",
			"{\"limits\": 3, \"allow\": []}",
			"{\"allow\": [{\"host\": \"h\", \"intercept\": false, \"inject\": {\"header\": \"A\", \"value_env\": \"KEY\"}}]}",
			"{\"allow\": [{\"host\": \"h\", \"require_sni\": 1}]}",
		};
		char w[256];
		size_t i;

		for (i = 0; i < sizeof(bad_top) / sizeof(bad_top[0]); i++)
			if (eg_policy_parse(bad_top[i], strlen(bad_top[i]), &src, &p, w, sizeof(w)) != -EINVAL)
				fail_msg("accepted: %s", bad_top[i]);
	}
	load(&p);
	eg_policy_free(&p);
	/* no rules: nothing */
	{
		struct eg_policy empty = { .nr_rules = 0 };

		assert_null(match(&empty, "GET http://api.example.com/v1 HTTP/1.1\r\n\r\n", &why));
		assert_string_equal(why, "host not allowed");
	}
}

/* Paths that could reach the upstream as something outside the rule's
 * prefix: refused by the parser (400), whatever the policy. */
static void path_bypasses(void **state)
{
	static const char *const bad[] = {
		"/v1/..\\admin", "/v1\\..\\admin", "/v1/..;/admin", "/v1;/admin", "/v1/x;jsessionid=1",
		"/v1/../admin", "/v1/./admin", "/v1/..", "/v1/.", "/v1/...", "/v1/..%20/admin", "/v1/.%20",
		"/v1/%2e%2e/admin", "/v1/%2E./admin", "/v1/%2fadmin", "/v1%2F..%2Fadmin", "/v1/%5cadmin",
		"/v1/%3b/admin", "/v1/%00", "/v1/%252e%252e/admin", "/v1/%0d%0aX:1", "/v1/%7f",
		"/v1/%c0%ae%c0%ae/admin", "/v1/%ef%bc%8f", "/v1/%", "/v1/%2", "/v1/%zz",
		"/v1/x#frag", "/v1/x?q=1#frag", "/v1/caf\xc3\xa9", "/v1/x?caf\xc3\xa9", "/v1/\x80",
		"/v1/<x>", "/v1/\"x\"", "/v1/{x}", "/v1/a|b", "/v1/a^b", "/v1/a`b", "/v1/[x]",
	};
	static const char *const good[] = {
		"/v1", "/v1/", "/v1/models", "/v1/a%20b", "/v1/a%41b", "/v1/.well-known/x", "/v1/file.tar.gz",
		"/v1/~u/a-b_c.d", "/v1/x:y@z!$&'()*+,=", "/v1//x", "/v1/..a/b.", "/v1?q=a/b?c&d=%2f..%00;\\[]{}|^`\"<>",
		"/v1/x?%c3%a9",
	};
	struct eg_policy p;
	struct eg_request r;
	char req[512];
	const char *why;
	size_t i;

	(void)state;
	load(&p);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(req, sizeof(req), "GET http://api.example.com%s HTTP/1.1\r\n\r\n", bad[i]);
		if (allowed(&p, req))
			fail_msg("allowed: %s", bad[i]);
		if (eg_parse_request(req, strlen(req), &r, &why) != -EINVAL)
			fail_msg("not a 400: %s", bad[i]);
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(req, sizeof(req), "GET http://api.example.com%s HTTP/1.1\r\n\r\n", good[i]);
		if (allowed(&p, req) != &p.rules[0])
			fail_msg("refused: %s", good[i]);
	}
	eg_policy_free(&p);
}

/* Headers that make some servers take another method or path than the
 * request line's: such a request matches no rule, in any case. */
static void override_headers(void **state)
{
	static const char *const names[] = {
		"X-HTTP-Method-Override: DELETE", "x-http-method-override: DELETE", "X-HTTP-Method: DELETE",
		"X-Method-Override: DELETE", "X-Original-URL: /admin", "x-original-url: /admin",
		"X-Rewrite-URL: /admin", "X-Original-URI: /admin", "X-Original-Method: DELETE",
	};
	struct eg_policy p;
	char req[512];
	size_t i;

	(void)state;
	load(&p);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct eg_request r;
		const char *why = NULL;

		snprintf(req, sizeof(req), "GET http://api.example.com/v1/x HTTP/1.1\r\nHost: api.example.com\r\n%s\r\n\r\n",
			 names[i]);
		assert_int_equal(eg_parse_request(req, strlen(req), &r, &why), 0);
		if (eg_policy_match(&p, &r, &why))
			fail_msg("allowed with %s", names[i]);
		assert_string_equal(why, "method-override and URL-rewrite headers are not allowed");
	}
	/* a header that only looks alike passes */
	assert_ptr_equal(allowed(&p, "GET http://api.example.com/v1/x HTTP/1.1\r\nX-HTTP-Methods: a\r\n\r\n"),
			 &p.rules[0]);
	eg_policy_free(&p);
}

/* Host, framing and forwarding headers towards the upstream. */
static void upstream_headers(void **state)
{
	struct eg_policy p;
	struct eg_request r;
	const char *why;
	char out[4096];
	long n;
	const char *req = "POST http://api.example.com/v1/x HTTP/1.1\r\n"
			  "Host: evil.example.net\r\n"
			  "X-Forwarded-Prefix: /admin\r\n"
			  "x-forwarded-host: admin.example.com\r\n"
			  "X-Forwarded-For: 127.0.0.1\r\n"
			  "Forwarded: for=127.0.0.1;host=admin\r\n"
			  "X-Real-IP: 127.0.0.1\r\n"
			  "Content-Length: 4\r\n"
			  "content-length: 4\r\n"
			  "X-Forwardedness: kept\r\n\r\nbody";

	(void)state;
	load(&p);
	/* two Host headers: 400 (RFC 9112 section 3.2) */
	assert_int_equal(parse("GET http://api.example.com/v1 HTTP/1.1\r\nHost: api.example.com\r\nhost: evil\r\n\r\n", &r),
			 -EINVAL);
	assert_int_equal(eg_parse_request(req, strlen(req), &r, &why), 0);
	assert_ptr_equal(eg_policy_match(&p, &r, &why), &p.rules[0]);
	n = eg_upstream_head(&r, &p.rules[0], 0, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	/* the URL's host, never the guest's Host */
	assert_non_null(strstr(out, "POST /v1/x HTTP/1.1\r\nHost: api.example.com\r\n"));
	assert_null(strstr(out, "evil"));
	assert_null(strcasestr(out, "X-Forwarded-"));
	assert_null(strcasestr(out, "Forwarded:"));
	assert_null(strcasestr(out, "X-Real-IP"));
	assert_non_null(strstr(out, "X-Forwardedness: kept\r\n"));
	/* one Content-Length, as parsed */
	assert_non_null(strstr(out, "\r\nContent-Length: 4\r\n"));
	assert_null(strcasestr(strcasestr(out, "Content-Length") + 1, "Content-Length"));
	/* Transfer-Encoding: one, spelled "chunked" */
	req = "POST http://api.example.com/v1/x HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n";
	assert_int_equal(eg_parse_request(req, strlen(req), &r, &why), 0);
	n = eg_upstream_head(&r, &p.rules[0], 0, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "\r\nTransfer-Encoding: chunked\r\n"));
	assert_null(strstr(out, "CHUNKED"));
	assert_null(strcasestr(out, "Content-Length"));
	eg_policy_free(&p);
}

static void injection(void **state)
{
	struct eg_policy p;
	struct eg_request r;
	const char *why;
	char out[4096];
	const char *req = "POST http://api.example.com/v1/chat?x=1 HTTP/1.1\r\n"
			  "Host: api.example.com\r\n"
			  "authorization: Bearer guest-fake\r\n"
			  "Proxy-Authorization: Basic xxx\r\n"
			  "Proxy-Connection: keep-alive\r\n"
			  "Connection: keep-alive, Upgrade\r\n"
			  "Content-Length: 4\r\n"
			  "Expect: 100-continue\r\n"
			  "X-Other: kept\r\n\r\nbody";
	long n;

	(void)state;
	load(&p);
	assert_int_equal(eg_parse_request(req, strlen(req), &r, &why), 0);
	n = eg_upstream_head(&r, &p.rules[0], 0, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "POST /v1/chat?x=1 HTTP/1.1\r\nHost: api.example.com\r\n"));
	assert_non_null(strstr(out, "\r\nAuthorization: Bearer sk-secret\r\n"));
	assert_null(strstr(out, "guest-fake"));
	assert_null(strcasestr(out, "Proxy-"));
	assert_null(strstr(out, "keep-alive"));
	assert_true(r.expect_continue);
	assert_null(strstr(out, "100-continue"));
	assert_non_null(strstr(out, "\r\nContent-Length: 4\r\n"));
	assert_non_null(strstr(out, "\r\nX-Other: kept\r\n"));
	assert_non_null(strstr(out, "\r\nConnection: close\r\n\r\n"));
	assert_int_equal(strstr(out, "\r\n\r\n") + 4 - out, n);
	/* Host carries a port other than 443 */
	n = eg_upstream_head(&r, &p.rules[1], 0, out, sizeof(out));
	out[n] = '\0';
	assert_non_null(strstr(out, "Host: api.example.com:8443\r\n"));
	assert_non_null(strstr(out, "X-Token: ghp_123\r\n"));
	/* the guest's Authorization stays for a rule that injects another header */
	assert_non_null(strstr(out, "authorization: Bearer guest-fake\r\n"));
	/* too small */
	assert_int_equal(eg_upstream_head(&r, &p.rules[0], 0, out, 20), -E2BIG);
	eg_policy_free(&p);
}

static void response_status(void **state)
{
	(void)state;
	assert_int_equal(eg_response_status("HTTP/1.1 200 OK\r\n", 17), 200);
	assert_int_equal(eg_response_status("HTTP/1.0 404 x", 14), 404);
	assert_int_equal(eg_response_status("HTTP/1.1 2x0 OK", 15), 0);
	assert_int_equal(eg_response_status("HTTP/1.1", 8), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(request_forms),  cmocka_unit_test(request_errors), cmocka_unit_test(request_limits),
		cmocka_unit_test(chunked_bodies), cmocka_unit_test(policy_parse),   cmocka_unit_test(policy_match),
		cmocka_unit_test(path_bypasses),  cmocka_unit_test(override_headers), cmocka_unit_test(upstream_headers),
		cmocka_unit_test(injection),      cmocka_unit_test(response_status), cmocka_unit_test(tunneled_requests),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
