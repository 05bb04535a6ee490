/* Shared by the VM object's files (vm.h), for no one else:
 *   vm.c        creation and teardown: KVM, guest memory, vCPUs, devices
 *   vm_boot.c   a fresh VM's boot: its kernel command line, the kernel and
 *               initrd loaded into guest memory, the boot tables
 *   vm_run.c    the main thread's run loop (console, signals, control
 *               socket, expiry and idle standby), the stop sequence, the
 *               exit reasons, Ctrl-Alt-Del
 *   vm_pause.c  pause and resume
 *   vm_create.c the two builders (a fresh boot, a snapshot's restore) on
 *               vm_build's shared steps, and vm_create choosing one */
#ifndef VMM_VM_PRIV_H
#define VMM_VM_PRIV_H

#include <stdint.h>

struct vm;
struct vm_config;
struct kvm_cpuid_entry2;

/* What tells the two builders apart (vm_create.c): guest memory into
 * vm->gm (0 or -errno, logged), and the guest's state once the vCPUs and
 * devices exist (leaf1: CPUID leaf 1, or NULL; 0 or -errno, logged). */
struct vm_builder {
	int (*memory)(struct vm *vm, const struct vm_config *cfg);
	int (*load)(struct vm *vm, const struct vm_config *cfg, const struct kvm_cpuid_entry2 *leaf1);
};
/* The steps both builders share, in order (vm.c), with b's two between
 * them. 0 or -errno (logged); on failure nothing is left open. */
int vm_build(struct vm *vm, const struct vm_config *cfg, const struct vm_builder *b);

/* The user's command line, then what the host and the devices need, into
 * vm->cmdline. 0 or -E2BIG (logged). */
int vm_build_cmdline(struct vm *vm);
/* Loads the kernel (ELF or bzImage) and initrd, writes boot_params, the
 * page tables and the MP table (cpu_sig, cpu_feat: CPUID leaf 1's EAX and
 * EDX), and sets vCPU 0's entry state. 0 or -errno (logged). */
int vm_load_boot(struct vm *vm, uint32_t cpu_sig, uint32_t cpu_feat);

#endif
