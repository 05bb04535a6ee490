/* The options of vmm run/restore/serve/create (run_opts.h). */
#define _GNU_SOURCE
#include "run_opts.h"
#include "cli.h"
#include "publish.h"
#include "../vmm/cputmpl.h"
#include "../vmm/log.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { OPT_KERNEL = 256, OPT_INITRD, OPT_CMDLINE, OPT_CPUS, OPT_MEM, OPT_CONSOLE,
       OPT_TEMPLATE, OPT_DUMP_CPUID, OPT_DISK, OPT_VSOCK, OPT_TOKEN, OPT_READY, OPT_NAME,
       OPT_TTL, OPT_PUBLISH, OPT_ADOPT, OPT_NET, OPT_IMAGE_ROOT, OPT_IMAGE_REF, OPT_FS, OPT_API_SOCK,
       OPT_CONFIG_FILE, OPT_EGRESS, OPT_NO_SECCOMP, OPT_JAIL, OPT_JAIL_UID, OPT_JAIL_GID, OPT_LIMIT_CPU,
       OPT_LIMIT_MEM, OPT_LIMIT_PIDS, OPT_JAIL_NETNS, OPT_CONSOLE_LOG_SIZE, OPT_IMAGE_ENV, OPT_IMAGE_CWD, OPT_IMAGE_USER,
       OPT_ENTROPY, OPT_BALLOON, OPT_TRACK_DIRTY, OPT_IDLE_TIMEOUT, OPT_IDLE_TTL, OPT_IN_PLACE,
       /* Firecracker's command line (vmm serve): */
       OPT_NO_API, OPT_BOOT_TIMER, OPT_LEVEL, OPT_LOG_PATH, OPT_SHOW_LEVEL, OPT_SHOW_ORIGIN, OPT_MODULE,
       OPT_METRICS_PATH, OPT_METADATA, OPT_MMDS_LIMIT, OPT_MAX_PAYLOAD, OPT_SECCOMP_FILTER, OPT_FC_IGNORED };

static const struct option run_longopts[] = {
	{ "kernel", required_argument, NULL, OPT_KERNEL },
	{ "initrd", required_argument, NULL, OPT_INITRD },
	{ "cmdline", required_argument, NULL, OPT_CMDLINE },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "mem", required_argument, NULL, OPT_MEM },
	{ "console", required_argument, NULL, OPT_CONSOLE },
	{ "console-log-size", required_argument, NULL, OPT_CONSOLE_LOG_SIZE },
	{ "no-api", no_argument, NULL, OPT_NO_API },
	{ "boot-timer", no_argument, NULL, OPT_BOOT_TIMER },
	{ "level", required_argument, NULL, OPT_LEVEL },
	{ "log-path", required_argument, NULL, OPT_LOG_PATH },
	{ "show-level", no_argument, NULL, OPT_SHOW_LEVEL },
	{ "show-log-origin", no_argument, NULL, OPT_SHOW_ORIGIN },
	{ "module", required_argument, NULL, OPT_MODULE },
	{ "metrics-path", required_argument, NULL, OPT_METRICS_PATH },
	{ "metadata", required_argument, NULL, OPT_METADATA },
	{ "mmds-size-limit", required_argument, NULL, OPT_MMDS_LIMIT },
	{ "http-api-max-payload-size", required_argument, NULL, OPT_MAX_PAYLOAD },
	{ "seccomp-filter", required_argument, NULL, OPT_SECCOMP_FILTER },
	/* The jailer passes these to Firecracker; vmm has no use for them. */
	{ "start-time-us", required_argument, NULL, OPT_FC_IGNORED },
	{ "start-time-cpu-us", required_argument, NULL, OPT_FC_IGNORED },
	{ "parent-cpu-time-us", required_argument, NULL, OPT_FC_IGNORED },
	{ "cpu-template", required_argument, NULL, OPT_TEMPLATE },
	{ "dump-cpuid", required_argument, NULL, OPT_DUMP_CPUID },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "vsock", required_argument, NULL, OPT_VSOCK },
	{ "entropy", required_argument, NULL, OPT_ENTROPY },
	{ "balloon", required_argument, NULL, OPT_BALLOON },
	{ "net", required_argument, NULL, OPT_NET },
	{ "fs", required_argument, NULL, OPT_FS },
	{ "tty", no_argument, NULL, 't' },
	{ "token", required_argument, NULL, OPT_TOKEN },
	{ "ready-timeout", required_argument, NULL, OPT_READY },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "detach", no_argument, NULL, 'd' },
	{ "ttl", required_argument, NULL, OPT_TTL },
	{ "publish", required_argument, NULL, OPT_PUBLISH },
	{ "egress-policy", required_argument, NULL, OPT_EGRESS },
	{ "adopt", no_argument, NULL, OPT_ADOPT }, /* vmm start: the folder vmm create made */
	{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
	{ "idle-ttl", required_argument, NULL, OPT_IDLE_TTL },
	{ "in-place", no_argument, NULL, OPT_IN_PLACE }, /* vmm resume: restore a standby sandbox in its folder */
	/* vmm run --image, rewritten by image_run_args(): */
	{ "image-root", required_argument, NULL, OPT_IMAGE_ROOT },
	{ "image-ref", required_argument, NULL, OPT_IMAGE_REF },
	{ "image-env", required_argument, NULL, OPT_IMAGE_ENV }, /* the image config's Env, WorkingDir */
	{ "image-cwd", required_argument, NULL, OPT_IMAGE_CWD },
	{ "image-user", required_argument, NULL, OPT_IMAGE_USER }, /* the image config's User */
	{ "api-sock", required_argument, NULL, OPT_API_SOCK },   /* vmm serve */
	{ "config-file", required_argument, NULL, OPT_CONFIG_FILE },
	{ "id", required_argument, NULL, OPT_NAME },
	{ "no-seccomp", no_argument, NULL, OPT_NO_SECCOMP },
	{ "track-dirty", no_argument, NULL, OPT_TRACK_DIRTY },
	{ "jail", no_argument, NULL, OPT_JAIL },
	{ "jail-uid", required_argument, NULL, OPT_JAIL_UID },
	{ "jail-gid", required_argument, NULL, OPT_JAIL_GID },
	{ "jail-netns", required_argument, NULL, OPT_JAIL_NETNS },
	{ "limit-cpu", required_argument, NULL, OPT_LIMIT_CPU },
	{ "limit-mem", required_argument, NULL, OPT_LIMIT_MEM },
	{ "limit-pids", required_argument, NULL, OPT_LIMIT_PIDS },
	{ "quiet", no_argument, NULL, 'q' },
	{ "verbose", no_argument, NULL, 'v' },
	{ NULL, 0, NULL, 0 },
};

int run_bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "vmm: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see 'vmm run --help' or 'vmm restore --help')\n");
	return CLI_EXIT_USAGE;
}

/* An API token given on the command line: 1 to 127 of [A-Za-z0-9_.-]. */
int run_token_ok(const char *t)
{
	size_t n = strlen(t), i;

	if (n == 0 || n > 127)
		return 0;
	for (i = 0; i < n; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
		      (t[i] >= '0' && t[i] <= '9') || t[i] == '_' || t[i] == '.' || t[i] == '-'))
			return 0;
	return 1;
}

/* "8M", "64k", "1G", "4096": bytes (binary multiples). 0 or -EINVAL. */
int run_parse_size(const char *s, uint64_t *bytes)
{
	unsigned long long v, mul = 1;
	char *end;

	errno = 0;
	if (!*s || *s == '-')
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	default: break;
	}
	if (*end == 'i' && (end[1] == 'B' || end[1] == 'b'))
		end += 2;
	else if (*end == 'B' && mul > 1)
		end++;
	if (*end || v > (1ull << 50) / mul)
		return -EINVAL;
	*bytes = v * mul;
	return 0;
}

/* An option's whole number from 1 to MAX (strtoul's syntax, nothing
 * after it): 0 with *out set, or -EINVAL. */
static int parse_count(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v == 0 || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The option getopt just took, not its separate argument. */
static const char *opt_text(char **argv, int ind)
{
	return argv[ind - 1][0] == '-' || ind < 2 ? argv[ind - 1] : argv[ind - 2];
}

void run_opts_init(struct run_opts *o, int restore, int api, struct publish *pub)
{
	memset(o, 0, sizeof(*o));
	o->restore = restore;
	o->api = api;
	o->pub = pub;
	o->console = "stdio";
	o->mib = VM_DEFAULT_MEM_MIB;
	o->ready_s = 300;
	o->cmd.stdin_pass = 1;
	o->jail.uid = JAIL_DEFAULT_ID;
	o->jail.gid = JAIL_DEFAULT_ID;
	o->image_ref = "";
}

int run_opts_parse(struct run_opts *o, struct vm_config *cfg, int argc, char **argv)
{
	int restore = o->restore, api = o->api, opt;

	/* A new scan (0: glibc reads the ordering, "+" or not, again; the
	 * same as 1 in a process that parses once, which vmm does). */
	optind = 0;
	/* run: options end at the first non-option (the command follows "--");
	 * restore: options may follow DIR too, so let getopt permute. */
	while ((opt = cli_getopt(argc, argv, restore ? "qvtd" : "+qvtd", run_longopts, restore ? "restore" : api ? "serve" : "run")) != -1) {
		unsigned long v;

		/* restore takes what may differ per clone, nothing that shapes the VM */
		if (restore && (opt == OPT_KERNEL || opt == OPT_INITRD || opt == OPT_CMDLINE ||
				opt == OPT_CPUS || opt == OPT_MEM || opt == OPT_TEMPLATE ||
				opt == OPT_DUMP_CPUID))
			return run_bad_usage("restore: %s comes from the snapshot", opt_text(argv, optind));
		/* serve: the VM's shape comes from the API or the config file */
		if (api && (opt == OPT_KERNEL || opt == OPT_INITRD || opt == OPT_CMDLINE ||
			    opt == OPT_CPUS || opt == OPT_MEM || opt == OPT_TEMPLATE || opt == OPT_DISK ||
			    opt == OPT_VSOCK || opt == OPT_ADOPT || opt == 'd' || opt == 't' ||
			    opt == OPT_READY || opt == OPT_NET || opt == OPT_FS || opt == OPT_IMAGE_ROOT ||
			    opt == OPT_IMAGE_REF))
			return run_bad_usage("serve: %s: configure the VM through the API or --config-file",
					   opt_text(argv, optind));
		if (!api && (opt == OPT_API_SOCK || opt == OPT_CONFIG_FILE ||
			     (opt >= OPT_NO_API && opt != OPT_METADATA && opt != OPT_MMDS_LIMIT)))
			return run_bad_usage("%s: only with vmm serve (or vmm --api-sock PATH)", opt_text(argv, optind));
		switch (opt) {
		case OPT_API_SOCK:
			o->api_sock = optarg;
			break;
		case OPT_CONFIG_FILE:
			o->config_file = optarg;
			break;
		case OPT_KERNEL:
			cfg->kernel = optarg;
			break;
		case OPT_INITRD:
			cfg->initrd = optarg;
			break;
		case OPT_CMDLINE:
			cfg->cmdline = optarg;
			break;
		case OPT_CPUS:
			if (parse_count(optarg, VM_MAX_VCPUS, &v))
				return run_bad_usage("--cpus '%s': a number from 1 to 64", optarg);
			cfg->cpus = (unsigned)v;
			break;
		case OPT_MEM: {
			unsigned long long total, avail;

			if (cli_parse_mib(optarg, &o->mib) || o->mib < VM_MIN_MEM_MIB)
				return run_bad_usage("--mem '%s': a size in MiB (at least 32), e.g. 512 or 2G", optarg);
			/* Guest RAM is mapped on demand: more than the host has
			 * cannot work; more than it has free may, until it fills. */
			if (cli_host_mem_mib(&total, &avail) == 0 && (o->mib > total || o->mib > (1ull << 30))) {
				fprintf(stderr, "vmm: --mem '%s': this host has %llu MiB of RAM: at most --mem %llu "
						"(see 'vmm run --help')\n", optarg, total, total < (1ull << 30) ? total : (1ull << 30));
				return CLI_EXIT_USAGE;
			}
			if (avail && o->mib > avail)
				log_warn("--mem %llu MiB is more than this host has free now (%llu MiB): the guest "
					 "may be killed for memory once it uses it", o->mib, avail);
			break;
		}
		case OPT_CONSOLE:
			o->console_explicit = 1;
			if (strcmp(optarg, "stdio") && strcmp(optarg, "none") &&
			    (strncmp(optarg, "file:", 5) || !optarg[5]))
				return run_bad_usage("--console '%s': stdio, none or file:PATH", optarg);
			o->console = optarg;
			break;
		case OPT_CONSOLE_LOG_SIZE:
			if (run_parse_size(optarg, &cfg->console_limit) || cfg->console_limit < 1024)
				return run_bad_usage("--console-log-size '%s': bytes (at least 1024), or with a k, M or G "
						   "suffix, e.g. 8M", optarg);
			break;
		case OPT_TEMPLATE:
			if (cpu_template_parse(optarg, &cfg->tmpl))
				return run_bad_usage("--cpu-template '%s': host or safe", optarg);
			cfg->tmpl_explicit = 1;
			break;
		case OPT_DUMP_CPUID:
			o->dump_cpuid = optarg;
			break;
		case OPT_DISK: {
			const char *why = "";
			struct blk_options *d = restore ? &o->over[o->nr_over] : &cfg->disks[cfg->nr_disks];

			if ((restore ? o->nr_over : cfg->nr_disks) == VM_MAX_DISKS)
				return run_bad_usage("--disk: at most %s disks", "16");
			if (blk_options_parse(optarg, d, &why)) {
				fprintf(stderr, "vmm: --disk '%s': %s\n", optarg, why);
				return CLI_EXIT_USAGE;
			}
			if (restore)
				o->nr_over++;
			else
				cfg->nr_disks++;
			break;
		}
		case OPT_NET: {
			const char *why = "";
			unsigned *nr = restore ? &o->nr_net_over : &cfg->nr_nets;
			struct net_options *n = restore ? &o->net_over[*nr] : &cfg->nets[*nr];

			if (*nr == VM_MAX_NETS)
				return run_bad_usage("--net: at most %s interfaces", "8");
			if (net_options_parse(optarg, n, &why)) {
				fprintf(stderr, "vmm: --net '%s': %s\n", optarg, why);
				return CLI_EXIT_USAGE;
			}
			if (restore)
				o->net_mac_given[*nr] = strstr(optarg, "mac=") != NULL;
			(*nr)++;
			break;
		}
		case OPT_FS: {
			const char *why = "";
			struct fs_options *f = restore ? &o->over_fs[o->nr_over_fs] : &cfg->fs[cfg->nr_fs];
			struct stat st;

			if ((restore ? o->nr_over_fs : cfg->nr_fs) == VM_MAX_FS)
				return run_bad_usage("--fs: at most %s shared drives", "8");
			if (fs_options_parse(optarg, f, &why)) {
				fprintf(stderr, "vmm: --fs '%s': %s\n", optarg, why);
				return CLI_EXIT_USAGE;
			}
			if (restore)
				o->nr_over_fs++;
			else
				cfg->nr_fs++;
			if (stat(f->path, &st) < 0 || !S_ISDIR(st.st_mode))
				return run_bad_usage("--fs: %s is not a directory", f->path);
			break;
		}
		case OPT_VSOCK: {
			const char *why = "";
			char tmp[160];

			/* restore: "cid=N" alone is fine, the socket has a default */
			snprintf(tmp, sizeof(tmp), "%s%s", optarg,
				 restore && !strstr(optarg, "uds=") ? ",uds=-" : "");
			if (o->vsock_given || vsock_options_parse(tmp, &cfg->vsock, &why)) {
				fprintf(stderr, "vmm: --vsock '%s': %s\n", optarg,
					o->vsock_given ? "only one vsock device" : why);
				return CLI_EXIT_USAGE;
			}
			if (!strcmp(cfg->vsock.uds, "-"))
				cfg->vsock.uds[0] = '\0';
			o->vsock_given = 1;
			break;
		}
		case OPT_ENTROPY:
		case OPT_BALLOON: {
			const char *why = "";

			if (opt == OPT_ENTROPY ? rng_options_parse(optarg, &cfg->entropy, &why)
					     : balloon_options_parse(optarg, &cfg->balloon, &why)) {
				fprintf(stderr, "vmm: --%s '%s': %s\n", opt == OPT_ENTROPY ? "entropy" : "balloon", optarg,
					why);
				return CLI_EXIT_USAGE;
			}
			if (opt == OPT_ENTROPY)
				cfg->has_entropy = 1;
			else
				cfg->has_balloon = 1;
			break;
		}
		case OPT_NAME:
			o->name = optarg;
			break;
		case OPT_ADOPT:
			o->adopt = 1;
			break;
		case OPT_IDLE_TIMEOUT:
		case OPT_IDLE_TTL:
			if (cli_parse_duration(optarg, opt == OPT_IDLE_TIMEOUT ? &o->idle_timeout_s : &o->idle_ttl_s))
				return run_bad_usage("%s: a duration such as 90s, 10m, 2h or 1d", opt_text(argv, optind));
			if (opt == OPT_IDLE_TIMEOUT)
				o->idle_timeout_arg = optarg;
			else
				o->idle_ttl_arg = optarg;
			break;
		case OPT_IN_PLACE:
			o->in_place = 1;
			break;
		case OPT_IMAGE_ROOT:
			if (restore)
				return run_bad_usage("%s", "restore: no --image-root");
			o->image_root = optarg;
			break;
		case OPT_IMAGE_REF:
			o->image_ref = optarg;
			break;
		case OPT_IMAGE_ENV:
			if (o->nr_image_env == sizeof(o->image_env) / sizeof(o->image_env[0]) - 1)
				return run_bad_usage("%s", "--image-env: too many");
			o->image_env[o->nr_image_env++] = optarg;
			o->cmd.env = o->image_env;
			break;
		case OPT_IMAGE_CWD:
			o->cmd.cwd = optarg;
			break;
		case OPT_IMAGE_USER:
			o->cmd.user = optarg;
			break;
		case OPT_JAIL:
			o->jail.enabled = 1;
			break;
		case OPT_JAIL_NETNS:
			o->jail.netns = optarg;
			break;
		case OPT_JAIL_UID:
		case OPT_JAIL_GID:
		case OPT_LIMIT_PIDS:
			if (parse_count(optarg, 0x7fffffff, &v))
				return run_bad_usage("%s: a positive number", opt_text(argv, optind));
			if (opt == OPT_JAIL_UID) {
				o->jail.uid = (uid_t)v;
				o->jail.uid_given = 1;
			} else if (opt == OPT_JAIL_GID) {
				o->jail.gid = (gid_t)v;
				o->jail.gid_given = 1;
			}
			else
				o->jail.pids = (unsigned)v;
			break;
		case OPT_LIMIT_CPU:
			if (jail_parse_cpu(optarg, &o->jail.cpu_milli))
				return run_bad_usage("--limit-cpu '%s': CPUs, e.g. 0.5 or 2", optarg);
			break;
		case OPT_LIMIT_MEM: {
			unsigned long long lm;

			if (cli_parse_mib(optarg, &lm) || lm < 16)
				return run_bad_usage("--limit-mem '%s': a size in MiB (at least 16), e.g. 768 or 1G", optarg);
			o->jail.mem_bytes = lm << 20;
			break;
		}
		case OPT_NO_SECCOMP:
			cfg->seccomp = 0;
			o->no_seccomp = 1;
			break;
		case OPT_TRACK_DIRTY: /* diff snapshots (docs/snapshot.md) */
			cfg->track_dirty = 1;
			break;
		case 'd':
			o->detach = 1;
			break;
		case OPT_PUBLISH:
			if (o->nr_pub == PUBLISH_MAX || publish_parse(optarg, &o->pub[o->nr_pub]))
				return run_bad_usage("--publish '%s': [ADDR:]HOST_PORT:GUEST_PORT (at most 16)", optarg);
			o->nr_pub++;
			break;
		case OPT_EGRESS:
			o->egress_policy = optarg;
			break;
		case OPT_TTL:
			if (cli_parse_duration(optarg, &o->ttl_s))
				return run_bad_usage("--ttl '%s': a duration such as 90s, 10m, 2h or 1d", optarg);
			break;
		case 't':
			o->cmd.tty = 1;
			break;
		case OPT_TOKEN:
			o->token = optarg;
			if (!run_token_ok(o->token))
				return run_bad_usage("--token: 1 to 127 of A-Z a-z 0-9 _ . -%s", "");
			break;
		case OPT_READY:
			/* "abc" was 0: a wait that gave up at once. */
			if (parse_count(optarg, 86400, &v))
				return run_bad_usage("--ready-timeout '%s': seconds, from 1 to 86400", optarg);
			o->ready_s = v;
			break;
		case OPT_NO_API:
			o->fc.no_api = 1;
			break;
		case OPT_BOOT_TIMER:
		case OPT_FC_IGNORED:
			break;
		case OPT_LEVEL:
			o->fc.level = optarg;
			o->level_set = 1;
			break;
		case OPT_LOG_PATH:
			o->fc.log_path = optarg;
			break;
		case OPT_SHOW_LEVEL:
			o->fc.show_level = 1;
			break;
		case OPT_SHOW_ORIGIN:
			o->fc.show_origin = 1;
			break;
		case OPT_MODULE:
			break; /* vmm's log has no modules */
		case OPT_METRICS_PATH:
			o->fc.metrics_path = optarg;
			break;
		case OPT_METADATA:
			o->fc.metadata = optarg;
			break;
		case OPT_SECCOMP_FILTER:
			return run_bad_usage("--seccomp-filter %s: vmm installs its own seccomp allow-lists (each thread "
					   "its own, docs/security.md) and takes no BPF filter file; leave it out, or "
					   "--no-seccomp to run without them", optarg);
		case OPT_MMDS_LIMIT:
		case OPT_MAX_PAYLOAD:
			if (parse_count(optarg, 64ul << 20, &v))
				return run_bad_usage("%s: a size in bytes, from 1 to 64 MiB", opt_text(argv, optind));
			if (opt == OPT_MAX_PAYLOAD)
				o->fc.max_payload = v;
			else
				o->fc.mmds_limit = v;
			break;
		case 'q':
			log_set_level(LOG_ERROR);
			o->level_set = 1;
			o->quiet = 1;
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			o->level_set = 1;
			break;
		default:
			return CLI_EXIT_USAGE; /* cli_getopt said which */
		}
	}
	if (o->in_place && (!restore || !o->detach || !o->name || o->jail.enabled))
		return run_bad_usage("%s", "--in-place is vmm resume's: restore -d --name N of N's standby state");
	if (restore) {
		if (optind >= argc)
			return run_bad_usage("%s", "restore: which snapshot directory?");
		o->snapshot_dir = argv[optind++];
		if (optind < argc && !strcmp(argv[optind], "--"))
			optind++;
	}
	o->argi = optind;
	return 0;
}

int run_opts_check(struct run_opts *o, int argc, char **argv)
{
	int api = o->api, argi = o->argi;

	if (argi < argc) {
		o->cmd.argv = (const char *const *)&argv[argi]; /* after "--": the command */
		/* The terminal carries CMD's output: only warnings from us
		 * (-d: CMD's output is kept in the sandbox instead). */
		if (!o->detach && !o->level_set && log_get_level() > LOG_WARN)
			log_set_level(LOG_WARN);
		if (!o->detach && !o->console_explicit)
			o->console = "none";
	}

	if (o->detach && o->cmd.argv) {
		/* run -d -- CMD: the sandbox runs on; CMD is its detached
		 * process, started once the API answers (detach_self) */
		o->dcmd = o->cmd;
		o->dcmd.detach = 1;
		o->dcmd.tag = DETACHED_CMD_TAG;
		o->dcmd.stdin_pass = 0;
		o->cmd.argv = NULL;
	}
	if ((o->idle_timeout_s || o->idle_ttl_s) && (api || o->jail.enabled))
		return run_bad_usage("%s", "--idle-timeout/--idle-ttl: not with --jail or vmm serve (standby needs "
				   "a sandbox folder of its own: docs/snapshot.md)");
	if (o->jail.netns && !o->jail.enabled)
		return run_bad_usage("%s", "--jail-netns is for a jailed VMM: add --jail");
	return 0;
}
