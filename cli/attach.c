/* vmm attach NAME ID: a detached process's output, replayed and then
 * live (API v2). Ctrl-C leaves it running. */
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/verbs.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void attach_usage(FILE *out)
{
	fprintf(out, "usage: vmm attach [-i] [-t] [--token TOKEN] SANDBOX ID\n\n"
		     "Replays the output a detached process (vmm exec -d) kept, then follows it\n"
		     "live until it ends, and exits with its exit status. ID is its id or tag.\n"
		     "Ctrl-C (or SIGTERM/SIGHUP) leaves it running: vmm kill stops it. Several\n"
		     "attachers may follow one process.\n\n"
		     "  -i   pass stdin through (it was started with vmm exec -d -i)\n"
		     "  -t   this terminal in raw mode, resizes passed on (it has a pty: -d -t)\n");
}

static int attach_main(int argc, char **argv)
{
	char err[600] = "";
	struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
	const char *pos[2] = { NULL, NULL };
	int i, n = 0, in = 0, tty = 0, token_given = 0, r;
	struct sandbox sb;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-i"))
			in = 1;
		else if (!strcmp(argv[i], "-t"))
			tty = 1;
		else if (!strcmp(argv[i], "--token") && i + 1 < argc) {
			a.token = argv[++i];
			token_given = 1;
		} else if (argv[i][0] != '-' && n < 2)
			pos[n++] = argv[i];
		else
			return cli_bad_arg("attach", argv[i], "--token");
	}
	if (n != 2)
		return cli_usage_error("attach", "expected SANDBOX ID");
	if (sandbox_api_addr(pos[0], token_given, &sb, &a))
		return CLI_EXIT_ERROR;
	r = api_attach(&a, pos[1], in, tty, err, sizeof(err));
	if (err[0])
		fprintf(stderr, "vmm: %s\n", err);
	return r < 0 ? CLI_EXIT_ERROR : r;
}

const struct cli_verb cli_verb_attach = {
	.name = "attach",
	.summary = "follow a detached process's output",
	.run = attach_main,
	.usage = attach_usage,
};
