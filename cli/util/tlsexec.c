/* Which command lines need the TLS binary, and running it (cli/util/util.h,
 * docs/perf.md "Two binaries"). In both binaries. */
#include "cli/util/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cli_needs_tls(int argc, char *const *argv)
{
	static const char *const verbs[] = { "egress", "mcp", "token", "image", "e2b" };
	/* --image is not here: a run of an image resolves it in the local
	 * store (image_run_args) and needs no TLS, and the VMM the sandbox
	 * runs on for its life is then the lean one: a dynamically linked
	 * vmm-tls costs every such sandbox its libraries' relocated and
	 * written pages (docs/perf.md, "Two binaries"). */
	static const char *const opts[] = { "--egress" };
	int i;
	size_t k;

	if (argc < 2)
		return 0;
	for (k = 0; k < sizeof(verbs) / sizeof(verbs[0]); k++)
		if (!strcmp(argv[1], verbs[k]))
			return 1;
	/* Options, up to the guest command: `run -- sh -c '--image'` is the
	 * guest's business. */
	for (i = 2; i < argc && strcmp(argv[i], "--"); i++)
		for (k = 0; k < sizeof(opts) / sizeof(opts[0]); k++)
			if (!strncmp(argv[i], opts[k], strlen(opts[k])))
				return 1;
	return 0;
}

int cli_exec_tls(char *const *argv, char *path, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n < 0) {
		snprintf(path, len, "(/proc/self/exe)");
		return -errno;
	}
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	if (snprintf(path, len, "%s/vmm-tls", slash ? self : ".") >= (int)len)
		return -ENAMETOOLONG;
	execv(path, argv);
	return -errno;
}
