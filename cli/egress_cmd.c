/* vmm egress: the egress proxy on its own (docs/egress.md). */
#define _GNU_SOURCE
#include "cli.h"
#include "egress.h"
#include "../vmm/log.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void egress_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm egress serve --policy FILE --vsock-uds PATH [--log FILE] [--ca-dir DIR]\n"
		"                        [--name NAME] [--no-seccomp]\n\n"
		"Runs a sandbox's egress proxy without a sandbox, in the foreground until\n"
		"SIGINT or SIGTERM: it listens on PATH_3128 as a sandbox's proxy listens on\n"
		"its vsock socket's (tests and benchmarks connect there directly). --log\n"
		"appends the JSON request lines to FILE (default: egress.log next to PATH);\n"
		"--ca-dir keeps the interception CA in DIR (default: PATH's folder).\n");
}

static int serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' }, { "vsock-uds", required_argument, NULL, 'u' },
		{ "log", required_argument, NULL, 'l' },    { "ca-dir", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },   { "no-seccomp", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	const char *policy = NULL, *uds = NULL, *logp = NULL, *ca_dir = NULL, *name = "egress";
	char logbuf[PATH_MAX];
	struct egress *e;
	sigset_t stop;
	int o, sig, seccomp = 1;

	optind = 1;
	while ((o = cli_getopt(argc, argv, "h", opts, "egress serve")) != -1) {
		switch (o) {
		case 'p': policy = optarg; break;
		case 'u': uds = optarg; break;
		case 'l': logp = optarg; break;
		case 'c': ca_dir = optarg; break;
		case 'n': name = optarg; break;
		case 's': seccomp = 0; break;
		case 'h': egress_usage(stdout); return 0;
		default: return CLI_EXIT_USAGE;
		}
	}
	if (!policy || !uds || optind != argc)
		return cli_usage_error("egress serve", "expected --policy FILE --vsock-uds PATH");
	if (!logp) {
		const char *slash = strrchr(uds, '/');

		snprintf(logbuf, sizeof(logbuf), "%.*segress.log", slash ? (int)(slash - uds + 1) : 0, uds);
		logp = logbuf;
	}
	e = malloc(sizeof(*e));
	if (!e || egress_load(e, policy, name)) {
		free(e);
		return CLI_EXIT_ERROR;
	}
	e->seccomp = seccomp;
	if (ca_dir && !e->policy.ca_shared)
		snprintf(e->ca_dir, sizeof(e->ca_dir), "%s", ca_dir);
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	if (egress_start(e, uds, logp)) {
		egress_release(e);
		return CLI_EXIT_ERROR;
	}
	log_info("egress proxy for %s on %s", policy, e->path);
	sigwait(&stop, &sig);
	egress_stop(e);
	egress_release(e);
	return 0;
}

static int egress_main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return serve(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		egress_usage(stdout);
		return 0;
	}
	return argc < 2 ? cli_usage_error("egress", "expected serve") : cli_usage_error("egress", "unknown command '%s'", argv[1]);
}

const struct cli_verb cli_verb_egress = {
	.name = "egress",
	.summary = "the egress proxy on its own (tests, benchmarks)",
	.run = egress_main,
	.usage = egress_usage,
};
