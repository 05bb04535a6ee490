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
#include <sys/types.h>

#include "devices/mmds.h"
#include "vmm/cputmpl.h"
#include "vmm/base/http.h"
#include "vmm/base/log.h"
#include "vmm/vm.h"

#define FCAPI_MAX_NET VM_MAX_NETS
#define FCAPI_MAX_FS VM_MAX_FS
#define FCAPI_DRIVE_ID_MAX 20   /* the virtio-blk serial (GET_ID) is 20 bytes */
#define FCAPI_DEFAULT_MEM_MIB 128  /* Firecracker's default */
#define FCAPI_REPLY_MAX 65536 /* GET /vm/config with every drive and path */
/* Beside a snapshot made through the API: its /vm/config (the interfaces'
 * ids, for network_overrides on load). */
#define FCAPI_SNAP_CONFIG "vm-config.json"

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
	int mmds;               /* named in /mmds/config's network_interfaces */
};

struct fcapi_fs {
	char id[64];
	char tag[VIRTIO_FS_TAG_LEN];
	char path[PATH_MAX];
	int ro;
	/* A named drive (PUT /fs/ID {"drive": NAME}; docs/cli.md, "Drives"):
	 * "" for a host directory. The resolver fills path, limit, usage
	 * and at (mount_point, else its default). */
	char drive[VIRTIO_FS_TAG_LEN];
	char at[128];           /* where guest-init mounts it, "" : /mnt/TAG */
	uint64_t limit;         /* the drive's size limit in bytes, 0: none */
	char usage[PATH_MAX];   /* the drive's shared byte count (with limit) */
};

/* Resolves a named drive for this sandbox (the launcher's: vmm/api knows
 * no drive store): checks that the drive allows it (fs->ro: read-only)
 * and fills fs's path, limit, usage and at. 0, or -errno with why (the
 * same message `vmm run --drive` gives). */
typedef int fcapi_drive_fn(void *ctx, struct fcapi_fs *fs, char *why, size_t len);

/* PUT /logger (or --log-path ...): where vmm's log lines go. */
struct fcapi_logger {
	int set;
	char path[PATH_MAX];    /* "" : stderr, as before */
	enum log_level level;
	int level_set;
	int show_level, show_origin;
	char module[64];        /* accepted, recorded; vmm's log has no modules */
};

/* PUT /metrics: JSON lines to a file or FIFO. */
struct fcapi_metrics_cfg {
	int set;
	char path[PATH_MAX];
};

/* Counters for the metrics lines (Firecracker's names where they apply);
 * the API ones are this module's own, the device ones are read from the
 * VM when a line is written. Each line carries what happened since the
 * previous one, as Firecracker's do. */
struct fcapi_counters {
	uint64_t get_instance_info, get_machine_cfg, get_vm_config, get_version;
	uint64_t put_actions, put_actions_fails, put_boot_source, put_boot_source_fails;
	uint64_t put_drive, put_drive_fails, put_logger, put_logger_fails;
	uint64_t put_machine_cfg, put_machine_cfg_fails, put_metrics, put_metrics_fails;
	uint64_t put_network, put_network_fails, put_vsock, put_vsock_fails;
	uint64_t patch_drive, patch_drive_fails, patch_network, patch_network_fails;
	uint64_t patch_machine_cfg, patch_machine_cfg_fails;
	uint64_t snapshot_create, snapshot_load, pause, resume;
	uint64_t block_update, block_update_fails, net_update, net_update_fails;
	uint64_t deprecated_calls;
	uint64_t get_mmds, put_mmds, put_mmds_fails, patch_mmds, patch_mmds_fails;
};

struct fcapi_dev_totals {
	uint64_t blk_reqs, blk_errors, blk_waits;
	uint64_t rx_bytes, rx_packets, rx_dropped, tx_bytes, tx_packets, tx_dropped, tx_malformed, net_waits;
	uint64_t bln_inflates, bln_deflates, bln_stats, bln_reports, bln_reported, bln_discard_fails;
	uint64_t rng_reqs, rng_bytes, rng_fails, rng_waits;
};

/* PUT /snapshot/load's network_overrides: the TAP for an interface. */
struct fcapi_net_override {
	char iface_id[64];
	char host_dev[16];
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
	int smt;                /* recorded (vmm's CPUID topology does not change) */
	int track_dirty_pages;  /* recorded; Diff snapshots are refused */
	struct fcapi_logger logger;
	struct fcapi_metrics_cfg metrics;
	int has_entropy;        /* PUT /entropy */
	struct rl_limits entropy_rl;
	int has_balloon;        /* PUT /balloon */
	struct balloon_options balloon;
	int has_mmds;           /* PUT /mmds/config */
	int has_serial;         /* PUT /serial with serial_out_path */
	char serial_out[PATH_MAX]; /* the guest's serial output goes there */
	int has_cpu_tmpl;       /* PUT /cpu-config, or a static template */
	struct cpu_tmpl cpu_tmpl;
	char static_tmpl[8];    /* "C3", "T2"...: machine-config's cpu_template; "" if none */
	int static_amd;         /* that template is for AMD hosts (else Intel) */
};

enum fcapi_pending { FCAPI_NONE, FCAPI_START, FCAPI_LOAD };

struct fcapi {
	struct fcapi_config cfg;
	struct vm *vm;          /* NULL until the VM exists */
	const char *id;         /* instance id (the sandbox's name) */
	enum fcapi_pending pending;
	char load_dir[PATH_MAX];/* FCAPI_LOAD: the snapshot directory */
	int load_resume;        /* FCAPI_LOAD: resume_vm */
	int load_failed;        /* a well-formed, allowed /snapshot/load was refused:
				 * Firecracker exits after answering (vmm serve does) */
	int load_clock_realtime;/* FCAPI_LOAD: clock_realtime (recorded) */
	unsigned nr_load_net;   /* FCAPI_LOAD: network_overrides */
	struct fcapi_net_override load_net[FCAPI_MAX_NET];
	char load_vsock_uds[108];/* FCAPI_LOAD: vsock_override.uds_path, "" if none */
	char load_uffd[108];    /* FCAPI_LOAD: mem_backend Uffd's backend_path (the
				   page-fault handler's socket, vmm/base/uffd.h), "" for File */
	int deprecated;         /* the last request used a deprecated field:
				   answer with "Deprecation: true" */
	int log_fd, metrics_fd; /* -1: none (PUT /logger, PUT /metrics) */
	/* How the logger's and metrics' files are opened: open(2) unless set
	 * (the fuzzer opens one scratch file whatever path a request names,
	 * so a fuzzed "../../etc/x" cannot append to a host file). */
	int (*open_file)(const char *path, int flags, mode_t mode);
	uint64_t metrics_next_ms;/* CLOCK_MONOTONIC ms of the next periodic line */
	struct fcapi_counters n, n_last; /* n_last: as of the last line */
	struct fcapi_dev_totals dev_last;
	struct mmds mmds;       /* the metadata store (PUT /mmds; devices/mmds.h) */
	fcapi_drive_fn *drive_resolve; /* PUT /fs's "drive" (NULL: refused) */
	void *drive_ctx;
};

#define FCAPI_METRICS_PERIOD_MS 60000

/* Default configuration: 1 vCPU, 128 MiB, nothing else. */
void fcapi_init(struct fcapi *a, const char *id);
/* The same on the heap (calloc), for fcapi_close and free. NULL: no memory. */
struct fcapi *fcapi_new(const char *id);
/* Closes the logger and metrics files (the log goes back to stderr). */
void fcapi_close(struct fcapi *a);

/* Writes one metrics line now (FlushMetrics, the periodic timer, exit).
 * 0, -ENOENT if metrics are not configured, or -errno. */
int fcapi_flush_metrics(struct fcapi *a);
/* PUT /metrics: opens the file or FIFO (once). 0 or -EINVAL (why). */
int fcapi_set_metrics(struct fcapi *a, const char *path, char *why, size_t n);
/* One metrics line (JSON, newline-ended) into out; *totals gets the device
 * totals it was computed against. Its length, 0 if it did not fit. */
size_t fcapi_metrics_line(const struct fcapi *a, char *out, size_t cap, struct fcapi_dev_totals *totals);
/* The periodic line, if due (now_ms: CLOCK_MONOTONIC). Returns the ms until
 * the next one is due, or -1 without metrics. */
int fcapi_metrics_tick(struct fcapi *a, uint64_t now_ms);

/* The logger from the command line (--log-path, --level, --show-level,
 * --show-log-origin): the same checks as PUT /logger. 0 or -EINVAL (why). */
int fcapi_set_logger(struct fcapi *a, const char *path, const char *level, int show_level,
		     int show_origin, char *why, size_t n);

/* GET /vm/config's body: the configuration in --config-file's shape.
 * Its length, 0 if it did not fit. */
size_t fcapi_vm_config_json(const struct fcapi *a, char *out, size_t cap);

/* The semantic version Firecracker clients parse ("1.2.3"). */
const char *fcapi_semver(void);

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
