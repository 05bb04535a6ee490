/* The Firecracker-compatible control API (docs/control-api.md,
 * docs/openapi.yaml): routes, request validation and the pre-boot
 * configuration they build. Pure apart from what a route does to a
 * running VM (pause, resume, snapshot): no sockets here (control.c carries
 * the bytes, http.c parses them), so unit tests reach every route.
 *
 * Two routes finish outside: InstanceStart and PUT /snapshot/load only
 * validate and set `pending`; the caller builds the VM and then answers
 * with fcapi_finish(). */
#ifndef VMM_FCAPI_H
#define VMM_FCAPI_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "vm.h"

#define FCAPI_MAX_NET VM_MAX_NETS
#define FCAPI_MAX_FS VM_MAX_FS
#define FCAPI_DRIVE_ID_MAX 20   /* the virtio-blk serial (GET_ID) is 20 bytes */
#define FCAPI_DEFAULT_MEM_MIB 128  /* Firecracker's default */
#define FCAPI_REPLY_MAX 4096

struct fcapi_drive {
	char id[FCAPI_DRIVE_ID_MAX + 1];
	char path[PATH_MAX];
	int root, ro;
	struct rl_limits rl;    /* rate_limiter */
};

struct fcapi_net {
	char id[64];
	char host_dev[16];      /* IFNAMSIZ */
	char mac[18];           /* "" if not given */
	struct rl_limits rx, tx;/* rx_rate_limiter, tx_rate_limiter */
};

struct fcapi_fs {
	char id[64];
	char tag[VIRTIO_FS_TAG_LEN];
	char path[PATH_MAX];
	int ro;
};

/* What the pre-boot PUTs (or a --config-file) built. */
struct fcapi_config {
	int has_boot;
	char kernel[PATH_MAX];
	char initrd[PATH_MAX];  /* "" if none */
	char boot_args[4096];   /* "" if not given */
	int has_boot_args;
	unsigned vcpus;
	unsigned mem_mib;
	int tmpl_set;
	enum cpu_template tmpl;
	unsigned nr_drives;
	struct fcapi_drive drives[VM_MAX_DISKS];
	unsigned nr_net;
	struct fcapi_net net[FCAPI_MAX_NET];
	int has_vsock;
	uint64_t cid;
	char uds[108];
	unsigned nr_fs;
	struct fcapi_fs fs[FCAPI_MAX_FS];
	int touched;            /* some boot resource was configured */
};

enum fcapi_pending { FCAPI_NONE, FCAPI_START, FCAPI_LOAD };

struct fcapi {
	struct fcapi_config cfg;
	struct vm *vm;          /* NULL until the VM exists */
	const char *id;         /* instance id (the sandbox's name) */
	enum fcapi_pending pending;
	char load_dir[PATH_MAX];/* FCAPI_LOAD: the snapshot directory */
	int load_resume;        /* FCAPI_LOAD: resume_vm */
};

/* Default configuration: 1 vCPU, 128 MiB, nothing else. */
void fcapi_init(struct fcapi *a, const char *id);

/* Handles one request. Returns the status with the body (JSON, possibly
 * empty) in out[0..*len), or 0 when the caller must act on a->pending
 * and answer later with fcapi_finish(). */
int fcapi_handle(struct fcapi *a, const struct http_request *req, char *out, size_t cap,
		 size_t *len);
/* The answer to a pending action: 204, or 400 with `fault` (NULL: 204).
 * Clears a->pending. */
int fcapi_finish(struct fcapi *a, const char *fault, char *out, size_t cap, size_t *len);

/* Applies a Firecracker --config-file ({"boot-source":..., "drives":[...],
 * "machine-config":..., "network-interfaces":[...], "vsock":..., plus
 * vmm's "fs":[...]}) through the same checks as the PUTs. 0, or -EINVAL
 * with why[] set. */
int fcapi_apply_config_file(struct fcapi *a, const char *text, size_t len, char *why, size_t n);

/* Fills cfg's kernel, initrd, cmdline, vCPUs, memory, template, disks,
 * network interfaces, shared directories and vsock from a->cfg (disk and
 * directory paths strdup'ed: blk_options_free, fs_options_free). Strings
 * point into a, which must outlive the VM. 0 or -errno (why set). */
int fcapi_vm_config(const struct fcapi *a, struct vm_config *cfg, char *why, size_t n);

#endif
