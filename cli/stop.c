/* vmm stop NAME...: through the guest, then forced after a timeout. */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"

#include <stdlib.h>
#include <string.h>

static void stop_usage(FILE *out)
{
	fprintf(out, "usage: vmm stop [-t SECONDS] NAME...\n\n"
		     "Stops each sandbox through its guest (processes get SIGTERM, filesystems\n"
		     "are synced, it powers off), waiting up to SECONDS (default 30); then\n"
		     "stops its VM at once; a VMM that does not answer is killed. A sandbox\n"
		     "started with -d stays listed as exited until 'vmm rm'. A sandbox that is\n"
		     "not running is already stopped: its name is printed, status 0.\n");
}

static int stop_main(int argc, char **argv)
{
	unsigned long t = 30;
	int i = 1, status = 0;

	if (i < argc && !strcmp(argv[i], "--help")) {
		stop_usage(stdout);
		return 0;
	}
	if (i + 1 < argc && (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--time"))) {
		char *end;

		t = strtoul(argv[i + 1], &end, 10);
		if (*end || end == argv[i + 1] || argv[i + 1][0] == '-')
			return cli_usage_error("stop", "-t '%s': a number of seconds", argv[i + 1]);
		i += 2;
	}
	if (i < argc && argv[i][0] == '-')
		return cli_bad_arg("stop", argv[i], "-t --time");
	if (i >= argc)
		return cli_usage_error("stop", "expected NAME...");
	for (; i < argc; i++) {
		struct sandbox_status st;

		if (sandbox_status(argv[i], &st)) {
			status = CLI_EXIT_ERROR;
			continue;
		}
		/* Already stopped: done, as docker's stop is. */
		if (st.state == SB_EXITED || st.state == SB_DEAD || st.state == SB_CREATED) {
			printf("%s\n", argv[i]);
			continue;
		}
		if (sandbox_stop(&st, (unsigned)t * 1000)) {
			status = CLI_EXIT_ERROR;
			continue;
		}
		printf("%s\n", argv[i]);
	}
	return status;
}

const struct cli_verb cli_verb_stop = {
	.name = "stop",
	.summary = "stop sandboxes (through the guest, then forced)",
	.run = stop_main,
	.usage = stop_usage,
};
