/* libFuzzer target: the egress proxy's request-head parser, the chunked
 * framer on what follows the head, and the policy matcher and upstream
 * head on what parses, as the proxy runs them on every guest request. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/egress_http.h"

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
	int rc = eg_parse_request(buf, len, &r, &why);

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
		n = eg_upstream_head(&r, rule ? rule : &p.rules[0], out, sizeof(out));
		if (n < 0 || (size_t)n > sizeof(out))
			abort();
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
