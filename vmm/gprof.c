/* Guest RIP sampling: see gprof.h. */
#include "vmm/gprof.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* 2^19 samples: about nine minutes of CPU time at 1 kHz. The array is
 * mmapped: only the pages samples reach are ever resident. */
#define GPROF_MAX_SAMPLES (1u << 19)
#define GPROF_PERIOD_NS 1000000L

struct gprof_sample {
	uint64_t t_us;
	uint64_t rip;
	uint32_t vcpu;
};

struct gprof {
	int fd;
	uint64_t t0_ns;
	_Atomic size_t n; /* slots taken; may pass GPROF_MAX_SAMPLES */
	struct gprof_sample *s;
};

struct gprof *gprof_open(const char *path, uint64_t t0_ns, int signo)
{
	struct itimerspec its = { .it_interval = { 0, GPROF_PERIOD_NS }, .it_value = { 0, GPROF_PERIOD_NS } };
	struct sigevent ev;
	struct gprof *p;
	timer_t t;

	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	/* O_EXCL and no symlink followed: the path may be in a shared /tmp. */
	p->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (p->fd < 0) {
		log_warn("VMM_GUEST_PROFILE: %s: %s: no guest profile", path, strerror(errno));
		goto fail_free;
	}
	p->s = mmap(NULL, GPROF_MAX_SAMPLES * sizeof(*p->s), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p->s == MAP_FAILED) {
		log_warn("VMM_GUEST_PROFILE: no memory for the samples: no guest profile");
		goto fail_close;
	}
	p->t0_ns = t0_ns;
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = signo;
	if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &t) < 0 || timer_settime(t, 0, &its, NULL) < 0) {
		log_warn("VMM_GUEST_PROFILE: timer: %s: no guest profile", strerror(errno));
		goto fail_unmap;
	}
	log_info("sampling the guest's RIP every 1 ms of the VMM's CPU time into %s", path);
	return p;

fail_unmap:
	munmap(p->s, GPROF_MAX_SAMPLES * sizeof(*p->s));
fail_close:
	close(p->fd);
fail_free:
	free(p);
	return NULL;
}

void gprof_sample(struct gprof *p, unsigned vcpu, int vcpu_fd)
{
	struct kvm_regs regs;
	size_t i;

	if (ioctl(vcpu_fd, KVM_GET_REGS, &regs) < 0)
		return;
	i = atomic_fetch_add(&p->n, 1);
	if (i >= GPROF_MAX_SAMPLES)
		return;
	p->s[i].t_us = (log_now_ns() - p->t0_ns) / 1000;
	p->s[i].rip = regs.rip;
	p->s[i].vcpu = vcpu;
}

void gprof_close(struct gprof *p)
{
	size_t n = atomic_load(&p->n), i, len = 0;
	char buf[8192];
	int ok = 1;

	if (n > GPROF_MAX_SAMPLES) {
		log_warn("VMM_GUEST_PROFILE: %zu samples past the first %u not kept", n - GPROF_MAX_SAMPLES,
			 GPROF_MAX_SAMPLES);
		n = GPROF_MAX_SAMPLES;
	}
	/* The vCPU threads have ended: every slot taken below n is filled. */
	for (i = 0; i < n && ok; i++) {
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%llx %x %llx\n",
					(unsigned long long)p->s[i].t_us, p->s[i].vcpu,
					(unsigned long long)p->s[i].rip);
		if (sizeof(buf) - len < 64) { /* a line is at most 43 bytes */
			ok = write(p->fd, buf, len) == (ssize_t)len;
			len = 0;
		}
	}
	if (ok && len)
		ok = write(p->fd, buf, len) == (ssize_t)len;
	if (!ok)
		log_warn("VMM_GUEST_PROFILE: writing the samples failed: %s", strerror(errno));
	close(p->fd);
	munmap(p->s, GPROF_MAX_SAMPLES * sizeof(*p->s));
	free(p);
}
