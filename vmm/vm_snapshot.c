/* Snapshot and restore of a whole VM: see snapshot.h and docs/snapshot.md.
 *
 * Every piece of state goes through one "visit" function per structure
 * that writes it (save) or reads it (restore), so the two directions
 * cannot drift apart; the file format is those visits in order. */
#include "vmm/vm_snapshot.h"
#include "vmm/base/snapfmt.h"
#include "vmm/vm_snapshot_priv.h"
#include "vmm/base/log.h"
#include "vmm/base/zpages.h"
#include "vmm/vcpu.h"
#include "vmm/wire/proto.h"
#include "devices/mmds.h"

#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAG_CONF SNAP_TAG('C', 'O', 'N', 'F')
#define TAG_HOST SNAP_TAG('H', 'O', 'S', 'T')
#define TAG_MEMR SNAP_TAG('M', 'E', 'M', 'R')
#define TAG_VMST SNAP_TAG('V', 'M', 'S', 'T')
#define TAG_VCPU SNAP_TAG('V', 'C', 'P', 'U')
#define TAG_SERL SNAP_TAG('S', 'E', 'R', 'L')
#define TAG_VIRT SNAP_TAG('V', 'I', 'R', 'T')
#define TAG_KBD SNAP_TAG('K', 'B', 'D', ' ')

#define SNAP_MAX_MSRS 1024u
#define SNAP_MAX_XSAVE (64u << 10)

/* One direction at a time: w set to save, r set to restore. */
struct sio {
	struct sbuf *w;
	struct srd *r;
};

static void io_u8(struct sio *io, uint8_t *v)
{
	if (io->w)
		sb_u8(io->w, *v);
	else
		*v = sr_u8(io->r);
}

static void io_u16(struct sio *io, uint16_t *v)
{
	if (io->w)
		sb_u16(io->w, *v);
	else
		*v = sr_u16(io->r);
}

static void io_u32(struct sio *io, uint32_t *v)
{
	if (io->w)
		sb_u32(io->w, *v);
	else
		*v = sr_u32(io->r);
}

static void io_ul(struct sio *io, uint64_t *v)
{
	if (io->w)
		sb_u64(io->w, *v);
	else
		*v = sr_u64(io->r);
}

/* KVM's __u64 is unsigned long long, uint64_t is unsigned long. */
static void io_ull(struct sio *io, __u64 *v)
{
	uint64_t u = *v;

	io_ul(io, &u);
	*v = u;
}

static void io_s64(struct sio *io, int64_t *v)
{
	uint64_t u = (uint64_t)*v;

	io_ul(io, &u);
	*v = (int64_t)u;
}

#define io_u64(io, p) _Generic((p), uint64_t *: io_ul, __u64 *: io_ull)(io, p)

static void io_bytes(struct sio *io, void *p, size_t n)
{
	if (io->w)
		sb_bytes(io->w, p, n);
	else
		sr_bytes(io->r, p, n);
}

static void io_str(struct sio *io, char *s, size_t cap)
{
	if (io->w)
		sb_str(io->w, s);
	else
		sr_str(io->r, s, cap);
}

/* The tag of the next section, without entering it (0 at the end). */
static uint32_t next_tag(const struct srd *r)
{
	uint32_t t;

	if (r->err || r->len - r->off < 4)
		return 0;
	memcpy(&t, r->p + r->off, 4);
	return le32toh(t);
}

/* ---- config and host ---- */

static void visit_conf(struct sio *io, struct snap_conf *c)
{
	uint32_t i;

	io_u64(io, &c->mem_bytes);
	io_u32(io, &c->cpus);
	io_u32(io, &c->tmpl);
	io_u32(io, &c->ring0);
	io_str(io, c->cmdline, sizeof(c->cmdline));
	io_str(io, c->token, sizeof(c->token));
	io_u32(io, &c->nr_disks);
	if (c->nr_disks > VM_MAX_DISKS) {
		if (io->r)
			sr_fail(io->r, "more disks than a VM can have");
		return;
	}
	for (i = 0; i < c->nr_disks; i++) {
		struct snap_disk *d = &c->disks[i];

		io_str(io, d->path, sizeof(d->path));
		io_str(io, d->file, sizeof(d->file));
		io_u8(io, &d->ro);
		io_u8(io, &d->root);
		io_str(io, d->id, sizeof(d->id));
		io_u64(io, &d->size);
		io_s64(io, &d->mtime_ns);
	}
	io_u32(io, &c->has_vsock);
	io_u64(io, &c->cid);
	io_str(io, c->uds, sizeof(c->uds));
	io_u32(io, &c->nr_nets);
	if (c->nr_nets > VM_MAX_NETS) {
		if (io->r)
			sr_fail(io->r, "more network interfaces than a VM can have");
		return;
	}
	for (i = 0; i < c->nr_nets; i++) {
		struct snap_net *n = &c->nets[i];

		io_str(io, n->tap, sizeof(n->tap));
		io_bytes(io, n->mac, sizeof(n->mac));
		io_u8(io, &n->no_offload);
		io_bytes(io, n->host_mac, sizeof(n->host_mac));
	}
	io_u32(io, &c->nr_fs);
	if (c->nr_fs > VM_MAX_FS) {
		if (io->r)
			sr_fail(io->r, "more shared drives than a VM can have");
		return;
	}
	for (i = 0; i < c->nr_fs; i++) {
		struct snap_fs *f = &c->fs[i];

		io_str(io, f->tag, sizeof(f->tag));
		io_str(io, f->path, sizeof(f->path));
		io_u8(io, &f->ro);
		io_u8(io, &f->cache);
	}
	/* Entropy and balloon devices: written since they exist; a snapshot
	 * from before ends its config section here and has neither. */
	if (io->r && io->r->off >= io->r->sect_end)
		return;
	io_u32(io, &c->has_entropy);
	io_u64(io, &c->entropy_rl.bytes_per_s);
	io_u64(io, &c->entropy_rl.bytes_burst);
	io_u64(io, &c->entropy_rl.ops_per_s);
	io_u64(io, &c->entropy_rl.ops_burst);
	io_u32(io, &c->has_balloon);
	io_u32(io, &c->balloon.amount_mib);
	io_u32(io, &c->balloon.stats_interval_s);
	{
		uint8_t oom = (uint8_t)c->balloon.deflate_on_oom, rep = (uint8_t)c->balloon.free_page_reporting;

		io_u8(io, &oom);
		io_u8(io, &rep);
		c->balloon.deflate_on_oom = oom;
		c->balloon.free_page_reporting = rep;
	}
	if (io->r && (c->has_entropy > 1 || c->has_balloon > 1))
		sr_fail(io->r, "entropy or balloon flag out of range");
	/* Where each shared drive is mounted in the guest (a clone's record
	 * names it: docs/snapshot.md): written since drives have names; a
	 * snapshot from before ends here. */
	if (io->r && io->r->off >= io->r->sect_end)
		return;
	for (i = 0; i < c->nr_fs; i++) {
		io_str(io, c->fs[i].at, sizeof(c->fs[i].at));
		if (io->r && c->fs[i].at[0] && !fs_guest_path_valid(c->fs[i].at))
			sr_fail(io->r, "a shared drive's guest directory is invalid");
	}
}

static void visit_host(struct sio *io, struct snap_conf *c)
{
	io_bytes(io, c->vendor, 12);
	c->vendor[12] = '\0';
	io_u32(io, &c->cpu_sig);
	io_u32(io, &c->tsc_khz);
}

static void host_cpu(char vendor[13], uint32_t *sig)
{
	unsigned a = 0, b = 0, c = 0, d = 0;

	__get_cpuid(0, &a, &b, &c, &d);
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = '\0';
	__get_cpuid(1, &a, &b, &c, &d);
	*sig = a;
}

/* Family and model, as CPUID.1:EAX encodes them; the stepping may differ. */
static uint32_t family_model(uint32_t sig)
{
	return sig & 0x0fff0ff0u;
}

/* ---- VM-wide KVM state ---- */

struct vm_state {
	struct kvm_clock_data clock;
	struct kvm_irqchip pic[2];
	struct kvm_irqchip ioapic;
	struct kvm_pit_state2 pit;
};

static void visit_pic(struct sio *io, struct kvm_pic_state *p)
{
	io_u8(io, &p->last_irr);
	io_u8(io, &p->irr);
	io_u8(io, &p->imr);
	io_u8(io, &p->isr);
	io_u8(io, &p->priority_add);
	io_u8(io, &p->irq_base);
	io_u8(io, &p->read_reg_select);
	io_u8(io, &p->poll);
	io_u8(io, &p->special_mask);
	io_u8(io, &p->init_state);
	io_u8(io, &p->auto_eoi);
	io_u8(io, &p->rotate_on_auto_eoi);
	io_u8(io, &p->special_fully_nested_mode);
	io_u8(io, &p->init4);
	io_u8(io, &p->elcr);
	io_u8(io, &p->elcr_mask);
}

static void visit_vm(struct sio *io, struct vm_state *s)
{
	struct kvm_ioapic_state *a = &s->ioapic.chip.ioapic;
	unsigned i;

	io_u64(io, &s->clock.clock);
	visit_pic(io, &s->pic[0].chip.pic);
	visit_pic(io, &s->pic[1].chip.pic);
	io_u64(io, &a->base_address);
	io_u32(io, &a->ioregsel);
	io_u32(io, &a->id);
	io_u32(io, &a->irr);
	for (i = 0; i < KVM_IOAPIC_NUM_PINS; i++)
		io_u64(io, &a->redirtbl[i].bits);
	for (i = 0; i < 3; i++) {
		struct kvm_pit_channel_state *c = &s->pit.channels[i];

		io_u32(io, &c->count);
		io_u16(io, &c->latched_count);
		io_u8(io, &c->count_latched);
		io_u8(io, &c->status_latched);
		io_u8(io, &c->status);
		io_u8(io, &c->read_state);
		io_u8(io, &c->write_state);
		io_u8(io, &c->write_latch);
		io_u8(io, &c->rw_mode);
		io_u8(io, &c->mode);
		io_u8(io, &c->bcd);
		io_u8(io, &c->gate);
		{
			int64_t t = c->count_load_time;

			io_s64(io, &t);
			c->count_load_time = t;
		}
	}
	io_u32(io, &s->pit.flags);
}

static int vm_state_get(struct vm *vm, struct vm_state *s)
{
	int r;

	memset(s, 0, sizeof(*s));
	s->pic[0].chip_id = KVM_IRQCHIP_PIC_MASTER;
	s->pic[1].chip_id = KVM_IRQCHIP_PIC_SLAVE;
	s->ioapic.chip_id = KVM_IRQCHIP_IOAPIC;
	if ((r = kvm_ioctl_ptr(vm->fd, KVM_GET_CLOCK, &s->clock)) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_GET_IRQCHIP, &s->pic[0])) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_GET_IRQCHIP, &s->pic[1])) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_GET_IRQCHIP, &s->ioapic)) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_GET_PIT2, &s->pit)) < 0)
		return r;
	return 0;
}

static int vm_state_set(struct vm *vm, struct vm_state *s)
{
	struct kvm_clock_data clock = { .clock = s->clock.clock };
	int r;

	s->pic[0].chip_id = KVM_IRQCHIP_PIC_MASTER;
	s->pic[1].chip_id = KVM_IRQCHIP_PIC_SLAVE;
	s->ioapic.chip_id = KVM_IRQCHIP_IOAPIC;
	if ((r = kvm_ioctl_ptr(vm->fd, KVM_SET_PIT2, &s->pit)) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_SET_CLOCK, &clock)) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_SET_IRQCHIP, &s->pic[0])) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_SET_IRQCHIP, &s->pic[1])) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_SET_IRQCHIP, &s->ioapic)) < 0)
		return r;
	return 0;
}

/* ---- vCPU state ---- */

struct vcpu_state {
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	uint8_t has_xsave;
	uint32_t xsave_len;
	struct kvm_xsave *xsave; /* xsave_len bytes */
	struct kvm_fpu fpu;
	uint8_t has_xcrs;
	struct kvm_xcrs xcrs;
	struct kvm_lapic_state lapic;
	uint32_t nmsrs;
	struct kvm_msrs *msrs;   /* room for SNAP_MAX_MSRS */
	struct kvm_vcpu_events events;
	struct kvm_mp_state mp;
	struct kvm_debugregs dbg;
};

static void visit_seg(struct sio *io, struct kvm_segment *s)
{
	io_u64(io, &s->base);
	io_u32(io, &s->limit);
	io_u16(io, &s->selector);
	io_u8(io, &s->type);
	io_u8(io, &s->present);
	io_u8(io, &s->dpl);
	io_u8(io, &s->db);
	io_u8(io, &s->s);
	io_u8(io, &s->l);
	io_u8(io, &s->g);
	io_u8(io, &s->avl);
	io_u8(io, &s->unusable);
}

static void visit_dtable(struct sio *io, struct kvm_dtable *d)
{
	io_u64(io, &d->base);
	io_u16(io, &d->limit);
}

static void visit_vcpu(struct sio *io, struct vcpu_state *v, uint32_t host_xsave_len)
{
	struct kvm_regs *g = &v->regs;
	struct kvm_sregs *s = &v->sregs;
	__u64 *regs[] = { &g->rax, &g->rbx, &g->rcx, &g->rdx, &g->rsi, &g->rdi,
			     &g->rsp, &g->rbp, &g->r8,  &g->r9,  &g->r10, &g->r11,
			     &g->r12, &g->r13, &g->r14, &g->r15, &g->rip, &g->rflags };
	struct kvm_segment *segs[] = { &s->cs, &s->ds, &s->es, &s->fs, &s->gs, &s->ss, &s->tr, &s->ldt };
	unsigned i;

	for (i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		io_u64(io, regs[i]);
	for (i = 0; i < sizeof(segs) / sizeof(segs[0]); i++)
		visit_seg(io, segs[i]);
	visit_dtable(io, &s->gdt);
	visit_dtable(io, &s->idt);
	io_u64(io, &s->cr0);
	io_u64(io, &s->cr2);
	io_u64(io, &s->cr3);
	io_u64(io, &s->cr4);
	io_u64(io, &s->cr8);
	io_u64(io, &s->efer);
	io_u64(io, &s->apic_base);
	for (i = 0; i < 4; i++)
		io_u64(io, &s->interrupt_bitmap[i]);

	/* FPU: the XSAVE area (its layout is the CPU's, CPUID leaf 0xD) where
	 * KVM has it, else the legacy FPU fields. */
	io_u8(io, &v->has_xsave);
	if (v->has_xsave) {
		io_u32(io, &v->xsave_len);
		if (io->r && (v->xsave_len != host_xsave_len || !v->xsave)) {
			sr_fail(io->r, "the XSAVE area differs in size from this host's (another CPU)");
			return;
		}
		io_bytes(io, v->xsave, v->xsave_len);
	} else {
		struct kvm_fpu *f = &v->fpu;

		io_bytes(io, f->fpr, sizeof(f->fpr));
		io_u16(io, &f->fcw);
		io_u16(io, &f->fsw);
		io_u8(io, &f->ftwx);
		io_u16(io, &f->last_opcode);
		io_u64(io, &f->last_ip);
		io_u64(io, &f->last_dp);
		io_bytes(io, f->xmm, sizeof(f->xmm));
		io_u32(io, &f->mxcsr);
	}
	io_u8(io, &v->has_xcrs);
	if (v->has_xcrs) {
		io_u32(io, &v->xcrs.nr_xcrs);
		if (v->xcrs.nr_xcrs > KVM_MAX_XCRS) {
			if (io->r)
				sr_fail(io->r, "more XCRs than KVM has");
			return;
		}
		for (i = 0; i < v->xcrs.nr_xcrs; i++) {
			io_u32(io, &v->xcrs.xcrs[i].xcr);
			io_u64(io, &v->xcrs.xcrs[i].value);
		}
	}
	/* The LAPIC's register page is architectural (1 KiB, SDM 11.4.1). */
	io_bytes(io, v->lapic.regs, sizeof(v->lapic.regs));

	io_u32(io, &v->nmsrs);
	if (v->nmsrs > SNAP_MAX_MSRS) {
		if (io->r)
			sr_fail(io->r, "more MSRs than any KVM reports");
		return;
	}
	for (i = 0; i < v->nmsrs; i++) {
		io_u32(io, &v->msrs->entries[i].index);
		io_u64(io, &v->msrs->entries[i].data);
	}

	io_u8(io, &v->events.exception.injected);
	io_u8(io, &v->events.exception.nr);
	io_u8(io, &v->events.exception.has_error_code);
	io_u8(io, &v->events.exception.pending);
	io_u32(io, &v->events.exception.error_code);
	io_u8(io, &v->events.interrupt.injected);
	io_u8(io, &v->events.interrupt.nr);
	io_u8(io, &v->events.interrupt.soft);
	io_u8(io, &v->events.interrupt.shadow);
	io_u8(io, &v->events.nmi.injected);
	io_u8(io, &v->events.nmi.pending);
	io_u8(io, &v->events.nmi.masked);
	io_u32(io, &v->events.sipi_vector);
	io_u32(io, &v->events.flags);
	io_u8(io, &v->events.smi.smm);
	io_u8(io, &v->events.smi.pending);
	io_u8(io, &v->events.smi.smm_inside_nmi);
	io_u8(io, &v->events.smi.latched_init);
	io_u8(io, &v->events.triple_fault.pending);
	io_u8(io, &v->events.exception_has_payload);
	io_u64(io, &v->events.exception_payload);

	io_u32(io, &v->mp.mp_state);
	for (i = 0; i < 4; i++)
		io_u64(io, &v->dbg.db[i]);
	io_u64(io, &v->dbg.dr6);
	io_u64(io, &v->dbg.dr7);
	io_u64(io, &v->dbg.flags);
}

static void vcpu_state_free(struct vcpu_state *v)
{
	free(v->xsave);
	free(v->msrs);
	memset(v, 0, sizeof(*v));
}

/* How big this host's XSAVE area is: KVM_CAP_XSAVE2 where KVM has it
 * (at least 4096), 4096 with only KVM_CAP_XSAVE, 0 without XSAVE. */
static uint32_t host_xsave_len(struct vm *vm)
{
	int n;

	if (ioctl(vm->kvm.fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE) <= 0)
		return 0;
	n = ioctl(vm->fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);
	if (n > (int)sizeof(struct kvm_xsave) && n <= (int)SNAP_MAX_XSAVE)
		return (uint32_t)n;
	return sizeof(struct kvm_xsave);
}

static int vcpu_state_alloc(struct vcpu_state *v, uint32_t xsave_len)
{
	memset(v, 0, sizeof(*v));
	v->msrs = calloc(1, sizeof(*v->msrs) + SNAP_MAX_MSRS * sizeof(v->msrs->entries[0]));
	if (xsave_len)
		v->xsave = calloc(1, xsave_len);
	if (!v->msrs || (xsave_len && !v->xsave)) {
		vcpu_state_free(v);
		return -ENOMEM;
	}
	return 0;
}

/* Reads every MSR KVM lists that this vCPU has. KVM_GET_MSRS stops at the
 * first index it cannot read: that one is left out, and it goes on. */
static int vcpu_get_msrs(struct vm *vm, struct vcpu *c, struct vcpu_state *v)
{
	struct kvm_msr_list *list;
	struct kvm_msrs *batch;
	uint32_t i = 0;
	int r;

	list = calloc(1, sizeof(*list) + SNAP_MAX_MSRS * sizeof(uint32_t));
	batch = calloc(1, sizeof(*batch) + SNAP_MAX_MSRS * sizeof(batch->entries[0]));
	if (!list || !batch) {
		r = -ENOMEM;
		goto out;
	}
	list->nmsrs = SNAP_MAX_MSRS;
	r = kvm_ioctl_var(vm->kvm.fd, KVM_GET_MSR_INDEX_LIST, list);
	if (r < 0)
		goto out;
	v->nmsrs = 0;
	while (i < list->nmsrs) {
		uint32_t n = list->nmsrs - i, k;

		memset(batch, 0, sizeof(*batch) + n * sizeof(batch->entries[0]));
		batch->nmsrs = n;
		for (k = 0; k < n; k++)
			batch->entries[k].index = list->indices[i + k];
		r = ioctl(c->fd, KVM_GET_MSRS, batch);
		if (r < 0) {
			r = -errno;
			log_err("vcpu%u: KVM_GET_MSRS: %s", c->index, strerror(errno));
			goto out;
		}
		for (k = 0; k < (uint32_t)r; k++)
			v->msrs->entries[v->nmsrs++] = batch->entries[k];
		i += (uint32_t)r + 1; /* skip the one KVM could not read */
	}
	r = 0;
out:
	free(list);
	free(batch);
	return r;
}

/* The TSC as the pause found it (vm.h "frozen"): with the kvmclock value
 * from the same moment, the restored guest's clocks go on from there, not
 * from the end of the memory write. */
static void vcpu_state_freeze_tsc(struct vcpu_state *v, uint64_t tsc)
{
	for (uint32_t i = 0; i < v->nmsrs; i++)
		if (v->msrs->entries[i].index == MSR_IA32_TSC)
			v->msrs->entries[i].data = tsc;
}

static int vcpu_state_get(struct vm *vm, struct vcpu *c, struct vcpu_state *v, uint32_t xlen)
{
	int r;

	if ((r = kvm_ioctl_ptr(c->fd, KVM_GET_REGS, &v->regs)) < 0 ||
	    (r = kvm_ioctl_ptr(c->fd, KVM_GET_SREGS, &v->sregs)) < 0)
		return r;
	if (xlen) {
		v->has_xsave = 1;
		v->xsave_len = xlen;
		r = xlen > sizeof(struct kvm_xsave) ? kvm_ioctl_var(c->fd, KVM_GET_XSAVE2, v->xsave)
						     : kvm_ioctl_var(c->fd, KVM_GET_XSAVE, v->xsave);
	} else {
		r = kvm_ioctl_ptr(c->fd, KVM_GET_FPU, &v->fpu);
	}
	if (r < 0)
		return r;
	if (ioctl(vm->kvm.fd, KVM_CHECK_EXTENSION, KVM_CAP_XCRS) > 0) {
		v->has_xcrs = 1;
		if ((r = kvm_ioctl_ptr(c->fd, KVM_GET_XCRS, &v->xcrs)) < 0)
			return r;
	}
	if ((r = kvm_ioctl_ptr(c->fd, KVM_GET_LAPIC, &v->lapic)) < 0 ||
	    (r = vcpu_get_msrs(vm, c, v)) < 0 ||
	    (r = kvm_ioctl_ptr(c->fd, KVM_GET_VCPU_EVENTS, &v->events)) < 0 ||
	    (r = kvm_ioctl_ptr(c->fd, KVM_GET_MP_STATE, &v->mp)) < 0 ||
	    (r = kvm_ioctl_ptr(c->fd, KVM_GET_DEBUGREGS, &v->dbg)) < 0)
		return r;
	return 0;
}

/* Reads the TSC back after KVM_SET_MSRS set it: a KVM that cannot offset
 * the guest's TSC (kvm_pvm) keeps the host's, and the restored guest's
 * TSC then jumps by the time since the pause. Said once per VM (a warning
 * where KVM runs ring 0 natively, where it is a surprise; with -v where it
 * emulates it), as more than 100 ms off. */
static void check_tsc(struct vm *vm, struct vcpu *c, const struct vcpu_state *v)
{
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e;
	} m = { .h.nmsrs = 1, .e.index = MSR_IA32_TSC };
	uint64_t want = 0, off, khz;
	uint32_t i;
	int k;

	if (vm->tsc_said)
		return;
	for (i = 0; i < v->nmsrs && v->msrs->entries[i].index != MSR_IA32_TSC; i++)
		;
	if (i == v->nmsrs || ioctl(c->fd, KVM_GET_MSRS, &m) != 1)
		return;
	want = v->msrs->entries[i].data;
	off = m.e.data > want ? m.e.data - want : want - m.e.data;
	k = ioctl(c->fd, KVM_GET_TSC_KHZ, 0);
	khz = k > 0 ? (uint64_t)k : 3000000;
	if (off / khz < 100)
		return;
	vm->tsc_said = 1;
	log_msg(vm->cfg.host_emulates_ring0 ? LOG_DEBUG : LOG_WARN,
		"this host's KVM does not set the guest's TSC: vcpu%u's is %s by %llu ms from the snapshot's, "
		"so the restored guest's TSC jumps by that much", c->index, m.e.data > want ? "ahead" : "behind",
		(unsigned long long)(off / khz));
}

/* In the order Firecracker uses: MSRs after the LAPIC (the TSC deadline
 * needs the LAPIC's timer mode), events and MP state last. */
static int vcpu_state_set(struct vm *vm, struct vcpu *c, struct vcpu_state *v)
{
	int r;

	if ((r = kvm_ioctl_ptr(c->fd, KVM_SET_MP_STATE, &v->mp)) < 0 ||
	    (r = kvm_ioctl_ptr(c->fd, KVM_SET_REGS, &v->regs)) < 0 ||
	    (r = kvm_ioctl_ptr(c->fd, KVM_SET_SREGS, &v->sregs)) < 0)
		return r;
	if (v->has_xsave)
		r = kvm_ioctl_var(c->fd, KVM_SET_XSAVE, v->xsave);
	else
		r = kvm_ioctl_ptr(c->fd, KVM_SET_FPU, &v->fpu);
	if (r < 0)
		return r;
	if (v->has_xcrs && (r = kvm_ioctl_ptr(c->fd, KVM_SET_XCRS, &v->xcrs)) < 0)
		return r;
	if ((r = kvm_ioctl_ptr(c->fd, KVM_SET_DEBUGREGS, &v->dbg)) < 0 ||
	    (r = kvm_ioctl_ptr(c->fd, KVM_SET_LAPIC, &v->lapic)) < 0)
		return r;
	v->msrs->nmsrs = v->nmsrs;
	r = ioctl(c->fd, KVM_SET_MSRS, v->msrs);
	if (r < 0 || (uint32_t)r != v->nmsrs) {
		if (r < 0)
			log_err("vcpu%u: KVM_SET_MSRS: %s", c->index, strerror(errno));
		else
			log_err("vcpu%u: this host's KVM refuses MSR 0x%x = 0x%llx from the snapshot",
				c->index, v->msrs->entries[r].index,
				(unsigned long long)v->msrs->entries[r].data);
		return -EINVAL;
	}
	check_tsc(vm, c, v);
	if ((r = kvm_ioctl_ptr(c->fd, KVM_SET_VCPU_EVENTS, &v->events)) < 0)
		return r;
	return 0;
}

/* ---- devices ---- */

static void save_virtio(struct vm *vm, unsigned slot, struct sbuf *b)
{
	struct virtio_dev *d = vm->virtio[slot];
	unsigned i;

	virtio_mmio_save(d, b);
	for (i = 0; i < vm->cfg.nr_disks; i++)
		if (vm->disks[i] && &vm->disks[i]->vdev == d)
			sb_u64(b, vm->disks[i]->capacity);
	if (vm->vsock && &vm->vsock->vdev == d) {
		sb_u64(b, vm->vsock->config.guest_cid);
		sb_u32(b, vm->vsock->next_port);
	}
	for (i = 0; i < vm->cfg.nr_nets; i++)
		if (vm->nets[i] && &vm->nets[i]->vdev == d)
			sb_bytes(b, vm->nets[i]->config.mac, 6);
	/* virtio-fs: the inode table and open handles by name, never data. */
	for (i = 0; i < vm->cfg.nr_fs; i++)
		if (vm->fs[i] && &vm->fs[i]->vdev == d)
			fuse_save(&vm->fs[i]->srv, b);
	if (vm->balloon && &vm->balloon->vdev == d)
		virtio_balloon_save(vm->balloon, b);
}

static int restore_virtio(struct vm *vm, const char *dir, unsigned slot, struct srd *r)
{
	struct virtio_dev *d = vm->virtio[slot];
	const char *why = "the record is truncated or corrupted";
	unsigned i;
	int e;

	if (virtio_mmio_restore(d, r, &why))
		goto bad;
	for (i = 0; i < vm->cfg.nr_disks; i++) {
		if (vm->disks[i] && &vm->disks[i]->vdev == d &&
		    sr_u64(r) != vm->disks[i]->capacity && !r->err) {
			why = "the disk image has another size than at snapshot time";
			goto bad;
		}
	}
	if (vm->vsock && &vm->vsock->vdev == d) {
		uint32_t next;

		(void)sr_u64(r); /* the CID comes from the options (a clone may differ) */
		/* Host ports go on from where the snapshot's left off: a guest
		 * socket from before the snapshot that the transport reset has
		 * not released yet must not meet a new connection on its port
		 * (the guest would answer that REQUEST with RST). */
		next = sr_u32(r);
		if (next >= VSOCK_HOST_PORT_FIRST)
			vm->vsock->next_port = next;
	}
	for (i = 0; i < vm->cfg.nr_nets; i++) {
		uint8_t mac[6];

		if (!vm->nets[i] || &vm->nets[i]->vdev != d)
			continue;
		sr_bytes(r, mac, sizeof(mac));
		if (!r->err && memcmp(mac, vm->nets[i]->config.mac, sizeof(mac))) {
			why = "the interface has another MAC address than the guest knows";
			goto bad;
		}
	}
	for (i = 0; i < vm->cfg.nr_fs; i++) {
		if (vm->fs[i] && &vm->fs[i]->vdev == d && !r->err && fuse_restore(&vm->fs[i]->srv, r)) {
			why = "the shared drive's inode table cannot be rebuilt";
			goto bad;
		}
	}
	if (vm->balloon && &vm->balloon->vdev == d && !r->err && virtio_balloon_restore(vm->balloon, r, &why))
		goto bad;
	if (r->err)
		goto bad;
	return 0;
bad:
	e = -EINVAL;
	log_err("snapshot %s: device %s: %s", dir, d->name, r->err && r->why ? r->why : why);
	return e;
}

/* ---- files ---- */

static int path_join(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int snap_copy_file(const char *src, const char *dst)
{
	struct stat st;
	int in, r;

	in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return -errno;
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(in);
		return -EINVAL; /* a symlink or device planted in a snapshot is not copied */
	}
	r = snap_copy_fd(in, dst);
	close(in);
	return r;
}

/* in: read with pread/copy_file_range at explicit offsets and lseek
 * (SEEK_DATA/SEEK_HOLE), so a device's own descriptor can be passed: the
 * devices use positioned I/O only. */
int snap_copy_fd(int in, const char *dst)
{
	struct stat st;
	off_t off = 0;
	int out, r = 0;

	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
		return -EINVAL;
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	if (fstat(in, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (ioctl(out, FICLONE, in) == 0)
		goto sync;
	if (ftruncate(out, st.st_size) < 0) {
		r = -errno;
		goto out;
	}
	/* Data extents only: holes stay holes. */
	while (off < st.st_size) {
		off_t data = lseek(in, off, SEEK_DATA), hole;

		if (data < 0) {
			if (errno == ENXIO)
				break;
			data = off; /* no SEEK_DATA: copy everything */
		}
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0 || hole > st.st_size)
			hole = st.st_size;
		off = data;
		while (off < hole) {
			off_t o_in = off, o_out = off;
			ssize_t n = copy_file_range(in, &o_in, out, &o_out, (size_t)(hole - off), 0);

			if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
				      errno == EOPNOTSUPP)) {
				char buf[65536];
				size_t want = (size_t)(hole - off) < sizeof(buf) ? (size_t)(hole - off) : sizeof(buf);

				int w;

				/* all of what was read, or the write's own error: a
				 * short write on a full disk must not leave copy_file_range's
				 * EXDEV in errno to be reported instead of ENOSPC */
				n = pread(in, buf, want, off);
				if (n > 0 && (w = pwrite_full(out, buf, (size_t)n, (uint64_t)off))) {
					errno = -w;
					n = -1;
				}
			}
			if (n < 0) {
				if (errno == EINTR)
					continue;
				r = -errno;
				goto out;
			}
			if (n == 0) {
				r = -EIO; /* the source shrank under us */
				goto out;
			}
			off += n;
		}
	}
sync:
	if (fsync(out) < 0)
		r = -errno;
out:
	close(out);
	if (r)
		unlink(dst);
	return r;
}

/* Removes a partial snapshot directory: only the files vm_snapshot writes. */
static void remove_partial(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[PATH_MAX];

	if (d) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (!path_join(p, sizeof(p), dir, e->d_name))
				unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* ---- save ---- */

void snap_head_save(struct sbuf *b, struct snap_conf *conf, const struct snap_ident *ident)
{
	struct sio io = { .w = b };

	sb_begin(b, TAG_CONF);
	visit_conf(&io, conf);
	sb_end(b);
	sb_begin(b, TAG_HOST);
	visit_host(&io, conf);
	sb_end(b);
	/* After HOST: a vmm from before identities refuses the file there
	 * ("sections out of order") and so never takes a diff for a full. */
	snapid_save(b, ident);
	/* Only with an MMDS: a snapshot without one stays readable by a vmm
	 * from before the record, which refuses one with it (snapmmds.h). */
	snap_mmds_save(b, &conf->mmds);
}

int snap_head_load(struct srd *r, struct snap_conf *c, struct snap_ident *ident)
{
	struct sio io = { .r = r };

	memset(ident, 0, sizeof(*ident));
	if (!sr_begin(r, TAG_CONF, "config")) {
		visit_conf(&io, c);
		sr_end(r, "config");
	}
	if (!r->err && !sr_begin(r, TAG_HOST, "host")) {
		visit_host(&io, c);
		sr_end(r, "host");
	}
	if (!r->err && (c->mem_bytes % GM_PAGE_SIZE || snapid_load(r, ident, c->mem_bytes / GM_PAGE_SIZE)))
		sr_fail(r, "the snapshot's identity section is invalid");
	if (!r->err && snap_mmds_load(r, &c->mmds, c->nr_nets))
		sr_fail(r, "the snapshot's MMDS record is invalid");
	return r->err ? -EINVAL : 0;
}

int snap_build_state(struct vm *vm, struct sbuf *b, struct snap_conf *conf, const struct snap_ident *ident)
{
	struct sio io = { .w = b };
	struct vm_state vs;
	uint32_t xlen = host_xsave_len(vm);
	unsigned i;
	int r;

	snap_head_save(b, conf, ident);

	sb_begin(b, TAG_MEMR);
	sb_u32(b, vm->gm.nr);
	for (i = 0; i < vm->gm.nr; i++) {
		sb_u64(b, vm->gm.r[i].gpa);
		sb_u64(b, vm->gm.r[i].size);
	}
	sb_u64(b, vm->gm.total);
	sb_end(b);

	if ((r = vm_state_get(vm, &vs)))
		return r;
	if (vm->frozen.valid)
		vs.clock.clock = vm->frozen.kvmclock;
	sb_begin(b, TAG_VMST);
	visit_vm(&io, &vs);
	sb_end(b);

	for (i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu_state v;

		if ((r = vcpu_state_alloc(&v, xlen)))
			return r;
		r = vcpu_state_get(vm, &vm->vcpus[i], &v, xlen);
		if (!r && vm->frozen.valid)
			vcpu_state_freeze_tsc(&v, vm->frozen.tsc[i]);
		if (!r) {
			sb_begin(b, TAG_VCPU);
			visit_vcpu(&io, &v, xlen);
			sb_end(b);
		}
		vcpu_state_free(&v);
		if (r)
			return r;
	}
	sb_begin(b, TAG_SERL);
	serial_save(&vm->dev.com1, b);
	sb_end(b);
	sb_begin(b, TAG_KBD);
	i8042_save(&vm->dev.i8042, b);
	sb_end(b);
	for (i = 0; i < vm->nr_virtio; i++) {
		sb_begin(b, TAG_VIRT);
		save_virtio(vm, i, b);
		sb_end(b);
	}
	return b->err;
}

/* The config part of the state; writable disks copied to
 * copy_dir/diskN<suffix> as they are now (the loops are paused: every write
 * the guest saw completed is in the file), or with copy_dir NULL left in
 * place, synced, recorded by path with no copy (standby, vmm/vm_standby.h). */
int snap_fill_conf(struct vm *vm, struct snap_conf *conf, const char *copy_dir, const char *suffix)
{
	char p[PATH_MAX], copy[40];
	struct stat st;
	unsigned i;
	int r;

	conf->mem_bytes = vm->cfg.mem_bytes;
	conf->cpus = vm->nr_vcpus;
	conf->tmpl = (uint32_t)vm->cfg.tmpl;
	conf->ring0 = (uint32_t)vm->cfg.host_emulates_ring0;
	snprintf(conf->cmdline, sizeof(conf->cmdline), "%s", vm->cmdline);
	snprintf(conf->token, sizeof(conf->token), "%s", vm->cfg.api_token ? vm->cfg.api_token : "");
	conf->nr_disks = vm->cfg.nr_disks;
	for (i = 0; i < vm->cfg.nr_disks; i++) {
		struct snap_disk *d = &conf->disks[i];
		const struct blk_options *o = &vm->cfg.disks[i];

		if (!realpath(o->path, d->path))
			snprintf(d->path, sizeof(d->path), "%s", o->path);
		d->ro = (uint8_t)o->ro;
		d->root = (uint8_t)o->root;
		snprintf(d->id, sizeof(d->id), "%s", o->id);
		d->size = vm->disks[i]->capacity * BLK_SECTOR;
		/* The device's own descriptor: a jailed VMM gave up the rights
		 * to open the disk by path again (it was opened as root). */
		if (vm->disks[i]->fd >= 0 ? fstat(vm->disks[i]->fd, &st) == 0 : stat(o->path, &st) == 0) {
			d->size = (uint64_t)st.st_size; /* what a restore compares */
			d->mtime_ns = mtime_ns(&st);
		}
		if (o->ro)
			continue;
		if (!copy_dir) {
			/* Standby: the disk stays where it is, synced (the loops
			 * are paused: it no longer changes); file stays "". */
			if (vm->disks[i]->fd >= 0 && fdatasync(vm->disks[i]->fd) < 0) {
				r = -errno;
				log_err("snapshot: syncing disk %s: %s", o->path, strerror(errno));
				return r;
			}
			continue;
		}
		snprintf(d->file, sizeof(d->file), "disk%u", i);
		snprintf(copy, sizeof(copy), "disk%u%s", i, suffix);
		if ((r = path_join(p, sizeof(p), copy_dir, copy)))
			return r;
		if (vm->disks[i]->fd >= 0 && fdatasync(vm->disks[i]->fd) < 0)
			return -errno;
		unlink(p); /* a diskN.next left by a failed in-place update */
		r = vm->disks[i]->fd >= 0 ? snap_copy_fd(vm->disks[i]->fd, p) : snap_copy_file(o->path, p);
		if (r) {
			log_err("snapshot: copying disk %s: %s", o->path, strerror(-r));
			return r;
		}
	}
	conf->has_vsock = vm->vsock != NULL;
	if (vm->vsock) {
		conf->cid = vm->vsock->opt.cid;
		snprintf(conf->uds, sizeof(conf->uds), "%s", vm->vsock->opt.uds);
	}
	conf->nr_nets = vm->cfg.nr_nets;
	for (i = 0; i < vm->cfg.nr_nets; i++) {
		snprintf(conf->nets[i].tap, sizeof(conf->nets[i].tap), "%s", vm->nets[i]->tap.name);
		memcpy(conf->nets[i].mac, vm->nets[i]->config.mac, 6);
		conf->nets[i].no_offload = (uint8_t)vm->cfg.nets[i].no_offload;
		if (tap_get_mac(&vm->nets[i]->tap, conf->nets[i].host_mac))
			memset(conf->nets[i].host_mac, 0, 6);
	}
	conf->has_entropy = vm->rng != NULL;
	if (vm->rng)
		conf->entropy_rl = vm->rng->limits;
	conf->has_balloon = vm->balloon != NULL;
	if (vm->balloon) {
		conf->balloon = vm->balloon->opt;
		conf->balloon.stats_interval_s = vm->balloon->stats_interval_s;
	}
	memset(&conf->mmds, 0, sizeof(conf->mmds));
	for (i = 0; vm->cfg.mmds && i < vm->cfg.nr_nets; i++)
		if (vm->cfg.nets[i].mmds)
			conf->mmds.nets |= 1u << i;
	if (conf->mmds.nets) {
		struct mmds *m = vm->cfg.mmds;

		pthread_mutex_lock(&m->lock);
		conf->mmds.version = (uint32_t)m->version;
		conf->mmds.ipv4 = m->ipv4;
		conf->mmds.imds_compat = (uint8_t)!!m->imds_compat;
		pthread_mutex_unlock(&m->lock);
		conf->mmds.present = 1;
	}
	conf->nr_fs = vm->cfg.nr_fs;
	for (i = 0; i < vm->cfg.nr_fs; i++) {
		struct snap_fs *f = &conf->fs[i];
		const struct fs_options *o = &vm->cfg.fs[i];

		snprintf(f->tag, sizeof(f->tag), "%s", o->tag);
		if (!realpath(o->path, f->path))
			snprintf(f->path, sizeof(f->path), "%s", o->path);
		f->ro = (uint8_t)o->ro;
		f->cache = (uint8_t)o->cache;
		snprintf(f->at, sizeof(f->at), "%s", o->at ? o->at : "");
	}
	host_cpu(conf->vendor, &conf->cpu_sig);
	r = vm->nr_vcpus ? ioctl(vm->vcpus[0].fd, KVM_GET_TSC_KHZ, 0) : 0;
	conf->tsc_khz = r > 0 ? (uint32_t)r : 0;
	return 0;
}

int vm_snapshot(struct vm *vm, const char *dir, uint64_t *mem_written)
{
	struct snap_opts o = { 0 };
	struct snap_stats st;
	int r = vm_snapshot_ex(vm, dir, &o, &st);

	if (!r && mem_written)
		*mem_written = st.mem_alloc;
	return r;
}

int vm_snapshot_in_place(struct vm *vm, const char *dir, uint64_t *mem_written)
{
	struct snap_opts o = { .disks_in_place = 1 };
	struct snap_stats st;
	int r = vm_snapshot_ex(vm, dir, &o, &st);

	if (!r && mem_written)
		*mem_written = st.mem_alloc;
	return r;
}

/* Here, beside its caller below: snapshot_diff.c builds on this file,
 * not the other way round (snapshot.h). */
int vm_dirty_harvest(struct vm *vm)
{
	unsigned i;
	int r;

	if (!vm->gm.dirty.w)
		return 0;
	for (i = 0; i < vm->gm.nr; i++) {
		r = dirty_kvm_harvest(&vm->gm.dirty, vm->fd, i, vm->gm.r[i].file_off / GM_PAGE_SIZE,
				      vm->gm.r[i].size / GM_PAGE_SIZE, vm->dirty_manual);
		if (r)
			return r;
	}
	return 0;
}

/* Every virtio-fs device answers its waiting SETLKWs (the loops are
 * paused). */
static void quiesce_fs(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < vm->cfg.nr_fs; i++)
		if (vm->fs[i])
			virtio_fs_quiesce(vm->fs[i]);
}

int vm_snapshot_ex(struct vm *vm, const char *dir, const struct snap_opts *o, struct snap_stats *stats)
{
	char tmp[PATH_MAX], p[PATH_MAX];
	struct snap_ident ident;
	struct dirty taken = { 0 }, mapped = { 0 };
	struct snap_conf *conf;
	struct snap_stats sst = { 0 };
	struct stat st;
	struct sbuf b;
	int fd, r;
	const char *slash;

	if (!vm->paused)
		return -EBUSY;
	/* A guest waiting for a lock is answered EINTR first: a clone holds
	 * none of this VM's locks and nothing retries its wait. */
	quiesce_fs(vm);
	memset(&ident, 0, sizeof(ident));
	if (o->mapped_diff && !vm->mem_base_dir[0]) {
		log_err("snapshot: guest memory is not a mapping of a snapshot's file: no base for a diff");
		return -EINVAL;
	}
	if (o->diff && !vm->gm.dirty.w) {
		log_err("snapshot: a diff snapshot needs dirty-page tracking (start the VM with --track-dirty, "
			"or track_dirty_pages in the Firecracker API)");
		return -EINVAL;
	}
	if (o->diff && (!vm->snap_dir[0] || snapid_is_zero(vm->snap_id))) {
		log_err("snapshot: a diff snapshot layers on the VM's last snapshot or the one it was "
			"restored from, and there is none (with an identity): take a full snapshot first");
		return -EINVAL;
	}
	if (lstat(dir, &st) == 0) {
		log_err("snapshot: %s already exists (a snapshot is never overwritten)", dir);
		return -EEXIST;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.partial-%d", dir, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if ((r = snapid_new(ident.id)))
		return r;
	ident.kind = o->diff || o->mapped_diff ? SNAP_KIND_DIFF : SNAP_KIND_FULL;
	if (vm->gm.dirty.w) {
		/* Every page written since the last snapshot: KVM's log, then
		 * ours, taken whole (given back if this snapshot fails). */
		if ((r = vm_dirty_harvest(vm)) || (r = dirty_init(&taken, vm->gm.dirty.pages)) ||
		    (r = dirty_take(&vm->gm.dirty, &taken))) {
			log_err("snapshot: reading the dirty log: %s", strerror(-r));
			dirty_free(&taken);
			return r;
		}
	}
	conf = calloc(1, sizeof(*conf));
	if (!conf) {
		r = -ENOMEM;
		goto out_taken;
	}
	sb_init(&b);
	if (mkdir(tmp, 0700) < 0) {
		r = -errno;
		log_err("snapshot: cannot create %s: %s", tmp, strerror(errno));
		free(conf);
		goto out_taken;
	}

	/* Guest memory: all of it, sparse; or the dirty pages at their offsets. */
	if ((r = path_join(p, sizeof(p), tmp, SNAP_MEMORY_FILE)))
		goto fail;
	fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	if (o->mapped_diff) {
		if (!(r = gm_private_pages(&vm->gm, &mapped))) {
			r = snapmem_write_pages(vm->gm.map, vm->gm.total, &mapped, fd, &sst.mem_written);
			sst.pages = dirty_count(&mapped);
		}
	} else if (o->diff) {
		r = snapmem_write_pages(vm->gm.map, vm->gm.total, &taken, fd, &sst.mem_written);
		sst.pages = dirty_count(&taken);
	} else {
		r = gm_dump(&vm->gm, fd);
		sst.pages = vm->gm.total / GM_PAGE_SIZE;
	}
	if (!r && fsync(fd) < 0)
		r = -errno;
	if (!r && fstat(fd, &st) == 0)
		sst.mem_alloc = (uint64_t)st.st_blocks * 512;
	if (!o->diff && !o->mapped_diff)
		sst.mem_written = sst.mem_alloc;
	close(fd);
	if (r) {
		log_err("snapshot: writing guest memory: %s", strerror(-r));
		goto fail;
	}

	if ((r = snap_fill_conf(vm, conf, o->disks_in_place ? NULL : tmp, "")))
		goto fail;
	if (o->mapped_diff) {
		snprintf(ident.base_dir, sizeof(ident.base_dir), "%s", o->base_path ? o->base_path : vm->mem_base_dir);
		memcpy(ident.base_id, vm->mem_base_id, SNAP_ID_LEN);
		ident.pages = mapped; /* borrowed for the section */
	} else if (o->diff) {
		snprintf(ident.base_dir, sizeof(ident.base_dir), "%s", vm->snap_dir);
		memcpy(ident.base_id, vm->snap_id, SNAP_ID_LEN);
		ident.pages = taken; /* borrowed for the section */
	}
	r = snap_build_state(vm, &b, conf, &ident);
	memset(&ident.pages, 0, sizeof(ident.pages));
	if (r) {
		log_err("snapshot: reading VM state: %s", strerror(-r));
		goto fail;
	}
	/* The state file last: without it the directory is no snapshot. */
	if ((r = path_join(p, sizeof(p), tmp, SNAP_STATE_FILE)) || (r = snapfile_write(p, &b))) {
		log_err("snapshot: writing the state file: %s", strerror(-r));
		goto fail;
	}
	if ((r = snap_fsync_dir(tmp)))
		goto fail;
	if (rename(tmp, dir) < 0) {
		r = -errno;
		log_err("snapshot: cannot rename %s to %s: %s", tmp, dir, strerror(errno));
		goto fail;
	}
	slash = strrchr(dir, '/');
	if (slash) {
		char parent[PATH_MAX];

		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - dir) ? (int)(slash - dir) : 1, dir);
		(void)snap_fsync_dir(parent);
	} else {
		(void)snap_fsync_dir(".");
	}
	/* The next diff counts from this one. */
	if (o->final_dir)
		snprintf(vm->snap_dir, sizeof(vm->snap_dir), "%s", o->final_dir);
	else if (!realpath(dir, vm->snap_dir))
		snprintf(vm->snap_dir, sizeof(vm->snap_dir), "%s", dir);
	memcpy(vm->snap_id, ident.id, SNAP_ID_LEN);
	if (stats)
		*stats = sst;
	sb_free(&b);
	free(conf);
	dirty_free(&taken);
	dirty_free(&mapped);
	return 0;

fail:
	remove_partial(tmp);
	sb_free(&b);
	free(conf);
	dirty_free(&mapped);
out_taken:
	if (taken.w)
		(void)dirty_merge(&vm->gm.dirty, &taken); /* nothing lost: the next try has them */
	dirty_free(&taken);
	return r;
}

/* ---- open and restore ---- */

static int open_snapshot(struct snapshot *s, const char *dir, int recover);

int snapshot_open(struct snapshot *s, const char *dir)
{
	return open_snapshot(s, dir, 1);
}

/* A diff's base, found through a path the diff names: read only, never
 * recovered (that unlinks and rewrites files) before its ID is known to be
 * the one the diff recorded. A base whose interrupted in-place update
 * committed carries another ID already; one that did not is intact. */
int snapshot_open_base(struct snapshot *s, const char *dir)
{
	return open_snapshot(s, dir, 0);
}

static int open_snapshot(struct snapshot *s, const char *dir, int recover)
{
	const uint8_t *body;
	size_t body_len;
	const char *why = NULL;
	char p[PATH_MAX];
	struct stat st;
	int r;

	/* 113 KiB, mostly path arrays a snapshot fills a few entries of: a
	 * struct on fresh pages (zpages.h, as vmm restore's) keeps only the
	 * pages the parse writes. */
	if (!mem_is_zero(s, sizeof(*s)))
		memset(s, 0, sizeof(*s));
	if (!realpath(dir, s->dir)) {
		r = -errno;
		log_err("snapshot %s: %s", dir, strerror(errno));
		return r;
	}
	/* An in-place update a crash interrupted: finished or discarded
	 * before anything is read (snapdiff.h). */
	if (recover && (r = snap_recover(s->dir))) {
		log_err("snapshot %s: recovering an interrupted update: %s", dir, strerror(-r));
		return r;
	}
	if ((r = path_join(p, sizeof(p), s->dir, SNAP_STATE_FILE)))
		return r;
	r = snapfile_read(p, &s->file, &s->len, &body, &body_len, &why);
	if (r) {
		log_err("snapshot %s: %s", dir, why ? why : strerror(-r));
		snapshot_close(s);
		return r;
	}
	sr_init(&s->rd, body, body_len);
	if (snap_head_load(&s->rd, &s->conf, &s->ident)) {
		log_err("snapshot %s: %s", dir, s->rd.why);
		snapshot_close(s);
		return -EINVAL;
	}
	for (unsigned i = 0; i < s->conf.nr_disks; i++) {
		char want[32];

		/* A writable disk's copy is diskN in the snapshot directory and
		 * nothing else: never a path that leads out of it. Or none: a
		 * standby state keeps its disks in place (vm_snapshot_in_place),
		 * and only a resume in place takes it (cli/run.c refuses it
		 * elsewhere). */
		snprintf(want, sizeof(want), "disk%u", i);
		if (!s->conf.disks[i].ro && s->conf.disks[i].file[0] && strcmp(s->conf.disks[i].file, want)) {
			log_err("snapshot %s: disk %u's copy is not named %s (tampered?)", dir, i, want);
			snapshot_close(s);
			return -EINVAL;
		}
	}
	for (unsigned i = 0; i < s->conf.nr_fs; i++) {
		const struct snap_fs *f = &s->conf.fs[i];

		if (!fs_tag_valid(f->tag) || f->cache > FUSE_CACHE_AUTO || f->ro > 1 || f->path[0] != '/') {
			log_err("snapshot %s: shared drive %u's record is invalid (tampered?)", dir, i);
			snapshot_close(s);
			return -EINVAL;
		}
	}
	if (s->conf.has_vsock && (s->conf.cid < 3 || s->conf.cid > 0xfffffffeull)) {
		log_err("snapshot %s: vsock CID %llu out of range", dir, (unsigned long long)s->conf.cid);
		snapshot_close(s);
		return -EINVAL;
	}
	if (s->conf.cpus == 0 || s->conf.cpus > VM_MAX_VCPUS || s->conf.mem_bytes == 0 ||
	    s->conf.tmpl > CPU_TEMPLATE_SAFE) {
		log_err("snapshot %s: the config holds impossible values", dir);
		snapshot_close(s);
		return -EINVAL;
	}
	if ((r = path_join(p, sizeof(p), s->dir, SNAP_MEMORY_FILE)))
		return r;
	/* lstat: a link in the memory file's place is refused (gm_open_file
	 * opens it O_NOFOLLOW too). */
	if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != s->conf.mem_bytes) {
		log_err("snapshot %s: the memory file is missing or is not %llu bytes (truncated?)", dir,
			(unsigned long long)s->conf.mem_bytes);
		snapshot_close(s);
		return -EINVAL;
	}
	return 0;
}

void snapshot_close(struct snapshot *s)
{
	free(s->file);
	s->file = NULL;
	snapid_free(&s->ident);
}

/* The task register as AMD SVM keeps it: the VMCB holds TR's attributes
 * as the CPU loaded them, with the busy bit of the descriptor type not
 * exposed (type 9, an available 64-bit TSS), and KVM's svm_get_segment
 * ORs the bit in for KVM_GET_SREGS (type 11). KVM_SET_SREGS writes the
 * attributes back verbatim, so a restore would hand the CPU a TR it never
 * holds itself. Hardware ignores the difference; an SVM that checks it
 * (QEMU's TCG does before every port access from user mode, against the
 * TSS's I/O bitmap) faults the guest's first ioperm-granted in/out after
 * a restore. So on AMD a 64-bit TSS goes back as the CPU keeps it. Intel
 * VMX needs type 11 in 64-bit mode (SDM 26.3.1.2) and gets it unchanged;
 * a snapshot never crosses vendors (check_host). Any other type is the
 * reset TR of a vCPU that never ran (an AP the guest did not start: KVM's
 * SVM code resets TR to type 3, a busy 16-bit TSS) and goes back as it
 * was. */
#define TSS64_AVAIL 0x9
#define TSS64_BUSY 0xb
uint8_t snapshot_tr_type(uint8_t saved, const char *vendor)
{
	bool amd = !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine");

	return amd && saved == TSS64_BUSY ? TSS64_AVAIL : saved;
}

static int check_host(struct vm *vm, struct snapshot *s)
{
	char vendor[13];
	uint32_t sig;
	int khz;
	unsigned i;

	host_cpu(vendor, &sig);
	if (strcmp(vendor, s->conf.vendor) || family_model(sig) != family_model(s->conf.cpu_sig)) {
		log_err("snapshot %s was taken on another CPU (%s %08x, this host: %s %08x): refused",
			s->dir, s->conf.vendor, s->conf.cpu_sig, vendor, sig);
		return -EINVAL;
	}
	khz = vm->nr_vcpus ? ioctl(vm->vcpus[0].fd, KVM_GET_TSC_KHZ, 0) : 0;
	if (s->conf.tsc_khz && khz > 0 && (uint32_t)khz != s->conf.tsc_khz) {
		for (i = 0; i < vm->nr_vcpus; i++)
			if (ioctl(vm->vcpus[i].fd, KVM_SET_TSC_KHZ, s->conf.tsc_khz) < 0)
				break;
		if (i < vm->nr_vcpus)
			log_warn("snapshot %s: TSC was %u kHz, this host runs %d kHz and cannot scale it: "
				 "guest time may drift", s->dir, s->conf.tsc_khz, khz);
	}
	return 0;
}

int vm_restore_state(struct vm *vm, struct snapshot *s)
{
	struct srd *r = &s->rd;
	struct sio io = { .r = r };
	struct vm_state vs;
	struct vcpu_state *vcs = NULL;
	uint32_t xlen = host_xsave_len(vm), nr, i;
	int e = -EINVAL;

	if (vm->nr_vcpus != s->conf.cpus || vm->cfg.mem_bytes != s->conf.mem_bytes ||
	    vm->cfg.nr_disks != s->conf.nr_disks || !!vm->vsock != !!s->conf.has_vsock ||
	    vm->cfg.nr_nets != s->conf.nr_nets || vm->cfg.nr_fs != s->conf.nr_fs ||
	    !!vm->rng != !!s->conf.has_entropy || !!vm->balloon != !!s->conf.has_balloon) {
		log_err("snapshot %s: the VM was configured differently from the snapshot "
			"(%u vCPUs, %llu MiB, %u disks, %s vsock, %u network interfaces, %u shared drives)",
			s->dir, s->conf.cpus, (unsigned long long)(s->conf.mem_bytes >> 20), s->conf.nr_disks,
			s->conf.has_vsock ? "with" : "no", s->conf.nr_nets, s->conf.nr_fs);
		return -EINVAL;
	}
	for (i = 0; i < s->conf.nr_fs; i++) {
		/* The guest mounted these tags (its command line says so). */
		if (strcmp(vm->cfg.fs[i].tag, s->conf.fs[i].tag) || vm->cfg.fs[i].ro != s->conf.fs[i].ro) {
			log_err("snapshot %s: shared drive %u is %s%s in the snapshot, %s%s here", s->dir, i,
				s->conf.fs[i].tag, s->conf.fs[i].ro ? " (ro)" : "", vm->cfg.fs[i].tag,
				vm->cfg.fs[i].ro ? " (ro)" : "");
			return -EINVAL;
		}
	}
	if ((e = check_host(vm, s)))
		return e;
	e = -EINVAL;
	/* Memory layout: what vm_create built must be what was saved. */
	if (sr_begin(r, TAG_MEMR, "memory"))
		goto bad;
	nr = sr_u32(r);
	if (nr != vm->gm.nr) {
		sr_fail(r, "guest memory layout differs");
		goto bad;
	}
	for (i = 0; i < nr; i++) {
		uint64_t gpa = sr_u64(r), size = sr_u64(r);

		if (!r->err && (gpa != vm->gm.r[i].gpa || size != vm->gm.r[i].size)) {
			sr_fail(r, "guest memory layout differs");
			goto bad;
		}
	}
	if (sr_u64(r) != vm->gm.total && !r->err)
		sr_fail(r, "guest memory size differs");
	if (sr_end(r, "memory"))
		goto bad;

	/* Parse everything before touching KVM. */
	memset(&vs, 0, sizeof(vs));
	if (sr_begin(r, TAG_VMST, "vm"))
		goto bad;
	visit_vm(&io, &vs);
	if (sr_end(r, "vm"))
		goto bad;
	vcs = calloc(vm->nr_vcpus, sizeof(*vcs));
	if (!vcs) {
		e = -ENOMEM;
		goto out;
	}
	for (i = 0; i < vm->nr_vcpus; i++) {
		if (vcpu_state_alloc(&vcs[i], xlen)) {
			e = -ENOMEM;
			goto out;
		}
		if (sr_begin(r, TAG_VCPU, "vcpu"))
			goto bad;
		visit_vcpu(&io, &vcs[i], xlen);
		if (sr_end(r, "vcpu"))
			goto bad;
	}
	if (sr_begin(r, TAG_SERL, "serial") || serial_restore(&vm->dev.com1, r) ||
	    sr_end(r, "serial"))
		goto bad;
	/* The i8042's record, in snapshots made since it has state. */
	if (next_tag(r) == TAG_KBD &&
	    (sr_begin(r, TAG_KBD, "i8042") || i8042_restore(&vm->dev.i8042, r) || sr_end(r, "i8042")))
		goto bad;

	/* Devices: their loops stay paused until everything is in place. */
	for (i = 0; i < vm->nr_virtio; i++)
		evloop_pause(&vm->virtio[i]->loop);
	for (i = 0; i < vm->nr_virtio; i++) {
		if (sr_begin(r, TAG_VIRT, "device")) {
			log_err("snapshot %s: %s (the VM has other devices than the snapshot?)", s->dir,
				r->why);
			e = -EINVAL;
			goto resume;
		}
		if ((e = restore_virtio(vm, s->dir, i, r)))
			goto resume;
		if (sr_end(r, "device")) {
			log_err("snapshot %s: %s", s->dir, r->why);
			e = -EINVAL;
			goto resume;
		}
	}
	if (r->off != r->len) {
		log_err("snapshot %s: the snapshot has more devices than this VM", s->dir);
		e = -EINVAL;
		goto resume;
	}

	/* KVM: the VM first, then each vCPU. */
	if ((e = vm_state_set(vm, &vs))) {
		log_err("snapshot %s: this host's KVM refuses the saved irqchip/PIT/clock state", s->dir);
		goto resume;
	}
	for (i = 0; i < vm->nr_vcpus; i++) {
		vcs[i].sregs.tr.type = snapshot_tr_type(vcs[i].sregs.tr.type, s->conf.vendor);
		if ((e = vcpu_state_set(vm, &vm->vcpus[i], &vcs[i]))) {
			log_err("snapshot %s: this host's KVM refuses vcpu%u's saved state", s->dir, i);
			goto resume;
		}
	}
	for (i = 0; i < vm->nr_virtio; i++)
		virtio_mmio_restart(vm->virtio[i]);
	if (vm->balloon)
		virtio_balloon_restart(vm->balloon);
	/* A diff taken from here on layers on this snapshot. */
	snprintf(vm->snap_dir, sizeof(vm->snap_dir), "%s", s->dir);
	memcpy(vm->snap_id, s->ident.id, SNAP_ID_LEN);
	/* 5.10.6.6: connections are not carried over; the guest is told. */
	if (vm->vsock)
		virtio_vsock_transport_reset(vm->vsock);
	e = 0;
resume:
	for (i = 0; i < vm->nr_virtio; i++)
		evloop_resume(&vm->virtio[i]->loop);
	goto out;
bad:
	log_err("snapshot %s: %s", s->dir, r->why ? r->why : "corrupted");
	e = -EINVAL;
out:
	if (vcs) {
		for (i = 0; i < vm->nr_vcpus; i++)
			vcpu_state_free(&vcs[i]);
		free(vcs);
	}
	return e;
}
