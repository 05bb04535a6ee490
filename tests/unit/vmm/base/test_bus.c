/* I/O bus: registration overlap checks and dispatch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "vmm/base/bus.h"

struct rec {
	struct bus_dev bus;
	uint64_t last_off;
	unsigned last_len;
	int writes;
};

static void rec_read(struct bus_dev *d, uint64_t off, void *data, unsigned len)
{
	struct rec *r = container_of(d, struct rec, bus);

	r->last_off = off;
	r->last_len = len;
	memset(data, 0x5a, len);
}

static void rec_write(struct bus_dev *d, uint64_t off, const void *data, unsigned len)
{
	struct rec *r = container_of(d, struct rec, bus);

	(void)data;
	r->last_off = off;
	r->last_len = len;
	r->writes++;
}

static const struct bus_ops rec_ops = { .read = rec_read, .write = rec_write };

static void overlap_and_dispatch(void **state)
{
	struct bus b = { 0 };
	struct rec a = { .bus = { .base = 0x100, .len = 8, .name = "a", .ops = &rec_ops } };
	struct rec c = { .bus = { .base = 0x104, .len = 8, .name = "c", .ops = &rec_ops } };
	struct rec d = { .bus = { .base = 0x108, .len = 8, .name = "d", .ops = &rec_ops } };
	struct rec bad = { .bus = { .base = UINT64_MAX - 2, .len = 8, .ops = &rec_ops } };
	uint8_t buf[4];
	uint32_t v = 0;

	(void)state;
	assert_int_equal(bus_add(&b, &a.bus), 0);
	assert_int_equal(bus_add(&b, &c.bus), -EEXIST);
	assert_int_equal(bus_add(&b, &d.bus), 0);
	assert_int_equal(bus_add(&b, &bad.bus), -EINVAL);

	assert_int_equal(bus_access(&b, 0x10a, buf, 2, 0), 0);
	assert_int_equal(d.last_off, 2);
	assert_int_equal(buf[0], 0x5a);
	assert_int_equal(bus_access(&b, 0x101, &v, 4, 1), 0);
	assert_int_equal(a.writes, 1);
	assert_int_equal(a.last_off, 1);
	/* Access that starts in a device but runs past its end: not taken. */
	assert_int_equal(bus_access(&b, 0x106, &v, 4, 1), -ENOENT);
	assert_int_equal(a.writes, 1);
	/* Unclaimed read: all ones. */
	assert_int_equal(bus_access(&b, 0x200, buf, 4, 0), -ENOENT);
	assert_int_equal(buf[3], 0xff);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(overlap_and_dispatch),
	};

	return cmocka_run_group_tests_name("bus", tests, NULL, NULL);
}
