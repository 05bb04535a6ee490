/* The Firecracker-compatible side of starting a sandbox (docs/control-api.md,
 * docs/mmds.md): vmm serve's configuration before boot (Firecracker's
 * command line, --config-file, the pre-boot API until InstanceStart or a
 * snapshot load, whose network and vsock overrides become restore's), and
 * the MMDS store a vmm run/restore gives its --net ...,mmds interfaces. */
#ifndef CLI_RUN_FC_H
#define CLI_RUN_FC_H

struct control;
struct mmds;
struct run_opts;
struct sandbox;
struct snap_mmds;
struct snapshot;
struct vm_config;
struct uffd_backend;

/* vmm serve: opens sb's control socket into ctl, applies o's Firecracker
 * options and --config-file, then serves the pre-boot API until the VM can
 * start: cfg filled from the API (0, ctl->api->pending FCAPI_START), or
 * snap opened for a load with its overrides in o (0, FCAPI_LOAD; for a
 * Uffd backend, guest memory mapped into ub and handed to the handler).
 * -1 with *status the exit status otherwise (0: stopped by a signal before
 * anything ran). */
int run_fc_serve_configure(struct control *ctl, struct run_opts *o, const struct sandbox *sb,
			   struct vm_config *cfg, struct snapshot *snap, struct uffd_backend *ub, int *status);
/* --net ...,mmds[=v2] and --metadata FILE outside the Firecracker API:
 * the store the VM's interfaces serve (*out and cfg->mmds; none if no
 * interface asks), with snap's address on a restore. 0 or a CLI exit
 * status. */
int run_fc_mmds(struct run_opts *o, struct vm_config *cfg, struct mmds **out, const char *metadata, unsigned long limit,
		const struct snap_mmds *snap);

#endif
