/* vmm run -d's wait for its sandbox (run_detach.h). */
#include "cli/launch/run_detach.h"
#include "cli/sandbox/sandbox.h"
#include "cli/launch/boot_status.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How often run -d / restore -d probes its sandbox's API when no ready
 * notice comes (docs/vsock.md). */
#define DETACH_PROBE_MS 1000

/* The last 2 KiB of a sandbox's log file, on diag (the verb's stderr). */
static void show_tail(FILE *diag, const char *path, const char *what)
{
	char buf[2048];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t size;
	ssize_t n;

	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	n = pread(fd, buf, sizeof(buf), size > (off_t)sizeof(buf) ? size - (off_t)sizeof(buf) : 0);
	if (n > 0) {
		fprintf(diag, "--- %s (the end of %s):\n", what, path);
		fwrite(buf, 1, (size_t)n, diag);
		if (buf[n - 1] != '\n')
			fputc('\n', diag);
		fflush(diag);
	}
	close(fd);
}

/* -d gave up on the sandbox (interrupted, or its API never answered):
 * stop its VMM (SIGTERM: the orderly stop; SIGKILL if it is still there
 * after 10 s or on another signal in `stops`) and remove its folder, so
 * no sandbox runs on behind a failure. */
static void detach_abandon(pid_t pid, const struct sandbox *sb, const sigset_t *stops)
{
	const struct timespec tick = { 0, 100000000 };
	struct sandbox gone = *sb;
	unsigned i;

	kill(pid, SIGTERM);
	for (i = 0; i < 100 && waitpid(pid, NULL, WNOHANG) == 0; i++) {
		if (sigtimedwait(stops, NULL, &tick) > 0) {
			log_warn("killing sandbox %s's VMM", sb->name);
			break;
		}
	}
	if (waitpid(pid, NULL, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	sandbox_delete(&gone);
}

/* -d: the sandbox runs on in a child of its own session, its stdout and
 * stderr in vmm.log in its folder. Returns -1 in that child (go on), or in
 * the caller the status to exit with: 0 once the sandbox's API answers
 * (its name printed), 1 if it died first (its log shown) or did not
 * answer within ready_s (stopped and removed, its logs shown), 128+N if
 * signal N (Ctrl-C: 130) came first (stopped and removed). */
int detach_self(const struct sandbox *sb, unsigned long ready_s, int restored, const struct exec_opts *dcmd,
		int *ready_wr, int quiet, uint64_t t0_ns, FILE *out, FILE *diag, char *err, size_t errlen)
{
	struct boot_status bs;
	char logp[PATH_MAX + 16], conp[PATH_MAX + 16];
	struct sandbox_addr a = { .uds = sb->vsock, .port = API_VSOCK_PORT };
	uint64_t end = log_now_ns() + (uint64_t)ready_s * 1000000000ull, next_probe = 0;
	const struct timespec none = { 0, 0 };
	sigset_t stops, old;
	pid_t pid;
	int fd, st, sig, ready[2];

	snprintf(logp, sizeof(logp), "%s/vmm.log", sb->dir);
	snprintf(conp, sizeof(conp), "%s/console.log", sb->dir);
	fflush(NULL);
	/* Held from before the fork: in the parent, a Ctrl-C while it waits
	 * (sigtimedwait below); in the child, a stop signal that comes while
	 * it sets up waits for vm_run, which stops the VM in order. */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	sigaddset(&stops, SIGQUIT);
	sigprocmask(SIG_BLOCK, &stops, &old);
	/* The sandbox says it is ready through this pipe (the boot marker or
	 * ready notice, or its helper once a clone took the sync): no API
	 * probes every tick. A sandbox that never writes (an older guest, no
	 * vsock) is probed once a second. */
	if (pipe2(ready, O_CLOEXEC) < 0) {
		log_err("pipe: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return CLI_EXIT_ERROR;
	}
	pid = fork();
	if (pid < 0) {
		log_err("fork: %s", strerror(errno));
		close(ready[0]);
		close(ready[1]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return CLI_EXIT_ERROR;
	}
	if (pid == 0) {
		/* The read end stays open here too (close-on-exec, gone with
		 * the process): a parent killed while it waits must not make
		 * the write a SIGPIPE. */
		*ready_wr = ready[1];
		setsid();
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			close(fd);
		}
		fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		return -1;
	}
	close(ready[1]);
	boot_status_init(&bs, sb->name, !quiet, isatty(STDERR_FILENO), t0_ns);
	boot_status_show(&bs, restored ? BOOT_RESTORING : BOOT_BOOTING, log_now_ns());
	/* The token is published with the pid; wait for both, then the API. */
	while (log_now_ns() < end) {
		char tok[160] = "", p[PATH_MAX + 32], why[600];
		struct pollfd rp = { .fd = ready[0], .events = POLLIN };
		int told = 0;
		FILE *f;

		boot_status_show(&bs, bs.stage, log_now_ns());
		if (waitpid(pid, &st, WNOHANG) == pid) {
			boot_status_done(&bs);
			log_err("sandbox %s did not start; the end of its log:", sb->name);
			show_tail(diag, logp, "the VMM's log");
			close(ready[0]);
			return CLI_EXIT_ERROR;
		}
		/* Signals are looked at every 100 ms (sigtimedwait below). The
		 * VMM writes 'K' (kernel up: the status line) and 'R' (ready:
		 * probe now) into the pipe (vmm/vm.h marker_fd). */
		if (poll(&rp, 1, 100) == 1) {
			int stg = boot_status_read(&bs, ready[0]);

			if (stg < 0 && ready[0] >= 0) { /* every writer gone: probe */
				close(ready[0]);
				ready[0] = -1;
			} else if (stg == BOOT_GUEST_READY) {
				told = 1;
			} else if (stg >= 0 && stg != (int)bs.stage) {
				boot_status_show(&bs, (enum boot_stage)stg, log_now_ns());
			}
		}
		sig = sigtimedwait(&stops, NULL, &none);
		if (sig > 0) {
			boot_status_done(&bs);
			cli_seterr(err, errlen, 0, "%s: sandbox %s stopped and removed before it was ready",
				   sig == SIGINT ? "interrupted" : strsignal(sig), sb->name);
			if (ready[0] >= 0)
				close(ready[0]);
			detach_abandon(pid, sb, &stops);
			return 128 + sig;
		}
		if (!told && log_now_ns() < next_probe)
			continue;
		next_probe = log_now_ns() + DETACH_PROBE_MS * 1000000ull;
		snprintf(p, sizeof(p), "%s/token", sb->dir);
		f = fopen(p, "re");
		if (f) {
			if (fgets(tok, sizeof(tok), f))
				tok[strcspn(tok, "\n")] = '\0';
			fclose(f);
		}
		a.token = tok;
		/* A clone is ready once it also took its fresh entropy: the
		 * helper writes `synced` only after the guest answered that
		 * sync, an API request with this token, so no health request
		 * follows (it was a second guest connection, and a fork there:
		 * 224 ms of a 380 ms restore -d on an emulating host). */
		snprintf(p, sizeof(p), "%s/synced", sb->rw);
		if (tok[0] && (restored ? access(p, F_OK) == 0 : api_wait_ready(&a, 0, NULL, 0) == 0)) {
			int64_t id = 0;

			boot_status_show(&bs, BOOT_API_READY, log_now_ns());
			boot_status_done(&bs);
			/* run -d -- CMD: CMD as the sandbox's detached process
			 * (API v2), tagged "main" for vmm attach/logs/kill */
			if (dcmd && api_start_id(&a, dcmd, &id, why, sizeof(why))) {
				log_err("sandbox %s: its command did not start: stopped and removed (%s)", sb->name, why);
				detach_abandon(pid, sb, &stops);
				return CLI_EXIT_ERROR;
			}
			fprintf(out, "%s\n", sb->name);
			fflush(out);
			if (ready[0] >= 0)
				close(ready[0]);
			return 0;
		}
	}
	if (ready[0] >= 0)
		close(ready[0]);
	boot_status_done(&bs);
	log_err("sandbox %s did not answer within %lu s (--ready-timeout): stopped and removed", sb->name,
		ready_s);
	show_tail(diag, logp, "the VMM's log");
	show_tail(diag, conp, "the console");
	detach_abandon(pid, sb, &stops);
	return CLI_EXIT_ERROR;
}
