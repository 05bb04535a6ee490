/* libFuzzer: the control API's request path, bytes to reply: the HTTP
 * parser (vmm/base/http.c) over a stream of pipelined requests, each complete
 * one through the Firecracker routes (vmm/fcapi*.c) of a VMM
 * with no VM yet, then of one with a stand-in VM (no devices: PATCH
 * routes reach their lookups). No VM is ever built: the VM and device
 * calls below are stubs. PUT /logger and /metrics open one scratch file
 * in a directory of its own, whatever they name. */
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <errno.h>

#include "vmm/api/fcapi.h"
#include <fcntl.h>
#include "vmm/base/http.h"
#include "vmm/base/log.h"
#include "vmm/vm_snapshot.h"

#include <stdlib.h>
#include <unistd.h>

int vm_pause(struct vm *vm)
{
	(void)vm;
	return 0;
}

void vm_resume(struct vm *vm)
{
	(void)vm;
}

int vm_ctrl_alt_del(struct vm *vm)
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

int vm_snapshot_ex(struct vm *vm, const char *dir, const struct snap_opts *o, struct snap_stats *st)
{
	(void)vm;
	(void)dir;
	(void)o;
	(void)st;
	return -1;
}

/* The net device's option check the routes call (devices/virtio_net.c),
 * reduced to what the fuzzer needs; the virtio-fs names are the real ones
 * (devices/virtio_fs_names.c). */
int net_options_parse(const char *s, struct net_options *o, const char **why)
{
	(void)s;
	memset(o, 0, sizeof(*o));
	*why = "stub";
	return 0;
}

int virtio_blk_update(struct virtio_blk *b, const char *path, const struct rl_limits *rl, const char **why)
{
	(void)b;
	(void)path;
	(void)rl;
	*why = "stub";
	return -EINVAL;
}

void virtio_blk_limits(const struct virtio_blk *b, struct rl_limits *l)
{
	(void)b;
	memset(l, 0, sizeof(*l));
}

void virtio_net_set_limits(struct virtio_net *n, const struct rl_limits *rx, const struct rl_limits *tx)
{
	(void)n;
	(void)rx;
	(void)tx;
}

void virtio_net_limits(const struct virtio_net *n, struct rl_limits *rx, struct rl_limits *tx)
{
	(void)n;
	memset(rx, 0, sizeof(*rx));
	memset(tx, 0, sizeof(*tx));
}

/* The balloon's main-thread calls on a stand-in device (PATCH /balloon,
 * /balloon/statistics, GET /balloon/statistics). */
void virtio_balloon_set_target(struct virtio_balloon *b, uint32_t amount_mib)
{
	b->config.num_pages = amount_mib * BALLOON_PAGES_PER_MIB;
}

int virtio_balloon_set_interval(struct virtio_balloon *b, uint32_t s)
{
	if (!s)
		return -EINVAL;
	b->stats_interval_s = s;
	return 0;
}

void virtio_balloon_get(struct virtio_balloon *b, uint32_t *target_pages, uint32_t *actual_pages,
			struct balloon_stats *st)
{
	*target_pages = b->config.num_pages;
	*actual_pages = b->config.actual;
	if (st)
		*st = b->stats;
}

/* PUT /logger and /metrics name any path, "../../etc/passwd" too: the
 * fuzzer (root in CI) opens one scratch file in its own directory instead,
 * with the flags the VMM would use, whatever the path. */
static char scratch_dir[] = "/tmp/vmm-fuzz-http-XXXXXX";

static int scratch_open(const char *path, int flags, mode_t mode)
{
	char p[sizeof(scratch_dir) + 8];

	(void)path;
	snprintf(p, sizeof(p), "%s/sink", scratch_dir);
	return open(p, flags, mode);
}

static void scratch_remove(void)
{
	char p[sizeof(scratch_dir) + 8];

	snprintf(p, sizeof(p), "%s/sink", scratch_dir);
	unlink(p);
	rmdir(scratch_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Not a chdir: libFuzzer finds its corpus directories relative to
	 * the directory it was started in. */
	if (!mkdtemp(scratch_dir))
		__builtin_trap();
	atexit(scratch_remove);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fcapi api;
	static struct vm vm;
	static struct virtio_balloon balloon;
	static char out[FCAPI_REPLY_MAX], resp[FCAPI_REPLY_MAX + 512];
	const char *p = (const char *)data;
	struct http_request req;
	size_t len;
	int n, status;

	fcapi_init(&api, "fuzz");
	api.open_file = scratch_open;
	/* The first byte: no VM yet, or a running stand-in (paused or not). */
	if (size && data[0] < 0x20) {
		memset(&vm, 0, sizeof(vm));
		vm.nr_vcpus = 1;
		vm.paused = data[0] & 1;
		vm.cfg.mem_bytes = 128ull << 20;
		/* ... with a balloon (its statistics all reported) or not. */
		if (data[0] & 2) {
			memset(&balloon, 0, sizeof(balloon));
			memset(balloon.stats.valid, 1, sizeof(balloon.stats.valid));
			balloon.stats.val[0] = UINT64_MAX;
			vm.balloon = &balloon;
		}
		api.vm = &vm;
		p++;
		size--;
	}
	while (size) {
		n = http_parse_limit(p, size, &req, 4096);
		if (n < 0) {
			if (req.status < 400 || req.status > 599 || !req.why)
				__builtin_trap();
			http_fault(out, sizeof(out), req.why);
			break;
		}
		if (n == 0 || (size_t)n > size)
			break;
		status = fcapi_handle(&api, &req, out, sizeof(out), &len);
		if (status == 0) /* InstanceStart or a load: "fails" */
			status = fcapi_finish(&api, "fuzz", out, sizeof(out), &len);
		if (len >= sizeof(out) ||
		    http_response_hdr(resp, sizeof(resp), status, out, len, req.keep_alive,
				      api.deprecated ? "Deprecation: true\r\n" : NULL) == 0)
			__builtin_trap();
		p += n;
		size -= (size_t)n;
	}
	/* GET /vm/config of whatever was configured, then the files closed
	 * and the log back on stderr for the next input. */
	if (!fcapi_vm_config_json(&api, out, sizeof(out)))
		__builtin_trap();
	fcapi_close(&api);
	/* The MMDS store a PUT filled (the VMM frees it with the process;
	 * here the next input's fcapi_init would drop it). */
	mmds_destroy(&api.mmds);
	log_set_level(LOG_ERROR);
	return 0;
}
