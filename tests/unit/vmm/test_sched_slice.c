/* tests/unit/vmm/test_sched_slice.c: what the vCPU threads' slice request
 * keeps and changes (vmm/sched_slice.h), and that the running kernel takes
 * it when it supports custom slices. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmm/sched_slice.h"

static void fair_policies_get_the_slice(void **state)
{
	int pol[] = { SCHED_OTHER, SCHED_BATCH, SCHED_IDLE };
	unsigned i;

	(void)state;
	for (i = 0; i < 3; i++) {
		struct vmm_sched_attr a = { .size = 56, .policy = (uint32_t)pol[i], .nice = 7, .util_max = 1024 };

		assert_int_equal(sched_slice_apply(&a, 100000000), 1);
		assert_int_equal(a.policy, pol[i]);
		assert_int_equal(a.nice, 7); /* an operator's nice stays */
		assert_int_equal(a.runtime, 100000000);
		assert_int_equal(a.size, 56);
	}
}

static void realtime_and_deadline_are_left_alone(void **state)
{
	struct vmm_sched_attr fifo = { .size = 56, .policy = SCHED_FIFO, .priority = 10 };
	struct vmm_sched_attr rr = { .size = 56, .policy = SCHED_RR, .priority = 3 };
	struct vmm_sched_attr dl = { .size = 56, .policy = 6 /* SCHED_DEADLINE */, .runtime = 5, .deadline = 10, .period = 10 };
	struct vmm_sched_attr before = dl;

	(void)state;
	assert_int_equal(sched_slice_apply(&fifo, 100000000), 0);
	assert_int_equal(fifo.runtime, 0);
	assert_int_equal(sched_slice_apply(&rr, 100000000), 0);
	assert_int_equal(sched_slice_apply(&dl, 100000000), 0);
	assert_memory_equal(&dl, &before, sizeof(dl));
}

static void flags_other_than_reset_on_fork_are_dropped(void **state)
{
	/* what sched_getattr may report: reset-on-fork, and clamp values */
	struct vmm_sched_attr a = { .size = 56, .flags = 0x01 | 0x20 | 0x40 | 0x08, .util_min = 0, .util_max = 1024 };

	(void)state;
	assert_int_equal(sched_slice_apply(&a, 5000000), 1);
	assert_int_equal(a.flags, 0x01);
}

static void the_same_slice_is_not_set_again(void **state)
{
	struct vmm_sched_attr a = { .size = 56, .policy = SCHED_OTHER, .runtime = 100000000 };

	(void)state;
	assert_int_equal(sched_slice_apply(&a, 100000000), 0);
}

static uint64_t read_slice(void)
{
	struct vmm_sched_attr a;

	memset(&a, 0, sizeof(a));
	if (syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0) < 0)
		return (uint64_t)-1;
	return a.runtime;
}

static void *child_slice(void *arg)
{
	*(uint64_t *)arg = read_slice();
	return NULL;
}

/* On a kernel with custom slices (6.12+), the thread gets it and a thread
 * it creates afterwards inherits it (what vm_run relies on). */
static void the_kernel_takes_it_and_threads_inherit_it(void **state)
{
	uint64_t inherited = 0;
	pthread_t t;
	int r;

	(void)state;
	r = sched_slice_set(20000000);
	if (r == -EPERM || r == -ENOSYS) {
		print_message("      skipped: sched_setattr not allowed here (%s)\n", strerror(-r));
		return;
	}
	assert_int_equal(r, 0);
	if (read_slice() != 20000000) {
		print_message("      skipped: this kernel has no custom fair slices (before 6.12)\n");
		return;
	}
	assert_int_equal(sched_slice_set(20000000), 1); /* already so */
	assert_int_equal(pthread_create(&t, NULL, child_slice, &inherited), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(inherited, 20000000);
	assert_int_equal(sched_slice_set(0), 0); /* back to the default */
	assert_int_not_equal(read_slice(), 20000000); /* 6.18 reports the default's value */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fair_policies_get_the_slice),
		cmocka_unit_test(realtime_and_deadline_are_left_alone),
		cmocka_unit_test(flags_other_than_reset_on_fork_are_dropped),
		cmocka_unit_test(the_same_slice_is_not_set_again),
		cmocka_unit_test(the_kernel_takes_it_and_threads_inherit_it),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
