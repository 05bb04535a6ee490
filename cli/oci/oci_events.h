/* containerd's task events that only the runtime can know of, for vmm oci
 * under containerd's runc shim. The shim publishes a task's OOM
 * (containerd.events.TaskOOM, topic /tasks/oom) when the container's
 * cgroup on the host counts an OOM kill; a pod container's OOM kill
 * happens in the guest, in its cgroup there, which the shim never sees.
 * So the init proxy publishes it, before it exits with the container's
 * status, the way shims publish: `containerd publish` with the event on
 * stdin, to the address and namespace the shim runs the runtime with
 * (GRPC_ADDRESS, NAMESPACE: containerd sets them for its shims, and the
 * shim's runtime commands inherit them; else the shim's own arguments,
 * -address, -namespace and -publish-binary, from its command line).
 * containerd's CRI plugin then gives the container the reason OOMKilled. */
#ifndef CLI_OCI_EVENTS_H
#define CLI_OCI_EVENTS_H

#include <stddef.h>

/* The TaskOOM event for id as a google.protobuf.Any (type_url
 * "containerd.events.TaskOOM", value TaskOOM{container_id = id}), what
 * `containerd publish` reads. Its length, or -E2BIG / -EINVAL (an id of
 * 0 or over 127 bytes). */
int oci_event_oom_any(const char *id, unsigned char *buf, size_t len);
/* Publishes id's OOM. 0, -ENOENT when not under a shim (no address or
 * namespace found) or without containerd's binary, else -errno with why. */
int oci_event_oom_publish(const char *id, char *why, size_t whylen);

#endif
