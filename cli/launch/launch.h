/* Starting a sandbox (docs/cli.md, docs/ARCHITECTURE.md): the sequence
 * vmm run, restore, serve, create (its check) and start (through run)
 * share. Options (run_opts.h), the sandbox's folder, -d (run_detach.h),
 * the VM's configuration (a boot, a clone of a snapshot: run_restore.h, or
 * vmm serve's API: run_fc.h), the console, disk locks, the cgroup and
 * jail (run_jail.h), the VM, the sandbox's record and control socket, the
 * egress proxy and published ports, standby's keeper, the helper
 * (run_helper.h), vm_run, and the teardown in reverse. */
#ifndef CLI_LAUNCH_H
#define CLI_LAUNCH_H

#include <stdio.h>

/* What a launch hands the verb (it prints nothing itself). */
struct launch_out {
	FILE *result;  /* run -d: the sandbox's name once it is ready (the verb's stdout) */
	FILE *diag;    /* run -d that failed: the end of the VMM's log and console (its stderr) */
	char err[1024]; /* why it was refused (the options, the snapshot's drives, an
			   interrupted -d): one line for "vmm: " before it, or "" (the
			   other failures are logged where they happen) */
};

/* argv as vmm run's (restore: vmm restore's; api: vmm serve's). check_only:
 * vmm create, which only checks the options and the kernel. The exit
 * status (docs/exit-status.md). */
int launch_sandbox(int argc, char **argv, int restore, int check_only, int api, struct launch_out *out);

/* The rest of the subsystem's interface. */
#include "cli/launch/run_opts.h"

#endif
