/* Start-up phases (vmm/phase.h, docs/perf.md). */
#include "vmm/phase.h"

#include <linux/kvm.h>

#include <stdio.h>
#include <time.h>

#include "vmm/base/log.h"

static const char *const names[PHASE_NR] = {
	[PHASE_CLI] = "cli",         [PHASE_KVM] = "kvm",
	[PHASE_MEMORY] = "memory",   [PHASE_CPUID] = "cpuid",
	[PHASE_VCPUS] = "vcpus",     [PHASE_DEVICES] = "devices",
	[PHASE_LOAD] = "load",       [PHASE_HANDOVER] = "handover",
	[PHASE_FIRST_RUN] = "first_run", [PHASE_KERNEL] = "kernel", [PHASE_READY] = "ready",
	[PHASE_API] = "api",
};
_Static_assert(sizeof(names) / sizeof(names[0]) == PHASE_NR, "a name per phase");

uint64_t phase_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void phase_init(struct phases *p, uint64_t t0_ns, uint64_t pre_main_ns)
{
	unsigned i;

	p->t0_ns = t0_ns;
	p->pre_main_ns = pre_main_ns;
	for (i = 0; i < PHASE_NR; i++)
		atomic_init(&p->at[i], 0);
	for (i = 0; i < PHASE_EXIT_NR; i++)
		atomic_init(&p->exits[i], 0);
}

void phase_mark_at(struct phases *p, enum phase ph, uint64_t now_ns)
{
	uint64_t expected = 0, t = now_ns > p->t0_ns ? now_ns - p->t0_ns : 1;

	if ((unsigned)ph >= PHASE_NR)
		return;
	atomic_compare_exchange_strong(&p->at[ph], &expected, t);
}

void phase_mark(struct phases *p, enum phase ph)
{
	phase_mark_at(p, ph, log_now_ns());
}

uint64_t phase_len_ns(const struct phases *p, enum phase ph)
{
	uint64_t end, start = 0;
	int i;

	if ((unsigned)ph >= PHASE_NR)
		return 0;
	end = atomic_load(&((struct phases *)p)->at[ph]);
	if (!end)
		return 0;
	for (i = (int)ph - 1; i >= 0; i--) {
		uint64_t t = atomic_load(&((struct phases *)p)->at[i]);

		if (t) {
			start = t;
			break;
		}
	}
	return end > start ? end - start : 0;
}

const char *phase_name(enum phase ph)
{
	return (unsigned)ph < PHASE_NR ? names[ph] : "?";
}

int phase_format(const struct phases *p, char *buf, size_t cap)
{
	uint64_t last = 0;
	size_t n = 0;
	int w;
	unsigned i;

	w = snprintf(buf, cap, "pre_main=%llu", (unsigned long long)(p->pre_main_ns / 1000));
	if (w < 0)
		return w;
	n = (size_t)w;
	for (i = 0; i < PHASE_NR; i++) {
		uint64_t t = atomic_load(&((struct phases *)p)->at[i]);

		if (!t)
			continue;
		last = t;
		w = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, " %s=%llu", names[i],
			     (unsigned long long)(phase_len_ns(p, (enum phase)i) / 1000));
		if (w < 0)
			return w;
		n += (size_t)w;
	}
	w = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, " total=%llu",
		     (unsigned long long)(last / 1000));
	if (w < 0)
		return w;
	return (int)(n + (size_t)w);
}

void phase_count_exit(struct phases *p, uint32_t kvm_exit_reason)
{
	enum phase_exit k;

	switch (kvm_exit_reason) {
	case KVM_EXIT_IO: k = PHASE_EXIT_IO; break;
	case KVM_EXIT_MMIO: k = PHASE_EXIT_MMIO; break;
	case KVM_EXIT_INTR: k = PHASE_EXIT_INTR; break;
	default: k = PHASE_EXIT_OTHER; break;
	}
	atomic_fetch_add_explicit(&p->exits[k], 1, memory_order_relaxed);
}

int phase_format_exits(const struct phases *p, char *buf, size_t cap)
{
	struct phases *q = (struct phases *)p;

	return snprintf(buf, cap, "io=%llu mmio=%llu intr=%llu other=%llu",
			(unsigned long long)atomic_load(&q->exits[PHASE_EXIT_IO]),
			(unsigned long long)atomic_load(&q->exits[PHASE_EXIT_MMIO]),
			(unsigned long long)atomic_load(&q->exits[PHASE_EXIT_INTR]),
			(unsigned long long)atomic_load(&q->exits[PHASE_EXIT_OTHER]));
}

void phase_log(const struct phases *p, const char *what)
{
	char line[512];
	unsigned i;

	if (log_get_level() < LOG_DEBUG)
		return;
	phase_format(p, line, sizeof(line));
	log_debug("phases %s (µs): %s", what, line);
	/* None counted: a process without the vCPUs (the restore helper's
	 * fork), whose zeros would only mislead. */
	for (i = 0; i < PHASE_EXIT_NR; i++)
		if (atomic_load(&((struct phases *)p)->exits[i]))
			break;
	if (i == PHASE_EXIT_NR)
		return;
	phase_format_exits(p, line, sizeof(line));
	log_debug("exits %s: %s", what, line);
}
