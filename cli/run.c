/* vmm run: boot a kernel in a new VM and stay attached to its console. */
#define _GNU_SOURCE
#include "api_client.h"
#include "cli.h"
#include "../guest-init/proto.h"
#include "../vmm/log.h"
#include "../vmm/vm.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=-1"

static void run_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm run [options] [-- CMD [ARGS...]]\n\n"
		"Boots a Linux sandbox. Without CMD, this terminal is its console (a shell\n"
		"on the default image). With CMD: boots, waits until the sandbox API is\n"
		"ready, runs CMD in it (output streamed, stdin passed through, Ctrl-C\n"
		"forwarded), powers the sandbox off and exits with CMD's exit status.\n\n"
		"  --kernel PATH        vmlinux (ELF) or bzImage; default: the kernel `make` built\n"
		"  --initrd PATH        initramfs; default with the default kernel: build/initramfs.cpio\n"
		"  --cmdline STR        kernel command line (default: \"" DEFAULT_CMDLINE "\");\n"
		"                       the VMM appends what the host and devices need\n"
		"  --cpus N             vCPUs (default 1)\n"
		"  --mem SIZE           guest RAM in MiB, or with a G/M suffix (default %u)\n"
		"  --console MODE       stdio (default), file:PATH or none\n"
		"  --disk path=FILE[,ro][,root][,id=ID]\n"
		"                       a virtio-blk disk (raw image), repeatable: /dev/vda,\n"
		"                       /dev/vdb, ... ro: read-only; root (first disk only):\n"
		"                       boot from it (root=/dev/vda); id: GET_ID serial\n"
		"  --vsock cid=N,uds=PATH\n"
		"                       virtio-vsock: guest CID N (3 or more); host clients\n"
		"                       connect to the Unix socket PATH and write\n"
		"                       \"CONNECT <port>\\n\"; guest connections to host port P\n"
		"                       go to the Unix socket PATH_P\n"
		"  --cpu-template T     host (all KVM offers) or safe (hides what a\n"
		"                       ring-0-emulating KVM cannot run); default: safe on\n"
		"                       such hosts, host elsewhere\n"
		"  --dump-cpuid PATH    write vCPU 0's CPUID table to PATH (debugging)\n"
		"  -t, --tty            with CMD: run it in a pseudo-terminal\n"
		"      --token TOKEN    the API access token (with CMD: a random one by default)\n"
		"      --ready-timeout S  with CMD: seconds to wait for the API (default 300)\n"
		"  -q, --quiet          only errors on stderr\n"
		"  -v, --verbose        debug logging\n\n"
		"On an interactive console, Ctrl-A x stops the VM. Exit statuses: 0 guest\n"
		"powered off, 3 guest rebooted, 4 triple fault, 5 KVM error, 6 guest crash,\n"
		"7 console escape, 1 VMM error, 2 usage error, 128+N signal N\n"
		"(docs/exit-status.md).\n",
		VM_DEFAULT_MEM_MIB);
}

enum { OPT_KERNEL = 256, OPT_INITRD, OPT_CMDLINE, OPT_CPUS, OPT_MEM, OPT_CONSOLE,
       OPT_TEMPLATE, OPT_DUMP_CPUID, OPT_DISK, OPT_VSOCK, OPT_TOKEN, OPT_READY };

static const struct option run_opts[] = {
	{ "kernel", required_argument, NULL, OPT_KERNEL },
	{ "initrd", required_argument, NULL, OPT_INITRD },
	{ "cmdline", required_argument, NULL, OPT_CMDLINE },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "mem", required_argument, NULL, OPT_MEM },
	{ "console", required_argument, NULL, OPT_CONSOLE },
	{ "cpu-template", required_argument, NULL, OPT_TEMPLATE },
	{ "dump-cpuid", required_argument, NULL, OPT_DUMP_CPUID },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "vsock", required_argument, NULL, OPT_VSOCK },
	{ "tty", no_argument, NULL, 't' },
	{ "token", required_argument, NULL, OPT_TOKEN },
	{ "ready-timeout", required_argument, NULL, OPT_READY },
	{ "quiet", no_argument, NULL, 'q' },
	{ "verbose", no_argument, NULL, 'v' },
	{ NULL, 0, NULL, 0 },
};

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "vmm run: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see 'vmm run --help')\n");
	return CLI_EXIT_USAGE;
}

static int file_exists(const char *p)
{
	return access(p, R_OK) == 0;
}

/* `vmm run -- CMD`: the sandbox needs the API (vsock, with a private socket
 * and a fresh token unless given), and the terminal belongs to CMD, so the
 * console goes nowhere unless --console says otherwise. */
static int setup_command(struct vm_config *cfg, const char **console, int console_explicit,
			 const char *token, char *tmpdir, size_t tmplen, char *cmdline, size_t cmdlen,
			 char *tok, size_t toklen)
{
	uint8_t rnd[16];
	int n;

	if (!cfg->has_vsock) {
		snprintf(tmpdir, tmplen, "/tmp/vmm-run-XXXXXX");
		if (!mkdtemp(tmpdir)) {
			log_err("cannot create a directory for the sandbox's socket: %s", strerror(errno));
			tmpdir[0] = '\0';
			return -1;
		}
		cfg->has_vsock = 1;
		cfg->vsock.cid = 3;
		snprintf(cfg->vsock.uds, sizeof(cfg->vsock.uds), "%s/vsock.sock", tmpdir);
	}
	if (token) {
		snprintf(tok, toklen, "%s", token);
	} else {
		unsigned i;

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
			log_err("getrandom: %s", strerror(errno));
			return -1;
		}
		for (i = 0; i < sizeof(rnd); i++)
			snprintf(tok + 2 * i, toklen - 2 * i, "%02x", rnd[i]);
	}
	n = snprintf(cmdline, cmdlen, "%s vmm.shell=0 vmm.token=%s", cfg->cmdline, tok);
	if (n < 0 || (size_t)n >= cmdlen) {
		log_err("kernel command line too long");
		return -1;
	}
	cfg->cmdline = cmdline;
	if (!console_explicit)
		*console = "none";
	return 0;
}

/* Runs the VM here and the API client in a child process: the child waits
 * for the API, runs the command, then asks the guest to power off. */
static int run_command(struct vm *vm, const struct sandbox_addr *a, const struct exec_opts *cmd,
		       unsigned long ready_s)
{
	enum vm_exit_reason reason;
	int st = 0, ready[2];
	pid_t child;

	/* The guest's init writes the boot marker once its API listens: the
	 * VMM passes that on through a pipe, so the child does not poll a
	 * port the guest keeps refusing while it boots. */
	if (pipe2(ready, O_CLOEXEC) < 0) {
		log_err("pipe: %s", strerror(errno));
		return CLI_EXIT_ERROR;
	}
	signal(SIGINT, SIG_IGN); /* Ctrl-C is the command's, forwarded by the child */
	child = fork();
	if (child < 0) {
		log_err("fork: %s", strerror(errno));
		return CLI_EXIT_ERROR;
	}
	if (child == 0) {
		struct pollfd p = { .fd = ready[0], .events = POLLIN };
		int r;

		signal(SIGINT, SIG_DFL);
		close(ready[1]);
		if (poll(&p, 1, (int)(ready_s * 1000)) != 1) {
			log_err("the sandbox did not get ready within %lu s", ready_s);
			kill(getppid(), SIGTERM);
			_exit(CLI_EXIT_ERROR);
		}
		if (api_wait_ready(a, 30000)) {
			log_err("the sandbox API did not answer within %lu s", ready_s);
			kill(getppid(), SIGTERM);
			_exit(CLI_EXIT_ERROR);
		}
		r = api_exec(a, cmd);
		if (api_shutdown(a))
			kill(getppid(), SIGTERM);
		_exit(r < 0 ? CLI_EXIT_ERROR : r);
	}
	close(ready[0]);
	vm->marker_fd = ready[1];
	vm->cfg.ignore_sigint = 1;
	reason = vm_run(vm);
	close(ready[1]);
	vm->marker_fd = -1;
	if (waitpid(child, &st, WNOHANG) == 0) {
		kill(child, SIGTERM);
		waitpid(child, &st, 0);
	}
	if (reason == VM_EXIT_POWEROFF && WIFEXITED(st))
		return WEXITSTATUS(st);
	if (reason == VM_EXIT_SIGNAL && WIFEXITED(st) && WEXITSTATUS(st) == CLI_EXIT_ERROR)
		return CLI_EXIT_ERROR; /* the child said why */
	log_err("the sandbox stopped before the command finished: %s", vm->exit_msg);
	return vm_exit_status(reason, vm->exit_signo);
}

int run_main(int argc, char **argv);
int run_main(int argc, char **argv)
{
	char kernel_buf[PATH_MAX] = "", initrd_buf[PATH_MAX] = "";
	struct vm_config cfg;
	struct termios saved;
	int raw = 0, console_file = -1, opt, status = 0;
	const char *console = "stdio", *dump_cpuid = NULL;
	unsigned long long mib = VM_DEFAULT_MEM_MIB;
	enum vm_exit_reason reason;
	struct vm *vm;
	char dir[PATH_MAX];
	struct exec_opts cmd = { .stdin_pass = 1 };
	const char *token = NULL;
	unsigned long ready_s = 300;
	int console_explicit = 0, level_set = 0;
	char tmpdir[64] = "", cmdline_buf[4096], token_buf[80] = "";

	memset(&cfg, 0, sizeof(cfg));
	cfg.t0_ns = log_now_ns();
	cfg.cpus = 1;
	cfg.console_in = -1;
	cfg.console_out = -1;
	cfg.host_emulates_ring0 = host_emulates_ring0();
	cfg.kvm_path = getenv("VMM_KVM_DEVICE"); /* default /dev/kvm; tests point it elsewhere */

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+qvt", run_opts, NULL)) != -1) {
		char *end;
		unsigned long v;

		switch (opt) {
		case OPT_KERNEL:
			cfg.kernel = optarg;
			break;
		case OPT_INITRD:
			cfg.initrd = optarg;
			break;
		case OPT_CMDLINE:
			cfg.cmdline = optarg;
			break;
		case OPT_CPUS:
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || v == 0 || v > VM_MAX_VCPUS) {
				status = bad_usage("--cpus '%s': a number from 1 to 64", optarg);
				goto out_disks;
			}
			cfg.cpus = (unsigned)v;
			break;
		case OPT_MEM:
			if (cli_parse_mib(optarg, &mib) || mib < VM_MIN_MEM_MIB || mib > (1ull << 30)) {
				status = bad_usage("--mem '%s': a size in MiB (at least 32), e.g. 512 or 2G", optarg);
				goto out_disks;
			}
			break;
		case OPT_CONSOLE:
			console_explicit = 1;
			if (strcmp(optarg, "stdio") && strcmp(optarg, "none") &&
			    (strncmp(optarg, "file:", 5) || !optarg[5])) {
				status = bad_usage("--console '%s': stdio, none or file:PATH", optarg);
				goto out_disks;
			}
			console = optarg;
			break;
		case OPT_TEMPLATE:
			if (cpu_template_parse(optarg, &cfg.tmpl)) {
				status = bad_usage("--cpu-template '%s': host or safe", optarg);
				goto out_disks;
			}
			cfg.tmpl_explicit = 1;
			break;
		case OPT_DUMP_CPUID:
			dump_cpuid = optarg;
			break;
		case OPT_DISK: {
			const char *why = "";

			if (cfg.nr_disks == VM_MAX_DISKS) {
				status = bad_usage("--disk: at most %s disks", "16");
				goto out_disks;
			}
			if (blk_options_parse(optarg, &cfg.disks[cfg.nr_disks], &why)) {
				fprintf(stderr, "vmm run: --disk '%s': %s\n", optarg, why);
				status = CLI_EXIT_USAGE;
				goto out_disks;
			}
			cfg.nr_disks++;
			break;
		}
		case OPT_VSOCK: {
			const char *why = "";

			if (cfg.has_vsock || vsock_options_parse(optarg, &cfg.vsock, &why)) {
				fprintf(stderr, "vmm run: --vsock '%s': %s\n", optarg,
					cfg.has_vsock ? "only one vsock device" : why);
				status = CLI_EXIT_USAGE;
				goto out_disks;
			}
			cfg.has_vsock = 1;
			break;
		}
		case 't':
			cmd.tty = 1;
			break;
		case OPT_TOKEN:
			token = optarg;
			break;
		case OPT_READY:
			ready_s = strtoul(optarg, NULL, 10);
			break;
		case 'q':
			log_set_level(LOG_ERROR);
			level_set = 1;
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			level_set = 1;
			break;
		default:
			{
				status = bad_usage("%s", "unknown option");
				goto out_disks;
			}
		}
	}
	if (optind < argc) {
		cmd.argv = (const char *const *)&argv[optind]; /* after "--": the command */
		/* The terminal carries CMD's output: only warnings from us. */
		if (!level_set && log_get_level() > LOG_WARN)
			log_set_level(LOG_WARN);
	}
	cfg.mem_bytes = mib << 20;

	if (!cfg.kernel) {
		if (cli_exe_dir(dir, sizeof(dir) - 32) == 0) {
			snprintf(kernel_buf, sizeof(kernel_buf), "%.4000s/kernel/vmlinux", dir);
			snprintf(initrd_buf, sizeof(initrd_buf), "%.4000s/initramfs.cpio", dir);
		}
		if (!kernel_buf[0] || !file_exists(kernel_buf)) {
			log_err("no --kernel given and no kernel built next to vmm (%s): run 'make' first",
				kernel_buf);
			status = CLI_EXIT_ERROR;
			goto out_disks;
		}
		cfg.kernel = kernel_buf;
		if (!cfg.initrd && !(cfg.nr_disks && cfg.disks[0].root) && file_exists(initrd_buf))
			cfg.initrd = initrd_buf;
	}
	if (!cfg.cmdline)
		cfg.cmdline = DEFAULT_CMDLINE;
	if (cmd.argv && setup_command(&cfg, &console, console_explicit, token, tmpdir, sizeof(tmpdir),
				     cmdline_buf, sizeof(cmdline_buf), token_buf, sizeof(token_buf))) {
		status = CLI_EXIT_ERROR;
		goto out_disks;
	}
	if (!cfg.tmpl_explicit && cfg.host_emulates_ring0) {
		cfg.tmpl = CPU_TEMPLATE_SAFE;
		log_info("this host's KVM emulates guest ring 0 (kvm_pvm): using CPU template 'safe'");
	}

	if (!strcmp(console, "stdio")) {
		cfg.console_out = STDOUT_FILENO;
		cfg.console_in = STDIN_FILENO;
		if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
			struct termios t = saved;

			cfmakeraw(&t);
			t.c_oflag |= OPOST | ONLCR; /* keep host-side newlines sane */
			if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
				raw = 1;
			cfg.console_escape = 1;
		}
	} else if (!strncmp(console, "file:", 5)) {
		console_file = open(console + 5, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
		if (console_file < 0) {
			log_err("--console %s: %s", console, strerror(errno));
			status = CLI_EXIT_ERROR;
			goto out_disks;
		}
		cfg.console_out = console_file;
	}

	vm = calloc(1, sizeof(*vm));
	if (!vm) {
		status = CLI_EXIT_ERROR;
		goto out_console;
	}
	if (vm_create(vm, &cfg)) {
		status = CLI_EXIT_ERROR;
		goto out_free;
	}
	if (dump_cpuid && vm_dump_cpuid(vm, 0, dump_cpuid)) {
		status = CLI_EXIT_ERROR;
		goto out_destroy;
	}
	log_debug("kernel command line: %s", vm->cmdline);
	if (cmd.argv) {
		struct sandbox_addr a = { .uds = cfg.vsock.uds, .port = API_VSOCK_PORT, .token = token_buf };

		status = run_command(vm, &a, &cmd, ready_s);
		goto out_destroy;
	}
	reason = vm_run(vm);
	status = vm_exit_status(reason, vm->exit_signo);
	if (raw) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
		raw = 0;
	}
	if (reason == VM_EXIT_REBOOT || reason == VM_EXIT_POWEROFF || reason == VM_EXIT_CONSOLE ||
	    reason == VM_EXIT_SIGNAL)
		log_info("%s (exit status %d)", vm->exit_msg, status);
	else
		log_err("%s (exit status %d)", vm->exit_msg, status);
out_destroy:
	vm_destroy(vm);
out_free:
	free(vm);
out_console:
	if (raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	if (console_file >= 0)
		close(console_file);
out_disks:
	while (cfg.nr_disks > 0)
		blk_options_free(&cfg.disks[--cfg.nr_disks]);
	if (tmpdir[0]) {
		unlink(cfg.vsock.uds);
		rmdir(tmpdir);
	}
	return status;
}

const struct cli_verb cli_verb_run = {
	.name = "run",
	.summary = "boot a kernel in a new VM on this terminal",
	.run = run_main,
	.usage = run_usage,
};
