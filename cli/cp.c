/* vmm cp: copy files and directories between the host and a sandbox. */
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "vmm/base/log.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void cp_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm cp [-L] [-r] [-q] [--token TOKEN] SRC DST\n"
		"       vmm cp [--token TOKEN] - SANDBOX:/dir       (a tar archive on stdin)\n"
		"       vmm cp [-L] [--token TOKEN] SANDBOX:/path -  (a tar archive on stdout)\n\n"
		"Copies a file, a symbolic link or a directory tree into a sandbox or out\n"
		"of it. One of SRC and DST is SANDBOX:/absolute/path, where SANDBOX is the\n"
		"sandbox's name or its vsock socket; the other is a host path. As docker cp:\n"
		"a DST that is a directory, or ends with '/', receives SRC under its own\n"
		"name (DST/NAME); SRC/. copies a directory's content into DST; directories\n"
		"are always copied with what they hold (-r, -R are accepted). Writes in the\n"
		"sandbox are atomic per file (a reader never sees half a file); parents\n"
		"are created. A directory travels as one tar stream (a guest-init that\n"
		"predates it: file by file). SRC '-' extracts a tar archive from stdin\n"
		"into the sandbox directory DST; DST '-' writes SRC as a tar archive to\n"
		"stdout (its top entry named as SRC; SRC/.: the content alone).\n\n"
		"  -L, --follow-link    copy what symbolic links in SRC point to (default:\n"
		"                       symbolic links are copied as links)\n"
		"  -r, -R, --recursive  accepted: directories are copied recursively anyway\n"
		"  -q, --quiet          no bytes-and-rate line on a terminal\n"
		"  --token TOKEN        the sandbox API's token (default: the sandbox's own)\n");
}

/* SPEC names a sandbox of this state directory (NAME:...)? */
static int sandbox_named(const char *spec, size_t len)
{
	char root[PATH_MAX], name[SANDBOX_NAME_MAX + 1], p[PATH_MAX + SANDBOX_NAME_MAX + 2];
	struct stat st;

	if (len == 0 || len > SANDBOX_NAME_MAX)
		return 0;
	memcpy(name, spec, len);
	name[len] = '\0';
	if (!sandbox_name_ok(name) || sandbox_root_existing(root, sizeof(root)))
		return 0;
	snprintf(p, sizeof(p), "%s/%s", root, name);
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* "SANDBOX:/path", SANDBOX a sandbox's name or an existing Unix socket?
 * Splits it. */
static int split_remote(char *spec, char **sock, char **path)
{
	char *colon = strrchr(spec, ':');
	struct stat st;

	while (colon) {
		*colon = '\0';
		if (colon[1] == '/' && ((stat(spec, &st) == 0 && S_ISSOCK(st.st_mode)) ||
					(!strchr(spec, '/') && sandbox_name_ok(spec)))) {
			*sock = spec;
			*path = colon + 1;
			return 1;
		}
		*colon = ':';
		while (--colon >= spec && *colon != ':') {
		}
		if (colon < spec)
			colon = NULL;
	}
	return 0;
}

/* "NAME:relative" for a sandbox NAME that exists, and no such host path:
 * a sandbox path without its leading '/'. */
static int relative_remote(const char *spec)
{
	const char *colon = strchr(spec, ':');
	struct stat st;

	return colon && colon[1] != '/' && sandbox_named(spec, (size_t)(colon - spec)) && lstat(spec, &st) < 0;
}

/* The copy's end: why it failed, if it did. */
static int cp_done(int r, const struct cp_opts *o)
{
	if (!r)
		return 0;
	fprintf(stderr, "vmm cp: %s\n", o->err[0] ? o->err : strerror(r < 0 ? -r : EIO));
	return CLI_EXIT_ERROR;
}

static int cp_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "token", required_argument, NULL, 'T' },
		{ "follow-link", no_argument, NULL, 'L' },
		{ "recursive", no_argument, NULL, 'r' },
		{ "quiet", no_argument, NULL, 'q' },
		{ NULL, 0, NULL, 0 },
	};
	struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
	char *sock, *path, *src, *dst;
	int opt, r, token_given = 0, quiet = 0, in, out;
	struct cp_opts o = { .follow = 0 };
	struct sandbox sb;

	optind = 1;
	while ((opt = cli_getopt(argc, argv, "+LrRq", opts, "cp")) != -1) {
		switch (opt) {
		case 'T':
			a.token = optarg;
			token_given = 1;
			break;
		case 'L':
			o.follow = 1;
			break;
		case 'r':
		case 'R':
			break;
		case 'q':
			quiet = 1;
			break;
		default:
			return CLI_EXIT_USAGE;
		}
	}
	if (argc - optind != 2)
		return cli_usage_error("cp", "expected SRC DST");
	src = argv[optind];
	dst = argv[optind + 1];
	if (!strcmp(src, "-") || !strcmp(dst, "-")) {
		char *spec = strdup(!strcmp(src, "-") ? dst : src), base[NAME_MAX + 1];
		int content;

		if (!spec || !strcmp(src, dst) || !split_remote(spec, &sock, &path)) {
			free(spec);
			return cli_usage_error("cp", "with '-', the other side is SANDBOX:/path");
		}
		if (sandbox_api_addr(sock, token_given, &sb, &a)) {
			free(spec);
			return CLI_EXIT_ERROR;
		}
		if (!strcmp(src, "-")) {
			r = cp_tar_stdin(&a, path, STDIN_FILENO, &o);
		} else {
			char stripped[PATH_MAX];

			cp_base(path, base, sizeof(base), &content);
			strip_content(path, stripped, sizeof(stripped));
			r = cp_tar_stdout(&a, stripped, content || !base[0] ? "." : base, o.follow, STDOUT_FILENO, &o);
		}
		free(spec);
		return cp_done(r, &o);
	}
	for (int i = 0; i < 2; i++) {
		if (relative_remote(argv[optind + i])) {
			const char *c = strchr(argv[optind + i], ':');

			fprintf(stderr, "vmm cp: %s: a path in the sandbox must be absolute (%.*s:/%s)\n",
				argv[optind + i], (int)(c - argv[optind + i]), argv[optind + i], c + 1);
			return CLI_EXIT_USAGE;
		}
	}
	{
		/* split_remote writes into its argument: test copies */
		char *s2 = strdup(src), *d2 = strdup(dst), *x, *y;

		in = d2 && split_remote(d2, &x, &y);
		out = s2 && split_remote(s2, &x, &y);
		free(s2);
		free(d2);
	}
	if (in && out) {
		fprintf(stderr, "vmm cp: both SRC and DST are in a sandbox: copy from one sandbox to another "
				"through the host (vmm cp A:/p /tmp/p && vmm cp /tmp/p B:/p)\n");
		return CLI_EXIT_USAGE;
	}
	if (!in && !out) {
		fprintf(stderr, "vmm cp: one of SRC and DST must be SANDBOX:/path, with SANDBOX a sandbox's name "
				"or socket (see 'vmm cp --help')\n");
		return CLI_EXIT_USAGE;
	}
	progress_init(&o.prog, quiet || !isatty(STDERR_FILENO) ? -1 : STDERR_FILENO, 1, log_now_ns());
	split_remote(in ? dst : src, &sock, &path);
	if (sandbox_api_addr(sock, token_given, &sb, &a))
		return CLI_EXIT_ERROR;
	r = in ? cp_in(&a, src, path, &o) : cp_out(&a, path, dst, &o);
	if (o.prog.shown) {
		char b[32], rate[32], line[128];
		uint64_t dt = log_now_ns() - o.prog.t0_ns;

		progress_clear(&o.prog);
		progress_bytes(b, sizeof(b), o.bytes);
		progress_bytes(rate, sizeof(rate), (uint64_t)((double)o.bytes * 1e9 / (double)(dt ? dt : 1)));
		snprintf(line, sizeof(line), "vmm cp: %s copied, %s/s\n", b, rate);
		fputs(line, stderr);
	}
	return cp_done(r, &o);
}

const struct cli_verb cli_verb_cp = {
	.name = "cp",
	.summary = "copy files between the host and a sandbox",
	.run = cp_main,
	.usage = cp_usage,
};
