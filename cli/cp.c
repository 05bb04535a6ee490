/* vmm cp: copy files and directories between the host and a sandbox. */
#define _GNU_SOURCE
#include "api_client.h"
#include "cli.h"
#include "sandbox.h"
#include "../guest-init/proto.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void cp_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm cp [--token TOKEN] SRC DST\n\n"
		"Copies a file or a directory tree into a sandbox or out of it. One of\n"
		"SRC and DST is SANDBOX:/absolute/path, where SANDBOX is the sandbox's\n"
		"name or its vsock socket; the other is a host path. Writes in the sandbox are\n"
		"atomic per file (a reader never sees half a file); parents are created.\n");
}

/* "SANDBOX:/path", SANDBOX a sandbox's name or an existing Unix socket?
 * Splits it. */
static int split_remote(char *spec, char **sock, char **path)
{
	char *colon = strrchr(spec, ':');
	struct stat st;

	while (colon) {
		*colon = '\0';
		if (colon[1] == '/' && ((stat(spec, &st) == 0 && S_ISSOCK(st.st_mode)) ||
					(!strchr(spec, '/') && sandbox_name_ok(spec)))) {
			*sock = spec;
			*path = colon + 1;
			return 1;
		}
		*colon = ':';
		while (--colon >= spec && *colon != ':') {
		}
		if (colon < spec)
			colon = NULL;
	}
	return 0;
}

static int cp_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "token", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
	char *sock, *path;
	int opt, r, token_given = 0;
	struct sandbox sb;

	optind = 1;
	while ((opt = cli_getopt(argc, argv, "", opts, "cp")) != -1) {
		if (opt != 'T')
			return CLI_EXIT_USAGE;
		a.token = optarg;
		token_given = 1;
	}
	if (argc - optind != 2)
		return cli_usage_error("cp", "expected SRC DST");
	if (split_remote(argv[optind + 1], &sock, &path)) {
		if (sandbox_api_addr(sock, token_given, &sb, &a))
			return CLI_EXIT_ERROR;
		r = api_copy_in(&a, argv[optind], path);
	} else if (split_remote(argv[optind], &sock, &path)) {
		if (sandbox_api_addr(sock, token_given, &sb, &a))
			return CLI_EXIT_ERROR;
		r = api_copy_out(&a, path, argv[optind + 1]);
	} else {
		fprintf(stderr, "vmm cp: one of SRC and DST must be SANDBOX:/path, with SANDBOX a sandbox's socket\n");
		return CLI_EXIT_USAGE;
	}
	return r ? CLI_EXIT_ERROR : 0;
}

const struct cli_verb cli_verb_cp = {
	.name = "cp",
	.summary = "copy files between the host and a sandbox",
	.run = cp_main,
	.usage = cp_usage,
};
