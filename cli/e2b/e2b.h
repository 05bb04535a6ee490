/* The E2B gateway (docs/e2b.md): one HTTP server that answers E2B's
 * control plane (../shared/specs/e2b/openapi.yml: /sandboxes and
 * /v2/sandboxes) and, routed by the E2b-Sandbox-Id header, each sandbox's
 * envd API (envd/envd.yaml: /files, /health; the Connect RPC services
 * process.Process and filesystem.Filesystem), by calling vmm's own
 * subsystems: sandboxes are vmm sandboxes started from vmm images, envd's
 * calls become sandbox API requests (docs/api.md). The official E2B SDKs
 * then run against vmm with E2B_API_URL and E2B_SANDBOX_URL pointing at it
 * and E2B_API_KEY one of its keys (`vmm e2b key create`). */
#ifndef CLI_E2B_H
#define CLI_E2B_H

#include <stddef.h>
#include <stdio.h>

struct e2b_serve_opts {
	const char *listen;   /* "127.0.0.1:PORT", "[::1]:PORT" or a PORT */
	int allow_remote;     /* a non-loopback address is allowed */
	const char *vmm_path; /* the vmm binary that starts sandboxes (vmm run -d) */
	const char *const *run_args; /* more options for each vmm run -d (NULL-terminated), or NULL */
	FILE *notice;         /* the "serving ... on http://ADDR" line scripts wait for (the verb's
				 stderr), or NULL */
};
#define E2B_RUN_ARGS_MAX 16
#define E2B_DEFAULT_LISTEN "127.0.0.1:3049"

/* Serves until SIGINT/SIGTERM. 0 or -errno (logged). */
int e2b_serve(const struct e2b_serve_opts *o);

/* A new API key (E2B_API_KEY) into key (at least E2B_KEY_LEN + 1 bytes);
 * only its hash is kept, in the state directory's .e2b folder (0700, the
 * file 0600). 0 or -errno (logged). */
#define E2B_KEY_LEN 81
int e2b_key_create(char *key, size_t len);

#endif
