/* The helper process of vmm run/restore/start (run_helper.h). */
#include "cli/launch/run_helper.h"
#include "cli/launch/boot_status.h"
#include "cli/util/util.h"
#include "vmm/base/log.h"
#include "vmm/seccomp.h"
#include "vmm/vm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How often a restored guest's API is probed when no ready notice comes
 * (a guest-init older than the notice): docs/vsock.md. */
#define RESTORE_PROBE_MS 1000

/* The helper's wait for the boot marker ('K' kernel up, then 'R'), the
 * status line ticking on a terminal. 0, or -ETIMEDOUT after ready_s. */
static int helper_wait_boot(const struct helper *h, int rd, struct boot_status *bs)
{
	struct pollfd p = { .fd = rd, .events = POLLIN };
	uint64_t end = log_now_ns() + (uint64_t)h->ready_s * 1000000000ull;

	for (;;) {
		uint64_t now = log_now_ns();
		int st;

		if (now >= end)
			return -ETIMEDOUT;
		if (poll(&p, 1, (end - now) / 1000000 < 250 ? (int)((end - now) / 1000000) : 250) == 1) {
			st = boot_status_read(bs, rd);
			if (st < 0 || st == BOOT_GUEST_READY)
				return 0; /* EOF: the VMM is going; the API wait says so */
			boot_status_show(bs, (enum boot_stage)st, log_now_ns());
			continue;
		}
		boot_status_show(bs, bs->stage, log_now_ns());
	}
}

/* The helper's Ctrl-C while the sandbox boots, before the command runs:
 * the VMM, which leaves a terminal's SIGINT to the helper, is told to stop
 * (130: docs/exit-status.md; why not with a SIGINT: VM_INTERRUPT_SIGNAL). */
static void helper_interrupted(int sig)
{
	kill(getppid(), VM_INTERRUPT_SIGNAL);
	_exit(128 + sig);
}

/* A restored guest's ready notice, through the VMM's pipe (p). A guest
 * older than the notice never sends one: then the API is probed, once a
 * second (each probe is a vsock connection the guest must serve, so not
 * more often). 0 once either says so, -1 after ready_s. */
static int wait_restored(struct pollfd *p, const struct helper *h)
{
	uint64_t end = log_now_ns() + (uint64_t)h->ready_s * 1000000000ull;

	while (log_now_ns() < end) {
		int r = poll(p, 1, RESTORE_PROBE_MS);

		if (r == 1 && (p->revents & POLLIN))
			return 0;
		if (r == 1) /* the VMM is gone: probing says the rest */
			p->fd = -1;
		if (api_wait_ready(h->a, 0, NULL, 0) == 0)
			return 0;
	}
	return -1;
}

/* The helper gives up waiting for its sandbox: says why (what the API
 * answered, if it did, then fmt, which takes ready_s), stops the VMM if a
 * command was to run, and exits. */
static void helper_fail(const struct helper *h, struct boot_status *bs, const char *api_err, const char *fmt)
	__attribute__((noreturn, format(printf, 4, 0)));
static void helper_fail(const struct helper *h, struct boot_status *bs, const char *api_err, const char *fmt)
{
	boot_status_done(bs);
	if (api_err && api_err[0])
		log_err("%s", api_err);
	log_err(fmt, h->ready_s);
	if (h->cmd)
		kill(getppid(), SIGTERM);
	_exit(CLI_EXIT_ERROR);
}

int helper_start(struct vm *vm, struct helper *h, pid_t *child)
{
	int ready[2] = { -1, -1 }, interrupted;
	pid_t vmm = getpid();
	sigset_t stops, old, pending;

	/* On a fresh boot the guest's init writes the boot marker once its
	 * API listens, and a restored one sends its ready notice once its
	 * vsock is back (docs/vsock.md): the VMM passes either on through a
	 * pipe, so the child does not probe a guest that cannot answer yet. */
	if (pipe2(ready, O_CLOEXEC) < 0) {
		log_err("pipe: %s", strerror(errno));
		return -1;
	}
	/* A SIGTERM the child sends (it gives up, or broke its allow-list),
	 * or a Ctrl-C, may come before vm_run takes the stop signals over:
	 * held pending until then, it stops the VM the orderly way instead of
	 * killing the VMM. */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	sigaddset(&stops, SIGQUIT);
	sigaddset(&stops, VM_INTERRUPT_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &stops, &old);
	/* A Ctrl-C already pressed (while the VM was built) is the VMM's:
	 * vm_run stops at once. */
	interrupted = sigpending(&pending) == 0 && sigismember(&pending, SIGINT);
	*child = fork();
	if (*child < 0) {
		log_err("fork: %s", strerror(errno));
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return -1;
	}
	if (*child == 0) {
		struct pollfd p = { .fd = ready[0], .events = POLLIN };
		struct boot_status bs;
		struct exec_opts cmd;
		char err[600] = "";
		int r, forked = 0;

		/* Ctrl-C while the sandbox boots: the VMM stops it (above); once
		 * the command runs, api_exec forwards it, and a second one stops
		 * the VMM (interrupt_pid). */
		signal(SIGINT, h->cmd ? helper_interrupted : SIG_DFL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_sigmask(SIG_UNBLOCK, &stops, NULL); /* held by the VMM since its folder */

		/* It goes with the VMM (whose sockets it holds too: a VMM that
		 * died must not look alive to the next one on its paths). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != vmm)
			_exit(CLI_EXIT_ERROR);
		/* Its own allow-list, before it reads anything from the guest. */
		if (h->seccomp) {
			r = sc_install(SC_HELPER);
			if (r) {
				log_err("the helper process cannot install its seccomp filter: %s", strerror(-r));
				if (h->cmd)
					kill(getppid(), SIGTERM);
				_exit(CLI_EXIT_ERROR);
			}
			sc_test_violate(SC_HELPER);
		}
		close(ready[1]);
		boot_status_init(&bs, h->name, h->status_on, h->status_tty, h->t0_ns);
		boot_status_show(&bs, h->restored ? BOOT_RESTORING : BOOT_BOOTING, log_now_ns());
		if (!h->restored) {
			if (helper_wait_boot(h, ready[0], &bs))
				helper_fail(h, &bs, NULL, "the sandbox did not get ready within %lu s");
			phase_mark(&vm->phases, PHASE_READY);
			if (api_wait_ready(h->a, 30000, err, sizeof(err)))
				helper_fail(h, &bs, err, "the sandbox API did not answer within %lu s");
		} else {
			/* A clone: its sync goes at once. The snapshot was taken
			 * with the API listening (a spare worker waiting in
			 * accept: guest-init), and the vsock device holds the
			 * connection until the guest handled the transport reset,
			 * so neither the ready notice nor a health probe needs to
			 * come first. A snapshot with no API yet answers nothing:
			 * then the notice (or probes) and the health check. */
			r = api_sync_first(h->a, h->nets, h->nr_nets, h->egress_port, &forked, err, sizeof(err));
			if (!r && forked)
				log_info("this snapshot held no waiting API worker: the clone forked one "
					 "for its sync (a snapshot from an older vmm, or one taken while "
					 "the guest did not settle: docs/snapshot.md)");
			if (r == API_UNREACHED) {
				if (wait_restored(&p, h))
					helper_fail(h, &bs, NULL, "the sandbox API did not answer within %lu s");
				phase_mark(&vm->phases, PHASE_READY);
				if (api_wait_ready(h->a, (unsigned)(h->ready_s * 1000), err, sizeof(err)))
					helper_fail(h, &bs, err, "the sandbox API did not answer within %lu s");
				r = api_sync(h->a, h->nets, h->nr_nets, h->egress_port, err, sizeof(err));
			}
			if (r) {
				log_err("could not give the restored sandbox the time and fresh entropy: %s", err);
			} else if (h->synced) {
				int fd = open(h->synced, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

				if (fd >= 0)
					close(fd);
			}
		}
		if (h->notify_fd >= 0 && write(h->notify_fd, "R", 1) < 0)
			log_debug("ready notification: %s", strerror(errno));
		/* This copy of the phases (the fork's) ends with the first API
		 * reply: the health check, or a clone's sync. */
		phase_mark(&vm->phases, PHASE_API);
		phase_log(&vm->phases, h->restored ? "to the restored sandbox's sync" : "to the first API reply");
		boot_status_show(&bs, BOOT_API_READY, log_now_ns());
		boot_status_done(&bs); /* the command's output follows */
		if (!h->cmd)
			_exit(0);
		cmd = *h->cmd;
		cmd.interrupt_pid = getppid();
		r = api_exec(h->a, &cmd, err, sizeof(err));
		/* This process is where vmm run -- CMD ends, its stderr the
		 * user's: why the command failed, or that it crashed, is said
		 * here as vmm exec says it (tests/structure.py, STDIO_ALLOW). */
		if (err[0])
			fprintf(stderr, "vmm: %s\n", err);
		if (api_shutdown(h->a, err, sizeof(err))) {
			log_warn("%s", err);
			kill(getppid(), SIGTERM);
		}
		_exit(r < 0 ? CLI_EXIT_ERROR : r);
	}
	h->ready_rd = ready[0];
	vm->marker_fd = ready[1];
	if (h->cmd && !interrupted)
		vm->cfg.sigint_helper = *child;
	return 0;
}

/* Reaps the helper if it has ended. One that stopped the VM itself (its
 * seccomp handler, or the command's end asking for a shutdown) sends the
 * SIGTERM and then exits: it gets up to 2 s to do so, so that its status
 * is read rather than replaced by the SIGKILL. Returns 1 once reaped. */
static int helper_reap(const struct vm *vm, pid_t child, int *st)
{
	const struct timespec tick = { 0, 1000000 };
	int waits = vm->exit_sender == child ? 2000 : 0;

	for (;;) {
		pid_t r = waitpid(child, st, WNOHANG);

		if (r == child)
			return 1;
		if (r < 0 && errno != EINTR)
			return 1; /* not ours to wait for any more */
		if (waits-- <= 0)
			return 0;
		nanosleep(&tick, NULL);
	}
}

/* Runs the VM; with a command, its status is the command's. */
int helper_run_vm(struct vm *vm, struct helper *h, pid_t child)
{
	enum vm_exit_reason reason = vm_run(vm);
	int st = 0;

	if (vm->marker_fd >= 0)
		close(vm->marker_fd);
	vm->marker_fd = -1;
	if (h->ready_rd >= 0)
		close(h->ready_rd);
	h->ready_rd = -1;
	/* The guest is gone: the helper has nothing left to do, and one in the
	 * middle of the command would wait for a guest that never answers
	 * (it forwards a SIGTERM to the command): SIGKILL. */
	if (child > 0 && !helper_reap(vm, child, &st)) {
		kill(child, SIGKILL);
		waitpid(child, &st, 0);
	}
	/* The helper broke its seccomp allow-list: its handler said so and
	 * stopped the VMM with SIGTERM (vmm/seccomp.c). */
	if (reason == VM_EXIT_SIGNAL && WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGSYS) {
		log_err("the helper process was stopped by its seccomp filter");
		return 128 + SIGSYS;
	}
	if (h->cmd) {
		if (reason == VM_EXIT_POWEROFF && WIFEXITED(st))
			return WEXITSTATUS(st);
		if (reason == VM_EXIT_SIGNAL && WIFEXITED(st) && WEXITSTATUS(st) == CLI_EXIT_ERROR)
			return CLI_EXIT_ERROR; /* the child said why */
		if (reason == VM_EXIT_SIGNAL && vm->exit_signo == SIGINT)
			log_err("interrupted: the sandbox was stopped before the command finished");
		else
			log_err("the sandbox stopped before the command finished: %s", vm->exit_msg);
		return vm_exit_status(reason, vm->exit_signo);
	}
	if (reason == VM_EXIT_REBOOT || reason == VM_EXIT_POWEROFF || reason == VM_EXIT_CONSOLE ||
	    reason == VM_EXIT_SIGNAL || reason == VM_EXIT_STOPPED || reason == VM_EXIT_STANDBY)
		log_info("%s (exit status %d)", vm->exit_msg, vm_exit_status(reason, vm->exit_signo));
	else
		log_err("%s (exit status %d)", vm->exit_msg, vm_exit_status(reason, vm->exit_signo));
	return vm_exit_status(reason, vm->exit_signo);
}
