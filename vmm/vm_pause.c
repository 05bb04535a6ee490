/* Pausing a VM (vm.h, docs/ARCHITECTURE.md "Threads"): each vCPU is
 * kicked out of KVM_RUN and parks on the pause condition variable, then
 * every device loop parks between two handler calls; resume undoes it in
 * reverse. */
#include "vmm/vm.h"
#include "vmm/base/log.h"
#include "vmm/vcpu.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

/* The guest's time at the pause (vm.h "frozen"): kvmclock and each vCPU's
 * TSC, read once every vCPU is out of KVM_RUN. Best effort: a snapshot
 * without them saves what KVM says when it is taken. */
static void freeze_time(struct vm *vm)
{
	struct kvm_clock_data clock = { 0 };
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e;
	} m;
	unsigned i;

	vm->frozen.valid = 0;
	if (ioctl(vm->fd, KVM_GET_CLOCK, &clock) < 0)
		return;
	for (i = 0; i < vm->nr_vcpus; i++) {
		memset(&m, 0, sizeof(m));
		m.h.nmsrs = 1;
		m.e.index = MSR_IA32_TSC;
		if (ioctl(vm->vcpus[i].fd, KVM_GET_MSRS, &m) != 1)
			return;
		vm->frozen.tsc[i] = m.e.data;
	}
	vm->frozen.kvmclock = clock.clock;
	vm->frozen.valid = 1;
}

int vm_pause(struct vm *vm)
{
	unsigned i;

	if (vm->paused)
		return 0;
	pthread_mutex_lock(&vm->pause_lock);
	atomic_store(&vm->pause_req, 1);
	pthread_mutex_unlock(&vm->pause_lock);
	for (i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	pthread_mutex_lock(&vm->pause_lock);
	{
		struct timespec until;
		int r = 0;

		/* A vCPU stuck in a device (a console write to a stalled pipe)
		 * must not wedge the main thread: give up after 10 s. */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 10;
		while (vm->parked < vm->nr_vcpus && r != ETIMEDOUT)
			r = pthread_cond_timedwait(&vm->pause_cond, &vm->pause_lock, &until);
		if (vm->parked < vm->nr_vcpus) {
			atomic_store(&vm->pause_req, 0);
			pthread_cond_broadcast(&vm->pause_cond);
			pthread_mutex_unlock(&vm->pause_lock);
			log_warn("pause: a vCPU did not stop within 10 s; the VM runs on");
			return -ETIMEDOUT;
		}
	}
	pthread_mutex_unlock(&vm->pause_lock);
	/* Device loops park between two handler calls: no request half done
	 * (the vCPUs are parked first, so no new notification arrives). */
	for (i = 0; i < vm->nr_virtio; i++)
		if (vm->virtio[i])
			evloop_pause(&vm->virtio[i]->loop);
	vm->paused = 1;
	freeze_time(vm);
	if (atomic_load(&vm->exit_reason) != VM_RUNNING) {
		vm_resume(vm);
		return -ESHUTDOWN;
	}
	return 0;
}

void vm_resume(struct vm *vm)
{
	unsigned i;

	if (!vm->paused)
		return;
	for (i = 0; i < vm->nr_virtio; i++)
		if (vm->virtio[i])
			evloop_resume(&vm->virtio[i]->loop);
	pthread_mutex_lock(&vm->pause_lock);
	atomic_store(&vm->pause_req, 0);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
	vm->paused = 0;
	vm->frozen.valid = 0;
}
