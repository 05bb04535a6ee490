/* The jailer (vmm run --jail, vmm restore --jail): the VMM process becomes
 * the first process of its own PID namespace, in its own mount, network,
 * IPC and UTS namespaces with a minimal root (a tmpfs holding bind mounts
 * of only what it needs, at the same paths), joins a cgroup with the
 * sandbox's CPU, memory and pids limits, and once the VM is built drops to
 * an unprivileged uid/gid of its own with no capabilities, no_new_privs and
 * rlimits. With uid 0 (--jail-uid 0, vmm-oci's VMs) it stays root but
 * holds only a file server's capabilities from before the VM is built, and
 * its folder turns read-only to it but for jail-rw. docs/security.md. */
#ifndef CLI_JAIL_H
#define CLI_JAIL_H

#include <linux/capability.h>
#include <stdint.h>
#include <sys/types.h>

#define JAIL_DEFAULT_ID 900000u /* first uid/gid handed out: far above any login */
#define JAIL_ID_COUNT 65536u    /* one per running jailed sandbox */
#define JAIL_MAX_PATHS 40

/* jail_add's flags */
#define JAIL_RW 1     /* bound read-write (else read-only) */
#define JAIL_FOLLOW 2 /* bound with what is mounted below it, and receives
			 what the host mounts there later (a slave: a
			 share whose host folder is a shared mount) */

/* What a jail with uid 0 keeps (capabilities(7)): what virtio-fs needs to
 * serve files of every owner as they are (virtiofsd keeps these too), and
 * with low_ports, binding a published port below 1024. */
#define JAIL_ROOT_CAPS                                                                                            \
	((1ull << CAP_CHOWN) | (1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_DAC_READ_SEARCH) | (1ull << CAP_FOWNER) | \
	 (1ull << CAP_FSETID))

struct jail {
	int enabled;
	uid_t uid;
	gid_t gid;
	int uid_given, gid_given; /* --jail-uid/--jail-gid: not picked */
	int low_ports;           /* uid 0: a published port below 1024 */
	int lock_fd;             /* uid 0, in the VMM: its end of the relay's
				    line (jail_drop asks it to lock the jail) */
	const char *netns;       /* --jail-netns: join it (name or path) */
	const char *cg_root;     /* NULL: /sys/fs/cgroup (tests use a fake) */
	int proc;                /* /proc while the VM is built (virtio-fs opens
				    /proc/self/fd), detached before the guest runs */
	pid_t host_pid;          /* in the jailed VMM: its pid as the host sees it */
	unsigned long long host_start; /* and its start time (/proc/PID/stat) */
	unsigned cpu_milli;      /* --limit-cpu: thousandths of a CPU, 0: none */
	uint64_t mem_bytes;      /* --limit-mem, 0: none */
	unsigned pids;           /* --limit-pids, 0: none */
	unsigned nr_paths;
	struct {
		const char *path;
		int flags; /* JAIL_RW, JAIL_FOLLOW */
	} paths[JAIL_MAX_PATHS];
	char cgroup[3][256];     /* directories joined (for the log), "" if none */
};

/* Adds a host path (file, directory or device) to be bind-mounted at the
 * same place in the jail (flags: JAIL_RW, JAIL_FOLLOW). 0 or -ENOSPC. */
int jail_add(struct jail *j, const char *path, int flags);
/* The capabilities a jail with uid 0 keeps: JAIL_ROOT_CAPS, and
 * CAP_NET_BIND_SERVICE with low_ports. */
unsigned long long jail_root_caps(const struct jail *j);
/* --limit-cpu "1.5" (CPUs). 0 or -EINVAL. */
int jail_parse_cpu(const char *s, unsigned *milli);
/* Picks the sandbox's uid/gid (unless given): JAIL_DEFAULT_ID + k, the
 * lowest k that no live jailed sandbox under `state_root` holds, under an
 * flock of state_root/.jail-ids; records it in `folder`/jail-id. So a
 * jailed VMM cannot signal, ptrace or share RLIMIT_NPROC with another.
 * 0 or -errno (logged). */
int jail_pick_id(struct jail *j, const char *state_root, const char *folder);
/* --jail-netns NAME|PATH: joins that network namespace (a NAME is
 * /var/run/netns/NAME, as `ip netns add` makes) before the TAPs are opened,
 * so they are created in, or found in, it. 0 or -errno (logged). */
int jail_join_netns(const struct jail *j);
/* A companion process outside the jail's namespaces (it keeps the host's
 * network: the egress proxy): runs prepare(arg) as root, drops to the
 * jail's uid/gid with no capabilities and no_new_privs, runs run(arg) (its
 * threads start there, after the drop: a filtered thread could not take
 * part in glibc's process-wide setresuid), and lives until the VMM exits.
 * 0 once both succeeded there, or -errno (-EPERM for a jail with uid 0,
 * whose companion would stay root). */
int jail_companion(struct jail *j, int (*prepare)(void *), int (*run)(void *), void *arg);
/* Joins the cgroup (v2, else v1 cpu/memory/pids) named after the sandbox
 * and writes the limits. Without limits, nothing. 0 or -errno (logged). */
int jail_cgroup(struct jail *j, const char *name, unsigned nr_vcpus);
/* Single-threaded, as root: a new PID namespace with a child as its first
 * process, which returns (0) to go on as the VMM: new mount, IPC, UTS and
 * (unless joined) network namespaces, the minimal root at `root_dir`
 * (created; a tmpfs), pivot_root into it; j->host_pid and host_start set;
 * with uid 0, every capability but jail_root_caps gone (before any thread
 * starts: capabilities are a thread's), no_new_privs, no groups.
 * This process stays outside as the relay: it passes stop signals on,
 * waits for the VMM, removes `folder` (the sandbox's; a detached one that
 * left an exit record in jail-rw keeps it, back in root's hands) and the
 * cgroups, and exits with the VMM's status; it never returns. -errno
 * (logged) if nothing was forked. */
int jail_enter(struct jail *j, const char *root_dir, const char *folder);
/* After the VM is built, before vm_run: hands the jail's uid only what the
 * VMM writes from now on (folder/jail-rw and the sockets it connects to;
 * the folder itself, with the pid, process, token, config and jail-id
 * files root's CLI trusts, stays root's, mode 0711), then rlimits,
 * no_new_privs, the bounding set emptied, then setgroups/setresgid/
 * setresuid (every thread: glibc applies them process-wide), which clears
 * every capability. With uid 0: the relay, root outside, makes the folder
 * read-only in the jail (jail-rw aside: the VMM, root, could otherwise
 * rewrite the files root's CLI trusts), then the rlimits; its /proc, read
 * only and of its own PID namespace, stays. 0 or -errno (logged). */
int jail_drop(struct jail *j, const char *folder);

#endif
