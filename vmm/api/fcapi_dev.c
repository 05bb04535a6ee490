/* The Firecracker API's device routes (fcapi_priv.h): PUT /entropy (a
 * virtio-rng device with its rate_limiter) and the balloon's PUT, PATCH
 * and GET /balloon, GET and PATCH /balloon/statistics, with Firecracker's
 * bodies (firecracker.yaml: EntropyDevice, Balloon, BalloonUpdate,
 * BalloonStats, BalloonStatsUpdate) and pre-/post-boot rules. */
#include "vmm/api/fcapi_priv.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(struct why *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct why *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->buf, w->len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static uint64_t get_uint(const struct json *o, const char *k)
{
	const struct json *v = json_get(o, k);

	return v && v->type == JSON_NUM ? (uint64_t)v->u.num : 0;
}

static int get_bool(const struct json *o, const char *k)
{
	const struct json *v = json_get(o, k);

	return v && v->type == JSON_BOOL && v->u.boolean;
}

int fcapi_put_entropy(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = { { "rate_limiter", F_OBJ, 0, NULL } };
	struct rl_limits rl;
	int r;

	if ((r = fcapi_check_fields(b, f, 1, w)) || (r = fcapi_pre_boot(a, w)) ||
	    (r = fcapi_get_limiter(b, "rate_limiter", &rl, w)))
		return r;
	a->cfg.has_entropy = 1;
	a->cfg.entropy_rl = rl;
	a->cfg.touched = 1;
	return 0;
}

/* The guest's memory in MiB: what PUT /machine-config set, or the VM's. */
static uint64_t mem_mib(const struct fcapi *a)
{
	return a->vm ? a->vm->cfg.mem_bytes >> 20 : a->cfg.mem_mib;
}

static int amount_ok(const struct fcapi *a, uint64_t mib, struct why *w)
{
	if (mib > mem_mib(a))
		return fail(w, "Amount of pages requested is too large: %llu MiB, the guest has %llu MiB",
			    (unsigned long long)mib, (unsigned long long)mem_mib(a));
	return 0;
}

int fcapi_put_balloon(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = {
		{ "amount_mib", F_UINT, 1, NULL },
		{ "deflate_on_oom", F_BOOL, 1, NULL },
		{ "stats_polling_interval_s", F_UINT, 0, NULL },
		{ "free_page_hinting", F_BOOL, 0, NULL },
		{ "free_page_reporting", F_BOOL, 0, NULL },
	};
	struct balloon_options o = { 0 };
	uint64_t mib, s;
	int r;

	if ((r = fcapi_check_fields(b, f, 5, w)) || (r = fcapi_pre_boot(a, w)))
		return r;
	mib = get_uint(b, "amount_mib");
	s = get_uint(b, "stats_polling_interval_s");
	if ((r = amount_ok(a, mib, w)))
		return r;
	if (s > UINT32_MAX)
		return fail(w, "'stats_polling_interval_s' is too large");
	if (get_bool(b, "free_page_hinting"))
		return fail(w, "'free_page_hinting' is not supported (free_page_reporting is)");
	o.amount_mib = (uint32_t)mib;
	o.deflate_on_oom = get_bool(b, "deflate_on_oom");
	o.stats_interval_s = (uint32_t)s;
	o.free_page_reporting = get_bool(b, "free_page_reporting");
	a->cfg.balloon = o;
	a->cfg.has_balloon = 1;
	a->cfg.touched = 1;
	return 0;
}

static struct virtio_balloon *running_balloon(const struct fcapi *a, struct why *w)
{
	if (!a->vm) {
		fail(w, MSG_BEFORE_START);
		return NULL;
	}
	if (!a->vm->balloon)
		fail(w, "Balloon device not configured.");
	return a->vm->balloon;
}

int fcapi_patch_balloon(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = { { "amount_mib", F_UINT, 1, NULL } };
	struct virtio_balloon *bl;
	uint64_t mib;
	int r;

	if ((r = fcapi_check_fields(b, f, 1, w)))
		return r;
	if (!(bl = running_balloon(a, w)))
		return -EINVAL;
	mib = get_uint(b, "amount_mib");
	if ((r = amount_ok(a, mib, w)))
		return r;
	virtio_balloon_set_target(bl, (uint32_t)mib);
	a->cfg.balloon.amount_mib = (uint32_t)mib;
	return 0;
}

int fcapi_patch_balloon_stats(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = { { "stats_polling_interval_s", F_UINT, 1, NULL } };
	struct virtio_balloon *bl;
	uint64_t s;
	int r;

	if ((r = fcapi_check_fields(b, f, 1, w)))
		return r;
	if (!(bl = running_balloon(a, w)))
		return -EINVAL;
	s = get_uint(b, "stats_polling_interval_s");
	/* Firecracker: statistics cannot be turned on or off after boot. */
	if (s > UINT32_MAX || virtio_balloon_set_interval(bl, (uint32_t)s))
		return fail(w, "Cannot enable or disable balloon statistics after boot "
			    "(stats_polling_interval_s must stay non-zero, as it was at boot)");
	a->cfg.balloon.stats_interval_s = (uint32_t)s;
	return 0;
}

static void balloon_json(const struct fcapi *a, struct json_writer *jw)
{
	const struct balloon_options *o = &a->cfg.balloon;
	uint32_t target = o->amount_mib * BALLOON_PAGES_PER_MIB, actual = 0;

	if (a->vm && a->vm->balloon)
		virtio_balloon_get(a->vm->balloon, &target, &actual, NULL);
	jw_obj(jw);
	jw_key(jw, "amount_mib");
	jw_int(jw, target / BALLOON_PAGES_PER_MIB);
	jw_key(jw, "deflate_on_oom");
	jw_bool(jw, o->deflate_on_oom);
	jw_key(jw, "stats_polling_interval_s");
	jw_int(jw, o->stats_interval_s);
	jw_key(jw, "free_page_hinting");
	jw_bool(jw, 0);
	jw_key(jw, "free_page_reporting");
	jw_bool(jw, o->free_page_reporting);
	jw_obj_end(jw);
}

int fcapi_get_balloon(const struct fcapi *a, char *out, size_t cap, size_t *n, struct why *w)
{
	struct json_writer jw;

	if (!a->cfg.has_balloon)
		return fail(w, "Balloon device not configured.");
	jw_init(&jw, out, cap);
	balloon_json(a, &jw);
	*n = jw_done(&jw) ? jw.len : 0;
	return 0;
}

/* Firecracker's names for the statistics tags (BalloonStats). */
static const char *const stat_names[BALLOON_NR_STATS] = {
	[VIRTIO_BALLOON_S_SWAP_IN] = "swap_in",
	[VIRTIO_BALLOON_S_SWAP_OUT] = "swap_out",
	[VIRTIO_BALLOON_S_MAJFLT] = "major_faults",
	[VIRTIO_BALLOON_S_MINFLT] = "minor_faults",
	[VIRTIO_BALLOON_S_MEMFREE] = "free_memory",
	[VIRTIO_BALLOON_S_MEMTOT] = "total_memory",
	[VIRTIO_BALLOON_S_AVAIL] = "available_memory",
	[VIRTIO_BALLOON_S_CACHES] = "disk_caches",
	[VIRTIO_BALLOON_S_HTLB_PGALLOC] = "hugetlb_allocations",
	[VIRTIO_BALLOON_S_HTLB_PGFAIL] = "hugetlb_failures",
	[VIRTIO_BALLOON_S_OOM_KILL] = "oom_kill",
	[VIRTIO_BALLOON_S_ALLOC_STALL] = "alloc_stall",
	[VIRTIO_BALLOON_S_ASYNC_SCAN] = "async_scan",
	[VIRTIO_BALLOON_S_DIRECT_SCAN] = "direct_scan",
	[VIRTIO_BALLOON_S_ASYNC_RECLAIM] = "async_reclaim",
	[VIRTIO_BALLOON_S_DIRECT_RECLAIM] = "direct_reclaim",
};

int fcapi_get_balloon_stats(const struct fcapi *a, char *out, size_t cap, size_t *n, struct why *w)
{
	struct virtio_balloon *bl = a->vm ? a->vm->balloon : NULL;
	struct balloon_stats st;
	struct json_writer jw;
	uint32_t target, actual;
	unsigned i;

	if (!a->cfg.has_balloon)
		return fail(w, "Balloon device not configured.");
	if (!a->cfg.balloon.stats_interval_s)
		return fail(w, "Statistics for the balloon device are not enabled.");
	if (!bl)
		return fail(w, MSG_BEFORE_START);
	virtio_balloon_get(bl, &target, &actual, &st);
	jw_init(&jw, out, cap);
	jw_obj(&jw);
	jw_key(&jw, "target_pages");
	jw_int(&jw, target);
	jw_key(&jw, "actual_pages");
	jw_int(&jw, actual);
	jw_key(&jw, "target_mib");
	jw_int(&jw, target / BALLOON_PAGES_PER_MIB);
	jw_key(&jw, "actual_mib");
	jw_int(&jw, actual / BALLOON_PAGES_PER_MIB);
	/* Only what the guest reported (Firecracker leaves the rest out). */
	for (i = 0; i < BALLOON_NR_STATS; i++) {
		if (!st.valid[i])
			continue;
		jw_key(&jw, stat_names[i]);
		jw_int(&jw, st.val[i] > INT64_MAX ? INT64_MAX : (int64_t)st.val[i]);
	}
	jw_obj_end(&jw);
	*n = jw_done(&jw) ? jw.len : 0;
	return 0;
}

void fcapi_dev_config_json(const struct fcapi *a, struct json_writer *jw)
{
	if (a->cfg.has_balloon) {
		jw_key(jw, "balloon");
		balloon_json(a, jw);
	}
	if (a->cfg.has_entropy) {
		jw_key(jw, "entropy");
		jw_obj(jw);
		fcapi_limiter_json(jw, "rate_limiter", &a->cfg.entropy_rl);
		jw_obj_end(jw);
	}
}

void fcapi_dev_vm_config(const struct fcapi *a, struct vm_config *cfg)
{
	cfg->has_entropy = a->cfg.has_entropy;
	memset(&cfg->entropy, 0, sizeof(cfg->entropy));
	cfg->entropy.rl = a->cfg.entropy_rl;
	cfg->has_balloon = a->cfg.has_balloon;
	cfg->balloon = a->cfg.balloon;
}
