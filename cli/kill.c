/* vmm kill NAME ID [-s SIG]: signal a detached process (API v2). */
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "vmm/wire/json.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void kill_usage(FILE *out)
{
	fprintf(out, "usage: vmm kill [-s SIGNAL] [--token TOKEN] SANDBOX ID\n\n"
		     "Sends SIGNAL (default TERM; a number or a name: KILL, INT, HUP...) to a\n"
		     "detached process's process group. ID is its id or tag. Its output and exit\n"
		     "status stay readable (vmm top, vmm logs --process).\n");
}

static int parse_signal(const char *s)
{
	static const struct { const char *name; int sig; } names[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "STOP", SIGSTOP },
		{ "CONT", SIGCONT }, { "ALRM", SIGALRM }, { "WINCH", SIGWINCH },
	};
	char *end;
	long n = strtol(s, &end, 10);
	size_t i;

	if (*s && !*end)
		return n >= 1 && n <= 64 ? (int)n : -1;
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i].name))
			return names[i].sig;
	return -1;
}

static int kill_main(int argc, char **argv)
{
	char err[600] = "";
	struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
	const char *pos[2] = { NULL, NULL };
	char fields[256], out[256];
	struct json_writer w;
	int i, n = 0, sig = SIGTERM, token_given = 0;
	struct sandbox sb;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			sig = parse_signal(argv[++i]);
			if (sig < 0) {
				fprintf(stderr, "vmm kill: %s: not a signal\n", argv[i]);
				return CLI_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--token") && i + 1 < argc) {
			a.token = argv[++i];
			token_given = 1;
		} else if (argv[i][0] != '-' && n < 2) {
			pos[n++] = argv[i];
		} else {
			return cli_bad_arg("kill", argv[i], "-s --token");
		}
	}
	if (n != 2)
		return cli_usage_error("kill", "expected SANDBOX ID");
	if (sandbox_api_addr(pos[0], token_given, &sb, &a))
		return CLI_EXIT_ERROR;
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "signal");
	if (api_selector(&w, pos[1]) || !jw_done(&w)) {
		fprintf(stderr, "vmm kill: %s: not a process id or tag\n", pos[1]);
		return CLI_EXIT_USAGE;
	}
	jw_key(&w, "signal");
	jw_int(&w, sig);
	if (api_call2(&a, jw_done(&w) ? fields : "", "kill", out, sizeof(out), err, sizeof(err))) {
		fprintf(stderr, "vmm: %s\n", err);
		return CLI_EXIT_ERROR;
	}
	return 0;
}

const struct cli_verb cli_verb_kill = {
	.name = "kill",
	.summary = "signal a detached process",
	.run = kill_main,
	.usage = kill_usage,
};
