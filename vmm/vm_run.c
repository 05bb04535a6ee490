/* A VM's run (vm.h): the main thread's loop (console input, stop
 * signals, the ready notice, the time to live, idle standby, and the poll
 * sources its owner registered, such as the control socket) with the
 * seccomp lockdown before it and the stop sequence after it, and
 * Ctrl-Alt-Del (the i8042, else guest-init over vsock). The exit reasons
 * and vm_request_exit are vm_exit.c's. */
#include "vmm/vm.h"
#include "vmm/base/thread.h"
#include "vmm/vm_standby.h"
#include "vmm/base/log.h"
#include "vmm/base/memtrim.h"
#include "vmm/base/unixsock.h"
#include "vmm/vcpu.h"
#include "vmm/gprof.h"
#include "vmm/sched_slice.h"
#include "vmm/seccomp.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"

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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CONSOLE_ESCAPE 0x01 /* Ctrl-A, then 'x' */
/* The main thread's stack kept below run_start's frame (mem_trim_startup):
 * room for the loop's own frames without faulting pages back at once. */
#define MEMTRIM_KEEP (16u << 10)

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

unsigned vm_settle_reports(struct vm *vm, int timeout_ms)
{
	uint64_t t0 = log_now_ns(), end = t0 + (uint64_t)timeout_ms * 1000000ull, now = t0, wait;

	if (vm->paused || !vm->balloon)
		return 0;
	while ((wait = virtio_balloon_report_wait_ns(vm->balloon, now)) && now < end) {
		struct timespec ts;

		if (wait > end - now)
			wait = end - now;
		if (wait > 50000000ull)
			wait = 50000000ull; /* a report may still come: look again */
		ts.tv_sec = 0;
		ts.tv_nsec = (long)wait;
		nanosleep(&ts, NULL);
		now = log_now_ns();
	}
	if (wait)
		log_info("snapshot: the guest was still reporting free pages after %d ms; "
			 "its clones report the rest themselves", timeout_ms);
	return (unsigned)((now - t0) / 1000000);
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
		 * again once we have it back (vmm/base/tty.h). */
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

int vm_add_poll_source(struct vm *vm, const struct vm_poll_source *src)
{
	unsigned i, fds = src->max;

	for (i = 0; i < vm->nr_sources; i++)
		fds += vm->sources[i].max;
	if (vm->nr_sources == VM_MAX_POLL_SOURCES || fds > VM_POLL_SOURCE_FDS)
		return -ENOSPC;
	vm->sources[vm->nr_sources++] = *src;
	return 0;
}

/* What one turn of the loop waits for, and where in p[] each part sits
 * (-1: not this turn). */
struct run_poll {
	struct pollfd p[5 + NOTICE_POLLFDS + VM_POLL_SOURCE_FDS];
	int n, timeout;
	int in_idx, space_idx, rot_idx, ntc_idx;
	unsigned nntc;
	int src_idx[VM_MAX_POLL_SOURCES];
	unsigned nsrc[VM_MAX_POLL_SOURCES];
};

/* Before the loop: the stop signals blocked (old: the mask before) and
 * read through the returned signalfd, the terminal, the guest profile,
 * the vCPU slice, the seccomp filters, the vCPU threads. The signalfd, or
 * -1 (the exit requested). */
static int run_start(struct vm *vm, sigset_t *old)
{
	sigset_t stop_sigs;
	const char *prof;
	unsigned i;
	long trimmed;
	int sfd;

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
	pthread_sigmask(SIG_BLOCK, &stop_sigs, old);
	sigdelset(&stop_sigs, VCPU_KICK_SIGNAL);
	sfd = signalfd(-1, &stop_sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		vm_request_exit(vm, VM_EXIT_VMM_ERROR, "signalfd: %s", strerror(errno));
		return -1;
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
	/* Set-up is over: its heap and deep stack pages go back before the
	 * filters (which do not allow reading /proc). */
	trimmed = mem_trim_startup(MEMTRIM_KEEP);
	if (trimmed < 0)
		log_debug("start-up pages not given back: %s", strerror((int)-trimmed));
	else
		log_debug("start-up pages given back: %ld KiB of stack, and the heap's free pages", trimmed);
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
	return sfd;
}

/* The console's part of p[]: its input while the serial FIFO has room,
 * else the FIFO's room-again eventfd; a terminal only from the foreground
 * (vmm/base/tty.h): in the background, look again now and then (`fg`). */
static void run_poll_console(struct vm *vm, struct run_poll *rp)
{
	if (vm->cfg.console_tty && vm->cfg.console_in >= 0 && !tty_update(&vm->tty))
		rp->timeout = TTY_BACKGROUND_POLL_MS;
	else if (vm->cfg.console_in >= 0) {
		if (serial_rx_space(&vm->dev.com1)) {
			rp->in_idx = rp->n;
			rp->p[rp->n].fd = vm->cfg.console_in;
			rp->p[rp->n++].events = POLLIN;
		} else {
			rp->space_idx = rp->n;
			rp->p[rp->n].fd = vm->dev.com1.rx_space_efd;
			rp->p[rp->n++].events = POLLIN;
		}
	}
	if (vm->dev.com1.rotate_efd >= 0) {
		rp->rot_idx = rp->n;
		rp->p[rp->n].fd = vm->dev.com1.rotate_efd;
		rp->p[rp->n++].events = POLLIN;
	}
}

/* Lowers rp->timeout to ms (never below 0). */
static void run_timeout_min(struct run_poll *rp, uint64_t ms)
{
	if (rp->timeout < 0 || ms < (uint64_t)rp->timeout)
		rp->timeout = ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The time to live and the idle timeout: 1 if the VM stops now (its time
 * ran out, or it went on standby), else 0 with rp->timeout lowered to the
 * nearer of the two. */
static int run_deadlines(struct vm *vm, struct run_poll *rp)
{
	if (vm->cfg.expire_ns) {
		uint64_t now = log_now_ns();

		if (now >= vm->cfg.expire_ns) {
			vm_request_exit(vm, VM_EXIT_EXPIRED, "its time to live ran out");
			return 1;
		}
		run_timeout_min(rp, (vm->cfg.expire_ns - now) / 1000000 + 1);
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
				return 1;
			}
			log_warn("auto-standby: %s; trying again after another idle period", why);
			idle_touch(&vm->idle, now);
		}
		ms = vm->paused ? -1 : idle_wait_ms(&vm->idle, now);
		if (ms >= 0)
			run_timeout_min(rp, (uint64_t)ms);
	}
	return 0;
}

/* What this turn waits for: the exit eventfd (p[0]), the signalfd (p[1]),
 * the console, the guest's notices and the registered sources. 1 if the
 * VM stops now (run_deadlines), else 0. */
static int run_poll_build(struct vm *vm, int sfd, struct run_poll *rp)
{
	unsigned i;

	rp->n = 0;
	rp->in_idx = rp->space_idx = rp->rot_idx = -1;
	rp->timeout = -1;
	rp->p[rp->n].fd = vm->exit_efd;
	rp->p[rp->n++].events = POLLIN;
	rp->p[rp->n].fd = sfd;
	rp->p[rp->n++].events = POLLIN;
	run_poll_console(vm, rp);
	if (run_deadlines(vm, rp))
		return 1;
	rp->ntc_idx = rp->n;
	rp->nntc = notice_pollfds(&vm->notice, &rp->p[rp->n]);
	rp->n += (int)rp->nntc;
	for (i = 0; i < vm->nr_sources; i++) {
		rp->src_idx[i] = rp->n;
		rp->nsrc[i] = vm->sources[i].pollfds(vm->sources[i].arg, &rp->p[rp->n], &rp->timeout);
		rp->n += (int)rp->nsrc[i];
	}
	return 0;
}

/* A stop signal read from the signalfd: the VM stops (a terminal's SIGINT
 * while the helper that takes it runs is the helper's). */
static void run_signal(struct vm *vm, int sfd)
{
	struct signalfd_siginfo si;

	if (read(sfd, &si, sizeof(si)) == sizeof(si) &&
	    !(si.ssi_signo == SIGINT && si.ssi_code == SI_KERNEL && child_alive(vm->cfg.sigint_helper))) {
		if (si.ssi_signo == VM_INTERRUPT_SIGNAL)
			si.ssi_signo = SIGINT;
		vm->exit_signo = (int)si.ssi_signo;
		vm->exit_sender = (int)si.ssi_pid;
		vm_request_exit(vm, VM_EXIT_SIGNAL, "stopped by signal %s", strsignal((int)si.ssi_signo));
	}
}

/* Serves what poll reported, in the order the loop always had. */
static void run_dispatch(struct vm *vm, int sfd, struct run_poll *rp, int *escape_pending)
{
	unsigned i;

	if (rp->p[1].revents & POLLIN)
		run_signal(vm, sfd);
	if (rp->space_idx >= 0 && (rp->p[rp->space_idx].revents & POLLIN)) {
		uint64_t v;

		if (read(vm->dev.com1.rx_space_efd, &v, sizeof(v)) < 0) {
			/* spurious: poll again */
		}
	}
	if (rp->rot_idx >= 0 && (rp->p[rp->rot_idx].revents & POLLIN)) {
		int r = serial_rotate(&vm->dev.com1, vm->cfg.console_path);

		if (r)
			log_warn("console log %s: cannot rotate it: %s (output past %llu "
			 "bytes is dropped)", vm->cfg.console_path, strerror(-r),
			 (unsigned long long)vm->cfg.console_limit);
	}
	if (rp->nntc && notice_events(&vm->notice, &rp->p[rp->ntc_idx], rp->nntc))
		vm_boot_marker(vm);
	for (i = 0; i < vm->nr_sources; i++)
		vm->sources[i].events(vm->sources[i].arg, vm, &rp->p[rp->src_idx[i]], rp->nsrc[i]);
	if (rp->in_idx >= 0 && (rp->p[rp->in_idx].revents & (POLLIN | POLLHUP | POLLERR))) {
		if (console_input(vm, escape_pending))
			vm_request_exit(vm, VM_EXIT_CONSOLE, "console escape (Ctrl-A x)");
	}
}

/* The loop: until something asks the VM to stop. */
static void run_loop(struct vm *vm, int sfd)
{
	struct run_poll rp;
	int escape_pending = 0;

	while (atomic_load(&vm->exit_reason) == VM_RUNNING) {
		if (run_poll_build(vm, sfd, &rp))
			break;
		if (poll(rp.p, (nfds_t)rp.n, rp.timeout) < 0) {
			if (errno == EINTR)
				continue;
			vm_request_exit(vm, VM_EXIT_VMM_ERROR, "poll: %s", strerror(errno));
			break;
		}
		run_dispatch(vm, sfd, &rp, &escape_pending);
	}
}

/* After the loop: the terminal back, the vCPU threads stopped and joined,
 * the profile closed, pending stop signals discarded and the signalfd
 * closed; *old (the mask to put back) gets the stop signals, which stay
 * blocked (see vm.h). */
static void run_stop(struct vm *vm, int sfd, sigset_t *old)
{
	unsigned i;

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
		sigaddset(old, VCPU_KICK_SIGNAL);
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
	sigaddset(old, SIGTERM);
	sigaddset(old, SIGHUP);
	sigaddset(old, SIGQUIT);
	sigaddset(old, SIGINT);
	sigaddset(old, VM_INTERRUPT_SIGNAL);
}

enum vm_exit_reason vm_run(struct vm *vm)
{
	sigset_t old;
	int sfd;

	phase_mark(&vm->phases, PHASE_HANDOVER);
	sfd = run_start(vm, &old);
	if (sfd >= 0) {
		run_loop(vm, sfd);
		run_stop(vm, sfd, &old);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return (enum vm_exit_reason)atomic_load(&vm->exit_reason);
}

/* ---- Ctrl-Alt-Del ---- */

struct guest_shutdown {
	char uds[PATH_MAX];
	char req[512];
};

static void *guest_shutdown_thread(void *arg)
{
	struct guest_shutdown *g = arg;
	struct timeval tv = { .tv_sec = 30 };
	char line[64];
	size_t n = 0;
	/* Started by the main thread, whose filter it keeps (open allowed). */
	int fd = unix_connect(g->uds, 0);

	if (fd < 0)
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
