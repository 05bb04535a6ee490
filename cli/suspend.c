/* vmm suspend SANDBOX: standby in place (docs/snapshot.md, "Standby"). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"

#include <string.h>
#include <time.h>

static void suspend_usage(FILE *out)
{
	fprintf(out, "usage: vmm suspend SANDBOX\n\n"
		     "Puts a running sandbox on standby: its memory and device state go to its\n"
		     "folder (its disks stay where they are), its VMM exits and its RAM is freed.\n"
		     "It keeps its name, token, socket paths, TTL, published ports (still\n"
		     "listening) and egress policy. 'vmm resume SANDBOX', or any vmm exec, cp,\n"
		     "logs -f, control request or connection to a published port, restores it\n"
		     "in place with its processes running. A suspend that fails (a full disk)\n"
		     "leaves it running and says why.\n");
}

static int suspend_main(int argc, char **argv)
{
	struct sandbox_status st;
	char reply[4096];
	int i;

	if (argc == 2 && !strcmp(argv[1], "--help")) {
		suspend_usage(stdout);
		return 0;
	}
	if (argc > 1 && argv[1][0] == '-')
		return cli_bad_arg("suspend", argv[1], NULL);
	if (argc != 2)
		return argc < 2 ? cli_usage_error("suspend", "expected SANDBOX") : cli_bad_arg("suspend", argv[2], NULL);
	if (sandbox_status(argv[1], &st))
		return CLI_EXIT_ERROR;
	if (st.state == SB_STANDBY) {
		printf("%s\n", argv[1]);
		return 0;
	}
	if (st.state != SB_RUNNING && st.state != SB_PAUSED) {
		fprintf(stderr, "vmm suspend: %s is %s, not running\n", argv[1], sandbox_state_name(st.state));
		return CLI_EXIT_ERROR;
	}
	if (sandbox_control(argv[1], "{\"op\":\"suspend\"}", reply, sizeof(reply), 600000) ||
	    cli_reply_ok("suspend", reply))
		return CLI_EXIT_ERROR;
	/* Done once the VMM is gone (its memory freed). */
	for (i = 0; i < 600; i++) {
		const struct timespec t = { 0, 50000000 };

		if (sandbox_status(argv[1], &st) == 0 && st.state == SB_STANDBY) {
			printf("%s\n", argv[1]);
			return 0;
		}
		nanosleep(&t, NULL);
	}
	fprintf(stderr, "vmm suspend: %s: its state is written but its VMM did not exit within 30 s\n", argv[1]);
	return CLI_EXIT_ERROR;
}

const struct cli_verb cli_verb_suspend = {
	.name = "suspend",
	.summary = "put a running sandbox on standby (memory to disk, VMM exits)",
	.run = suspend_main,
	.usage = suspend_usage,
};
