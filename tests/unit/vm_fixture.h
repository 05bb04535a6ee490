/* Shared by the unit tests that build whole VMs (test_vm, test_snapshot):
 * where the test guests are, whether /dev/kvm is usable, and a VM run on a
 * thread of its own with its console on a pipe. */
#ifndef TESTS_VM_FIXTURE_H
#define TESTS_VM_FIXTURE_H

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "vmm/vm.h"

static inline const char *guest_dir(void)
{
	const char *d = getenv("VMM_TEST_GUESTS");

	return d ? d : "build/guests";
}

static inline int have_kvm(void)
{
	return access(KVM_DEVICE_PATH, R_OK | W_OK) == 0;
}

struct run {
	struct vm vm;
	struct vm_config cfg;
	char kernel[512];
	int out[2];
	pthread_t t;
	enum vm_exit_reason reason;
};

static inline void *run_thread(void *arg)
{
	struct run *r = arg;

	r->reason = vm_run(&r->vm);
	return NULL;
}

#endif
