/* vCPUs: creation (CPUID, MSRs, LAPIC, boot registers), one thread each,
 * and the exit dispatch. */
#include "vmm/vcpu.h"
#include "vmm/gprof.h"
#include "vmm/base/thread.h"
#include "vmm/base/log.h"
#include "vmm/vm.h"
#include "vmm/seccomp.h"
#include "boot/layout.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define MSR_IA32_SYSENTER_CS 0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MSR_MTRR_DEF_TYPE 0x2ff
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_CSTAR 0xc0000083
#define MSR_SYSCALL_MASK 0xc0000084
#define MSR_KERNEL_GS_BASE 0xc0000102

#define MISC_ENABLE_FAST_STRING 1ull
#define MTRR_ENABLE (1ull << 11)
#define MTRR_TYPE_WB 6ull

#define APIC_LVT0 0x350
#define APIC_LVT1 0x360
#define APIC_MODE_NMI 0x4
#define APIC_MODE_EXTINT 0x7

#define X86_CR0_PE 0x1ull
#define X86_CR0_MP 0x2ull
#define X86_CR0_ET 0x10ull
#define X86_CR0_NE 0x20ull
#define X86_CR0_WP 0x10000ull
#define X86_CR0_PG 0x80000000ull
#define X86_CR4_PAE 0x20ull
#define EFER_LME 0x100ull
#define EFER_LMA 0x400ull

/* The MSRs Linux expects at its 64-bit entry (as Firecracker sets them). */
static const struct {
	uint32_t index;
	uint64_t value;
} boot_msrs[] = {
	{ MSR_IA32_SYSENTER_CS, 0 },  { MSR_IA32_SYSENTER_ESP, 0 },
	{ MSR_IA32_SYSENTER_EIP, 0 }, { MSR_STAR, 0 },
	{ MSR_CSTAR, 0 },             { MSR_KERNEL_GS_BASE, 0 },
	{ MSR_SYSCALL_MASK, 0 },      { MSR_LSTAR, 0 },
	{ MSR_IA32_TSC, 0 },          { MSR_IA32_MISC_ENABLE, MISC_ENABLE_FAST_STRING },
	{ MSR_MTRR_DEF_TYPE, MTRR_ENABLE | MTRR_TYPE_WB },
};

static int msr_supported(const struct kvm_msr_list *list, uint32_t index)
{
	uint32_t i;

	for (i = 0; i < list->nmsrs; i++)
		if (list->indices[i] == index)
			return 1;
	return 0;
}

/* A custom CPU template's MSR modifiers (cputmpl.h), on the values the
 * vCPU has now (vmm's boot values where it set one): read, filtered,
 * written back. An MSR KVM does not list fails the start, as Firecracker's
 * MsrNotSupported. */
static int vcpu_tmpl_msrs(struct vcpu *v, const struct cpu_tmpl *t, const struct kvm_msr_list *supported)
{
	struct kvm_msrs *m;
	unsigned i;
	int r;

	if (!t->nr_msrs)
		return 0;
	for (i = 0; i < t->nr_msrs; i++)
		if (!msr_supported(supported, t->msrs[i].addr)) {
			snprintf(v->vm->start_why, sizeof(v->vm->start_why),
				 "Start microvm error: Failed to create guest config: Template changes an MSR entry not "
				 "supported by KVM: Register Address: %x", t->msrs[i].addr);
			log_err("cpu-config: %s", v->vm->start_why);
			return -EINVAL;
		}
	m = calloc(1, sizeof(*m) + t->nr_msrs * sizeof(struct kvm_msr_entry));
	if (!m)
		return -ENOMEM;
	for (i = 0; i < t->nr_msrs; i++)
		m->entries[i].index = t->msrs[i].addr;
	m->nmsrs = t->nr_msrs;
	r = kvm_ioctl_var(v->fd, KVM_GET_MSRS, m);
	if (r >= 0 && (unsigned)r < t->nr_msrs) {
		snprintf(v->vm->start_why, sizeof(v->vm->start_why),
			 "Start microvm error: Failed to create guest config: KVM vcpu ioctl failed: cannot read MSR %x",
			 m->entries[r].index);
		r = -EINVAL;
	}
	for (i = 0; r >= 0 && i < t->nr_msrs; i++)
		m->entries[i].data = cpu_tmpl_filter(m->entries[i].data, t->msrs[i].filter, t->msrs[i].value);
	if (r >= 0)
		r = kvm_ioctl_var(v->fd, KVM_SET_MSRS, m);
	if (r >= 0 && (unsigned)r < t->nr_msrs) {
		snprintf(v->vm->start_why, sizeof(v->vm->start_why),
			 "Start microvm error: Failed to create guest config: KVM vcpu ioctl failed: KVM refused MSR %x "
			 "= 0x%llx", m->entries[r].index, (unsigned long long)m->entries[r].data);
		r = -EINVAL;
	}
	if (r < 0 && v->vm->start_why[0])
		log_err("cpu-config: %s", v->vm->start_why);
	free(m);
	return r < 0 ? r : 0;
}

static int vcpu_set_msrs(struct vcpu *v, const struct kvm_msr_list *supported)
{
	const unsigned max = sizeof(boot_msrs) / sizeof(boot_msrs[0]);
	struct kvm_msrs *m = calloc(1, sizeof(*m) + max * sizeof(struct kvm_msr_entry));
	unsigned i, n = 0;
	int r;

	if (!m)
		return -ENOMEM;
	for (i = 0; i < max; i++) {
		if (!msr_supported(supported, boot_msrs[i].index)) {
			log_debug("vcpu%u: KVM does not list MSR 0x%x, not set", v->index,
				  boot_msrs[i].index);
			continue;
		}
		m->entries[n].index = boot_msrs[i].index;
		m->entries[n].data = boot_msrs[i].value;
		n++;
	}
	m->nmsrs = n;
	r = kvm_ioctl_var(v->fd, KVM_SET_MSRS, m);
	if (r >= 0 && (unsigned)r < n) {
		log_err("vcpu%u: KVM refused MSR 0x%x", v->index, m->entries[r].index);
		r = -EINVAL;
	}
	free(m);
	if (r >= 0 && v->vm->cfg.cpu_tmpl)
		r = vcpu_tmpl_msrs(v, v->vm->cfg.cpu_tmpl, supported);
	return r < 0 ? r : 0;
}

struct kvm_cpuid2 *vcpu_get_cpuid(const struct vcpu *v)
{
	struct kvm_cpuid2 *c;

	/* First exactly as many entries as vmm set. Some KVMs (Linux 6.1,
	 * Debian 12's) leave nent as given on success, and a bigger buffer
	 * came back with zeroed entries past the real ones, read as more
	 * leaf 0s (the guest tier's 230 all-zero lines). Too small a buffer
	 * fails with E2BIG without saying the size: a KVM that keeps its own
	 * view of the table (kvm_pvm) holds more entries than vmm set, so
	 * that is retried once with room for the most KVM reports, and
	 * all-zero entries at the end are dropped. */
	unsigned nent = v->cpuid_nent;

	for (;;) {
		c = calloc(1, sizeof(*c) + nent * sizeof(c->entries[0]));
		if (!c)
			return NULL;
		c->nent = nent;
		if (ioctl(v->fd, KVM_GET_CPUID2, c) == 0)
			break;
		int e = errno;

		free(c);
		if (e == E2BIG && nent < VCPU_MAX_CPUID_ENTRIES) {
			nent = VCPU_MAX_CPUID_ENTRIES;
			continue;
		}
		log_err("vcpu%u: KVM_GET_CPUID2: %s", v->index, strerror(e));
		return NULL;
	}
	if (c->nent > nent)
		c->nent = nent;
	while (c->nent > 0 && cpuid_entry_zero(&c->entries[c->nent - 1]))
		c->nent--;
	return c;
}

/* Some hosts' KVM (kvm_pvm) override the CPUID a VMM sets with their own
 * view. Read it back and say so once, naming the first leaf that differs:
 * on such hosts the kernel parameters the VMM appends hide the features. */
static void vcpu_check_cpuid(struct vcpu *v, const struct kvm_cpuid2 *set)
{
	struct kvm_cpuid2 *got = vcpu_get_cpuid(v);
	unsigned i;

	if (!got)
		return;
	for (i = 0; i < set->nent; i++) {
		const struct kvm_cpuid_entry2 *a = &set->entries[i];
		const struct kvm_cpuid_entry2 *b =
			cpuid_find(got->entries, got->nent, a->function, a->index);

		if (b && cpuid_entry_same(a, b))
			continue;
		v->vm->cpuid_overridden = 1;
		/* Expected where ring 0 is emulated (and said only with -v
		 * there: on every run it is noise); anywhere else it is a
		 * surprise worth a warning. */
		log_msg(v->vm->cfg.host_emulates_ring0 ? LOG_DEBUG : LOG_WARN,
			"this host's KVM does not apply the CPUID vmm sets (leaf 0x%x.%u: set "
			 "%08x %08x %08x %08x, KVM uses %08x %08x %08x %08x)%s",
			 a->function, a->index, a->eax, a->ebx, a->ecx, a->edx, b ? b->eax : 0,
			 b ? b->ebx : 0, b ? b->ecx : 0, b ? b->edx : 0,
			 v->vm->cfg.host_emulates_ring0 ? "; kernel parameters hide the features instead" : "");
		break;
	}
	free(got);
}

static int vcpu_set_cpuid(struct vcpu *v, const struct kvm_cpuid2 *supported)
{
	struct vm *vm = v->vm;
	size_t sz = sizeof(*supported) + supported->nent * sizeof(supported->entries[0]);
	struct kvm_cpuid2 *c = malloc(sz);
	int r;

	if (!c)
		return -ENOMEM;
	memcpy(c, supported, sz);
	c->nent = cpuid_apply(c->entries, c->nent, v->index, vm->nr_vcpus, vm->cfg.tmpl,
			      vm->kvm.tsc_deadline);
	/* A custom template's modifiers last, on top of vmm's CPUID. */
	if (vm->cfg.cpu_tmpl) {
		char why[160];

		if (cpu_tmpl_apply_cpuid(vm->cfg.cpu_tmpl, c->entries, c->nent, why, sizeof(why))) {
			snprintf(vm->start_why, sizeof(vm->start_why),
				 "Start microvm error: Failed to create guest config: %s", why);
			log_err("cpu-config: %s", why);
			free(c);
			return -EINVAL;
		}
	}
	r = kvm_ioctl_var(v->fd, KVM_SET_CPUID2, c);
	if (r >= 0)
		v->cpuid_nent = c->nent;
	if (r >= 0 && v->index == 0)
		vcpu_check_cpuid(v, c);
	free(c);
	return r < 0 ? r : 0;
}

static int vcpu_set_lapic(struct vcpu *v)
{
	struct kvm_lapic_state lapic;
	uint32_t *lvt0 = (uint32_t *)&lapic.regs[APIC_LVT0];
	uint32_t *lvt1 = (uint32_t *)&lapic.regs[APIC_LVT1];
	int r = kvm_ioctl_ptr(v->fd, KVM_GET_LAPIC, &lapic);

	if (r < 0)
		return r;
	/* LINT0 = ExtINT (the PIC), LINT1 = NMI, as the MP table says. */
	*lvt0 = (*lvt0 & ~0x700u) | (APIC_MODE_EXTINT << 8);
	*lvt1 = (*lvt1 & ~0x700u) | (APIC_MODE_NMI << 8);
	r = kvm_ioctl_ptr(v->fd, KVM_SET_LAPIC, &lapic);
	return r < 0 ? r : 0;
}

static void seg(struct kvm_segment *s, uint16_t sel, uint8_t type, int code)
{
	memset(s, 0, sizeof(*s));
	s->base = 0;
	s->limit = 0xfffff;
	s->selector = sel;
	s->type = type;
	s->present = 1;
	s->dpl = 0;
	s->db = code ? 0 : 1;
	s->s = 1;
	s->l = code ? 1 : 0;
	s->g = 1;
}

int vcpu_set_boot_regs(struct vcpu *v, uint64_t entry)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_fpu fpu;
	int r;

	r = kvm_ioctl_ptr(v->fd, KVM_GET_SREGS, &sregs);
	if (r < 0)
		return r;
	seg(&sregs.cs, BOOT_CS, 0xb, 1);
	seg(&sregs.ds, BOOT_DS, 0x3, 0);
	sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
	seg(&sregs.tr, BOOT_TSS, 0xb, 0);
	sregs.tr.s = 0;
	sregs.tr.db = 0;
	sregs.gdt.base = BOOT_GDT_ADDR;
	sregs.gdt.limit = 5 * 8 - 1;
	sregs.idt.base = BOOT_IDT_ADDR;
	sregs.idt.limit = 7;
	sregs.cr0 = X86_CR0_PE | X86_CR0_MP | X86_CR0_ET | X86_CR0_NE | X86_CR0_WP | X86_CR0_PG;
	sregs.cr3 = BOOT_PML4;
	sregs.cr4 = X86_CR4_PAE;
	sregs.efer = EFER_LME | EFER_LMA;
	r = kvm_ioctl_ptr(v->fd, KVM_SET_SREGS, &sregs);
	if (r < 0)
		return r;

	memset(&regs, 0, sizeof(regs));
	regs.rflags = 0x2;
	regs.rip = entry;
	regs.rsp = BOOT_STACK;
	regs.rbp = BOOT_STACK;
	regs.rsi = BOOT_ZERO_PAGE; /* 64-bit boot protocol: boot_params */
	r = kvm_ioctl_ptr(v->fd, KVM_SET_REGS, &regs);
	if (r < 0)
		return r;

	memset(&fpu, 0, sizeof(fpu));
	fpu.fcw = 0x37f;
	fpu.mxcsr = 0x1f80;
	r = kvm_ioctl_ptr(v->fd, KVM_SET_FPU, &fpu);
	return r < 0 ? r : 0;
}

int vcpu_create(struct vcpu *v, struct vm *vm, unsigned index,
		const struct kvm_cpuid2 *cpuid, const struct kvm_msr_list *msrs)
{
	int r;

	memset(v, 0, sizeof(*v));
	v->vm = vm;
	v->index = index;
	v->fd = kvm_ioctl_val(vm->fd, KVM_CREATE_VCPU, index);
	if (v->fd < 0) {
		r = v->fd;
		v->fd = -1;
		return r;
	}
	v->run = mmap(NULL, (size_t)vm->kvm.run_mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      v->fd, 0);
	if (v->run == MAP_FAILED) {
		r = -errno;
		v->run = NULL;
		goto err_close;
	}
	r = vcpu_set_cpuid(v, cpuid);
	if (r)
		goto err_unmap;
	r = vcpu_set_msrs(v, msrs);
	if (r)
		goto err_unmap;
	r = vcpu_set_lapic(v);
	if (r)
		goto err_unmap;
	return 0;

err_unmap:
	munmap(v->run, (size_t)vm->kvm.run_mmap_size);
	v->run = NULL;
err_close:
	close(v->fd);
	v->fd = -1;
	return r;
}

void vcpu_destroy(struct vcpu *v)
{
	if (v->run)
		munmap(v->run, (size_t)v->vm->kvm.run_mmap_size);
	if (v->fd >= 0)
		close(v->fd);
	v->run = NULL;
	v->fd = -1;
}

static void vcpu_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	uint32_t i;

	/* String I/O (rep outsb/insb) arrives as `count` back-to-back units. */
	for (i = 0; i < run->io.count; i++) {
		bus_access(&v->vm->pio, run->io.port, data, run->io.size,
			   run->io.direction == KVM_EXIT_IO_OUT);
		data += run->io.size;
	}
}

static void vcpu_mmio(struct vcpu *v)
{
	struct kvm_run *run = v->run;

	if (run->mmio.len > sizeof(run->mmio.data))
		return;
	bus_access(&v->vm->mmio, run->mmio.phys_addr, run->mmio.data, run->mmio.len,
		   run->mmio.is_write);
}

static void vcpu_report_error(struct vcpu *v, const char *what)
{
	struct kvm_regs regs;

	if (kvm_ioctl_ptr(v->fd, KVM_GET_REGS, &regs) == 0)
		vm_request_exit(v->vm, VM_EXIT_KVM_ERROR, "vcpu%u: %s at rip 0x%llx", v->index,
				what, (unsigned long long)regs.rip);
	else
		vm_request_exit(v->vm, VM_EXIT_KVM_ERROR, "vcpu%u: %s", v->index, what);
}

/* Parks until the pause ends or the VM stops. */
static void vcpu_park(struct vcpu *v)
{
	struct vm *vm = v->vm;

	pthread_mutex_lock(&vm->pause_lock);
	vm->parked++;
	pthread_cond_broadcast(&vm->pause_cond);
	while (atomic_load(&vm->pause_req) && atomic_load(&vm->exit_reason) == VM_RUNNING)
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	vm->parked--;
	pthread_mutex_unlock(&vm->pause_lock);
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	sigset_t set;
	char what[128];

	snprintf(what, sizeof(what), "vcpu%u", v->index);
	vmm_thread_name(what);
	/* Only the kick signal reaches this thread, and only during KVM_RUN's
	 * window it matters: immediate_exit covers the rest. */
	sigemptyset(&set);
	sigaddset(&set, VCPU_KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	/* Its own allow-list, before the guest runs an instruction here. */
	if (vm->cfg.seccomp) {
		int r = sc_install(SC_VCPU);

		if (r) {
			vm_request_exit(vm, VM_EXIT_VMM_ERROR, "vcpu%u: cannot install its seccomp filter: %s",
					v->index, strerror(-r));
			goto out;
		}
		sc_test_violate(SC_VCPU);
	}

	while (atomic_load(&vm->exit_reason) == VM_RUNNING) {
		int r;

		if (v->index == 0 && atomic_load(&vm->first_run_ns) == 0) {
			uint64_t now = log_now_ns();

			atomic_store(&vm->first_run_ns, now - vm->cfg.t0_ns);
			phase_mark_at(&vm->phases, PHASE_FIRST_RUN, now);
		}
		/* A pause request seen here (not through the kick) still goes
		 * through KVM_RUN once: with immediate_exit it completes the
		 * MMIO/PIO the last exit left pending and returns EINTR, so the
		 * state read while parked is the state after the instruction. */
		if (atomic_load(&vm->pause_req))
			v->run->immediate_exit = 1;
		r = ioctl(v->fd, KVM_RUN, 0);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				phase_count_exit(&vm->phases, KVM_EXIT_INTR);
				/* gprof is called only when sampling: its code
				 * stays off the pages a VMM touches (docs/perf.md,
				 * section 11). */
				if (vm->prof)
					gprof_sample(vm->prof, v->index, v->fd);
				v->run->immediate_exit = 0;
				if (atomic_load(&vm->pause_req))
					vcpu_park(v);
				continue;
			}
			snprintf(what, sizeof(what), "KVM_RUN: %s", strerror(errno));
			vcpu_report_error(v, what);
			break;
		}
		phase_count_exit(&vm->phases, v->run->exit_reason);
		switch (v->run->exit_reason) {
		case KVM_EXIT_IO:
			vcpu_io(v);
			break;
		case KVM_EXIT_MMIO:
			vcpu_mmio(v);
			break;
		case KVM_EXIT_HLT:
			/* With the in-kernel LAPIC a halt only exits if no
			 * interrupt can ever wake it. */
			vm_request_exit(vm, VM_EXIT_KVM_ERROR, "vcpu%u halted with interrupts off", v->index);
			break;
		case KVM_EXIT_SHUTDOWN:
			vm_request_exit(vm, VM_EXIT_TRIPLE_FAULT, "vcpu%u: triple fault", v->index);
			break;
		case KVM_EXIT_SYSTEM_EVENT:
			switch (v->run->system_event.type) {
			case KVM_SYSTEM_EVENT_SHUTDOWN:
				vm_request_exit(vm, VM_EXIT_POWEROFF, "guest powered off");
				break;
			case KVM_SYSTEM_EVENT_RESET:
				vm_request_exit(vm, VM_EXIT_REBOOT, "guest reset the machine");
				break;
			case KVM_SYSTEM_EVENT_CRASH:
				vm_request_exit(vm, VM_EXIT_CRASH, "guest crashed");
				break;
			default:
				snprintf(what, sizeof(what), "unknown system event %u",
					 v->run->system_event.type);
				vcpu_report_error(v, what);
			}
			break;
		case KVM_EXIT_INTERNAL_ERROR:
			snprintf(what, sizeof(what), "KVM internal error (suberror %u)",
				 v->run->internal.suberror);
			vcpu_report_error(v, what);
			break;
		case KVM_EXIT_FAIL_ENTRY:
			snprintf(what, sizeof(what), "VM entry failed (reason 0x%llx)",
				 (unsigned long long)v->run->fail_entry.hardware_entry_failure_reason);
			vcpu_report_error(v, what);
			break;
		case KVM_EXIT_INTR:
			if (vm->prof)
				gprof_sample(vm->prof, v->index, v->fd);
			break;
		default:
			snprintf(what, sizeof(what), "unexpected KVM exit %u", v->run->exit_reason);
			vcpu_report_error(v, what);
		}
	}
out:
	/* Gone counts as parked: a pause never waits for a vCPU that left. */
	pthread_mutex_lock(&vm->pause_lock);
	vm->parked++;
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
	return NULL;
}

static void kick_handler(int sig)
{
	(void)sig;
}

int vcpu_start(struct vcpu *v)
{
	struct sigaction sa;
	int r;

	/* The handler is the same for every VM: install it idempotently. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler;
	sigemptyset(&sa.sa_mask);
	if (sigaction(VCPU_KICK_SIGNAL, &sa, NULL) < 0)
		return -errno;
	r = vmm_thread_start(&v->thread, vcpu_thread, v, 0);
	if (r)
		return -r;
	v->started = 1;
	return 0;
}

void vcpu_kick(struct vcpu *v)
{
	if (!v->started)
		return;
	v->run->immediate_exit = 1;
	pthread_kill(v->thread, VCPU_KICK_SIGNAL);
}

void vcpu_join(struct vcpu *v)
{
	if (!v->started)
		return;
	pthread_join(v->thread, NULL);
	v->started = 0;
}
