/* vmm pause SANDBOX / vmm resume SANDBOX. */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/vm_standby.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void pause_usage(FILE *out)
{
	fprintf(out, "usage: vmm pause SANDBOX\n\n"
		     "Stops the sandbox's vCPUs at a clean point and parks its devices between\n"
		     "requests; nothing is lost. 'vmm resume SANDBOX' goes on.\n");
}

static void resume_usage(FILE *out)
{
	fprintf(out, "usage: vmm resume SANDBOX\n\nResumes a paused sandbox, or restores one on standby (vmm suspend)\n"
		     "in place; returns once its API answers.\n");
}

static int control_verb(int argc, char **argv, const char *op, void (*usage)(FILE *))
{
	char req[64], reply[4096];

	if (argc == 2 && !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (argc > 1 && argv[1][0] == '-')
		return cli_bad_arg(op, argv[1], NULL);
	if (argc != 2)
		return argc < 2 ? cli_usage_error(op, "expected SANDBOX") : cli_bad_arg(op, argv[2], NULL);
	if (!strcmp(op, "resume")) {
		struct sandbox_status st;

		if (sandbox_status(argv[1], &st))
			return CLI_EXIT_ERROR;
		if (st.state == SB_STANDBY)
			return standby_wake(argv[1]) ? CLI_EXIT_ERROR : 0;
		if (st.state == SB_DEAD) {
			char p[PATH_MAX + 64];

			/* Died after a resume from standby (running, or in a
			 * suspend that had not committed): the state it came
			 * from was consumed then, its disks moved on since. */
			snprintf(p, sizeof(p), "%s/" STANDBY_DIR "/" STANDBY_CONSUMED, st.sb.dir);
			if (access(p, F_OK) == 0) {
				fprintf(stderr, "vmm resume: %s is dead: its VMM died after it last resumed from "
						"standby, before a new suspend committed; that standby state was "
						"consumed at the resume (its disks have moved on), so nothing can "
						"be resumed (vmm logs --vmm %s; vmm rm %s)\n", argv[1], argv[1], argv[1]);
				return CLI_EXIT_ERROR;
			}
		}
	}
	snprintf(req, sizeof(req), "{\"op\":\"%s\"}", op);
	if (sandbox_control(argv[1], req, reply, sizeof(reply), 30000) || cli_reply_ok(op, reply))
		return CLI_EXIT_ERROR;
	return 0;
}

static int pause_main(int argc, char **argv)
{
	return control_verb(argc, argv, "pause", pause_usage);
}

static int resume_main(int argc, char **argv)
{
	return control_verb(argc, argv, "resume", resume_usage);
}

const struct cli_verb cli_verb_pause = {
	.name = "pause",
	.summary = "pause a running sandbox",
	.run = pause_main,
	.usage = pause_usage,
};

const struct cli_verb cli_verb_resume = {
	.name = "resume",
	.summary = "resume a paused sandbox",
	.run = resume_main,
	.usage = resume_usage,
};
