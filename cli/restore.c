/* vmm restore: start a sandbox from a snapshot (docs/snapshot.md); the
 * sandbox start is vmm run's (launch.h), with restore's options. */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/launch/launch.h"

#include <stdio.h>

static void restore_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm restore DIR [options] [-- CMD [ARGS...]]\n\n"
		"Starts a sandbox from the snapshot in DIR (vmm snapshot): its memory is\n"
		"mapped copy-on-write (clones of one snapshot share it), its writable disks\n"
		"are copied for this sandbox (reflinks where the filesystem can), and the\n"
		"guest gets the current time and fresh entropy once its API answers.\n"
		"Start as many as you like from one snapshot; give each its own name.\n\n"
		"  --name NAME          the new sandbox's name (default: generated)\n"
		"  -d, --detach         in the background (see vmm run --help)\n"
		"  --ttl DURATION       stop and remove it after DURATION\n"
		"  --idle-timeout D     with -d: go on standby after D without activity (no API\n"
		"                       call, exec, cp, published-port or guest vsock\n"
		"                       connection); the next request wakes it (vmm suspend)\n"
		"  --idle-ttl D         remove it once it has been on standby for D\n"
		"  --publish [ADDR:]HOST_PORT:GUEST_PORT   as with vmm run\n"
		"  --egress-policy FILE as with vmm run (not kept in the snapshot: give it to\n"
		"                       every clone that needs it)\n"
		"  --vsock cid=N[,uds=PATH]\n"
		"                       another guest CID or socket for this clone\n"
		"                       (default: the snapshot's CID, vsock.sock in its folder)\n"
		"  --disk path=FILE[,id=ID][,lock=off]\n"
		"                       use FILE for the snapshot's disk ID (or, without id,\n"
		"                       the next disk in order) instead of a fresh copy; it\n"
		"                       must have the same size\n"
		"  --net tap=NAME[,host_ip=ADDR/PREFIX][,mac=MAC,ip=ADDR/PREFIX,gw=ADDR,dns=ADDR]...\n"
		"                       the TAP for the snapshot's next network interface\n"
		"                       (default: the snapshot's own TAP name); with mac/ip/\n"
		"                       gw/dns the clone takes new ones once it runs; mmds[=v2]:\n"
		"                       it serves the metadata service too (the snapshot's\n"
		"                       interfaces that served it do so again, store empty)\n"
		"  --metadata FILE      the metadata service's JSON (docs/mmds.md)\n"
		"  --fs tag=NAME,path=DIR\n"
		"                       share DIR as the snapshot's drive NAME instead of the\n"
		"                       directory it had (default: the same directory; a\n"
		"                       named drive (vmm drive) stays that drive, its allow\n"
		"                       list checked for --name, its size limit kept)\n"
		"  --console MODE       stdio (default), file:PATH or none\n"
		"  --console-log-size SIZE  a file console (and -d's console.log) holds at\n"
		"                       most SIZE bytes (k/M/G suffixes; default 8M), then\n"
		"                       becomes PATH.1 and starts again\n"
		"  -t, --tty            with CMD: run it in a pseudo-terminal\n"
		"      --token TOKEN    this clone's API access token (default: a random one;\n"
		"                       the snapshot's token does not open a clone)\n"
		"      --ready-timeout S  with CMD: seconds to wait for the API (default 300)\n"
		"  --jail, --jail-uid N, --jail-gid N, --jail-netns NAME, --limit-cpu CPUS,\n"
		"  --limit-mem SIZE, --limit-pids N   as with vmm run\n"
		"  --no-seccomp         without the seccomp allow-lists (debugging only)\n"
		"  -q, --quiet / -v, --verbose\n\n"
		"With CMD: runs it once the API answers, powers the sandbox off and exits\n"
		"with CMD's status. A snapshot that is missing, truncated, corrupted, of\n"
		"another format version or from another CPU is refused before any guest\n"
		"code runs (docs/snapshot.md).\n");
}

static int restore_main(int argc, char **argv)
{
	struct launch_out out = { .result = stdout, .diag = stderr };
	int r = launch_sandbox(argc, argv, 1, 0, 0, &out);

	if (out.err[0])
		fprintf(stderr, "vmm: %s\n", out.err);
	return r;
}

const struct cli_verb cli_verb_restore = {
	.name = "restore",
	.summary = "start a sandbox from a snapshot (many clones from one)",
	.run = restore_main,
	.usage = restore_usage,
};

