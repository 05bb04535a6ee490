/* vmm egress: the egress proxy on its own (docs/egress.md). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/egress/egress.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/wire/json.h"
#include "vmm/api/control.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void egress_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm egress set SANDBOX|--socket PATH FILE\n"
		"       vmm egress show SANDBOX|--socket PATH\n"
		"       vmm egress serve --policy FILE --vsock-uds PATH [--log FILE] [--ca-dir DIR]\n"
		"                        [--control PATH] [--name NAME] [--no-seccomp]\n\n"
		"set: the running sandbox's egress proxy takes the policy FILE from its next\n"
		"request on (requests under way finish under the old one). FILE is checked\n"
		"whole first, its credentials read here (this command's environment and\n"
		"files); a bad one changes nothing. show: the policy in force, credential\n"
		"values redacted. --socket names a proxy's control socket instead of a\n"
		"sandbox (vmm egress serve's).\n\n"
		"serve: a sandbox's egress proxy without a sandbox, in the foreground until\n"
		"SIGINT or SIGTERM: it listens on PATH_3128 as a sandbox's proxy listens on\n"
		"its vsock socket's (tests and benchmarks connect there directly). --log\n"
		"appends the JSON request lines to FILE (default: egress.log next to PATH);\n"
		"--ca-dir keeps the interception CA in DIR (default: PATH's folder);\n"
		"--control listens for set and show at PATH (default: egress.sock next to\n"
		"the log).\n");
}

static int serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' }, { "vsock-uds", required_argument, NULL, 'u' },
		{ "log", required_argument, NULL, 'l' },    { "ca-dir", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },   { "no-seccomp", no_argument, NULL, 's' },
		{ "control", required_argument, NULL, 'C' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *policy = NULL, *uds = NULL, *logp = NULL, *ca_dir = NULL, *name = "egress", *ctl = NULL;
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
		case 'C': ctl = optarg; break;
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
	if (ca_dir && !e->ca_shared)
		snprintf(e->ca_dir, sizeof(e->ca_dir), "%s", ca_dir);
	if (ctl && snprintf(e->ctl_path, sizeof(e->ctl_path), "%s", ctl) >= (int)sizeof(e->ctl_path)) {
		log_err("--control %s: the path is too long", ctl);
		egress_release(e);
		return CLI_EXIT_USAGE;
	}
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

/* The proxy's control socket: a sandbox's (SANDBOX/egress.sock), or the
 * one --socket names. 0 or -errno (logged). */
static int ctl_path(int argc, char **argv, int *i, char *out, size_t len)
{
	struct sandbox sb;
	int r;

	if (*i < argc && !strcmp(argv[*i], "--socket") && *i + 1 < argc) {
		snprintf(out, len, "%s", argv[*i + 1]);
		*i += 2;
		return 0;
	}
	if (*i >= argc || argv[*i][0] == '-')
		return -EINVAL;
	if ((r = sandbox_lookup(&sb, argv[*i])))
		return r;
	if (snprintf(out, len, "%s/%s", sb.dir, EGRESS_CTL_SOCK) >= (int)len)
		return -ENAMETOOLONG;
	(*i)++;
	return 0;
}

/* One request to the proxy; its reply (malloc'd) once it says ok, else
 * NULL with the error printed. */
static char *ctl_call(const char *path, const char *verb, const char *req)
{
	const size_t cap = 4u << 20;
	char *out = malloc(cap), *arena = malloc(cap);
	struct json_arena a = { .buf = arena, .size = cap };
	const struct json *j;
	const char *err = NULL, *msg = NULL;
	int r, ok = 0;

	if (!out || !arena) {
		free(out);
		free(arena);
		return NULL;
	}
	r = control_call(path, req, out, cap, 30000);
	if (r) {
		fprintf(stderr, "vmm egress %s: no egress proxy answers on %s: %s%s\n", verb, path, strerror(-r),
			r == -ENOENT || r == -ECONNREFUSED ? " (was the sandbox started with --egress-policy?)" : "");
	} else if (!(j = json_parse(out, strlen(out), &a, &err)) || json_get_bool(j, "ok", &ok)) {
		fprintf(stderr, "vmm egress %s: unreadable reply: %.200s\n", verb, out);
	} else if (!ok) {
		if (json_get_str(j, "error", &msg))
			msg = "failed";
		fprintf(stderr, "vmm egress %s: %s\n", verb, msg);
	}
	free(arena);
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

static int set_main(int argc, char **argv)
{
	char path[PATH_MAX], *req, *reply;
	int i = 1;

	if (ctl_path(argc, argv, &i, path, sizeof(path)) || i + 1 != argc) {
		egress_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	req = egress_set_request(argv[i]);
	if (!req)
		return CLI_EXIT_ERROR;
	reply = ctl_call(path, "set", req);
	explicit_bzero(req, strlen(req)); /* it carried the credentials */
	free(req);
	if (!reply)
		return CLI_EXIT_ERROR;
	free(reply);
	return 0;
}

static int show_main(int argc, char **argv)
{
	static const char head[] = "{\"ok\":true,\"policy\":";
	char path[PATH_MAX], *reply;
	size_t n;
	int i = 1;

	if (ctl_path(argc, argv, &i, path, sizeof(path)) || i != argc) {
		egress_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	reply = ctl_call(path, "show", "{\"op\":\"egress_show\"}");
	if (!reply)
		return CLI_EXIT_ERROR;
	/* The reply is {"ok":true,"policy":POLICY}: POLICY as it came. */
	n = strlen(reply);
	if (n > sizeof(head) && !strncmp(reply, head, sizeof(head) - 1) && reply[n - 1] == '}')
		printf("%.*s\n", (int)(n - sizeof(head)), reply + sizeof(head) - 1);
	else
		printf("%s\n", reply);
	free(reply);
	return 0;
}

static int egress_main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return serve(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "set"))
		return set_main(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "show"))
		return show_main(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		egress_usage(stdout);
		return 0;
	}
	return argc < 2 ? cli_usage_error("egress", "expected serve") : cli_usage_error("egress", "unknown command '%s'", argv[1]);
}

const struct cli_verb cli_verb_egress = {
	.name = "egress",
	.summary = CLI_SUMMARY_EGRESS,
	.run = egress_main,
	.usage = egress_usage,
};
