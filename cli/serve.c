/* vmm serve (also `vmm --api-sock PATH`, Firecracker's spelling): a VMM
 * with no VM yet, serving the Firecracker-compatible API
 * (docs/control-api.md); the VM is built by PUT /actions InstanceStart or
 * PUT /snapshot/load, or at once from --config-file. */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/launch/launch.h"

#include <stdio.h>

static void serve_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm serve [--api-sock PATH] [--config-file FILE] [--id NAME] [options]\n"
		"       vmm --api-sock PATH [...]      (the same, Firecracker's way)\n\n"
		"Starts a sandbox's VMM with no VM yet and serves the Firecracker-compatible\n"
		"HTTP API (docs/control-api.md, docs/openapi.yaml) on PATH and on control.sock\n"
		"in the sandbox's folder: PUT /boot-source, /machine-config, /drives/ID,\n"
		"/vsock, then PUT /actions {\"action_type\": \"InstanceStart\"} boots it; or\n"
		"PUT /snapshot/load starts it from a snapshot. The same socket serves the\n"
		"running VM (GET /, PATCH /vm, PUT /snapshot/create) until it stops.\n\n"
		"  --api-sock PATH      also serve the API on this Unix socket\n"
		"  --config-file FILE   boot at once from a Firecracker configuration file\n"
		"                       ({\"boot-source\":..., \"drives\":[...], ...})\n"
		"  --id NAME, --name NAME  the sandbox's name (default: generated)\n"
		"  --console MODE       stdio (default), file:PATH or none\n"
		"  --ttl DURATION, --publish [ADDR:]HOST_PORT:GUEST_PORT  as with vmm run\n"
		"  -q, --quiet / -v, --verbose\n\n"
		"The VM's exit status is vmm run's (docs/exit-status.md); a stop signal\n"
		"before the VM starts exits 0.\n");
}

int serve_run(int argc, char **argv)
{
	struct launch_out out = { .result = stdout, .diag = stderr };
	int r = launch_sandbox(argc, argv, 0, 0, 1, &out);

	if (out.err[0])
		fprintf(stderr, "vmm: %s\n", out.err);
	return r;
}

const struct cli_verb cli_verb_serve = {
	.name = "serve",
	.summary = "serve the Firecracker-compatible API, boot when told (vmm --api-sock PATH)",
	.run = serve_run,
	.usage = serve_usage,
};
