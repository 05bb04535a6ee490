/* vmm run: boot a kernel in a new VM and stay attached to its console.
 * The verb: its help, vmm run --image's arguments (image.h), and the
 * sandbox start it shares with restore, serve and create (launch.h). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/images/images.h"
#include "cli/launch/launch.h"
#include "vmm/vm.h"

#include <stdio.h>
#include <stdlib.h>

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
		"  --console-log-size SIZE  a file console (and -d's console.log) holds at\n"
		"                       most SIZE bytes (k/M/G suffixes; default 8M), then\n"
		"                       becomes PATH.1 and starts again\n"
		"  --disk path=FILE[,ro][,root][,id=ID][,lock=off]\n"
		"                       a virtio-blk disk (raw image), repeatable: /dev/vda,\n"
		"                       /dev/vdb, ... ro: read-only; root (first disk only):\n"
		"                       boot from it (root=/dev/vda); id: GET_ID serial;\n"
		"                       locked against other VMMs (shared if ro) unless\n"
		"                       lock=off (docs/cli.md)\n"
		"  --fs tag=NAME,path=DIR[,ro][,cache=none|auto]\n"
		"                       share the host directory DIR (virtio-fs), repeatable;\n"
		"                       the guest finds it mounted at /mnt/NAME. ro: read-only;\n"
		"                       cache=none (default): every sandbox sharing DIR sees\n"
		"                       writes at once; auto: 1 s metadata cache, page cache\n"
		"                       until reopen (docs/virtio-fs.md)\n"
		"  --drive NAME[:/GUEST/DIR][:ro]\n"
		"                       mount drive NAME (vmm drive), at /drives/NAME unless\n"
		"                       DIR; refused before boot unless its allow list names\n"
		"                       this sandbox (--name) or a --label, repeatable\n"
		"  --label KEY=VALUE    a label kept in the sandbox's record (vmm ls --filter,\n"
		"                       drive rules label:KEY=VALUE), repeatable, at most 16\n"
		"  --vsock cid=N,uds=PATH\n"
		"                       virtio-vsock: guest CID N (3 or more); host clients\n"
		"                       connect to the Unix socket PATH and write\n"
		"                       \"CONNECT <port>\\n\"; guest connections to host port P\n"
		"                       go to the Unix socket PATH_P (default: cid=3 and\n"
		"                       vsock.sock in the sandbox's folder)\n"
		"  --entropy [bps=RATE][,ops=RATE]\n"
		"                       a virtio-rng device (the guest's /dev/hwrng), its\n"
		"                       bytes from the host's getrandom, optionally rate\n"
		"                       limited (\"on\": no limit)\n"
		"  --balloon MIB[,deflate_on_oom][,stats=SECONDS][,reporting] | off\n"
		"                       a virtio-balloon device asking the guest for MIB\n"
		"                       (docs/devices.md). Without it, every sandbox has one\n"
		"                       asking for nothing, with deflate_on_oom and reporting\n"
		"                       (memory the guest frees goes back to the host); off:\n"
		"                       none\n"
		"  --net tap=NAME[,mac=MAC][,ip=ADDR/PREFIX][,gw=ADDR][,dns=ADDR][,host_ip=ADDR/PREFIX]\n"
		"        [,offload=off][,rx_bps=R][,tx_bps=R][,rx_pps=R][,tx_pps=R][,mmds[=v2]]\n"
		"                       a virtio-net interface on TAP NAME (created if it does\n"
		"                       not exist, removed at exit), repeatable; guest-init\n"
		"                       gives it ip/gw/dns; host_ip: the host side's address;\n"
		"                       *_bps/*_pps: rate limits (docs/networking.md); mmds:\n"
		"                       the guest reaches the metadata service at\n"
		"                       169.254.169.254 through it (docs/mmds.md)\n"
		"  --metadata FILE      the metadata service's JSON (with a --net ...,mmds)\n"
		"  --mmds-size-limit N  its largest size in bytes (51200)\n"
		"  --image NAME[:VERSION]\n"
		"                       boot a copy-on-write copy of an image (vmm image), with\n"
		"                       its defaults; from its warm snapshot if it has one and\n"
		"                       no option here needs a boot (docs/images.md)\n"
		"  --disk-size SIZE     with --image: its root disk's size (default: the image's\n"
		"                       --disk-size, else 4G, or the image's size if larger);\n"
		"                       sparse, the file system grown to fill it before boot\n"
		"  --name NAME          the sandbox's name (default: a generated sb-XXXXXXXX);\n"
		"                       vmm exec/cp/ls/logs/stop/snapshot NAME reach it\n"
		"  -d, --detach         run in the background: returns once the sandbox's API\n"
		"                       answers, prints its name; console in `vmm logs NAME`.\n"
		"                       With -- CMD: CMD runs as the sandbox's detached process\n"
		"                       tagged main (vmm attach NAME main, vmm logs --process\n"
		"                       main NAME); the sandbox stays up when it ends\n"
		"  --ttl DURATION       stop and remove the sandbox after DURATION (90s, 10m,\n"
		"                       2h, 1d); the VMM enforces it, `vmm ls` shows what is left\n"
		"  --idle-timeout D     with -d: go on standby after D without activity (no API\n"
		"                       call, exec, cp, published-port or guest vsock\n"
		"                       connection); the next request wakes it (vmm suspend)\n"
		"  --idle-ttl D         remove it once it has been on standby for D\n"
		"  --publish [ADDR:]HOST_PORT:GUEST_PORT\n"
		"                       forward a host TCP port (on 127.0.0.1 unless ADDR) to a\n"
		"                       TCP port in the sandbox, over vsock; repeatable\n"
		"  --egress-policy FILE the sandbox reaches the HTTP APIs FILE allows through a\n"
		"                       proxy on the host that adds their credentials; commands\n"
		"                       get HTTP_PROXY=http://127.0.0.1:3128 (docs/egress.md)\n"
		"  --cpu-template T     host (all KVM offers) or safe (hides what a\n"
		"                       ring-0-emulating KVM cannot run); default: safe on\n"
		"                       such hosts, host elsewhere\n"
		"  --dump-cpuid PATH    write vCPU 0's CPUID table to PATH (debugging)\n"
		"  -t, --tty            with CMD: run it in a pseudo-terminal\n"
		"      --token TOKEN    the API access token (default: a random one)\n"
		"      --ready-timeout S  with CMD: seconds to wait for the API (default 300)\n"
		"  --jail               run the VMM jailed: own PID/mount/network/IPC/UTS\n"
		"                       namespaces, a root holding only its kernel, disks and\n"
		"                       folder, a uid of its own, no capabilities\n"
		"                       (docs/security.md)\n"
		"  --jail-uid N, --jail-gid N   the jailed VMM's ids (default: the first free\n"
		"                       one from 900000); --jail-uid 0: root in the jail with\n"
		"                       only a file server's capabilities, so shares keep\n"
		"                       their owners (as vmm oci runs its VMs)\n"
		"  --jail-netns NAME    the jailed VMM joins this network namespace (`ip netns\n"
		"                       add NAME`) and its TAPs are there; default: a new,\n"
		"                       empty one, the TAPs staying on the host\n"
		"  --limit-cpu CPUS, --limit-mem SIZE, --limit-pids N\n"
		"                       the sandbox's cgroup: CPU quota (e.g. 1.5), memory of\n"
		"                       the whole VMM process, tasks\n"
		"  --track-dirty        track the pages the guest writes, for diff snapshots\n"
		"                       ('vmm snapshot --diff', docs/snapshot.md)\n"
		"  --no-seccomp         run without the seccomp allow-lists (debugging only:\n"
		"                       a warning says so; docs/security.md)\n"
		"  -q, --quiet          only errors on stderr\n"
		"  -v, --verbose        debug logging\n\n"
		"On an interactive console, Ctrl-A x stops the VM. Exit statuses: 0 guest\n"
		"powered off, 3 guest rebooted, 4 triple fault, 5 KVM error, 6 guest crash,\n"
		"7 console escape, 1 VMM error, 2 usage error, 128+N signal N\n"
		"(docs/exit-status.md).\n",
		VM_DEFAULT_MEM_MIB);
}



/* vmm run --image: the arguments rewritten by image_run_args(). */
static int with_image(int argc, char **argv, int check_only)
{
	char **v = NULL, note[512], err[1024];
	int n = 0, restore = 0, r;

	r = image_run_args(argc, argv, &v, &n, &restore, note, sizeof(note), err, sizeof(err));
	if (note[0])
		fprintf(stderr, "note: %s\n", note);
	if (r) {
		if (err[0])
			fprintf(stderr, "vmm run: %s\n", err);
		return CLI_EXIT_ERROR;
	}
	{
		struct launch_out out = { .result = stdout, .diag = stderr };

		if (!v)
			r = launch_sandbox(argc, argv, 0, check_only, 0, &out);
		else
			r = launch_sandbox(n, v, restore, check_only, 0, &out);
		free(v); /* its strings live as long as the process needs them */
		if (out.err[0])
			fprintf(stderr, "vmm: %s\n", out.err);
	}
	return r;
}

int run_main(int argc, char **argv);
int run_main(int argc, char **argv)
{
	return with_image(argc, argv, 0);
}

int run_check_args(int argc, char **argv)
{
	return with_image(argc, argv, 1);
}

const struct cli_verb cli_verb_run = {
	.name = "run",
	.summary = "boot a kernel in a new VM on this terminal",
	.run = run_main,
	.usage = run_usage,
};
