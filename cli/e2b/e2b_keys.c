/* The gateway's credentials (docs/e2b.md, "Keys"): API keys for the
 * control plane (E2B_API_KEY, sent as X-API-KEY) and each sandbox's envd
 * access token (envdAccessToken, sent as X-Access-Token). Both are vmm's
 * scoped tokens (cli/mcp/mcp_tokens.h): only their SHA-256 is kept,
 * compared in constant time (token_check); keys in the state directory's
 * .e2b folder (0700, its tokens file 0600), a sandbox's access tokens in
 * its own folder's tokens file beside those `vmm token` makes. */
#include "cli/e2b/e2b_priv.h"
#include "cli/mcp/mcp.h"
#include "cli/util/util.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The envd calls a sandbox's access token may make. */
#define E2B_TOKEN_SCOPES (TOKEN_SCOPE_EXEC | TOKEN_SCOPE_FILES_READ | TOKEN_SCOPE_FILES_WRITE | TOKEN_SCOPE_PROCESSES)

static int keys_dir(char *buf, size_t len)
{
	char root[PATH_MAX];
	int r = sandbox_root(root, sizeof(root));

	if (r)
		return r;
	if ((size_t)snprintf(buf, len, "%s/.e2b", root) >= len)
		return -ENAMETOOLONG;
	return cli_mkdir_p(buf, 0700);
}

int e2b_key_create(char *key, size_t len)
{
	char dir[PATH_MAX];
	struct token_rec rec;
	int r;

	if (len < E2B_KEY_LEN + 1)
		return -EINVAL;
	if ((r = keys_dir(dir, sizeof(dir))) || (r = token_add(dir, (long long)time(NULL), 0, TOKEN_SCOPE_ALL, NULL, key, &rec))) {
		log_err("vmm e2b key create: %s", strerror(-r));
		return r;
	}
	return 0;
}

/* The token in `header` (or "Bearer TOKEN" in Authorization) checked
 * against dir's tokens for `need`. */
static enum token_verdict check(const struct e2b_req *r, const char *header, const char *dir, unsigned need)
{
	struct token_rec *recs = NULL;
	enum token_verdict v;
	char tok[320];
	size_t n = 0;

	if (e2b_req_header(r, header, tok, sizeof(tok))) {
		char auth[300];

		if (e2b_req_header(r, "Authorization", auth, sizeof(auth)) || strncmp(auth, "Bearer ", 7))
			return TOKEN_UNKNOWN;
		snprintf(tok, sizeof(tok), "%s", auth + 7);
	}
	if (token_load(dir, &recs, &n))
		return TOKEN_UNKNOWN;
	v = token_check(recs, n, tok, (long long)time(NULL), need, NULL);
	free(recs);
	return v;
}

int e2b_key_check(struct e2b_conn *c, const struct e2b_req *r)
{
	if (check(r, "X-API-KEY", c->srv->keys_dir, TOKEN_SCOPE_ALL) == TOKEN_OK)
		return 0;
	/* E2B's answer to a missing or wrong key */
	e2b_send_error(c, 401, "Invalid API key, please create one with 'vmm e2b key create' and set E2B_API_KEY");
	return -EACCES;
}

int e2b_token_issue(const char *dir, char *tok, size_t len)
{
	struct token_rec rec;

	if (len < TOKEN_LEN + 1)
		return -EINVAL;
	return token_add(dir, (long long)time(NULL), 0, E2B_TOKEN_SCOPES, NULL, tok, &rec);
}

int e2b_token_check(struct e2b_conn *c, const struct e2b_req *r, const char *dir, unsigned need)
{
	enum token_verdict v = check(r, "X-Access-Token", dir, need);

	if (v == TOKEN_OK)
		return 0;
	if (v == TOKEN_OUT_OF_SCOPE)
		e2b_send_error(c, 403, "the access token does not allow this call");
	else
		e2b_send_error(c, 401, "unauthorized access, please provide a valid access token");
	return -EACCES;
}
