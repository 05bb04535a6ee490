/* A fresh VM's boot (vm_priv.h): the kernel command line (the user's,
 * the host's and one virtio_mmio.device= per device), the kernel (ELF copied
 * into guest RAM inside the host kernel, or a bzImage) and initrd loaded, boot_params,
 * the page tables and the MP table written, vCPU 0's entry state. */
#include "vmm/vm.h"
#include "vmm/vm_priv.h"
#include "vmm/base/log.h"
#include "vmm/mptable.h"
#include "vmm/vcpu.h"
#include "boot/layout.h"
#include "boot/loader.h"
#include "vmm/wire/proto.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Kernel parameters a host whose KVM emulates guest ring 0 needs (measured
 * on kvm_pvm): no XSAVE, and the features its emulator lacks cleared even if
 * a CPU template let them through. clearcpuid= reads 128 characters.
 * kvm-clock as the clocksource: that KVM does not set the guest's TSC on a
 * restore (vmm/vm_snapshot.c check_tsc), so with the TSC as clocksource a
 * clone's monotonic clock jumps by the snapshot's age and its kernel then
 * walks NTP's once-a-second work and the load decay across the jump;
 * kvm-clock follows KVM_SET_CLOCK and stays continuous (docs/perf.md,
 * section 14). Its vDSO read is 0.8x the TSC's there.
 * erms and fsrm cleared: with them the guest kernel's memcpy, memset,
 * clear_page and user copies run `rep movsb`/`rep stosb`, which such a host
 * emulates a byte per step; without them they move 8 bytes per step, about
 * 7x faster there (docs/perf.md, section 15). Hardware keeps them. */
static const char emulating_host_params[] = "noxsave clearcpuid=smap,popcnt,cx16,erms,fsrm clocksource=kvm-clock";

int host_emulates_ring0(void)
{
	struct stat st;

	return stat("/sys/module/kvm_pvm", &st) == 0;
}

static int open_file(const char *path, const char *what, int *fd, size_t *len)
{
	struct stat st;
	int e;

	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		e = errno;
		log_err("cannot open %s %s: %s", what, path, strerror(e));
		return -e;
	}
	if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		log_err("%s %s is not a non-empty regular file", what, path);
		close(*fd);
		*fd = -1;
		return -EINVAL;
	}
	*len = (size_t)st.st_size;
	return 0;
}

static int map_fd(int fd, const char *path, const char *what, size_t len, uint8_t **data)
{
	*data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (*data == MAP_FAILED) {
		int e = errno;

		*data = NULL;
		log_err("cannot map %s %s: %s", what, path, strerror(e));
		return -e;
	}
	return 0;
}

/* Appends " text" to the guest command line. */
static int cmdline_add(struct vm *vm, const char *text)
{
	size_t n = strlen(vm->cmdline);
	int w = snprintf(vm->cmdline + n, sizeof(vm->cmdline) - n, "%s%s", n ? " " : "", text);

	if (w < 0 || (size_t)w >= sizeof(vm->cmdline) - n) {
		log_err("kernel command line too long");
		return -E2BIG;
	}
	return 0;
}

/* The user's command line, then what the host and the devices need. */
int vm_build_cmdline(struct vm *vm)
{
	char dev[96];
	unsigned i;
	int r;

	vm->cmdline[0] = '\0';
	if (vm->cfg.cmdline && *vm->cfg.cmdline && (r = cmdline_add(vm, vm->cfg.cmdline)))
		return r;
	if (vm->cfg.host_emulates_ring0 && (r = cmdline_add(vm, emulating_host_params)))
		return r;
	/* The i8042 has a keyboard and nothing else (docs/devices.md): what
	 * Firecracker's docs tell its users to pass, so Linux's driver does
	 * not wait out probes of a mouse port, a multiplexer or keyboard
	 * commands. Unless the user says something about the i8042. */
	if (!(vm->cfg.cmdline && strstr(vm->cfg.cmdline, "i8042.")) &&
	    (r = cmdline_add(vm, "i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd")))
		return r;
	for (i = 0; i < vm->cfg.nr_disks; i++) {
		if ((r = virtio_mmio_cmdline(&vm->disks[i]->vdev, dev, sizeof(dev))) ||
		    (r = cmdline_add(vm, dev)))
			return r;
	}
	if (vm->vsock && ((r = virtio_mmio_cmdline(&vm->vsock->vdev, dev, sizeof(dev))) ||
			  (r = cmdline_add(vm, dev))))
		return r;
	for (i = 0; i < vm->cfg.nr_nets; i++) {
		if ((r = virtio_mmio_cmdline(&vm->nets[i]->vdev, dev, sizeof(dev))) ||
		    (r = cmdline_add(vm, dev)) ||
		    (r = net_guest_cmdline(&vm->cfg.nets[i], dev, sizeof(dev))) ||
		    (r = cmdline_add(vm, dev)))
			return r;
	}
	for (i = 0; i < vm->cfg.nr_fs; i++) {
		/* guest-init mounts each drive at /mnt/TAG or at=DIR (read-only: ",ro"). */
		if ((r = virtio_mmio_cmdline(&vm->fs[i]->vdev, dev, sizeof(dev))) ||
		    (r = cmdline_add(vm, dev)))
			return r;
		snprintf(dev, sizeof(dev), "vmm.fs=%s%s%s%s", vm->cfg.fs[i].tag, vm->cfg.fs[i].ro ? ",ro" : "",
			 vm->cfg.fs[i].at ? ",at=" : "", vm->cfg.fs[i].at ? vm->cfg.fs[i].at : "");
		if ((r = cmdline_add(vm, dev)))
			return r;
	}
	if (vm->rng && ((r = virtio_mmio_cmdline(&vm->rng->vdev, dev, sizeof(dev))) ||
			(r = cmdline_add(vm, dev))))
		return r;
	if (vm->balloon && ((r = virtio_mmio_cmdline(&vm->balloon->vdev, dev, sizeof(dev))) ||
			    (r = cmdline_add(vm, dev))))
		return r;
	/* No vmm.token=: every guest process reads /proc/cmdline. guest-init
	 * reads the token from the vmm port's token window (devices.h). */
	if (vm->cfg.nr_disks && vm->cfg.disks[0].root &&
	    (r = cmdline_add(vm, vm->cfg.disks[0].ro ? "root=/dev/vda ro" : "root=/dev/vda rw")))
		return r;
	return 0;
}

int vm_load_boot(struct vm *vm, uint32_t cpu_sig, uint32_t cpu_feat)
{
	struct kernel_image k;
	uint8_t *kdata = NULL, magic[SELFMAG];
	size_t klen = 0, ilen = 0;
	int kfd, ifd = -1;
	uint64_t igpa = 0;
	const char *why = "";
	uint8_t *mp;
	int r;

	/* A vmlinux (ELF) goes segment by segment into guest RAM, copied by
	 * the host kernel (elf_load_fd); a bzImage (small, parsed whole) is
	 * mapped. */
	r = open_file(vm->cfg.kernel, "kernel", &kfd, &klen);
	if (r)
		return r;
	if (klen >= SELFMAG && pread(kfd, magic, SELFMAG, 0) == SELFMAG && !memcmp(magic, ELFMAG, SELFMAG)) {
		r = elf_load_fd(&vm->gm, kfd, klen, &k, &why);
	} else {
		r = map_fd(kfd, vm->cfg.kernel, "kernel", klen, &kdata);
		if (r)
			goto out;
		r = kernel_load(&vm->gm, kdata, klen, &k, &why);
	}
	if (r) {
		log_err("kernel %s: %s", vm->cfg.kernel, why);
		goto out;
	}
	if (vm->cfg.initrd) {
		r = open_file(vm->cfg.initrd, "initrd", &ifd, &ilen);
		if (r)
			goto out;
		r = boot_place_initrd(&vm->gm, &k, ilen, &igpa, &why);
		if (r) {
			log_err("initrd %s: %s", vm->cfg.initrd, why);
			goto out;
		}
		/* Placed inside RAM by boot_place_initrd: gm_ptr is not NULL.
		 * Copied inside the kernel (gm_load_file), else with pread. */
		r = gm_load_file(&vm->gm, igpa, ifd, 0, ilen);
		if (r == -EOPNOTSUPP || r == -EINVAL)
			r = pread_full(ifd, gm_ptr(&vm->gm, igpa, ilen), ilen, 0);
		if (r) {
			log_err("initrd %s: cannot read it: %s", vm->cfg.initrd, strerror(-r));
			goto out;
		}
	}
	r = boot_params_write(&vm->gm, &k, vm->cmdline, igpa, ilen, &why);
	if (r) {
		log_err("%s (%zu bytes: \"%s\")", why, strlen(vm->cmdline), vm->cmdline);
		goto out;
	}
	r = boot_write_tables(&vm->gm);
	if (r) {
		log_err("guest memory too small for the boot page tables");
		goto out;
	}
	mp = gm_ptr(&vm->gm, BOOT_MPTABLE, BOOT_MPTABLE_MAX);
	r = mp ? mptable_build(mp, BOOT_MPTABLE_MAX, BOOT_MPTABLE, vm->nr_vcpus, cpu_sig, cpu_feat)
	       : -EFAULT;
	if (r < 0) {
		log_err("cannot build the MP table: %s", strerror(-r));
		goto out;
	}
	r = vcpu_set_boot_regs(&vm->vcpus[0], k.entry);
	log_debug("kernel %s: entry 0x%llx, loaded 0x%llx-0x%llx%s", vm->cfg.kernel,
		  (unsigned long long)k.entry, (unsigned long long)k.load_lo,
		  (unsigned long long)k.load_hi, k.is_bzimage ? " (bzImage)" : " (ELF)");
out:
	if (ifd >= 0)
		close(ifd);
	if (kdata)
		munmap(kdata, klen);
	close(kfd);
	return r;
}
