/* The Firecracker API's machine routes (fcapi_priv.h): PUT /boot-source,
 * PUT and PATCH /machine-config (and its GET), PUT /actions, PATCH /vm;
 * and the VM's configuration built from what the API stored
 * (fcapi_vm_config). */
#include "vmm/api/fcapi.h"
#include "vmm/api/fcapi_priv.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_BOOT_ARGS "console=ttyS0 reboot=k panic=-1"

int fcapi_put_boot_source(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = {
		{ "kernel_image_path", F_STR, 1, NULL },
		{ "boot_args", F_STR, 0, NULL },
		{ "initrd_path", F_STR, 0, NULL },
	};
	struct fcapi_config *c = &a->cfg;
	const char *k, *i, *args;
	char kbuf[PATH_MAX], ibuf[PATH_MAX];
	int r;

	if ((r = fcapi_check_fields(b, f, 3, w)) || (r = fcapi_pre_boot(a, w)))
		return r;
	k = fcapi_get_str(b, "kernel_image_path");
	i = fcapi_get_str(b, "initrd_path");
	args = fcapi_get_str(b, "boot_args");
	if ((r = fcapi_abs_path(kbuf, sizeof(kbuf), k, "kernel_image_path", w)) ||
	    (i && (r = fcapi_abs_path(ibuf, sizeof(ibuf), i, "initrd_path", w))))
		return r;
	k = kbuf;
	i = i ? ibuf : NULL;
	/* Firecracker opens both here and answers in its words
	 * (BootSourceConfigError, an io::Error written as Rust does). */
	if (access(k, R_OK) < 0)
		return fcapi_fail(w, "Boot source error: The kernel file cannot be opened: %s (os error %d)", strerror(errno),
				  errno);
	if (i && access(i, R_OK) < 0)
		return fcapi_fail(w, "Boot source error: The initrd file cannot be opened due to invalid path or invalid "
				  "permissions. %s (os error %d)", strerror(errno), errno);
	if ((r = fcapi_readable_file(k, "kernel_image_path", 0, w)) || (i && (r = fcapi_readable_file(i, "initrd_path", 0, w))))
		return r;
	if (strlen(k) >= sizeof(c->kernel) || (i && strlen(i) >= sizeof(c->initrd)))
		return fcapi_fail(w, "path too long");
	if (args && strlen(args) > 2048)
		return fcapi_fail(w, "'boot_args' is too long (at most 2048 bytes)");
	snprintf(c->kernel, sizeof(c->kernel), "%s", k);
	snprintf(c->initrd, sizeof(c->initrd), "%s", i ? i : "");
	snprintf(c->boot_args, sizeof(c->boot_args), "%s", args ? args : "");
	c->has_boot_args = args != NULL;
	c->has_boot = 1;
	c->touched = 1;
	return 0;
}

/* cpu_template: Firecracker's static templates (C3, T2, T2S, T2CL, T2A:
 * the custom template each stands for, in the slot PUT /cpu-config uses,
 * as in Firecracker), or vmm's own host and safe. */
static int set_cpu_template(struct fcapi_config *c, const struct json *v, struct why *w)
{
	const char *t = v->u.str.s;
	enum cpu_template tmpl = CPU_TEMPLATE_HOST;
	struct cpu_tmpl *st;
	int amd = 0, is_static;

	st = malloc(sizeof(*st));
	if (!st)
		return fcapi_fail(w, "out of memory");
	is_static = cpu_tmpl_static(t, st, &amd) == 0;
	if (!is_static && strcmp(t, "None") && cpu_template_parse(t, &tmpl)) {
		free(st);
		return fcapi_deser_fail(w, v->end, "unknown variant `%.32s`, expected one of `C3`, `T2`, `T2S`, `None`, "
					"`T2CL`, `T2A` (or vmm's own `host`, `safe`)", t);
	}
	/* One template at a time: this one replaces a static one. */
	if (c->static_tmpl[0] || is_static) {
		c->has_cpu_tmpl = is_static;
		c->static_tmpl[0] = '\0';
	}
	if (is_static) {
		c->cpu_tmpl = *st;
		c->static_amd = amd;
		snprintf(c->static_tmpl, sizeof(c->static_tmpl), "%s", t);
	}
	free(st);
	c->tmpl_set = !is_static && strcmp(t, "None");
	c->tmpl = c->tmpl_set ? tmpl : CPU_TEMPLATE_HOST;
	return 0;
}

int fcapi_put_machine_config(struct fcapi *a, const struct json *b, int patch, struct why *w)
{
	/* Firecracker's MachineConfig, in its order and Rust types. */
	const struct field f[] = {
		{ "vcpu_count", F_UINT, !patch, "u8" },
		{ "mem_size_mib", F_UINT, !patch, "usize" },
		{ "smt", F_BOOL, 0, NULL },
		{ "cpu_template", F_STR, 0, NULL },
		{ "track_dirty_pages", F_BOOL, 0, NULL },
		{ "huge_pages", F_STR, 0, NULL },
	};
	struct fcapi_config *c = &a->cfg;
	const char *t = fcapi_get_str(b, "cpu_template"), *hp = fcapi_get_str(b, "huge_pages");
	int r;

	if ((r = fcapi_check_fields(b, f, 6, w)) || (r = fcapi_pre_boot(a, w)))
		return r;
	if (patch && !fcapi_has(b, "vcpu_count") && !fcapi_has(b, "mem_size_mib") && !fcapi_has(b, "smt") &&
	    !fcapi_has(b, "track_dirty_pages") && !fcapi_has(b, "cpu_template") && !fcapi_has(b, "huge_pages"))
		return fcapi_fail(w, "Empty PATCH request.");
	/* Firecracker's words (MachineConfigError) for its own limits. */
	if (fcapi_has(b, "mem_size_mib") && fcapi_get_uint(b, "mem_size_mib") == 0)
		return fcapi_fail(w, "The memory size (MiB) is either 0, or not a multiple of the configured page size.");
	if (fcapi_has(b, "mem_size_mib") &&
	    (fcapi_get_uint(b, "mem_size_mib") < VM_MIN_MEM_MIB || fcapi_get_uint(b, "mem_size_mib") > (1u << 20)))
		return fcapi_fail(w, "'mem_size_mib' must be from %d to %u", VM_MIN_MEM_MIB, 1u << 20);
	/* Firecracker's rule: 1 to the maximum, and with SMT 1 or an even
	 * number of vCPUs. */
	if ((fcapi_has(b, "vcpu_count") &&
	     (fcapi_get_uint(b, "vcpu_count") < 1 || fcapi_get_uint(b, "vcpu_count") > VM_MAX_VCPUS)) ||
	    ((fcapi_has(b, "smt") ? fcapi_get_bool(b, "smt", 0) : c->smt) &&
	     (fcapi_has(b, "vcpu_count") ? fcapi_get_uint(b, "vcpu_count") : c->vcpus) > 1 &&
	     (fcapi_has(b, "vcpu_count") ? fcapi_get_uint(b, "vcpu_count") : c->vcpus) % 2))
		return fcapi_fail(w, "The number of vCPUs must be greater than 0, less than %d and must be 1 or an even "
			    "number if SMT is enabled.", VM_MAX_VCPUS + 1);
	if (hp && strcmp(hp, "None"))
		return fcapi_fail(w, "'huge_pages' %.32s is not supported: only None", hp);
	if (t && (r = set_cpu_template(c, json_get(b, "cpu_template"), w)))
		return r;
	if (fcapi_has(b, "vcpu_count"))
		c->vcpus = (unsigned)fcapi_get_uint(b, "vcpu_count");
	if (fcapi_has(b, "mem_size_mib"))
		c->mem_mib = (unsigned)fcapi_get_uint(b, "mem_size_mib");
	if (t)
		a->deprecated = 1; /* Firecracker: cpu_template is deprecated */
	/* PUT resets what it does not give to the defaults, PATCH keeps it. */
	if (fcapi_has(b, "smt") || !patch)
		c->smt = fcapi_get_bool(b, "smt", 0);
	if (fcapi_has(b, "track_dirty_pages") || !patch)
		c->track_dirty_pages = fcapi_get_bool(b, "track_dirty_pages", 0);
	c->touched = 1;
	return 0;
}

size_t fcapi_get_machine_config(const struct fcapi *a, char *out, size_t cap)
{
	struct json_writer jw;
	unsigned vcpus = a->vm ? a->vm->nr_vcpus : a->cfg.vcpus;
	uint64_t mib = a->vm ? a->vm->cfg.mem_bytes >> 20 : a->cfg.mem_mib;

	jw_init(&jw, out, cap);
	jw_obj(&jw);
	jw_key(&jw, "vcpu_count");
	jw_int(&jw, vcpus);
	jw_key(&jw, "mem_size_mib");
	jw_int(&jw, (int64_t)mib);
	jw_key(&jw, "smt");
	jw_bool(&jw, a->cfg.smt);
	jw_key(&jw, "track_dirty_pages");
	jw_bool(&jw, a->cfg.track_dirty_pages);
	jw_key(&jw, "huge_pages");
	jw_str(&jw, "None");
	/* cpu_template only for Firecracker's static ones: vmm's own (host,
	 * safe) are not in its enum, and Firecracker leaves it out when none
	 * (or a custom one) is set. */
	if (a->cfg.static_tmpl[0]) {
		jw_key(&jw, "cpu_template");
		jw_str(&jw, a->cfg.static_tmpl);
	}
	jw_obj_end(&jw);
	return jw_done(&jw) ? jw.len : 0;
}

/* ---- actions and the running VM ------------------------------------------ */

int fcapi_put_actions(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = { { "action_type", F_STR, 1, NULL } };
	const char *t;
	int r;

	if ((r = fcapi_check_fields(b, f, 1, w)))
		return r;
	t = fcapi_get_str(b, "action_type");
	if (!strcmp(t, "InstanceStart")) {
		if ((r = fcapi_pre_boot(a, w)))
			return r;
		if (!a->cfg.has_boot)
			return fcapi_fail(w, "Cannot start microvm without kernel configuration (PUT /boot-source first)");
		a->pending = FCAPI_START;
		return 0;
	}
	if (!strcmp(t, "SendCtrlAltDel")) {
		if (!a->vm)
			return fcapi_fail(w, MSG_BEFORE_START);
		/* The i8042 keyboard if the guest drives it, else guest-init
		 * through the sandbox API (vm_ctrl_alt_del). */
		if (vm_ctrl_alt_del(a->vm))
			return fcapi_fail(w, "SendCtrlAltDel: the guest has no i8042 driver and this VM no vsock device "
				    "for guest-init");
		return 0;
	}
	if (!strcmp(t, "FlushMetrics")) {
		/* Firecracker answers 204 whether or not metrics are set up. */
		r = fcapi_flush_metrics(a);
		if (r && r != -ENOENT)
			return fcapi_fail(w, "Failed to write metrics: %s", strerror(-r));
		return 0;
	}
	return fcapi_fail(w, "unknown 'action_type' %.32s: InstanceStart, SendCtrlAltDel or FlushMetrics", t);
}

int fcapi_patch_vm(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = { { "state", F_STR, 1, NULL } };
	const char *s;
	int r;

	if ((r = fcapi_check_fields(b, f, 1, w)))
		return r;
	s = fcapi_get_str(b, "state");
	if (strcmp(s, "Paused") && strcmp(s, "Resumed"))
		return fcapi_fail(w, "'state' must be Paused or Resumed");
	if (!a->vm)
		return fcapi_fail(w, MSG_BEFORE_START);
	if (!strcmp(s, "Resumed")) {
		vm_resume(a->vm);
		return 0;
	}
	r = vm_pause(a->vm);
	if (r == -ETIMEDOUT)
		return fcapi_fail(w, "a vCPU did not stop within 10 s (a stalled console?); the VM runs on");
	if (r)
		return fcapi_fail(w, "the VM is stopping");
	return 0;
}

/* ---- the VM's configuration ---------------------------------------------------- */

int fcapi_vm_config(const struct fcapi *a, struct vm_config *cfg, char *why, size_t n)
{
	const struct fcapi_config *c = &a->cfg;
	unsigned i, k = 0, pass;

	if (!c->has_boot) {
		snprintf(why, n, "no boot source");
		return -EINVAL;
	}
	cfg->kernel = c->kernel;
	cfg->initrd = c->initrd[0] ? c->initrd : NULL;
	cfg->cmdline = c->has_boot_args ? c->boot_args : DEFAULT_BOOT_ARGS;
	cfg->cpus = c->vcpus;
	cfg->mem_bytes = (uint64_t)c->mem_mib << 20;
	cfg->track_dirty = c->track_dirty_pages; /* Diff snapshots */
	cfg->cpu_tmpl = c->has_cpu_tmpl ? &c->cpu_tmpl : NULL;
	/* A static template is for one vendor's CPUs (Firecracker checks at
	 * the start, GetCpuTemplateError::CpuVendorMismatched). */
	if (c->static_tmpl[0] && cpu_host_amd() != c->static_amd) {
		snprintf(why, n, "Start microvm error: Failed to get CPU template: CPU vendor mismatched between actual "
			 "CPU and CPU template.");
		return -EINVAL;
	}
	if (c->tmpl_set) {
		cfg->tmpl = c->tmpl;
		cfg->tmpl_explicit = 1;
	}
	/* The root device is /dev/vda: first. */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < c->nr_drives; i++) {
			struct blk_options *o = &cfg->disks[k];

			if ((pass == 0) != (c->drives[i].root != 0))
				continue;
			memset(o, 0, sizeof(*o));
			o->path = strdup(c->drives[i].path);
			if (!o->path) {
				snprintf(why, n, "out of memory");
				return -ENOMEM;
			}
			o->ro = c->drives[i].ro;
			o->root = c->drives[i].root;
			o->rl = c->drives[i].rl;
			snprintf(o->id, sizeof(o->id), "%s", c->drives[i].id);
			cfg->nr_disks = ++k;
		}
	cfg->has_vsock = c->has_vsock;
	if (c->has_vsock) {
		cfg->vsock.cid = c->cid;
		snprintf(cfg->vsock.uds, sizeof(cfg->vsock.uds), "%s", c->uds);
	}
	for (i = 0; i < c->nr_net; i++) {
		const char *err = NULL;
		char spec[64];

		snprintf(spec, sizeof(spec), "tap=%s%s%s", c->net[i].host_dev, c->net[i].mac[0] ? ",mac=" : "",
			 c->net[i].mac);
		if (net_options_parse(spec, &cfg->nets[i], &err)) {
			snprintf(why, n, "network interface %s: %s", c->net[i].id, err ? err : "invalid");
			return -EINVAL;
		}
		cfg->nets[i].rx = c->net[i].rx;
		cfg->nets[i].tx = c->net[i].tx;
		cfg->nets[i].mmds = c->net[i].mmds;
		if (c->net[i].mmds)
			cfg->mmds = (struct mmds *)&a->mmds; /* the device thread reads it, under its lock */
		cfg->nr_nets = i + 1;
	}
	for (i = 0; i < c->nr_fs; i++) {
		struct fs_options *o = &cfg->fs[i];

		memset(o, 0, sizeof(*o));
		snprintf(o->tag, sizeof(o->tag), "%s", c->fs[i].tag);
		o->path = strdup(c->fs[i].path);
		if (!o->path) {
			snprintf(why, n, "out of memory");
			return -ENOMEM;
		}
		o->ro = c->fs[i].ro;
		o->cache = FUSE_CACHE_NONE;
		cfg->nr_fs = i + 1;
		/* a named drive: where it is mounted, its size limit and count */
		if ((c->fs[i].at[0] && !(o->at = strdup(c->fs[i].at))) ||
		    (c->fs[i].limit && !(o->usage = strdup(c->fs[i].usage)))) {
			snprintf(why, n, "out of memory");
			return -ENOMEM;
		}
		o->limit = c->fs[i].usage[0] ? c->fs[i].limit : 0;
	}
	fcapi_dev_vm_config(a, cfg);
	return 0;
}
