/* MP table: checksums, entries, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "vmm/mptable.h"

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

static void build_and_check(unsigned cpus)
{
	static uint8_t buf[65536];
	const uint64_t gpa = 0xf0000;
	uint16_t len, count;
	uint32_t physptr;
	const uint8_t *cfg, *p;
	unsigned i, procs = 0, bsp = 0, intsrc = 0;
	int n;

	memset(buf, 0xcc, sizeof(buf));
	n = mptable_build(buf, sizeof(buf), gpa, cpus, 0x806f0, 0x1f8bfbff);
	assert_int_equal(n, (int)mptable_size(cpus));
	assert_memory_equal(buf, "_MP_", 4);
	assert_int_equal(sum(buf, 16), 0);
	memcpy(&physptr, buf + 4, 4);
	assert_int_equal(physptr, gpa + 16);
	cfg = buf + (physptr - gpa);
	assert_memory_equal(cfg, "PCMP", 4);
	memcpy(&len, cfg + 4, 2);
	memcpy(&count, cfg + 34, 2);
	assert_int_equal(sum(cfg, len), 0);
	assert_true(16u + len <= (unsigned)n);
	p = cfg + 44;
	for (i = 0; i < count; i++) {
		switch (p[0]) {
		case 0:
			assert_int_equal(p[1], procs); /* APIC IDs 0..n-1 */
			if (p[3] & 2)
				bsp++;
			assert_true(p[3] & 1);
			procs++;
			p += 20;
			break;
		case 2:
			assert_int_equal(p[1], cpus); /* IOAPIC ID after the CPUs */
			p += 8;
			break;
		case 3:
			intsrc++;
			p += 8;
			break;
		default:
			p += 8;
		}
	}
	assert_ptr_equal(p, cfg + len);
	assert_int_equal(procs, cpus);
	assert_int_equal(bsp, 1);
	assert_int_equal(intsrc, MPTABLE_IOAPIC_PINS);
}

static void one_cpu(void **state)
{
	(void)state;
	build_and_check(1);
}

static void many_cpus(void **state)
{
	(void)state;
	build_and_check(2);
	build_and_check(64);
	build_and_check(MPTABLE_MAX_CPUS);
}

static void limits(void **state)
{
	static uint8_t buf[4096];

	(void)state;
	assert_int_equal(mptable_build(buf, sizeof(buf), 0xf0000, 0, 0, 0), -EINVAL);
	assert_int_equal(mptable_build(buf, sizeof(buf), 0xf0000, MPTABLE_MAX_CPUS + 1, 0, 0), -EINVAL);
	assert_int_equal(mptable_build(buf, 256, 0xf0000, 8, 0, 0), -ENOSPC);
	assert_int_equal(mptable_build(buf, 4096, UINT32_MAX - 10, 1, 0, 0), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_cpu),
		cmocka_unit_test(many_cpus),
		cmocka_unit_test(limits),
	};

	return cmocka_run_group_tests_name("mptable", tests, NULL, NULL);
}
