/* Start-up phases of one VMM (docs/perf.md): where the time from process
 * start to a guest that answers goes. One `struct phases` hangs off each
 * VM (vm->cfg.phases is its copy of the start); nothing here is global.
 *
 * Each phase ends at a mark: the time since the VMM's start (t0, taken on
 * entry to the verb) when the mark was first reached. A phase's figure is
 * its mark minus the previous reached mark, so the figures add up to the
 * last mark. `pre_main` is apart: CPU time the process used before t0
 * (execve, the dynamic loader's relocations, constructors, main), from
 * CLOCK_PROCESS_CPUTIME_ID, since the kernel keeps no wall-clock start
 * finer than a clock tick. */
#ifndef VMM_PHASE_H
#define VMM_PHASE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum phase {
	PHASE_CLI,       /* options, the sandbox folder: t0 .. vm_create */
	PHASE_KVM,       /* /dev/kvm, its checks, KVM_CREATE_VM, irqchip, PIT */
	PHASE_MEMORY,    /* guest RAM (memfd, or the snapshot's file mapped) and its slots */
	PHASE_CPUID,     /* KVM_GET_SUPPORTED_CPUID and the MSR list (or their cache) */
	PHASE_VCPUS,     /* KVM_CREATE_VCPU, CPUID and MSRs set per vCPU */
	PHASE_DEVICES,   /* legacy and virtio-mmio devices, their threads */
	PHASE_LOAD,      /* kernel, initrd, boot tables, vCPU 0's boot registers;
			    on a restore: the device and vCPU state */
	PHASE_HANDOVER,  /* vm_create's end .. vm_run (helper, publish, jail) */
	PHASE_FIRST_RUN, /* vm_run .. vCPU 0's first KVM_RUN */
	PHASE_KERNEL,    /* .. guest-init's first read of the token window: the
			    kernel booted and started init (cold starts only) */
	PHASE_READY,     /* .. the guest says it is ready (boot marker or the
			    ready notice, docs/vsock.md) */
	PHASE_API,       /* .. the first API reply the helper got (restore: the sync) */
	PHASE_NR
};

/* KVM_RUN returns to the VMM, by kind (what the guest made the VMM do:
 * under nested KVM these are the exits one can count from userspace). */
enum phase_exit {
	PHASE_EXIT_IO,    /* port I/O: serial, the vmm port, the token window */
	PHASE_EXIT_MMIO,  /* virtio-mmio registers: notifies, config, status */
	PHASE_EXIT_INTR,  /* a signal kicked the vCPU (pause, stop) */
	PHASE_EXIT_OTHER, /* everything else (halts, system events, errors) */
	PHASE_EXIT_NR
};

struct phases {
	uint64_t t0_ns;                  /* log_now_ns() at the VMM's start */
	uint64_t pre_main_ns;            /* CPU time before t0 */
	_Atomic uint64_t at[PHASE_NR];   /* ns since t0 at the mark, 0: not reached */
	_Atomic uint64_t exits[PHASE_EXIT_NR]; /* since the first KVM_RUN */
};

/* This process's CPU time so far (the `pre_main` figure when called
 * first thing), 0 if the clock cannot be read. */
uint64_t phase_cpu_ns(void);
/* Starts the clock at t0_ns (log_now_ns()), nothing marked. */
void phase_init(struct phases *p, uint64_t t0_ns, uint64_t pre_main_ns);
/* Records the end of phase `ph` at `now_ns` (log_now_ns()), once: the
 * first mark wins (any thread). A mark at t0 itself counts as 1 ns. */
void phase_mark_at(struct phases *p, enum phase ph, uint64_t now_ns);
void phase_mark(struct phases *p, enum phase ph);
/* The phase's own length in ns (its mark minus the previous reached
 * mark), or 0 if it was not reached. */
uint64_t phase_len_ns(const struct phases *p, enum phase ph);
const char *phase_name(enum phase ph);
/* One line, "pre_main=U cli=U kvm=U ... total=U" in µs, unreached phases
 * left out; what `-v` logs and the benches parse. Its length (snprintf's). */
int phase_format(const struct phases *p, char *buf, size_t cap);
/* Counts one KVM_RUN return with this kvm_run exit_reason (any thread). */
void phase_count_exit(struct phases *p, uint32_t kvm_exit_reason);
/* "io=N mmio=N intr=N other=N": the exits so far. Its length (snprintf's). */
int phase_format_exits(const struct phases *p, char *buf, size_t cap);
/* Logs the line, and the exits so far in a second one if any were
 * counted (debug level), with a prefix. */
void phase_log(const struct phases *p, const char *what);

#endif
