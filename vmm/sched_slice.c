/* vmm/sched_slice.c: see sched_slice.h. */
#include "vmm/sched_slice.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ATTR_SIZE_VER1 56u
#define FLAG_RESET_ON_FORK 0x01ull

_Static_assert(sizeof(struct vmm_sched_attr) == ATTR_SIZE_VER1, "struct sched_attr, version 1");

int sched_slice_apply(struct vmm_sched_attr *a, uint64_t ns)
{
	if (a->policy != SCHED_OTHER && a->policy != SCHED_BATCH && a->policy != SCHED_IDLE)
		return 0;
	if (a->runtime == ns)
		return 0;
	a->size = ATTR_SIZE_VER1;
	/* Only reset-on-fork is kept: without the utilisation-clamp flags a
	 * fair thread's clamps stay as they are, whatever util_min/max say. */
	a->flags &= FLAG_RESET_ON_FORK;
	a->priority = 0;
	a->runtime = ns;
	a->deadline = 0;
	a->period = 0;
	return 1;
}

int sched_slice_set(uint64_t ns)
{
	struct vmm_sched_attr a;

	memset(&a, 0, sizeof(a));
	if (syscall(SYS_sched_getattr, 0, &a, ATTR_SIZE_VER1, 0) < 0)
		return -errno;
	if (!sched_slice_apply(&a, ns))
		return 1;
	if (syscall(SYS_sched_setattr, 0, &a, 0) < 0)
		return -errno;
	return 0;
}
