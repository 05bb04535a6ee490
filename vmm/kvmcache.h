/* A per-host cache of what KVM supports (docs/perf.md, "KVM capability
 * cache"): KVM_GET_SUPPORTED_CPUID's table and KVM_GET_MSR_INDEX_LIST,
 * asked once per host instead of at every start. One file, keyed by the
 * host kernel (release and version), the host CPU (vendor, signature,
 * leaf 7 features) and the vmm version: a change of any of them (a new
 * kernel, microcode that hides a feature, a new vmm) makes it stale, and
 * it is asked again and rewritten. The file must be the user's own and
 * writable by nobody else, and is checked whole (size, magic, checksum)
 * before anything in it is used. */
#ifndef VMM_KVMCACHE_H
#define VMM_KVMCACHE_H

#include <linux/kvm.h>
#include <stddef.h>

#define KVMCACHE_KEY_MAX 256

/* The key of this host for this vmm: "release|version|vendor|sig|l7|vmmver".
 * 0 or -errno. */
int kvmcache_host_key(char *key, size_t len);
/* The key from its parts (exposed for tests). */
int kvmcache_key_fmt(char *key, size_t len, const char *release, const char *version,
		     const char *vendor, unsigned sig, unsigned leaf7_ebx, const char *vmm_version);

/* Reads path: 0 and cpuid/msrs filled (cpuid->nent, msrs->nmsrs set; at most
 * max_ent / max_msrs), -ENOENT (none), -ESTALE (another key), -EPERM (not
 * the user's own, or writable by others), -EINVAL (damaged). */
int kvmcache_load(const char *path, const char *key, struct kvm_cpuid2 *cpuid, unsigned max_ent,
		  struct kvm_msr_list *msrs, unsigned max_msrs);
/* Writes path (a temporary file renamed over it), mode 0600. 0 or -errno. */
int kvmcache_store(const char *path, const char *key, const struct kvm_cpuid2 *cpuid,
		   const struct kvm_msr_list *msrs);

#endif
