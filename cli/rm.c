/* vmm rm [-f] NAME...: remove stopped sandboxes (-f: stop them first). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"

#include <string.h>

static void rm_usage(FILE *out)
{
	fprintf(out, "usage: vmm rm [-f] NAME...\n\n"
		     "Removes each sandbox's record and folder (console log, disk copies). A\n"
		     "running sandbox is refused unless -f, which stops its VM at once first.\n");
}

static int rm_main(int argc, char **argv)
{
	int i = 1, force = 0, status = 0;

	if (i < argc && !strcmp(argv[i], "--help")) {
		rm_usage(stdout);
		return 0;
	}
	if (i < argc && (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--force"))) {
		force = 1;
		i++;
	}
	if (i < argc && argv[i][0] == '-')
		return cli_bad_arg("rm", argv[i], NULL);
	if (i >= argc)
		return cli_usage_error("rm", "expected NAME...");
	for (; i < argc; i++) {
		struct sandbox_status st;

		if (sandbox_status(argv[i], &st)) {
			status = CLI_EXIT_ERROR;
			continue;
		}
		if (st.state == SB_RUNNING || st.state == SB_PAUSED || st.state == SB_STARTING) {
			if (!force) {
				fprintf(stderr, "vmm rm: %s is %s: 'vmm stop %s' first, or 'vmm rm -f %s'\n",
					argv[i], sandbox_state_name(st.state), argv[i], argv[i]);
				status = CLI_EXIT_ERROR;
				continue;
			}
			if (sandbox_stop(&st, 0)) {
				status = CLI_EXIT_ERROR;
				continue;
			}
		}
		sandbox_delete(&st.sb);
		printf("%s\n", argv[i]);
	}
	return status;
}

const struct cli_verb cli_verb_rm = {
	.name = "rm",
	.summary = "remove stopped sandboxes",
	.run = rm_main,
	.usage = rm_usage,
};
