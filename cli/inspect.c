/* vmm inspect NAME: one sandbox as JSON. */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/wire/json.h"

#include <string.h>

static void inspect_usage(FILE *out)
{
	fprintf(out, "usage: vmm inspect NAME\n\n"
		     "Prints the sandbox's record as JSON: state, pid, what it was started\n"
		     "from, vCPUs, memory, creation and expiry times (Unix seconds), its folder\n"
		     "and sockets, and for an exited one its exit status and reason.\n");
}

static int inspect_main(int argc, char **argv)
{
	struct sandbox_status st;
	struct json_writer w;
	char buf[16384];

	if (argc == 2 && !strcmp(argv[1], "--help")) {
		inspect_usage(stdout);
		return 0;
	}
	if (argc > 1 && argv[1][0] == '-')
		return cli_bad_arg("inspect", argv[1], NULL);
	if (argc != 2)
		return argc < 2 ? cli_usage_error("inspect", "expected NAME") : cli_bad_arg("inspect", argv[2], NULL);
	if (sandbox_status(argv[1], &st))
		return CLI_EXIT_ERROR;
	jw_init(&w, buf, sizeof(buf));
	cli_status_json(&w, &st);
	if (!jw_done(&w))
		return CLI_EXIT_ERROR;
	printf("%s\n", buf);
	return 0;
}

const struct cli_verb cli_verb_inspect = {
	.name = "inspect",
	.summary = "show one sandbox as JSON",
	.run = inspect_main,
	.usage = inspect_usage,
};
