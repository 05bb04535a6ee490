/* The Firecracker API's observability and export side (fcapi.h): the
 * logger (PUT /logger, --log-path), metrics lines (PUT /metrics,
 * FlushMetrics, every 60 s) and GET /vm/config. */
#include "vmm/api/fcapi.h"
#include "vmm/api/fcapi_priv.h"
#include "vmm/base/log.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef VMM_SEMVER
#define VMM_SEMVER "0.0.0"
#endif

static uint64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static int open_file(const char *path, int flags, mode_t mode)
{
	return open(path, flags, mode);
}

/* A file or FIFO for log or metrics lines, as Firecracker opens them:
 * never blocking (a FIFO with no reader yet is opened read-write so the
 * open does not fail), appended to, created if missing (0600). */
static int open_sink(const struct fcapi *a, const char *path, char *why, size_t n, const char *field)
{
	struct stat st;
	int fd;

	if (path[0] != '/' && !path[0]) {
		snprintf(why, n, "'%s' must not be empty", field);
		return -EINVAL;
	}
	fd = (a->open_file ? a->open_file : open_file)(path, O_RDWR | O_APPEND | O_NONBLOCK | O_CREAT | O_CLOEXEC | O_NOCTTY,
						       0600);
	if (fd < 0) {
		int e = errno;

		snprintf(why, n, "Failed to open target file: %.200s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
		snprintf(why, n, "'%s' %.200s: not a regular file or FIFO", field, path);
		close(fd);
		return -EINVAL;
	}
	return fd;
}

static int level_parse(const char *s, enum log_level *l)
{
	/* Firecracker's names (its LevelFilter also takes them in any case);
	 * Trace is vmm's Debug, Off keeps only errors. */
	if (!strcasecmp(s, "Error") || !strcasecmp(s, "Off"))
		*l = LOG_ERROR;
	else if (!strcasecmp(s, "Warning") || !strcasecmp(s, "Warn"))
		*l = LOG_WARN;
	else if (!strcasecmp(s, "Info"))
		*l = LOG_INFO;
	else if (!strcasecmp(s, "Debug") || !strcasecmp(s, "Trace"))
		*l = LOG_DEBUG;
	else
		return -EINVAL;
	return 0;
}

int fcapi_set_logger(struct fcapi *a, const char *path, const char *level, int show_level, int show_origin,
		     char *why, size_t n)
{
	struct fcapi_logger *lg = &a->cfg.logger;
	struct log_sink sink;
	enum log_level lv = log_get_level();
	int fd = -1;

	if (level && level_parse(level, &lv)) {
		snprintf(why, n, "Invalid value for logger level: %.32s.Possible values: [Error, Warning, Info, Debug]",
			 level);
		return -EINVAL;
	}
	if (path && strlen(path) >= sizeof(lg->path)) {
		snprintf(why, n, "'log_path' is too long");
		return -EINVAL;
	}
	if (path && (fd = open_sink(a, path, why, n, "log_path")) < 0)
		return -EINVAL;
	if (path) {
		if (a->log_fd >= 0)
			close(a->log_fd);
		a->log_fd = fd;
		snprintf(lg->path, sizeof(lg->path), "%s", path);
	}
	if (level) {
		lg->level = lv;
		lg->level_set = 1;
		log_set_level(lv);
	}
	lg->show_level = show_level;
	lg->show_origin = show_origin;
	lg->set = 1;
	if (a->log_fd >= 0) {
		sink = (struct log_sink){ .fd = a->log_fd, .id = a->id, .show_level = show_level,
					  .show_origin = show_origin };
		log_set_sink(&sink);
	}
	return 0;
}

int fcapi_set_metrics(struct fcapi *a, const char *path, char *why, size_t n)
{
	int fd;

	if (a->metrics_fd >= 0) {
		/* Firecracker: the metrics system is initialized once. */
		snprintf(why, n, "Reinitialization of metrics not allowed.");
		return -EINVAL;
	}
	if (strlen(path) >= sizeof(a->cfg.metrics.path)) {
		snprintf(why, n, "'metrics_path' is too long");
		return -EINVAL;
	}
	fd = open_sink(a, path, why, n, "metrics_path");
	if (fd < 0)
		return -EINVAL;
	a->metrics_fd = fd;
	snprintf(a->cfg.metrics.path, sizeof(a->cfg.metrics.path), "%s", path);
	a->cfg.metrics.set = 1;
	a->metrics_next_ms = mono_ms() + FCAPI_METRICS_PERIOD_MS;
	return 0;
}

/* ---- metrics lines -------------------------------------------------------- */

#define D(f) ((int64_t)(a->n.f - a->n_last.f))

static void kv(struct json_writer *w, const char *k, int64_t v)
{
	jw_key(w, k);
	jw_int(w, v);
}

/* Device totals, read now (counters the device threads keep; a torn read
 * of a 64-bit counter cannot happen on x86-64). */
static void dev_totals(const struct vm *vm, struct fcapi_dev_totals *t)
{
	unsigned i;

	memset(t, 0, sizeof(*t));
	if (!vm)
		return;
	for (i = 0; i < vm->cfg.nr_disks && i < VM_MAX_DISKS; i++)
		if (vm->disks[i]) {
			t->blk_reqs += vm->disks[i]->reqs;
			t->blk_errors += vm->disks[i]->errors;
			t->blk_waits += vm->disks[i]->waits;
		}
	for (i = 0; i < vm->cfg.nr_nets && i < VM_MAX_NETS; i++)
		if (vm->nets[i]) {
			const struct net_stats *s = &vm->nets[i]->stats;

			t->rx_bytes += s->rx_bytes;
			t->rx_packets += s->rx_packets;
			t->rx_dropped += s->rx_dropped;
			t->tx_bytes += s->tx_bytes;
			t->tx_packets += s->tx_packets;
			t->tx_dropped += s->tx_dropped;
			t->tx_malformed += s->tx_malformed;
			t->net_waits += s->throttled;
		}
	if (vm->balloon) {
		const struct virtio_balloon *b = vm->balloon;

		t->bln_inflates = b->inflate_chains;
		t->bln_deflates = b->deflate_chains;
		t->bln_stats = b->stats.updates; /* read unlocked: one aligned word */
		t->bln_reports = b->report_chains;
		t->bln_reported = b->reported;
		t->bln_discard_fails = b->discard_fails;
	}
	if (vm->rng) {
		t->rng_reqs = vm->rng->reqs;
		t->rng_bytes = vm->rng->bytes;
		t->rng_fails = vm->rng->fails;
		t->rng_waits = vm->rng->waits;
	}
}

#define T(f) ((int64_t)(t.f - a->dev_last.f))

size_t fcapi_metrics_line(const struct fcapi *a, char *out, size_t cap, struct fcapi_dev_totals *now_totals)
{
	struct json_writer w;
	struct timespec now;
	struct fcapi_dev_totals t;

	clock_gettime(CLOCK_REALTIME, &now);
	dev_totals(a->vm, &t);
	jw_init(&w, out, cap);
	jw_obj(&w);
	kv(&w, "utc_timestamp_ms", (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
	jw_key(&w, "get_api_requests");
	jw_obj(&w);
	kv(&w, "instance_info_count", D(get_instance_info));
	kv(&w, "machine_cfg_count", D(get_machine_cfg));
	kv(&w, "vmm_version_count", D(get_version));
	kv(&w, "vm_config_count", D(get_vm_config)); /* vmm's: Firecracker counts none */
	kv(&w, "mmds_count", D(get_mmds));
	jw_obj_end(&w);
	jw_key(&w, "put_api_requests");
	jw_obj(&w);
	kv(&w, "actions_count", D(put_actions));
	kv(&w, "actions_fails", D(put_actions_fails));
	kv(&w, "boot_source_count", D(put_boot_source));
	kv(&w, "boot_source_fails", D(put_boot_source_fails));
	kv(&w, "drive_count", D(put_drive));
	kv(&w, "drive_fails", D(put_drive_fails));
	kv(&w, "logger_count", D(put_logger));
	kv(&w, "logger_fails", D(put_logger_fails));
	kv(&w, "machine_cfg_count", D(put_machine_cfg));
	kv(&w, "machine_cfg_fails", D(put_machine_cfg_fails));
	kv(&w, "metrics_count", D(put_metrics));
	kv(&w, "metrics_fails", D(put_metrics_fails));
	kv(&w, "network_count", D(put_network));
	kv(&w, "network_fails", D(put_network_fails));
	kv(&w, "vsock_count", D(put_vsock));
	kv(&w, "vsock_fails", D(put_vsock_fails));
	kv(&w, "mmds_count", D(put_mmds));
	kv(&w, "mmds_fails", D(put_mmds_fails));
	jw_obj_end(&w);
	jw_key(&w, "patch_api_requests");
	jw_obj(&w);
	kv(&w, "drive_count", D(patch_drive));
	kv(&w, "drive_fails", D(patch_drive_fails));
	kv(&w, "network_count", D(patch_network));
	kv(&w, "network_fails", D(patch_network_fails));
	kv(&w, "machine_cfg_count", D(patch_machine_cfg));
	kv(&w, "machine_cfg_fails", D(patch_machine_cfg_fails));
	kv(&w, "mmds_count", D(patch_mmds));
	kv(&w, "mmds_fails", D(patch_mmds_fails));
	jw_obj_end(&w);
	jw_key(&w, "deprecated_api");
	jw_obj(&w);
	kv(&w, "deprecated_http_api_calls", D(deprecated_calls));
	jw_obj_end(&w);
	/* Devices: what happened since the last line, under Firecracker's
	 * names where a vmm counter means the same; vmm_* are vmm's own. */
	jw_key(&w, "block");
	jw_obj(&w);
	kv(&w, "update_count", D(block_update));
	kv(&w, "update_fails", D(block_update_fails));
	kv(&w, "execute_fails", T(blk_errors));
	kv(&w, "rate_limiter_throttled_events", T(blk_waits));
	kv(&w, "vmm_requests_count", T(blk_reqs));
	jw_obj_end(&w);
	jw_key(&w, "net");
	jw_obj(&w);
	kv(&w, "rx_bytes_count", T(rx_bytes));
	kv(&w, "rx_packets_count", T(rx_packets));
	kv(&w, "tx_bytes_count", T(tx_bytes));
	kv(&w, "tx_packets_count", T(tx_packets));
	kv(&w, "tx_malformed_frames", T(tx_malformed));
	kv(&w, "vmm_rx_dropped_count", T(rx_dropped));
	kv(&w, "vmm_tx_dropped_count", T(tx_dropped));
	kv(&w, "vmm_rate_limiter_throttled_events", T(net_waits));
	jw_obj_end(&w);
	/* Firecracker's balloon and entropy blocks, every field of them
	 * (devices/virtio/{balloon,rng}/metrics.rs); those vmm has no event
	 * for stay 0: activation failures (the device needs a reset
	 * instead), free page hinting (not offered). */
	jw_key(&w, "balloon");
	jw_obj(&w);
	kv(&w, "activate_fails", 0);
	kv(&w, "inflate_count", T(bln_inflates));
	kv(&w, "stats_updates_count", T(bln_stats));
	kv(&w, "stats_update_fails", 0);
	kv(&w, "deflate_count", T(bln_deflates));
	kv(&w, "event_fails", 0);
	kv(&w, "free_page_report_count", T(bln_reports));
	kv(&w, "free_page_report_freed", T(bln_reported) * GM_PAGE_SIZE);
	kv(&w, "free_page_report_fails", T(bln_discard_fails));
	kv(&w, "free_page_hint_count", 0);
	kv(&w, "free_page_hint_freed", 0);
	kv(&w, "free_page_hint_fails", 0);
	jw_obj_end(&w);
	jw_key(&w, "entropy");
	jw_obj(&w);
	kv(&w, "activate_fails", 0);
	kv(&w, "entropy_event_fails", 0);
	kv(&w, "entropy_event_count", T(rng_reqs));
	kv(&w, "entropy_bytes", T(rng_bytes));
	kv(&w, "host_rng_fails", T(rng_fails));
	kv(&w, "entropy_rate_limiter_throttled", T(rng_waits));
	kv(&w, "rate_limiter_event_count", T(rng_waits));
	jw_obj_end(&w);
	jw_key(&w, "vmm");
	jw_obj(&w);
	kv(&w, "snapshot_create_count", D(snapshot_create));
	kv(&w, "snapshot_load_count", D(snapshot_load));
	kv(&w, "pause_count", D(pause));
	kv(&w, "resume_count", D(resume));
	jw_obj_end(&w);
	jw_obj_end(&w);
	if (!jw_done(&w) || w.len + 1 >= cap)
		return 0;
	*now_totals = t;
	out[w.len] = '\n';
	return w.len + 1;
}

int fcapi_flush_metrics(struct fcapi *a)
{
	char line[4096];
	struct fcapi_dev_totals t;
	size_t n;
	ssize_t wr;

	if (a->metrics_fd < 0)
		return -ENOENT;
	n = fcapi_metrics_line(a, line, sizeof(line), &t);
	if (!n)
		return -E2BIG;
	a->n_last = a->n;
	a->dev_last = t;
	a->metrics_next_ms = mono_ms() + FCAPI_METRICS_PERIOD_MS;
	/* One write (O_APPEND); a FIFO nobody drains drops the line. */
	wr = write(a->metrics_fd, line, n);
	if (wr < 0)
		return -errno;
	return 0;
}

int fcapi_metrics_tick(struct fcapi *a, uint64_t now_ms)
{
	if (a->metrics_fd < 0)
		return -1;
	if (now_ms >= a->metrics_next_ms) {
		(void)fcapi_flush_metrics(a);
		a->metrics_next_ms = now_ms + FCAPI_METRICS_PERIOD_MS;
	}
	return (int)(a->metrics_next_ms - now_ms);
}

/* ---- GET /vm/config ------------------------------------------------------- */

void fcapi_limiter_json(struct json_writer *w, const char *key, const struct rl_limits *l)
{
	/* Back to Firecracker's buckets: size tokens per 1000 ms. */
	if (!l->bytes_per_s && !l->ops_per_s)
		return;
	jw_key(w, key);
	jw_obj(w);
	if (l->bytes_per_s) {
		jw_key(w, "bandwidth");
		jw_obj(w);
		kv(w, "size", (int64_t)l->bytes_per_s);
		kv(w, "refill_time", 1000);
		jw_obj_end(w);
	}
	if (l->ops_per_s) {
		jw_key(w, "ops");
		jw_obj(w);
		kv(w, "size", (int64_t)l->ops_per_s);
		kv(w, "refill_time", 1000);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

static const char *level_name(enum log_level l)
{
	return l == LOG_ERROR ? "Error" : l == LOG_WARN ? "Warning" : l == LOG_INFO ? "Info" : "Debug";
}

size_t fcapi_vm_config_json(const struct fcapi *a, char *out, size_t cap)
{
	const struct fcapi_config *c = &a->cfg;
	const struct vm *vm = a->vm;
	struct json_writer w;
	unsigned i;

	jw_init(&w, out, cap);
	jw_obj(&w);
	/* A VM loaded from a snapshot has no boot-source (Firecracker: empty). */
	if (c->has_boot) {
		jw_key(&w, "boot-source");
		jw_obj(&w);
		jw_key(&w, "kernel_image_path");
		jw_str(&w, c->kernel);
		if (c->initrd[0]) {
			jw_key(&w, "initrd_path");
			jw_str(&w, c->initrd);
		}
		if (c->has_boot_args) {
			jw_key(&w, "boot_args");
			jw_str(&w, c->boot_args);
		}
		jw_obj_end(&w);
	}
	jw_key(&w, "drives");
	jw_arr(&w);
	for (i = 0; i < c->nr_drives; i++) {
		const struct fcapi_drive *d = &c->drives[i];
		struct rl_limits rl = d->rl;
		unsigned k;

		/* A running drive's path and limits are what PATCH made them. */
		for (k = 0; vm && k < vm->cfg.nr_disks && k < VM_MAX_DISKS; k++)
			if (vm->disks[k] && !strncmp(vm->disks[k]->serial, d->id, VIRTIO_BLK_ID_BYTES))
				virtio_blk_limits(vm->disks[k], &rl);
		jw_obj(&w);
		jw_key(&w, "drive_id");
		jw_str(&w, d->id);
		jw_key(&w, "path_on_host");
		jw_str(&w, d->path);
		jw_key(&w, "is_root_device");
		jw_bool(&w, d->root);
		jw_key(&w, "is_read_only");
		jw_bool(&w, d->ro);
		jw_key(&w, "cache_type");
		jw_str(&w, "Unsafe");
		jw_key(&w, "io_engine");
		jw_str(&w, "Sync");
		fcapi_limiter_json(&w, "rate_limiter", &rl);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_key(&w, "machine-config");
	jw_obj(&w);
	kv(&w, "vcpu_count", vm ? vm->nr_vcpus : c->vcpus);
	kv(&w, "mem_size_mib", vm ? (int64_t)(vm->cfg.mem_bytes >> 20) : c->mem_mib);
	jw_key(&w, "smt");
	jw_bool(&w, c->smt);
	jw_key(&w, "track_dirty_pages");
	jw_bool(&w, c->track_dirty_pages);
	jw_key(&w, "huge_pages");
	jw_str(&w, "None");
	jw_obj_end(&w);
	jw_key(&w, "network-interfaces");
	jw_arr(&w);
	for (i = 0; i < c->nr_net; i++) {
		struct rl_limits rx = c->net[i].rx, tx = c->net[i].tx;

		if (vm && i < vm->cfg.nr_nets && vm->nets[i])
			virtio_net_limits(vm->nets[i], &rx, &tx);
		jw_obj(&w);
		jw_key(&w, "iface_id");
		jw_str(&w, c->net[i].id);
		jw_key(&w, "host_dev_name");
		jw_str(&w, c->net[i].host_dev);
		if (c->net[i].mac[0]) {
			jw_key(&w, "guest_mac");
			jw_str(&w, c->net[i].mac);
		}
		fcapi_limiter_json(&w, "rx_rate_limiter", &rx);
		fcapi_limiter_json(&w, "tx_rate_limiter", &tx);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	if (c->has_vsock) {
		jw_key(&w, "vsock");
		jw_obj(&w);
		kv(&w, "guest_cid", (int64_t)c->cid);
		jw_key(&w, "uds_path");
		jw_str(&w, c->uds);
		jw_obj_end(&w);
	}
	if (c->logger.set) {
		jw_key(&w, "logger");
		jw_obj(&w);
		if (c->logger.path[0]) {
			jw_key(&w, "log_path");
			jw_str(&w, c->logger.path);
		}
		jw_key(&w, "level");
		jw_str(&w, level_name(c->logger.level_set ? c->logger.level : log_get_level()));
		jw_key(&w, "show_level");
		jw_bool(&w, c->logger.show_level);
		jw_key(&w, "show_log_origin");
		jw_bool(&w, c->logger.show_origin);
		if (c->logger.module[0]) {
			jw_key(&w, "module");
			jw_str(&w, c->logger.module);
		}
		jw_obj_end(&w);
	}
	if (c->metrics.set) {
		jw_key(&w, "metrics");
		jw_obj(&w);
		jw_key(&w, "metrics_path");
		jw_str(&w, c->metrics.path);
		jw_obj_end(&w);
	}
	fcapi_dev_config_json(a, &w);
	/* vmm's own section (not in Firecracker's schema, which allows more
	 * properties): the shared directories, as --config-file takes them. */
	if (c->nr_fs) {
		jw_key(&w, "fs");
		jw_arr(&w);
		for (i = 0; i < c->nr_fs; i++) {
			jw_obj(&w);
			jw_key(&w, "fs_id");
			jw_str(&w, c->fs[i].id);
			jw_key(&w, "tag");
			jw_str(&w, c->fs[i].tag);
			if (c->fs[i].drive[0]) { /* a config file of this checks the drive again */
				jw_key(&w, "drive");
				jw_str(&w, c->fs[i].drive);
				jw_key(&w, "mount_point");
				jw_str(&w, c->fs[i].at);
			} else {
				jw_key(&w, "path_on_host");
				jw_str(&w, c->fs[i].path);
			}
			jw_key(&w, "read_only");
			jw_bool(&w, c->fs[i].ro);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
	}
	jw_obj_end(&w);
	return jw_done(&w) ? w.len : 0;
}

const char *fcapi_semver(void)
{
	return VMM_SEMVER;
}

/* ---- PUT /logger and /metrics ---------------------------------------------- */

int fcapi_put_logger(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = {
		{ "log_path", F_STR, 0, NULL },
		{ "level", F_STR, 0, NULL },
		{ "show_level", F_BOOL, 0, NULL },
		{ "show_log_origin", F_BOOL, 0, NULL },
		{ "module", F_STR, 0, NULL },
	};
	const char *path = fcapi_get_str(b, "log_path"), *mod = fcapi_get_str(b, "module");
	char pbuf[PATH_MAX];
	int r;

	if ((r = fcapi_check_fields(b, f, 5, w)))
		return r;
	/* The log sink is process configuration set before VM threads
	 * start (log.h); Firecracker too takes a logger only before boot. */
	if ((r = fcapi_pre_boot(a, w)))
		return r;
	if (path && (r = fcapi_abs_path(pbuf, sizeof(pbuf), path, "log_path", w)))
		return r;
	if (mod && strlen(mod) >= sizeof(a->cfg.logger.module))
		return fcapi_fail(w, "'module' is too long");
	if (fcapi_set_logger(a, path ? pbuf : NULL, fcapi_get_str(b, "level"), fcapi_get_bool(b, "show_level", 0),
			     fcapi_get_bool(b, "show_log_origin", 0), w->buf, w->len))
		return -EINVAL;
	snprintf(a->cfg.logger.module, sizeof(a->cfg.logger.module), "%s", mod ? mod : "");
	return 0;
}

int fcapi_put_metrics(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = {
		{ "metrics_path", F_STR, 1, NULL },
		{ "emit_id", F_BOOL, 0, NULL },
		{ "properties", F_OBJ, 0, NULL },
	};
	char pbuf[PATH_MAX];
	int r;

	if ((r = fcapi_check_fields(b, f, 3, w)) || (r = fcapi_pre_boot(a, w)))
		return r;
	if (fcapi_get_bool(b, "emit_id", 0) || (fcapi_has(b, "properties") && json_get(b, "properties")->u.kids.first))
		return fcapi_fail(w, "'emit_id' and 'properties' are not supported");
	if ((r = fcapi_abs_path(pbuf, sizeof(pbuf), fcapi_get_str(b, "metrics_path"), "metrics_path", w)))
		return r;
	if (fcapi_set_metrics(a, pbuf, w->buf, w->len))
		return -EINVAL;
	return 0;
}
