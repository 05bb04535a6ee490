/* The container's VM for `vmm oci` (docs/oci-runtime.md, "How a
 * container runs"): the runtime's shared context and its log, the VM
 * booted with `vmm run -d` under ROOT/ID/vm, its API address, the
 * mounts made in the guest, the network namespace's veth as its --net. */
#ifndef CLI_OCI_VM_H
#define CLI_OCI_VM_H

#include <limits.h>
#include <stddef.h>

#include "cli/oci/oci_net.h"
#include "cli/oci/oci_spec.h"
#include "cli/sandbox/sandbox.h"

#define OCI_VM_NAME "c"              /* the VM's sandbox name in ROOT/ID/vm */
#define OCI_MEM_OVERHEAD_MIB 64      /* guest kernel + guest-init over a memory limit */
#define OCI_VMM_OWN_MIB 32           /* the VMM's own memory beside its guest's, with room */
#define OCI_GUEST_ROOT "/mnt/rootfs" /* where guest-init mounts tag rootfs */
#define OCI_FIELDS_MAX 65536         /* an exec request's fields */
/* The pod VMM's port in the pod's network namespace to which every TCP
 * connection to localhost there is redirected (oci_pod_forward); a
 * string, as it goes into --publish and iptables' words. */
#define OCI_POD_FORWARD_PORT "1"

/* The global options every verb shares. */
struct oci_ctx {
	const char *root;
	const char *log;
	int log_json;
	char self[PATH_MAX]; /* the vmm binary, for the VMM it starts */
};

/* One line into --log (runc's JSON lines with --log-format json, which
 * containerd reads back for an error), at level "error" or "info"; none
 * without --log. The verb (cli/oci.c, oci_fail) also prints an error on
 * its stderr; nothing here does. */
void oci_log_line(const struct oci_ctx *c, const char *level, const char *msg);
/* A line for --log only. */
void oci_info(const struct oci_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The VM's size for s: memory (MiB) from its memory limit or the pod's
 * (io.kubernetes.cri.sandbox-memory) plus OCI_MEM_OVERHEAD_MIB, else 512,
 * or io.vmm.mem; vCPUs from the CPU quota, or io.vmm.cpus. 0, or
 * CLI_EXIT_ERROR with why. */
int oci_vm_size(const struct oci_spec *s, unsigned long long *mib, unsigned *ncpu, char *why, size_t whylen);
/* Boots id's VM: root.path as virtio-fs tag rootfs, shares[0..nshares)
 * as b0.., pod_dir (a pod's sandbox; NULL: none) as tag pod, memory and
 * vCPUs from s, netopt as its --net, started inside the network
 * namespace nsfd (-1: ours). 0 or CLI_EXIT_ERROR (why in why). */
int oci_vm_boot(const struct oci_ctx *c, const char *id, const struct oci_spec *s, char shares[][PATH_MAX],
		unsigned nshares, const char *netopt, int nsfd, const char *pod_dir, char *why, size_t whylen);
/* Stops and removes id's VM (vmm rm -f; none is no error), then what it
 * left on the veth (oci_vm_net_record) and, for a pod's sandbox, the
 * mounts left in its pod share. A pod's workload container instead
 * leaves its pod's VM (its processes, mounts and cgroup there, its binds
 * on the host: cli/oci/oci_pod.h). 0, or -EIO with vmm rm's message in
 * err when the VM may still be there. */
int oci_vm_remove(const struct oci_ctx *c, const char *id, char *err, size_t errlen);
/* Records that id's VM took nspath's veth ifname (ROOT/ID/net), so that
 * oci_vm_remove takes the veth's ingress qdisc away. 0 or -errno. */
int oci_vm_net_record(const struct oci_ctx *c, const char *id, const char *nspath, const char *ifname);
/* id's VM's API address (its pod's for a pod's workload container):
 * 0, or -errno when it has none. */
int oci_vm_addr(const struct oci_ctx *c, const char *id, struct sandbox *sb, struct sandbox_addr *a);
/* 0 when the VM's guest-init runs container processes (its health
 * names the "container" feature, and "pod" when pod is set), else
 * CLI_EXIT_ERROR (why in why). */
int oci_guest_capable(const char *id, const struct sandbox_addr *a, int pod, char *why, size_t whylen);
/* The shell script that makes s's mounts in the guest under the
 * container's root groot; the bind sources' directories go to shares
 * (*nshares of them, share_of[i] the one of mount i), which the guest
 * sees at share_prefix0, share_prefix1, ... ("/mnt/b" alone). malloc'd,
 * NULL when out of memory. */
char *oci_mount_script(const struct oci_spec *s, const char *groot, const char *share_prefix,
		       char shares[][PATH_MAX], unsigned *nshares, int *share_of);
/* Runs argv in the guest (not in the container): its exit status, its
 * stderr in err; -errno when the API fails. */
int oci_guest_run(const struct sandbox_addr *a, const char *const *argv, char *err, size_t errlen);
/* The same, with the command's stdout in out[0..*outn) (what does not
 * fit in outlen is dropped). */
int oci_guest_output(const struct sandbox_addr *a, const char *const *argv, char *out, size_t outlen, size_t *outn,
		     char *err, size_t errlen);
/* The network namespace of s as the VMM's --net (into opt; *netopt
 * NULL when there is none to join) and an open fd of it in *nsfd (-1:
 * none). 0 or CLI_EXIT_ERROR (why in err). */
int oci_net_prepare(const struct oci_ctx *c, const struct oci_spec *s, struct oci_net *n, char *opt,
		    size_t optlen, const char **netopt, int *nsfd, char *err, size_t errlen);

#endif
