/* Giving back what start-up touched and will not touch again: the heap's
 * free pages and the main thread's stack below the caller. A restored
 * clone's set-up (snapshot parsing, device state, kernel checks) runs deep
 * on the main stack and through the heap once; those pages otherwise stay
 * resident in every idle clone (docs/perf.md, "Density"). */
#ifndef VMM_BASE_MEMTRIM_H
#define VMM_BASE_MEMTRIM_H

#include <stddef.h>

/* Main thread, before the seccomp filters (it reads /proc/self/maps, or
 * without /proc, in a jail, probes with mincore: mem_stack_low_probe):
 * malloc_trim, then MADV_DONTNEED on the main thread's stack from the
 * bottom of its mapping to `keep` bytes below the caller's frame (the
 * frames below are dead; the kernel gives zeroed pages if they are
 * reached again). Returns the KiB of stack released (0: nothing found),
 * or -errno; the heap's part is not counted (malloc_trim does not say). */
long mem_trim_startup(size_t keep);

/* The stack mapping ("[stack]") that holds `addr`, from a
 * /proc/PID/maps text: 0 and *lo, *hi, or -ENOENT (exposed for tests). */
int mem_stack_range(const char *maps, unsigned long addr, unsigned long *lo, unsigned long *hi);

/* How far below a stack address mem_stack_low_probe looks: the main
 * stack stays far smaller, and Linux keeps at least 128 MiB free below
 * the stack's top for it to grow into (mm/util.c, mmap_base's gap). */
#define MEMTRIM_PROBE_SPAN (8ul << 20)
/* The bottom of the mapping holding `addr` (a stack), found without
 * /proc: mincore fails with ENOMEM on a page no mapping holds, so a
 * binary search between addr and MEMTRIM_PROBE_SPAN below it, which must
 * be unmapped, finds where the mapping starts. 0 and *lo, or -ENOENT. */
int mem_stack_low_probe(unsigned long addr, unsigned long *lo);

#endif
