/* vmm watch NAME PATH [--recursive] [--json]: file changes in a sandbox
 * as they happen (API v2, inotify in the guest). */
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/verbs.h"

#include <stdlib.h>
#include <string.h>

static void watch_usage(FILE *out)
{
	fprintf(out, "usage: vmm watch [-r|--recursive] [--json] [--token TOKEN] SANDBOX PATH\n\n"
		     "Prints changes under PATH in the sandbox until interrupted, one a line:\n"
		     "create, modify, delete, rename (\"OLD -> NEW\"), and overflow when events\n"
		     "were lost (rescan then). Changes within 100 ms are merged (a modify of a\n"
		     "file just created is one create). --recursive watches every directory\n"
		     "below PATH, new ones too; --json prints each event as a JSON object.\n");
}

static int watch_main(int argc, char **argv)
{
	char err[600] = "";
	struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
	const char *pos[2] = { NULL, NULL };
	int i, n = 0, rec = 0, json = 0, token_given = 0;
	struct sandbox sb;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-r") || !strcmp(argv[i], "--recursive"))
			rec = 1;
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--token") && i + 1 < argc) {
			a.token = argv[++i];
			token_given = 1;
		} else if ((argv[i][0] != '-' || !strcmp(argv[i], "-")) && n < 2)
			pos[n++] = argv[i];
		else
			return cli_bad_arg("watch", argv[i], "--token");
	}
	if (n != 2 || pos[1][0] != '/') {
		return cli_usage_error("watch", n == 2 ? "PATH must be absolute" : "expected SANDBOX PATH");
	}
	if (sandbox_api_addr(pos[0], token_given, &sb, &a))
		return CLI_EXIT_ERROR;
	if (api_watch(&a, pos[1], rec, json, stdout, err, sizeof(err)) < 0) {
		fprintf(stderr, "vmm: %s\n", err);
		return CLI_EXIT_ERROR;
	}
	return 0;
}

const struct cli_verb cli_verb_watch = {
	.name = "watch",
	.summary = "print file changes in a sandbox",
	.run = watch_main,
	.usage = watch_usage,
};
