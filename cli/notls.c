/* The lean `vmm` binary's side of the split (docs/perf.md, "Two
 * binaries"): main() hands every command line that needs TLS to vmm-tls
 * before it runs a verb (cli_needs_tls), so what is here is never reached
 * in a working build: the egress, mcp and token verbs for the verb table
 * and --help, and the TLS-side functions run.c and image.c name. Each
 * fails cleanly if it is reached after all. */
#include <limits.h>

#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/egress/egress.h"
#include "cli/images/images.h"
#include "vmm/base/log.h"

#include <errno.h>

const int cli_lean = 1;

static int unreachable(const char *what)
{
	log_err("%s needs vmm-tls, and this command line did not go there (a bug)", what);
	return -ENOTSUP;
}

static int forward_main(int argc, char **argv)
{
	(void)argc;
	return unreachable(argv[0]) ? CLI_EXIT_ERROR : 0;
}

static void forward_usage(FILE *out)
{
	fprintf(out, "this command is served by vmm-tls, next to vmm\n");
}

const struct cli_verb cli_verb_egress = { "egress", CLI_SUMMARY_EGRESS, forward_main, forward_usage };
const struct cli_verb cli_verb_mcp = { "mcp", CLI_SUMMARY_MCP, forward_main, forward_usage };
const struct cli_verb cli_verb_token = { "token", CLI_SUMMARY_TOKEN, forward_main, forward_usage };
const struct cli_verb cli_verb_e2b = { "e2b", CLI_SUMMARY_E2B, forward_main, forward_usage };

int egress_load(struct egress *e, const char *policy_file, const char *sandbox)
{
	(void)e, (void)policy_file, (void)sandbox;
	return unreachable("--egress-policy");
}

int egress_start(struct egress *e, const char *vsock_uds, const char *log_path)
{
	(void)e, (void)vsock_uds, (void)log_path;
	return unreachable("--egress-policy");
}

int egress_open(struct egress *e, const char *vsock_uds, const char *log_path)
{
	(void)e, (void)vsock_uds, (void)log_path;
	return unreachable("--egress-policy");
}

int egress_launch(struct egress *e)
{
	(void)e;
	return unreachable("--egress-policy");
}

void egress_stop(struct egress *e)
{
	(void)e;
}

void egress_release(struct egress *e)
{
	(void)e;
}

int image_build_main(int argc, char **argv, struct image_out *out)
{
	(void)argc, (void)argv, (void)out;
	return unreachable("vmm image build") ? CLI_EXIT_ERROR : 0;
}

int image_dockerfile_main(int argc, char **argv, struct image_out *out)
{
	(void)argc, (void)argv, (void)out;
	return unreachable("vmm image build -f") ? CLI_EXIT_ERROR : 0;
}

int image_builtin_main(int argc, char **argv, struct image_out *out)
{
	(void)argc, (void)argv, (void)out;
	return unreachable("vmm image build --builtin") ? CLI_EXIT_ERROR : 0;
}

int image_pull_main(int argc, char **argv, struct image_out *out)
{
	(void)argc, (void)argv, (void)out;
	return unreachable("vmm image pull") ? CLI_EXIT_ERROR : 0;
}

int image_warm_main(int argc, char **argv, struct image_out *out)
{
	(void)argc, (void)argv, (void)out;
	return unreachable("vmm image warm") ? CLI_EXIT_ERROR : 0;
}

int image_import_main(int argc, char **argv, struct image_out *out)
{
	(void)argc, (void)argv, (void)out;
	return unreachable("vmm image import") ? CLI_EXIT_ERROR : 0;
}

int image_export_main(int argc, char **argv, struct image_out *out)
{
	(void)argc, (void)argv, (void)out;
	return unreachable("vmm image export") ? CLI_EXIT_ERROR : 0;
}
