/* The KVM capability cache (vmm/kvmcache.c): a hit gives back what was
 * stored; a changed host kernel, CPU signature or vmm version makes it
 * stale; a damaged file or one others may write is not used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/kvmcache.h"

#define NENT 8
#define NMSR 5

struct fx {
	char dir[32], path[64];
	struct kvm_cpuid2 *cpuid;
	struct kvm_msr_list *msrs;
	struct kvm_cpuid2 *got_cpuid;
	struct kvm_msr_list *got_msrs;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	unsigned i;

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_kvmc.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/kvm-supported", f->dir);
	f->cpuid = calloc(1, sizeof(*f->cpuid) + NENT * sizeof(f->cpuid->entries[0]));
	f->msrs = calloc(1, sizeof(*f->msrs) + NMSR * sizeof(uint32_t));
	f->got_cpuid = calloc(1, sizeof(*f->cpuid) + 256 * sizeof(f->cpuid->entries[0]));
	f->got_msrs = calloc(1, sizeof(*f->msrs) + 1024 * sizeof(uint32_t));
	f->cpuid->nent = NENT;
	for (i = 0; i < NENT; i++) {
		f->cpuid->entries[i].function = i;
		f->cpuid->entries[i].eax = 0x1000 + i;
		f->cpuid->entries[i].edx = 0xdead0000 + i;
	}
	f->msrs->nmsrs = NMSR;
	for (i = 0; i < NMSR; i++)
		f->msrs->indices[i] = 0xc0000080 + i;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	unlink(f->path);
	rmdir(f->dir);
	free(f->cpuid);
	free(f->msrs);
	free(f->got_cpuid);
	free(f->got_msrs);
	free(f);
	return 0;
}

static int load(struct fx *f, const char *key)
{
	return kvmcache_load(f->path, key, f->got_cpuid, 256, f->got_msrs, 1024);
}

static void key(char *k, const char *release, unsigned sig, const char *ver)
{
	assert_int_equal(kvmcache_key_fmt(k, KVMCACHE_KEY_MAX, release, "#1 SMP", "AuthenticAMD", sig,
					  0x219c07ab, ver), 0);
}

static void hit_gives_back_what_was_stored(void **state)
{
	struct fx *f = *state;
	char k[KVMCACHE_KEY_MAX];

	key(k, "6.1.0-18-amd64", 0x00a20f12, "v1");
	assert_int_equal(load(f, k), -ENOENT);
	assert_int_equal(kvmcache_store(f->path, k, f->cpuid, f->msrs), 0);
	assert_int_equal(load(f, k), 0);
	assert_int_equal(f->got_cpuid->nent, NENT);
	assert_int_equal(f->got_msrs->nmsrs, NMSR);
	assert_memory_equal(f->got_cpuid->entries, f->cpuid->entries, NENT * sizeof(f->cpuid->entries[0]));
	assert_memory_equal(f->got_msrs->indices, f->msrs->indices, NMSR * sizeof(uint32_t));
}

static void changed_host_makes_it_stale(void **state)
{
	struct fx *f = *state;
	char k[KVMCACHE_KEY_MAX], other[KVMCACHE_KEY_MAX];

	key(k, "6.1.0-18-amd64", 0x00a20f12, "v1");
	assert_int_equal(kvmcache_store(f->path, k, f->cpuid, f->msrs), 0);
	key(other, "6.1.0-21-amd64", 0x00a20f12, "v1");   /* a new host kernel */
	assert_int_equal(load(f, other), -ESTALE);
	key(other, "6.1.0-18-amd64", 0x00a20f10, "v1");   /* another CPU stepping */
	assert_int_equal(load(f, other), -ESTALE);
	key(other, "6.1.0-18-amd64", 0x00a20f12, "v2");   /* a new vmm */
	assert_int_equal(load(f, other), -ESTALE);
	/* the stale file is replaced by the next store, and hits again */
	assert_int_equal(kvmcache_store(f->path, other, f->cpuid, f->msrs), 0);
	assert_int_equal(load(f, other), 0);
	assert_int_equal(load(f, k), -ESTALE);
}

static void damaged_or_foreign_file_is_not_used(void **state)
{
	struct fx *f = *state;
	char k[KVMCACHE_KEY_MAX];
	int fd;

	key(k, "6.1.0-18-amd64", 0x00a20f12, "v1");
	assert_int_equal(kvmcache_store(f->path, k, f->cpuid, f->msrs), 0);
	/* one flipped byte in an entry: the checksum */
	fd = open(f->path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "\xff", 1, 8 + KVMCACHE_KEY_MAX + 16 + 4), 1);
	close(fd);
	assert_int_equal(load(f, k), -EINVAL);
	/* cut short */
	assert_int_equal(kvmcache_store(f->path, k, f->cpuid, f->msrs), 0);
	assert_int_equal(truncate(f->path, 8 + KVMCACHE_KEY_MAX + 16 + 40), 0);
	assert_int_equal(load(f, k), -EINVAL);
	/* writable by others */
	assert_int_equal(kvmcache_store(f->path, k, f->cpuid, f->msrs), 0);
	assert_int_equal(chmod(f->path, 0622), 0);
	assert_int_equal(load(f, k), -EPERM);
	assert_int_equal(chmod(f->path, 0600), 0);
	assert_int_equal(load(f, k), 0);
	/* more entries than the caller has room for */
	assert_int_equal(kvmcache_load(f->path, k, f->got_cpuid, NENT - 1, f->got_msrs, 1024), -EINVAL);
}

static void host_key_names_this_host(void **state)
{
	char k[KVMCACHE_KEY_MAX];

	(void)state;
	assert_int_equal(kvmcache_host_key(k, sizeof(k)), 0);
	assert_non_null(strchr(k, '|'));
	assert_int_equal(kvmcache_key_fmt(k, 8, "a-long-release", "v", "x", 1, 2, "v1"), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(hit_gives_back_what_was_stored, setup, teardown),
		cmocka_unit_test_setup_teardown(changed_host_makes_it_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(damaged_or_foreign_file_is_not_used, setup, teardown),
		cmocka_unit_test_setup_teardown(host_key_names_this_host, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
