/* /dev/kvm and its ioctl wrappers (vmm/base/kvm.h). */
#include "vmm/base/kvm.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

const struct kvm_required_cap kvm_required_caps[] = {
	{ KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY" },
	{ KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP" },
	{ KVM_CAP_HLT, "KVM_CAP_HLT" },
	{ KVM_CAP_PIT2, "KVM_CAP_PIT2" },
	{ KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR" },
	{ KVM_CAP_SET_IDENTITY_MAP_ADDR, "KVM_CAP_SET_IDENTITY_MAP_ADDR" },
	{ KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID" },
	{ KVM_CAP_MP_STATE, "KVM_CAP_MP_STATE" },
	{ KVM_CAP_IRQFD, "KVM_CAP_IRQFD" },
	{ KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD" },
	{ KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT" },
	{ KVM_CAP_ADJUST_CLOCK, "KVM_CAP_ADJUST_CLOCK" },
	{ KVM_CAP_VCPU_EVENTS, "KVM_CAP_VCPU_EVENTS" },
	{ KVM_CAP_DEBUGREGS, "KVM_CAP_DEBUGREGS" },
};
const unsigned kvm_nr_required_caps =
	sizeof(kvm_required_caps) / sizeof(kvm_required_caps[0]);

int kvm_ioctl_named(int fd, unsigned long req, unsigned long arg, const char *name)
{
	int r = ioctl(fd, req, arg);

	if (r < 0) {
		int e = errno;

		/* EINTR/EAGAIN from KVM_RUN are how vCPUs are kicked: not errors. */
		if (e != EINTR && e != EAGAIN)
			log_err("%s: %s", name, strerror(e));
		return -e;
	}
	return r;
}

int kvm_open(struct kvm_sys *k, const char *path)
{
	int fd, v, e;
	unsigned i;

	memset(k, 0, sizeof(*k));
	k->fd = -1;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ENOENT)
			log_err("%s does not exist: this host has no KVM (load kvm_intel/kvm_amd, or enable nested virtualization)", path);
		else if (e == EACCES || e == EPERM)
			log_err("no permission to open %s: run as root or join the group that owns it (usually 'kvm')", path);
		else
			log_err("cannot open %s: %s", path, strerror(e));
		return -e;
	}
	v = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (v < 0) {
		e = errno;
		log_err("%s is not a KVM device (KVM_GET_API_VERSION: %s)", path, strerror(e));
		goto err_close;
	}
	if (v != KVM_API_VERSION) {
		log_err("%s: KVM API version %d, vmm needs %d", path, v, KVM_API_VERSION);
		e = EINVAL;
		goto err_close;
	}
	for (i = 0; i < kvm_nr_required_caps; i++) {
		if (ioctl(fd, KVM_CHECK_EXTENSION, kvm_required_caps[i].cap) <= 0) {
			log_err("%s lacks capability %s, which vmm needs", path,
				kvm_required_caps[i].name);
			e = ENOTSUP;
			goto err_close;
		}
	}
	k->run_mmap_size = ioctl(fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (k->run_mmap_size < (int)sizeof(struct kvm_run)) {
		log_err("%s: KVM_GET_VCPU_MMAP_SIZE returned %d", path, k->run_mmap_size);
		e = EINVAL;
		goto err_close;
	}
	k->nr_vcpus = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
	if (k->nr_vcpus <= 0)
		k->nr_vcpus = 4; /* the documented default when the cap is absent */
	k->max_vcpus = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
	if (k->max_vcpus <= 0)
		k->max_vcpus = k->nr_vcpus;
	k->tsc_deadline = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0;
	k->fd = fd;
	return 0;

err_close:
	close(fd);
	return -e;
}

void kvm_close(struct kvm_sys *k)
{
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
}
