/* A Kubernetes pod as one VM for vmm oci (docs/kubernetes.md, "What a pod
 * is"). containerd's CRI plugin tells every container's config.json what
 * it is: the annotation io.kubernetes.cri.container-type is "sandbox"
 * for the pod's pause container and "container" for a workload, whose
 * io.kubernetes.cri.sandbox-id names its pod (containerd's
 * pkg/cri/annotations; CRI-O's io.kubernetes.cri-o.ContainerType and
 * .SandboxID likewise). The sandbox boots the pod's VM with one more
 * virtio-fs share, ROOT/SANDBOX/pod (tag "pod", /mnt/pod in the guest);
 * a workload container boots nothing: its root and bind sources are
 * bind-mounted on the host under ROOT/SANDBOX/pod/ID, which the VMM's
 * FUSE server (in the host's mount namespace, vmm run without --jail)
 * sees, and in the guest it gets its own root under /run/vmm-pod/ID,
 * its own cgroup /sys/fs/cgroup/vmm-pod/ID (its limits) and mount
 * namespace, and shares the VM's network and IPC with the pod. */
#ifndef CLI_OCI_POD_H
#define CLI_OCI_POD_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/oci/oci_spec.h"
#include "cli/oci/oci_vm.h"
#include "cli/sandbox/sandbox.h"

#define OCI_POD_TAG "pod"                       /* the pod share's virtio-fs tag */
#define OCI_POD_GUEST_SHARE "/mnt/pod"          /* where guest-init mounts it */
#define OCI_POD_GUEST_ROOTS "/run/vmm-pod"      /* containers' roots in the guest */
#define OCI_POD_CGROUP "/sys/fs/cgroup/vmm-pod" /* their cgroups */
#define OCI_TAG_MAX 64                          /* a detached process's tag (vmm/wire/api.h) */

enum oci_role {
	OCI_ALONE,         /* no CRI annotations (ctr, Podman): a VM of its own */
	OCI_POD_SANDBOX,   /* the pod's pause container: boots the pod's VM */
	OCI_POD_CONTAINER, /* a workload container: runs in its pod's VM */
};

/* The role s's annotations give it; a workload's sandbox ID in *sbid
 * (a container-type "container" without a valid sandbox-id is alone). */
enum oci_role oci_pod_role(const struct oci_spec *s, const char **sbid);

/* Where a container's processes run in the guest: the exec request's
 * "root", "tag" (of its init), "cgroup" and "mntns" (empty: none). */
struct oci_where {
	char root[PATH_MAX];
	char tag[OCI_TAG_MAX + 1];
	char cgroup[PATH_MAX];
	char mntns[64];
	char pidns[64];
};

/* An exec into a pod's container joins its init's namespaces, known
 * once its init proxy recorded the init's guest pid (ROOT/ID/gpid), which
 * containerd's start does not wait for: an ExecSync right after
 * StartContainer came before it and ran in the VM's own namespaces. Waits
 * for it (up to 5 s): 0, or -EAGAIN (the init never started). 0 at once
 * for a container alone or a pod's sandbox. */
int oci_pod_wait_init(const struct oci_ctx *c, const char *id);
/* Where id runs: in its pod (ROOT/ID/sandbox names the pod) or alone
 * (/mnt/rootfs, tag "init"). For a pod's container, its init's mount
 * namespace (ROOT/ID/gpid) once it runs; "new" with for_init. */
void oci_where_of(const struct oci_ctx *c, const char *id, int for_init, struct oci_where *w);

/* ROOT/ID/sandbox: the pod a workload container runs in. */
int oci_pod_record(const struct oci_ctx *c, const char *id, const char *sbid);
/* Its sandbox's ID into sbid: 0, or -ENOENT for a container that is not
 * a pod's workload. */
int oci_pod_of(const struct oci_ctx *c, const char *id, char *sbid, size_t len);
/* Records the guest pid of id's init (ROOT/ID/gpid), for its execs. */
void oci_pod_record_gpid(const struct oci_ctx *c, const char *id, long gpid);
/* Records the PID namespace a pod's container (or its sandbox) asks for
 * (ROOT/ID/pidns: "new", "pod" or nothing), for oci_where_of. 0 or -errno. */
int oci_pod_record_pidns(const struct oci_ctx *c, const char *id, enum oci_role role, const struct oci_spec *s);

/* The pod share's host folder: ROOT/SANDBOX/pod. 0 or -ENAMETOOLONG. */
int oci_pod_dir(const struct oci_ctx *c, const char *sbid, char *buf, size_t len);
/* Makes it, a shared mount of itself: what oci_pod_attach binds there
 * later reaches the pod's VMM, jailed in a mount namespace of its own
 * (its copy is a slave, cli/launch/jail.h). oci_pod_unmount_under undoes
 * it. 0 or -errno (nothing left behind). */
int oci_pod_share_make(const char *dir);

/* Host side of a workload container: root.path (read-only when asked)
 * and shares[0..n) bind-mounted at ROOT/SANDBOX/pod/ID/{rootfs,b0,...}.
 * 0 or -errno with why set (what it made is undone). */
int oci_pod_attach(const struct oci_ctx *c, const char *sbid, const char *id, const struct oci_spec *s,
		   char shares[][PATH_MAX], unsigned n, char *why, size_t whylen);
/* The guest side's first lines: its root bound at /run/vmm-pod/ID, its
 * cgroup with the spec's memory and CPU limits. malloc'd, NULL when out
 * of memory. The mount script (oci_mount_script) follows. */
char *oci_pod_guest_prepare(const struct oci_spec *s, const char *id);
/* 1 if the guest's OOM killer ended a process of id's cgroup in the
 * pod's VM, 0 if not, or -errno (the API). */
int oci_pod_guest_oomed(const struct sandbox_addr *a, const char *id);
/* The guest side undone: what is left of its processes killed
 * (cgroup.kill); with all, its mounts, root and cgroup removed too and
 * the guest's caches of the pod share dropped (so the VMM lets go of
 * the host mounts). 0 or the script's failure. */
int oci_pod_guest_remove(const struct sandbox_addr *a, const char *id, int all, char *err, size_t errlen);
/* A pod's container's limits changed in its guest cgroup (update):
 * memory.max (mem > 0), cpu.max (quota > 0, or -1: none; period 0: the
 * default 100000). 0 or the script's failure (err). */
int oci_pod_guest_limits(const struct sandbox_addr *a, const char *id, int64_t mem, int64_t quota, uint64_t period,
			 char *err, size_t errlen);
/* Unmounts (lazily) everything mounted under dir and removes the empty
 * folders there, dir included when rm_dir. 0, or -EBUSY when a mount
 * stays (the folder is then kept). */
int oci_pod_unmount_under(const char *dir, int rm_dir);
/* How many mounts are under dir (or dir itself); -errno. */
int oci_mounts_under(const char *dir);

#endif
