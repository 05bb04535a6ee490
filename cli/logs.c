/* vmm logs NAME [-f]: a detached sandbox's console (and VMM log). */
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <limits.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

static void logs_usage(FILE *out)
{
	fprintf(out, "usage: vmm logs [-f] [--tail N] [--vmm | --egress | --process ID] NAME\n\n"
		     "Prints the console of a sandbox started with -d (console.log in its\n"
		     "folder, after console.log.1, what it kept of the console the last time\n"
		     "console.log reached --console-log-size). -f follows it, across\n"
		     "rotations, until the sandbox stops. --tail N (-n N) starts at the last N\n"
		     "lines. The console is kept raw, as the guest wrote it: terminal escape\n"
		     "sequences and all (no timestamps, so no --since). --vmm prints the VMM's own\n"
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

/* Seeks fd to the start of its last *lines lines; *lines becomes how many
 * more are wanted (the file had fewer). 0 or -errno. */
static int seek_tail(int fd, unsigned long *lines)
{
	char buf[65536];
	off_t end = lseek(fd, 0, SEEK_END), pos = end;

	if (end < 0)
		return -errno;
	if (!*lines)
		return 0;
	while (pos > 0) {
		size_t n = pos > (off_t)sizeof(buf) ? sizeof(buf) : (size_t)pos;
		off_t base = pos - (off_t)n;
		ssize_t i;

		if (pread(fd, buf, n, base) != (ssize_t)n)
			return -EIO;
		for (i = (ssize_t)n - 1; i >= 0; i--) {
			/* a final newline ends a line, it starts none */
			if (buf[i] != '\n' || base + i == end - 1)
				continue;
			if (--*lines == 0)
				return lseek(fd, base + i + 1, SEEK_SET) < 0 ? -errno : 0;
		}
		pos = base;
	}
	/* The whole file is fewer lines: its first one counts too. */
	if (end > 0)
		--*lines;
	return lseek(fd, 0, SEEK_SET) < 0 ? -errno : 0;
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
	int follow = 0, i, fd, fd1 = -1;
	unsigned long tail = 0;
	int has_tail = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--follow"))
			follow = 1;
		else if (!strcmp(argv[i], "--vmm"))
			file = "vmm.log";
		else if (!strcmp(argv[i], "--egress"))
			file = "egress.log";
		else if (!strcmp(argv[i], "--process") && i + 1 < argc)
			proc = argv[++i];
		else if ((!strcmp(argv[i], "--tail") || !strcmp(argv[i], "-n")) && i + 1 < argc) {
			char *end;

			i++;
			if (!strcmp(argv[i], "all"))
				continue;
			tail = strtoul(argv[i], &end, 10);
			if (*end || end == argv[i] || argv[i][0] == '-')
				return cli_usage_error("logs", "--tail '%s': a number of lines (or all)", argv[i]);
			has_tail = 1;
		} else if (!strcmp(argv[i], "--since"))
			return cli_usage_error("logs", "--since: the console keeps no timestamps; use --tail N");
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else if (!strcmp(argv[i], "--help")) {
			logs_usage(stdout);
			return 0;
		} else
			return cli_bad_arg("logs", argv[i], "--process --tail -n");
	}
	if (!name)
		return cli_usage_error("logs", "expected NAME");
	if (proc && has_tail)
		return cli_usage_error("logs", "--tail is for the console and the logs, not --process");
	if (proc) {
		struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
		struct sandbox sb;
		char err[600];
		int r;

		if (sandbox_api_addr(name, 0, &sb, &a))
			return CLI_EXIT_ERROR;
		r = api_logs(&a, proc, follow, err, sizeof(err));
		if (err[0])
			fprintf(stderr, "vmm: %s\n", err);
		return r < 0 ? CLI_EXIT_ERROR : follow ? r : 0;
	}
	if (sandbox_status(name, &st))
		return CLI_EXIT_ERROR;
	/* The console is where the VMM writes (jail-rw for a jailed one). */
	dir = strcmp(file, "console.log") ? st.sb.dir : st.sb.rw;
	/* What the last rotation kept first (console.log.1). */
	if (!strcmp(file, "console.log"))
		fd1 = open_log(dir, "console.log.1");
	fd = open_log(dir, file);
	if (fd == -EINVAL || fd == -ELOOP) {
		fprintf(stderr, "vmm logs: %s/%s is not a regular file: not reading it\n", dir, file);
		return CLI_EXIT_ERROR;
	}
	if (fd < 0) {
		fprintf(stderr, "vmm logs: %s has no %s (%s)\n", name, file,
			strcmp(file, "egress.log") ? "only sandboxes started with -d keep one" :
						     "only sandboxes given --egress-policy have one");
		if (fd1 >= 0)
			close(fd1);
		return CLI_EXIT_ERROR;
	}
	if (has_tail) {
		int r = seek_tail(fd, &tail);

		if (!r && fd1 >= 0 && tail)
			r = seek_tail(fd1, &tail);
		else if (fd1 >= 0) {
			close(fd1); /* console.log alone had them */
			fd1 = -1;
		}
		if (r) {
			fprintf(stderr, "vmm logs: cannot read %s/%s: %s\n", dir, file, strerror(-r));
			if (fd1 >= 0)
				close(fd1);
			close(fd);
			return CLI_EXIT_ERROR;
		}
	}
	if (fd1 >= 0) {
		copy_out(fd1);
		close(fd1);
	}
	if (copy_out(fd)) {
		close(fd);
		return CLI_EXIT_ERROR;
	}
	/* -f wakes a sandbox on standby, and follows it through later
	 * standbys (a sleeping sandbox writes nothing, but it is not over). */
	if (follow && sandbox_status(name, &st) == 0 && st.state == SB_STANDBY && standby_wake(name))
		follow = 0;
	while (follow) {
		if (sandbox_status(name, &st) || (st.state != SB_RUNNING && st.state != SB_PAUSED &&
						  st.state != SB_STARTING && st.state != SB_STANDBY)) {
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
