/* seccomp: one allow-list of system calls per thread class, as raw
 * classic-BPF programs (docs/security.md says why not libseccomp).
 *
 * Each VMM thread installs its own filter itself, at its start and before
 * the guest runs its first instruction: vCPU threads before their first
 * KVM_RUN, device loops when vm_run asks them to (evloop_lockdown), the
 * main thread in vm_run before it starts the vCPUs, published-port and
 * egress proxy threads when they start, the CLI's helper child right
 * after its fork. A call outside the list traps (SECCOMP_RET_TRAP): the
 * SIGSYS handler writes one line naming the thread class and the call, and
 * ends the process with status 128 + SIGSYS (159). */
#ifndef VMM_SECCOMP_H
#define VMM_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>

enum sc_class {
	SC_VCPU,    /* KVM_RUN and the exits it dispatches to devices */
	SC_DEVICE,  /* a virtio device's event loop: queues and backend */
	SC_MAIN,    /* vm_run's thread: console, control socket, snapshots, teardown */
	SC_PUBLISH, /* published-port threads: TCP accept, vsock API connects */
	SC_FS,      /* a virtio-fs device's loop: the device list plus the FUSE
		       server's file calls on its shared directory */
	SC_EGRESS,  /* the egress proxy's threads: vsock-side accept, name
		       lookups, TCP + TLS to the upstreams, egress.log */
	SC_HELPER,  /* the CLI's helper child (a process): the guest API over
		       the vsock Unix socket, the terminal, the synced marker */
	SC_NR_CLASSES,
};

/* On by default, except in ASan builds: LeakSanitizer's exit-time scan
 * clones a tracer that ptraces every thread, which per-thread allow-lists
 * forbid (docs/security.md). test_seccomp still runs under ASan. */
#if defined(__SANITIZE_ADDRESS__)
#define SC_DEFAULT_ON 0
#else
#define SC_DEFAULT_ON 1
#endif

/* Room for the longest program any class assembles. */
#define SC_MAX_INSNS 512

const char *sc_class_name(enum sc_class c);

/* Assembles class c's program into prog[0..max). Pure (no system call):
 * returns the number of instructions, or -E2BIG / -EINVAL. */
int sc_build(enum sc_class c, struct sock_filter *prog, size_t max)
	__attribute__((warn_unused_result));

/* Once per process, first thing in main(), before any thread exists:
 * pins every thread to glibc's main arena (mallopt(M_ARENA_MAX, 1)), so
 * that no malloc, free or realloc under a filter reaches glibc's lazy
 * per-arena probes (an open of /proc/sys/vm/overcommit_memory on a heap's
 * first shrink, sched_getaffinity past eight arenas; seccomp.c,
 * quiet_calls). 0, or -EINVAL if the C library refused. Does nothing in
 * ASan builds (the sanitizer's allocator has no arenas). */
int sc_process_init(void) __attribute__((warn_unused_result));

/* In the calling thread: PR_SET_NO_NEW_PRIVS, the SIGSYS handler (process
 * wide, idempotent), SIGSYS unblocked, then class c's filter. 0 or -errno. */
int sc_install(enum sc_class c) __attribute__((warn_unused_result));

/* The name of system call nr (x86-64), or NULL. Async-signal-safe. */
const char *sc_syscall_name(long nr);

/* Debug hook, live only in test builds (seccomp.c compiled with
 * -DVMM_TEST_HOOKS: build/vmm-test): if VMM_TEST_SECCOMP_VIOLATE names
 * class c ("vcpu", "device", "main", "publish", "egress", "helper"), the
 * calling thread makes a system call its list forbids. Elsewhere it does nothing. */
void sc_test_violate(enum sc_class c);

#endif
