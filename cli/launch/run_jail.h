/* vmm run/restore --jail (docs/security.md): what the sandbox start does
 * around cli/launch/jail.c's primitives. Before the VMM leaves the host: its ids,
 * the egress proxy in a companion process that keeps the host's network,
 * the network namespace, the TAPs opened; then the paths the VMM needs
 * inside (made absolute and bound at the same place) and into the jail. */
#ifndef CLI_RUN_JAIL_H
#define CLI_RUN_JAIL_H

#include <stddef.h>

struct egress;
struct jail;
struct sandbox;
struct snapshot;
struct tap;
struct vm_config;

/* The egress proxy's start, in this process or (jailed) in the companion. */
struct egress_start_args {
	struct egress *eg;
	const char *uds, *log;
};

/* --jail, before the VMM leaves the host: its id, the egress proxy in a
 * companion process (eg->eg: it needs the host's network), the network
 * namespace to join, cfg's TAPs opened there into taps (cfg->pre_taps).
 * 0 or -errno (logged). */
int run_jail_prepare(struct jail *j, struct vm_config *cfg, struct sandbox *sb,
		     const struct egress_start_args *eg, struct tap *taps);
/* --jail: what the VMM needs inside (cfg's paths made absolute, into the
 * PATH_MAX buffers kernel and initrd for a boot; snap's folder for a
 * restore), then into the jail at root (its folder's jail/). 0 or -errno. */
int run_jail_setup(struct jail *j, struct vm_config *cfg, struct snapshot *snap,
		   const struct sandbox *sb, char *kernel, char *initrd, char *root, size_t root_len);

#endif
