/* A pod container's resource figures from inside its pod's VM, for
 * containerd's Task.Stats (docs/kubernetes.md, "Stats"). The container's
 * processes run in the guest, in its cgroup there (cgroup v2,
 * OCI_POD_CGROUP/ID, oci_pod.h); the host sees only its init proxy. So
 * the figures are read from that cgroup's files (the kernel's
 * Documentation/admin-guide/cgroup-v2.rst: cpu.stat, memory.current,
 * memory.stat, memory.max, memory.events, pids.current, pids.max) and
 * encoded as containerd's cgroup v2 Metrics
 * (io.containerd.cgroups.v2.Metrics, containerd/cgroups v2/stats/
 * metrics.proto), what containerd's runc shim answers for a container
 * on a cgroup v2 host and its CRI plugin turns into ContainerStats:
 * CPU from cpu.usage_usec, the working set from memory.usage less
 * memory.inactive_file. */
#ifndef CLI_OCI_STATS_H
#define CLI_OCI_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "cli/oci/oci_vm.h"

#define OCI_METRICS_TYPE "io.containerd.cgroups.v2.Metrics"

/* The figures by the field numbers of metrics.proto's messages (index 0
 * unused; a file's "max" is UINT64_MAX, as containerd's cgroups package
 * reads it). */
struct oci_stats {
	uint64_t pids[3];   /* PidsStat: current 1, limit 2 */
	uint64_t cpu[7];    /* CPUStat: usage_usec 1 .. throttled_usec 6 */
	uint64_t mem[36];   /* MemoryStat: anon 1 .. swap_limit 35 */
	uint64_t events[6]; /* MemoryEvents: low 1 .. oom_kill 5 */
};

/* Reads `grep -H '' FILE...` output of a cgroup's files (lines
 * "FILE:VALUE" or "FILE:KEY VALUE") into st; lines it does not know are
 * skipped. 0, or -EINVAL when no line named a figure. */
int oci_stats_parse(const char *text, size_t n, struct oci_stats *st);
/* st as a Metrics message into buf: its length, or -E2BIG. */
int oci_stats_metrics(const struct oci_stats *st, uint8_t *buf, size_t len);
/* id's figures from its cgroup in its pod's VM, asked by a child process
 * that is killed after timeout_ms (a guest cannot hold the caller). 0;
 * -ENOENT when id is not a pod's workload container (a container alone
 * is its VM: its VMM is what the host counts); -ETIMEDOUT; else -errno
 * with why. */
int oci_stats_of(const struct oci_ctx *c, const char *id, struct oci_stats *st, unsigned timeout_ms, char *why,
		 size_t whylen);

#endif
