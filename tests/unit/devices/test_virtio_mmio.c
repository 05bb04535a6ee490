/* virtio-mmio transport with a dummy device: register file, status state
 * machine, feature masking, checked QueueSel, config space bounds, reset,
 * and NEEDS_RESET on a bad queue. No KVM: the eventfds stand in for the
 * ioeventfd and irqfd. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/virtio_driver.h"
#include "tests/unit/vq_builder.h"

struct dummy {
	struct virtio_dev vdev;
	uint8_t config[10];
	_Atomic int notified;
	_Atomic int resets;
	uint8_t last_cfg_write;
};

/* Echo device: pushes every chain back with its readable length. */
static void dummy_notify(struct virtio_dev *d, unsigned q)
{
	struct dummy *t = container_of(d, struct dummy, vdev);
	static struct vq_chain c; /* only the loop thread touches it */
	const char *why;
	int r, pushed = 0;

	atomic_fetch_add(&t->notified, 1);
	while ((r = vq_pop(&d->q[q].vq, &c, &why)) > 0) {
		vq_push(&d->q[q].vq, c.head, (uint32_t)c.read_len);
		pushed = 1;
	}
	if (r < 0) {
		virtio_needs_reset(d, why);
		return;
	}
	if (pushed)
		virtio_queue_used(d, q);
}

static void dummy_reset(struct virtio_dev *d)
{
	struct dummy *t = container_of(d, struct dummy, vdev);

	atomic_fetch_add(&t->resets, 1);
}

static void dummy_cfg_write(struct virtio_dev *d, uint32_t off, const void *data, unsigned len)
{
	struct dummy *t = container_of(d, struct dummy, vdev);

	(void)len;
	if (off == 9)
		t->last_cfg_write = *(const uint8_t *)data;
}

static const struct virtio_dev_ops dummy_ops = {
	.device_id = 42,
	.nr_queues = 2,
	.queue_max = 64,
	.queue_notify = dummy_notify,
	.config_write = dummy_cfg_write,
	.reset = dummy_reset,
};

struct fx {
	struct vqb b;
	struct dummy d;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	unsigned i;

	if (!f || vqb_init(&f->b, 16))
		return -1;
	for (i = 0; i < sizeof(f->d.config); i++)
		f->d.config[i] = (uint8_t)(0xa0 + i);
	if (virtio_mmio_init(&f->d.vdev, &dummy_ops, "dummy", -1, &f->b.gm, 0xd0000000, 5,
			     (1ull << VIRTIO_F_EVENT_IDX) | (1ull << 3), f->d.config, sizeof(f->d.config)))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	virtio_mmio_destroy(&f->d.vdev);
	vqb_destroy(&f->b);
	free(f);
	return 0;
}

#define STATUS_ALL (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK)
#define F_V1 (1ull << VIRTIO_F_VERSION_1)

static void identity_registers(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;
	char cmd[64];

	assert_int_equal(vd_rd(d, 0x000), 0x74726976);
	assert_int_equal(vd_rd(d, 0x004), 2);
	assert_int_equal(vd_rd(d, 0x008), 42);
	vd_wr(d, 0x014, 0);
	assert_int_equal(vd_rd(d, 0x010), (1u << VIRTIO_F_EVENT_IDX) | (1u << 3));
	vd_wr(d, 0x014, 1);
	assert_int_equal(vd_rd(d, 0x010), 1); /* VERSION_1 = bit 32 */
	vd_wr(d, 0x014, 7);
	assert_int_equal(vd_rd(d, 0x010), 0);
	/* Registers need aligned 32-bit accesses: others read 0. */
	{
		uint16_t v = 0xffff;

		d->bus.ops->read(&d->bus, 0x000, &v, 2);
		assert_int_equal(v, 0);
		d->bus.ops->read(&d->bus, 0x002, &v, 2);
		assert_int_equal(v, 0);
	}
	assert_int_equal(virtio_mmio_cmdline(d, cmd, sizeof(cmd)), 0);
	assert_string_equal(cmd, "virtio_mmio.device=4K@0xd0000000:5");
}

static void feature_masking(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;
	struct vq_config c = vqb_config(&f->b);

	/* The driver asks for everything: it gets only what was offered. */
	assert_int_equal(vd_setup(d, ~0ull, &c), STATUS_ALL);
	assert_int_equal(d->driver_features, F_V1 | (1ull << VIRTIO_F_EVENT_IDX) | (1ull << 3));
	/* Without VERSION_1, FEATURES_OK is refused. */
	assert_int_equal(vd_setup(d, 1ull << 3, &c) & VIRTIO_STATUS_FEATURES_OK, 0);
	/* Features cannot change once FEATURES_OK is set. */
	assert_int_equal(vd_setup(d, F_V1, &c), STATUS_ALL);
	vd_wr(d, 0x024, 0);
	vd_wr(d, 0x020, 1u << 3);
	assert_int_equal(d->driver_features, F_V1);
}

static void status_out_of_order(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;

	vd_wr(d, 0x070, VIRTIO_STATUS_DRIVER); /* DRIVER before ACKNOWLEDGE */
	assert_int_equal(vd_rd(d, 0x070), 0);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER_OK); /* skips two */
	assert_int_equal(vd_rd(d, 0x070), VIRTIO_STATUS_ACKNOWLEDGE);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE); /* clearing a bit */
	assert_int_equal(vd_rd(d, 0x070), VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_NEEDS_RESET);
	assert_int_equal(vd_rd(d, 0x070) & VIRTIO_STATUS_NEEDS_RESET, 0); /* device-owned */
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FAILED);
	assert_true(vd_rd(d, 0x070) & VIRTIO_STATUS_FAILED);
	vd_wr(d, 0x070, 0);
	assert_int_equal(vd_rd(d, 0x070), 0);
	assert_true(atomic_load(&f->d.resets) >= 1);
}

static void queue_sel_checked(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;

	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vd_wr(d, 0x024, 1);
	vd_wr(d, 0x020, 1);
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	vd_wr(d, 0x030, 1);
	assert_int_equal(vd_rd(d, 0x034), 64);
	vd_wr(d, 0x030, 2); /* only queues 0 and 1 exist */
	assert_int_equal(vd_rd(d, 0x034), 0);
	vd_wr(d, 0x038, 16);
	vd_wr(d, 0x044, 1);
	assert_int_equal(vd_rd(d, 0x044), 0);
	vd_wr(d, 0x030, 0xffffffff);
	vd_wr(d, 0x080, 0x1234);
	assert_int_equal(vd_rd(d, 0x080), 0);
	vd_notify(d, 77); /* notify for a queue that does not exist */
	assert_int_equal(vd_rd(d, 0x070) & VIRTIO_STATUS_NEEDS_RESET, 0);
}

static void queue_regs_only_while_configuring(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;
	struct vq_config c = vqb_config(&f->b);

	/* Before FEATURES_OK: ignored. */
	vd_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	vd_wr(d, 0x030, 0);
	vd_wr(d, 0x038, 16);
	assert_int_equal(vd_rd(d, 0x038), 0);
	/* After DRIVER_OK: ignored. */
	assert_int_equal(vd_setup(d, F_V1, &c), STATUS_ALL);
	vd_wr(d, 0x080, 0x9000);
	assert_int_equal(vd_rd(d, 0x080), VQB_DESC);
	vd_wr(d, 0x044, 0);
	assert_int_equal(vd_rd(d, 0x044), 1);
}

static void bad_queue_needs_reset(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;
	struct vq_config c = vqb_config(&f->b);

	c.used = VQB_RAM - 8; /* used ring past the end of RAM */
	vd_setup(d, F_V1, &c);
	assert_true(vd_rd(d, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
	assert_true(vd_rd(d, 0x060) & VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(vd_rd(d, 0x044), 0);
	/* The driver resets and carries on with a good queue. */
	c = vqb_config(&f->b);
	assert_int_equal(vd_setup(d, F_V1, &c), STATUS_ALL);
}


/* Saves the transport after some traffic into *b. */
static void save_after_traffic(struct fx *f, struct sbuf *b)
{
	struct virtio_dev *d = &f->d.vdev;
	struct vq_config c = vqb_config(&f->b);
	const uint32_t lens[] = { 40 };
	const int w[] = { 0 };

	assert_int_equal(vd_setup(d, F_V1 | (1ull << VIRTIO_F_EVENT_IDX), &c), STATUS_ALL);
	vqb_chain(&f->b, 1, lens, w);
	vd_notify(d, 0);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_VRING);
	vd_wr(d, 0x064, VIRTIO_MMIO_INT_VRING);
	evloop_pause(&d->loop);
	sb_init(b);
	virtio_mmio_save(d, b);
	evloop_resume(&d->loop);
	assert_int_equal(b->err, 0);
}

/* A second device on the same guest memory, restored from the record. */
static int restore_into(struct fx *f, struct dummy *t, const uint8_t *rec, size_t len, const char **why)
{
	struct srd r;
	int e;

	memset(t, 0, sizeof(*t));
	assert_int_equal(virtio_mmio_init(&t->vdev, &dummy_ops, "clone", -1, &f->b.gm, 0xd0001000, 6,
					  (1ull << VIRTIO_F_EVENT_IDX) | (1ull << 3), t->config,
					  sizeof(t->config)), 0);
	sr_init(&r, rec, len);
	evloop_pause(&t->vdev.loop);
	e = virtio_mmio_restore(&t->vdev, &r, why);
	evloop_resume(&t->vdev.loop);
	if (!e && r.off != r.len)
		e = -EMSGSIZE;
	return e;
}

static void snapshot_roundtrip(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;
	struct dummy *t = calloc(1, sizeof(*t));
	const uint32_t lens[] = { 24 };
	const int w[] = { 0 };
	const char *why = NULL;
	struct sbuf b;
	unsigned q;

	save_after_traffic(f, &b);
	assert_int_equal(restore_into(f, t, b.p, b.len, &why), 0);
	assert_int_equal(atomic_load(&t->vdev.status), atomic_load(&d->status));
	assert_int_equal(t->vdev.driver_features, d->driver_features);
	for (q = 0; q < dummy_ops.nr_queues; q++) {
		assert_int_equal(t->vdev.q[q].ready, d->q[q].ready);
		assert_memory_equal(&t->vdev.q[q].cfg, &d->q[q].cfg, sizeof(d->q[q].cfg));
		assert_int_equal(t->vdev.q[q].vq.last_avail, d->q[q].vq.last_avail);
		assert_int_equal(t->vdev.q[q].vq.used_idx, d->q[q].vq.used_idx);
		assert_int_equal(t->vdev.q[q].vq.event_idx, d->q[q].vq.event_idx);
	}
	assert_int_equal(t->vdev.q[0].vq.used_idx, 1);
	/* The clone carries on where the original was: the next chain is
	 * served into used slot 1. */
	vqb_set_used_event(&f->b, 1); /* EVENT_IDX: interrupt after used slot 1 */
	vqb_chain(&f->b, 1, lens, w);
	virtio_mmio_restart(&t->vdev);
	assert_int_equal(vd_wait_irq(&t->vdev), VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vqb_used_idx(&f->b), 2);
	assert_int_equal(vqb_used(&f->b, 1).len, 24);
	virtio_mmio_destroy(&t->vdev);
	free(t);
	sb_free(&b);
}

/* Offsets in the record (virtio_mmio_save's order). */
#define REC_DEVICE_ID 0
#define REC_DRV_FEATURES 12
#define REC_STATUS 20
#define REC_ISR 36
#define REC_Q0 48              /* size u16, ready u8, desc u64, avail u64, used u64, ... */
#define REC_Q0_DESC (REC_Q0 + 3)
#define REC_Q0_LAST (REC_Q0 + 27)

static void put64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void snapshot_tampered_refused(void **state)
{
	struct fx *f = *state;
	struct dummy *t = calloc(1, sizeof(*t));
	struct sbuf b;
	uint8_t *rec;
	const char *why;
	static const struct {
		const char *what;
		unsigned off, len;
		uint64_t v;
	} cases[] = {
		{ "queue 0 outside guest RAM", REC_Q0_DESC, 8, 0xfffffffffffff000ull },
		{ "queue 0 crossing the end of RAM", REC_Q0_DESC, 8, VQB_RAM - 16 },
		{ "queue 0 misaligned", REC_Q0_DESC, 8, VQB_DESC + 8 },
		{ "queue size not a power of 2", REC_Q0, 2, 12 },
		{ "indices further apart than the queue", REC_Q0_LAST, 2, 100 },
		{ "status DRIVER_OK without FEATURES_OK", REC_STATUS, 4, 0x7 },
		{ "driver features never offered", REC_DRV_FEATURES, 8, 1ull << 40 },
		{ "another device type", REC_DEVICE_ID, 4, 7 },
		{ "undefined interrupt bits", REC_ISR, 4, 0x80 },
	};
	unsigned i;

	save_after_traffic(f, &b);
	rec = malloc(b.len);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(rec, b.p, b.len);
		if (cases[i].len == 8)
			put64(rec + cases[i].off, cases[i].v);
		else if (cases[i].len == 4)
			rec[cases[i].off] = (uint8_t)cases[i].v, rec[cases[i].off + 1] = (uint8_t)(cases[i].v >> 8),
			rec[cases[i].off + 2] = 0, rec[cases[i].off + 3] = 0;
		else
			rec[cases[i].off] = (uint8_t)cases[i].v, rec[cases[i].off + 1] = (uint8_t)(cases[i].v >> 8);
		why = NULL;
		if (restore_into(f, t, rec, b.len, &why) != -EINVAL)
			fail_msg("not refused: %s", cases[i].what);
		assert_non_null(why);
		/* Refused means untouched: the device is still reset. */
		assert_int_equal(atomic_load(&t->vdev.status), 0);
		assert_int_equal(t->vdev.q[0].ready, 0);
		virtio_mmio_destroy(&t->vdev);
	}
	/* Truncated anywhere: refused. */
	for (i = 0; i < b.len; i += 7) {
		if (restore_into(f, t, b.p, i, &why) == 0)
			fail_msg("a record cut at %u bytes was accepted", i);
		assert_int_equal(atomic_load(&t->vdev.status), 0);
		virtio_mmio_destroy(&t->vdev);
	}
	free(rec);
	free(t);
	sb_free(&b);
}

static void echo_and_guest_error(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;
	struct vq_config c = vqb_config(&f->b);
	const uint32_t lens[] = { 40 };
	const int w[] = { 0 };

	assert_int_equal(vd_setup(d, F_V1, &c), STATUS_ALL);
	vqb_chain(&f->b, 1, lens, w);
	vd_notify(d, 0);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vqb_used_idx(&f->b), 1);
	assert_int_equal(vqb_used(&f->b, 0).len, 40);
	/* A looped chain: the device fails, the transport survives. */
	vqb_set(&f->b, 5, VQB_DATA, 8, VIRTQ_DESC_F_NEXT, 5);
	vqb_publish(&f->b, 5);
	vd_notify(d, 0);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_CONFIG);
	assert_true(vd_rd(d, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
	assert_int_equal(vd_rd(d, 0x0fc), 1); /* config generation moved */
	/* While broken, notifications are not served. */
	{
		int before = atomic_load(&f->d.notified);

		vd_notify(d, 0);
		usleep(50000);
		assert_int_equal(atomic_load(&f->d.notified), before);
	}
	/* Reset and use it again. */
	vqb_destroy(&f->b);
	assert_int_equal(vqb_init(&f->b, 16), 0);
	d->gm = &f->b.gm;
	c = vqb_config(&f->b);
	assert_int_equal(vd_setup(d, F_V1, &c), STATUS_ALL);
	vqb_chain(&f->b, 1, lens, w);
	vd_notify(d, 0);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vqb_used_idx(&f->b), 1);
}

static void config_space_bounds(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;
	uint8_t b8 = 0;
	uint16_t b16 = 0;
	uint32_t b32 = 0xffffffff;
	uint64_t b64 = ~0ull;

	d->bus.ops->read(&d->bus, 0x100, &b8, 1);
	assert_int_equal(b8, 0xa0);
	d->bus.ops->read(&d->bus, 0x108, &b16, 2);
	assert_int_equal(b16, 0xa9a8);
	d->bus.ops->read(&d->bus, 0x108, &b32, 4); /* runs past the 10 bytes */
	assert_int_equal(b32, 0);
	d->bus.ops->read(&d->bus, 0x100 + 4000, &b64, 8);
	assert_int_equal(b64, 0);
	b8 = 0x77;
	d->bus.ops->write(&d->bus, 0x109, &b8, 1);
	assert_int_equal(f->d.last_cfg_write, 0x77);
	d->bus.ops->write(&d->bus, 0x10a, &b8, 1); /* past the end: dropped */
	virtio_config_changed(d);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(vd_rd(d, 0x0fc), 1);
}

static void pause_resume(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d = &f->d.vdev;
	struct vq_config c = vqb_config(&f->b);
	const uint32_t lens[] = { 8 };
	const int w[] = { 0 };
	struct pollfd p = { .fd = d->irq_fd, .events = POLLIN };

	assert_int_equal(vd_setup(d, F_V1, &c), STATUS_ALL);
	evloop_pause(&d->loop);
	vqb_chain(&f->b, 1, lens, w);
	vd_notify(d, 0);
	assert_int_equal(poll(&p, 1, 100), 0); /* paused: nothing served */
	assert_int_equal(vqb_used_idx(&f->b), 0);
	evloop_resume(&d->loop);
	assert_int_equal(vd_wait_irq(d), VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vqb_used_idx(&f->b), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(identity_registers, setup, teardown),
		cmocka_unit_test_setup_teardown(feature_masking, setup, teardown),
		cmocka_unit_test_setup_teardown(status_out_of_order, setup, teardown),
		cmocka_unit_test_setup_teardown(queue_sel_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(queue_regs_only_while_configuring, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_queue_needs_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(echo_and_guest_error, setup, teardown),
		cmocka_unit_test_setup_teardown(config_space_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(pause_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(snapshot_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(snapshot_tampered_refused, setup, teardown),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests_name("virtio_mmio", tests, NULL, NULL);
}
