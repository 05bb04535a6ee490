/* virtio-balloon over fake guest memory (no KVM): queue roles under the
 * negotiated features, inflate frees pages, bad PFNs and bad buffers put
 * the device in NEEDS_RESET with nothing freed, deflate, the statistics
 * buffer held and given back at each poll, the target, snapshots, how
 * long a snapshot waits for free page reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "devices/virtio_balloon.h"
#include "tests/unit/virtio_driver.h"
#include "tests/unit/vq_builder.h"

#define F_BASE ((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_INDIRECT_DESC))
#define F_STATS (1ull << VIRTIO_BALLOON_F_STATS_VQ)
#define PAGES_AT 0x3f0000u /* the last 64 KiB of the 4 MiB fake RAM: no ring there */

struct fx {
	struct vqb q[3]; /* inflate, deflate, stats: views 0, 1, 2 */
	struct virtio_balloon b;
};

static int setup_with(void **state, const struct balloon_options *o)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || vqb_init(&f->q[0], 16))
		return -1;
	vqb_init_view(&f->q[1], &f->q[0], 1, 16);
	vqb_init_view(&f->q[2], &f->q[0], 2, 16);
	if (virtio_balloon_init(&f->b, o, -1, &f->q[0].gm, 0xd0000000, 5))
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	struct balloon_options o = { .amount_mib = 1, .deflate_on_oom = 1 };

	return setup_with(state, &o);
}

static int setup_stats(void **state)
{
	struct balloon_options o = { .amount_mib = 0, .stats_interval_s = 1 };

	return setup_with(state, &o);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	virtio_balloon_destroy(&f->b);
	vqb_destroy(&f->q[0]);
	free(f);
	return 0;
}

static void start(struct fx *f, uint64_t features, unsigned nq)
{
	struct vq_config c[3] = { vqb_config(&f->q[0]), vqb_config(&f->q[1]), vqb_config(&f->q[2]) };

	assert_true(vd_setup_n(&f->b.vdev, features, c, nq) & VIRTIO_STATUS_DRIVER_OK);
}

static uint8_t *page(struct fx *f, unsigned i)
{
	return gm_ptr(&f->q[0].gm, PAGES_AT + (uint64_t)i * 4096, 4096);
}

/* Puts the PFNs in one buffer (readable, or writable to break the rule)
 * on queue qi and notifies. */
static void post_pfns(struct fx *f, unsigned qi, const uint32_t *pfn, unsigned n, int writable)
{
	uint32_t len = n * 4;
	int w = writable;
	uint16_t head = vqb_chain(&f->q[qi], 1, &len, &w);

	memcpy(gm_ptr(&f->q[0].gm, vqb_desc(&f->q[qi], head)->addr, len), pfn, len);
	vd_notify(&f->b.vdev, qi);
}

static void wait_used(struct fx *f, unsigned qi, uint16_t idx)
{
	assert_true(vd_wait_irq(&f->b.vdev) & VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vqb_used_idx(&f->q[qi]), idx);
}

static void expect_needs_reset(struct fx *f)
{
	assert_true(vd_wait_irq(&f->b.vdev) & VIRTIO_MMIO_INT_CONFIG);
	assert_true(vd_rd(&f->b.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
}

static void queue_roles(void **state)
{
	(void)state;
	assert_int_equal(balloon_queue_role(0, 0), BQ_INFLATE);
	assert_int_equal(balloon_queue_role(0, 1), BQ_DEFLATE);
	assert_int_equal(balloon_queue_role(0, 2), BQ_NONE);
	assert_int_equal(balloon_queue_role(F_STATS, 2), BQ_STATS);
	assert_int_equal(balloon_queue_role(F_STATS, 3), BQ_NONE);
	/* 5.5.2: without the stats queue, reporting takes index 2. */
	assert_int_equal(balloon_queue_role(1ull << VIRTIO_BALLOON_F_REPORTING, 2), BQ_REPORTING);
	assert_int_equal(balloon_queue_role(F_STATS | (1ull << VIRTIO_BALLOON_F_REPORTING), 3), BQ_REPORTING);
	assert_int_equal(balloon_queue_role(F_STATS | (1ull << VIRTIO_BALLOON_F_REPORTING), 7), BQ_NONE);
}

static void features_and_config(void **state)
{
	struct fx *f = *state;
	uint32_t v;

	assert_int_equal(vd_rd(&f->b.vdev, 0x008), VIRTIO_ID_BALLOON);
	vd_wr(&f->b.vdev, 0x014, 0);
	v = vd_rd(&f->b.vdev, 0x010);
	assert_true(v & (1u << VIRTIO_BALLOON_F_DEFLATE_ON_OOM));
	assert_false(v & (1u << VIRTIO_BALLOON_F_STATS_VQ));
	assert_false(v & (1u << VIRTIO_BALLOON_F_REPORTING));
	assert_int_equal(vd_rd(&f->b.vdev, 0x100), 256); /* 1 MiB = 256 pages */
	/* The driver may write actual, never num_pages. */
	start(f, F_BASE, 2);
	vd_wr(&f->b.vdev, 0x104, 17);
	vd_wr(&f->b.vdev, 0x100, 99);
	assert_int_equal(vd_rd(&f->b.vdev, 0x100), 256);
	assert_int_equal(vd_rd(&f->b.vdev, 0x104), 17);
	/* A new target: a config change interrupt, the new num_pages. */
	virtio_balloon_set_target(&f->b, 2);
	assert_true(vd_wait_irq(&f->b.vdev) & VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(vd_rd(&f->b.vdev, 0x100), 512);
}

/* Inflated pages are given back: the memfd's pages are freed and read as
 * zeros; pages not named keep their data. */
static void inflate_frees_pages(void **state)
{
	struct fx *f = *state;
	uint32_t pfn[2] = { PAGES_AT / 4096, PAGES_AT / 4096 + 2 };

	memset(page(f, 0), 0xab, 4096 * 3);
	start(f, F_BASE, 2);
	post_pfns(f, 0, pfn, 2, 0);
	wait_used(f, 0, 1);
	assert_int_equal(f->b.inflated, 2);
	assert_int_equal(f->b.discard_fails, 0);
	assert_int_equal(page(f, 0)[0], 0);
	assert_int_equal(page(f, 0)[4095], 0);
	assert_int_equal(page(f, 1)[0], 0xab);
	assert_int_equal(page(f, 2)[100], 0);
	/* Deflate: counted, nothing to free. */
	post_pfns(f, 1, pfn, 1, 0);
	wait_used(f, 1, 1);
	assert_int_equal(f->b.deflated, 1);
	assert_int_equal(vd_rd(&f->b.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET, 0);
}

/* A PFN past the end of RAM: the whole request is refused before any page
 * is freed, and the device needs reset. */
static void inflate_outside_ram_refused(void **state)
{
	struct fx *f = *state;
	uint32_t pfn[3] = { PAGES_AT / 4096, VQB_RAM / 4096, 0xffffffffu };

	memset(page(f, 0), 0xcd, 4096);
	start(f, F_BASE, 2);
	post_pfns(f, 0, pfn, 3, 0);
	expect_needs_reset(f);
	assert_int_equal(page(f, 0)[0], 0xcd);
	assert_int_equal(f->b.inflated, 0);
	assert_int_equal(vqb_used_idx(&f->q[0]), 0);
}

static void deflate_outside_ram_refused(void **state)
{
	struct fx *f = *state;
	uint32_t pfn[1] = { VQB_RAM / 4096 + 5 };

	start(f, F_BASE, 2);
	post_pfns(f, 1, pfn, 1, 0);
	expect_needs_reset(f);
	assert_int_equal(f->b.deflated, 0);
}

static void inflate_writable_refused(void **state)
{
	struct fx *f = *state;
	uint32_t pfn[1] = { PAGES_AT / 4096 };

	memset(page(f, 0), 0xcd, 4096);
	start(f, F_BASE, 2);
	post_pfns(f, 0, pfn, 1, 1);
	expect_needs_reset(f);
	assert_int_equal(page(f, 0)[0], 0xcd);
}

static void inflate_partial_pfn_refused(void **state)
{
	struct fx *f = *state;
	uint32_t len = 6;
	int w = 0;

	start(f, F_BASE, 2);
	vqb_chain(&f->q[0], 1, &len, &w);
	vd_notify(&f->b.vdev, 0);
	expect_needs_reset(f);
}

static void put_stats(struct fx *f, const struct virtio_balloon_stat *s, unsigned n)
{
	uint32_t len = n * (uint32_t)sizeof(*s);
	int w = 0;
	uint16_t head = vqb_chain(&f->q[2], 1, &len, &w);

	memcpy(gm_ptr(&f->q[0].gm, vqb_desc(&f->q[2], head)->addr, len), s, len);
	vd_notify(&f->b.vdev, 2);
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* The driver's stats buffer is read and held; the poll (every second)
 * gives it back; the refilled buffer brings new numbers. */
static void statistics(void **state)
{
	struct fx *f = *state;
	struct virtio_balloon_stat s[3] = {
		{ VIRTIO_BALLOON_S_MEMFREE, 1000 }, { VIRTIO_BALLOON_S_MEMTOT, 4096 }, { 200, 7 } /* unknown */
	};
	struct balloon_stats st;
	uint32_t target, actual;
	uint64_t t0;
	unsigned i;

	start(f, F_BASE | F_STATS, 3);
	t0 = now_ms();
	put_stats(f, s, 3);
	for (i = 0; i < 100 && !f->b.stats_held; i++)
		usleep(10000);
	virtio_balloon_get(&f->b, &target, &actual, &st);
	assert_int_equal(st.updates, 1);
	assert_true(st.valid[VIRTIO_BALLOON_S_MEMFREE]);
	assert_int_equal(st.val[VIRTIO_BALLOON_S_MEMFREE], 1000);
	assert_int_equal(st.val[VIRTIO_BALLOON_S_MEMTOT], 4096);
	assert_false(st.valid[VIRTIO_BALLOON_S_SWAP_IN]);
	assert_int_equal(vqb_used_idx(&f->q[2]), 0); /* held */
	/* The poll: back after about a second. */
	wait_used(f, 2, 1);
	assert_true(now_ms() - t0 >= 500);
	s[0].val = 2000;
	put_stats(f, s, 1);
	for (i = 0; i < 100; i++) {
		virtio_balloon_get(&f->b, &target, &actual, &st);
		if (st.updates == 2)
			break;
		usleep(10000);
	}
	assert_int_equal(st.val[VIRTIO_BALLOON_S_MEMFREE], 2000);
	/* A new interval polls at once. */
	assert_int_equal(virtio_balloon_set_interval(&f->b, 5), 0);
	wait_used(f, 2, 2);
	assert_int_equal(virtio_balloon_set_interval(&f->b, 0), -EINVAL);
}

static void stats_writable_refused(void **state)
{
	struct fx *f = *state;
	uint32_t len = 20;
	int w = 1;

	start(f, F_BASE | F_STATS, 3);
	vqb_chain(&f->q[2], 1, &len, &w);
	vd_notify(&f->b.vdev, 2);
	expect_needs_reset(f);
}

/* Statistics off at boot cannot be turned on. */
static void interval_without_stats(void **state)
{
	struct fx *f = *state;

	assert_int_equal(virtio_balloon_set_interval(&f->b, 3), -EINVAL);
}

static void snapshot_roundtrip(void **state)
{
	struct fx *f = *state;
	struct virtio_balloon_stat s[1] = { { VIRTIO_BALLOON_S_AVAIL, 5 } };
	const char *why = NULL;
	struct sbuf b;
	struct srd r;
	unsigned i;

	start(f, F_BASE | F_STATS, 3);
	vd_wr(&f->b.vdev, 0x104, 33);
	put_stats(f, s, 1);
	for (i = 0; i < 100 && !f->b.stats_held; i++)
		usleep(10000);
	assert_true(f->b.stats_held);
	sb_init(&b);
	virtio_balloon_save(&f->b, &b);
	assert_int_equal(b.err, 0);
	f->b.stats_held = 0;
	f->b.config.actual = 0;
	sr_init(&r, b.p, b.len);
	assert_int_equal(virtio_balloon_restore(&f->b, &r, &why), 0);
	assert_true(f->b.stats_held);
	assert_int_equal(vd_rd(&f->b.vdev, 0x104), 33);
	/* A target past guest RAM is refused. */
	b.p[0] = b.p[1] = b.p[2] = b.p[3] = 0xff;
	sr_init(&r, b.p, b.len);
	assert_int_equal(virtio_balloon_restore(&f->b, &r, &why), -EINVAL);
	sb_free(&b);
}

static void options(void **state)
{
	struct balloon_options o;
	const char *why = NULL;

	(void)state;
	assert_int_equal(balloon_options_parse("64,deflate_on_oom,stats=5,reporting", &o, &why), 0);
	assert_int_equal(o.amount_mib, 64);
	assert_true(o.deflate_on_oom);
	assert_int_equal(o.stats_interval_s, 5);
	assert_true(o.free_page_reporting);
	assert_int_equal(balloon_options_parse("0", &o, &why), 0);
	assert_int_equal(balloon_options_parse("x", &o, &why), -EINVAL);
	assert_int_equal(balloon_options_parse("99999999", &o, &why), -EINVAL);
	assert_int_equal(balloon_options_parse("1,stats=", &o, &why), -EINVAL);
}

/* More than guest RAM is refused at setup. */
/* Free page reporting: a snapshot waits for the guest's first pass (2 s
 * after the driver came up, and a slack) and for a pass under way to go
 * quiet; never without the feature, never for a device restored up. */
static void report_wait(void **state)
{
	struct balloon_options o = { .free_page_reporting = 1 };
	struct fx *f;
	uint64_t ok, last, w;
	uint32_t len = 4096;
	int wr = 1;

	(void)state;
	assert_int_equal(setup_with((void **)&f, &o), 0);
	start(f, F_BASE | (1ull << VIRTIO_BALLOON_F_REPORTING), 3);
	ok = atomic_load(&f->b.vdev.driver_ok_ns);
	assert_true(ok > 0);
	w = virtio_balloon_report_wait_ns(&f->b, ok);
	assert_true(w > 2000000000ull && w <= 2500000000ull);
	assert_int_equal(virtio_balloon_report_wait_ns(&f->b, ok + w), 0);
	/* the reporting queue's buffers are never written: the queue pops
	 * them unmarked for a diff snapshot (test_snapdiff), where the free
	 * range would be written whole */
	assert_true(f->b.vdev.q[2].vq.unwritten);
	assert_false(f->b.vdev.q[0].vq.unwritten || f->b.vdev.q[1].vq.unwritten);
	/* a report: quiet 250 ms after it, even for a device restored up */
	vqb_chain(&f->q[2], 1, &len, &wr);
	vd_notify(&f->b.vdev, 2);
	wait_used(f, 2, 1);
	assert_int_equal(f->b.reported, 1);
	last = atomic_load(&f->b.last_report_ns);
	assert_true(last >= ok);
	atomic_store(&f->b.vdev.driver_ok_ns, 0);
	assert_int_equal(virtio_balloon_report_wait_ns(&f->b, last + 100000000ull), 150000000ull);
	assert_int_equal(virtio_balloon_report_wait_ns(&f->b, last + 250000000ull), 0);
	atomic_store(&f->b.last_report_ns, 0);
	assert_int_equal(virtio_balloon_report_wait_ns(&f->b, last), 0);
	teardown((void **)&f);
	/* without the feature: nothing to wait for */
	assert_int_equal(setup_with((void **)&f, &o), 0);
	start(f, F_BASE, 2);
	assert_int_equal(virtio_balloon_report_wait_ns(&f->b, atomic_load(&f->b.vdev.driver_ok_ns)), 0);
	teardown((void **)&f);
}

static void too_large(void **state)
{
	struct vqb q;
	struct virtio_balloon b;
	struct balloon_options o = { .amount_mib = 5 };

	(void)state;
	assert_int_equal(vqb_init(&q, 16), 0);
	assert_int_equal(virtio_balloon_init(&b, &o, -1, &q.gm, 0xd0000000, 5), -EINVAL);
	vqb_destroy(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(queue_roles),
		cmocka_unit_test_setup_teardown(features_and_config, setup, teardown),
		cmocka_unit_test_setup_teardown(inflate_frees_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(inflate_outside_ram_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(deflate_outside_ram_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(inflate_writable_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(inflate_partial_pfn_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(statistics, setup_stats, teardown),
		cmocka_unit_test_setup_teardown(stats_writable_refused, setup_stats, teardown),
		cmocka_unit_test_setup_teardown(interval_without_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(snapshot_roundtrip, setup_stats, teardown),
		cmocka_unit_test(options),
		cmocka_unit_test(report_wait),
		cmocka_unit_test(too_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
