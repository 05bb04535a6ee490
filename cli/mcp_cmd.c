/* vmm mcp NAME [--listen ADDR:PORT]: the sandbox's tools as an MCP server
 * (cli/mcp/mcp.c; docs/mcp.md). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/mcp/mcp.h"
#include "cli/sandbox/sandbox.h"

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
		"  --max-connections N serve at most N connections at once (default 32); one more\n"
		"                      gets 503 and is closed\n"
		"  --idle-timeout S    close a connection idle between requests for S seconds\n"
		"                      (default 30)\n"
		"  --request-timeout S a request not fully received S seconds after its first byte\n"
		"                      gets 408 and the connection is closed (default 30)\n"
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
		{ "max-connections", required_argument, NULL, 'M' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "request-timeout", required_argument, NULL, 'Q' },
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
		case 'M':
		case 'I':
		case 'Q': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !*optarg || v == 0 || v > (opt == 'M' ? 4096ul : 86400ul)) {
				fprintf(stderr, "vmm mcp: --%s wants a number from 1 to %lu\n",
					opt == 'M' ? "max-connections" : opt == 'I' ? "idle-timeout" : "request-timeout",
					opt == 'M' ? 4096ul : 86400ul);
				return CLI_EXIT_USAGE;
			}
			*(opt == 'M' ? &ho.max_conns : opt == 'I' ? &ho.idle_timeout_s : &ho.request_timeout_s) =
				(unsigned)v;
			break;
		}
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
	ho.notice = stderr;
	r = mcp_serve_http(&s, &ho);
	return r ? CLI_EXIT_ERROR : 0;
}

const struct cli_verb cli_verb_mcp = {
	.name = "mcp",
	.summary = CLI_SUMMARY_MCP,
	.run = mcp_main,
	.usage = mcp_usage,
};
