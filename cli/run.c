/* vmm run: boot a kernel in a new VM and stay attached to its console. */
#define _GNU_SOURCE
#include "cli.h"
#include "../vmm/log.h"
#include "../vmm/vm.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=-1"

static void run_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm run [options]\n\n"
		"Boots a Linux kernel in a new VM, attached to its serial console.\n\n"
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
		"  -q, --quiet          only errors on stderr\n"
		"  -v, --verbose        debug logging\n\n"
		"On an interactive console, Ctrl-A x stops the VM. Exit statuses: 0 guest\n"
		"powered off, 3 guest rebooted, 4 triple fault, 5 KVM error, 6 guest crash,\n"
		"7 console escape, 1 VMM error, 2 usage error, 128+N signal N\n"
		"(docs/exit-status.md).\n",
		VM_DEFAULT_MEM_MIB);
}

enum { OPT_KERNEL = 256, OPT_INITRD, OPT_CMDLINE, OPT_CPUS, OPT_MEM, OPT_CONSOLE,
       OPT_TEMPLATE, OPT_DUMP_CPUID, OPT_DISK, OPT_VSOCK };

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

	memset(&cfg, 0, sizeof(cfg));
	cfg.t0_ns = log_now_ns();
	cfg.cpus = 1;
	cfg.console_in = -1;
	cfg.console_out = -1;
	cfg.host_emulates_ring0 = host_emulates_ring0();
	cfg.kvm_path = getenv("VMM_KVM_DEVICE"); /* default /dev/kvm; tests point it elsewhere */

	optind = 1;
	while ((opt = getopt_long(argc, argv, "qv", run_opts, NULL)) != -1) {
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
		case 'q':
			log_set_level(LOG_ERROR);
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			break;
		default:
			{
				status = bad_usage("%s", "unknown option");
				goto out_disks;
			}
		}
	}
	if (optind < argc) {
		status = bad_usage("unexpected argument '%s'", argv[optind]);
		goto out_disks;
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
	return status;
}

const struct cli_verb cli_verb_run = {
	.name = "run",
	.summary = "boot a kernel in a new VM on this terminal",
	.run = run_main,
	.usage = run_usage,
};
