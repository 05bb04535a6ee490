/* /dev/kvm: open it, check the API version and every capability vmm relies
 * on, and wrap ioctls so a failure names the ioctl that failed. */
#ifndef VMM_KVM_H
#define VMM_KVM_H

#include <linux/kvm.h>
#include <stdint.h>

#define KVM_DEVICE_PATH "/dev/kvm"

struct kvm_sys {
	int fd;
	int run_mmap_size;   /* KVM_GET_VCPU_MMAP_SIZE */
	int nr_vcpus;        /* KVM_CAP_NR_VCPUS: recommended maximum */
	int max_vcpus;       /* KVM_CAP_MAX_VCPUS */
	int tsc_deadline;    /* KVM_CAP_TSC_DEADLINE_TIMER */
};

/* The capabilities vmm cannot run without, in the order they are checked. */
struct kvm_required_cap {
	int cap;
	const char *name;
};
extern const struct kvm_required_cap kvm_required_caps[];
extern const unsigned kvm_nr_required_caps;

/* Opens `path` (normally KVM_DEVICE_PATH). Returns 0 or -errno after logging
 * one clear line naming what is missing (device, permission, API version,
 * capability). Leaves nothing open on failure. */
int kvm_open(struct kvm_sys *k, const char *path)
	__attribute__((warn_unused_result));
void kvm_close(struct kvm_sys *k);

/* ioctl() that returns the result or -errno and logs the ioctl's name on
 * failure. Use the macros: kvm_ioctl_ptr() also checks at compile time that
 * the argument has the size the ioctl number encodes. */
int kvm_ioctl_named(int fd, unsigned long req, unsigned long arg, const char *name);
#define kvm_ioctl_val(fd, req, val) \
	kvm_ioctl_named((fd), (req), (unsigned long)(val), #req)
#define kvm_ioctl_ptr(fd, req, ptr) \
	(__extension__({ \
		_Static_assert(sizeof(*(ptr)) == _IOC_SIZE(req), \
			       #req " argument size"); \
		kvm_ioctl_named((fd), (req), (unsigned long)(ptr), #req); \
	}))
/* Same without the size check, for variable-length arguments
 * (struct kvm_cpuid2, struct kvm_msrs). */
#define kvm_ioctl_var(fd, req, ptr) \
	kvm_ioctl_named((fd), (req), (unsigned long)(ptr), #req)

#endif
