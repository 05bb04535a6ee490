/* Firecracker's custom CPU templates for x86 (PUT /cpu-config, the config
 * file's "cpu-config"; docs/control-api.md): CPUID and MSR modifiers, each
 * a tri-state bitmap ("0b" then '0' clear, '1' set, 'x' keep, '_' ignored,
 * the low bits last; fewer characters than the register's width leave the
 * high bits alone), and KVM capabilities a VM needs.
 *
 * The parser is pure (unit tests, the API's fuzzer); the CPUID modifiers
 * apply on top of vmm's CPUID (cpuid.h) for every vCPU, the MSR modifiers
 * at vCPU setup on the values vmm set, as Firecracker does. What cannot be
 * applied (a leaf KVM does not offer, an MSR it does not list, a missing
 * capability) fails the start with Firecracker's message. */
#ifndef VMM_CPUTMPL_H
#define VMM_CPUTMPL_H

#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

struct json;

#define CPU_TMPL_MAX_LEAVES 64
#define CPU_TMPL_MAX_REGS 16 /* modifiers per leaf */
#define CPU_TMPL_MAX_MSRS 64
#define CPU_TMPL_MAX_CAPS 32

enum cpu_tmpl_reg { CPU_EAX, CPU_EBX, CPU_ECX, CPU_EDX };

struct cpu_tmpl_leaf {
	uint32_t leaf, subleaf, flags;
	unsigned nr;
	struct {
		enum cpu_tmpl_reg reg;
		uint32_t filter, value; /* filter: the bits set; value: to what */
	} mods[CPU_TMPL_MAX_REGS];
};

struct cpu_tmpl_msr {
	uint32_t addr;
	uint64_t filter, value;
};

struct cpu_tmpl {
	unsigned nr_leaves, nr_msrs, nr_caps;
	struct cpu_tmpl_leaf leaves[CPU_TMPL_MAX_LEAVES];
	struct cpu_tmpl_msr msrs[CPU_TMPL_MAX_MSRS];
	struct {
		uint32_t cap;
		int remove; /* "!N": Firecracker stops requiring it; nothing here */
	} caps[CPU_TMPL_MAX_CAPS];
};

/* Parses a CustomCpuTemplate object into *t. 0, or -EINVAL with why[]
 * (serde's words where Firecracker's parser has them). */
int cpu_tmpl_parse(const struct json *o, struct cpu_tmpl *t, char *why, size_t n);
/* "0b..." into a filter/value pair of `bits` bits. 0 or -EINVAL. */
int cpu_tmpl_bitmap(const char *s, unsigned bits, uint64_t *filter, uint64_t *value, char *why, size_t n);

/* Firecracker's static template `name` (C3, T2, T2S, T2CL, T2A) as the
 * custom template it stands for, and whether it is for AMD hosts (else
 * Intel). 0, or -ENOENT for another name. */
int cpu_tmpl_static(const char *name, struct cpu_tmpl *t, int *amd);

/* Applies the CPUID modifiers to one vCPU's entries. -EINVAL with why[]
 * if a modified leaf/subleaf is not among them. */
int cpu_tmpl_apply_cpuid(const struct cpu_tmpl *t, struct kvm_cpuid_entry2 *e, unsigned n, char *why,
			 size_t wn);

static inline uint64_t cpu_tmpl_filter(uint64_t old, uint64_t filter, uint64_t value)
{
	return (old & ~filter) | (value & filter);
}

#endif
