/* vmm create [run options]: a named sandbox, configured, not started. */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void create_usage(FILE *out)
{
	fprintf(out, "usage: vmm create [--name N] [vmm run options]\n\n"
		     "Records a sandbox with the options of 'vmm run' (checked now) without\n"
		     "starting it; 'vmm start N' starts it in the background, like\n"
		     "'vmm run -d'. Prints the name. 'vmm ls' shows it as created.\n");
}

static int create_main(int argc, char **argv)
{
	struct sandbox sb;
	const char *name = NULL;
	char p[PATH_MAX + 16];
	int i, fd, r = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help")) {
			create_usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--name") && i + 1 < argc)
			name = argv[i + 1];
		else if (!strncmp(argv[i], "--name=", 7))
			name = argv[i] + 7;
	}
	if ((r = run_check_args(argc, argv)))
		return r;
	if (sandbox_create(&sb, name, 0))
		return CLI_EXIT_ERROR;
	/* The options, NUL-separated, name options included: vmm start
	 * passes them to vmm run as they were given. */
	snprintf(p, sizeof(p), "%s/args", sb.dir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	for (i = 1; fd >= 0 && i < argc && !r; i++) {
		if (!strcmp(argv[i], "--name") && i + 1 < argc) {
			i++;
			continue;
		}
		if (!strncmp(argv[i], "--name=", 7))
			continue;
		if (write(fd, argv[i], strlen(argv[i]) + 1) != (ssize_t)strlen(argv[i]) + 1)
			r = -EIO;
	}
	if (fd < 0 || r || close(fd)) {
		fprintf(stderr, "vmm create: cannot write %s\n", p);
		sandbox_remove(&sb);
		return CLI_EXIT_ERROR;
	}
	snprintf(p, sizeof(p), "%s/created", sb.dir);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		sandbox_remove(&sb);
		return CLI_EXIT_ERROR;
	}
	close(fd);
	printf("%s\n", sb.name);
	return 0;
}

const struct cli_verb cli_verb_create = {
	.name = "create",
	.summary = "record a sandbox without starting it",
	.run = create_main,
	.usage = create_usage,
};
