/* The VM's two builders (vm.h), as Firecracker has build_microvm_for_boot
 * and build_microvm_from_snapshot: each is vm_build's shared steps (vm.c)
 * with its own guest memory and its own way to the guest's first state.
 * vm_create picks one by cfg->restore. Above vm.c, vm_boot.c and the
 * snapshot files, so that the VM object does not reach into the restore
 * path. */
#include "vmm/vm.h"
#include "vmm/vm_priv.h"
#include "vmm/vm_snapshot.h"
#include "vmm/base/log.h"

#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>

/* ---- a fresh boot ---- */

static int boot_memory(struct vm *vm, const struct vm_config *cfg)
{
	int r = gm_create_x86(&vm->gm, cfg->mem_bytes);

	if (r)
		log_err("cannot allocate %llu MiB of guest memory: %s",
			(unsigned long long)(cfg->mem_bytes >> 20), strerror(-r));
	return r;
}

/* The kernel command line, then the kernel, initrd and boot tables. */
static int boot_load(struct vm *vm, const struct vm_config *cfg, const struct kvm_cpuid_entry2 *leaf1)
{
	int r;

	(void)cfg;
	if ((r = vm_build_cmdline(vm)))
		return r;
	return vm_load_boot(vm, leaf1 ? leaf1->eax : 0x600, leaf1 ? leaf1->edx : 0);
}

/* ---- from a snapshot ---- */

static int snapshot_memory(struct vm *vm, const struct vm_config *cfg)
{
	if (cfg->uffd) {
		/* Mapped and registered already, the handler has it (the API
		 * answered a failure there before anything was built). */
		vm->gm = cfg->uffd->gm;
		vm->uffd = cfg->uffd->conn;
		uffd_backend_init(cfg->uffd);
		vm->cfg.uffd = NULL;
		return 0;
	}
	/* A full snapshot's memory file, or a diff's chain merged. */
	return snap_map_memory(&vm->gm, cfg->restore, vm->mem_base_dir, vm->mem_base_id);
}

/* The guest booted long ago: its state comes from the snapshot, checked
 * field by field before KVM or a device sees it. */
static int snapshot_load(struct vm *vm, const struct vm_config *cfg, const struct kvm_cpuid_entry2 *leaf1)
{
	(void)leaf1;
	snprintf(vm->cmdline, sizeof(vm->cmdline), "%s", cfg->restore->conf.cmdline);
	return vm_restore_state(vm, cfg->restore);
}

int vm_create_for_boot(struct vm *vm, const struct vm_config *cfg)
{
	static const struct vm_builder boot = { .memory = boot_memory, .load = boot_load };

	return vm_build(vm, cfg, &boot);
}

int vm_create_from_snapshot(struct vm *vm, const struct vm_config *cfg)
{
	static const struct vm_builder restore = { .memory = snapshot_memory, .load = snapshot_load };

	return vm_build(vm, cfg, &restore);
}

int vm_create(struct vm *vm, const struct vm_config *cfg)
{
	return cfg->restore ? vm_create_from_snapshot(vm, cfg) : vm_create_for_boot(vm, cfg);
}
