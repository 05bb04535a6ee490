/* The options of vmm run, restore, serve and create (docs/cli.md), parsed
 * into one checked struct before anything starts: the VM's shape into
 * struct vm_config, the rest (console, -d, --ttl, --publish, --jail, the
 * per-clone overrides of a restore, Firecracker's command line for vmm
 * serve) into struct run_opts. Every usage mistake is one line naming the
 * option, and exit status 2 (CLI_EXIT_USAGE). Pure but for what an option
 * names on the host (--fs checks its directory, --mem the host's RAM) and
 * the log level (-q, -v, and -- CMD's quieter default). */
#ifndef CLI_RUN_OPTS_H
#define CLI_RUN_OPTS_H

#include <stdint.h>

#include "cli/sandbox/sandbox.h"
#include "cli/launch/jail.h"
#include "cli/images/images.h"
#include "vmm/vm.h"

/* loglevel=5: the console shows warnings, errors and Oops reports (the
 * crash scan needs those) but not the ~10 KB of informational boot lines;
 * on the 8250 each byte is a VM exit, and printing them was a third of a
 * cold boot (docs/perf.md, section 10). */
#define DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=-1 loglevel=5"
/* run -d -- CMD: the tag of CMD's detached process (vmm attach NAME main) */
#define DETACHED_CMD_TAG "main"

struct publish;

/* Firecracker's command line (vmm serve). */
struct run_fc_opts {
	int no_api, show_level, show_origin;
	const char *level, *log_path, *metrics_path, *metadata;
	unsigned long max_payload, mmds_limit;
};

struct run_opts {
	/* The verb's; in: */
	int restore;                    /* vmm restore: per-clone options only */
	int api;                        /* vmm serve: the VM comes from the API */
	struct publish *pub;            /* PUBLISH_MAX of them (the caller's, on the heap) */

	/* Out: */
	char err[1024];                 /* why run_opts_parse/_check refused: one line for the verb
					   ("vmm: " before it) */
	const char *console;            /* stdio, none, file:PATH */
	int console_explicit;           /* --console given */
	int level_set;                  /* -q, -v or --level */
	int quiet;                      /* -q */
	int vsock_given;
	int no_balloon;          /* --balloon off: not even the default one */
	const char *dump_cpuid, *name, *token;
	unsigned long long mib;         /* --mem */
	unsigned long ready_s;          /* --ready-timeout */
	struct exec_opts cmd;           /* -- CMD (argv NULL: none), --image-env/cwd/user */
	struct exec_opts dcmd;          /* run -d -- CMD: CMD as the detached process */
	const char *image_env[OCI_MAX_ENV + 1];
	unsigned nr_image_env;
	/* restore: the snapshot's disks, interfaces and drives to replace */
	struct blk_options over[VM_MAX_DISKS];
	unsigned nr_over;
	struct net_options net_over[VM_MAX_NETS];
	int net_mac_given[VM_MAX_NETS];
	unsigned nr_net_over;
	struct fs_options over_fs[VM_MAX_FS];
	unsigned nr_over_fs;
	const char *snapshot_dir;       /* restore: DIR */
	int detach, adopt, in_place, no_seccomp;
	struct jail jail;
	const char *image_root, *image_ref;
	unsigned long long disk_mib;    /* --disk-size (0: the default, images.h) */
	long long ttl_s, idle_timeout_s, idle_ttl_s;
	const char *idle_timeout_arg, *idle_ttl_arg; /* as given: a resume passes them on */
	unsigned nr_pub;
	const char *egress_policy;
	const char *api_sock, *config_file; /* vmm serve */
	struct run_fc_opts fc;
	int argi;                       /* argv's index after the options (and DIR) */
	/* --drive NAME[:GUESTDIR][:ro]: resolved after the options (the
	 * allow list needs --name) into cfg->fs; drives_text for the record */
	const char *drive_args[VM_MAX_FS];
	unsigned nr_drive_args;
	char drives_text[1024];
	/* --label KEY=VALUE (cli/sandbox/sandbox.h): "KEY=VALUE,..." */
	char labels_text[SANDBOX_LABELS_TEXT];
};

/* Defaults into o, which the caller zero-filled (restore, api: the verb's;
 * pub: PUBLISH_MAX entries). Only what is not zero is written: o lives in
 * the launch state's fresh pages, and a page written stays resident in
 * every idle clone (docs/perf.md, "Density"). */
void run_opts_init(struct run_opts *o, int restore, int api, struct publish *pub);
/* Parses argv's options into cfg (the caller's defaults set) and o, then
 * restore's DIR (o->snapshot_dir, a "--" after it skipped). 0, or the exit
 * status (2: usage, one line said why). What o and cfg hold is the
 * caller's to free either way (blk_options_free, fs_options_free). */
int run_opts_parse(struct run_opts *o, struct vm_config *cfg, int argc, char **argv);
/* Then (after the snapshot is opened): the command after "--" (-d: the
 * detached process), and the checks across options. 0 or 2. */
int run_opts_check(struct run_opts *o, int argc, char **argv);

/* "8M", "64k", "1G", "4096": bytes (binary multiples). 0 or -EINVAL. */
int run_parse_size(const char *s, uint64_t *bytes);
/* An API token given on the command line: 1 to 127 of [A-Za-z0-9_.-]. */
int run_token_ok(const char *t);
/* fmt (with arg) + the help pointer into o->err; returns CLI_EXIT_USAGE. */
int run_bad_usage(struct run_opts *o, const char *fmt, const char *arg);

#endif
