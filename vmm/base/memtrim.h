/* Giving back what start-up touched and will not touch again: the heap's
 * free pages and the main thread's stack below the caller. A restored
 * clone's set-up (snapshot parsing, device state, kernel checks) runs deep
 * on the main stack and through the heap once; those pages otherwise stay
 * resident in every idle clone (docs/perf.md, "Density"). */
#ifndef VMM_BASE_MEMTRIM_H
#define VMM_BASE_MEMTRIM_H

#include <stddef.h>

/* Main thread, before the seccomp filters (it reads /proc/self/maps):
 * malloc_trim, then MADV_DONTNEED on the main thread's stack from the
 * bottom of its mapping to `keep` bytes below the caller's frame (the
 * frames below are dead; the kernel gives zeroed pages if they are
 * reached again). Returns the KiB of stack released (0: nothing found),
 * or -errno; the heap's part is not counted (malloc_trim does not say). */
long mem_trim_startup(size_t keep);

/* The stack mapping ("[stack]") that holds `addr`, from a
 * /proc/PID/maps text: 0 and *lo, *hi, or -ENOENT (exposed for tests). */
int mem_stack_range(const char *maps, unsigned long addr, unsigned long *lo, unsigned long *hi);

#endif
