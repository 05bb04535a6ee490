/* The container's cgroup on the host for vmm oci (docs/oci-runtime.md,
 * "Cgroups"). runc puts a container's processes in the cgroup its
 * config.json's linux.cgroupsPath names, and the engines read it back:
 * containerd's shim (the task's Stats and its OOM events, from its init's
 * cgroup), the CRI's PodSandboxStats (the pod's cgroup_parent), kubelet's
 * cAdvisor (`kubectl top`), Podman's stats. vmm oci does the same for what
 * stands for the container on the host: the init proxy and, for a
 * container alone or a pod's sandbox, the VMM, so the VM's CPU and memory
 * (its guest's RAM included) are counted where kubelet and the engines
 * look, and fall under the pod's limits kubelet set on its cgroup_parent.
 * The container's own limits are not written here: the guest enforces
 * them (its cgroup in the VM), and a VM a few MiB over its guest's limit
 * must not be killed for it. cgroup v2 only, cgroupfs paths only (a
 * systemd "slice:prefix:name" is left alone, as with SystemdCgroup =
 * false). */
#ifndef CLI_OCI_CGROUP_H
#define CLI_OCI_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OCI_CGROUP_ROOT "/sys/fs/cgroup"

/* cgroupsPath as a folder under mnt (OCI_CGROUP_ROOT; a test's own): 0,
 * -ENOENT for none (empty, or "/" alone), -ENOTSUP for a systemd
 * "slice:prefix:name" or a host without cgroup v2 at mnt, -EINVAL for a
 * path with "." or ".." components. */
int oci_cgroup_dir(const char *mnt, const char *cgroups_path, char *buf, size_t len);
/* Makes dir (and its parents under mnt, each with the controllers its
 * parent has switched on for it, as runc does) and moves pid into it
 * (0: the caller). 0 or -errno, what failed in why. */
int oci_cgroup_join(const char *mnt, const char *dir, pid_t pid, char *why, size_t whylen);
/* The lowest memory.max of dir's parents under mnt (kubelet's pod and
 * QoS levels), in bytes; UINT64_MAX when none sets one. */
uint64_t oci_cgroup_mem_limit(const char *mnt, const char *dir);
/* Moves pid (0: the caller) into the existing cgroup dir. 0 or -errno. */
int oci_cgroup_move(const char *dir, pid_t pid);
/* The caller's own cgroup as a folder under mnt (cgroup v2's "0::"
 * line of /proc/self/cgroup). 0 or -errno. */
int oci_cgroup_self(const char *mnt, char *buf, size_t len);
/* Removes dir once the processes in it are gone (they may take a moment
 * to leave after their VM stopped: up to about a second). 0, or -errno
 * (-EBUSY: something still runs in it). */
int oci_cgroup_remove(const char *dir);
/* ROOT/ID/cgroup (state_dir: ROOT/ID) records dir for delete. 0 or -errno. */
int oci_cgroup_record(const char *state_dir, const char *dir);
/* delete's part: removes the cgroup state_dir records, if any (0); one
 * still busy after a second has what is left in it killed (cgroup.kill),
 * unless the caller is in it. 0 or -errno, what failed in why. */
int oci_cgroup_forget(const char *state_dir, char *why, size_t whylen);

#endif
