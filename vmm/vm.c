/* VM lifecycle (vm.h): build everything in order, tear down in reverse.
 * The boot of a fresh VM is vm_boot.c's, the run loop and the stop
 * sequence vm_run.c's, pause and resume vm_pause.c's (vm_priv.h). */
#include "vmm/vm.h"
#include "vmm/vm_priv.h"
#include "vmm/vm_snapshot.h"
#include "vmm/base/log.h"
#include "vmm/vcpu.h"
#include "vmm/wire/proto.h"
#include "vmm/kvmcache.h"
#include "vmm/base/zpages.h"
#include "boot/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define KVM_TSS_ADDR 0xfffbd000ull
#define KVM_IDENTITY_MAP_ADDR 0xfffbc000ull
#define MAX_MSR_INDICES 1024

void vm_irq_line(struct vm *vm, unsigned gsi, int level)
{
	struct kvm_irq_level irq = { .irq = gsi, .level = (uint32_t)level };

	if (kvm_ioctl_ptr(vm->fd, KVM_IRQ_LINE, &irq) < 0)
		vm_request_exit(vm, VM_EXIT_VMM_ERROR, "KVM_IRQ_LINE %u failed", gsi);
}

/* Hands out the next virtio-mmio window and interrupt. */
static int virtio_slot(struct vm *vm, uint64_t *base, unsigned *irq)
{
	if (vm->nr_virtio >= VM_MAX_VIRTIO) {
		log_err("too many virtio devices (at most %u)", VM_MAX_VIRTIO);
		return -ENOSPC;
	}
	*base = VIRTIO_MMIO_BASE + (uint64_t)vm->nr_virtio * VIRTIO_MMIO_SIZE;
	*irq = VIRTIO_MMIO_IRQ_BASE + vm->nr_virtio;
	vm->nr_virtio++;
	return 0;
}

/* Devices' state is on pages of its own (zpages.h): each device's scratch
 * arrays (32-48 KiB of chain and iovec room, virtio_blk.h) stay untouched
 * but for the pages a chain uses. */
static int vm_add_virtio(struct vm *vm)
{
	uint64_t base;
	unsigned i, irq;
	int r;

	for (i = 0; i < vm->cfg.nr_disks; i++) {
		if (i > 0 && vm->cfg.disks[i].root) {
			log_err("--disk %s: only the first disk can be the root device", vm->cfg.disks[i].path);
			return -EINVAL;
		}
		if ((r = virtio_slot(vm, &base, &irq)))
			return r;
		vm->disks[i] = zpages_alloc(sizeof(*vm->disks[i]));
		if (!vm->disks[i])
			return -ENOMEM;
		r = virtio_blk_init(vm->disks[i], &vm->cfg.disks[i], vm->fd, &vm->gm, base, irq, i);
		if (r) {
			zpages_free(vm->disks[i], sizeof(*vm->disks[i]));
			vm->disks[i] = NULL;
			return r;
		}
		vm->virtio[vm->nr_virtio - 1] = &vm->disks[i]->vdev;
		if ((r = bus_add(&vm->mmio, &vm->disks[i]->vdev.bus)))
			return r;
	}
	if (vm->cfg.has_vsock) {
		if ((r = virtio_slot(vm, &base, &irq)))
			return r;
		vm->vsock = zpages_alloc(sizeof(*vm->vsock));
		if (!vm->vsock)
			return -ENOMEM;
		r = virtio_vsock_init(vm->vsock, &vm->cfg.vsock, vm->fd, &vm->gm, base, irq);
		if (r) {
			zpages_free(vm->vsock, sizeof(*vm->vsock));
			vm->vsock = NULL;
			return r;
		}
		vm->virtio[vm->nr_virtio - 1] = &vm->vsock->vdev;
		if ((r = bus_add(&vm->mmio, &vm->vsock->vdev.bus)))
			return r;
	}
	for (i = 0; i < vm->cfg.nr_nets; i++) {
		if ((r = virtio_slot(vm, &base, &irq)))
			return r;
		vm->nets[i] = zpages_alloc(sizeof(*vm->nets[i]));
		if (!vm->nets[i])
			return -ENOMEM;
		if (vm->cfg.pre_taps) {
			r = virtio_net_init_tap(vm->nets[i], &vm->cfg.nets[i], &vm->cfg.pre_taps[i], vm->fd,
						&vm->gm, base, irq, i);
			vm->cfg.pre_taps[i].fd = -1; /* the device's now, or closed */
		} else {
			r = virtio_net_init(vm->nets[i], &vm->cfg.nets[i], vm->fd, &vm->gm, base, irq, i);
		}
		if (r) {
			zpages_free(vm->nets[i], sizeof(*vm->nets[i]));
			vm->nets[i] = NULL;
			return r;
		}
		vm->virtio[vm->nr_virtio - 1] = &vm->nets[i]->vdev;
		if (vm->cfg.nets[i].mmds && vm->cfg.mmds && (r = virtio_net_enable_mmds(vm->nets[i], vm->cfg.mmds)))
			return r;
		if ((r = bus_add(&vm->mmio, &vm->nets[i]->vdev.bus)))
			return r;
	}
	for (i = 0; i < vm->cfg.nr_fs; i++) {
		unsigned j;

		for (j = 0; j < i; j++) {
			if (!strcmp(vm->cfg.fs[i].tag, vm->cfg.fs[j].tag)) {
				log_err("--fs: tag %s given twice", vm->cfg.fs[i].tag);
				return -EINVAL;
			}
		}
		if ((r = virtio_slot(vm, &base, &irq)))
			return r;
		vm->fs[i] = zpages_alloc(sizeof(*vm->fs[i]));
		if (!vm->fs[i])
			return -ENOMEM;
		r = virtio_fs_init(vm->fs[i], &vm->cfg.fs[i], vm->fd, &vm->gm, base, irq, i);
		if (r) {
			zpages_free(vm->fs[i], sizeof(*vm->fs[i]));
			vm->fs[i] = NULL;
			return r;
		}
		vm->virtio[vm->nr_virtio - 1] = &vm->fs[i]->vdev;
		if ((r = bus_add(&vm->mmio, &vm->fs[i]->vdev.bus)))
			return r;
	}
	/* The entropy device after every other: a snapshot's slots keep
	 * their order whether or not it is there. */
	if (vm->cfg.has_entropy) {
		if ((r = virtio_slot(vm, &base, &irq)))
			return r;
		vm->rng = zpages_alloc(sizeof(*vm->rng));
		if (!vm->rng)
			return -ENOMEM;
		r = virtio_rng_init(vm->rng, &vm->cfg.entropy, vm->fd, &vm->gm, base, irq);
		if (r) {
			zpages_free(vm->rng, sizeof(*vm->rng));
			vm->rng = NULL;
			return r;
		}
		vm->virtio[vm->nr_virtio - 1] = &vm->rng->vdev;
		if ((r = bus_add(&vm->mmio, &vm->rng->vdev.bus)))
			return r;
	}
	if (vm->cfg.has_balloon) {
		if ((r = virtio_slot(vm, &base, &irq)))
			return r;
		vm->balloon = zpages_alloc(sizeof(*vm->balloon));
		if (!vm->balloon)
			return -ENOMEM;
		r = virtio_balloon_init(vm->balloon, &vm->cfg.balloon, vm->fd, &vm->gm, base, irq);
		if (r) {
			zpages_free(vm->balloon, sizeof(*vm->balloon));
			vm->balloon = NULL;
			return r;
		}
		vm->virtio[vm->nr_virtio - 1] = &vm->balloon->vdev;
		if ((r = bus_add(&vm->mmio, &vm->balloon->vdev.bus)))
			return r;
	}
	return 0;
}

static void vm_remove_virtio(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < VM_MAX_DISKS; i++) {
		if (!vm->disks[i])
			continue;
		virtio_blk_destroy(vm->disks[i]);
		zpages_free(vm->disks[i], sizeof(*vm->disks[i]));
		vm->disks[i] = NULL;
	}
	if (vm->vsock) {
		virtio_vsock_destroy(vm->vsock);
		zpages_free(vm->vsock, sizeof(*vm->vsock));
		vm->vsock = NULL;
	}
	for (i = 0; i < VM_MAX_NETS; i++) {
		if (!vm->nets[i])
			continue;
		virtio_net_destroy(vm->nets[i]);
		zpages_free(vm->nets[i], sizeof(*vm->nets[i]));
		vm->nets[i] = NULL;
	}
	for (i = 0; i < VM_MAX_FS; i++) {
		if (!vm->fs[i])
			continue;
		virtio_fs_destroy(vm->fs[i]);
		zpages_free(vm->fs[i], sizeof(*vm->fs[i]));
		vm->fs[i] = NULL;
	}
	if (vm->rng) {
		virtio_rng_destroy(vm->rng);
		zpages_free(vm->rng, sizeof(*vm->rng));
		vm->rng = NULL;
	}
	if (vm->balloon) {
		virtio_balloon_destroy(vm->balloon);
		zpages_free(vm->balloon, sizeof(*vm->balloon));
		vm->balloon = NULL;
	}
	memset(vm->virtio, 0, sizeof(vm->virtio));
}

/* The legacy devices' view of the VM (devices/devices.h: struct
 * legacy_host): its interrupt lines, its end of run and its notices. */
static void legacy_irq_line(void *opaque, unsigned irq, int level)
{
	vm_irq_line(opaque, irq, level);
}

static void legacy_exit(void *opaque, enum legacy_exit why, const char *msg)
{
	vm_request_exit(opaque, why == LEGACY_EXIT_REBOOT ? VM_EXIT_REBOOT : VM_EXIT_POWEROFF, "%s", msg);
}

static void legacy_boot_marker(void *opaque)
{
	vm_boot_marker(opaque);
}

static void legacy_kernel_up(void *opaque)
{
	vm_kernel_up(opaque);
}

static int vm_add_devices(struct vm *vm)
{
	const struct legacy_host host = {
		.opaque = vm,
		.irq_line = legacy_irq_line,
		.exit = legacy_exit,
		.boot_marker = legacy_boot_marker,
		.kernel_up = legacy_kernel_up,
	};
	int r;

	r = serial_init(&vm->dev.com1, &host, SERIAL_COM1_BASE, SERIAL_COM1_IRQ, vm->cfg.console_out);
	if (r)
		return r;
	if (vm->cfg.console_path && vm->cfg.console_limit && vm->cfg.console_out >= 0) {
		struct stat st;

		if (fstat(vm->cfg.console_out, &st) < 0 ||
		    (r = serial_set_limit(&vm->dev.com1, vm->cfg.console_limit, (uint64_t)st.st_size))) {
			r = r ? r : -errno;
			serial_destroy(&vm->dev.com1);
			return r;
		}
	}
	i8042_init(&vm->dev.i8042, &host);
	vmm_port_init(&vm->dev.port, &host, vm->cfg.api_token);
	post_port_init(&vm->dev.post);
	if ((r = bus_add(&vm->pio, &vm->dev.com1.bus)) || (r = bus_add(&vm->pio, &vm->dev.i8042.bus)) ||
	    (r = bus_add(&vm->pio, &vm->dev.port.bus)) || (r = bus_add(&vm->pio, &vm->dev.port.token_bus)) ||
	    (r = bus_add(&vm->pio, &vm->dev.post.bus))) {
		i8042_destroy(&vm->dev.i8042);
		serial_destroy(&vm->dev.com1);
		return r;
	}
	return 0;
}

static int vm_get_supported(struct vm *vm, struct kvm_cpuid2 **cpuid, struct kvm_msr_list **msrs)
{
	char key[KVMCACHE_KEY_MAX];
	int r;

	*cpuid = calloc(1, sizeof(**cpuid) + VCPU_MAX_CPUID_ENTRIES * sizeof((*cpuid)->entries[0]));
	*msrs = calloc(1, sizeof(**msrs) + MAX_MSR_INDICES * sizeof(uint32_t));
	if (!*cpuid || !*msrs)
		return -ENOMEM;
	/* Asked once per host (vmm/kvmcache.h): both ioctls walk KVM's
	 * tables in the kernel at every start otherwise. */
	if (vm->cfg.kvm_cache && kvmcache_host_key(key, sizeof(key)) == 0) {
		r = kvmcache_load(vm->cfg.kvm_cache, key, *cpuid, VCPU_MAX_CPUID_ENTRIES, *msrs,
				  MAX_MSR_INDICES);
		if (r == 0) {
			log_debug("KVM's CPUID and MSR list: from %s", vm->cfg.kvm_cache);
			return 0;
		}
		if (r != -ENOENT)
			log_debug("KVM capability cache %s: %s; asking KVM", vm->cfg.kvm_cache,
				  r == -ESTALE ? "another host kernel, CPU or vmm" : strerror(-r));
	} else {
		key[0] = '\0';
	}
	(*cpuid)->nent = VCPU_MAX_CPUID_ENTRIES;
	r = kvm_ioctl_var(vm->kvm.fd, KVM_GET_SUPPORTED_CPUID, *cpuid);
	if (r < 0)
		return r;
	(*msrs)->nmsrs = MAX_MSR_INDICES;
	r = kvm_ioctl_var(vm->kvm.fd, KVM_GET_MSR_INDEX_LIST, *msrs);
	if (r < 0)
		return r;
	if (key[0] && (r = kvmcache_store(vm->cfg.kvm_cache, key, *cpuid, *msrs)))
		log_debug("KVM capability cache %s: cannot write it: %s", vm->cfg.kvm_cache, strerror(-r));
	return 0;
}

/* The steps both builders share (vm_priv.h): KVM and the VM, guest memory
 * (b->memory), dirty tracking, the memory slots, the vCPUs, the devices,
 * the ready notice, then the guest's state (b->load). */
int vm_build(struct vm *vm, const struct vm_config *cfg, const struct vm_builder *b)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	struct kvm_cpuid2 *cpuid = NULL;
	struct kvm_msr_list *msrs = NULL;
	struct kvm_cpuid_entry2 *leaf1;
	uint64_t id_map = KVM_IDENTITY_MAP_ADDR;
	unsigned i;
	int r;

	memset(vm, 0, sizeof(*vm));
	vm->cfg = *cfg;
	phase_init(&vm->phases, cfg->t0_ns, cfg->pre_main_ns);
	phase_mark(&vm->phases, PHASE_CLI);
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	vm->fd = -1;
	vm->gm.fd = -1;
	uffd_conn_init(&vm->uffd);
	vm->marker_fd = -1;
	notice_init(&vm->notice);
	atomic_init(&vm->exit_reason, VM_RUNNING);
	vm->exit_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->exit_efd < 0)
		return -errno;

	if (cfg->cpus == 0 || cfg->cpus > VM_MAX_VCPUS) {
		log_err("--cpus %u: must be 1..%u", cfg->cpus, VM_MAX_VCPUS);
		r = -EINVAL;
		goto err_efd;
	}
	if (cfg->mem_bytes < (uint64_t)VM_MIN_MEM_MIB << 20) {
		log_err("--mem: at least %u MiB", VM_MIN_MEM_MIB);
		r = -EINVAL;
		goto err_efd;
	}
	r = kvm_open(&vm->kvm, cfg->kvm_path ? cfg->kvm_path : KVM_DEVICE_PATH);
	if (r)
		goto err_efd;
	if ((int)cfg->cpus > vm->kvm.max_vcpus) {
		log_err("--cpus %u: this host's KVM allows at most %d vCPUs", cfg->cpus,
			vm->kvm.max_vcpus);
		r = -EINVAL;
		goto err_kvm;
	}
	if ((int)cfg->cpus > vm->kvm.nr_vcpus)
		log_warn("--cpus %u is above the %d vCPUs KVM recommends on this host", cfg->cpus,
			 vm->kvm.nr_vcpus);
	vm->nr_vcpus = cfg->cpus;
	if (cfg->nr_disks > VM_MAX_DISKS || cfg->nr_nets > VM_MAX_NETS || cfg->nr_fs > VM_MAX_FS) {
		log_err("at most %u disks, %u network interfaces and %u shared drives", VM_MAX_DISKS,
			VM_MAX_NETS, VM_MAX_FS);
		r = -EINVAL;
		goto err_kvm;
	}

	vm->fd = kvm_ioctl_val(vm->kvm.fd, KVM_CREATE_VM, 0);
	if (vm->fd < 0) {
		r = vm->fd;
		goto err_kvm;
	}
	if ((r = kvm_ioctl_val(vm->fd, KVM_SET_TSS_ADDR, KVM_TSS_ADDR)) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_SET_IDENTITY_MAP_ADDR, &id_map)) < 0 ||
	    (r = kvm_ioctl_val(vm->fd, KVM_CREATE_IRQCHIP, 0)) < 0 ||
	    (r = kvm_ioctl_ptr(vm->fd, KVM_CREATE_PIT2, &pit)) < 0)
		goto err_vmfd;
	phase_mark(&vm->phases, PHASE_KVM);

	if ((r = b->memory(vm, cfg)))
		goto err_vmfd;
	if (cfg->track_dirty && (r = vm_track_dirty(vm)))
		goto err_gm;
	for (i = 0; i < vm->gm.nr; i++) {
		struct kvm_userspace_memory_region mr = {
			.slot = i,
			.guest_phys_addr = vm->gm.r[i].gpa,
			.memory_size = vm->gm.r[i].size,
			.userspace_addr = (uint64_t)(uintptr_t)vm->gm.r[i].host,
			.flags = cfg->track_dirty ? KVM_MEM_LOG_DIRTY_PAGES : 0,
		};
		r = kvm_ioctl_ptr(vm->fd, KVM_SET_USER_MEMORY_REGION, &mr);
		if (r < 0)
			goto err_gm;
	}
	phase_mark(&vm->phases, PHASE_MEMORY);

	r = vm_get_supported(vm, &cpuid, &msrs);
	if (r)
		goto err_free;
	phase_mark(&vm->phases, PHASE_CPUID);
	/* A custom CPU template's KVM capabilities: each one added must be
	 * there ("!N" only stops Firecracker requiring N: nothing here). */
	for (i = 0; cfg->cpu_tmpl && i < cfg->cpu_tmpl->nr_caps; i++) {
		uint32_t cap = cfg->cpu_tmpl->caps[i].cap;

		if (!cfg->cpu_tmpl->caps[i].remove && ioctl(vm->kvm.fd, KVM_CHECK_EXTENSION, cap) <= 0) {
			snprintf(vm->start_why, sizeof(vm->start_why),
				 "Start microvm error: Missing KVM capabilities: [0x%x]", cap);
			log_err("cpu-config: %s", vm->start_why);
			r = -EINVAL;
			goto err_free;
		}
	}
	for (i = 0; i < vm->nr_vcpus; i++) {
		r = vcpu_create(&vm->vcpus[i], vm, i, cpuid, msrs);
		if (r) {
			log_err("cannot create vcpu%u: %s", i, strerror(-r));
			goto err_vcpus;
		}
	}
	phase_mark(&vm->phases, PHASE_VCPUS);
	leaf1 = cpuid_find(cpuid->entries, cpuid->nent, 1, 0);
	r = vm_add_devices(vm);
	if (r) {
		log_err("cannot set up devices: %s", strerror(-r));
		goto err_vcpus;
	}
	r = vm_add_virtio(vm);
	if (r)
		goto err_virtio;
	/* Before the guest runs: a restored guest-init connects at once. A
	 * failure costs the notice only (the host falls back to probes). */
	if (cfg->ready_notice && cfg->has_vsock && cfg->vsock.uds[0] &&
	    notice_open(&vm->notice, cfg->vsock.uds, API_NOTICE_PORT))
		log_warn("no ready notice for this sandbox; readiness is probed instead");
	/* The notice stays connected for the guest's life: not activity
	 * (idle accounting, vmm/idle.h), or no sandbox would go on standby. */
	if (vm->vsock)
		vm->vsock->idle_exempt_port = API_NOTICE_PORT;
	phase_mark(&vm->phases, PHASE_DEVICES);
	if ((r = b->load(vm, cfg, leaf1)))
		goto err_virtio;
	phase_mark(&vm->phases, PHASE_LOAD);
	free(cpuid);
	free(msrs);
	return 0;

err_virtio:
	notice_close(&vm->notice);
	vm_remove_virtio(vm);
	i8042_destroy(&vm->dev.i8042);
	serial_destroy(&vm->dev.com1);
err_vcpus:
	while (i-- > 0)
		vcpu_destroy(&vm->vcpus[i]);
err_free:
	free(cpuid);
	free(msrs);
err_gm:
	gm_destroy(&vm->gm);
	uffd_conn_close(&vm->uffd);
err_vmfd:
	close(vm->fd);
	vm->fd = -1;
err_kvm:
	kvm_close(&vm->kvm);
err_efd:
	close(vm->exit_efd);
	vm->exit_efd = -1;
	return r;
}

void vm_destroy(struct vm *vm)
{
	unsigned i;

	notice_close(&vm->notice);
	vm_remove_virtio(vm);
	for (i = 0; i < vm->nr_vcpus; i++)
		vcpu_destroy(&vm->vcpus[i]);
	i8042_destroy(&vm->dev.i8042);
	serial_destroy(&vm->dev.com1);
	gm_destroy(&vm->gm);
	uffd_conn_close(&vm->uffd);
	if (vm->fd >= 0)
		close(vm->fd);
	vm->fd = -1;
	kvm_close(&vm->kvm);
	if (vm->exit_efd >= 0)
		close(vm->exit_efd);
	vm->exit_efd = -1;
}

int vm_dump_cpuid(struct vm *vm, unsigned index, const char *path)
{
	struct kvm_cpuid2 *c;
	FILE *f;
	unsigned i;
	int r;

	if (index >= vm->nr_vcpus)
		return -EINVAL;
	c = vcpu_get_cpuid(&vm->vcpus[index]);
	if (!c)
		return -EIO;
	f = fopen(path, "w");
	if (!f) {
		r = -errno;
		log_err("cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	for (i = 0; i < c->nent; i++)
		fprintf(f, "%08x %08x %08x %08x %08x %08x\n", c->entries[i].function,
			c->entries[i].index, c->entries[i].eax, c->entries[i].ebx,
			c->entries[i].ecx, c->entries[i].edx);
	r = fclose(f) ? -errno : 0;
out:
	free(c);
	return r;
}
