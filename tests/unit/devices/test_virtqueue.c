/* Split virtqueue core against a hostile driver: every malformed ring or
 * chain must end in a refused pop (-EINVAL, the device then needs reset),
 * never an access outside guest RAM (run under ASan by `make asan`). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "tests/unit/vq_builder.h"

struct fx {
	struct vqb b;
	struct vq q;
	struct vq_chain c;
};

static int setup_n(void **state, uint16_t size, int indirect, int event_idx)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct vq_config cfg;
	const char *why = NULL;

	if (!f || vqb_init(&f->b, size))
		return -1;
	cfg = vqb_config(&f->b);
	if (vq_init(&f->q, &f->b.gm, &cfg, 256, event_idx, indirect, &why))
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state) { return setup_n(state, 16, 1, 0); }
static int setup_noind(void **state) { return setup_n(state, 16, 0, 0); }
static int setup_evidx(void **state) { return setup_n(state, 16, 1, 1); }

static int teardown(void **state)
{
	struct fx *f = *state;

	vqb_destroy(&f->b);
	free(f);
	return 0;
}

static int pop(struct fx *f, const char **why)
{
	*why = NULL;
	return vq_pop(&f->q, &f->c, why);
}

#define EXPECT_REFUSED(f)                               \
	do {                                            \
		const char *why_;                       \
		assert_int_equal(pop((f), &why_), -EINVAL); \
		assert_non_null(why_);                  \
	} while (0)

static void init_validation(void **state)
{
	struct vqb b;
	struct vq q;
	struct vq_config c;
	const char *why;

	(void)state;
	assert_int_equal(vqb_init(&b, 16), 0);
	c = vqb_config(&b);
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), 0);
	c.size = 0;
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	c.size = 24; /* not a power of 2 */
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	c.size = 512; /* above QueueNumMax */
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	c = vqb_config(&b);
	c.desc += 8; /* descriptor table must be 16-aligned */
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	c = vqb_config(&b);
	c.avail += 1;
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	c = vqb_config(&b);
	c.used += 2;
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	c = vqb_config(&b);
	c.used = VQB_RAM - 16; /* used ring runs past the end of RAM */
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	c = vqb_config(&b);
	c.desc = UINT64_MAX - 15; /* wraps */
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	c = vqb_config(&b);
	c.avail = 0xd0000000; /* not RAM at all */
	assert_int_equal(vq_init(&q, &b.gm, &c, 256, 0, 0, &why), -EINVAL);
	vqb_destroy(&b);
}

static void direct_chain(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16, 100, 1 };
	const int w[] = { 0, 0, 1 };
	struct vq_reader r;
	struct vq_writer wr;
	uint8_t buf[200];
	const char *why;
	uint16_t head = vqb_chain(&f->b, 3, lens, w);

	assert_true(vq_has_work(&f->q));
	assert_int_equal(pop(f, &why), 1);
	assert_int_equal(f->c.head, head);
	assert_int_equal(f->c.nr_read, 2);
	assert_int_equal(f->c.nr_write, 1);
	assert_int_equal(f->c.read_len, 116);
	assert_int_equal(f->c.write_len, 1);
	vq_reader_init(&r, &f->c);
	assert_int_equal(vq_read(&r, buf, sizeof(buf)), 116);
	assert_int_equal(buf[0], 0x10);
	assert_int_equal(buf[16], 0x11); /* second buffer follows seamlessly */
	vq_writer_init(&wr, &f->c);
	assert_int_equal(vq_write(&wr, "xy", 2), 1); /* only 1 writable byte */
	vq_push(&f->q, f->c.head, 1);
	assert_int_equal(vqb_used_idx(&f->b), 1);
	assert_int_equal(vqb_used(&f->b, 0).id, head);
	assert_int_equal(vqb_used(&f->b, 0).len, 1);
	assert_int_equal(pop(f, &why), 0); /* empty */
}

static void indirect_chain(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16, 512, 512, 1 };
	const int w[] = { 0, 1, 1, 1 };
	const char *why;
	struct vq_writer wr, tail;
	uint8_t st = 0x55;

	vqb_indirect(&f->b, 4, lens, w);
	assert_int_equal(pop(f, &why), 1);
	assert_int_equal(f->c.nr_read, 1);
	assert_int_equal(f->c.nr_write, 3);
	assert_int_equal(f->c.write_len, 1025);
	/* Split the status byte off the end, as virtio-blk does. */
	vq_writer_init(&wr, &f->c);
	assert_int_equal(vq_writer_split_tail(&wr, 1, &tail), 0);
	assert_int_equal(wr.left, 1024);
	assert_int_equal(vq_write(&tail, &st, 1), 1);
	assert_int_equal(f->c.buf[3].p[0], 0x55);
	assert_int_equal(vq_writer_split_tail(&wr, 2000, &tail), -ENOSPC);
}

static void indirect_not_negotiated(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16 };
	const int w[] = { 0 };

	vqb_indirect(&f->b, 1, lens, w);
	EXPECT_REFUSED(f);
}

static void indirect_rules(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16, 16 };
	const int w[] = { 0, 0 };
	uint16_t head;
	struct virtq_desc *t;

	/* NEXT together with INDIRECT. */
	head = vqb_indirect(&f->b, 2, lens, w);
	vqb_desc(&f->b, head)->flags |= VIRTQ_DESC_F_NEXT;
	EXPECT_REFUSED(f);
	/* Table length not a multiple of 16. */
	head = vqb_indirect(&f->b, 2, lens, w);
	vqb_desc(&f->b, head)->len = 20;
	EXPECT_REFUSED(f);
	/* Zero-length table. */
	head = vqb_indirect(&f->b, 2, lens, w);
	vqb_desc(&f->b, head)->len = 0;
	EXPECT_REFUSED(f);
	/* Nested indirect. */
	head = vqb_indirect(&f->b, 2, lens, w);
	t = gm_ptr(&f->b.gm, vqb_desc(&f->b, head)->addr, 32);
	t[1].flags |= VIRTQ_DESC_F_INDIRECT;
	EXPECT_REFUSED(f);
	/* Table outside RAM. */
	head = vqb_indirect(&f->b, 2, lens, w);
	vqb_desc(&f->b, head)->addr = VQB_RAM - 16;
	EXPECT_REFUSED(f);
	/* next index beyond the table. */
	head = vqb_indirect(&f->b, 2, lens, w);
	t = gm_ptr(&f->b.gm, vqb_desc(&f->b, head)->addr, 32);
	t[0].next = 2;
	EXPECT_REFUSED(f);
}

static void looped_direct(void **state)
{
	struct fx *f = *state;

	vqb_set(&f->b, 0, VQB_DATA, 16, VIRTQ_DESC_F_NEXT, 1);
	vqb_set(&f->b, 1, VQB_DATA, 16, VIRTQ_DESC_F_NEXT, 0);
	vqb_publish(&f->b, 0);
	EXPECT_REFUSED(f);
}

static void looped_self(void **state)
{
	struct fx *f = *state;

	vqb_set(&f->b, 3, VQB_DATA, 16, VIRTQ_DESC_F_NEXT, 3);
	vqb_publish(&f->b, 3);
	EXPECT_REFUSED(f);
}

static void looped_indirect(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16, 16, 16 };
	const int w[] = { 0, 0, 0 };
	uint16_t head = vqb_indirect(&f->b, 3, lens, w);
	struct virtq_desc *t = gm_ptr(&f->b.gm, vqb_desc(&f->b, head)->addr, 48);

	t[2].flags |= VIRTQ_DESC_F_NEXT;
	t[2].next = 0;
	EXPECT_REFUSED(f);
}

static void buffer_leaves_ram(void **state)
{
	struct fx *f = *state;

	/* Starts in RAM, ends 1 byte past it. */
	vqb_set(&f->b, 0, VQB_RAM - 16, 17, 0, 0);
	vqb_publish(&f->b, 0);
	EXPECT_REFUSED(f);
	/* addr + len wraps around 2^64. */
	vqb_set(&f->b, 1, UINT64_MAX - 7, 16, 0, 0);
	vqb_publish(&f->b, 1);
	EXPECT_REFUSED(f);
}

static void length_overflow(void **state)
{
	struct fx *f = *state;
	uint16_t i;

	/* Many descriptors over the same 512 KiB: the total passes 4 GiB. */
	for (i = 0; i < 15; i++)
		vqb_set(&f->b, i, 0, 512 * 1024, VIRTQ_DESC_F_NEXT, (uint16_t)(i + 1));
	vqb_set(&f->b, 15, 0, 512 * 1024, 0, 0);
	/* 16 * 512 KiB = 8 MiB is fine... */
	vqb_publish(&f->b, 0);
	{
		const char *why;

		assert_int_equal(pop(f, &why), 1);
		assert_int_equal(f->c.read_len, 16 * 512 * 1024);
	}
	/* ...but the same in 32-bit lengths near UINT32_MAX is refused. */
	vqb_set(&f->b, 0, 0, 0xfffff000u, VIRTQ_DESC_F_NEXT, 1);
	vqb_set(&f->b, 1, 0, 0xfffff000u, 0, 0);
	vqb_publish(&f->b, 0);
	EXPECT_REFUSED(f); /* (and each is outside the 1 MiB of RAM anyway) */
}

static void length_overflow_in_ram(void **state)
{
	/* A 32-bit overflow with buffers that are each inside RAM needs a
	 * big RAM: emulate with a large fake region. */
	struct vqb b;
	struct gm big;
	const struct gm_region r[1] = { { .gpa = 0, .size = 3ull << 30 } };
	struct vq q;
	struct vq_config c;
	static struct vq_chain ch;
	const char *why;

	(void)state;
	assert_int_equal(vqb_init(&b, 16), 0);
	assert_int_equal(gm_create(&big, r, 1), 0); /* sparse memfd: cheap */
	c = vqb_config(&b);
	/* Place the rings in the big memory instead. */
	assert_int_equal(vq_init(&q, &big, &c, 256, 0, 0, &why), 0);
	{
		struct virtq_desc *d = gm_ptr(&big, VQB_DESC, 16 * 3);
		uint16_t *avail = gm_ptr(&big, VQB_AVAIL, 6 + 32);

		d[0] = (struct virtq_desc){ .addr = 0, .len = 0x80000000u, .flags = VIRTQ_DESC_F_NEXT, .next = 1 };
		d[1] = (struct virtq_desc){ .addr = 0, .len = 0x80000000u, .flags = VIRTQ_DESC_F_NEXT, .next = 2 };
		d[2] = (struct virtq_desc){ .addr = 0, .len = 0x1000, .flags = 0, .next = 0 };
		avail[2] = 0;
		avail[1] = 1;
	}
	assert_int_equal(vq_pop(&q, &ch, &why), -EINVAL);
	assert_non_null(why);
	gm_destroy(&big);
	vqb_destroy(&b);
}

static void writable_before_readable(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16, 16 };
	const int w[] = { 1, 0 };

	vqb_chain(&f->b, 2, lens, w);
	EXPECT_REFUSED(f);
}

static void zero_length_skipped(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16, 0, 4 };
	const int w[] = { 0, 0, 1 };
	const char *why;

	vqb_chain(&f->b, 3, lens, w);
	assert_int_equal(pop(f, &why), 1);
	assert_int_equal(f->c.nr_read, 1);
	assert_int_equal(f->c.nr_write, 1);
}

static void avail_index_jump(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16 };
	const int w[] = { 0 };

	vqb_chain(&f->b, 1, lens, w);
	vqb_set_avail_idx(&f->b, 17); /* 17 new entries in a ring of 16 */
	EXPECT_REFUSED(f);
}

static void avail_index_wraps(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16 };
	const int w[] = { 0 };
	const char *why;
	unsigned i;

	/* Indices are free-running 16-bit counters: wrapping is normal. */
	f->q.last_avail = 65530;
	f->b.avail_idx = 65530;
	for (i = 0; i < 10; i++) {
		f->b.next_desc = 0;
		vqb_chain(&f->b, 1, lens, w);
		assert_int_equal(pop(f, &why), 1);
		vq_push(&f->q, f->c.head, 0);
	}
	assert_int_equal(f->q.last_avail, 4);
}

static void head_out_of_range(void **state)
{
	struct fx *f = *state;

	vqb_publish(&f->b, 16);
	EXPECT_REFUSED(f);
}

static void next_out_of_range(void **state)
{
	struct fx *f = *state;

	vqb_set(&f->b, 0, VQB_DATA, 16, VIRTQ_DESC_F_NEXT, 999);
	vqb_publish(&f->b, 0);
	EXPECT_REFUSED(f);
}

static void event_idx_notify(void **state)
{
	struct fx *f = *state;
	uint16_t *used_event = gm_ptr(&f->b.gm, VQB_AVAIL + 4 + 2 * 16, 2);
	uint16_t *avail_event = gm_ptr(&f->b.gm, VQB_USED + 4 + 8 * 16, 2);
	const uint32_t lens[] = { 16 };
	const int w[] = { 0 };
	const char *why;

	*used_event = 1; /* driver: interrupt me once used->idx passes 1 */
	vqb_chain(&f->b, 1, lens, w);
	assert_int_equal(pop(f, &why), 1);
	vq_push(&f->q, f->c.head, 0);
	assert_true(vq_should_notify(&f->q)); /* first time: always */
	vq_push(&f->q, 0, 0);                 /* used idx 1 -> 2: passes 1 */
	assert_true(vq_should_notify(&f->q));
	vq_push(&f->q, 0, 0);                 /* 2 -> 3: event 1 already passed */
	assert_false(vq_should_notify(&f->q));
	*used_event = 5;
	vq_push(&f->q, 0, 0);
	vq_push(&f->q, 0, 0);
	vq_push(&f->q, 0, 0);                 /* 3 -> 6 covers 5 */
	assert_true(vq_should_notify(&f->q));
	vq_set_avail_event(&f->q);
	assert_int_equal(*avail_event, f->q.last_avail);
}

static void no_interrupt_flag(void **state)
{
	struct fx *f = *state;
	uint16_t *flags = gm_ptr(&f->b.gm, VQB_AVAIL, 2);

	vq_push(&f->q, 0, 0);
	assert_true(vq_should_notify(&f->q));
	*flags = VIRTQ_AVAIL_F_NO_INTERRUPT;
	vq_push(&f->q, 0, 0);
	assert_false(vq_should_notify(&f->q));
}

static void iov_extraction(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 16, 300, 212, 1 };
	const int w[] = { 0, 1, 1, 1 };
	struct vq_writer wr, tail;
	struct vq_reader r;
	struct iovec iov[4];
	const char *why;
	uint8_t hdr[16];

	vqb_chain(&f->b, 4, lens, w);
	assert_int_equal(pop(f, &why), 1);
	vq_reader_init(&r, &f->c);
	assert_int_equal(vq_read(&r, hdr, 16), 16);
	assert_int_equal(vq_reader_iov(&r, 1, iov, 4), -EINVAL); /* nothing left */
	vq_writer_init(&wr, &f->c);
	assert_int_equal(vq_writer_split_tail(&wr, 1, &tail), 0);
	assert_int_equal(vq_writer_iov(&wr, 512, iov, 1), -E2BIG);
	vq_writer_init(&wr, &f->c);
	assert_int_equal(vq_writer_split_tail(&wr, 1, &tail), 0);
	assert_int_equal(vq_writer_iov(&wr, 512, iov, 4), 2);
	assert_int_equal(iov[0].iov_len, 300);
	assert_int_equal(iov[1].iov_len, 212);
	assert_int_equal(vq_writer_iov(&wr, 1, iov, 4), -EINVAL); /* status is not data */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(init_validation),
		cmocka_unit_test_setup_teardown(direct_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(indirect_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(indirect_not_negotiated, setup_noind, teardown),
		cmocka_unit_test_setup_teardown(indirect_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(looped_direct, setup, teardown),
		cmocka_unit_test_setup_teardown(looped_self, setup, teardown),
		cmocka_unit_test_setup_teardown(looped_indirect, setup, teardown),
		cmocka_unit_test_setup_teardown(buffer_leaves_ram, setup, teardown),
		cmocka_unit_test_setup_teardown(length_overflow, setup, teardown),
		cmocka_unit_test(length_overflow_in_ram),
		cmocka_unit_test_setup_teardown(writable_before_readable, setup, teardown),
		cmocka_unit_test_setup_teardown(zero_length_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(avail_index_jump, setup, teardown),
		cmocka_unit_test_setup_teardown(avail_index_wraps, setup, teardown),
		cmocka_unit_test_setup_teardown(head_out_of_range, setup, teardown),
		cmocka_unit_test_setup_teardown(next_out_of_range, setup, teardown),
		cmocka_unit_test_setup_teardown(event_idx_notify, setup_evidx, teardown),
		cmocka_unit_test_setup_teardown(no_interrupt_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(iov_extraction, setup, teardown),
	};

	return cmocka_run_group_tests_name("virtqueue", tests, NULL, NULL);
}
