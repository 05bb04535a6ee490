/* OCI lifecycle hooks (the runtime spec, config.md "POSIX-platform
 * Hooks" and runtime.md "Lifecycle"), run on the host by `vmm oci`
 * (docs/oci-runtime.md, "Hooks"). */
#ifndef CLI_OCI_HOOKS_H
#define CLI_OCI_HOOKS_H

#include <stddef.h>

#include "cli/oci/oci_spec.h"

/* The spec's name of a kind ("createRuntime"). */
const char *oci_hook_name(enum oci_hook_kind k);

/* Runs one hook: h->path with h->args (argv[0] included, as the spec
 * has it; just the path without args) and exactly h->env, the state JSON
 * on its stdin, its stdout and stderr collected. Waits at most
 * h->timeout_s seconds (0: no limit), then kills it. 0 when it exits 0;
 * -ETIMEDOUT, -ECHILD (non-zero exit or a signal), -errno; why says
 * which, with the start of its output. */
int oci_hook_run(const struct oci_hook *h, const char *state_json, char *why, size_t whylen)
	__attribute__((warn_unused_result));

/* Runs s's hooks of kind k in order; stops at the first failure (the
 * caller decides whether that fails the operation: it does for
 * prestart, createRuntime, createContainer and startContainer, and is a
 * warning for poststart and poststop). */
int oci_hooks_run(const struct oci_spec *s, enum oci_hook_kind k, const char *state_json, char *why,
		  size_t whylen) __attribute__((warn_unused_result));

#endif
