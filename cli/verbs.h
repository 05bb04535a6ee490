/* The vmm command's verbs: one file per verb in cli/, behind the table in
 * cli/main.c; each is a thin file that parses its arguments and calls a
 * subsystem (cli/SUBSYSTEM/, docs/ARCHITECTURE.md). */
#ifndef CLI_VERBS_H
#define CLI_VERBS_H

#include <stdio.h>

/* The verbs only the TLS binary (vmm-tls) carries: their summaries are
 * shared with the lean binary's forwarders (cli/notls.c). */
#define CLI_SUMMARY_EGRESS "change or show a sandbox's egress policy; the proxy on its own"
#define CLI_SUMMARY_MCP "serve a sandbox's tools as an MCP server (stdio or HTTP)"
#define CLI_SUMMARY_E2B "serve E2B's API (its SDKs) on vmm sandboxes; API keys"
#define CLI_SUMMARY_TOKEN "create, list and revoke a sandbox's access tokens"

/* A usage mistake in one line on stderr: "vmm VERB: MESSAGE (see 'vmm VERB
 * --help')"; returns CLI_EXIT_USAGE (cli/main.c; the subsystems format the
 * same line with cli/util's cli_usage_msg and hand it up). */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct option;
/* getopt_long that says an unknown option or a missing value with
 * cli_usage_error's line (getopt's own messages off), then returns '?'. */
int cli_getopt(int argc, char **argv, const char *sopts, const struct option *lopts, const char *verb);
/* A hand-parsed verb's argument it does not take, said as cli_usage_error
 * does: one of `valued` (its options that take a value, space-separated;
 * may be NULL) missing its value, an unknown option, or an extra word. */
int cli_bad_arg(const char *verb, const char *arg, const char *valued);

struct cli_verb {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* argv[0] is the verb */
	void (*usage)(FILE *out);
};

extern const struct cli_verb cli_verb_run;
extern const struct cli_verb cli_verb_exec;
extern const struct cli_verb cli_verb_cp;
extern const struct cli_verb cli_verb_snapshot;
extern const struct cli_verb cli_verb_restore;
extern const struct cli_verb cli_verb_pause;
extern const struct cli_verb cli_verb_resume;
extern const struct cli_verb cli_verb_suspend;
extern const struct cli_verb cli_verb_ls;
extern const struct cli_verb cli_verb_ps;
extern const struct cli_verb cli_verb_inspect;
extern const struct cli_verb cli_verb_logs;
extern const struct cli_verb cli_verb_stop;
extern const struct cli_verb cli_verb_rm;
extern const struct cli_verb cli_verb_prune;
extern const struct cli_verb cli_verb_create;
extern const struct cli_verb cli_verb_start;
extern const struct cli_verb cli_verb_serve;
extern const struct cli_verb cli_verb_image;
extern const struct cli_verb cli_verb_top;
extern const struct cli_verb cli_verb_attach;
extern const struct cli_verb cli_verb_kill;
extern const struct cli_verb cli_verb_watch;
extern const struct cli_verb cli_verb_egress;
extern const struct cli_verb cli_verb_mcp;
extern const struct cli_verb cli_verb_token;
extern const struct cli_verb cli_verb_e2b;
extern const struct cli_verb cli_verb_oci;
extern const struct cli_verb cli_verb_drive;
/* vmm oci, also run as vmm-oci (argv[0]'s name): argv[0] is the verb. */
int oci_main(int argc, char **argv);
/* containerd-shim-vmm-v2, vmm's shim for containerd (cli/oci.c). */
int oci_shim_main(int argc, char **argv);

/* vmm serve: the sandbox start in API mode (serve.c, launch.h). */
int serve_run(int argc, char **argv);

/* vmm create: checks `vmm run` options without starting anything. */
int run_check_args(int argc, char **argv);

#endif
