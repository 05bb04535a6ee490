/* vmm token create|ls|rm: a sandbox's scoped access tokens (cli/mcp/mcp_tokens.h,
 * docs/mcp.md). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"
#include "cli/mcp/mcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void token_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm token create [--ttl DURATION] [--scope SCOPES] [--json] SANDBOX\n"
		"       vmm token ls [--json] SANDBOX\n"
		"       vmm token rm SANDBOX ID\n\n"
		"Access tokens for a sandbox's host-side endpoints (vmm mcp --listen). create\n"
		"prints a new token once (only its SHA-256 is kept, in the sandbox's folder);\n"
		"ls lists them (id, scopes, expiry); rm revokes one at once.\n\n"
		"  --ttl DURATION   how long it is valid: 90s, 30m, 2h, 7d (default 24h; at most\n"
		"                   366d; 0: never expires)\n"
		"  --scope SCOPES   comma-separated: exec, files:read, files:write, processes,\n"
		"                   mcp, all (default all), and drive:NAME or drive:NAME:ro\n"
		"                   (the file tools on this sandbox's mount of drive NAME only,\n"
		"                   served on the host; with mcp, at most 8)\n\n"
		"These tokens do not open the sandbox's raw API (vsock port 1024): that keeps\n"
		"the sandbox's own boot token, which never leaves the host's sandbox folder.\n");
}

static int lookup(const char *name, struct sandbox *sb)
{
	if (sandbox_lookup(sb, name))
		return -1;
	if (!sb->control[0]) {
		fprintf(stderr, "vmm token: name a sandbox (its folder keeps the tokens), not a socket path\n");
		return -1;
	}
	return 0;
}

static int create(int argc, char **argv)
{
	long long ttl = 24 * 3600, now = (long long)time(NULL);
	unsigned scopes = TOKEN_SCOPE_ALL;
	struct token_drives drives = { .n = 0 };
	const char *name = NULL;
	char tok[TOKEN_LEN + 1], why[160], sc[TOKEN_SCOPES_TEXT_MAX];
	struct token_rec rec;
	int i, json = 0, r;
	struct sandbox sb;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ttl") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "0")) {
				ttl = 0;
			} else if (cli_parse_duration(argv[i], &ttl) || ttl <= 0 || ttl > TOKEN_MAX_TTL_S) {
				fprintf(stderr, "vmm token: --ttl %s: a duration up to 366d (90s, 30m, 2h, 7d) or 0\n",
					argv[i]);
				return CLI_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--scope") && i + 1 < argc) {
			if (token_parse_scopes(argv[++i], &scopes, &drives, why, sizeof(why))) {
				fprintf(stderr, "vmm token: --scope: %s\n", why);
				return CLI_EXIT_USAGE;
			}
			if (drives.n && !(scopes & TOKEN_SCOPE_MCP)) {
				fprintf(stderr, "vmm token: --scope: drive scopes are served by the MCP endpoint: add mcp\n");
				return CLI_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (argv[i][0] != '-' && !name) {
			name = argv[i];
		} else {
			return cli_bad_arg("token", argv[i], "--scope --ttl");
		}
	}
	if (!name)
		return cli_usage_error("token", "expected SANDBOX");
	if (lookup(name, &sb))
		return CLI_EXIT_ERROR;
	r = token_add(sb.dir, now, ttl, scopes, &drives, tok, &rec);
	if (r) {
		fprintf(stderr, "vmm token: %s: %s\n", name, r == -ENOSPC ? "too many tokens (256): rm some" : strerror(-r));
		return CLI_EXIT_ERROR;
	}
	token_scopes_str(scopes, &drives, sc, sizeof(sc));
	if (json)
		printf("{\"id\":\"%s\",\"token\":\"%s\",\"scopes\":\"%s\",\"expires\":%lld}\n", rec.id, tok, sc,
		       rec.expires);
	else
		printf("%s\n", tok);
	if (!json && isatty(2)) {
		char left[32] = "never";

		if (ttl)
			cli_human_duration(ttl, left, sizeof(left));
		fprintf(stderr, "token %s: scopes %s, expires in %s; it is shown only now\n", rec.id, sc, left);
	}
	return 0;
}

static int list(int argc, char **argv)
{
	const char *name = NULL;
	struct token_rec *recs = NULL;
	long long now = (long long)time(NULL);
	size_t n = 0, k;
	int i, json = 0, r;
	struct sandbox sb;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else
			return cli_bad_arg("token", argv[i], "--scope --ttl");
	}
	if (!name)
		return cli_usage_error("token", "expected SANDBOX");
	if (lookup(name, &sb))
		return CLI_EXIT_ERROR;
	r = token_load(sb.dir, &recs, &n);
	if (r) {
		fprintf(stderr, "vmm token: %s: %s\n", name, strerror(-r));
		return CLI_EXIT_ERROR;
	}
	if (json)
		printf("[");
	else
		printf("%-14s %-10s %-10s %s\n", "ID", "CREATED", "EXPIRES", "SCOPES");
	for (k = 0; k < n; k++) {
		char sc[TOKEN_SCOPES_TEXT_MAX], age[32], left[32] = "never";

		token_scopes_str(recs[k].scopes, &recs[k].drives, sc, sizeof(sc));
		if (json) {
			printf("%s{\"id\":\"%s\",\"created\":%lld,\"expires\":%lld,\"expired\":%s,\"scopes\":\"%s\"}",
			       k ? "," : "", recs[k].id, recs[k].created, recs[k].expires,
			       recs[k].expires && recs[k].expires <= now ? "true" : "false", sc);
			continue;
		}
		cli_human_duration(now > recs[k].created ? now - recs[k].created : 0, age, sizeof(age));
		if (recs[k].expires && recs[k].expires <= now)
			snprintf(left, sizeof(left), "expired");
		else if (recs[k].expires)
			cli_human_duration(recs[k].expires - now, left, sizeof(left));
		printf("%-14s %-10s %-10s %s\n", recs[k].id, age, left, sc);
	}
	if (json)
		printf("]\n");
	free(recs);
	return 0;
}

static int remove_one(int argc, char **argv)
{
	struct token_rec *recs = NULL;
	size_t n = 0, k, kept = 0;
	struct sandbox sb;
	int lk, r;

	if (argc != 3)
		return cli_usage_error("token", "expected SANDBOX ID after rm");
	if (lookup(argv[1], &sb))
		return CLI_EXIT_ERROR;
	lk = token_lock(sb.dir);
	if (lk < 0) {
		fprintf(stderr, "vmm token: %s: %s\n", sb.dir, strerror(-lk));
		return CLI_EXIT_ERROR;
	}
	r = token_load(sb.dir, &recs, &n);
	for (k = 0; !r && k < n; k++)
		if (strcmp(recs[k].id, argv[2]))
			recs[kept++] = recs[k];
	if (!r && kept == n)
		r = -ENOENT;
	if (!r)
		r = token_save(sb.dir, recs, kept);
	token_unlock(lk);
	free(recs);
	if (r) {
		fprintf(stderr, "vmm token: %s: %s\n", argv[2], r == -ENOENT ? "no such token" : strerror(-r));
		return CLI_EXIT_ERROR;
	}
	return 0;
}

static int token_main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		token_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "create"))
		return create(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ls"))
		return list(argc - 1, argv + 1);
	if (!strcmp(argv[1], "rm"))
		return remove_one(argc - 1, argv + 1);
	fprintf(stderr, "vmm token: %s: not create, ls or rm\n", argv[1]);
	return CLI_EXIT_USAGE;
}

const struct cli_verb cli_verb_token = {
	.name = "token",
	.summary = CLI_SUMMARY_TOKEN,
	.run = token_main,
	.usage = token_usage,
};
