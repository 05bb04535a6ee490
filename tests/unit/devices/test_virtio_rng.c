/* virtio-rng: requests through the transport over fake guest memory (no
 * KVM): buffers filled, readable or empty chains refused (NEEDS_RESET),
 * a failing host source, the rate limiter, the --entropy options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "devices/virtio_rng.h"
#include "tests/unit/virtio_driver.h"
#include "tests/unit/vq_builder.h"

#define F_RNG ((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC))

struct fx {
	struct vqb b;
	struct virtio_rng rng;
};

static int setup_with(void **state, const struct rng_options *o)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || vqb_init(&f->b, 16))
		return -1;
	if (virtio_rng_init(&f->rng, o, -1, &f->b.gm, 0xd0000000, 5))
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	struct rng_options o = { 0 };

	return setup_with(state, &o);
}

static int setup_limited(void **state)
{
	/* 4 requests per second, a burst of 4. */
	struct rng_options o = { .rl = { .ops_per_s = 4, .ops_burst = 4 } };

	return setup_with(state, &o);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	virtio_rng_destroy(&f->rng);
	vqb_destroy(&f->b);
	free(f);
	return 0;
}

static void start(struct fx *f)
{
	struct vq_config c = vqb_config(&f->b);

	assert_true(vd_setup(&f->rng.vdev, F_RNG, &c) & VIRTIO_STATUS_DRIVER_OK);
}

/* Publishes a chain, notifies, waits for the used entry; returns its
 * length. */
static uint32_t submit(struct fx *f, unsigned n, const uint32_t *lens, const int *w, uint16_t *head)
{
	uint16_t before = vqb_used_idx(&f->b);

	*head = vqb_chain(&f->b, n, lens, w);
	vqb_set_used_event(&f->b, before);
	vd_notify(&f->rng.vdev, 0);
	assert_true(vd_wait_irq(&f->rng.vdev) & VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vqb_used_idx(&f->b), (uint16_t)(before + 1));
	assert_int_equal(vqb_used(&f->b, before).id, *head);
	return vqb_used(&f->b, before).len;
}

static int all_fill(const uint8_t *p, size_t n, uint8_t v)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static void config_and_id(void **state)
{
	struct fx *f = *state;

	assert_int_equal(vd_rd(&f->rng.vdev, 0x008), VIRTIO_ID_RNG);
	assert_int_equal(vd_rd(&f->rng.vdev, 0x000), 0x74726976);
	vd_wr(&f->rng.vdev, 0x030, 0);
	assert_int_equal(vd_rd(&f->rng.vdev, 0x034), RNG_QUEUE_SIZE);
	vd_wr(&f->rng.vdev, 0x030, 1); /* one queue only (5.4.2) */
	assert_int_equal(vd_rd(&f->rng.vdev, 0x034), 0);
}

/* Two writable buffers: both filled, the length reported is theirs. */
static void fills_buffers(void **state)
{
	struct fx *f = *state;
	uint32_t lens[2] = { 64, 200 };
	int w[2] = { 1, 1 };
	struct virtq_desc *d;
	uint16_t head;

	start(f);
	assert_int_equal(submit(f, 2, lens, w, &head), 264);
	d = vqb_desc(&f->b, head);
	/* vqb_buf filled them with 0x10 and 0x11: random bytes replaced them. */
	assert_false(all_fill(gm_ptr(&f->b.gm, d[0].addr, 64), 64, 0x10));
	d = vqb_desc(&f->b, (uint16_t)(head + 1));
	assert_false(all_fill(gm_ptr(&f->b.gm, d->addr, 200), 200, 0x11));
	assert_int_equal(f->rng.reqs, 1);
	assert_int_equal(f->rng.bytes, 264);
	assert_int_equal(f->rng.vdev.status & VIRTIO_STATUS_NEEDS_RESET, 0);
}

/* A buffer larger than RNG_MAX_REQ gets RNG_MAX_REQ bytes (5.4.6.1: the
 * device may use less than the whole buffer). */
static void large_buffer_capped(void **state)
{
	struct fx *f = *state;
	uint32_t lens[1] = { RNG_MAX_REQ + 4096 };
	int w[1] = { 1 };
	uint16_t head;

	start(f);
	assert_int_equal(submit(f, 1, lens, w, &head), RNG_MAX_REQ);
	assert_true(all_fill(gm_ptr(&f->b.gm, vqb_desc(&f->b, head)->addr + RNG_MAX_REQ, 4096), 4096, 0x10));
}

static void expect_needs_reset(struct fx *f)
{
	uint16_t before = vqb_used_idx(&f->b);

	vd_notify(&f->rng.vdev, 0);
	assert_true(vd_wait_irq(&f->rng.vdev) & VIRTIO_MMIO_INT_CONFIG);
	assert_true(vd_rd(&f->rng.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
	assert_int_equal(vqb_used_idx(&f->b), before); /* nothing completed */
}

/* 5.4.6.2: a driver-readable buffer is a driver error. */
static void readable_buffer_needs_reset(void **state)
{
	struct fx *f = *state;
	uint32_t lens[2] = { 16, 64 };
	int w[2] = { 0, 1 };

	start(f);
	vqb_chain(&f->b, 2, lens, w);
	expect_needs_reset(f);
	/* The guest's read-only buffer was not written. */
	assert_true(all_fill(gm_ptr(&f->b.gm, vqb_desc(&f->b, 0)->addr, 16), 16, 0x10));
	/* A reset brings it back. The driver withdraws the bad chain first:
	 * the device may look at the ring as soon as it is live again, and
	 * would meet it anew (the status read below raced with that). */
	vqb_set_avail_idx(&f->b, vqb_used_idx(&f->b));
	f->b.avail_idx = vqb_used_idx(&f->b);
	start(f);
	assert_int_equal(vd_rd(&f->rng.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET, 0);
}

static void empty_buffer_needs_reset(void **state)
{
	struct fx *f = *state;
	uint32_t lens[1] = { 0 };
	int w[1] = { 1 };

	start(f);
	vqb_chain(&f->b, 1, lens, w);
	expect_needs_reset(f);
}

/* A descriptor that runs past guest RAM: refused by the ring walker. */
static void buffer_outside_ram_needs_reset(void **state)
{
	struct fx *f = *state;

	start(f);
	vqb_set(&f->b, 0, VQB_RAM - 16, 64, VIRTQ_DESC_F_WRITE, 0);
	vqb_publish(&f->b, 0);
	expect_needs_reset(f);
}

static long failing_source(void *buf, size_t len)
{
	(void)buf;
	(void)len;
	return -EIO;
}

/* The host source failing: the request completes empty, the device stays
 * live. */
static void host_failure_completes_empty(void **state)
{
	struct fx *f = *state;
	uint32_t lens[1] = { 32 };
	int w[1] = { 1 };
	uint16_t head;

	f->rng.fill = failing_source;
	start(f);
	assert_int_equal(submit(f, 1, lens, w, &head), 0);
	assert_int_equal(f->rng.fails, 1);
	assert_int_equal(vd_rd(&f->rng.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET, 0);
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* 4 requests a second with a burst of 4: the 8th request is served only
 * after about a second, none is lost. */
static void rate_limit_holds(void **state)
{
	struct fx *f = *state;
	uint32_t lens[1] = { 16 };
	int w[1] = { 1 };
	uint64_t t0;
	uint16_t head;
	unsigned i;

	start(f);
	t0 = now_ms();
	for (i = 0; i < 8; i++) {
		assert_int_equal(submit(f, 1, lens, w, &head), 16);
		if (f->b.next_desc > 12)
			f->b.next_desc = 0;
	}
	assert_true(now_ms() - t0 >= 800);
	assert_true(f->rng.waits > 0);
	assert_int_equal(f->rng.reqs, 8);
}

static void options(void **state)
{
	struct rng_options o;
	const char *why = NULL;

	(void)state;
	assert_int_equal(rng_options_parse("", &o, &why), 0);
	assert_int_equal(o.rl.bytes_per_s, 0);
	assert_int_equal(rng_options_parse("on", &o, &why), 0);
	assert_int_equal(rng_options_parse("bps=1M,ops=100", &o, &why), 0);
	assert_int_equal(o.rl.bytes_per_s, 1000000);
	assert_int_equal(o.rl.ops_per_s, 100);
	assert_int_equal(rng_options_parse("bps=lots", &o, &why), -EINVAL);
	assert_int_equal(rng_options_parse("path=/dev/random", &o, &why), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(config_and_id, setup, teardown),
		cmocka_unit_test_setup_teardown(fills_buffers, setup, teardown),
		cmocka_unit_test_setup_teardown(large_buffer_capped, setup, teardown),
		cmocka_unit_test_setup_teardown(readable_buffer_needs_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(empty_buffer_needs_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(buffer_outside_ram_needs_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(host_failure_completes_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(rate_limit_holds, setup_limited, teardown),
		cmocka_unit_test(options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
