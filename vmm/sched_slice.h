/* vmm/sched_slice.h: a longer CPU time slice for the vCPU threads where the
 * host's KVM emulates guest ring 0 (kvm_pvm).
 *
 * There every guest timer tick is emulated kernel code, thousands of
 * instructions at ~1.2 M/s. A vCPU that waits for a host CPU does not
 * save its ticks: the first one due is handled when it runs again, so
 * with the default slice (~1.4 ms on 2 CPUs) and more busy vCPUs than
 * cores, a growing part of each slice goes to ticks. Linux 6.12's EEVDF
 * lets a fair-class thread ask for its own slice (sched_attr.sched_runtime,
 * 0.1-100 ms, no privilege needed); the VMM asks for 100 ms before it
 * starts the vCPU threads, which inherit it. Measured: 8 restores at once
 * on 2 cores, docs/perf.md section 14.
 *
 * Only a fair policy (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE) is touched,
 * with its policy, nice value, reset-on-fork and utilisation clamps kept:
 * an operator's `nice` or `chrt` still holds. Kernels before 6.12 take the
 * call and ignore the slice. */
#ifndef VMM_SCHED_SLICE_H
#define VMM_SCHED_SLICE_H

#include <stdint.h>

#define VMM_VCPU_SLICE_EMULATING_NS (100ull * 1000 * 1000)

/* struct sched_attr, its first version (SCHED_ATTR_SIZE_VER1, 56 bytes). */
struct vmm_sched_attr {
	uint32_t size;
	uint32_t policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime; /* the fair class's slice, in ns (0: the default) */
	uint64_t deadline;
	uint64_t period;
	uint32_t util_min;
	uint32_t util_max;
};

/* Turns `a`, as sched_getattr read it, into what sched_setattr should get
 * for a slice of `ns`. Returns 1 if it should be set, 0 to leave the
 * thread alone (not a fair policy, or the slice is already that). */
int sched_slice_apply(struct vmm_sched_attr *a, uint64_t ns);

/* The calling thread (and threads it creates afterwards): 0, 1 if left
 * alone, or -errno. */
int sched_slice_set(uint64_t ns);

#endif
