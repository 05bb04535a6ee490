/* A vCPU's CPUID entries, templated and fixed up (vmm/cpuid.h). */
#include "vmm/cpuid.h"

#include <cpuid.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

int cpu_template_parse(const char *name, enum cpu_template *out)
{
	if (!strcmp(name, "host"))
		*out = CPU_TEMPLATE_HOST;
	else if (!strcmp(name, "safe"))
		*out = CPU_TEMPLATE_SAFE;
	else
		return -EINVAL;
	return 0;
}

const char *cpu_template_name(enum cpu_template t)
{
	return t == CPU_TEMPLATE_SAFE ? "safe" : "host";
}

int cpu_host_amd(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(0, &a, &b, &c, &d))
		return 0;
	return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163; /* "AuthenticAMD" */
}

int cpuid_entry_zero(const struct kvm_cpuid_entry2 *e)
{
	return !(e->function | e->index | e->flags | e->eax | e->ebx | e->ecx | e->edx);
}

int cpuid_entry_same(const struct kvm_cpuid_entry2 *set, const struct kvm_cpuid_entry2 *got)
{
	uint32_t ebx = ~0u, ecx = ~0u, edx = ~0u;

	if (set->function == 1) {
		ecx &= ~CPUID_1_ECX_OSXSAVE;
		edx &= ~(1u << 9);  /* APIC */
	} else if (set->function == 7 && set->index == 0) {
		ecx &= ~(1u << 4);  /* OSPKE */
	} else if (set->function == 0xd && set->index <= 1) {
		ebx = 0;
	}
	return set->eax == got->eax && (set->ebx & ebx) == (got->ebx & ebx) &&
	       (set->ecx & ecx) == (got->ecx & ecx) && (set->edx & edx) == (got->edx & edx);
}

struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid_entry2 *e, unsigned n,
				    unsigned function, unsigned index)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		if (e[i].function != function)
			continue;
		if ((e[i].flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) && e[i].index != index)
			continue;
		return &e[i];
	}
	return NULL;
}

static unsigned order_base_2(unsigned n)
{
	unsigned s = 0;

	while ((1u << s) < n)
		s++;
	return s;
}

/* The "safe" template. Measured on a kvm_pvm host: its ring-0 emulator ends
 * in KVM_EXIT_INTERNAL_ERROR on cmpxchg16b, the XSAVE family, popcnt and
 * clac/stac; AVX and everything built on XSAVE go with XSAVE. */
static void template_safe(struct kvm_cpuid_entry2 *c)
{
	switch (c->function) {
	case 1:
		c->ecx &= ~(CPUID_1_ECX_FMA | CPUID_1_ECX_CX16 | CPUID_1_ECX_POPCNT |
			    CPUID_1_ECX_XSAVE | CPUID_1_ECX_OSXSAVE | CPUID_1_ECX_AVX |
			    CPUID_1_ECX_F16C);
		break;
	case 7:
		if (c->index == 0) {
			/* AVX2, SMAP, and the AVX-512 family (F, DQ, IFMA, PF,
			 * ER, CD, BW, VL). */
			c->ebx &= ~(CPUID_7_EBX_AVX2 | CPUID_7_EBX_SMAP | (1u << 16) |
				    (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) |
				    (1u << 28) | (1u << 30) | (1u << 31));
			/* AVX-512 VBMI/VBMI2/VNNI/BITALG/VPOPCNTDQ, VAES,
			 * VPCLMULQDQ. */
			c->ecx &= ~((1u << 1) | (1u << 6) | (1u << 9) | (1u << 10) |
				    (1u << 11) | (1u << 12) | (1u << 14));
			/* AVX-512 4VNNIW/4FMAPS/VP2INTERSECT/FP16, AMX. */
			c->edx &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) |
				    (1u << 23) | (1u << 24) | (1u << 25));
		} else if (c->index == 1) {
			c->eax &= ~((1u << 4) | (1u << 5)); /* AVX-VNNI, AVX512-BF16 */
		}
		break;
	case 0x80000001:
		c->ecx &= ~CPUID_80000001_ECX_ABM;
		break;
	default:
		break;
	}
}

static int template_drops(enum cpu_template t, const struct kvm_cpuid_entry2 *c)
{
	/* Leaf 0xD describes XSAVE state components: gone with XSAVE. */
	return t == CPU_TEMPLATE_SAFE && c->function == 0xd;
}

unsigned cpuid_apply(struct kvm_cpuid_entry2 *e, unsigned n, unsigned index,
		     unsigned nr_cpus, enum cpu_template t, int tsc_deadline)
{
	unsigned i, out = 0, shift = order_base_2(nr_cpus);
	int amd = 0;

	if (n && e[0].function == 0 && e[0].ebx == 0x68747541) /* "Auth"enticAMD */
		amd = 1;
	for (i = 0; i < n; i++) {
		struct kvm_cpuid_entry2 c = e[i];

		if (template_drops(t, &c))
			continue;
		if (t == CPU_TEMPLATE_SAFE)
			template_safe(&c);
		switch (c.function) {
		case 1:
			/* EBX: initial APIC ID, logical processor count,
			 * CLFLUSH line size in 8-byte units. */
			c.ebx = (index << 24) | ((nr_cpus & 0xff) << 16) | (8u << 8);
			c.ecx |= CPUID_1_ECX_HYPERVISOR;
			if (tsc_deadline)
				c.ecx |= CPUID_1_ECX_TSC_DEADLINE;
			else
				c.ecx &= ~CPUID_1_ECX_TSC_DEADLINE;
			if (nr_cpus > 1)
				c.edx |= CPUID_1_EDX_HTT;
			else
				c.edx &= ~CPUID_1_EDX_HTT;
			break;
		case 4:
			/* One package of nr_cpus cores, one thread each; only
			 * the last-level cache (L3) is shared by all cores. */
			c.eax &= ~((0x3fu << 26) | (0xfffu << 14));
			c.eax |= ((nr_cpus - 1) & 0x3f) << 26;
			if (((c.eax >> 5) & 7) == 3)
				c.eax |= ((nr_cpus - 1) & 0xfff) << 14;
			break;
		case 0xb:
		case 0x1f:
			/* Extended topology: level 0 = SMT (1 thread), level 1
			 * = core (nr_cpus cores); EDX = x2APIC ID. */
			if (c.index == 0) {
				c.eax = 0;
				c.ebx = 1;
				c.ecx = (1u << 8) | 0;
			} else if (c.index == 1) {
				c.eax = shift;
				c.ebx = nr_cpus;
				c.ecx = (2u << 8) | 1;
			} else {
				c.eax = 0;
				c.ebx = 0;
				c.ecx = c.index;
			}
			c.edx = index;
			break;
		case 0x80000008:
			if (amd)
				c.ecx = (c.ecx & ~0xffu) | ((nr_cpus - 1) & 0xff);
			break;
		default:
			break;
		}
		e[out++] = c;
	}
	return out;
}
