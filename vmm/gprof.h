/* Guest RIP sampling (docs/perf.md, section 13): with
 * VMM_GUEST_PROFILE=PATH in the environment, a timer on the VMM process's
 * CPU time sends the vCPU kick signal every millisecond of it (CPU-time
 * timers are checked at the host's tick: at 250 Hz, every 4 ms); the vCPU
 * thread it interrupts reads the guest's RIP (KVM_GET_REGS), and when the
 * VM ends PATH gets one line per sample: "MICROSECONDS_SINCE_VMM_START
 * VCPU RIP", hex. bench/guest-profile turns that into functions of the
 * guest's vmlinux. An idle VMM adds no samples; where guest ring 0 is
 * emulated (kvm_pvm) its CPU time is close to an instruction count. With
 * several vCPUs the signal goes to any of them that is in KVM_RUN.
 *
 * The timer is made before the seccomp filters (which do not allow
 * timer_create), by the main thread, which blocks the kick signal: only
 * vCPU threads take it. */
#ifndef VMM_GPROF_H
#define VMM_GPROF_H

#include <stdint.h>

struct gprof;

/* NULL on failure (logged): the VMM runs on without samples. */
struct gprof *gprof_open(const char *path, uint64_t t0_ns, int signo);
/* A vCPU thread, after KVM_RUN came back interrupted: one sample. */
void gprof_sample(struct gprof *p, unsigned vcpu, int vcpu_fd);
/* After the vCPU threads ended: writes the samples and frees p (the timer
 * is left to the process's end: timer_delete is not in the filters, and
 * its signal is blocked where no vCPU runs). */
void gprof_close(struct gprof *p);

#endif
