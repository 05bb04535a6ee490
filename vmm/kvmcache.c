/* Per-host cache of KVM's supported CPUID and MSR list (vmm/kvmcache.h). */
#include "vmm/kvmcache.h"
#include "vmm/wire/proto.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifndef VMM_VERSION
#define VMM_VERSION "0.0.0-dev"
#endif

#define KVMCACHE_MAGIC "VMMKVMC1"

/* The file: header, then nent CPUID entries, then nmsrs u32 indices. */
struct kvmcache_hdr {
	char magic[8];
	char key[KVMCACHE_KEY_MAX];
	uint32_t nent, nmsrs;
	uint64_t sum;          /* FNV-1a over the key and what follows the header */
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--) {
		h ^= *b++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t body_sum(const struct kvmcache_hdr *h, const void *ent, size_t elen, const void *msr,
			 size_t mlen)
{
	uint64_t s = fnv(0xcbf29ce484222325ull, h->key, sizeof(h->key));

	s = fnv(s, &h->nent, sizeof(h->nent));
	s = fnv(s, &h->nmsrs, sizeof(h->nmsrs));
	s = fnv(s, ent, elen);
	return fnv(s, msr, mlen);
}

int kvmcache_key_fmt(char *key, size_t len, const char *release, const char *version,
		     const char *vendor, unsigned sig, unsigned leaf7_ebx, const char *vmm_version)
{
	int n = snprintf(key, len, "%s|%s|%s|%08x|%08x|%s", release, version, vendor, sig, leaf7_ebx,
			 vmm_version);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int kvmcache_host_key(char *key, size_t len)
{
	unsigned a, b, c, d, sig, l7 = 0;
	char vendor[13];
	struct utsname u;

	if (uname(&u) < 0)
		return -errno;
	if (!__get_cpuid(0, &a, &b, &c, &d))
		return -ENOTSUP;
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = '\0';
	if (a >= 7) {
		__cpuid_count(7, 0, a, b, c, d);
		l7 = b;
	}
	__cpuid(1, sig, b, c, d);
	return kvmcache_key_fmt(key, len, u.release, u.version, vendor, sig, l7, VMM_VERSION);
}

int kvmcache_load(const char *path, const char *key, struct kvm_cpuid2 *cpuid, unsigned max_ent,
		  struct kvm_msr_list *msrs, unsigned max_msrs)
{
	struct kvmcache_hdr h;
	struct stat st;
	size_t elen, mlen;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), r;

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	r = -EPERM;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		goto out;
	r = -EINVAL;
	if ((size_t)st.st_size < sizeof(h) || read_full(fd, &h, sizeof(h)) ||
	    memcmp(h.magic, KVMCACHE_MAGIC, sizeof(h.magic)))
		goto out;
	h.key[sizeof(h.key) - 1] = '\0';
	if (strcmp(h.key, key)) {
		r = -ESTALE;
		goto out;
	}
	if (h.nent == 0 || h.nent > max_ent || h.nmsrs > max_msrs)
		goto out;
	elen = (size_t)h.nent * sizeof(cpuid->entries[0]);
	mlen = (size_t)h.nmsrs * sizeof(msrs->indices[0]);
	if ((uint64_t)st.st_size != sizeof(h) + elen + mlen || read_full(fd, cpuid->entries, elen) ||
	    read_full(fd, msrs->indices, mlen) || body_sum(&h, cpuid->entries, elen, msrs->indices, mlen) != h.sum)
		goto out;
	cpuid->nent = h.nent;
	msrs->nmsrs = h.nmsrs;
	r = 0;
out:
	close(fd);
	return r;
}

int kvmcache_store(const char *path, const char *key, const struct kvm_cpuid2 *cpuid,
		   const struct kvm_msr_list *msrs)
{
	struct kvmcache_hdr h;
	char tmp[4096];
	size_t elen = (size_t)cpuid->nent * sizeof(cpuid->entries[0]);
	size_t mlen = (size_t)msrs->nmsrs * sizeof(msrs->indices[0]);
	int fd, r = 0;

	if (strlen(key) >= sizeof(h.key))
		return -ENAMETOOLONG;
	if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, KVMCACHE_MAGIC, sizeof(h.magic));
	memcpy(h.key, key, strlen(key));
	h.nent = cpuid->nent;
	h.nmsrs = msrs->nmsrs;
	h.sum = body_sum(&h, cpuid->entries, elen, msrs->indices, mlen);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) ||
	    write(fd, cpuid->entries, elen) != (ssize_t)elen ||
	    write(fd, msrs->indices, mlen) != (ssize_t)mlen)
		r = errno ? -errno : -EIO;
	if (close(fd) < 0 && !r)
		r = -errno;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}
