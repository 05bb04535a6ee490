/* vmm start NAME: start a sandbox vmm create recorded (as vmm run -d). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define START_MAX_ARGS 256

static void start_usage(FILE *out)
{
	fprintf(out, "usage: vmm start NAME\n\n"
		     "Starts a sandbox 'vmm create' recorded, in the background (as 'vmm run\n"
		     "-d' with the options given to create); returns once its API answers.\n");
}

static int start_main(int argc, char **argv)
{
	char buf[65536]; /* the recorded options; the verb runs on the main thread's stack */
	char *args[START_MAX_ARGS + 8];
	struct sandbox_status st;
	char p[PATH_MAX + 16];
	ssize_t n;
	size_t off = 0;
	int fd, nargs = 0;

	if (argc != 2 || argv[1][0] == '-') {
		start_usage(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc == 2 && !strcmp(argv[1], "--help") ? 0 : CLI_EXIT_USAGE;
	}
	if (sandbox_status(argv[1], &st))
		return CLI_EXIT_ERROR;
	if (st.state != SB_CREATED) {
		fprintf(stderr, "vmm start: %s is %s, not created (vmm create)\n", argv[1],
			sandbox_state_name(st.state));
		return CLI_EXIT_ERROR;
	}
	snprintf(p, sizeof(p), "%s/args", st.sb.dir);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n < 0) {
		fprintf(stderr, "vmm start: %s: cannot read its recorded options\n", argv[1]);
		return CLI_EXIT_ERROR;
	}
	args[nargs++] = "vmm";
	args[nargs++] = "run";
	args[nargs++] = "-d";
	args[nargs++] = "--adopt";
	args[nargs++] = "--name";
	args[nargs++] = argv[1];
	while (off < (size_t)n && nargs < START_MAX_ARGS) {
		args[nargs++] = buf + off;
		off += strlen(buf + off) + 1;
	}
	args[nargs] = NULL;
	execv("/proc/self/exe", args);
	fprintf(stderr, "vmm start: cannot run vmm: %s\n", strerror(errno));
	return CLI_EXIT_ERROR;
}

const struct cli_verb cli_verb_start = {
	.name = "start",
	.summary = "start a created sandbox in the background",
	.run = start_main,
	.usage = start_usage,
};
