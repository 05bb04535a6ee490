/* A VM's exit and its guest's progress marks (vm.h): the exit reasons and
 * their exit statuses, vm_request_exit (how a vCPU thread, a device, the
 * control socket or standby asks the main thread to stop the VM), and the
 * kernel-up and ready marks. A leaf under the VM's other files: vm_run.c,
 * vcpu.c, vm_pause.c and standby.c all reach it, and it reaches none of
 * them. */
#include "vmm/vm.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int vm_exit_status(enum vm_exit_reason r, int signo)
{
	switch (r) {
	case VM_EXIT_POWEROFF:
	case VM_EXIT_STOPPED:
	case VM_EXIT_EXPIRED:
	case VM_EXIT_STANDBY:
		return 0;
	case VM_EXIT_REBOOT:
		return 3;
	case VM_EXIT_TRIPLE_FAULT:
		return 4;
	case VM_EXIT_KVM_ERROR:
		return 5;
	case VM_EXIT_CRASH:
		return 6;
	case VM_EXIT_CONSOLE:
		return 7;
	case VM_EXIT_SIGNAL:
		return 128 + signo;
	case VM_EXIT_VMM_ERROR:
	case VM_RUNNING:
	default:
		return 1;
	}
}

const char *vm_exit_reason_name(enum vm_exit_reason r)
{
	static const char *const names[] = {
		[VM_RUNNING] = "running",
		[VM_EXIT_POWEROFF] = "poweroff",
		[VM_EXIT_REBOOT] = "reboot",
		[VM_EXIT_TRIPLE_FAULT] = "triple-fault",
		[VM_EXIT_KVM_ERROR] = "kvm-error",
		[VM_EXIT_CRASH] = "crash",
		[VM_EXIT_VMM_ERROR] = "vmm-error",
		[VM_EXIT_SIGNAL] = "signal",
		[VM_EXIT_CONSOLE] = "console-escape",
		[VM_EXIT_STOPPED] = "stopped",
		[VM_EXIT_EXPIRED] = "expired",
		[VM_EXIT_STANDBY] = "standby",
	};

	if ((unsigned)r < sizeof(names) / sizeof(names[0]) && names[r])
		return names[r];
	return "unknown";
}

void vm_request_exit(struct vm *vm, enum vm_exit_reason r, const char *fmt, ...)
{
	int expected = VM_RUNNING;
	uint64_t one = 1;
	va_list ap;

	if (!atomic_compare_exchange_strong(&vm->exit_reason, &expected, (int)r))
		return;
	va_start(ap, fmt);
	vsnprintf(vm->exit_msg, sizeof(vm->exit_msg), fmt, ap);
	va_end(ap);
	if (write(vm->exit_efd, &one, sizeof(one)) < 0) {
		/* cannot fail for a fresh eventfd; vm_run also polls exit_reason */
	}
	/* Parked vCPUs look at exit_reason when woken. */
	pthread_mutex_lock(&vm->pause_lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
}

void vm_kernel_up(struct vm *vm)
{
	int expected = 0;

	if (!atomic_compare_exchange_strong(&vm->kernel_up, &expected, 1))
		return;
	/* A restored guest-init may read the token again: that is no kernel
	 * boot (and a mark after `ready` would make that phase's length 0). */
	if (!vm->cfg.restore && !atomic_load(&vm->phases.at[PHASE_READY]))
		phase_mark(&vm->phases, PHASE_KERNEL);
	if (vm->marker_fd >= 0 && write(vm->marker_fd, "K", 1) < 0)
		log_debug("kernel-up notification: %s", strerror(errno));
}

void vm_boot_marker(struct vm *vm)
{
	uint64_t expected = 0, t = log_now_ns() - vm->cfg.t0_ns;

	if (t == 0)
		t = 1;
	if (!atomic_compare_exchange_strong(&vm->marker_ns, &expected, t))
		return;
	phase_mark_at(&vm->phases, PHASE_READY, vm->cfg.t0_ns + t);
	if (vm->marker_fd >= 0 && write(vm->marker_fd, "R", 1) < 0)
		log_debug("boot marker notification: %s", strerror(errno));
	phase_log(&vm->phases, "to the boot marker");
	log_info("boot marker: guest ready %.1f ms after VMM start (first guest instruction at %.1f ms)",
			 (double)t / 1e6, (double)atomic_load(&vm->first_run_ns) / 1e6);
}
