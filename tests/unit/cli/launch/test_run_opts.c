/* The options of vmm run/restore/serve (cli/launch/run_opts.h) into their checked
 * struct: what each verb takes and refuses, devices and restore's
 * overrides landing in the right list, -- CMD and run -d -- CMD, the checks
 * across options, and the size and token parsers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/util/util.h"
#include "cli/launch/publish.h"
#include "cli/launch/run_opts.h"
#include "cli/drive/drive.h"
#include "cli/sandbox/sandbox_standby.h"
#include "vmm/base/log.h"

/* publish.c's link to a standby keeper: none here. */
int standby_listen_fd(const char *spec)
{
	(void)spec;
	return -1;
}

/* cli/drive's decision (tested in tests/unit/cli/drive/): here drive "d"
 * allows only sandbox "alice" and the label team=a, so the test sees
 * run_opts ask with the --name and --label given anywhere on the line. */
int drive_mount_opt(const char *arg, const char *who, const char *labels, char *fs, size_t fslen, char *why,
		    size_t len)
{
	if (strcmp(arg, "d") || ((!who || strcmp(who, "alice")) && !sandbox_has_label(labels, "team=a"))) {
		snprintf(why, len, "drive %s does not allow sandbox %s", arg, who ? who : "(none)");
		return -EACCES;
	}
	snprintf(fs, fslen, "tag=d,path=/tmp,at=/drives/d");
	return 0;
}

struct fx {
	struct run_opts o;
	struct vm_config cfg;
	struct publish pub[PUBLISH_MAX];
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	return 0;
}

static void fx_free(struct fx *f)
{
	while (f->cfg.nr_disks > 0)
		blk_options_free(&f->cfg.disks[--f->cfg.nr_disks]);
	while (f->o.nr_over > 0)
		blk_options_free(&f->o.over[--f->o.nr_over]);
	while (f->cfg.nr_fs > 0)
		fs_options_free(&f->cfg.fs[--f->cfg.nr_fs]);
	while (f->o.nr_over_fs > 0)
		fs_options_free(&f->o.over_fs[--f->o.nr_over_fs]);
}

static int fx_teardown(void **state)
{
	fx_free(*state);
	free(*state);
	return 0;
}

/* Parses then checks argv (NULL-terminated, argv[0] the verb) as verb
 * (restore, api) would; the exit status. */
static int parse(struct fx *f, int restore, int api, char **argv)
{
	int argc = 0, r;

	fx_free(f);
	memset(&f->cfg, 0, sizeof(f->cfg));
	f->cfg.cpus = 1;
	while (argv[argc])
		argc++;
	memset(&f->o, 0, sizeof(f->o)); /* run_opts_init's caller zero-fills */
	run_opts_init(&f->o, restore, api, f->pub);
	log_set_level(LOG_INFO);
	r = run_opts_parse(&f->o, &f->cfg, argc, argv);
	return r ? r : run_opts_check(&f->o, argc, argv);
}

/* parse() with what it says into err: the refusal it hands up (o.err,
 * the usage line the verb prints) after anything logged on stderr. */
static int parse_err(struct fx *f, int restore, int api, char **argv, char *err, size_t len)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO), r;
	size_t n;

	assert_non_null(tmp);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	r = parse(f, restore, api, argv);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(err, 1, len - 1, tmp);
	err[n] = '\0';
	fclose(tmp);
	snprintf(err + n, len - n, "%s", f->o.err);
	return r;
}

#define ARGV(...) ((char *[]){ __VA_ARGS__, NULL })

static void run_drives(void **state)
{
	struct fx *f = *state;
	char err[512];

	/* --name after --drive still decides */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--drive", "d", "--name", "alice")), 0);
	assert_int_equal(f->cfg.nr_fs, 1);
	assert_string_equal(f->cfg.fs[0].tag, "d");
	assert_string_equal(f->cfg.fs[0].at, "/drives/d");
	assert_string_equal(f->o.drives_text, "d:/drives/d");
	/* refused before anything starts: exit 1, the drive named */
	assert_int_equal(parse_err(f, 0, 0, ARGV("run", "--name", "eve", "--drive", "d"), err,
				   sizeof(err)), CLI_EXIT_ERROR);
	assert_non_null(strstr(err, "drive d does not allow sandbox eve"));
	assert_int_equal(f->cfg.nr_fs, 0);
	/* a label given after --drive decides too; labels are kept */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--drive", "d", "--label", "team=a", "--label", "x/y=1")), 0);
	assert_int_equal(f->cfg.nr_fs, 1);
	assert_string_equal(f->o.labels_text, "team=a,x/y=1");
	assert_int_equal(parse_err(f, 0, 0, ARGV("run", "--label", "team=b", "--drive", "d"), err, sizeof(err)),
			 CLI_EXIT_ERROR);
	assert_int_equal(parse_err(f, 0, 0, ARGV("run", "--label", "team"), err, sizeof(err)), CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "--label 'team'"));
	assert_int_equal(parse_err(f, 0, 0, ARGV("run", "--label", "a=b,c"), err, sizeof(err)), CLI_EXIT_USAGE);
	/* restore takes no drives (the snapshot's shape) */
	assert_int_equal(parse_err(f, 1, 0, ARGV("restore", "--drive", "d", "snap"), err, sizeof(err)), CLI_EXIT_USAGE);
}

static void run_defaults(void **state)
{
	struct fx *f = *state;

	assert_int_equal(parse(f, 0, 0, ARGV("run")), 0);
	assert_string_equal(f->o.console, "stdio");
	assert_int_equal(f->o.mib, VM_DEFAULT_MEM_MIB);
	assert_int_equal(f->o.ready_s, 300);
	assert_int_equal(f->cfg.cpus, 1);
	assert_null(f->o.cmd.argv);
	assert_null(f->o.dcmd.argv);
	assert_int_equal(f->o.jail.uid, JAIL_DEFAULT_ID);
	assert_string_equal(f->o.image_ref, "");
	assert_null(f->o.snapshot_dir);
}

static void run_devices_and_cmd(void **state)
{
	struct fx *f = *state;

	assert_int_equal(parse(f, 0, 0,
			       ARGV("run", "--cpus", "2", "--mem", "64", "--disk", "path=/tmp/a.img,ro",
				    "--disk", "path=/tmp/b.img,id=data", "--net", "tap=t0,ip=10.0.0.2/24",
				    "--fs", "tag=tmp,path=/tmp", "--name", "box", "--publish", "8080:80",
				    "--console-log-size", "64k", "--ttl", "10m", "-t", "--", "/bin/echo", "hi")),
			 0);
	assert_int_equal(f->cfg.cpus, 2);
	assert_int_equal(f->o.mib, 64);
	assert_int_equal(f->cfg.nr_disks, 2);
	assert_string_equal(f->cfg.disks[0].path, "/tmp/a.img");
	assert_int_equal(f->cfg.disks[0].ro, 1);
	assert_string_equal(f->cfg.disks[1].id, "data");
	assert_int_equal(f->cfg.nr_nets, 1);
	assert_string_equal(f->cfg.nets[0].tap, "t0");
	assert_int_equal(f->cfg.nr_fs, 1);
	assert_string_equal(f->o.name, "box");
	assert_int_equal(f->o.nr_pub, 1);
	assert_int_equal(f->pub[0].guest_port, 80);
	assert_int_equal(f->cfg.console_limit, 64 << 10);
	assert_int_equal(f->o.ttl_s, 600);
	assert_int_equal(f->o.cmd.tty, 1);
	/* -- CMD: the command, its console off, only warnings from vmm */
	assert_non_null(f->o.cmd.argv);
	assert_string_equal(f->o.cmd.argv[0], "/bin/echo");
	assert_string_equal(f->o.cmd.argv[1], "hi");
	assert_null(f->o.cmd.argv[2]);
	assert_string_equal(f->o.console, "none");
	assert_int_equal(log_get_level(), LOG_WARN);
	assert_int_equal(f->o.nr_over, 0);
}

/* run -d -- CMD: CMD becomes the sandbox's detached process "main". */
static void run_detached_cmd(void **state)
{
	struct fx *f = *state;

	assert_int_equal(parse(f, 0, 0, ARGV("run", "-d", "--console", "file:/tmp/c.log", "--", "sleep", "9")), 0);
	assert_int_equal(f->o.detach, 1);
	assert_null(f->o.cmd.argv);
	assert_non_null(f->o.dcmd.argv);
	assert_string_equal(f->o.dcmd.argv[0], "sleep");
	assert_string_equal(f->o.dcmd.tag, DETACHED_CMD_TAG);
	assert_int_equal(f->o.dcmd.detach, 1);
	assert_int_equal(f->o.dcmd.stdin_pass, 0);
	assert_string_equal(f->o.console, "file:/tmp/c.log");
	assert_int_equal(log_get_level(), LOG_INFO); /* -d: CMD's output is the sandbox's */
}

/* run: the options end at the first word that is not one. */
static void run_stops_at_command(void **state)
{
	struct fx *f = *state;

	assert_int_equal(parse(f, 0, 0, ARGV("run", "--cpus", "2", "sh", "--cpus", "3")), 0);
	assert_int_equal(f->cfg.cpus, 2);
	assert_string_equal(f->o.cmd.argv[0], "sh");
	assert_string_equal(f->o.cmd.argv[1], "--cpus");
}

static void run_refusals(void **state)
{
	struct fx *f = *state;

	assert_int_equal(parse(f, 0, 0, ARGV("run", "--cpus", "0")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--cpus", "65")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--cpus", "2x")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--mem", "16")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--console", "file:")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--console", "tty")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--console-log-size", "512")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--cpu-template", "fast")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--disk", "ro")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--fs", "tag=x,path=/nonexistent/dir")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--vsock", "cid=3,uds=/tmp/v", "--vsock", "cid=4,uds=/tmp/w")),
			 CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--token", "a b")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--publish", "80")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--ttl", "soon")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail-uid", "-1")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail-gid", "0")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--limit-cpu", "lots")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--limit-mem", "8")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--no-such-option")), CLI_EXIT_USAGE);
	/* --ready-timeout: "abc" once became 0 s, a wait that gave up at once */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--ready-timeout", "abc")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--ready-timeout", "0")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--ready-timeout", "90")), 0);
	assert_int_equal(f->o.ready_s, 90);
	/* vmm serve's own options */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--api-sock", "/tmp/s")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--level", "Info")), CLI_EXIT_USAGE);
	/* the checks across options */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail-netns", "n1")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail", "--jail-netns", "n1")), 0);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "-d", "--idle-timeout", "1m", "--jail")), CLI_EXIT_USAGE);
	/* --jail-uid 0: root in the jail, gid 0, with a file server's
	 * capabilities (and binding a published port below 1024 only where
	 * one is: it is given up before the listeners are made) */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail", "--jail-uid", "0")), 0);
	assert_int_equal(f->o.jail.uid, 0);
	assert_int_equal(f->o.jail.gid, 0);
	assert_int_equal(f->o.jail.low_ports, 0);
	assert_int_equal(f->o.jail.lock_fd, -1);
	assert_true(jail_root_caps(&f->o.jail) == JAIL_ROOT_CAPS);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail", "--publish", "127.0.0.1:1:*", "--jail-uid", "0")), 0);
	assert_int_equal(f->o.jail.low_ports, 1);
	assert_true(jail_root_caps(&f->o.jail) == (JAIL_ROOT_CAPS | 1ull << CAP_NET_BIND_SERVICE));
	assert_true(!(JAIL_ROOT_CAPS & (1ull << CAP_SYS_ADMIN | 1ull << CAP_SETUID | 1ull << CAP_KILL |
					1ull << CAP_SYS_PTRACE | 1ull << CAP_NET_ADMIN | 1ull << CAP_MKNOD)));
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail", "--publish", "8080:80", "--jail-uid", "0")), 0);
	assert_int_equal(f->o.jail.low_ports, 0);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail", "--jail-uid", "0", "--jail-gid", "5")), CLI_EXIT_USAGE);
	/* any other uid drops every capability: low ports are bound before */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--jail", "--publish", "127.0.0.1:1:*", "--jail-uid", "7")), 0);
	assert_int_equal(f->o.jail.low_ports, 0);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "-d", "--idle-timeout", "1m")), 0);
	assert_int_equal(f->o.idle_timeout_s, 60);
	assert_string_equal(f->o.idle_timeout_arg, "1m");
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--in-place")), CLI_EXIT_USAGE);
	/* the MMDS's options are run's too */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--metadata", "/tmp/m.json", "--mmds-size-limit", "4096")), 0);
	assert_string_equal(f->o.fc.metadata, "/tmp/m.json");
	assert_int_equal(f->o.fc.mmds_limit, 4096);
}

/* --disk-size: a sandbox of an image only (its copy of the root grows),
 * checked sizes, never on a restore (the snapshot has its disk). */
static void run_disk_size(void **state)
{
	struct fx *f = *state;
	char err[512];

	assert_int_equal(parse(f, 0, 0, ARGV("run", "--image-root", "/tmp/r.ext4", "--disk-size", "8G")), 0);
	assert_int_equal(f->o.disk_mib, 8192);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--image-root", "/tmp/r.ext4", "--disk-size=512M")), 0);
	assert_int_equal(f->o.disk_mib, 512);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--image-root", "/tmp/r.ext4")), 0);
	assert_int_equal(f->o.disk_mib, 0); /* the default: IMAGE_DISK_DEFAULT_MIB */
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--image-root", "/tmp/r.ext4", "--disk-size", "4")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--image-root", "/tmp/r.ext4", "--disk-size", "lots")),
			 CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 0, ARGV("run", "--image-root", "/tmp/r.ext4", "--disk-size", "32T")),
			 CLI_EXIT_USAGE);
	assert_int_equal(parse_err(f, 0, 0, ARGV("run", "--disk", "path=/tmp/a.img", "--disk-size", "8G"), err,
				   sizeof(err)),
			 CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "--disk-size is for a sandbox of an image"));
	assert_int_equal(parse(f, 1, 0, ARGV("restore", "--disk-size", "8G", "/tmp/snap")), CLI_EXIT_USAGE);
}

/* restore: per-clone options into the overrides, DIR anywhere, the VM's
 * shape refused. */
static void restore_overrides(void **state)
{
	struct fx *f = *state;

	assert_int_equal(parse(f, 1, 0,
			       ARGV("restore", "--disk", "path=/tmp/d.img,id=root", "/tmp/snap", "--net",
				    "tap=c0,mac=02:00:00:00:00:05", "--net", "tap=c1", "--vsock", "cid=7",
				    "--fs", "tag=tmp,path=/tmp", "--", "true")),
			 0);
	assert_string_equal(f->o.snapshot_dir, "/tmp/snap");
	assert_int_equal(f->cfg.nr_disks, 0);
	assert_int_equal(f->o.nr_over, 1);
	assert_string_equal(f->o.over[0].id, "root");
	assert_int_equal(f->cfg.nr_nets, 0);
	assert_int_equal(f->o.nr_net_over, 2);
	assert_int_equal(f->o.net_mac_given[0], 1);
	assert_int_equal(f->o.net_mac_given[1], 0);
	assert_int_equal(f->cfg.nr_fs, 0);
	assert_int_equal(f->o.nr_over_fs, 1);
	/* cid= alone: the socket keeps its default */
	assert_int_equal(f->cfg.vsock.cid, 7);
	assert_string_equal(f->cfg.vsock.uds, "");
	assert_int_equal(f->o.vsock_given, 1);
	assert_string_equal(f->o.cmd.argv[0], "true");

	assert_int_equal(parse(f, 1, 0, ARGV("restore", "/tmp/snap", "--kernel", "/tmp/k")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 1, 0, ARGV("restore", "--mem", "256", "/tmp/snap")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 1, 0, ARGV("restore", "--image-root", "/tmp/r", "/tmp/snap")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 1, 0, ARGV("restore", "--name", "x")), CLI_EXIT_USAGE); /* no DIR */
	/* vmm resume's --in-place: restore -d --name N, not jailed */
	assert_int_equal(parse(f, 1, 0, ARGV("restore", "--in-place", "-d", "/tmp/snap")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 1, 0, ARGV("restore", "--in-place", "-d", "--name", "n", "/tmp/snap")), 0);
	assert_int_equal(f->o.in_place, 1);
}

/* restore refuses what the snapshot fixes, naming the option (not its
 * value, which getopt took as the next word). */
static void restore_names_option(void **state)
{
	struct fx *f = *state;
	char err[512];

	assert_int_equal(parse_err(f, 1, 0, ARGV("restore", "/tmp/snap", "--kernel", "/tmp/k"), err, sizeof(err)),
			 CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "restore: --kernel comes from the snapshot"));
	assert_int_equal(parse_err(f, 1, 0, ARGV("restore", "--mem", "256", "/tmp/snap"), err, sizeof(err)),
			 CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "restore: --mem comes from the snapshot"));
	assert_int_equal(parse_err(f, 1, 0, ARGV("restore", "--cpus=2", "/tmp/snap"), err, sizeof(err)),
			 CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "restore: --cpus=2 comes from the snapshot"));
}

/* serve: the VM's shape comes from the API; Firecracker's options. */
static void serve_options(void **state)
{
	struct fx *f = *state;

	assert_int_equal(parse(f, 0, 1,
			       ARGV("serve", "--api-sock", "/tmp/fc.sock", "--level", "Info", "--show-level",
				    "--http-api-max-payload-size", "65536", "--start-time-us", "1", "--id", "vm1")),
			 0);
	assert_string_equal(f->o.api_sock, "/tmp/fc.sock");
	assert_string_equal(f->o.fc.level, "Info");
	assert_int_equal(f->o.fc.show_level, 1);
	assert_int_equal(f->o.fc.max_payload, 65536);
	assert_string_equal(f->o.name, "vm1");
	assert_int_equal(parse(f, 0, 1, ARGV("serve", "--kernel", "/tmp/k")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 1, ARGV("serve", "--disk", "path=/tmp/d")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 1, ARGV("serve", "-d")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 1, ARGV("serve", "--seccomp-filter", "/tmp/f.bpf")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 1, ARGV("serve", "--http-api-max-payload-size", "0")), CLI_EXIT_USAGE);
	assert_int_equal(parse(f, 0, 1, ARGV("serve", "-d", "--idle-timeout", "1m")), CLI_EXIT_USAGE);
}

static void size_parser(void **state)
{
	static const struct {
		const char *s;
		int ok;
		uint64_t bytes;
	} t[] = {
		{ "4096", 1, 4096 },      { "64k", 1, 64 << 10 },   { "8M", 1, 8 << 20 },
		{ "1G", 1, 1ull << 30 },  { "2MiB", 1, 2 << 20 },   { "3MB", 1, 3 << 20 },
		{ "5kib", 1, 5 << 10 },   { "0", 1, 0 },            { "", 0, 0 },
		{ "-1", 0, 0 },           { "1B", 0, 0 },           { "1T", 0, 0 },
		{ "8M ", 0, 0 },          { "M", 0, 0 },            { "1048576G", 1, 1ull << 50 },
		{ "1048577G", 0, 0 },     { "99999999999999999999", 0, 0 },
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t b = 12345;
		int r = run_parse_size(t[i].s, &b);

		if (t[i].ok) {
			assert_int_equal(r, 0);
			assert_int_equal(b, t[i].bytes);
		} else {
			assert_int_equal(r, -EINVAL);
			assert_int_equal(b, 12345);
		}
	}
}

static void token_check(void **state)
{
	char long_tok[129];

	(void)state;
	assert_true(run_token_ok("abc-DEF_0.9"));
	assert_false(run_token_ok(""));
	assert_false(run_token_ok("a b"));
	assert_false(run_token_ok("a/b"));
	assert_false(run_token_ok("tok\n"));
	memset(long_tok, 'a', sizeof(long_tok) - 1);
	long_tok[127] = '\0';
	assert_true(run_token_ok(long_tok));
	long_tok[127] = 'a';
	long_tok[128] = '\0';
	assert_false(run_token_ok(long_tok));
}

/* --publish's forms, and "*" (each connection's own destination port,
 * vmm-oci's pod port-forward) written back as it was given. */
static void publish_forms(void **state)
{
	struct publish p;
	char text[64];

	(void)state;
	assert_int_equal(publish_parse("8080:80", &p), 0);
	assert_int_equal(p.guest_port, 80);
	publish_format(&p, text, sizeof(text));
	assert_string_equal(text, "127.0.0.1:8080:80");
	assert_int_equal(publish_parse("0.0.0.0:9000:*", &p), 0);
	assert_int_equal(p.guest_port, 0);
	assert_int_equal(ntohs(p.addr.sin_port), 9000);
	publish_format(&p, text, sizeof(text));
	assert_string_equal(text, "0.0.0.0:9000:*");
	assert_int_equal(publish_parse("9000:**", &p), -EINVAL);
	assert_int_equal(publish_parse("*:80", &p), -EINVAL);
	assert_int_equal(publish_parse("9000:0", &p), -EINVAL);
	assert_int_equal(publish_parse("9000:65536", &p), -EINVAL);
	assert_int_equal(publish_parse("9000:", &p), -EINVAL);
	assert_int_equal(publish_parse("no.such.addr:9000:80", &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(run_defaults, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(run_devices_and_cmd, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(run_detached_cmd, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(run_stops_at_command, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(run_refusals, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(run_disk_size, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(restore_overrides, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(restore_names_option, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(serve_options, fx_setup, fx_teardown),
		cmocka_unit_test(size_parser),
		cmocka_unit_test(token_check),
		cmocka_unit_test(publish_forms),
		cmocka_unit_test_setup_teardown(run_drives, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
