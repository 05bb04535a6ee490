/* Start-up phases (vmm/phase.c): marks, lengths and the -v line. Times
 * are given to phase_mark_at, never read from the clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "vmm/phase.h"

#include <linux/kvm.h>

#define T0 1000000000ull
#define US 1000ull

static void lengths_are_from_the_previous_reached_mark(void **state)
{
	struct phases p;

	(void)state;
	phase_init(&p, T0, 2900 * US);
	phase_mark_at(&p, PHASE_CLI, T0 + 100 * US);
	phase_mark_at(&p, PHASE_KVM, T0 + 350 * US);
	/* PHASE_MEMORY never reached: CPUID's length runs from KVM's mark */
	phase_mark_at(&p, PHASE_CPUID, T0 + 400 * US);
	assert_int_equal(phase_len_ns(&p, PHASE_CLI), 100 * US);
	assert_int_equal(phase_len_ns(&p, PHASE_KVM), 250 * US);
	assert_int_equal(phase_len_ns(&p, PHASE_MEMORY), 0);
	assert_int_equal(phase_len_ns(&p, PHASE_CPUID), 50 * US);
	assert_int_equal(phase_len_ns(&p, PHASE_NR), 0);
}

static void first_mark_wins(void **state)
{
	struct phases p;

	(void)state;
	phase_init(&p, T0, 0);
	phase_mark_at(&p, PHASE_READY, T0 + 7 * US);
	phase_mark_at(&p, PHASE_READY, T0 + 9 * US);
	assert_int_equal(phase_len_ns(&p, PHASE_READY), 7 * US);
	/* a mark at (or before) t0 still counts as reached */
	phase_mark_at(&p, PHASE_CLI, T0);
	assert_int_equal(atomic_load(&p.at[PHASE_CLI]), 1);
	assert_int_equal(phase_len_ns(&p, PHASE_CLI), 1);
	assert_int_equal(phase_len_ns(&p, PHASE_READY), 7 * US - 1);
	/* out of range marks are ignored */
	phase_mark_at(&p, PHASE_NR, T0 + 1);
}

static void format_lists_reached_phases_in_us(void **state)
{
	struct phases p;
	char buf[256];
	int n;

	(void)state;
	phase_init(&p, T0, 2900 * US);
	phase_mark_at(&p, PHASE_CLI, T0 + 100 * US);
	phase_mark_at(&p, PHASE_LOAD, T0 + 1600 * US);
	phase_mark_at(&p, PHASE_FIRST_RUN, T0 + 1700 * US);
	n = phase_format(&p, buf, sizeof(buf));
	assert_string_equal(buf, "pre_main=2900 cli=100 load=1500 first_run=100 total=1700");
	assert_int_equal(n, (int)strlen(buf));
	/* too small a buffer: truncated, the full length returned */
	assert_int_equal(phase_format(&p, buf, 10), n);
	assert_string_equal(buf, "pre_main=");
	assert_string_equal(phase_name(PHASE_FIRST_RUN), "first_run");
	assert_string_equal(phase_name(PHASE_NR), "?");
	/* the guest's share split at the kernel-up mark */
	phase_mark_at(&p, PHASE_KERNEL, T0 + 2700 * US);
	phase_mark_at(&p, PHASE_READY, T0 + 3000 * US);
	phase_format(&p, buf, sizeof(buf));
	assert_string_equal(buf, "pre_main=2900 cli=100 load=1500 first_run=100 kernel=1000 ready=300 total=3000");
	assert_string_equal(phase_name(PHASE_KERNEL), "kernel");
}

static void exits_are_counted_by_kind(void **state)
{
	struct phases p;
	char buf[128];

	(void)state;
	phase_init(&p, T0, 0);
	phase_format_exits(&p, buf, sizeof(buf));
	assert_string_equal(buf, "io=0 mmio=0 intr=0 other=0");
	phase_count_exit(&p, KVM_EXIT_IO);
	phase_count_exit(&p, KVM_EXIT_IO);
	phase_count_exit(&p, KVM_EXIT_MMIO);
	phase_count_exit(&p, KVM_EXIT_MMIO);
	phase_count_exit(&p, KVM_EXIT_MMIO);
	phase_count_exit(&p, KVM_EXIT_INTR);
	phase_count_exit(&p, KVM_EXIT_HLT);
	phase_count_exit(&p, KVM_EXIT_SYSTEM_EVENT);
	phase_format_exits(&p, buf, sizeof(buf));
	assert_string_equal(buf, "io=2 mmio=3 intr=1 other=2");
	/* phase_init starts the counts again */
	phase_init(&p, T0, 0);
	assert_int_equal(p.exits[PHASE_EXIT_MMIO], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lengths_are_from_the_previous_reached_mark),
		cmocka_unit_test(first_mark_wins),
		cmocka_unit_test(format_lists_reached_phases_in_us),
		cmocka_unit_test(exits_are_counted_by_kind),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
