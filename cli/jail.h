/* The jailer (vmm run --jail, vmm restore --jail): the VMM process moves
 * into its own mount, network, IPC and UTS namespaces with a minimal root
 * (a tmpfs holding bind mounts of only what it needs, at the same paths),
 * joins a cgroup with the sandbox's CPU, memory and pids limits, and once
 * the VM is built drops to an unprivileged uid/gid with no capabilities,
 * no_new_privs and rlimits. docs/security.md. */
#ifndef CLI_JAIL_H
#define CLI_JAIL_H

#include <stdint.h>
#include <sys/types.h>

#define JAIL_DEFAULT_ID 900000u /* uid and gid: far above any login */
#define JAIL_MAX_PATHS 40

struct jail {
	int enabled;
	uid_t uid;
	gid_t gid;
	unsigned cpu_milli;      /* --limit-cpu: thousandths of a CPU, 0: none */
	uint64_t mem_bytes;      /* --limit-mem, 0: none */
	unsigned pids;           /* --limit-pids, 0: none */
	unsigned nr_paths;
	struct {
		const char *path;
		int rw;
	} paths[JAIL_MAX_PATHS];
	char cgroup[3][256];     /* directories joined (for the log), "" if none */
};

/* Adds a host path (file, directory or device) to be bind-mounted at the
 * same place in the jail. 0 or -ENOSPC. */
int jail_add(struct jail *j, const char *path, int rw);
/* --limit-cpu "1.5" (CPUs). 0 or -EINVAL. */
int jail_parse_cpu(const char *s, unsigned *milli);
/* Joins the cgroup (v2, else v1 cpu/memory/pids) named after the sandbox
 * and writes the limits. Without limits, nothing. 0 or -errno (logged). */
int jail_cgroup(struct jail *j, const char *name, unsigned nr_vcpus);
/* Single-threaded, as root: new namespaces, the minimal root at `root_dir`
 * (created; a tmpfs), pivot_root into it. A root process left outside
 * removes `folder` (the sandbox's) and the cgroups once the VMM exits.
 * 0 or -errno (logged). */
int jail_enter(struct jail *j, const char *root_dir, const char *folder);
/* After the VM is built, before vm_run: rlimits, no_new_privs, the
 * bounding set emptied, then setgroups/setresgid/setresuid (every thread:
 * glibc applies them process-wide), which clears every capability.
 * 0 or -errno (logged). */
int jail_drop(struct jail *j, const char *owned_dir);

#endif
