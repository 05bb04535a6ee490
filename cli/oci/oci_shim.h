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

/* What the shim's command line says (containerd's runtime/v2/shim:
 * -namespace, -address, -publish-binary, -id, -bundle, -debug, then
 * start or delete; Go's flag syntax, -name value or -name=value, one
 * dash or two). */
struct oci_shim_args {
	const char *ns, *publish, *action;
};
/* 0, or -EINVAL (no action, or a flag without its value). */
int oci_shim_args(int argc, char **argv, struct oci_shim_args *a);
/* containerd's runc shim: beside containerd (-publish-binary names it),
 * else on PATH. 0 or -ENOENT. */
int oci_shim_upstream(const struct oci_shim_args *a, char *path, size_t len);
/* start, in the task's bundle (the current folder): the runc shim's
 * start with argv (argv[0] becomes its path; it starts its daemon, or
 * finds its pod's), then ours in front of it, at its address with
 * "-vmm" after it (shared by a pod's tasks the same way), written to
 * the bundle's "address" and into addr. 0, or -errno with why. */
int oci_shim_start(const struct oci_shim_args *a, const char *upstream, char **argv, char *addr, size_t addrlen,
		   char *err, size_t errlen);

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

/* The runc shim's answer to start: containerd 1.x's "unix://PATH", or
 * containerd 2.x's JSON {"version":3,"address":"unix://PATH",
 * "protocol":"ttrpc"} (pkg/shim, BootstrapParams). Its socket's path
 * into path, *version 0 for the plain form: 0, or -EINVAL (another
 * protocol or address kind, or a path too long to put "-vmm" after). */
int oci_shim_parse_start(const char *answer, char *path, size_t len, int *version);
/* Our answer in the same form, for the socket at path: 0 or -ENAMETOOLONG. */
int oci_shim_format_start(int version, const char *path, char *out, size_t len);

/* A Task.Create (the body of a type 1 frame) without runc's options, as
 * containerd sends it for runtime_type io.containerd.vmm.v2 (the CRI
 * plugin then has the runtime's options of its own type, or none): the
 * request again in out[0..*olen) with runc's Options { binary_name = oci;
 * root = /run/containerd/vmm-oci } as its options, for the runc shim
 * to run vmm-oci; 1 then, else 0 (pass it on as it came). */
int oci_shim_create_options(const uint8_t *body, size_t len, const char *oci, uint8_t *out, size_t cap,
			    size_t *olen);

#endif
