/* vmm prune: remove every sandbox that exited, died or expired. */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void prune_usage(FILE *out)
{
	fprintf(out, "usage: vmm prune\n\n"
		     "Removes the sandboxes that exited, whose VMM died (crashed, killed), or\n"
		     "whose time to live ran out; prints their names.\n");
}

static int prune_main(int argc, char **argv)
{
	char **names;
	int n, i, status = 0;

	if (argc > 1 && !strcmp(argv[1], "--help")) {
		prune_usage(stdout);
		return 0;
	}
	if (argc > 1)
		return cli_bad_arg("prune", argv[1], NULL);
	n = sandbox_list(&names);
	if (n < 0)
		return CLI_EXIT_ERROR;
	for (i = 0; i < n; i++) {
		struct sandbox_status st;

		if (sandbox_status(names[i], &st) == 0) {
			int expired = st.expires && st.expires <= (long long)time(NULL);

			if (expired && (st.state == SB_RUNNING || st.state == SB_PAUSED) &&
			    sandbox_stop(&st, 0))
				status = CLI_EXIT_ERROR;
			else if (st.state == SB_EXITED || st.state == SB_DEAD || expired) {
				sandbox_delete(&st.sb);
				printf("%s\n", names[i]);
			}
		}
		free(names[i]);
	}
	free(names);
	return status;
}

const struct cli_verb cli_verb_prune = {
	.name = "prune",
	.summary = "remove exited, dead and expired sandboxes",
	.run = prune_main,
	.usage = prune_usage,
};
