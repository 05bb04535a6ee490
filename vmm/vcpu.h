/* vCPUs: creation, one thread each, the kick signal (vmm/vcpu.c). */
#ifndef VMM_VCPU_H
#define VMM_VCPU_H

#include <linux/kvm.h>
#include <signal.h>
#include <stdint.h>

struct vcpu;
struct vm;

/* Real-time signal that kicks a vCPU thread out of KVM_RUN. */
#define VCPU_KICK_SIGNAL (SIGRTMIN + 1)
/* The time-stamp counter's MSR (Intel SDM vol. 4, table 2-2). */
#define MSR_IA32_TSC 0x10
/* Room for KVM_GET_SUPPORTED_CPUID / KVM_GET_CPUID2 tables. */
#define VCPU_MAX_CPUID_ENTRIES 256

int vcpu_create(struct vcpu *v, struct vm *vm, unsigned index,
		const struct kvm_cpuid2 *cpuid, const struct kvm_msr_list *msrs)
	__attribute__((warn_unused_result));
int vcpu_set_boot_regs(struct vcpu *v, uint64_t entry) __attribute__((warn_unused_result));
int vcpu_start(struct vcpu *v) __attribute__((warn_unused_result));
/* The vCPU's CPUID table as KVM has it (the cpuid_nent entries vmm set),
 * to free(); NULL (logged) on failure. */
struct kvm_cpuid2 *vcpu_get_cpuid(const struct vcpu *v);
void vcpu_kick(struct vcpu *v);
void vcpu_join(struct vcpu *v);
void vcpu_destroy(struct vcpu *v);

#endif
