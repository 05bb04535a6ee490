/* The helper process of vmm run/restore/start (docs/cli.md): while the
 * VMM runs the VM, a child of it waits for the sandbox (the boot marker on
 * a fresh boot, a clone's ready notice), gives a restored guest the time,
 * fresh entropy and its new network settings (the sync), shows the boot
 * status line, runs `-- CMD` and powers the sandbox off. Then the VMM's
 * exit status from how the VM and the helper ended. */
#ifndef CLI_RUN_HELPER_H
#define CLI_RUN_HELPER_H

#include <stdint.h>
#include <sys/types.h>

#include "cli/sandbox/sandbox.h"

struct vm;

/* What happens next to the VM, in a child process while this one runs it:
 * wait for the API (after the boot marker on a fresh boot), give a restored
 * guest the time and fresh entropy, run CMD and power off. */
struct helper {
	const struct sandbox_addr *a;
	const char *const *nets;     /* restore: interfaces the guest reconfigures */
	unsigned nr_nets;
	const char *synced;          /* created once a restored guest took the sync */
	unsigned egress_port;        /* restore: the guest side of the egress proxy; 0: none */
	const struct exec_opts *cmd; /* NULL: none */
	int restored;
	int seccomp;                 /* the child runs under SC_HELPER (vmm/seccomp.h) */
	unsigned long ready_s;
	int notify_fd;               /* -d: written once the sandbox is ready (after a
					clone's sync), for the parent waiting; -1 */
	int ready_rd;                /* the VMM's copy of the boot marker pipe's
					read end, or -1: a helper that is gone
					must not make the marker a SIGPIPE */
	int status_on, status_tty;   /* the boot status line (cli/launch/boot_status.h) */
	uint64_t t0_ns;              /* the VMM's start, for its elapsed time */
	const char *name;            /* the sandbox's */
};

/* Forks the helper (*child) and points vm->marker_fd at its pipe; the stop
 * signals stay blocked in the VMM from here (vm_run takes them over).
 * 0, or -1 (logged). */
int helper_start(struct vm *vm, struct helper *h, pid_t *child);
/* Runs the VM to its end, then the helper's; the VMM's exit status (with a
 * command, the command's). */
int helper_run_vm(struct vm *vm, struct helper *h, pid_t child);

#endif
