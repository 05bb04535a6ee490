/* vmm run/restore --jail: the sandbox start's side (run_jail.h). */
#include "cli/launch/run_jail.h"
#include "cli/egress/egress.h"
#include "cli/launch/jail.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/base/log.h"
#include "vmm/seccomp.h"
#include "vmm/vm_snapshot.h"
#include "vmm/vm.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int open_egress(void *arg)
{
	const struct egress_start_args *a = arg;

	return egress_open(a->eg, a->uds, a->log);
}

/* In the companion, unprivileged: the proxy's threads, then its main
 * thread (which only waits) under the same allow-list. */
static int launch_egress(void *arg)
{
	const struct egress_start_args *a = arg;
	int r = egress_launch(a->eg);

	return r ? r : a->eg->seccomp ? sc_install(SC_EGRESS) : 0;
}

/* --jail, before the VMM leaves the host: its id, the egress proxy in a
 * companion process (it needs the host's network), the network namespace
 * to join, the TAPs opened there (a TAP fd works from any namespace: with
 * a new, empty one the interface stays on the host, where it is routed). */
int run_jail_prepare(struct jail *j, struct vm_config *cfg, struct sandbox *sb,
		     const struct egress_start_args *eg, struct tap *taps)
{
	char root[PATH_MAX], *slash;
	unsigned i;
	int r;

	snprintf(root, sizeof(root), "%s", sb->dir);
	if ((slash = strrchr(root, '/')))
		*slash = '\0';
	if (eg->eg && !cfg->has_vsock) {
		log_err("--egress-policy needs the sandbox's vsock device");
		return -EINVAL;
	}
	if ((r = jail_pick_id(j, root, sb->dir)))
		return r;
	if (eg->eg && (r = jail_companion(j, open_egress, launch_egress, (void *)eg))) {
		log_err("--jail: the egress proxy did not start: %s", strerror(-r));
		return r;
	}
	if ((r = jail_join_netns(j)))
		return r;
	for (i = 0; i < cfg->nr_nets; i++)
		if ((r = virtio_net_open_tap(&cfg->nets[i], &taps[i])))
			return r;
	cfg->pre_taps = cfg->nr_nets ? taps : NULL;
	return 0;
}

/* A malloc'd path made absolute (the jail binds it at the same place).
 * 0, or -1 with errno set (logged). */
static int absolute(char **path, const char *opt)
{
	char *abs = realpath(*path, NULL);

	if (!abs) {
		int e = errno;

		log_err("%s %s: %s", opt, *path, strerror(e));
		errno = e;
		return -1;
	}
	free(*path);
	*path = abs;
	return 0;
}

/* A path below the sandbox's folder (a clone's disk copy). */
static int in_folder(const struct sandbox *sb, const char *path)
{
	size_t n = strlen(sb->dir);

	return !strncmp(path, sb->dir, n) && path[n] == '/';
}

/* --jail: what the VMM needs inside (absolute paths: the jail's cwd is
 * its root), then into it. */
int run_jail_setup(struct jail *j, struct vm_config *cfg, struct snapshot *snap,
		   const struct sandbox *sb, char *kernel, char *initrd, char *root, size_t root_len)
{
	char tmp[PATH_MAX];
	unsigned i;
	int r = 0;

	if (cfg->has_vsock && strncmp(cfg->vsock.uds, sb->dir, strlen(sb->dir))) {
		log_err("--jail: the vsock socket must be in the sandbox's folder (no --vsock uds=)");
		return -EINVAL;
	}
	/* Read-only: the device opens read-write all the same, and a VMM
	 * that is root cannot chmod or chown the host's node. */
	r |= jail_add(j, cfg->kvm_path ? cfg->kvm_path : "/dev/kvm", 0);
	/* No /dev/net/tun: the TAPs are open (run_jail_prepare). */
	j->proc = cfg->nr_fs > 0;
	for (i = 0; i < cfg->nr_fs; i++) {
		if (absolute(&cfg->fs[i].path, "--fs"))
			return -errno;
		/* A writable share, as unjailed, shows what is mounted below
		 * it, and what the host mounts there later where its folder is
		 * a shared mount (a pod's share: cli/oci/oci_pod.h). */
		r |= jail_add(j, cfg->fs[i].path, cfg->fs[i].ro ? 0 : JAIL_RW | JAIL_FOLLOW);
		/* a drive's shared byte count (devices/fuse/fuse_budget.c) */
		if (cfg->fs[i].usage) {
			if (absolute(&cfg->fs[i].usage, "--fs"))
				return -errno;
			r |= jail_add(j, cfg->fs[i].usage, JAIL_RW);
		}
	}
	if (snap) {
		if (!realpath(snap->dir, tmp))
			return -errno;
		snprintf(snap->dir, sizeof(snap->dir), "%s", tmp);
		r |= jail_add(j, snap->dir, 0);
	} else {
		if (!realpath(cfg->kernel, kernel) || (cfg->initrd && !realpath(cfg->initrd, initrd))) {
			log_err("--jail: %s: %s", cfg->kernel, strerror(errno));
			return -errno;
		}
		cfg->kernel = kernel;
		r |= jail_add(j, kernel, 0);
		if (cfg->initrd) {
			cfg->initrd = initrd;
			r |= jail_add(j, initrd, 0);
		}
	}
	for (i = 0; i < cfg->nr_disks; i++) {
		if (absolute(&cfg->disks[i].path, "--disk"))
			return -errno;
		if (!in_folder(sb, cfg->disks[i].path))
			r |= jail_add(j, cfg->disks[i].path, cfg->disks[i].ro ? 0 : JAIL_RW);
	}
	/* The folder last but its own mounts: on top of a share that holds
	 * it (a container's bind whose source sits above vmm oci's root), or
	 * it would be that share's plain folder in the jail. */
	r |= jail_add(j, sb->dir, JAIL_RW);
	/* uid 0: jail-rw a mount of its own, so that the folder's turns
	 * read-only in place at jail_drop (every descriptor on it too) */
	if (j->uid == 0)
		r |= jail_add(j, sb->rw, JAIL_RW);
	/* A clone's disk copy is in the folder, bound already (a bind on it
	 * would keep the VMM from removing it at exit); with uid 0 it is a
	 * mount of its own, which stays writable when the folder turns
	 * read-only (the relay removes the copy). */
	for (i = 0; i < cfg->nr_disks && j->uid == 0; i++)
		if (in_folder(sb, cfg->disks[i].path))
			r |= jail_add(j, cfg->disks[i].path, cfg->disks[i].ro ? 0 : JAIL_RW);
	if (r) {
		log_err("--jail: too many paths to bind");
		return -ENOSPC;
	}
	snprintf(root, root_len, "%s/jail", sb->dir);
	return jail_enter(j, root, sb->dir);
}
