/* vmm/base/thread.h: how the VMM starts its threads (vCPUs, device and control
 * event loops, the shutdown helper).
 *
 * Each gets a stack of VMM_THREAD_STACK, chosen rather than inherited from
 * RLIMIT_STACK (8 MiB by default). The deepest chain these threads run
 * is a snapshot from the control loop, about 150 KiB (-fstack-usage:
 * control_handle, fcapi_put_snapshot_create, vm_snapshot_ex and
 * snap_copy_fd's 64 KiB buffer); 1 MiB leaves room for ASan's redzones.
 * A stack below 2 MiB also cannot take a transparent huge page: with THP
 * "always", an 8 MiB stack's first touch sometimes brought in a whole
 * 2 MiB page, which showed as 2 MiB more RSS in one VMM out of a few
 * (docs/perf.md, section 9). */
#ifndef VMM_THREAD_H
#define VMM_THREAD_H

#include <pthread.h>
#include <sys/prctl.h>

#define VMM_THREAD_STACK (1u << 20)

/* pthread_create with the VMM's stack size; detached if asked. Returns 0
 * or a positive error number, as pthread_create. */
static inline int vmm_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, int detached)
{
	pthread_attr_t attr;
	int r;

	if ((r = pthread_attr_init(&attr)))
		return r;
	r = pthread_attr_setstacksize(&attr, VMM_THREAD_STACK);
	if (!r && detached)
		r = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!r)
		r = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return r;
}

/* Names the calling thread ("vcpu0", a device's loop...) for ps -T, top -H,
 * perf and /proc/PID/task/TID/comm; at most 15 characters are kept. Call
 * it first thing in a thread that vmm_thread_start made: such a thread
 * is started by the main thread, before any seccomp filter or under the
 * main one, and both allow PR_SET_NAME (vmm/seccomp.c); the filters of
 * the other thread-starting classes (publish, egress) do not. */
static inline void vmm_thread_name(const char *name)
{
	(void)prctl(PR_SET_NAME, name, 0, 0, 0);
}

#endif
