/* CPUID templates and per-vCPU fixups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "vmm/cpuid.h"
#include "vmm/cputmpl.h"
#include "vmm/wire/json.h"

#define SIG KVM_CPUID_FLAG_SIGNIFCANT_INDEX

/* A host-like table: everything the templates touch is present. */
static unsigned host_table(struct kvm_cpuid_entry2 *e, int amd)
{
	const struct kvm_cpuid_entry2 t[] = {
		{ .function = 0, .eax = 0x1f, .ebx = amd ? 0x68747541 : 0x756e6547 },
		{ .function = 1, .eax = 0xa0671, .ebx = 0x00020800, .ecx = 0xfffa3203, .edx = 0x1f8bfbff },
		{ .function = 4, .index = 0, .flags = SIG, .eax = (1u << 5) | 1 | (63u << 26) | (1u << 14) },
		{ .function = 4, .index = 3, .flags = SIG, .eax = (3u << 5) | 3 | (63u << 26) | (15u << 14) },
		{ .function = 7, .index = 0, .flags = SIG, .ebx = 0xffffffff, .ecx = 0xffffffff, .edx = 0xffffffff },
		{ .function = 7, .index = 1, .flags = SIG, .eax = 0xffffffff },
		{ .function = 0xb, .index = 0, .flags = SIG, .eax = 1, .ebx = 2, .ecx = 0x100, .edx = 7 },
		{ .function = 0xb, .index = 1, .flags = SIG, .eax = 6, .ebx = 32, .ecx = 0x201, .edx = 7 },
		{ .function = 0xd, .index = 0, .flags = SIG, .eax = 0x2e7 },
		{ .function = 0xd, .index = 1, .flags = SIG, .eax = 0xf },
		{ .function = 0x80000001, .ecx = 0x121, .edx = 0x2c100800 },
		{ .function = 0x80000008, .eax = 0x3030, .ecx = 0x0f },
	};

	memcpy(e, t, sizeof(t));
	return sizeof(t) / sizeof(t[0]);
}

static void template_names(void **state)
{
	enum cpu_template t;

	(void)state;
	assert_int_equal(cpu_template_parse("safe", &t), 0);
	assert_int_equal(t, CPU_TEMPLATE_SAFE);
	assert_int_equal(cpu_template_parse("host", &t), 0);
	assert_int_equal(t, CPU_TEMPLATE_HOST);
	assert_int_equal(cpu_template_parse("T2", &t), -EINVAL);
	assert_string_equal(cpu_template_name(CPU_TEMPLATE_SAFE), "safe");
}

static void safe_hides_emulator_gaps(void **state)
{
	struct kvm_cpuid_entry2 e[32];
	unsigned n = host_table(e, 0), m;
	struct kvm_cpuid_entry2 *l1, *l7;

	(void)state;
	m = cpuid_apply(e, n, 0, 1, CPU_TEMPLATE_SAFE, 1);
	assert_int_equal(m, n - 2); /* both leaf 0xD subleaves gone */
	assert_null(cpuid_find(e, m, 0xd, 0));
	l1 = cpuid_find(e, m, 1, 0);
	assert_non_null(l1);
	assert_int_equal(l1->ecx & (CPUID_1_ECX_CX16 | CPUID_1_ECX_POPCNT | CPUID_1_ECX_XSAVE |
				    CPUID_1_ECX_OSXSAVE | CPUID_1_ECX_AVX | CPUID_1_ECX_FMA |
				    CPUID_1_ECX_F16C), 0);
	l7 = cpuid_find(e, m, 7, 0);
	assert_int_equal(l7->ebx & (CPUID_7_EBX_SMAP | CPUID_7_EBX_AVX2 | (1u << 16)), 0);
	assert_true(l7->ebx & 1); /* FSGSBASE stays */
	assert_int_equal(cpuid_find(e, m, 7, 1)->eax & (1u << 4), 0);
	assert_int_equal(cpuid_find(e, m, 0x80000001, 0)->ecx & CPUID_80000001_ECX_ABM, 0);
}

static void host_keeps_features(void **state)
{
	struct kvm_cpuid_entry2 e[32];
	unsigned n = host_table(e, 0);

	(void)state;
	assert_int_equal(cpuid_apply(e, n, 0, 1, CPU_TEMPLATE_HOST, 1), n);
	assert_true(cpuid_find(e, n, 1, 0)->ecx & CPUID_1_ECX_POPCNT);
	assert_non_null(cpuid_find(e, n, 0xd, 0));
}

static void per_vcpu_topology(void **state)
{
	struct kvm_cpuid_entry2 e[32];
	unsigned n = host_table(e, 0), m;
	struct kvm_cpuid_entry2 *l1;

	(void)state;
	m = cpuid_apply(e, n, 2, 3, CPU_TEMPLATE_HOST, 0);
	l1 = cpuid_find(e, m, 1, 0);
	assert_int_equal(l1->ebx >> 24, 2);          /* APIC ID */
	assert_int_equal((l1->ebx >> 16) & 0xff, 3); /* logical CPUs */
	assert_true(l1->edx & CPUID_1_EDX_HTT);
	assert_true(l1->ecx & CPUID_1_ECX_HYPERVISOR);
	assert_int_equal(l1->ecx & CPUID_1_ECX_TSC_DEADLINE, 0); /* no KVM cap */
	assert_int_equal(cpuid_find(e, m, 0xb, 0)->edx, 2);
	assert_int_equal(cpuid_find(e, m, 0xb, 1)->eax, 2); /* log2 ceil of 3 */
	assert_int_equal(cpuid_find(e, m, 0xb, 1)->ebx, 3);
	assert_int_equal(cpuid_find(e, m, 4, 0)->eax >> 26, 2);
	assert_int_equal((cpuid_find(e, m, 4, 0)->eax >> 14) & 0xfff, 0); /* L1: private */
	assert_int_equal((cpuid_find(e, m, 4, 3)->eax >> 14) & 0xfff, 2); /* L3: shared */

	n = host_table(e, 0);
	m = cpuid_apply(e, n, 0, 1, CPU_TEMPLATE_HOST, 1);
	l1 = cpuid_find(e, m, 1, 0);
	assert_int_equal(l1->edx & CPUID_1_EDX_HTT, 0);
	assert_true(l1->ecx & CPUID_1_ECX_TSC_DEADLINE);
	assert_int_equal(cpuid_find(e, m, 0x80000008, 0)->ecx, 0x0f); /* Intel: untouched */
}

/* A read-back table in a buffer bigger than KVM's: the all-zero padding
 * past the real entries is told from a real leaf 0 (whose EAX is the
 * highest leaf) and from a zero leaf that has an index or flags. */
static void read_back_padding(void **state)
{
	struct kvm_cpuid_entry2 e = { 0 };

	(void)state;
	assert_true(cpuid_entry_zero(&e));
	e.eax = 0xd;
	assert_false(cpuid_entry_zero(&e));
	e = (struct kvm_cpuid_entry2){ .function = 0xb, .index = 1 };
	assert_false(cpuid_entry_zero(&e));
	e = (struct kvm_cpuid_entry2){ .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX };
	assert_false(cpuid_entry_zero(&e));
}

/* KVM's read-back of what a VMM set: the bits the CPU computes as the
 * guest runs differ (KVM recomputes them: leaf 0xD.0 EBX for XCR0 = x87 on
 * real KVM), anything else is an override. */
static void read_back_dynamic_bits(void **state)
{
	struct kvm_cpuid_entry2 set = { .function = 0xd, .eax = 0x207, .ebx = 0xa88, .ecx = 0xa88 };
	struct kvm_cpuid_entry2 got = set;

	(void)state;
	got.ebx = 0x240;
	assert_true(cpuid_entry_same(&set, &got));
	got.ecx = 0x240;
	assert_false(cpuid_entry_same(&set, &got));
	set = (struct kvm_cpuid_entry2){ .function = 0xd, .index = 2, .eax = 0x100, .ebx = 0x240 };
	got = set;
	got.ebx = 0;
	assert_false(cpuid_entry_same(&set, &got)); /* a component's offset is fixed */
	set = (struct kvm_cpuid_entry2){ .function = 1, .ecx = CPUID_1_ECX_XSAVE, .edx = 1u << 9 };
	got = set;
	got.ecx |= CPUID_1_ECX_OSXSAVE;
	got.edx = 0;
	assert_true(cpuid_entry_same(&set, &got));
	got.ecx &= ~CPUID_1_ECX_XSAVE;
	assert_false(cpuid_entry_same(&set, &got));
	set = (struct kvm_cpuid_entry2){ .function = 7, .ebx = 1 };
	got = set;
	got.ecx = 1u << 4; /* OSPKE */
	assert_true(cpuid_entry_same(&set, &got));
	got.ebx = 0;
	assert_false(cpuid_entry_same(&set, &got));
}

static void amd_core_count(void **state)
{
	struct kvm_cpuid_entry2 e[32];
	unsigned n = host_table(e, 1), m;

	(void)state;
	m = cpuid_apply(e, n, 1, 4, CPU_TEMPLATE_HOST, 0);
	assert_int_equal(cpuid_find(e, m, 0x80000008, 0)->ecx & 0xff, 3);
}

/* ---- Firecracker's custom CPU templates (cputmpl.h) ---- */

static int parse_tmpl(const char *text, struct cpu_tmpl *t, char *why, size_t n)
{
	static char arena[1 << 16];
	struct json_arena ar = { .buf = arena, .size = sizeof(arena) };
	const char *err = NULL;
	const struct json *j = json_parse(text, strlen(text), &ar, &err);

	assert_non_null(j);
	return cpu_tmpl_parse(j, t, why, n);
}

static void tmpl_bitmaps(void **state)
{
	uint64_t f, v;
	char why[200];

	(void)state;
	assert_int_equal(cpu_tmpl_bitmap("0bxxxxxxxxxxxxxxxxxxxxxxxxxxxx0001", 32, &f, &v, why, sizeof(why)), 0);
	assert_int_equal(f, 0xf);
	assert_int_equal(v, 0x1);
	/* Short: the high bits are kept; '_' is for the eye; no 0b is fine. */
	assert_int_equal(cpu_tmpl_bitmap("0b1_0x1", 32, &f, &v, why, sizeof(why)), 0);
	assert_int_equal(f, 0xd);
	assert_int_equal(v, 0x9);
	assert_int_equal(cpu_tmpl_bitmap("1x", 64, &f, &v, why, sizeof(why)), 0);
	assert_int_equal(f, 2);
	assert_int_equal(v, 2);
	/* 64 bits of an MSR, the top one set. */
	assert_int_equal(cpu_tmpl_bitmap("0b1xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 64, &f, &v, why,
					 sizeof(why)), 0);
	assert_true(f == 1ull << 63 && v == 1ull << 63);
	assert_int_equal(cpu_tmpl_bitmap("0b1xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 32, &f, &v, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "string is too long"));
	assert_int_equal(cpu_tmpl_bitmap("0b01z", 32, &f, &v, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "unknown character"));
}

static void tmpl_parse_and_apply(void **state)
{
	struct kvm_cpuid_entry2 e[64];
	static struct cpu_tmpl t;
	char why[300];
	unsigned n = host_table(e, 0);
	struct kvm_cpuid_entry2 *l1, *l7;

	(void)state;
	assert_int_equal(parse_tmpl("{\"kvm_capabilities\": [\"!56\", \"171\"],"
				    " \"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": 0,"
				    "   \"modifiers\": [{\"register\": \"ecx\", \"bitmap\": \"0bxx0xxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"},"
				    "                   {\"register\": \"edx\", \"bitmap\": \"0b1\"}]},"
				    "  {\"leaf\": \"0b111\", \"subleaf\": \"0x0\", \"flags\": 1,"
				    "   \"modifiers\": [{\"register\": \"ebx\", \"bitmap\": \"0bxxxxxxxxxxxxxxxxxxxxxxxxxx0xxxxx\"}]}],"
				    " \"msr_modifiers\": [{\"addr\": \"0x10a\", \"bitmap\": \"0b0_1\"}]}",
				    &t, why, sizeof(why)), 0);
	assert_int_equal(t.nr_caps, 2);
	assert_true(t.caps[0].remove && t.caps[0].cap == 56 && !t.caps[1].remove && t.caps[1].cap == 171);
	assert_int_equal(t.nr_leaves, 2);
	assert_int_equal(t.leaves[1].leaf, 7);
	assert_int_equal(t.nr_msrs, 1);
	assert_int_equal(t.msrs[0].addr, 0x10a);
	assert_true(t.msrs[0].filter == 3 && t.msrs[0].value == 1);
	assert_int_equal(cpu_tmpl_apply_cpuid(&t, e, n, why, sizeof(why)), 0);
	l1 = cpuid_find(e, n, 1, 0);
	l7 = cpuid_find(e, n, 7, 0);
	assert_int_equal(l1->ecx, 0xfffa3203u & ~(1u << 29)); /* F16C off */
	assert_int_equal(l1->edx, 0x1f8bfbffu | 1);
	assert_int_equal(l7->ebx & CPUID_7_EBX_AVX2, 0);
	assert_int_equal(l7->ebx | CPUID_7_EBX_AVX2, 0xffffffffu);
	assert_int_equal(l7->flags, 1);
	assert_int_equal(cpu_tmpl_filter(0xff, t.msrs[0].filter, t.msrs[0].value), 0xfd);

	/* A leaf KVM does not offer: Firecracker's refusal. */
	assert_int_equal(parse_tmpl("{\"cpuid_modifiers\": [{\"leaf\": \"0x40000123\", \"subleaf\": \"0x0\", \"flags\": 0,"
				    " \"modifiers\": []}]}", &t, why, sizeof(why)), 0);
	assert_int_equal(cpu_tmpl_apply_cpuid(&t, e, n, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "Template changes a CPUID entry not supported by KVM: Leaf: 40000123, Subleaf: 0");

	/* Refused as Firecracker's parser refuses them. */
	{
		static const char *const bad[] = {
			"{\"cpuid_modifiers\": [{\"leaf\": \"1\", \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": []}]}",
			"{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": 0,"
			" \"modifiers\": [{\"register\": \"esp\", \"bitmap\": \"0b1\"}]}]}",
			"{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"flags\": 0, \"modifiers\": []}]}",
			"{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": -1, \"modifiers\": []}]}",
			"{\"msr_modifiers\": [{\"addr\": \"0x10a\", \"bitmap\": \"0b2\"}]}",
			"{\"msr_modifiers\": [{\"addr\": \"0x1ffffffff\", \"bitmap\": \"0b1\"}]}",
			"{\"kvm_capabilities\": [\"x1\"]}",
			"{\"reg_modifiers\": []}",
			"{\"cpuid_modifiers\": {}}",
		};
		for (unsigned k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
			assert_int_equal(parse_tmpl(bad[k], &t, why, sizeof(why)), -EINVAL);
		assert_int_equal(parse_tmpl(bad[0], &t, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "No supported number system prefix found in value [1]"));
		assert_int_equal(parse_tmpl(bad[1], &t, why, sizeof(why)), -EINVAL);
		assert_string_equal(why, "Invalid CPUID register. Must be one of [eax, ebx, ecx, edx]");
	}
	/* An empty template is a valid one. */
	assert_int_equal(parse_tmpl("{}", &t, why, sizeof(why)), 0);
}

/* Firecracker's static templates as masks over a CPUID table (no KVM): a
 * table of all-ones registers shows each mask, checked against the values
 * Firecracker documents for them (docs/cpu_templates/cpu-templates.md). */
static void static_tmpl_masks(void **state)
{
	static const uint32_t leaves[][2] = { { 1, 0 }, { 7, 0 }, { 0xd, 0 }, { 0xd, 1 }, { 0x80000001, 0 }, { 0x80000008, 0 } };
	struct kvm_cpuid_entry2 e[6], *x;
	struct cpu_tmpl t;
	char why[160];
	unsigned i;
	int amd = -1;

	(void)state;
	for (i = 0; i < 6; i++) {
		memset(&e[i], 0, sizeof(e[i]));
		e[i].function = leaves[i][0];
		e[i].index = leaves[i][1];
		e[i].flags = leaves[i][0] == 7 || leaves[i][0] == 0xd ? KVM_CPUID_FLAG_SIGNIFCANT_INDEX : 0;
		e[i].eax = e[i].ebx = e[i].ecx = e[i].edx = 0xffffffffu;
	}
	assert_int_equal(cpu_tmpl_static("C3", &t, &amd), 0);
	assert_int_equal(amd, 0);
	assert_int_equal(cpu_tmpl_apply_cpuid(&t, e, 6, why, sizeof(why)), 0);
	x = cpuid_find(e, 6, 1, 0);
	/* Family 6 model 0x3e stepping 4, as C3 states; the masked bits clear. */
	assert_int_equal(x->eax, 0xf003c6e4u);
	assert_int_equal(x->ecx, ~0x0040dd3cu);
	assert_int_equal(x->edx, ~0xa8641080u | 0x1080u);
	x = cpuid_find(e, 6, 7, 0);
	assert_int_equal(x->ebx, ~0xffafdd3cu);
	assert_int_equal(x->flags, 1);
	assert_int_equal(cpuid_find(e, 6, 0xd, 1)->eax, ~0xeu);
	assert_int_equal(cpuid_find(e, 6, 0x80000001, 0)->edx, ~0x04000000u);
	/* C3 leaves 0x80000008 alone. */
	assert_int_equal(cpuid_find(e, 6, 0x80000008, 0)->ebx, 0xffffffffu);
	assert_int_equal(t.nr_msrs, 0);

	/* T2A (AMD): EBX of 0x80000008 keeps IBPB and the STIBP/SSBD bits. */
	assert_int_equal(cpu_tmpl_static("T2A", &t, &amd), 0);
	assert_int_equal(amd, 1);
	assert_int_equal(cpu_tmpl_apply_cpuid(&t, e, 6, why, sizeof(why)), 0);
	assert_int_equal(cpuid_find(e, 6, 0x80000008, 0)->ebx, ~0x001c0205u | 0x001c0004u);
	assert_int_equal(cpuid_find(e, 6, 7, 0)->ebx, (~0xffafdd3cu & ~0xffefda14u) | 0x200u);

	/* T2S and T2CL: IA32_ARCH_CAPABILITIES, the whole register or the
	 * listed bits. */
	assert_int_equal(cpu_tmpl_static("T2S", &t, &amd), 0);
	assert_int_equal(t.nr_msrs, 1);
	assert_int_equal(t.msrs[0].addr, 0x10a);
	assert_int_equal(cpu_tmpl_filter(~0ull, t.msrs[0].filter, t.msrs[0].value), 0x0c0a0c4cull);
	assert_int_equal(cpu_tmpl_static("T2CL", &t, &amd), 0);
	assert_int_equal(cpu_tmpl_filter(~0ull, t.msrs[0].filter, t.msrs[0].value), 0x1d0ae1ffull);
	assert_int_equal(cpu_tmpl_static("T2", &t, &amd), 0);
	assert_int_equal(t.nr_msrs, 0);

	/* A leaf the table lacks fails as Firecracker's does. */
	assert_int_equal(cpu_tmpl_apply_cpuid(&t, e, 5, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not supported by KVM: Leaf: 80000008"));
	/* Not a static template. */
	assert_int_equal(cpu_tmpl_static("None", &t, &amd), -ENOENT);
	assert_int_equal(cpu_tmpl_static("V1N1", &t, &amd), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(template_names),
		cmocka_unit_test(safe_hides_emulator_gaps),
		cmocka_unit_test(host_keeps_features),
		cmocka_unit_test(per_vcpu_topology),
		cmocka_unit_test(amd_core_count),
		cmocka_unit_test(read_back_dynamic_bits),
		cmocka_unit_test(read_back_padding),
		cmocka_unit_test(tmpl_bitmaps),
		cmocka_unit_test(tmpl_parse_and_apply),
		cmocka_unit_test(static_tmpl_masks),
	};

	return cmocka_run_group_tests_name("cpuid", tests, NULL, NULL);
}
