/* vmm e2b serve|key create: the E2B gateway (cli/e2b/e2b.h, docs/e2b.md). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/e2b/e2b.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void e2b_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm e2b serve [--listen ADDR:PORT] [--allow-remote] [--run-arg OPTION]...\n"
		"       vmm e2b key create\n\n"
		"serve answers E2B's API (the control plane and each sandbox's envd) so that\n"
		"agents written for E2B's SDKs run on this host's vmm sandboxes, with\n"
		"  E2B_API_URL=http://ADDR:PORT E2B_SANDBOX_URL=http://ADDR:PORT\n"
		"  E2B_API_KEY=<a key from 'vmm e2b key create'>\n"
		"Templates are vmm images (base, NAME[:VERSION]); see docs/e2b.md.\n\n"
		"  --listen ADDR:PORT  where to serve (default " E2B_DEFAULT_LISTEN "; a PORT alone is\n"
		"                      127.0.0.1:PORT)\n"
		"  --allow-remote      allow a non-loopback address (plain HTTP: put TLS in front)\n"
		"  --run-arg OPTION    an option for each sandbox's vmm run -d (repeatable, at most 16:\n"
		"                      --run-arg=--egress-policy=FILE gives them HTTPS through the\n"
		"                      egress proxy; an option a warm restore cannot honour makes each\n"
		"                      start a boot of the image)\n\n"
		"key create prints a new API key; only its hash is kept (state directory, .e2b).\n");
}

static int e2b_main(int argc, char **argv)
{
	struct e2b_serve_opts o = { .listen = E2B_DEFAULT_LISTEN };
	char vmm[PATH_MAX + 8], dir[PATH_MAX];
	const char *run_args[E2B_RUN_ARGS_MAX + 1];
	unsigned nra = 0;
	int i;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		e2b_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "key")) {
		char key[E2B_KEY_LEN + 1];

		if (argc != 3 || strcmp(argv[2], "create"))
			return cli_usage_error("e2b", "expected 'key create'");
		if (e2b_key_create(key, sizeof(key)))
			return CLI_EXIT_ERROR;
		printf("%s\n", key);
		return 0;
	}
	if (strcmp(argv[1], "serve"))
		return cli_usage_error("e2b", "unknown command '%s': serve or key create", argv[1]);
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc)
			o.listen = argv[++i];
		else if (!strncmp(argv[i], "--listen=", 9))
			o.listen = argv[i] + 9;
		else if (!strcmp(argv[i], "--allow-remote"))
			o.allow_remote = 1;
		else if ((!strcmp(argv[i], "--run-arg") && i + 1 < argc) || !strncmp(argv[i], "--run-arg=", 10)) {
			if (nra == E2B_RUN_ARGS_MAX)
				return cli_usage_error("e2b", "at most %d --run-arg", E2B_RUN_ARGS_MAX);
			run_args[nra++] = argv[i][9] == '=' ? argv[i] + 10 : argv[++i];
		} else
			return cli_bad_arg("e2b", argv[i], "--listen --run-arg");
	}
	run_args[nra] = NULL;
	o.run_args = run_args;
	/* Sandboxes start through the lean vmm beside this binary (vmm-tls
	 * hands nothing to it: it is the whole CLI, but slower to start). */
	if (cli_exe_dir(dir, sizeof(dir)) == 0) {
		snprintf(vmm, sizeof(vmm), "%s/vmm", dir);
		if (access(vmm, X_OK))
			snprintf(vmm, sizeof(vmm), "/proc/self/exe");
	} else {
		snprintf(vmm, sizeof(vmm), "/proc/self/exe");
	}
	o.vmm_path = vmm;
	o.notice = stderr;
	return e2b_serve(&o) ? CLI_EXIT_ERROR : 0;
}

const struct cli_verb cli_verb_e2b = {
	.name = "e2b",
	.summary = CLI_SUMMARY_E2B,
	.run = e2b_main,
	.usage = e2b_usage,
};
