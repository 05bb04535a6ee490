/* libFuzzer: the control API's request path, bytes to reply: the HTTP
 * parser (vmm/http.c) over a stream of pipelined requests, each complete
 * one through the Firecracker routes (vmm/fcapi.c) of a VMM with no VM
 * yet. No VM is ever built: the VM calls below are stubs. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <errno.h>

#include "vmm/fcapi.h"
#include "vmm/http.h"
#include "vmm/snapshot.h"

int vm_pause(struct vm *vm)
{
	(void)vm;
	return 0;
}

void vm_resume(struct vm *vm)
{
	(void)vm;
}

int vm_guest_shutdown(struct vm *vm)
{
	(void)vm;
	return -ENOTSUP;
}

int vm_snapshot(struct vm *vm, const char *dir, uint64_t *bytes)
{
	(void)vm;
	(void)dir;
	(void)bytes;
	return -1;
}

/* The device option checks the routes call (devices/virtio_net.c,
 * virtio_fs.c), reduced to what the fuzzer needs. */
int net_options_parse(const char *s, struct net_options *o, const char **why)
{
	(void)s;
	memset(o, 0, sizeof(*o));
	*why = "stub";
	return 0;
}

int fs_tag_valid(const char *tag)
{
	return tag[0] && strlen(tag) < VIRTIO_FS_TAG_LEN;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fcapi api;
	static char out[FCAPI_REPLY_MAX], resp[FCAPI_REPLY_MAX + 512];
	const char *p = (const char *)data;
	struct http_request req;
	size_t len;
	int n, status;

	fcapi_init(&api, "fuzz");
	while (size) {
		n = http_parse(p, size, &req);
		if (n < 0) {
			if (req.status < 400 || req.status > 599 || !req.why)
				__builtin_trap();
			http_fault(out, sizeof(out), req.why);
			return 0;
		}
		if (n == 0 || (size_t)n > size)
			return 0;
		status = fcapi_handle(&api, &req, out, sizeof(out), &len);
		if (status == 0) /* InstanceStart or a load: "fails" */
			status = fcapi_finish(&api, "fuzz", out, sizeof(out), &len);
		if (len >= sizeof(out) || http_response(resp, sizeof(resp), status, out, len, req.keep_alive) == 0)
			__builtin_trap();
		p += n;
		size -= (size_t)n;
	}
	return 0;
}
