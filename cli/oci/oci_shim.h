/* containerd-shim-vmm-v2: containerd's runtime v2 shim for vmm oci
 * (docs/kubernetes.md, "The shim"), a link to vmm named as containerd
 * names shims (io.containerd.vmm.v2, or runtime_path in the CRI
 * plugin's runtime table).
 *
 * A thin one. containerd's own runc shim (containerd-shim-runc-v2,
 * driving vmm-oci as its runc) keeps the whole lifecycle: stdio and CRI
 * logs, exits and their events, exec, the pid files, one shim per pod.
 * This shim starts it with containerd's arguments and stands in front
 * of its ttrpc socket, passing every call through as it came, except
 * Task.Stats for a pod's workload container: the runc shim reads the
 * host cgroup of the container's init proxy, which holds none of its
 * processes, so that call is answered from the container's cgroup in
 * the pod's VM (oci_stats.h). ttrpc's framing (containerd/ttrpc,
 * channel.go): a 10-byte header (length and stream ID, big-endian
 * 32 bits each; type 1 request, 2 response; flags) and a protobuf
 * Request { service = 1; method = 2; payload = 3; ... } or
 * Response { Status status = 1; bytes payload = 2; }. */
#ifndef CLI_OCI_SHIM_H
#define CLI_OCI_SHIM_H

#include <stddef.h>
#include <stdint.h>

#define OCI_SHIM_NAME "containerd-shim-vmm-v2"

/* The shim's command line (containerd's runtime/v2/shim: -namespace,
 * -address, -publish-binary, -id, -bundle, -debug, then start or
 * delete). Its exit status. */
int oci_shim_main(int argc, char **argv);

/* A ttrpc frame's header: 0, or -EPROTO (a length over ttrpc's 4 MiB). */
struct oci_ttrpc_header {
	uint32_t len, stream;
	uint8_t type, flags;
};
int oci_ttrpc_header(const uint8_t h[10], struct oci_ttrpc_header *out);

/* What the shim does with one frame containerd sent (the body of a type
 * 1 frame): 1 and the response's body in resp[0..*rlen) when it answers
 * it itself, 0 to pass it on. ns: the containerd namespace; bundles:
 * the folder of the task bundles (the runc shim's options.json in
 * BUNDLES/ID names vmm oci's --root). */
int oci_shim_answer(const uint8_t *body, size_t len, const char *ns, const char *bundles, uint8_t *resp,
		    size_t cap, size_t *rlen);

#endif
