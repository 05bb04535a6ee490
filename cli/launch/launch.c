/* Starting a sandbox: the sequence run, restore, serve and create share (launch.h). */
#include "cli/launch/launch.h"
#include "cli/sandbox/sandbox.h"
#include "cli/images/images.h"
#include "vmm/wire/api.h"
#include "cli/util/util.h"
#include "cli/launch/publish.h"
#include "cli/launch/run_detach.h"
#include "cli/launch/run_fc.h"
#include "cli/launch/run_helper.h"
#include "cli/launch/run_jail.h"
#include "cli/launch/run_opts.h"
#include "cli/launch/run_drives.h"
#include "cli/launch/run_restore.h"
#include "cli/egress/egress.h"
#include "cli/launch/jail.h"
#include "vmm/vm_standby.h"
#include "vmm/api/control.h"
#include "vmm/api/fcapi.h"
#include "vmm/base/zpages.h"
#include "vmm/vm_snapshot.h"
#include "vmm/seccomp.h"
#include "vmm/base/uffd.h"
#include "vmm/base/unixsock.h"
#include "vmm/wire/proto.h"
#include "vmm/base/log.h"
#include "vmm/vm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

static int file_exists(const char *p)
{
	return access(p, R_OK) == 0;
}

/* The sandbox's copy P grown to --disk-size, or to the default unless the
 * image is larger already (images.h). 0, or -1 (logged). */
static int grow_root(const char *p, const char *rootfs, unsigned long long disk_mib)
{
	uint64_t want = (disk_mib ? disk_mib : IMAGE_DISK_DEFAULT_MIB) << 20;
	char err[PATH_MAX + 128];
	struct stat st;

	if (stat(p, &st) < 0) {
		log_err("--image: %s: %s", p, strerror(errno));
		return -1;
	}
	if ((uint64_t)st.st_size >= want && !disk_mib)
		return 0; /* a large image keeps its size */
	if (image_root_grow(p, want, err, sizeof(err))) {
		log_err("--disk-size %lluM: %s (image %s)", (unsigned long long)(want >> 20), err, rootfs);
		return -1;
	}
	return 0;
}

/* vmm run --image: the sandbox's own copy of the image's root filesystem
 * (a reflink where the filesystem can, else a sparse copy: docs/images.md),
 * grown to the disk size, becomes disk 0, the root, and guest-init the init. */
static int use_image(struct vm_config *cfg, const struct sandbox *sb, const struct run_opts *o, char *cmdline,
		     size_t len)
{
	const char *rootfs = o->image_root;
	char p[PATH_MAX + 16];
	unsigned i;
	int r;

	if (cfg->nr_disks == VM_MAX_DISKS || (cfg->nr_disks && cfg->disks[0].root)) {
		log_err("--image: the image is the root disk; no --disk ...,root with it, at most %u more disks",
			VM_MAX_DISKS - 1);
		return -EINVAL;
	}
	snprintf(p, sizeof(p), "%s/rootfs.img", sb->dir);
	if ((r = snap_copy_file(rootfs, p))) {
		log_err("--image: copying %s for this sandbox: %s%s", rootfs, strerror(-r),
			r == -ENOSPC ? " (the host's file system under the sandbox folder is full)" : "");
		return r;
	}
	if (grow_root(p, rootfs, o->disk_mib))
		return -EINVAL;
	for (i = cfg->nr_disks; i > 0; i--)
		cfg->disks[i] = cfg->disks[i - 1];
	memset(&cfg->disks[0], 0, sizeof(cfg->disks[0]));
	cfg->disks[0].path = strdup(p);
	cfg->disks[0].root = 1;
	snprintf(cfg->disks[0].id, sizeof(cfg->disks[0].id), "root");
	cfg->nr_disks++;
	if (!cfg->disks[0].path)
		return -ENOMEM;
	if (snprintf(cmdline, len, "%s init=" IMAGE_INIT, cfg->cmdline ? cfg->cmdline : DEFAULT_CMDLINE) >= (int)len)
		return -E2BIG;
	cfg->cmdline = cmdline;
	return 0;
}

/* The console (o->console: stdio, file:PATH or none) into cfg, *fd the
 * file opened (or -1); serial: vmm serve's API, whose PUT /serial wins.
 * 0, or -1 (logged). */
static int console_setup(struct vm_config *cfg, const struct run_opts *o, const struct fcapi *serial, int *fd)
{
	if (!strcmp(o->console, "stdio")) {
		cfg->console_out = STDOUT_FILENO;
		cfg->console_in = STDIN_FILENO;
		/* A terminal: vm_run reads it, in raw mode, while the VMM is
		 * its foreground (`vmm run &` must not stop on it: vmm/base/tty.h). */
		if (isatty(STDIN_FILENO)) {
			cfg->console_tty = 1;
			cfg->console_escape = 1;
		}
	} else if (!strncmp(o->console, "file:", 5)) {
		struct stat cst;

		/* A resume goes on with the console it had. */
		*fd = open(o->console + 5, O_WRONLY | O_CREAT | (o->in_place ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0640);
		if (*fd < 0) {
			log_err("--console %s: %s", o->console, strerror(errno));
			return -1;
		}
		cfg->console_out = *fd;
		/* A regular file is capped (rotated by the VMM's main thread);
		 * a terminal, pipe or device is not ours to rename. */
		if (fstat(*fd, &cst) == 0 && S_ISREG(cst.st_mode))
			cfg->console_path = o->console + 5;
		else
			cfg->console_limit = 0;
	}

	/* PUT /serial: the guest's serial output to that file or FIFO
	 * (opened as Firecracker does: created if missing, not truncated,
	 * non-blocking, so a FIFO nobody reads drops output, not the VM). */
	if (serial && serial->cfg.has_serial) {
		if (*fd >= 0)
			close(*fd);
		*fd = open(serial->cfg.serial_out, O_RDWR | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0600);
		if (*fd < 0) {
			log_err("serial_out_path %s: %s", serial->cfg.serial_out, strerror(errno));
			return -1;
		}
		cfg->console_out = *fd;
		cfg->console_in = -1;
		cfg->console_tty = cfg->console_escape = 0;
		cfg->console_path = NULL;
		cfg->console_limit = 0;
	}
	return 0;
}

/* Standby (a detached sandbox): what a resume passes on (the options
 * that are not in the snapshot), and the keeper that holds the published
 * ports and the control socket while the sandbox sleeps. */
static void standby_prepare(const struct sandbox *sb, const struct run_opts *o, struct publish *pub,
			    const struct control *ctl)
{
	char *rargs[8 + 2 * PUBLISH_MAX], pubs[PUBLISH_MAX][48], egp[PATH_MAX] = "";
	int kfds[PUBLISH_MAX + 1];
	const char *kspec[PUBLISH_MAX + 1];
	unsigned na = 0, nk = 0, i;

	for (i = 0; i < o->nr_pub; i++) {
		publish_format(&pub[i], pubs[i], sizeof(pubs[i]));
		rargs[na++] = "--publish";
		rargs[na++] = pubs[i];
		kfds[nk] = pub[i].fd;
		kspec[nk++] = pubs[i];
	}
	if (o->egress_policy && realpath(o->egress_policy, egp)) {
		rargs[na++] = "--egress-policy";
		rargs[na++] = egp;
	}
	if (o->idle_timeout_arg) {
		rargs[na++] = "--idle-timeout";
		rargs[na++] = (char *)o->idle_timeout_arg;
	}
	if (o->idle_ttl_arg) {
		rargs[na++] = "--idle-ttl";
		rargs[na++] = (char *)o->idle_ttl_arg;
	}
	if (o->no_seccomp)
		rargs[na++] = "--no-seccomp";
	/* A keeper only for what needs one while the sandbox sleeps: its
	 * published ports (a connection wakes it) and a time to live on
	 * standby. Without either, a sandbox on standby holds no process: the
	 * CLI, vmm serve, MCP and the E2B gateway wake it themselves
	 * (sandbox_api_addr), and its control socket refuses until then. */
	if (nk || o->ttl_s > 0 || o->idle_ttl_s > 0) {
		if (ctl->nr_listen) {
			kfds[nk] = ctl->lfd[0];
			kspec[nk++] = "control";
		}
		if (standby_keeper_spawn(sb, kfds, kspec, nk))
			log_warn("sandbox %s: cannot start its standby keeper (vmm suspend will not work)", sb->name);
	}
	if (standby_record_args(sb, rargs, na))
		log_warn("sandbox %s: cannot prepare for standby (vmm suspend will not work)", sb->name);
}

/* The control socket, one of the poll sources vm_run's loop serves. */
static unsigned control_source_pollfds(void *c, struct pollfd *p, int *timeout_ms)
{
	return control_pollfds(c, p, timeout_ms);
}

static void control_source_events(void *c, struct vm *vm, const struct pollfd *p, unsigned n)
{
	control_events(c, vm, p, n);
}

static int serve_control(struct vm *vm, struct control *ctl)
{
	const struct vm_poll_source src = {
		.max = CONTROL_POLLFDS,
		.pollfds = control_source_pollfds,
		.events = control_source_events,
		.arg = ctl,
	};
	int r = vm_add_poll_source(vm, &src);

	if (r)
		log_err("the control socket: %s", strerror(-r));
	return r;
}

/* One launch's state, from its options to its teardown: what the steps of
 * launch_sandbox share. Lives in launch_sandbox's frame; never zeroed
 * whole (path buffers get a NUL in front: zeroing them made pages of this
 * frame resident in every VMM). */
struct launch {
	int restore, check_only, api;
	struct launch_out *out; /* the verb's (launch.h) */
	char kernel_buf[PATH_MAX], initrd_buf[PATH_MAX];
	struct vm_config cfg;
	struct run_opts o;
	struct termios tty_saved;
	int console_file, status, tty_cmd;
	struct vm *vm;
	int detach_ready; /* -d, in the sandbox's process: tells the waiting parent */
	char kvm_cache[PATH_MAX];
	int have_snap;
	char cmdline_buf[4096], token_buf[160];
	char net_spec[VM_MAX_NETS][API_NET_SPEC];
	const char *net_spec_p[VM_MAX_NETS];
	unsigned nr_net_spec;
	char net_text[VM_MAX_NETS * 64];
	/* 113 KiB, on pages of its own: snapshot_open leaves fresh ones that
	 * it need not write alone (zpages.h), so a clone keeps a few of them. */
	struct snapshot *snap;
	/* PUT /snapshot/load's Uffd backend, until vm_create takes it */
	struct uffd_backend ub;
	struct sandbox sb;
	struct control ctl;
	struct helper h;
	pid_t child;
	int ran;
	char jail_kernel[PATH_MAX], jail_initrd[PATH_MAX], jail_root[PATH_MAX + 8];
	char synced[PATH_MAX + 32];
	char image_cmdline[4096];
	long long was_created, was_expires; /* in_place: the record's before */
	/* On the heap: a published port's connection threads may outlive this
	 * frame by a moment at exit (see launch_release). */
	struct publish *pub;
	char pub_text[PUBLISH_MAX * 48];
	struct sandbox_addr api_addr;
	char console_buf[PATH_MAX + 64];
	struct mmds *md;   /* --net ...,mmds without the API: the CLI's store */
	struct egress *eg; /* on the heap, as pub above */
	char egress_cmdline[4096], egress_log[PATH_MAX + 16];
	struct egress_start_args eg_args;
	struct tap taps[VM_MAX_NETS];
};

/* The state before the options: cfg's defaults. 0, or -1 (out of memory;
 * nothing left to free). */
static int launch_init(struct launch *L, int restore, int check_only, int api)
{
	unsigned i;

	/* L is zero-filled (zpages_alloc): only what is not zero is set.
	 * Clearing its parts again (the sandbox record, the control socket,
	 * the options, the VM's configuration) made 13 of its 24 pages
	 * resident for the VM's life in every clone (docs/perf.md,
	 * "Density"). */
	L->restore = restore;
	L->check_only = check_only;
	L->api = api;
	L->console_file = -1;
	L->detach_ready = -1;
	L->snap = zpages_alloc(sizeof(*L->snap));
	L->ub.gm.fd = -1;
	L->ub.conn.uffd = -1;
	L->ub.conn.sock = -1;
	L->h.ready_rd = -1;
	L->h.notify_fd = -1;
	L->child = -1;
	/* --publish's table (68 KiB) on pages of its own too: calloc
	 * cleared all of it, resident in every sandbox that publishes
	 * nothing (docs/perf.md, "Density"). */
	L->pub = zpages_alloc(PUBLISH_MAX * sizeof(*L->pub));
	L->api_addr.port = API_VSOCK_PORT;
	L->eg_args.log = L->egress_log;
	for (i = 0; i < VM_MAX_NETS; i++)
		L->taps[i].fd = -1;
	run_opts_init(&L->o, restore, api, L->pub);
	if (!L->pub || !L->snap) {
		zpages_free(L->pub, PUBLISH_MAX * sizeof(*L->pub));
		zpages_free(L->snap, sizeof(*L->snap));
		return -1;
	}
	L->cfg.t0_ns = log_now_ns();
	L->cfg.pre_main_ns = phase_cpu_ns();
	L->cfg.cpus = 1;
	L->cfg.console_in = -1;
	L->cfg.console_out = -1;
	L->cfg.console_limit = 8ull << 20; /* --console-log-size */
	L->cfg.host_emulates_ring0 = host_emulates_ring0();
	L->cfg.kvm_path = getenv("VMM_KVM_DEVICE"); /* default /dev/kvm; tests point it elsewhere */
	/* KVM's supported CPUID and MSRs from a per-host cache
	 * (vmm/kvmcache.h): only with VMM_KVM_CACHE=on. Measured on a nested
	 * KVM, reading the cache (~55 us) is no cheaper than asking KVM
	 * (39-59 us): docs/perf.md. */
	if (!L->cfg.kvm_path && getenv("VMM_KVM_CACHE") && !strcmp(getenv("VMM_KVM_CACHE"), "on") &&
	    cli_cache_file("kvm-supported", L->kvm_cache, sizeof(L->kvm_cache)) == 0)
		L->cfg.kvm_cache = L->kvm_cache;
	L->cfg.seccomp = SC_DEFAULT_ON;
	/* guest-init's ready notice (docs/vsock.md); not for `serve`, whose
	 * guests and vsock sockets are the Firecracker client's. */
	L->cfg.ready_notice = !api;
	return 0;
}

/* The snapshot's named drives as the clone's (run_drives.h). 0, or 1
 * with L->status set after the message. */
static int launch_snap_drives(struct launch *L)
{
	int r = restore_drives(L->snap, &L->o, L->o.err, sizeof(L->o.err));

	if (!r)
		return 0;
	L->status = r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
	return 1;
}

/* The options, the snapshot they name, and vmm create's check. 0 to go
 * on; else 1 with L->status the answer. */
static int launch_options(struct launch *L, int argc, char **argv)
{
	if ((L->status = run_opts_parse(&L->o, &L->cfg, argc, argv)))
		return 1;
	if (L->o.snapshot_dir) {
		if (snapshot_open(L->snap, L->o.snapshot_dir)) {
			L->status = CLI_EXIT_ERROR;
			return 1;
		}
		L->have_snap = 1;
		/* its drives: the allow list for the clone's name, before
		 * anything runs (a refusal stops here, as vmm run's does) */
		if (launch_snap_drives(L))
			return 1;
	}
	if ((L->status = run_opts_check(&L->o, argc, argv)))
		return 1;
	if (L->check_only) {
		/* vmm create: the options are good; the kernel is there. */
		if (!L->restore && L->cfg.kernel && !file_exists(L->cfg.kernel)) {
			log_err("--kernel %s: %s", L->cfg.kernel, strerror(errno));
			L->status = CLI_EXIT_ERROR;
		}
		if (L->o.detach || L->o.cmd.argv)
			L->status = run_bad_usage(&L->o, "%s", "vmm create takes the options of vmm run, without -d or -- CMD");
		return 1;
	}
	return 0;
}

/* The sandbox's folder (a resume adopts its standby record, keeping its
 * times), then the stop signals blocked. 0, or 1 (L->status). */
static int launch_folder(struct launch *L)
{
	sigset_t stops;

	if (L->o.in_place) {
		/* 17 KiB, on the heap for the moment it is needed. */
		struct sandbox_status *was = malloc(sizeof(*was));

		if (!was || sandbox_status(L->o.name, was)) {
			free(was);
			L->status = CLI_EXIT_ERROR;
			return 1;
		}
		L->was_created = was->created;
		L->was_expires = was->expires;
		/* a resume keeps the record's labels unless given anew */
		if (!L->o.labels_text[0])
			snprintf(L->o.labels_text, sizeof(L->o.labels_text), "%s", was->labels);
		free(was);
	}
	if (sandbox_create(&L->sb, L->o.name, L->o.in_place ? SANDBOX_ADOPT_STANDBY : L->o.adopt) ||
	    (L->o.jail.enabled && sandbox_make_rw(&L->sb))) {
		L->status = CLI_EXIT_ERROR;
		return 1;
	}
	if (L->restore) {
		/* A clone is ready once synced (detach_self waits for it, and
		 * takes it as the API's answer): never an earlier run's file. */
		char sp[PATH_MAX + 32];

		snprintf(sp, sizeof(sp), "%s/synced", L->sb.rw);
		unlink(sp);
	}
	if (L->o.in_place) {
		/* The next suspend writes only what this run dirties, into
		 * standby/ in place: the bitmap counts from the state restored
		 * here (vm_restore_state sets vm->snap_dir/snap_id to it). */
		L->cfg.track_dirty = 1;
	}
	/* From the folder on, a stop signal (Ctrl-C, SIGTERM) waits for
	 * vm_run, which stops the VM and the teardown removes everything:
	 * killed here by its default action, the VMM left a `dead` record.
	 * vmm serve too: its pre-boot loop takes them through a signalfd,
	 * and from InstanceStart's 204 (sent before vm_run) a client's
	 * SIGTERM must find them blocked, not kill the VMM. */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	sigaddset(&stops, SIGQUIT);
	sigaddset(&stops, VM_INTERRUPT_SIGNAL); /* from the helper */
	pthread_sigmask(SIG_BLOCK, &stops, NULL);
	return 0;
}

/* The egress policy (before -d: a missing one is an error on this
 * terminal), -d (the parent returns here), the time to live and standby.
 * 0, or 1 (L->status). */
static int launch_detach(struct launch *L)
{
	struct run_opts *o = &L->o;

	if (o->egress_policy) {
		L->eg = malloc(sizeof(*L->eg));
		if (!L->eg || egress_load(L->eg, o->egress_policy, L->sb.name)) {
			free(L->eg);
			L->eg = NULL;
			L->status = CLI_EXIT_ERROR;
			return 1;
		}
	}
	if (o->detach) {
		if (!o->console_explicit) {
			snprintf(L->console_buf, sizeof(L->console_buf), "file:%s/console.log", L->sb.rw);
			o->console = L->console_buf;
		}
		L->status = detach_self(&L->sb, o->ready_s, L->restore, o->dcmd.argv ? &o->dcmd : NULL,
					&L->detach_ready, o->quiet, L->cfg.t0_ns, L->out->result, L->out->diag,
					L->out->err, sizeof(L->out->err));
		if (L->status >= 0) {
			L->sb.created = 0; /* the sandbox's own process owns the folder now */
			return 1;
		}
		L->status = 0;
	}
	if (o->in_place && L->was_expires) {
		/* --ttl counts standby too: what is left of it. */
		long long left = L->was_expires - (long long)time(NULL);

		o->ttl_s = left > 0 ? left : 1;
	}
	if (o->ttl_s)
		L->cfg.expire_ns = L->cfg.t0_ns + (uint64_t)o->ttl_s * 1000000000ull;
	if (o->detach && !o->jail.enabled) {
		L->cfg.standby_dir = L->sb.dir; /* vmm suspend, --idle-timeout */
		L->cfg.idle_timeout_ns = (uint64_t)o->idle_timeout_s * 1000000000ull;
	}
	return 0;
}

/* No --kernel: the installed one (and its initramfs where there is no
 * root disk). 0, or -1 (logged). */
static int launch_default_kernel(struct launch *L)
{
	char dir[PATH_MAX], looked[2 * PATH_MAX + 64];

	if (cli_lib_dir(dir, sizeof(dir) - 32, looked, sizeof(looked)) == 0) {
		snprintf(L->kernel_buf, sizeof(L->kernel_buf), "%.4000s/kernel/vmlinux", dir);
		snprintf(L->initrd_buf, sizeof(L->initrd_buf), "%.4000s/initramfs.cpio", dir);
	}
	if (!L->kernel_buf[0] || !file_exists(L->kernel_buf)) {
		log_err("no --kernel given and no kernel/vmlinux in %s: give --kernel PATH, "
			"install vmm with its kernel (make install), or run 'make' in its source tree",
			looked[0] ? looked : L->kernel_buf);
		return -1;
	}
	L->cfg.kernel = L->kernel_buf;
	if (!L->cfg.initrd && !(L->cfg.nr_disks && L->cfg.disks[0].root) && file_exists(L->initrd_buf))
		L->cfg.initrd = L->initrd_buf;
	return 0;
}

/* cfg.cmdline with " FMT..." appended, in buf. 0, or -1 (logged). */
static int launch_cmdline_add(struct vm_config *cfg, char *buf, size_t len, const char *what, unsigned v)
{
	int n = what ? snprintf(buf, len, "%s %s=%u", cfg->cmdline, what, v)
		     : snprintf(buf, len, "%s vmm.shell=0", cfg->cmdline);

	if (n < 0 || (size_t)n >= len) {
		log_err("kernel command line too long");
		return -1;
	}
	cfg->cmdline = buf;
	return 0;
}

/* A fresh boot's configuration: the image, memory and API device, the
 * token, the kernel and its command line, the CPU template. 0, or -1. */
static int launch_boot_config(struct launch *L)
{
	struct vm_config *cfg = &L->cfg;
	struct run_opts *o = &L->o;

	/* Every sandbox has its API device unless told otherwise (the API's
	 * have what PUT /vsock said). */
	if (!L->api) {
		if (o->image_root && use_image(cfg, &L->sb, o, L->image_cmdline, sizeof(L->image_cmdline)))
			return -1;
		cfg->mem_bytes = o->mib << 20;
		if (!o->vsock_given) {
			cfg->vsock.cid = 3;
			cfg->vsock.uds[0] = '\0';
		}
		cfg->has_vsock = 1;
		/* Memory the guest frees goes back to the host: a balloon
		 * that asks for nothing, with free page reporting (virtio
		 * 1.2, 5.5.6.7: the driver hands free blocks to the device,
		 * which gives them back with madvise). A guest without the
		 * driver never sees it used. */
		if (!cfg->has_balloon && !o->no_balloon) {
			cfg->has_balloon = 1;
			cfg->balloon = (struct balloon_options){ .deflate_on_oom = 1, .free_page_reporting = 1 };
		}
	}
	if (o->token)
		snprintf(L->token_buf, sizeof(L->token_buf), "%s", o->token);
	else if (run_random_token(L->token_buf, sizeof(L->token_buf)))
		return -1;
	if (!cfg->kernel && launch_default_kernel(L))
		return -1;
	log_debug("kernel %s, initramfs %s", cfg->kernel, cfg->initrd ? cfg->initrd : "(none)");
	if (!cfg->cmdline)
		cfg->cmdline = DEFAULT_CMDLINE;
	if (o->cmd.argv && launch_cmdline_add(cfg, L->cmdline_buf, sizeof(L->cmdline_buf), NULL, 0))
		return -1;
	/* guest-init's side of the proxy (docs/egress.md) */
	if (L->eg && launch_cmdline_add(cfg, L->egress_cmdline, sizeof(L->egress_cmdline), "vmm.egress",
					EGRESS_VSOCK_PORT))
		return -1;
	if (!cfg->tmpl_explicit && cfg->host_emulates_ring0) {
		cfg->tmpl = CPU_TEMPLATE_SAFE;
		log_debug("this host's KVM emulates guest ring 0 (kvm_pvm): using CPU template 'safe'");
	}
	return 0;
}

/* The VM's configuration: vmm serve's API (which may turn this into a
 * snapshot load), a restore's or a boot's, the token, the vsock socket and
 * the console. 0, or 1 (L->status). */
static int launch_configure(struct launch *L)
{
	struct vm_config *cfg = &L->cfg;

	if (L->api) {
		if (run_fc_serve_configure(&L->ctl, &L->o, &L->sb, cfg, L->snap, &L->ub, &L->status))
			return 1;
		if (L->ctl.api->pending == FCAPI_LOAD) {
			L->have_snap = 1;
			L->restore = 1;
			cfg->track_dirty |= L->ctl.api->cfg.track_dirty_pages;
			cfg->start_paused = !L->ctl.api->load_resume;
			if (L->ub.gm.map)
				cfg->uffd = &L->ub;
		}
	}
	if (L->restore && (L->status = restore_configure(cfg, L->snap, &L->o, &L->sb, L->api ? &L->ctl.api->mmds : NULL,
							 L->token_buf, sizeof(L->token_buf), L->net_spec,
							 &L->nr_net_spec)))
		return 1;
	if (!L->restore && launch_boot_config(L)) {
		L->status = CLI_EXIT_ERROR;
		return 1;
	}
	cfg->api_token = L->token_buf;
	if (cfg->has_vsock && !cfg->vsock.uds[0])
		snprintf(cfg->vsock.uds, sizeof(cfg->vsock.uds), "%s", L->sb.vsock);
	if (console_setup(cfg, &L->o, L->api && !L->restore ? L->ctl.api : NULL, &L->console_file)) {
		L->status = CLI_EXIT_ERROR;
		return 1;
	}
	return 0;
}

/* Before the VM: its disks checked and listed, the cgroup and the jail,
 * the CLI's MMDS store. 0, or 1 (L->status). */
static int launch_confine(struct launch *L)
{
	struct vm_config *cfg = &L->cfg;
	struct run_opts *o = &L->o;

	/* A disk another sandbox holds: refused here, naming it (the
	 * device's lock, when the VMM opens it, is what guarantees it). */
	if (disk_locks_check(cfg, L->sb.name)) {
		L->status = CLI_EXIT_ERROR;
		return 1;
	}
	if (disk_locks_record(L->sb.dir, cfg))
		log_warn("cannot list the disks in %s: another VMM refused one will not name this sandbox", L->sb.dir);

	snprintf(L->egress_log, sizeof(L->egress_log), "%s/egress.log", L->sb.dir);
	L->eg_args.eg = L->eg;
	L->eg_args.uds = cfg->vsock.uds;
	if (L->eg)
		L->eg->seccomp = cfg->seccomp;
	/* The cgroup first (as root, from the host's view), then the jail:
	 * still one thread, and everything vm_create opens is bound in. */
	if (jail_cgroup(&o->jail, L->sb.name, cfg->cpus) ||
	    (o->jail.enabled && (run_jail_prepare(&o->jail, cfg, &L->sb, &L->eg_args, L->taps) ||
				 run_jail_setup(&o->jail, cfg, L->restore ? L->snap : NULL, &L->sb, L->jail_kernel,
						L->jail_initrd, L->jail_root, sizeof(L->jail_root))))) {
		L->status = CLI_EXIT_ERROR;
		return 1;
	}
	if (o->jail.enabled) {
		L->sb.pid = o->jail.host_pid;
		L->sb.start_time = o->jail.host_start;
		L->cfg.host_pid = o->jail.host_pid;
	}
	if (!L->api && (L->status = run_fc_mmds(o, cfg, &L->md, o->fc.metadata, o->fc.mmds_limit,
						 L->have_snap ? &L->snap->conf.mmds : NULL)))
		return 1;
	return 0;
}

/* The record's text of the VM's interfaces and published ports. */
static void launch_info_text(struct launch *L)
{
	unsigned i;

	for (i = 0; i < L->cfg.nr_nets; i++) {
		size_t n = strlen(L->net_text);
		char mac[18], ip[INET_ADDRSTRLEN] = "";

		net_format_mac(L->vm->nets[i]->config.mac, mac);
		if (L->cfg.nets[i].ip)
			inet_ntop(AF_INET, &L->cfg.nets[i].ip, ip, sizeof(ip));
		snprintf(L->net_text + n, sizeof(L->net_text) - n, "%s%s=%s%s%s", i ? "," : "",
			 L->vm->nets[i]->tap.name, mac, ip[0] ? "/" : "", ip);
	}
	for (i = 0; i < L->o.nr_pub; i++) {
		size_t n = strlen(L->pub_text);

		publish_format(&L->pub[i], L->pub_text + n, sizeof(L->pub_text) - n - 1);
		if (i + 1 < L->o.nr_pub)
			strcat(L->pub_text, ",");
	}
}

/* The built VM made known: its control socket (a resume's from the
 * keeper) served by vm_run, the sandbox's record published, vmm serve's
 * client answered. 0, or 1 (L->status). */
static int launch_announce(struct launch *L)
{
	struct vm_config *cfg = &L->cfg;
	struct sandbox_info info = {
		.kind = L->restore ? "restore" : "run",
		.source = L->restore ? L->snap->dir : cfg->kernel,
		.cpus = L->vm->nr_vcpus,
		.mem_mib = cfg->mem_bytes >> 20,
		.ttl_s = L->o.ttl_s,
		.detached = L->o.detach,
		.publish = L->pub_text,
		.net = L->net_text,
		.image = L->o.image_ref,
		.drives = L->o.drives_text,
		.labels = L->o.labels_text,
		.created = L->was_created,
		.expires = L->was_expires,
	};
	int cfd;

	launch_info_text(L);
	cfd = L->o.in_place ? standby_listen_fd("control") : -1;
	if ((!L->api && (cfd >= 0 ? control_open_fd(&L->ctl, cfd, L->sb.control, L->sb.name)
				  : control_open(&L->ctl, L->sb.control, L->sb.name))) ||
	    sandbox_publish(&L->sb, L->token_buf, &info) || serve_control(L->vm, &L->ctl)) {
		L->status = CLI_EXIT_ERROR;
		return 1;
	}
	if (L->api) {
		/* vmm exec NAME finds the guest API at vsock.sock in the folder,
		 * wherever PUT /vsock put the socket. */
		if (cfg->has_vsock && strcmp(cfg->vsock.uds, L->sb.vsock) && symlink(cfg->vsock.uds, L->sb.vsock) < 0)
			log_warn("cannot link %s to the vsock socket %s: %s", L->sb.vsock, cfg->vsock.uds,
				 strerror(errno));
		control_finish(&L->ctl, L->vm, NULL); /* InstanceStart or the snapshot load: done */
	}
	log_debug("kernel command line: %s", L->vm->cmdline);
	/* vmm exec only where there is a guest API to reach (a vsock device) */
	if (cfg->has_vsock)
		log_info("sandbox %s%s (vmm exec %s -- CMD; state in %s)", L->sb.name,
			 L->restore ? " restored" : "", L->sb.name, L->sb.dir);
	else
		log_info("sandbox %s%s (no vsock device: no vmm exec; state in %s)", L->sb.name,
			 L->restore ? " restored" : "", L->sb.dir);
	return 0;
}

/* The sandbox's host services: the egress proxy, the published ports, the
 * standby keeper, then the jail's drop of root. 0, or 1 (L->status). */
static int launch_services(struct launch *L)
{
	struct vm_config *cfg = &L->cfg;
	struct run_opts *o = &L->o;
	unsigned i;

	L->api_addr.uds = cfg->vsock.uds;
	L->api_addr.token = L->token_buf;
	/* A socket path too long for sun_path: the publish threads and the
	 * helper reach it through its folder, opened now (their filters
	 * allow no open). */
	if (cfg->has_vsock && !unix_path_fits(cfg->vsock.uds)) {
		int d = unix_dir_open(cfg->vsock.uds);

		if (d < 0) {
			log_err("the vsock socket's folder %s: %s", cfg->vsock.uds, strerror(-d));
			L->status = CLI_EXIT_ERROR;
			return 1;
		}
		L->api_addr.uds_dir = d;
	}
	if (L->eg && !o->jail.enabled) { /* jailed: the companion process runs it */
		if (!cfg->has_vsock || egress_start(L->eg, cfg->vsock.uds, L->egress_log)) {
			if (!cfg->has_vsock)
				log_err("--egress-policy needs the sandbox's vsock device");
			L->status = CLI_EXIT_ERROR;
			return 1;
		}
	}
	if (o->no_seccomp)
		log_warn("--no-seccomp: this VMM runs WITHOUT its system call allow-lists; a guest "
			 "that breaks into it reaches the whole kernel API (debugging only)");
	for (i = 0; i < o->nr_pub; i++) {
		L->pub[i].seccomp = cfg->seccomp;
		if (!cfg->has_vsock || publish_start(&L->pub[i], &L->api_addr)) {
			if (!cfg->has_vsock)
				log_err("--publish needs the sandbox's vsock device");
			L->status = CLI_EXIT_ERROR;
			return 1;
		}
	}
	/* A resume: the keeper's sockets this VMM did not take are closed, and
	 * its variable goes, so nothing started from here inherits either. */
	standby_listen_release();
	/* Standby (a detached sandbox): what a resume passes on, and the
	 * keeper that holds the published ports and the control socket while
	 * the sandbox sleeps. Before the allow-lists (the keeper is forked). */
	if (cfg->standby_dir)
		standby_prepare(&L->sb, o, L->pub, &L->ctl);
	/* Built: the jailed VMM gives up root before the guest runs. */
	if (o->jail.enabled && jail_drop(&o->jail, L->sb.dir)) {
		L->status = CLI_EXIT_ERROR;
		return 1;
	}
	return 0;
}

/* The helper (run -- CMD, a restore's sync) and what it is told. 0, or 1
 * (L->status). */
static int launch_helper(struct launch *L)
{
	struct helper *h = &L->h;
	unsigned i;

	h->a = &L->api_addr;
	h->cmd = L->o.cmd.argv ? &L->o.cmd : NULL;
	h->restored = L->restore;
	h->seccomp = L->cfg.seccomp;
	h->ready_s = L->o.ready_s;
	snprintf(L->synced, sizeof(L->synced), "%s/synced", L->sb.rw);
	h->synced = L->synced;
	for (i = 0; i < L->nr_net_spec; i++)
		L->net_spec_p[i] = L->net_spec[i];
	h->nets = L->net_spec_p;
	h->nr_nets = L->nr_net_spec;
	h->egress_port = L->eg ? EGRESS_VSOCK_PORT : 0;
	/* run -- CMD: the status line while it starts (not -q) */
	h->status_on = h->cmd && !L->o.quiet;
	h->status_tty = isatty(STDERR_FILENO);
	h->t0_ns = L->cfg.t0_ns;
	h->name = L->sb.name;
	/* -t: the helper's raw mode, to put back if it is killed. */
	L->tty_cmd = h->cmd && L->o.cmd.tty && tty_is_foreground(STDIN_FILENO) &&
		     tcgetattr(STDIN_FILENO, &L->tty_saved) == 0;
	h->notify_fd = L->detach_ready;
	if ((h->cmd || (L->restore && L->cfg.has_vsock)) && helper_start(L->vm, h, &L->child)) {
		L->status = CLI_EXIT_ERROR;
		return 1;
	}
	/* No helper: the boot marker (or ready notice) tells the parent, and
	 * 'K' before it (kernel up) its status line. */
	if (L->vm->marker_fd < 0) {
		L->vm->marker_fd = L->detach_ready; /* helper_run_vm closes it */
		L->detach_ready = -1;
	}
	return 0;
}

/* The guest runs: the helper, the console's hint, a resume's standby
 * state taken, then vm_run to its end. 0, or 1 (L->status). */
static int launch_run(struct launch *L)
{
	if (launch_helper(L))
		return 1;
	/* The interactive console: how to leave it, once. */
	if (L->cfg.console_tty && L->cfg.console_escape && !L->o.quiet)
		log_info("sandbox %s: console on this terminal; Ctrl-A x stops the VM (Ctrl-A Ctrl-A types a Ctrl-A)",
			 L->sb.name);
	/* A resume takes its state now, before the guest runs again (its
	 * disks then move on: never restore this state twice). */
	if (L->o.in_place) {
		int r = standby_consume(L->sb.dir);
		char sp[PATH_MAX + 32];

		if (r) {
			log_err("resume: cannot take the standby state: %s", strerror(-r));
			L->status = CLI_EXIT_ERROR;
			return 1;
		}
		snprintf(sp, sizeof(sp), "%s/" STANDBY_SINCE, L->sb.dir);
		unlink(sp);
		L->o.in_place = 0; /* from here on a failure is the running sandbox's */
	}
	L->status = helper_run_vm(L->vm, &L->h, L->child);
	L->ran = 1;
	return 0;
}

/* After the run: a suspended sandbox keeps its folder for the keeper; a
 * detached one leaves its record; the terminal back from a killed -t. */
static void launch_after_run(struct launch *L)
{
	const char *linger;

	if (atomic_load(&L->vm->exit_reason) == VM_EXIT_STANDBY) {
		/* Suspended: the folder, its token, config and sockets' paths
		 * stay; the keeper listens on the control socket and ports. */
		char since[32], sp[PATH_MAX + 32];
		int sfd;

		snprintf(since, sizeof(since), "%lld\n", (long long)time(NULL));
		snprintf(sp, sizeof(sp), "%s/" STANDBY_SINCE, L->sb.dir);
		sfd = open(sp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (sfd >= 0) {
			if (write(sfd, since, strlen(since)) < 0)
				log_warn("%s: %s", sp, strerror(errno));
			close(sfd);
		}
		L->ctl.keep_paths = 1;
		L->sb.created = 0;
		L->o.detach = 0;
	}
	/* A detached sandbox leaves its record for `vmm ls`/`logs` until
	 * `vmm rm`; one whose time ran out is removed, as --ttl promises. */
	if (L->o.detach && atomic_load(&L->vm->exit_reason) != VM_EXIT_EXPIRED)
		sandbox_exited(&L->sb, L->status, L->vm->exit_msg);
	/* Tests only: the teardown after the record went, made long, so that
	 * a `vmm rm -f` that took the record's going for the VMM's shows
	 * (tests/guests/run.sh; cli/sandbox/sandbox.c, wait_gone). */
	linger = getenv("VMM_TEST_LINGER_MS");
	if (linger)
		usleep((useconds_t)strtoul(linger, NULL, 10) * 1000);
	/* The helper of `-t -- CMD`, stopped in raw mode (SIGKILL:
	 * helper_run_vm), leaves the terminal to us. */
	if (L->tty_cmd && tty_is_foreground(STDIN_FILENO))
		tcsetattr(STDIN_FILENO, TCSANOW, &L->tty_saved);
}

/* The last of the teardown, whatever step failed: vmm serve's waiting
 * client answered, the control socket closed, the options' disks and
 * shares freed, the folder kept or removed, the snapshot closed, the
 * egress proxy, publish state and MMDS store released. */
static void launch_release(struct launch *L)
{
	unsigned i;

	if (L->ctl.api && L->ctl.api->pending != FCAPI_NONE)
		control_finish(&L->ctl, NULL, "the microVM could not be started (the VMM's log says why)");
	control_close(&L->ctl);
	while (L->cfg.nr_disks > 0)
		blk_options_free(&L->cfg.disks[--L->cfg.nr_disks]);
	while (L->o.nr_over > 0)
		blk_options_free(&L->o.over[--L->o.nr_over]);
	while (L->cfg.nr_fs > 0)
		fs_options_free(&L->cfg.fs[--L->cfg.nr_fs]);
	while (L->o.nr_over_fs > 0)
		fs_options_free(&L->o.over_fs[--L->o.nr_over_fs]);
	/* A detached sandbox that failed before it ran keeps its folder (its
	 * vmm.log says why) until vmm rm; `vmm start` keeps its record. */
	if (L->o.in_place && L->sb.created) {
		/* A failed resume: the state stays, the sandbox on standby. */
		L->sb.created = 0;
	} else if (L->o.detach && L->sb.created && !L->ran)
		sandbox_exited(&L->sb, L->status ? L->status : CLI_EXIT_ERROR, "failed to start (vmm logs --vmm)");
	sandbox_remove(&L->sb);
	uffd_backend_close(&L->ub); /* emptied if the VM took it */
	if (L->have_snap)
		snapshot_close(L->snap);
	zpages_free(L->snap, sizeof(*L->snap));
	if (L->eg)
		egress_release(L->eg);
	if (L->detach_ready >= 0)
		close(L->detach_ready);
	for (i = 0; i < L->o.nr_pub && !atomic_load(&L->pub[i].conns); i++) {
	}
	if (i == L->o.nr_pub)
		/* else a connection thread still holds it: the process exits anyway */
		zpages_free(L->pub, PUBLISH_MAX * sizeof(*L->pub));
	if (L->md) {
		mmds_destroy(L->md);
		free(L->md);
	}
	control_free(&L->ctl); /* its MMDS store: the VM's devices are gone */
}

int launch_sandbox(int argc, char **argv, int restore, int check_only, int api, struct launch_out *out)
{
	struct launch *L;
	unsigned i;
	int status;

	out->err[0] = '\0';
	/* On pages of its own (zpages.h), not the stack: it lives as long as
	 * the VM, most of it is never written, and a stack page once touched
	 * stays resident in every idle clone (docs/perf.md, "Density"). */
	L = zpages_alloc(sizeof(*L));
	if (!L) {
		cli_seterr(out->err, sizeof(out->err), -ENOMEM, "the launch state: %s", strerror(ENOMEM));
		return CLI_EXIT_ERROR;
	}
	if (launch_init(L, restore, check_only, api)) {
		zpages_free(L, sizeof(*L));
		return CLI_EXIT_ERROR;
	}
	L->out = out;
	if (launch_options(L, argc, argv) || launch_folder(L) || launch_detach(L) || launch_configure(L))
		goto out_disks;
	if (launch_confine(L))
		goto out_console;
	L->vm = zpages_alloc(sizeof(*L->vm)); /* 29 KiB, not all of it written */
	if (!L->vm) {
		L->status = CLI_EXIT_ERROR;
		goto out_console;
	}
	if (vm_create(L->vm, &L->cfg)) {
		L->status = CLI_EXIT_ERROR;
		if (api && L->vm->start_why[0])
			control_finish(&L->ctl, NULL, L->vm->start_why); /* Firecracker's words */
		goto out_free;
	}
	if (L->o.dump_cpuid && vm_dump_cpuid(L->vm, 0, L->o.dump_cpuid)) {
		L->status = CLI_EXIT_ERROR;
		goto out_destroy;
	}
	if (launch_announce(L))
		goto out_destroy;
	if (launch_services(L) || launch_run(L))
		goto out_publish;
	launch_after_run(L);
out_publish:
	for (i = 0; i < L->o.nr_pub; i++)
		publish_stop(&L->pub[i]);
	if (L->eg && !L->o.jail.enabled)
		egress_stop(L->eg);
	if (L->api_addr.uds_dir > 0)
		close(L->api_addr.uds_dir);
out_destroy:
	if (L->ctl.api && L->ctl.api->pending != FCAPI_NONE)
		control_finish(&L->ctl, NULL, "the microVM could not be started (the VMM's log says why)");
	control_close(&L->ctl);
	vm_destroy(L->vm);
out_free:
	zpages_free(L->vm, sizeof(*L->vm));
out_console:
	for (i = 0; i < VM_MAX_NETS; i++)
		if (L->taps[i].fd >= 0)
			tap_close(&L->taps[i]);
	if (L->console_file >= 0)
		close(L->console_file);
out_disks:
	launch_release(L);
	if (L->o.err[0] && !out->err[0])
		cli_seterr(out->err, sizeof(out->err), 0, "%s", L->o.err);
	status = L->status;
	zpages_free(L, sizeof(*L));
	return status;
}
