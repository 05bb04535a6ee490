/* CPUID for a vCPU: KVM_GET_SUPPORTED_CPUID, filtered by a CPU template,
 * with the per-vCPU fixups (APIC ID, topology, hypervisor bit). Pure
 * functions over an entry array, so unit tests need no KVM. */
#ifndef VMM_CPUID_H
#define VMM_CPUID_H

#include <linux/kvm.h>

enum cpu_template {
	CPU_TEMPLATE_HOST, /* everything KVM supports */
	CPU_TEMPLATE_SAFE, /* hides what a ring-0-emulating KVM cannot run */
};

/* Parses "host" / "safe". Returns 0 or -EINVAL. */
int cpu_template_parse(const char *name, enum cpu_template *out);
const char *cpu_template_name(enum cpu_template t);
/* The host's CPU vendor (the cpuid instruction's leaf 0): 1 for AMD, 0 for
 * any other (Intel). */
int cpu_host_amd(void);

/* Leaf 1 ECX / leaf 7.0 EBX bits the templates and fixups touch. */
#define CPUID_1_ECX_FMA (1u << 12)
#define CPUID_1_ECX_CX16 (1u << 13)
#define CPUID_1_ECX_POPCNT (1u << 23)
#define CPUID_1_ECX_TSC_DEADLINE (1u << 24)
#define CPUID_1_ECX_XSAVE (1u << 26)
#define CPUID_1_ECX_OSXSAVE (1u << 27)
#define CPUID_1_ECX_AVX (1u << 28)
#define CPUID_1_ECX_F16C (1u << 29)
#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_1_EDX_HTT (1u << 28)
#define CPUID_7_EBX_AVX2 (1u << 5)
#define CPUID_7_EBX_SMAP (1u << 20)
#define CPUID_80000001_ECX_ABM (1u << 5)

/* Applies template and fixups for vCPU `index` of `nr_cpus` in place.
 * Entries the template removes are dropped; returns the new count. */
unsigned cpuid_apply(struct kvm_cpuid_entry2 *e, unsigned n, unsigned index,
		     unsigned nr_cpus, enum cpu_template t, int tsc_deadline);

/* Whether KVM's read-back entry `got` is the entry `set` a VMM gave it, but
 * for what the CPU computes as the guest runs, which KVM recomputes at
 * once (and the guest may see other values of later): CPUID.1:ECX.OSXSAVE
 * (CR4), CPUID.1:EDX.APIC (the APIC base MSR), CPUID.7.0:ECX.OSPKE (CR4),
 * CPUID.0xD.0/1:EBX, the XSAVE area size of the features XCR0 (and XSS)
 * enable now (Intel SDM vol. 2A, CPUID; AMD APM vol. 3, E.3.2). */
int cpuid_entry_same(const struct kvm_cpuid_entry2 *set, const struct kvm_cpuid_entry2 *got);

/* Whether an entry is all zeros (function 0 with no leaves would give a
 * nonzero EAX): the padding past the real entries of a read-back table. */
int cpuid_entry_zero(const struct kvm_cpuid_entry2 *e);

/* Looks up (function, index); NULL if absent. */
struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid_entry2 *e, unsigned n,
				    unsigned function, unsigned index);

#endif
