/* vmm logs NAME [-f]: a detached sandbox's console (and VMM log). */
#define _GNU_SOURCE
#include "api_client.h"
#include "cli.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <limits.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

static void logs_usage(FILE *out)
{
	fprintf(out, "usage: vmm logs [-f] [--vmm | --egress | --process ID] NAME\n\n"
		     "Prints the console of a sandbox started with -d (console.log in its\n"
		     "folder, after console.log.1, what it kept of the console the last time\n"
		     "console.log reached --console-log-size). -f follows it, across\n"
		     "rotations, until the sandbox stops. --vmm prints the VMM's own\n"
		     "log (vmm.log) instead; --egress the egress proxy's requests (egress.log,\n"
		     "one JSON line each: docs/egress.md). --process ID prints what a detached\n"
		     "process (vmm exec -d; ID is its id or tag) wrote, as the sandbox kept it (the\n"
		     "last 1 MiB of each stream), running or finished; -f follows it until it\n"
		     "ends (exiting with its status). NAME may be a vsock socket path there.\n");
}

static int copy_out(int fd)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(STDOUT_FILENO, buf, (size_t)n) != n)
			return -EIO;
	return n < 0 ? -errno : 0;
}

/* dir/name for reading: a regular file, never through a link (a jailed
 * VMM owns the folder console.log is in), never blocking on a FIFO. */
static int open_log(const char *dir, const char *name)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fd;

	if (dfd < 0)
		return -errno;
	fd = cli_open_regular(dfd, name);
	close(dfd);
	return fd;
}

/* Has dir/name been rotated away from under fd (another file there now)? */
static int rotated(const char *dir, const char *name, int fd)
{
	char p[PATH_MAX + 64];
	struct stat a, b;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return fstat(fd, &a) == 0 && lstat(p, &b) == 0 && (a.st_dev != b.st_dev || a.st_ino != b.st_ino);
}

static int logs_main(int argc, char **argv)
{
	struct sandbox_status st;
	const char *name = NULL, *file = "console.log", *dir, *proc = NULL;
	int follow = 0, i, fd;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--follow"))
			follow = 1;
		else if (!strcmp(argv[i], "--vmm"))
			file = "vmm.log";
		else if (!strcmp(argv[i], "--egress"))
			file = "egress.log";
		else if (!strcmp(argv[i], "--process") && i + 1 < argc)
			proc = argv[++i];
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else {
			logs_usage(strcmp(argv[i], "--help") ? stderr : stdout);
			return strcmp(argv[i], "--help") ? CLI_EXIT_USAGE : 0;
		}
	}
	if (!name) {
		logs_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (proc) {
		struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
		struct sandbox sb;
		int r;

		if (sandbox_api_addr(name, 0, &sb, &a))
			return CLI_EXIT_ERROR;
		r = api_logs(&a, proc, follow);
		return r < 0 ? CLI_EXIT_ERROR : follow ? r : 0;
	}
	if (sandbox_status(name, &st))
		return CLI_EXIT_ERROR;
	/* The console is where the VMM writes (jail-rw for a jailed one). */
	dir = strcmp(file, "console.log") ? st.sb.dir : st.sb.rw;
	if (!strcmp(file, "console.log")) {
		/* What the last rotation kept first (console.log.1). */
		fd = open_log(dir, "console.log.1");
		if (fd >= 0) {
			copy_out(fd);
			close(fd);
		}
	}
	fd = open_log(dir, file);
	if (fd == -EINVAL || fd == -ELOOP) {
		fprintf(stderr, "vmm logs: %s/%s is not a regular file: not reading it\n", dir, file);
		return CLI_EXIT_ERROR;
	}
	if (fd < 0) {
		fprintf(stderr, "vmm logs: %s has no %s (%s)\n", name, file,
			strcmp(file, "egress.log") ? "only sandboxes started with -d keep one" :
						     "only sandboxes given --egress-policy have one");
		return CLI_EXIT_ERROR;
	}
	if (copy_out(fd)) {
		close(fd);
		return CLI_EXIT_ERROR;
	}
	while (follow) {
		if (sandbox_status(name, &st) || (st.state != SB_RUNNING && st.state != SB_PAUSED &&
						  st.state != SB_STARTING)) {
			copy_out(fd);
			break;
		}
		usleep(200000);
		if (copy_out(fd))
			break;
		if (rotated(dir, file, fd)) {
			/* The fd holds console.log.1 now: its end, then the new file. */
			int nfd = open_log(dir, file);

			copy_out(fd);
			if (nfd < 0)
				break;
			close(fd);
			fd = nfd;
		}
	}
	close(fd);
	return 0;
}

const struct cli_verb cli_verb_logs = {
	.name = "logs",
	.summary = "print a sandbox's console",
	.run = logs_main,
	.usage = logs_usage,
};
