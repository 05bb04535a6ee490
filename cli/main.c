/* vmm's entry: the verb table (cli/verbs.h), --version and --help, and the
 * dispatch to a verb or to vmm-tls (docs/cli.md). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/oci/oci.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/base/log.h"
#include "vmm/seccomp.h"
#include "vmm/api/fcapi.h"
#include "vmm/vm_snapshot.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef VMM_VERSION
#define VMM_VERSION "0.0.0-dev"
#endif

static const struct cli_verb *const verbs[] = {
	&cli_verb_run,
	&cli_verb_create,
	&cli_verb_start,
	&cli_verb_exec,
	&cli_verb_cp,
	&cli_verb_top,
	&cli_verb_attach,
	&cli_verb_kill,
	&cli_verb_watch,
	&cli_verb_mcp,
	&cli_verb_token,
	&cli_verb_e2b,
	&cli_verb_drive,
	&cli_verb_ls,
	&cli_verb_ps,
	&cli_verb_inspect,
	&cli_verb_logs,
	&cli_verb_stop,
	&cli_verb_rm,
	&cli_verb_prune,
	&cli_verb_pause,
	&cli_verb_resume,
	&cli_verb_suspend,
	&cli_verb_snapshot,
	&cli_verb_restore,
	&cli_verb_serve,
	&cli_verb_image,
	&cli_verb_egress,
	&cli_verb_oci,
};
#define NR_VERBS (sizeof(verbs) / sizeof(verbs[0]))

/* ---- the verbs' printers of a usage mistake (verbs.h) ---- */

int cli_usage_error(const char *verb, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		msg[0] = '\0';
	fprintf(stderr, "vmm %s: %s (see 'vmm %s --help')\n", verb, msg, verb);
	return CLI_EXIT_USAGE;
}

int cli_getopt(int argc, char **argv, const char *sopts, const struct option *lopts, const char *verb)
{
	char err[512];
	int opt = cli_getopt_msg(argc, argv, sopts, lopts, verb, err, sizeof(err));

	if (opt == '?')
		fprintf(stderr, "vmm %s: %s\n", verb, err);
	return opt;
}

int cli_bad_arg(const char *verb, const char *arg, const char *valued)
{
	char err[1024];

	cli_bad_arg_msg(err, sizeof(err), verb, arg, valued);
	fprintf(stderr, "vmm %s: %s\n", verb, err);
	return CLI_EXIT_USAGE;
}

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: vmm [--version] [--help] <command> [<args>]\n\n"
		     "vmm runs Linux sandboxes on KVM.\n\ncommands:\n");
	for (i = 0; i < NR_VERBS; i++)
		fprintf(out, "  %-10s %s\n", verbs[i]->name, verbs[i]->summary);
	fprintf(out, "\n'vmm <command> --help' describes a command.\n");
}

/* Does the command line start with one of Firecracker's flags? */
static int fc_flag(const char *a)
{
	static const char *const flags[] = { "--api-sock", "--config-file", "--id", "--no-api", "--boot-timer",
					     "--level", "--log-path", "--show-level", "--show-log-origin", "--module",
					     "--metrics-path", "--metadata", "--mmds-size-limit",
					     "--http-api-max-payload-size", "--seccomp-filter", "--no-seccomp",
					     "--start-time-us", "--start-time-cpu-us", "--parent-cpu-time-us" };
	size_t i, n;

	for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		n = strlen(flags[i]);
		if (!strncmp(a, flags[i], n) && (a[n] == '\0' || a[n] == '='))
			return 1;
	}
	return 0;
}

/* --describe-snapshot PATH (a snapshot directory or its state file): the
 * state file's format version, as Firecracker prints its own. */
static int describe_snapshot(const char *path)
{
	char p[PATH_MAX + 16];
	const uint8_t *body;
	const char *why = "";
	uint8_t *file = NULL;
	size_t len, blen;
	struct stat st;

	if (!path) {
		fprintf(stderr, "vmm: --describe-snapshot PATH\n");
		return CLI_EXIT_USAGE;
	}
	snprintf(p, sizeof(p), "%s%s", path, stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? "/" SNAP_STATE_FILE : "");
	if (snapfile_read(p, &file, &len, &body, &blen, &why)) {
		fprintf(stderr, "vmm: %s: not a vmm snapshot state file%s%s\n", p, why && why[0] ? ": " : "",
			why ? why : "");
		free(file);
		return CLI_EXIT_ERROR;
	}
	free(file);
	printf("v%u.0.0\n", SNAP_VERSION);
	return 0;
}

int main(int argc, char **argv)
{
	const char *lvl = getenv("VMM_LOG");
	size_t i;

	if (lvl) {
		if (!strcmp(lvl, "debug"))
			log_set_level(LOG_DEBUG);
		else if (!strcmp(lvl, "warn"))
			log_set_level(LOG_WARN);
		else if (!strcmp(lvl, "error"))
			log_set_level(LOG_ERROR);
	}
	/* Before any thread starts: one malloc arena for all (seccomp.h). */
	if (sc_process_init())
		log_warn("cannot pin threads to one malloc arena; glibc may probe files lazily");
	/* vmm-oci (a link to vmm): the OCI runtime, named as a runc binary */
	{
		const char *base = strrchr(argv[0], '/');

		if (!strcmp(base ? base + 1 : argv[0], "vmm-oci"))
			return oci_main(argc, argv);
		/* containerd-shim-vmm-v2 (another link): containerd's shim */
		if (!strcmp(base ? base + 1 : argv[0], OCI_SHIM_NAME))
			return oci_shim_main(argc, argv);
	}
	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	/* The lean binary leaves TLS work to vmm-tls (cli/util/util.h), first thing. */
	if (cli_lean && cli_needs_tls(argc, argv)) {
		char path[PATH_MAX + 16];
		int r = cli_exec_tls(argv, path, sizeof(path));

		log_err("vmm %s needs %s: %s", argv[1], path, strerror(-r));
		return CLI_EXIT_ERROR;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		if (argc > 2) {
			for (i = 0; i < NR_VERBS; i++)
				if (!strcmp(argv[2], verbs[i]->name)) {
					verbs[i]->usage(stdout);
					return 0;
				}
		}
		usage(stdout);
		return 0;
	}
	/* Firecracker's form, which its clients parse (Kata takes the second
	 * word as a semantic version): "vmm v1.2.3 (GITHASH)". */
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("vmm v%s (%s)\n", fcapi_semver(), VMM_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "__keeper")) /* internal: a standby sandbox's keeper */
		return standby_keeper_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--snapshot-version")) {
		printf("v%u.0.0\n", SNAP_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--describe-snapshot"))
		return describe_snapshot(argc > 2 ? argv[2] : NULL);
	/* Firecracker's command line: `vmm --api-sock PATH`, `--config-file F`, ... */
	if (fc_flag(argv[1])) {
		int j;

		for (j = 2; j < argc; j++)
			if (!strcmp(argv[j], "--help") || !strcmp(argv[j], "-h")) {
				cli_verb_serve.usage(stdout);
				return 0;
			}
		return cli_verb_serve.run(argc, argv);
	}
	for (i = 0; i < NR_VERBS; i++) {
		if (!strcmp(argv[1], verbs[i]->name)) {
			int j;

			for (j = 2; j < argc && strcmp(argv[j], "--"); j++)
				if (!strcmp(argv[j], "--help") || !strcmp(argv[j], "-h")) {
					verbs[i]->usage(stdout);
					return 0;
				}
			return verbs[i]->run(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "vmm: unknown command '%s' (see 'vmm --help')\n", argv[1]);
	return CLI_EXIT_USAGE;
}
