/* vmm mcp NAME [--listen ADDR:PORT]: the sandbox's tools as an MCP server
 * (cli/mcp.c; docs/mcp.md). */
#define _GNU_SOURCE
#include "cli.h"
#include "mcp.h"
#include "sandbox.h"
#include "tokens.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void mcp_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm mcp [options] SANDBOX\n\n"
		"Serves the sandbox's tools (exec, start_process, process_output, kill_process,\n"
		"read_file, write_file, edit_file, list_dir, search_files) as an MCP server.\n"
		"Without --listen it speaks MCP on stdin/stdout (an MCP client spawns it as a\n"
		"local server); with --listen, streamable HTTP at http://ADDR:PORT/mcp, where\n"
		"every request needs an access token with the scope mcp (vmm token create),\n"
		"and each tool the scope it names (docs/mcp.md).\n\n"
		"  --listen ADDR:PORT  serve HTTP there (a loopback address unless --allow-remote;\n"
		"                      a PORT alone is 127.0.0.1:PORT)\n"
		"  --allow-remote      allow a non-loopback --listen address (plain HTTP: put TLS\n"
		"                      in front)\n"
		"  --origin ORIGIN     allow browser requests from ORIGIN too (repeatable; loopback\n"
		"                      origins are allowed, any other Origin header is refused)\n"
		"  --token TOKEN       stdio: the sandbox's API token, for a socket path\n"
		"                      (default: a named sandbox's own, $VMM_TOKEN)\n");
}

static int mcp_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "allow-remote", no_argument, NULL, 'R' },
		{ "origin", required_argument, NULL, 'o' },
		{ "token", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct mcp_server s = { .addr = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") },
				.scopes = TOKEN_SCOPE_ALL };
	struct mcp_http_opts ho = { 0 };
	const char *origins[17];
	int opt, token_given = 0, r;
	unsigned norig = 0;
	struct sandbox sb;

	optind = 1;
	while ((opt = cli_getopt(argc, argv, "h", opts, "mcp")) != -1) {
		switch (opt) {
		case 'l':
			ho.listen = optarg;
			break;
		case 'R':
			ho.allow_remote = 1;
			break;
		case 'o':
			if (norig == 16) {
				fprintf(stderr, "vmm mcp: at most 16 --origin\n");
				return CLI_EXIT_USAGE;
			}
			origins[norig++] = optarg;
			break;
		case 'T':
			s.addr.token = optarg;
			token_given = 1;
			break;
		case 'h':
			mcp_usage(stdout);
			return 0;
		default:
			return CLI_EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return cli_usage_error("mcp", "expected one SANDBOX");
	s.name = argv[optind];
	if (sandbox_api_addr(s.name, token_given, &sb, &s.addr))
		return CLI_EXIT_ERROR;
	if (!ho.listen) {
		r = mcp_serve_stdio(&s, STDIN_FILENO, STDOUT_FILENO);
		return r ? CLI_EXIT_ERROR : 0;
	}
	if (!sb.control[0]) {
		fprintf(stderr, "vmm mcp: --listen needs a sandbox's name (its folder keeps the access tokens), "
				"not a socket path\n");
		return CLI_EXIT_USAGE;
	}
	origins[norig] = NULL;
	ho.origins = origins;
	ho.sandbox_dir = sb.dir;
	r = mcp_serve_http(&s, &ho);
	return r ? CLI_EXIT_ERROR : 0;
}

const struct cli_verb cli_verb_mcp = {
	.name = "mcp",
	.summary = CLI_SUMMARY_MCP,
	.run = mcp_main,
	.usage = mcp_usage,
};
