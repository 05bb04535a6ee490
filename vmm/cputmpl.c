/* Firecracker's custom CPU templates: see cputmpl.h. */
#include "vmm/cputmpl.h"
#include "vmm/cpuid.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int cpu_tmpl_bitmap(const char *s, unsigned bits, uint64_t *filter, uint64_t *value, char *why, size_t n)
{
	const char *p = strncmp(s, "0b", 2) ? s : s + 2;
	size_t len = strlen(p);
	unsigned i = 0;

	*filter = *value = 0;
	while (len--) {
		char c = p[len];

		if (c == '_')
			continue;
		if (i == bits)
			return fail(why, n, "Failed to parse string [%.80s] as a bitmap - string is too long", s);
		if (c == '0' || c == '1') {
			*filter |= 1ull << i;
			if (c == '1')
				*value |= 1ull << i;
		} else if (c != 'x') {
			return fail(why, n, "Failed to parse string [%.80s] as a bitmap - unknown character: %u", s,
				    (unsigned)(unsigned char)c);
		}
		i++;
	}
	return 0;
}

/* A u32 written "0x..." or "0b..." (Firecracker's parser takes no
 * decimal, whatever its swagger says). */
static int number(const struct json *v, const char *field, uint32_t *out, char *why, size_t n)
{
	const char *s, *d;
	char *end;
	unsigned long long x;
	int base;

	if (!v || v->type != JSON_STR)
		return fail(why, n, "%s: invalid type: expected a string", field);
	s = v->u.str.s;
	if (!strncmp(s, "0b", 2))
		base = 2;
	else if (!strncmp(s, "0x", 2))
		base = 16;
	else
		return fail(why, n,
			    "No supported number system prefix found in value [%.40s]. Make sure to prefix the number "
			    "with '0x' for hexadecimal numbers or '0b' for binary numbers.", s);
	d = s + 2;
	errno = 0;
	x = *d && *d != '-' && *d != '+' ? strtoull(d, &end, base) : 0;
	if (!*d || *d == '-' || *d == '+' || *end || errno || x > 0xffffffffull)
		return fail(why, n, "Failed to parse string [%.40s] as a number for CPU template", s);
	*out = (uint32_t)x;
	return 0;
}

static int only(const struct json *o, const char *const *names, unsigned nn, const char *what, char *why, size_t n)
{
	const struct json *m;
	unsigned i;

	if (!o || o->type != JSON_OBJ)
		return fail(why, n, "invalid type: expected struct %s", what);
	for (m = o->u.kids.first; m; m = m->next) {
		for (i = 0; i < nn && strcmp(names[i], m->key); i++) {
		}
		if (i == nn)
			return fail(why, n, "unknown field `%.64s` in %s", m->key, what);
	}
	for (i = 0; i < nn; i++)
		if (!json_get(o, names[i]) && strcmp(names[i], "flags"))
			return fail(why, n, "missing field `%s` in %s", names[i], what);
	return 0;
}

static int parse_leaf(const struct json *o, struct cpu_tmpl_leaf *l, char *why, size_t n)
{
	static const char *const names[] = { "leaf", "subleaf", "flags", "modifiers" };
	static const char *const rnames[] = { "register", "bitmap" };
	const struct json *mods, *m, *f;
	int r;

	if ((r = only(o, names, 4, "CpuidLeafModifier", why, n)) ||
	    (r = number(json_get(o, "leaf"), "leaf", &l->leaf, why, n)) ||
	    (r = number(json_get(o, "subleaf"), "subleaf", &l->subleaf, why, n)))
		return r;
	f = json_get(o, "flags");
	if (!f || f->type != JSON_NUM || !f->num_integral || f->u.num < 0 || f->u.num > 4294967295.0)
		return fail(why, n, "flags: invalid type: expected u32");
	l->flags = (uint32_t)f->u.num;
	mods = json_get(o, "modifiers");
	if (mods->type != JSON_ARR)
		return fail(why, n, "modifiers: invalid type: expected a sequence");
	for (m = mods->u.kids.first; m; m = m->next) {
		const struct json *reg, *bm;
		uint64_t fl, v;

		if ((r = only(m, rnames, 2, "CpuidRegisterModifier", why, n)))
			return r;
		if (l->nr == CPU_TMPL_MAX_REGS)
			return fail(why, n, "at most %d register modifiers per CPUID leaf", CPU_TMPL_MAX_REGS);
		reg = json_get(m, "register");
		bm = json_get(m, "bitmap");
		if (reg->type != JSON_STR || (strcmp(reg->u.str.s, "eax") && strcmp(reg->u.str.s, "ebx") &&
					      strcmp(reg->u.str.s, "ecx") && strcmp(reg->u.str.s, "edx")))
			return fail(why, n, "Invalid CPUID register. Must be one of [eax, ebx, ecx, edx]");
		if (bm->type != JSON_STR)
			return fail(why, n, "bitmap: invalid type: expected a string");
		if ((r = cpu_tmpl_bitmap(bm->u.str.s, 32, &fl, &v, why, n)))
			return r;
		l->mods[l->nr].reg = (enum cpu_tmpl_reg)(reg->u.str.s[1] - 'a');
		l->mods[l->nr].filter = (uint32_t)fl;
		l->mods[l->nr].value = (uint32_t)v;
		l->nr++;
	}
	return 0;
}

int cpu_tmpl_parse(const struct json *o, struct cpu_tmpl *t, char *why, size_t n)
{
	static const char *const names[] = { "kvm_capabilities", "cpuid_modifiers", "msr_modifiers" };
	static const char *const mnames[] = { "addr", "bitmap" };
	const struct json *a, *e;
	unsigned i;
	int r;

	memset(t, 0, sizeof(*t));
	if (!o || o->type != JSON_OBJ)
		return fail(why, n, "invalid type: expected struct CustomCpuTemplate");
	for (e = o->u.kids.first; e; e = e->next) {
		for (i = 0; i < 3 && strcmp(names[i], e->key); i++) {
		}
		if (i == 3) {
			/* aarch64's fields: known to Firecracker, not for this host. */
			if (!strcmp(e->key, "reg_modifiers") || !strcmp(e->key, "vcpu_features"))
				return fail(why, n, "unknown field `%.64s`, expected one of `kvm_capabilities`, "
					    "`cpuid_modifiers`, `msr_modifiers` (aarch64 only)", e->key);
			return fail(why, n, "unknown field `%.64s`, expected one of `kvm_capabilities`, "
				    "`cpuid_modifiers`, `msr_modifiers`", e->key);
		}
		if (e->type != JSON_ARR)
			return fail(why, n, "%s: invalid type: expected a sequence", e->key);
	}
	a = json_get(o, "kvm_capabilities");
	for (e = a ? a->u.kids.first : NULL; e; e = e->next) {
		const char *s, *d;
		char *end;
		unsigned long v;

		if (e->type != JSON_STR)
			return fail(why, n, "kvm_capabilities: invalid type: expected a string");
		if (t->nr_caps == CPU_TMPL_MAX_CAPS)
			return fail(why, n, "at most %d KVM capabilities", CPU_TMPL_MAX_CAPS);
		s = e->u.str.s;
		d = s[0] == '!' ? s + 1 : s;
		errno = 0;
		v = *d >= '0' && *d <= '9' ? strtoul(d, &end, 10) : 0;
		if (*d < '0' || *d > '9' || *end || errno || v > 0xffffffffu)
			return fail(why, n, "Failed to parse string [%.40s] as a kvm capability - can not convert to numeric: "
				    "invalid digit found in string", s);
		t->caps[t->nr_caps].cap = (uint32_t)v;
		t->caps[t->nr_caps].remove = s[0] == '!';
		t->nr_caps++;
	}
	a = json_get(o, "cpuid_modifiers");
	for (e = a ? a->u.kids.first : NULL; e; e = e->next) {
		if (t->nr_leaves == CPU_TMPL_MAX_LEAVES)
			return fail(why, n, "at most %d CPUID leaf modifiers", CPU_TMPL_MAX_LEAVES);
		if ((r = parse_leaf(e, &t->leaves[t->nr_leaves], why, n)))
			return r;
		t->nr_leaves++;
	}
	a = json_get(o, "msr_modifiers");
	for (e = a ? a->u.kids.first : NULL; e; e = e->next) {
		const struct json *bm;
		struct cpu_tmpl_msr *m = &t->msrs[t->nr_msrs];

		if (t->nr_msrs == CPU_TMPL_MAX_MSRS)
			return fail(why, n, "at most %d MSR modifiers", CPU_TMPL_MAX_MSRS);
		if ((r = only(e, mnames, 2, "RegisterModifier", why, n)) ||
		    (r = number(json_get(e, "addr"), "addr", &m->addr, why, n)))
			return r;
		bm = json_get(e, "bitmap");
		if (bm->type != JSON_STR)
			return fail(why, n, "bitmap: invalid type: expected a string");
		if ((r = cpu_tmpl_bitmap(bm->u.str.s, 64, &m->filter, &m->value, why, n)))
			return r;
		t->nr_msrs++;
	}
	return 0;
}

int cpu_tmpl_apply_cpuid(const struct cpu_tmpl *t, struct kvm_cpuid_entry2 *e, unsigned n, char *why, size_t wn)
{
	unsigned i, k;

	for (i = 0; i < t->nr_leaves; i++) {
		const struct cpu_tmpl_leaf *l = &t->leaves[i];
		struct kvm_cpuid_entry2 *x = cpuid_find(e, n, l->leaf, l->subleaf);

		if (!x)
			return fail(why, wn, "Template changes a CPUID entry not supported by KVM: Leaf: %x, Subleaf: %x",
				    l->leaf, l->subleaf);
		x->flags = l->flags;
		for (k = 0; k < l->nr; k++) {
			uint32_t *r = l->mods[k].reg == CPU_EAX ? &x->eax : l->mods[k].reg == CPU_EBX ? &x->ebx
				      : l->mods[k].reg == CPU_ECX ? &x->ecx : &x->edx;

			*r = (uint32_t)cpu_tmpl_filter(*r, l->mods[k].filter, l->mods[k].value);
		}
	}
	return 0;
}

/* ---- Firecracker's static templates ---------------------------------------
 * C3, T2, T2S, T2CL (Intel) and T2A (AMD) as the CPUID and MSR masks
 * Firecracker documents for them (docs/cpu_templates/cpu-templates.md; its
 * cpu_config/x86_64/static_cpu_templates/). One row a register: leaf,
 * subleaf, KVM flags (1: the subleaf is significant), register, the bits
 * the template sets (filter) and to what (value). The T2 family shares its
 * first ten rows; T2S and T2CL add an IA32_ARCH_CAPABILITIES (0x10a) mask. */

struct st_row {
	uint32_t leaf, subleaf, flags;
	enum cpu_tmpl_reg reg;
	uint32_t filter, value;
};

static const struct st_row c3_rows[] = {
	{ 0x1, 0, 0, CPU_EAX, 0x0fff3fff, 0x000306e4 },
	{ 0x1, 0, 0, CPU_ECX, 0x0040dd3c, 0 },
	{ 0x1, 0, 0, CPU_EDX, 0xa8641080, 0x00001080 },
	{ 0x7, 0, 1, CPU_EBX, 0xffafdd3c, 0 },
	{ 0x7, 0, 1, CPU_ECX, 0x4041481e, 0 },
	{ 0x7, 0, 1, CPU_EDX, 0x0000000c, 0 },
	{ 0xd, 0, 1, CPU_EAX, 0x000002f8, 0 },
	{ 0xd, 1, 1, CPU_EAX, 0x0000000e, 0 },
	{ 0x80000001, 0, 0, CPU_ECX, 0x00000120, 0 },
	{ 0x80000001, 0, 0, CPU_EDX, 0x04000000, 0 },
};

/* T2, and T2S and T2CL before their last leaf. */
#define T2_COMMON_ROWS                                            \
	{ 0x1, 0, 0, CPU_EAX, 0x0fff3fff, 0x000306f2 },           \
	{ 0x1, 0, 0, CPU_ECX, 0x0004cdfc, 0 },                    \
	{ 0x1, 0, 0, CPU_EDX, 0xe8641080, 0x00001080 },           \
	{ 0x7, 0, 1, CPU_EBX, 0xffefda14, 0x00000200 },           \
	{ 0x7, 0, 1, CPU_ECX, 0x40415f5e, 0 },                    \
	{ 0x7, 0, 1, CPU_EDX, 0x0000011c, 0 },                    \
	{ 0xd, 0, 1, CPU_EAX, 0x000002f8, 0 },                    \
	{ 0xd, 1, 1, CPU_EAX, 0x0000000e, 0 }

static const struct st_row t2_rows[] = {
	T2_COMMON_ROWS,
	{ 0x80000001, 0, 0, CPU_ECX, 0x20000100, 0 },
	{ 0x80000001, 0, 0, CPU_EDX, 0x04000000, 0 },
	{ 0x80000008, 0, 0, CPU_EBX, 0x00000200, 0 },
};

static const struct st_row t2cl_rows[] = {
	T2_COMMON_ROWS,
	{ 0x80000001, 0, 0, CPU_ECX, 0x200001c0, 0 },
	{ 0x80000001, 0, 0, CPU_EDX, 0x07c00000, 0 },
	{ 0x80000008, 0, 0, CPU_EBX, 0x00000200, 0 },
};

static const struct st_row t2a_rows[] = {
	T2_COMMON_ROWS,
	{ 0x80000001, 0, 0, CPU_ECX, 0x200001c4, 0 },
	{ 0x80000001, 0, 0, CPU_EDX, 0x06400000, 0 },
	{ 0x80000008, 0, 0, CPU_EBX, 0x001c0205, 0x001c0004 },
};

static const struct {
	const char *name;
	int amd;
	const struct st_row *rows;
	unsigned nr;
	uint64_t msr_filter, msr_value; /* IA32_ARCH_CAPABILITIES; 0/0: none */
} static_tmpls[] = {
	{ "C3", 0, c3_rows, sizeof(c3_rows) / sizeof(c3_rows[0]), 0, 0 },
	{ "T2", 0, t2_rows, sizeof(t2_rows) / sizeof(t2_rows[0]), 0, 0 },
	{ "T2S", 0, t2_rows, sizeof(t2_rows) / sizeof(t2_rows[0]), 0xffffffffffffffffull, 0x0c0a0c4c },
	{ "T2CL", 0, t2cl_rows, sizeof(t2cl_rows) / sizeof(t2cl_rows[0]), 0xffffffffe2f51e00ull, 0 },
	{ "T2A", 1, t2a_rows, sizeof(t2a_rows) / sizeof(t2a_rows[0]), 0, 0 },
};

#define MSR_IA32_ARCH_CAPABILITIES 0x10a

int cpu_tmpl_static(const char *name, struct cpu_tmpl *t, int *amd)
{
	unsigned i, k;

	for (i = 0; i < sizeof(static_tmpls) / sizeof(static_tmpls[0]); i++)
		if (!strcmp(static_tmpls[i].name, name))
			break;
	if (i == sizeof(static_tmpls) / sizeof(static_tmpls[0]))
		return -ENOENT;
	memset(t, 0, sizeof(*t));
	*amd = static_tmpls[i].amd;
	for (k = 0; k < static_tmpls[i].nr; k++) {
		const struct st_row *r = &static_tmpls[i].rows[k];
		struct cpu_tmpl_leaf *l = t->nr_leaves ? &t->leaves[t->nr_leaves - 1] : NULL;

		/* Rows of one leaf and subleaf stand together. */
		if (!l || l->leaf != r->leaf || l->subleaf != r->subleaf) {
			l = &t->leaves[t->nr_leaves++];
			l->leaf = r->leaf;
			l->subleaf = r->subleaf;
			l->flags = r->flags;
		}
		l->mods[l->nr].reg = r->reg;
		l->mods[l->nr].filter = r->filter;
		l->mods[l->nr].value = r->value;
		l->nr++;
	}
	if (static_tmpls[i].msr_filter) {
		t->msrs[0].addr = MSR_IA32_ARCH_CAPABILITIES;
		t->msrs[0].filter = static_tmpls[i].msr_filter;
		t->msrs[0].value = static_tmpls[i].msr_value;
		t->nr_msrs = 1;
	}
	return 0;
}
