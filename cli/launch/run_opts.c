/* The options of vmm run/restore/serve/create (run_opts.h). */
#include "cli/launch/run_opts.h"
#include "cli/drive/drive.h"
#include "cli/util/util.h"
#include "cli/launch/publish.h"
#include "vmm/cputmpl.h"
#include "vmm/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
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
       OPT_ENTROPY, OPT_BALLOON, OPT_TRACK_DIRTY, OPT_IDLE_TIMEOUT, OPT_IDLE_TTL, OPT_IN_PLACE, OPT_DISK_SIZE, OPT_DRIVE, OPT_LABEL,
       /* Firecracker's command line (vmm serve): */
       OPT_NO_API, OPT_BOOT_TIMER, OPT_LEVEL, OPT_LOG_PATH, OPT_SHOW_LEVEL, OPT_SHOW_ORIGIN, OPT_MODULE,
       OPT_METRICS_PATH, OPT_METADATA, OPT_MMDS_LIMIT, OPT_MAX_PAYLOAD, OPT_SECCOMP_FILTER, OPT_FC_IGNORED };

int run_bad_usage(struct run_opts *o, const char *fmt, const char *arg)
{
	char msg[sizeof(o->err) - 64];

	snprintf(msg, sizeof(msg), fmt, arg);
	return cli_seterr(o->err, sizeof(o->err), CLI_EXIT_USAGE, "%s (see 'vmm run --help' or 'vmm restore --help')",
			  msg);
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
	o->restore = restore;
	o->api = api;
	o->pub = pub;
	o->console = "stdio";
	o->mib = VM_DEFAULT_MEM_MIB;
	o->ready_s = 300;
	o->cmd.stdin_pass = 1;
	o->jail.uid = JAIL_DEFAULT_ID;
	o->jail.gid = JAIL_DEFAULT_ID;
	o->jail.lock_fd = -1;
	o->image_ref = "";
}

/* One option being applied: where it goes, which it is, as written. */
struct run_arg {
	struct run_opts *o;
	struct vm_config *cfg;
	int opt;          /* its getopt value (OPT_*, or the short letter) */
	const char *arg;  /* its argument, or NULL */
	const char *text; /* the option as written, for messages */
	size_t off;       /* the table's field offset (set_* handlers) */
};

/* An option's handler: 0, or the exit status (one line said why). */
typedef int run_opt_fn(const struct run_arg *a);

/* Where an option may appear (the verb's checks, before its handler). */
#define RO_SHAPE 1u      /* the VM's shape: not restore (the snapshot's) */
#define RO_NOT_SERVE 2u  /* not serve: the API or --config-file sets it */
#define RO_SERVE_ONLY 4u /* vmm serve's (or vmm --api-sock PATH's) only */

/* ---- handlers that store into a field (offset in struct run_opts or
 * struct vm_config) ---- */

static int set_opt_str(const struct run_arg *a)
{
	*(const char **)((char *)a->o + a->off) = a->arg;
	return 0;
}

static int set_cfg_str(const struct run_arg *a)
{
	*(const char **)((char *)a->cfg + a->off) = a->arg;
	return 0;
}

static int set_opt_flag(const struct run_arg *a)
{
	*(int *)((char *)a->o + a->off) = 1;
	return 0;
}

static int set_cfg_flag(const struct run_arg *a)
{
	*(int *)((char *)a->cfg + a->off) = 1;
	return 0;
}

static int set_nothing(const struct run_arg *a)
{
	(void)a;
	return 0;
}

/* ---- the VM's shape ---- */

static int opt_cpus(const struct run_arg *a)
{
	unsigned long v;

	if (parse_count(a->arg, VM_MAX_VCPUS, &v))
		return run_bad_usage(a->o, "--cpus '%s': a number from 1 to 64", a->arg);
	a->cfg->cpus = (unsigned)v;
	return 0;
}

static int opt_mem(const struct run_arg *a)
{
	struct run_opts *o = a->o;
	unsigned long long total, avail;

	if (cli_parse_mib(a->arg, &o->mib) || o->mib < VM_MIN_MEM_MIB)
		return run_bad_usage(a->o, "--mem '%s': a size in MiB (at least 32), e.g. 512 or 2G", a->arg);
	/* Guest RAM is mapped on demand: more than the host has cannot
	 * work; more than it has free may, until it fills. */
	if (cli_host_mem_mib(&total, &avail) == 0 && (o->mib > total || o->mib > (1ull << 30))) {
		return cli_seterr(o->err, sizeof(o->err), CLI_EXIT_USAGE, "--mem '%s': this host has %llu MiB of RAM: at "
				  "most --mem %llu (see 'vmm run --help')", a->arg, total,
				  total < (1ull << 30) ? total : (1ull << 30));
	}
	if (avail && o->mib > avail)
		log_warn("--mem %llu MiB is more than this host has free now (%llu MiB): the guest "
			 "may be killed for memory once it uses it", o->mib, avail);
	return 0;
}

/* The root disk of a sandbox of an image: its own copy, grown to this
 * (images.h: IMAGE_DISK_DEFAULT_MIB without it). */
static int opt_disk_size(const struct run_arg *a)
{
	if (cli_parse_mib(a->arg, &a->o->disk_mib) || a->o->disk_mib < 8 || a->o->disk_mib > (1ull << 24))
		return run_bad_usage(a->o, "--disk-size '%s': a size such as 4G or 16G (at most 16T)", a->arg);
	return 0;
}

static int opt_template(const struct run_arg *a)
{
	if (cpu_template_parse(a->arg, &a->cfg->tmpl))
		return run_bad_usage(a->o, "--cpu-template '%s': host or safe", a->arg);
	a->cfg->tmpl_explicit = 1;
	return 0;
}

static int opt_console(const struct run_arg *a)
{
	a->o->console_explicit = 1;
	if (strcmp(a->arg, "stdio") && strcmp(a->arg, "none") && (strncmp(a->arg, "file:", 5) || !a->arg[5]))
		return run_bad_usage(a->o, "--console '%s': stdio, none or file:PATH", a->arg);
	a->o->console = a->arg;
	return 0;
}

static int opt_console_log_size(const struct run_arg *a)
{
	if (run_parse_size(a->arg, &a->cfg->console_limit) || a->cfg->console_limit < 1024)
		return run_bad_usage(a->o, "--console-log-size '%s': bytes (at least 1024), or with a k, M or G "
				     "suffix, e.g. 8M", a->arg);
	return 0;
}

/* ---- devices (a restore's --disk, --net and --fs replace the
 * snapshot's) ---- */

/* A device option's parser said no: the usage line with its why. */
static int device_bad(struct run_opts *o, const char *opt, const char *arg, const char *why)
{
	return cli_seterr(o->err, sizeof(o->err), CLI_EXIT_USAGE, "--%s '%s': %s", opt, arg, why);
}

static int opt_disk(const struct run_arg *a)
{
	struct run_opts *o = a->o;
	int restore = o->restore;
	const char *why = "";
	struct blk_options *d = restore ? &o->over[o->nr_over] : &a->cfg->disks[a->cfg->nr_disks];

	if ((restore ? o->nr_over : a->cfg->nr_disks) == VM_MAX_DISKS)
		return run_bad_usage(a->o, "--disk: at most %s disks", "16");
	if (blk_options_parse(a->arg, d, &why))
		return device_bad(a->o, "disk", a->arg, why);
	if (restore)
		o->nr_over++;
	else
		a->cfg->nr_disks++;
	return 0;
}

static int opt_net(const struct run_arg *a)
{
	struct run_opts *o = a->o;
	int restore = o->restore;
	const char *why = "";
	unsigned *nr = restore ? &o->nr_net_over : &a->cfg->nr_nets;
	struct net_options *n = restore ? &o->net_over[*nr] : &a->cfg->nets[*nr];

	if (*nr == VM_MAX_NETS)
		return run_bad_usage(a->o, "--net: at most %s interfaces", "8");
	if (net_options_parse(a->arg, n, &why))
		return device_bad(a->o, "net", a->arg, why);
	if (restore)
		o->net_mac_given[*nr] = strstr(a->arg, "mac=") != NULL;
	(*nr)++;
	return 0;
}

static int opt_fs(const struct run_arg *a)
{
	struct run_opts *o = a->o;
	int restore = o->restore;
	const char *why = "";
	struct fs_options *f = restore ? &o->over_fs[o->nr_over_fs] : &a->cfg->fs[a->cfg->nr_fs];
	struct stat st;

	if ((restore ? o->nr_over_fs : a->cfg->nr_fs) == VM_MAX_FS)
		return run_bad_usage(a->o, "--fs: at most %s shared drives", "8");
	if (fs_options_parse(a->arg, f, &why))
		return device_bad(a->o, "fs", a->arg, why);
	if (restore)
		o->nr_over_fs++;
	else
		a->cfg->nr_fs++;
	if (stat(f->path, &st) < 0 || !S_ISDIR(st.st_mode))
		return run_bad_usage(a->o, "--fs: %s is not a directory", f->path);
	return 0;
}

static int opt_drive(const struct run_arg *a)
{
	struct run_opts *o = a->o;

	if (o->nr_drive_args == VM_MAX_FS)
		return run_bad_usage(a->o, "--drive: at most %s shared drives", "8");
	o->drive_args[o->nr_drive_args++] = a->arg;
	return 0;
}

static int opt_label(const struct run_arg *a)
{
	struct run_opts *o = a->o;
	int r = sandbox_labels_add(o->labels_text, sizeof(o->labels_text), a->arg);

	if (r == -E2BIG)
		return run_bad_usage(a->o, "--label: at most %s labels", "16");
	if (r)
		return run_bad_usage(a->o, "--label '%s': KEY=VALUE, KEY 1-63 of A-Z a-z 0-9 _ . - / (starting with a "
				     "letter or digit), VALUE 0-63 of A-Z a-z 0-9 _ . -", a->arg);
	return 0;
}

/* The --drive options, once --name and the labels are known: each drive's allow list
 * checked (a refusal stops the run before anything boots, exit 1), then
 * mounted as an --fs drive tagged with its name (cli/drive/drive.h). */
static int run_drives(struct run_opts *o, struct vm_config *cfg)
{
	char fs[PATH_MAX * 2 + 256], why[512];
	const char *bad = "";
	unsigned i;
	int r;

	for (i = 0; i < o->nr_drive_args; i++) {
		struct fs_options *f = &cfg->fs[cfg->nr_fs];
		size_t n = strlen(o->drives_text);

		if (cfg->nr_fs == VM_MAX_FS)
			return run_bad_usage(o, "--drive: at most %s shared drives with --fs", "8");
		if ((r = drive_mount_opt(o->drive_args[i], o->name, o->labels_text, fs, sizeof(fs), why, sizeof(why)))) {
			return cli_seterr(o->err, sizeof(o->err), r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR, "%s", why);
		}
		if (fs_options_parse(fs, f, &bad))
			return device_bad(o, "drive", o->drive_args[i], bad);
		cfg->nr_fs++;
		snprintf(o->drives_text + n, sizeof(o->drives_text) - n, "%s%s:%s%s", n ? "," : "", f->tag, f->at,
			 f->ro ? ":ro" : "");
	}
	return 0;
}

static int opt_vsock(const struct run_arg *a)
{
	struct run_opts *o = a->o;
	const char *why = "";
	char tmp[160];

	/* restore: "cid=N" alone is fine, the socket has a default */
	snprintf(tmp, sizeof(tmp), "%s%s", a->arg, o->restore && !strstr(a->arg, "uds=") ? ",uds=-" : "");
	if (o->vsock_given || vsock_options_parse(tmp, &a->cfg->vsock, &why))
		return device_bad(a->o, "vsock", a->arg, o->vsock_given ? "only one vsock device" : why);
	if (!strcmp(a->cfg->vsock.uds, "-"))
		a->cfg->vsock.uds[0] = '\0';
	o->vsock_given = 1;
	return 0;
}

static int opt_entropy(const struct run_arg *a)
{
	const char *why = "";

	if (rng_options_parse(a->arg, &a->cfg->entropy, &why))
		return device_bad(a->o, "entropy", a->arg, why);
	a->cfg->has_entropy = 1;
	return 0;
}

static int opt_balloon(const struct run_arg *a)
{
	const char *why = "";

	if (!strcmp(a->arg, "off")) {
		a->o->no_balloon = 1;
		a->cfg->has_balloon = 0;
		return 0;
	}
	if (balloon_options_parse(a->arg, &a->cfg->balloon, &why))
		return device_bad(a->o, "balloon", a->arg, why);
	a->cfg->has_balloon = 1;
	a->o->no_balloon = 0;
	return 0;
}

/* ---- the sandbox ---- */

static int opt_idle(const struct run_arg *a)
{
	int timeout = a->opt == OPT_IDLE_TIMEOUT;

	if (cli_parse_duration(a->arg, timeout ? &a->o->idle_timeout_s : &a->o->idle_ttl_s))
		return run_bad_usage(a->o, "%s: a duration such as 90s, 10m, 2h or 1d", a->text);
	if (timeout)
		a->o->idle_timeout_arg = a->arg;
	else
		a->o->idle_ttl_arg = a->arg;
	return 0;
}

static int opt_image_root(const struct run_arg *a)
{
	if (a->o->restore)
		return run_bad_usage(a->o, "%s", "restore: no --image-root");
	a->o->image_root = a->arg;
	return 0;
}

static int opt_image_env(const struct run_arg *a)
{
	struct run_opts *o = a->o;

	if (o->nr_image_env == sizeof(o->image_env) / sizeof(o->image_env[0]) - 1)
		return run_bad_usage(a->o, "%s", "--image-env: too many");
	o->image_env[o->nr_image_env++] = a->arg;
	o->cmd.env = o->image_env;
	return 0;
}

static int opt_jail_id(const struct run_arg *a)
{
	struct jail *j = &a->o->jail;
	unsigned long v;

	/* --jail-uid 0: the VMM stays root in its jail, with a file server's
	 * capabilities only (jail.h) */
	if (a->opt == OPT_JAIL_UID && !strcmp(a->arg, "0"))
		v = 0;
	else if (parse_count(a->arg, 0x7fffffff, &v))
		return run_bad_usage(a->o, a->opt == OPT_JAIL_UID
						   ? "%s: a positive number (or 0: root with a file server's capabilities)"
						   : "%s: a positive number",
				     a->text);
	if (a->opt == OPT_JAIL_UID) {
		j->uid = (uid_t)v;
		j->uid_given = 1;
	} else if (a->opt == OPT_JAIL_GID) {
		j->gid = (gid_t)v;
		j->gid_given = 1;
	} else
		j->pids = (unsigned)v;
	return 0;
}

static int opt_limit_cpu(const struct run_arg *a)
{
	if (jail_parse_cpu(a->arg, &a->o->jail.cpu_milli))
		return run_bad_usage(a->o, "--limit-cpu '%s': CPUs, e.g. 0.5 or 2", a->arg);
	return 0;
}

static int opt_limit_mem(const struct run_arg *a)
{
	unsigned long long lm;

	if (cli_parse_mib(a->arg, &lm) || lm < 16)
		return run_bad_usage(a->o, "--limit-mem '%s': a size in MiB (at least 16), e.g. 768 or 1G", a->arg);
	a->o->jail.mem_bytes = lm << 20;
	return 0;
}

static int opt_no_seccomp(const struct run_arg *a)
{
	a->cfg->seccomp = 0;
	a->o->no_seccomp = 1;
	return 0;
}

static int opt_publish(const struct run_arg *a)
{
	struct run_opts *o = a->o;

	if (o->nr_pub == PUBLISH_MAX || publish_parse(a->arg, &o->pub[o->nr_pub]))
		return run_bad_usage(a->o, "--publish '%s': [ADDR:]HOST_PORT:GUEST_PORT (at most 16)", a->arg);
	o->nr_pub++;
	return 0;
}

static int opt_ttl(const struct run_arg *a)
{
	if (cli_parse_duration(a->arg, &a->o->ttl_s))
		return run_bad_usage(a->o, "--ttl '%s': a duration such as 90s, 10m, 2h or 1d", a->arg);
	return 0;
}

static int opt_token(const struct run_arg *a)
{
	a->o->token = a->arg;
	if (!run_token_ok(a->o->token))
		return run_bad_usage(a->o, "--token: 1 to 127 of A-Z a-z 0-9 _ . -%s", "");
	return 0;
}

static int opt_ready(const struct run_arg *a)
{
	unsigned long v;

	/* "abc" was 0: a wait that gave up at once. */
	if (parse_count(a->arg, 86400, &v))
		return run_bad_usage(a->o, "--ready-timeout '%s': seconds, from 1 to 86400", a->arg);
	a->o->ready_s = v;
	return 0;
}

static int opt_quiet(const struct run_arg *a)
{
	log_set_level(LOG_ERROR);
	a->o->level_set = 1;
	a->o->quiet = 1;
	return 0;
}

static int opt_verbose(const struct run_arg *a)
{
	log_set_level(LOG_DEBUG);
	a->o->level_set = 1;
	return 0;
}

/* ---- Firecracker's command line (vmm serve) ---- */

static int opt_level(const struct run_arg *a)
{
	a->o->fc.level = a->arg;
	a->o->level_set = 1;
	return 0;
}

static int opt_seccomp_filter(const struct run_arg *a)
{
	return run_bad_usage(a->o, "--seccomp-filter %s: vmm installs its own seccomp allow-lists (each thread "
			     "its own, docs/security.md) and takes no BPF filter file; leave it out, or "
			     "--no-seccomp to run without them", a->arg);
}

static int opt_fc_size(const struct run_arg *a)
{
	unsigned long v;

	if (parse_count(a->arg, 64ul << 20, &v))
		return run_bad_usage(a->o, "%s: a size in bytes, from 1 to 64 MiB", a->text);
	if (a->opt == OPT_MAX_PAYLOAD)
		a->o->fc.max_payload = v;
	else
		a->o->fc.mmds_limit = v;
	return 0;
}

/* Every option: its long name, argument, getopt value, where it may
 * appear, its handler and (set_*) its field. getopt's table is made from
 * this one. */
struct run_opt {
	const char *name;
	int has_arg, val;
	unsigned where;
	run_opt_fn *fn;
	size_t off;
};

#define O_(f) offsetof(struct run_opts, f)
#define C_(f) offsetof(struct vm_config, f)
#define SHAPE (RO_SHAPE | RO_NOT_SERVE)
#define ARG required_argument
#define NOARG no_argument
static const struct run_opt run_table[] = {
	{ "kernel", ARG, OPT_KERNEL, SHAPE, set_cfg_str, C_(kernel) },
	{ "initrd", ARG, OPT_INITRD, SHAPE, set_cfg_str, C_(initrd) },
	{ "cmdline", ARG, OPT_CMDLINE, SHAPE, set_cfg_str, C_(cmdline) },
	{ "cpus", ARG, OPT_CPUS, SHAPE, opt_cpus, 0 },
	{ "mem", ARG, OPT_MEM, SHAPE, opt_mem, 0 },
	{ "disk-size", ARG, OPT_DISK_SIZE, SHAPE, opt_disk_size, 0 },
	{ "console", ARG, OPT_CONSOLE, 0, opt_console, 0 },
	{ "console-log-size", ARG, OPT_CONSOLE_LOG_SIZE, 0, opt_console_log_size, 0 },
	{ "no-api", NOARG, OPT_NO_API, RO_SERVE_ONLY, set_opt_flag, O_(fc.no_api) },
	{ "boot-timer", NOARG, OPT_BOOT_TIMER, RO_SERVE_ONLY, set_nothing, 0 },
	{ "level", ARG, OPT_LEVEL, RO_SERVE_ONLY, opt_level, 0 },
	{ "log-path", ARG, OPT_LOG_PATH, RO_SERVE_ONLY, set_opt_str, O_(fc.log_path) },
	{ "show-level", NOARG, OPT_SHOW_LEVEL, RO_SERVE_ONLY, set_opt_flag, O_(fc.show_level) },
	{ "show-log-origin", NOARG, OPT_SHOW_ORIGIN, RO_SERVE_ONLY, set_opt_flag, O_(fc.show_origin) },
	{ "module", ARG, OPT_MODULE, RO_SERVE_ONLY, set_nothing, 0 }, /* vmm's log has no modules */
	{ "metrics-path", ARG, OPT_METRICS_PATH, RO_SERVE_ONLY, set_opt_str, O_(fc.metrics_path) },
	{ "metadata", ARG, OPT_METADATA, 0, set_opt_str, O_(fc.metadata) },
	{ "mmds-size-limit", ARG, OPT_MMDS_LIMIT, 0, opt_fc_size, 0 },
	{ "http-api-max-payload-size", ARG, OPT_MAX_PAYLOAD, RO_SERVE_ONLY, opt_fc_size, 0 },
	{ "seccomp-filter", ARG, OPT_SECCOMP_FILTER, RO_SERVE_ONLY, opt_seccomp_filter, 0 },
	/* The jailer passes these to Firecracker; vmm has no use for them. */
	{ "start-time-us", ARG, OPT_FC_IGNORED, RO_SERVE_ONLY, set_nothing, 0 },
	{ "start-time-cpu-us", ARG, OPT_FC_IGNORED, RO_SERVE_ONLY, set_nothing, 0 },
	{ "parent-cpu-time-us", ARG, OPT_FC_IGNORED, RO_SERVE_ONLY, set_nothing, 0 },
	{ "cpu-template", ARG, OPT_TEMPLATE, SHAPE, opt_template, 0 },
	{ "dump-cpuid", ARG, OPT_DUMP_CPUID, RO_SHAPE, set_opt_str, O_(dump_cpuid) },
	{ "disk", ARG, OPT_DISK, RO_NOT_SERVE, opt_disk, 0 },
	{ "vsock", ARG, OPT_VSOCK, RO_NOT_SERVE, opt_vsock, 0 },
	{ "entropy", ARG, OPT_ENTROPY, 0, opt_entropy, 0 },
	{ "balloon", ARG, OPT_BALLOON, 0, opt_balloon, 0 },
	{ "net", ARG, OPT_NET, RO_NOT_SERVE, opt_net, 0 },
	{ "fs", ARG, OPT_FS, RO_NOT_SERVE, opt_fs, 0 },
	{ "drive", ARG, OPT_DRIVE, SHAPE, opt_drive, 0 },
	{ "label", ARG, OPT_LABEL, 0, opt_label, 0 },
	{ "tty", NOARG, 't', RO_NOT_SERVE, set_opt_flag, O_(cmd.tty) },
	{ "token", ARG, OPT_TOKEN, 0, opt_token, 0 },
	{ "ready-timeout", ARG, OPT_READY, RO_NOT_SERVE, opt_ready, 0 },
	{ "name", ARG, OPT_NAME, 0, set_opt_str, O_(name) },
	{ "detach", NOARG, 'd', RO_NOT_SERVE, set_opt_flag, O_(detach) },
	{ "ttl", ARG, OPT_TTL, 0, opt_ttl, 0 },
	{ "publish", ARG, OPT_PUBLISH, 0, opt_publish, 0 },
	{ "egress-policy", ARG, OPT_EGRESS, 0, set_opt_str, O_(egress_policy) },
	/* vmm start: the folder vmm create made */
	{ "adopt", NOARG, OPT_ADOPT, RO_NOT_SERVE, set_opt_flag, O_(adopt) },
	{ "idle-timeout", ARG, OPT_IDLE_TIMEOUT, 0, opt_idle, 0 },
	{ "idle-ttl", ARG, OPT_IDLE_TTL, 0, opt_idle, 0 },
	/* vmm resume: restore a standby sandbox in its folder */
	{ "in-place", NOARG, OPT_IN_PLACE, 0, set_opt_flag, O_(in_place) },
	/* vmm run --image, rewritten by image_run_args(): */
	{ "image-root", ARG, OPT_IMAGE_ROOT, RO_NOT_SERVE, opt_image_root, 0 },
	{ "image-ref", ARG, OPT_IMAGE_REF, RO_NOT_SERVE, set_opt_str, O_(image_ref) },
	/* the image config's Env, WorkingDir, User */
	{ "image-env", ARG, OPT_IMAGE_ENV, 0, opt_image_env, 0 },
	{ "image-cwd", ARG, OPT_IMAGE_CWD, 0, set_opt_str, O_(cmd.cwd) },
	{ "image-user", ARG, OPT_IMAGE_USER, 0, set_opt_str, O_(cmd.user) },
	/* vmm serve */
	{ "api-sock", ARG, OPT_API_SOCK, RO_SERVE_ONLY, set_opt_str, O_(api_sock) },
	{ "config-file", ARG, OPT_CONFIG_FILE, RO_SERVE_ONLY, set_opt_str, O_(config_file) },
	{ "id", ARG, OPT_NAME, 0, set_opt_str, O_(name) },
	{ "no-seccomp", NOARG, OPT_NO_SECCOMP, 0, opt_no_seccomp, 0 },
	/* diff snapshots (docs/snapshot.md) */
	{ "track-dirty", NOARG, OPT_TRACK_DIRTY, 0, set_cfg_flag, C_(track_dirty) },
	{ "jail", NOARG, OPT_JAIL, 0, set_opt_flag, O_(jail.enabled) },
	{ "jail-uid", ARG, OPT_JAIL_UID, 0, opt_jail_id, 0 },
	{ "jail-gid", ARG, OPT_JAIL_GID, 0, opt_jail_id, 0 },
	{ "jail-netns", ARG, OPT_JAIL_NETNS, 0, set_opt_str, O_(jail.netns) },
	{ "limit-cpu", ARG, OPT_LIMIT_CPU, 0, opt_limit_cpu, 0 },
	{ "limit-mem", ARG, OPT_LIMIT_MEM, 0, opt_limit_mem, 0 },
	{ "limit-pids", ARG, OPT_LIMIT_PIDS, 0, opt_jail_id, 0 },
	{ "quiet", NOARG, 'q', 0, opt_quiet, 0 },
	{ "verbose", NOARG, 'v', 0, opt_verbose, 0 },
};
#undef O_
#undef C_
#undef SHAPE
#undef ARG
#undef NOARG
#define RUN_NR_OPTS (sizeof(run_table) / sizeof(run_table[0]))

/* The table's entry for getopt's value, or NULL. */
static const struct run_opt *run_opt_find(int val)
{
	size_t i;

	for (i = 0; i < RUN_NR_OPTS; i++)
		if (run_table[i].val == val)
			return &run_table[i];
	return NULL;
}

/* Whether the verb takes this option: 0, or the usage status. */
static int run_opt_allowed(struct run_opts *o, const struct run_opt *e, const char *text)
{
	/* restore takes what may differ per clone, nothing that shapes the VM */
	if (o->restore && (e->where & RO_SHAPE))
		return run_bad_usage(o, "restore: %s comes from the snapshot", text);
	/* serve: the VM's shape comes from the API or the config file */
	if (o->api && (e->where & RO_NOT_SERVE))
		return run_bad_usage(o, "serve: %s: configure the VM through the API or --config-file", text);
	if (!o->api && (e->where & RO_SERVE_ONLY))
		return run_bad_usage(o, "%s: only with vmm serve (or vmm --api-sock PATH)", text);
	return 0;
}

/* restore's DIR (and a "--" after it), and the checks at the end. */
static int run_opts_rest(struct run_opts *o, int argc, char **argv)
{
	if (o->in_place && (!o->restore || !o->detach || !o->name || o->jail.enabled))
		return run_bad_usage(o, "%s", "--in-place is vmm resume's: restore -d --name N of N's standby state");
	if (o->restore) {
		if (optind >= argc)
			return run_bad_usage(o, "%s", "restore: which snapshot directory?");
		o->snapshot_dir = argv[optind++];
		if (optind < argc && !strcmp(argv[optind], "--"))
			optind++;
	}
	o->argi = optind;
	return 0;
}

int run_opts_parse(struct run_opts *o, struct vm_config *cfg, int argc, char **argv)
{
	struct option longopts[RUN_NR_OPTS + 1];
	const char *verb = o->restore ? "restore" : o->api ? "serve" : "run";
	size_t i;
	int opt;

	for (i = 0; i < RUN_NR_OPTS; i++)
		longopts[i] = (struct option){ run_table[i].name, run_table[i].has_arg, NULL, run_table[i].val };
	longopts[RUN_NR_OPTS] = (struct option){ NULL, 0, NULL, 0 };
	/* A new scan (0: glibc reads the ordering, "+" or not, again; the
	 * same as 1 in a process that parses once, which vmm does). */
	optind = 0;
	/* run: options end at the first non-option (the command follows "--");
	 * restore: options may follow DIR too, so let getopt permute. */
	while ((opt = cli_getopt_msg(argc, argv, o->restore ? "qvtd" : "+qvtd", longopts, verb, o->err,
				     sizeof(o->err))) != -1) {
		const struct run_opt *e = run_opt_find(opt);
		struct run_arg a = { .o = o, .cfg = cfg, .opt = opt, .arg = optarg };
		int r;

		if (!e)
			return CLI_EXIT_USAGE; /* o->err says which */
		a.text = opt_text(argv, optind);
		a.off = e->off;
		if ((r = run_opt_allowed(o, e, a.text)) || (r = e->fn(&a)))
			return r;
	}
	if (o->nr_drive_args) {
		int r = run_drives(o, cfg);

		if (r)
			return r;
	}
	return run_opts_rest(o, argc, argv);
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
		return run_bad_usage(o, "%s", "--idle-timeout/--idle-ttl: not with --jail or vmm serve (standby needs "
				   "a sandbox folder of its own: docs/snapshot.md)");
	if (o->jail.netns && !o->jail.enabled)
		return run_bad_usage(o, "%s", "--jail-netns is for a jailed VMM: add --jail");
	if (o->jail.uid_given && o->jail.uid == 0) {
		unsigned i;

		if (o->jail.gid_given && o->jail.gid != 0)
			return run_bad_usage(o, "%s", "--jail-uid 0 keeps gid 0: no --jail-gid");
		/* its proxy would run as root in the host's namespaces, and the
		 * VMM, root too, could set its own policy on egress.sock */
		if (o->egress_policy)
			return run_bad_usage(o, "%s", "--egress-policy: not with --jail-uid 0 (its proxy would run as root "
					   "on the host's network)");
		o->jail.gid = 0;
		/* uid 0 gives up CAP_NET_BIND_SERVICE before the listeners
		 * are made, unless one needs it */
		for (i = 0; i < o->nr_pub; i++)
			if (ntohs(o->pub[i].addr.sin_port) < 1024)
				o->jail.low_ports = 1;
	}
	if (o->disk_mib && !o->image_root)
		return run_bad_usage(o, "%s", "--disk-size is for a sandbox of an image (--image): a --disk is used as "
				   "it is");
	return 0;
}
