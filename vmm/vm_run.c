/* A VM's run (vm.h): the exit reasons and how a stop is asked for, the
 * main thread's loop (console input, stop signals, the control socket,
 * the ready notice, the time to live and idle standby) with the seccomp
 * lockdown before it and the stop sequence after it, and Ctrl-Alt-Del
 * (the i8042, else guest-init over vsock). */
#define _GNU_SOURCE
#include "vm.h"
#include "thread.h"
#include "control.h"
#include "standby.h"
#include "log.h"
#include "vcpu.h"
#include "gprof.h"
#include "sched_slice.h"
#include "seccomp.h"
#include "../guest-init/json.h"
#include "../guest-init/proto.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define CONSOLE_ESCAPE 0x01 /* Ctrl-A, then 'x' */

int vm_exit_status(enum vm_exit_reason r, int signo)
{
	switch (r) {
	case VM_EXIT_POWEROFF:
	case VM_EXIT_STOPPED:
	case VM_EXIT_EXPIRED:
	case VM_EXIT_STANDBY:
		return 0;
	case VM_EXIT_REBOOT:
		return 3;
	case VM_EXIT_TRIPLE_FAULT:
		return 4;
	case VM_EXIT_KVM_ERROR:
		return 5;
	case VM_EXIT_CRASH:
		return 6;
	case VM_EXIT_CONSOLE:
		return 7;
	case VM_EXIT_SIGNAL:
		return 128 + signo;
	case VM_EXIT_VMM_ERROR:
	case VM_RUNNING:
	default:
		return 1;
	}
}

const char *vm_exit_reason_name(enum vm_exit_reason r)
{
	static const char *const names[] = {
		[VM_RUNNING] = "running",
		[VM_EXIT_POWEROFF] = "poweroff",
		[VM_EXIT_REBOOT] = "reboot",
		[VM_EXIT_TRIPLE_FAULT] = "triple-fault",
		[VM_EXIT_KVM_ERROR] = "kvm-error",
		[VM_EXIT_CRASH] = "crash",
		[VM_EXIT_VMM_ERROR] = "vmm-error",
		[VM_EXIT_SIGNAL] = "signal",
		[VM_EXIT_CONSOLE] = "console-escape",
		[VM_EXIT_STOPPED] = "stopped",
		[VM_EXIT_EXPIRED] = "expired",
		[VM_EXIT_STANDBY] = "standby",
	};

	if ((unsigned)r < sizeof(names) / sizeof(names[0]) && names[r])
		return names[r];
	return "unknown";
}

void vm_request_exit(struct vm *vm, enum vm_exit_reason r, const char *fmt, ...)
{
	int expected = VM_RUNNING;
	uint64_t one = 1;
	va_list ap;

	if (!atomic_compare_exchange_strong(&vm->exit_reason, &expected, (int)r))
		return;
	va_start(ap, fmt);
	vsnprintf(vm->exit_msg, sizeof(vm->exit_msg), fmt, ap);
	va_end(ap);
	if (write(vm->exit_efd, &one, sizeof(one)) < 0) {
		/* cannot fail for a fresh eventfd; vm_run also polls exit_reason */
	}
	/* Parked vCPUs look at exit_reason when woken. */
	pthread_mutex_lock(&vm->pause_lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
}

void vm_kernel_up(struct vm *vm)
{
	int expected = 0;

	if (!atomic_compare_exchange_strong(&vm->kernel_up, &expected, 1))
		return;
	/* A restored guest-init may read the token again: that is no kernel
	 * boot (and a mark after `ready` would make that phase's length 0). */
	if (!vm->cfg.restore && !atomic_load(&vm->phases.at[PHASE_READY]))
		phase_mark(&vm->phases, PHASE_KERNEL);
	if (vm->marker_fd >= 0 && write(vm->marker_fd, "K", 1) < 0)
		log_debug("kernel-up notification: %s", strerror(errno));
}

void vm_boot_marker(struct vm *vm)
{
	uint64_t expected = 0, t = log_now_ns() - vm->cfg.t0_ns;

	if (t == 0)
		t = 1;
	if (!atomic_compare_exchange_strong(&vm->marker_ns, &expected, t))
		return;
	phase_mark_at(&vm->phases, PHASE_READY, vm->cfg.t0_ns + t);
	if (vm->marker_fd >= 0 && write(vm->marker_fd, "R", 1) < 0)
		log_debug("boot marker notification: %s", strerror(errno));
	phase_log(&vm->phases, "to the boot marker");
	log_info("boot marker: guest ready %.1f ms after VMM start (first guest instruction at %.1f ms)",
			 (double)t / 1e6, (double)atomic_load(&vm->first_run_ns) / 1e6);
}

unsigned vm_settle_guest(struct vm *vm, int timeout_ms)
{
	uint64_t t0 = log_now_ns();
	unsigned ready = 0, ms;
	int r;

	if (vm->paused)
		return 0;
	r = notice_settle(&vm->notice, timeout_ms, &ready);
	if (ready)
		vm_boot_marker(vm);
	ms = (unsigned)((log_now_ns() - t0) / 1000000);
	if (r == -ETIMEDOUT)
		log_info("snapshot: the guest's next API worker was not ready within %d ms; "
			 "a clone forks one on its first request", timeout_ms);
	else if (r)
		log_warn("snapshot: the guest's ready notice: %s", strerror(-r));
	else if (ms)
		log_debug("snapshot: waited %u ms for the guest's next API worker", ms);
	return ms;
}

/* ---- the main thread ---- */

/* Console input: returns 1 if the escape sequence asked to quit. */
static int console_input(struct vm *vm, int *escape_pending)
{
	uint8_t buf[SERIAL_RX_FIFO], out[SERIAL_RX_FIFO];
	size_t space = serial_rx_space(&vm->dev.com1), n = 0;
	ssize_t got, i;

	if (space == 0)
		return 0;
	got = read(vm->cfg.console_in, buf, space);
	if (got <= 0) {
		/* EIO: a terminal we just lost to another process group; read
		 * again once we have it back (vmm/tty.h). */
		if (got < 0 && errno == EIO && vm->cfg.console_tty)
			tty_update(&vm->tty);
		else if (got == 0 || (errno != EINTR && errno != EAGAIN))
			vm->cfg.console_in = -1; /* EOF: the guest just gets no more input */
		return 0;
	}
	for (i = 0; i < got; i++) {
		uint8_t c = buf[i];

		if (vm->cfg.console_escape) {
			if (*escape_pending) {
				*escape_pending = 0;
				if (c == 'x')
					return 1;
				if (c != CONSOLE_ESCAPE)
					out[n++] = CONSOLE_ESCAPE;
			} else if (c == CONSOLE_ESCAPE) {
				*escape_pending = 1;
				continue;
			}
		}
		out[n++] = c;
	}
	/* The FIFO had room for `got` bytes; an escaped Ctrl-A adds none. */
	serial_rx(&vm->dev.com1, out, n);
	return 0;
}

static int device_lockdown(void *arg)
{
	enum sc_class c = *(const enum sc_class *)arg;
	int r = sc_install(c);

	if (!r)
		sc_test_violate(c);
	return r;
}

/* Every device loop, then this thread, under its seccomp allow-list; the
 * vCPU threads install theirs as they start (vcpu.c). */
static int vm_lockdown(struct vm *vm)
{
	unsigned i;
	int r;

	for (i = 0; i < vm->nr_virtio; i++) {
		enum sc_class c = SC_DEVICE;
		unsigned j;

		if (!vm->virtio[i])
			continue;
		for (j = 0; j < VM_MAX_FS; j++)
			if (vm->fs[j] && &vm->fs[j]->vdev == vm->virtio[i])
				c = SC_FS;
		r = evloop_call(&vm->virtio[i]->loop, device_lockdown, &c);
		if (r) {
			log_err("%s: cannot install its seccomp filter: %s", vm->virtio[i]->loop.name,
				strerror(-r));
			return r;
		}
	}
	r = sc_install(SC_MAIN);
	if (r) {
		log_err("cannot install the main thread's seccomp filter: %s", strerror(-r));
		return r;
	}
	sc_test_violate(SC_MAIN);
	return 0;
}

/* A child that has not exited (it is not reaped: its parent waits for it). */
static int child_alive(pid_t pid)
{
	siginfo_t si;

	if (pid <= 0)
		return 0;
	si.si_pid = 0;
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

enum vm_exit_reason vm_run(struct vm *vm)
{
	sigset_t stop_sigs, old;
	const char *prof;
	int sfd, escape_pending = 0;
	unsigned i;

	phase_mark(&vm->phases, PHASE_HANDOVER);
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGTERM);
	sigaddset(&stop_sigs, SIGINT);
	sigaddset(&stop_sigs, SIGHUP);
	sigaddset(&stop_sigs, SIGQUIT);
	sigaddset(&stop_sigs, VM_INTERRUPT_SIGNAL);
	sigaddset(&stop_sigs, VCPU_KICK_SIGNAL);
	idle_init(&vm->idle, vm->cfg.idle_timeout_ns, log_now_ns());
	/* Block before creating threads so they inherit the mask; vCPU
	 * threads unblock the kick signal only. */
	pthread_sigmask(SIG_BLOCK, &stop_sigs, &old);
	sigdelset(&stop_sigs, VCPU_KICK_SIGNAL);
	sfd = signalfd(-1, &stop_sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		vm_request_exit(vm, VM_EXIT_VMM_ERROR, "signalfd: %s", strerror(errno));
		goto out_mask;
	}
	/* Before the filters: tty_open sets the SIGTTIN/SIGTTOU dispositions. */
	if (vm->cfg.console_tty && vm->cfg.console_in >= 0 && tty_open(&vm->tty, vm->cfg.console_in, 1, 1) < 0)
		vm->cfg.console_tty = 0;
	prof = getenv("VMM_GUEST_PROFILE");
	if (prof && prof[0])
		vm->prof = gprof_open(prof, vm->cfg.t0_ns, VCPU_KICK_SIGNAL);
	/* Where guest ticks are emulated kernel code, a longer CPU slice
	 * (vmm/sched_slice.h). Set here, on this thread: before the vCPU
	 * threads, which inherit it (the device threads, started earlier,
	 * keep the default), and before the filters, which do not allow
	 * sched_setattr. */
	if (vm->cfg.host_emulates_ring0) {
		int r = sched_slice_set(VMM_VCPU_SLICE_EMULATING_NS);

		if (r < 0)
			log_warn("cannot set the vCPU threads' CPU slice: %s", strerror(-r));
		else
			log_debug("vCPU threads: a CPU slice of %llu ms%s",
				  VMM_VCPU_SLICE_EMULATING_NS / 1000000,
				  r ? " (left alone: not a fair policy, or already so)" : "");
	}
	if (vm->cfg.seccomp && vm_lockdown(vm))
		vm_request_exit(vm, VM_EXIT_VMM_ERROR, "cannot install the seccomp filters");
	for (i = 0; i < vm->nr_vcpus && atomic_load(&vm->exit_reason) == VM_RUNNING; i++) {
		int r = vcpu_start(&vm->vcpus[i]);

		if (r) {
			vm_request_exit(vm, VM_EXIT_VMM_ERROR, "cannot start vcpu%u: %s", i, strerror(-r));
			break;
		}
	}
	/* A snapshot loaded without resume_vm: park the vCPUs before they
	 * run anything. */
	if (vm->cfg.start_paused && atomic_load(&vm->exit_reason) == VM_RUNNING && vm_pause(vm))
		log_warn("could not start paused; the VM runs");

	while (atomic_load(&vm->exit_reason) == VM_RUNNING) {
		struct pollfd p[5 + NOTICE_POLLFDS + CONTROL_POLLFDS];
		int n = 0, in_idx = -1, space_idx = -1, ctl_idx = -1, rot_idx = -1, ntc_idx, timeout;
		unsigned nctl = 0, nntc;

		p[n].fd = vm->exit_efd;
		p[n++].events = POLLIN;
		p[n].fd = sfd;
		p[n++].events = POLLIN;
		timeout = -1;
		/* A terminal is read only from the foreground (vmm/tty.h); in the
		 * background, look again now and then (the shell's `fg`). */
		if (vm->cfg.console_tty && vm->cfg.console_in >= 0 && !tty_update(&vm->tty))
			timeout = TTY_BACKGROUND_POLL_MS;
		else if (vm->cfg.console_in >= 0) {
			if (serial_rx_space(&vm->dev.com1)) {
				in_idx = n;
				p[n].fd = vm->cfg.console_in;
				p[n++].events = POLLIN;
			} else {
				space_idx = n;
				p[n].fd = vm->dev.com1.rx_space_efd;
				p[n++].events = POLLIN;
			}
		}
		if (vm->dev.com1.rotate_efd >= 0) {
			rot_idx = n;
			p[n].fd = vm->dev.com1.rotate_efd;
			p[n++].events = POLLIN;
		}
		if (vm->cfg.expire_ns) {
			uint64_t now = log_now_ns();

			if (now >= vm->cfg.expire_ns) {
				vm_request_exit(vm, VM_EXIT_EXPIRED, "its time to live ran out");
				break;
			}
			uint64_t ms = (vm->cfg.expire_ns - now) / 1000000 + 1;

			if (timeout < 0 || ms < (uint64_t)timeout)
				timeout = ms > INT_MAX ? INT_MAX : (int)ms;
		}
		if (vm->cfg.idle_timeout_ns) {
			uint64_t now = log_now_ns();
			int ms;

			if (vm->vsock)
				idle_observe(&vm->idle, atomic_load(&vm->vsock->act_conns),
					     atomic_load(&vm->vsock->act_gen), now);
			if (!vm->paused && idle_expired(&vm->idle, now)) {
				char why[512];
				struct standby_stats st;

				if (standby_suspend(vm, &st, why, sizeof(why)) == 0) {
					log_info("idle for %llu s: on standby (%llu ms, %llu KiB written, %s %llu pages)",
						 (unsigned long long)(vm->cfg.idle_timeout_ns / 1000000000),
						 (unsigned long long)st.ms, (unsigned long long)(st.bytes >> 10),
						 st.diff ? "diff of" : "full,", (unsigned long long)(st.diff ? st.pages
						 : vm->gm.total / GM_PAGE_SIZE));
					break;
				}
				log_warn("auto-standby: %s; trying again after another idle period", why);
				idle_touch(&vm->idle, now);
			}
			ms = vm->paused ? -1 : idle_wait_ms(&vm->idle, now);
			if (ms >= 0 && (timeout < 0 || ms < timeout))
				timeout = ms;
		}
		ntc_idx = n;
		nntc = notice_pollfds(&vm->notice, &p[n]);
		n += (int)nntc;
		if (vm->ctl) {
			ctl_idx = n;
			nctl = control_pollfds(vm->ctl, &p[n], &timeout);
			n += (int)nctl;
		}
		if (poll(p, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			vm_request_exit(vm, VM_EXIT_VMM_ERROR, "poll: %s", strerror(errno));
			break;
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si) &&
			    !(si.ssi_signo == SIGINT && si.ssi_code == SI_KERNEL && child_alive(vm->cfg.sigint_helper))) {
				if (si.ssi_signo == VM_INTERRUPT_SIGNAL)
					si.ssi_signo = SIGINT;
				vm->exit_signo = (int)si.ssi_signo;
				vm_request_exit(vm, VM_EXIT_SIGNAL, "stopped by signal %s",
						strsignal((int)si.ssi_signo));
			}
		}
		if (space_idx >= 0 && (p[space_idx].revents & POLLIN)) {
			uint64_t v;

			if (read(vm->dev.com1.rx_space_efd, &v, sizeof(v)) < 0) {
				/* spurious: poll again */
			}
		}
		if (rot_idx >= 0 && (p[rot_idx].revents & POLLIN)) {
			int r = serial_rotate(&vm->dev.com1, vm->cfg.console_path);

			if (r)
				log_warn("console log %s: cannot rotate it: %s (output past %llu "
				 "bytes is dropped)", vm->cfg.console_path, strerror(-r),
				 (unsigned long long)vm->cfg.console_limit);
		}
		if (nntc && notice_events(&vm->notice, &p[ntc_idx], nntc))
			vm_boot_marker(vm);
		if (ctl_idx >= 0)
			control_events(vm->ctl, vm, &p[ctl_idx], nctl);
		if (in_idx >= 0 && (p[in_idx].revents & (POLLIN | POLLHUP | POLLERR))) {
			if (console_input(vm, &escape_pending))
				vm_request_exit(vm, VM_EXIT_CONSOLE, "console escape (Ctrl-A x)");
		}
	}

	if (!atomic_load(&vm->phases.at[PHASE_READY]))
		phase_log(&vm->phases, "(the guest never said it was ready)");
	if (vm->cfg.console_tty)
		tty_close(&vm->tty); /* its mode back, if we still have it */
	vm_resume(vm); /* a paused VM that is told to stop: let it go */
	for (i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	for (i = 0; i < vm->nr_vcpus; i++)
		vcpu_join(&vm->vcpus[i]);
	if (vm->prof) {
		gprof_close(vm->prof);
		/* Its timer goes on (vmm/gprof.h): its signal stays blocked
		 * here, so that no later call of this thread sees EINTR. */
		sigaddset(&old, VCPU_KICK_SIGNAL);
	}
	vm->prof = NULL;
	/* Discard stop signals already pending (timeout(1) sends its SIGTERM
	 * to the child and to the group: two) and keep them blocked, so the
	 * caller's teardown runs to the end (see vm.h). */
	for (;;) {
		struct signalfd_siginfo si;

		if (read(sfd, &si, sizeof(si)) != sizeof(si))
			break;
	}
	close(sfd);
	sigaddset(&old, SIGTERM);
	sigaddset(&old, SIGHUP);
	sigaddset(&old, SIGQUIT);
	sigaddset(&old, SIGINT);
	sigaddset(&old, VM_INTERRUPT_SIGNAL);
out_mask:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return (enum vm_exit_reason)atomic_load(&vm->exit_reason);
}

/* ---- Ctrl-Alt-Del ---- */

struct guest_shutdown {
	char uds[108];
	char req[512];
};

static void *guest_shutdown_thread(void *arg)
{
	struct guest_shutdown *g = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 30 };
	char line[64];
	size_t n = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g->uds);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto out;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* The vsock handshake (docs/vsock.md), then one API request. */
	if (dprintf(fd, "CONNECT %u\n", API_VSOCK_PORT) < 0)
		goto out;
	while (n < sizeof(line) - 1 && read(fd, line + n, 1) == 1 && line[n] != '\n')
		n++;
	line[n] = '\0';
	if (strncmp(line, "OK ", 3)) {
		log_warn("SendCtrlAltDel: the guest's API does not answer (%s)", line[0] ? line : "no reply");
		goto out;
	}
	if (frame_write(fd, F_REQUEST, g->req, strlen(g->req)) == 0) {
		uint8_t type;
		size_t len;

		(void)frame_read(fd, &type, line, sizeof(line), &len);
	}
out:
	if (fd >= 0)
		close(fd);
	free(g);
	return NULL;
}

int vm_ctrl_alt_del(struct vm *vm)
{
	int r = i8042_ctrl_alt_del(&vm->dev.i8042);

	if (r == 0)
		return 0;
	/* No i8042 driver in the guest (or its buffer full): the clean
	 * shutdown Ctrl-Alt-Del stands for goes to guest-init instead. */
	log_info("SendCtrlAltDel: %s; asking guest-init over vsock",
		 r == -ENODEV ? "the guest has no i8042 driver" : "the i8042 buffer is full");
	return vm_guest_shutdown(vm);
}

int vm_guest_shutdown(struct vm *vm)
{
	struct guest_shutdown *g;
	struct json_writer w;
	pthread_t t;
	int r;

	if (!vm->vsock || !vm->vsock->opt.uds[0])
		return -ENOTSUP;
	if (!(g = calloc(1, sizeof(*g))))
		return -ENOMEM;
	snprintf(g->uds, sizeof(g->uds), "%s", vm->vsock->opt.uds);
	jw_init(&w, g->req, sizeof(g->req));
	jw_obj(&w);
	jw_key(&w, "v");
	jw_int(&w, API_VERSION);
	if (vm->cfg.api_token && *vm->cfg.api_token) {
		jw_key(&w, "token");
		jw_str(&w, vm->cfg.api_token);
	}
	jw_key(&w, "op");
	jw_str(&w, "shutdown");
	jw_obj_end(&w);
	if (!jw_done(&w)) {
		free(g);
		return -E2BIG;
	}
	r = -vmm_thread_start(&t, guest_shutdown_thread, g, 1);
	if (r)
		free(g);
	return r;
}
