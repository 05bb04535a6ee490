/* Starting a sandbox: the sequence run, restore, serve and create share (launch.h). */
#define _GNU_SOURCE
#include "launch.h"
#include "api_client.h"
#include "image.h"
#include "../guest-init/api.h"
#include "cli.h"
#include "sandbox.h"
#include "publish.h"
#include "run_detach.h"
#include "run_fc.h"
#include "run_helper.h"
#include "run_jail.h"
#include "run_opts.h"
#include "run_restore.h"
#include "egress.h"
#include "jail.h"
#include "disklock.h"
#include "standby.h"
#include "../vmm/standby.h"
#include "../vmm/control.h"
#include "../vmm/fcapi.h"
#include "../vmm/zpages.h"
#include "../vmm/snapshot.h"
#include "../vmm/seccomp.h"
#include "../vmm/uffd.h"
#include "../guest-init/proto.h"
#include "../vmm/log.h"
#include "../vmm/vm.h"

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

/* vmm run --image: the sandbox's own copy of the image's root filesystem
 * (a reflink where the filesystem can, else a sparse copy: docs/images.md)
 * becomes disk 0, the root, and guest-init the init. */
static int use_image(struct vm_config *cfg, const struct sandbox *sb, const char *rootfs, char *cmdline,
		     size_t len)
{
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
		log_err("--image: copying %s for this sandbox: %s", rootfs, strerror(-r));
		return r;
	}
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
		 * its foreground (`vmm run &` must not stop on it: vmm/tty.h). */
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
	if (ctl->nr_listen) {
		kfds[nk] = ctl->lfd[0];
		kspec[nk++] = "control";
	}
	if (standby_record_args(sb, rargs, na) || standby_keeper_spawn(sb, kfds, kspec, nk))
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

int launch_sandbox(int argc, char **argv, int restore, int check_only, int api)
{
	/* Path buffers get a NUL in front, not an initialiser: zeroing them
	 * whole made pages of this frame resident in every VMM. */
	char kernel_buf[PATH_MAX], initrd_buf[PATH_MAX];
	struct vm_config cfg;
	struct run_opts o;
	struct termios tty_saved;
	int console_file = -1, status = 0, tty_cmd = 0;
	struct vm *vm = NULL;
	char dir[PATH_MAX];
	int detach_ready = -1; /* -d, in the sandbox's process: tells the waiting parent */
	char kvm_cache[PATH_MAX];
	int have_snap = 0;
	char cmdline_buf[4096], token_buf[160] = "";
	char net_spec[VM_MAX_NETS][API_NET_SPEC];
	const char *net_spec_p[VM_MAX_NETS];
	unsigned nr_net_spec = 0;
	char net_text[VM_MAX_NETS * 64] = "";
	/* 113 KiB, on pages of its own: snapshot_open leaves fresh ones that
	 * it need not write alone (zpages.h), so a clone keeps a few of them. */
	struct snapshot *snap = zpages_alloc(sizeof(*snap));
	/* PUT /snapshot/load's Uffd backend, until vm_create takes it */
	struct uffd_backend ub = { .gm = { .fd = -1 }, .conn = { .uffd = -1, .sock = -1 } };
	struct sandbox sb = { .created = 0 };
	struct control ctl = { .open = 0 };
	struct helper h = { .cmd = NULL, .ready_rd = -1, .notify_fd = -1 };
	pid_t child = -1;
	int ran = 0;
	char jail_kernel[PATH_MAX], jail_initrd[PATH_MAX], jail_root[PATH_MAX + 8];
	char synced[PATH_MAX + 32];
	char image_cmdline[4096];
	long long was_created = 0, was_expires = 0; /* in_place: the record's before */
	/* On the heap: a published port's connection threads may outlive this
	 * frame by a moment at exit (see the end). */
	struct publish *pub = calloc(PUBLISH_MAX, sizeof(*pub));
	unsigned i;
	char pub_text[PUBLISH_MAX * 48] = "";
	struct sandbox_addr api_addr = { .port = API_VSOCK_PORT };
	char console_buf[PATH_MAX + 64];
	struct mmds *md = NULL;   /* --net ...,mmds without the API: the CLI's store */
	struct egress *eg = NULL; /* on the heap, as pub above */
	char egress_cmdline[4096], egress_log[PATH_MAX + 16];
	struct egress_start_args eg_args = { .log = egress_log };
	struct tap taps[VM_MAX_NETS];

	memset(&cfg, 0, sizeof(cfg));
	kernel_buf[0] = initrd_buf[0] = synced[0] = '\0';
	for (i = 0; i < VM_MAX_NETS; i++)
		taps[i].fd = -1;
	run_opts_init(&o, restore, api, pub);
	if (!pub || !snap) {
		free(pub);
		zpages_free(snap, sizeof(*snap));
		return CLI_EXIT_ERROR;
	}
	cfg.t0_ns = log_now_ns();
	cfg.pre_main_ns = phase_cpu_ns();
	cfg.cpus = 1;
	cfg.console_in = -1;
	cfg.console_out = -1;
	cfg.console_limit = 8ull << 20; /* --console-log-size */
	cfg.host_emulates_ring0 = host_emulates_ring0();
	cfg.kvm_path = getenv("VMM_KVM_DEVICE"); /* default /dev/kvm; tests point it elsewhere */
	/* KVM's supported CPUID and MSRs from a per-host cache
	 * (vmm/kvmcache.h): only with VMM_KVM_CACHE=on. Measured on a nested
	 * KVM, reading the cache (~55 us) is no cheaper than asking KVM
	 * (39-59 us): docs/perf.md. */
	if (!cfg.kvm_path && getenv("VMM_KVM_CACHE") && !strcmp(getenv("VMM_KVM_CACHE"), "on") &&
	    cli_cache_file("kvm-supported", kvm_cache, sizeof(kvm_cache)) == 0)
		cfg.kvm_cache = kvm_cache;
	cfg.seccomp = SC_DEFAULT_ON;
	/* guest-init's ready notice (docs/vsock.md); not for `serve`, whose
	 * guests and vsock sockets are the Firecracker client's. */
	cfg.ready_notice = !api;

	if ((status = run_opts_parse(&o, &cfg, argc, argv)))
		goto out_disks;
	if (o.snapshot_dir) {
		if (snapshot_open(snap, o.snapshot_dir)) {
			status = CLI_EXIT_ERROR;
			goto out_disks;
		}
		have_snap = 1;
	}
	if ((status = run_opts_check(&o, argc, argv)))
		goto out_disks;
	if (check_only) {
		/* vmm create: the options are good; the kernel is there. */
		if (!restore && cfg.kernel && !file_exists(cfg.kernel)) {
			log_err("--kernel %s: %s", cfg.kernel, strerror(errno));
			status = CLI_EXIT_ERROR;
		}
		if (o.detach || o.cmd.argv)
			status = run_bad_usage("%s", "vmm create takes the options of vmm run, without -d or -- CMD");
		goto out_disks;
	}
	if (o.in_place) {
		/* 17 KiB, on the heap for the moment it is needed. */
		struct sandbox_status *was = malloc(sizeof(*was));

		if (!was || sandbox_status(o.name, was)) {
			free(was);
			status = CLI_EXIT_ERROR;
			goto out_disks;
		}
		was_created = was->created;
		was_expires = was->expires;
		free(was);
	}
	if (sandbox_create(&sb, o.name, o.in_place ? SANDBOX_ADOPT_STANDBY : o.adopt) ||
	    (o.jail.enabled && sandbox_make_rw(&sb))) {
		status = CLI_EXIT_ERROR;
		goto out_disks;
	}
	if (restore) {
		/* A clone is ready once synced (detach_self waits for it, and
		 * takes it as the API's answer): never an earlier run's file. */
		char sp[PATH_MAX + 32];

		snprintf(sp, sizeof(sp), "%s/synced", sb.rw);
		unlink(sp);
	}
	if (o.in_place) {
		/* The next suspend writes only what this run dirties, into
		 * standby/ in place: the bitmap counts from the state restored
		 * here (vm_restore_state sets vm->snap_dir/snap_id to it). */
		cfg.track_dirty = 1;
	}
	/* From the folder on, a stop signal (Ctrl-C, SIGTERM) waits for
	 * vm_run, which stops the VM and the teardown removes everything:
	 * killed here by its default action, the VMM left a `dead` record.
	 * vmm serve too: its pre-boot loop takes them through a signalfd,
	 * and from InstanceStart's 204 (sent before vm_run) a client's
	 * SIGTERM must find them blocked, not kill the VMM. */
	{
		sigset_t stops;

		sigemptyset(&stops);
		sigaddset(&stops, SIGINT);
		sigaddset(&stops, SIGTERM);
		sigaddset(&stops, SIGHUP);
		sigaddset(&stops, SIGQUIT);
		sigaddset(&stops, VM_INTERRUPT_SIGNAL); /* from the helper */
		pthread_sigmask(SIG_BLOCK, &stops, NULL);
	}
	/* The policy and its credentials, before -d: a missing one is an
	 * error on this terminal. Threads start once the VM exists. */
	if (o.egress_policy) {
		eg = malloc(sizeof(*eg));
		if (!eg || egress_load(eg, o.egress_policy, sb.name)) {
			free(eg);
			eg = NULL;
			status = CLI_EXIT_ERROR;
			goto out_disks;
		}
	}
	if (o.detach) {
		if (!o.console_explicit) {
			snprintf(console_buf, sizeof(console_buf), "file:%s/console.log", sb.rw);
			o.console = console_buf;
		}
		status = detach_self(&sb, o.ready_s, restore, o.dcmd.argv ? &o.dcmd : NULL, &detach_ready, o.quiet, cfg.t0_ns);
		if (status >= 0) {
			sb.created = 0; /* the sandbox's own process owns the folder now */
			goto out_disks;
		}
		status = 0;
	}
	if (o.in_place && was_expires) {
		/* --ttl counts standby too: what is left of it. */
		long long left = was_expires - (long long)time(NULL);

		o.ttl_s = left > 0 ? left : 1;
	}
	if (o.ttl_s)
		cfg.expire_ns = cfg.t0_ns + (uint64_t)o.ttl_s * 1000000000ull;
	if (o.detach && !o.jail.enabled) {
		cfg.standby_dir = sb.dir; /* vmm suspend, --idle-timeout */
		cfg.idle_timeout_ns = (uint64_t)o.idle_timeout_s * 1000000000ull;
	}
	if (api) {
		if (run_fc_serve_configure(&ctl, &o, &sb, &cfg, snap, &ub, &status))
			goto out_disks;
		if (ctl.api->pending == FCAPI_LOAD) {
			have_snap = 1;
			restore = 1;
			cfg.track_dirty |= ctl.api->cfg.track_dirty_pages;
			cfg.start_paused = !ctl.api->load_resume;
			if (ub.gm.map)
				cfg.uffd = &ub;
		}
	}
	if (restore && (status = restore_configure(&cfg, snap, &o, &sb, api ? &ctl.api->mmds : NULL, token_buf,
						   sizeof(token_buf), net_spec, &nr_net_spec)))
		goto out_disks;
	if (!restore) {
		/* Every sandbox has its API device unless told otherwise (the
		 * API's have what PUT /vsock said). */
		if (!api) {
			if (o.image_root && use_image(&cfg, &sb, o.image_root, image_cmdline, sizeof(image_cmdline))) {
				status = CLI_EXIT_ERROR;
				goto out_disks;
			}
			cfg.mem_bytes = o.mib << 20;
			if (!o.vsock_given) {
				cfg.vsock.cid = 3;
				cfg.vsock.uds[0] = '\0';
			}
			cfg.has_vsock = 1;
		}
		if (o.token)
			snprintf(token_buf, sizeof(token_buf), "%s", o.token);
		else if (run_random_token(token_buf, sizeof(token_buf))) {
			status = CLI_EXIT_ERROR;
			goto out_disks;
		}
		if (!cfg.kernel) {
			char looked[2 * PATH_MAX + 64];

			if (cli_lib_dir(dir, sizeof(dir) - 32, looked, sizeof(looked)) == 0) {
				snprintf(kernel_buf, sizeof(kernel_buf), "%.4000s/kernel/vmlinux", dir);
				snprintf(initrd_buf, sizeof(initrd_buf), "%.4000s/initramfs.cpio", dir);
			}
			if (!kernel_buf[0] || !file_exists(kernel_buf)) {
				log_err("no --kernel given and no kernel/vmlinux in %s: give --kernel PATH, "
					"install vmm with its kernel (make install), or run 'make' in its source tree",
					looked[0] ? looked : kernel_buf);
				status = CLI_EXIT_ERROR;
				goto out_disks;
			}
			cfg.kernel = kernel_buf;
			if (!cfg.initrd && !(cfg.nr_disks && cfg.disks[0].root) && file_exists(initrd_buf))
				cfg.initrd = initrd_buf;
		}
		log_debug("kernel %s, initramfs %s", cfg.kernel, cfg.initrd ? cfg.initrd : "(none)");
		if (!cfg.cmdline)
			cfg.cmdline = DEFAULT_CMDLINE;
		if (o.cmd.argv) {
			int n = snprintf(cmdline_buf, sizeof(cmdline_buf), "%s vmm.shell=0", cfg.cmdline);

			if (n < 0 || (size_t)n >= sizeof(cmdline_buf)) {
				log_err("kernel command line too long");
				status = CLI_EXIT_ERROR;
				goto out_disks;
			}
			cfg.cmdline = cmdline_buf;
		}
		if (eg) {
			/* guest-init's side of the proxy (docs/egress.md) */
			int n = snprintf(egress_cmdline, sizeof(egress_cmdline), "%s vmm.egress=%u", cfg.cmdline,
					 EGRESS_VSOCK_PORT);

			if (n < 0 || (size_t)n >= sizeof(egress_cmdline)) {
				log_err("kernel command line too long");
				status = CLI_EXIT_ERROR;
				goto out_disks;
			}
			cfg.cmdline = egress_cmdline;
		}
		if (!cfg.tmpl_explicit && cfg.host_emulates_ring0) {
			cfg.tmpl = CPU_TEMPLATE_SAFE;
			log_debug("this host's KVM emulates guest ring 0 (kvm_pvm): using CPU template 'safe'");
		}
	}
	cfg.api_token = token_buf;
	if (cfg.has_vsock && !cfg.vsock.uds[0])
		snprintf(cfg.vsock.uds, sizeof(cfg.vsock.uds), "%s", sb.vsock);

	if (console_setup(&cfg, &o, api && !restore ? ctl.api : NULL, &console_file)) {
		status = CLI_EXIT_ERROR;
		goto out_disks;
	}

	/* A disk another sandbox holds: refused here, naming it (the
	 * device's lock, when the VMM opens it, is what guarantees it). */
	if (disk_locks_check(&cfg, sb.name)) {
		status = CLI_EXIT_ERROR;
		goto out_console;
	}
	if (disk_locks_record(sb.dir, &cfg))
		log_warn("cannot list the disks in %s: another VMM refused one will not name this sandbox", sb.dir);

	snprintf(egress_log, sizeof(egress_log), "%s/egress.log", sb.dir);
	eg_args.eg = eg;
	eg_args.uds = cfg.vsock.uds;
	if (eg)
		eg->seccomp = cfg.seccomp;
	/* The cgroup first (as root, from the host's view), then the jail:
	 * still one thread, and everything vm_create opens is bound in. */
	if (jail_cgroup(&o.jail, sb.name, cfg.cpus) ||
	    (o.jail.enabled && (run_jail_prepare(&o.jail, &cfg, &sb, &eg_args, taps) ||
			      run_jail_setup(&o.jail, &cfg, restore ? snap : NULL, &sb, jail_kernel, jail_initrd,
					 jail_root, sizeof(jail_root))))) {
		status = CLI_EXIT_ERROR;
		goto out_console;
	}
	if (o.jail.enabled) {
		sb.pid = o.jail.host_pid;
		sb.start_time = o.jail.host_start;
		cfg.host_pid = o.jail.host_pid;
	}
	if (!api && (status = run_fc_mmds(&cfg, &md, o.fc.metadata, o.fc.mmds_limit, have_snap ? &snap->conf.mmds : NULL)))
		goto out_console;
	vm = calloc(1, sizeof(*vm));
	if (!vm) {
		status = CLI_EXIT_ERROR;
		goto out_console;
	}
	if (vm_create(vm, &cfg)) {
		status = CLI_EXIT_ERROR;
		if (api && vm->start_why[0])
			control_finish(&ctl, NULL, vm->start_why); /* Firecracker's words */
		goto out_free;
	}
	if (o.dump_cpuid && vm_dump_cpuid(vm, 0, o.dump_cpuid)) {
		status = CLI_EXIT_ERROR;
		goto out_destroy;
	}
	{
		struct sandbox_info info = {
			.kind = restore ? "restore" : "run",
			.source = restore ? snap->dir : cfg.kernel,
			.cpus = vm->nr_vcpus,
			.mem_mib = cfg.mem_bytes >> 20,
			.ttl_s = o.ttl_s,
			.detached = o.detach,
			.publish = pub_text,
			.net = net_text,
			.image = o.image_ref,
			.created = was_created,
			.expires = was_expires,
		};

		for (i = 0; i < cfg.nr_nets; i++) {
			size_t n = strlen(net_text);
			char mac[18], ip[INET_ADDRSTRLEN] = "";

			net_format_mac(vm->nets[i]->config.mac, mac);
			if (cfg.nets[i].ip)
				inet_ntop(AF_INET, &cfg.nets[i].ip, ip, sizeof(ip));
			snprintf(net_text + n, sizeof(net_text) - n, "%s%s=%s%s%s", i ? "," : "",
				 vm->nets[i]->tap.name, mac, ip[0] ? "/" : "", ip);
		}
		for (i = 0; i < o.nr_pub; i++) {
			size_t n = strlen(pub_text);

			publish_format(&pub[i], pub_text + n, sizeof(pub_text) - n - 1);
			if (i + 1 < o.nr_pub)
				strcat(pub_text, ",");
		}

		int cfd = o.in_place ? standby_listen_fd("control") : -1;

		if ((!api && (cfd >= 0 ? control_open_fd(&ctl, cfd, sb.control, sb.name)
				       : control_open(&ctl, sb.control, sb.name))) ||
		    sandbox_publish(&sb, token_buf, &info)) {
			status = CLI_EXIT_ERROR;
			goto out_destroy;
		}
	}
	if (serve_control(vm, &ctl)) {
		status = CLI_EXIT_ERROR;
		goto out_destroy;
	}
	if (api) {
		/* vmm exec NAME finds the guest API at vsock.sock in the folder,
		 * wherever PUT /vsock put the socket. */
		if (cfg.has_vsock && strcmp(cfg.vsock.uds, sb.vsock) && symlink(cfg.vsock.uds, sb.vsock) < 0)
			log_warn("cannot link %s to the vsock socket %s: %s", sb.vsock, cfg.vsock.uds, strerror(errno));
		control_finish(&ctl, vm, NULL); /* InstanceStart or the snapshot load: done */
	}
	log_debug("kernel command line: %s", vm->cmdline);
	/* vmm exec only where there is a guest API to reach (a vsock device) */
	if (cfg.has_vsock)
		log_info("sandbox %s%s (vmm exec %s -- CMD; state in %s)", sb.name,
			 restore ? " restored" : "", sb.name, sb.dir);
	else
		log_info("sandbox %s%s (no vsock device: no vmm exec; state in %s)", sb.name,
			 restore ? " restored" : "", sb.dir);
	api_addr.uds = cfg.vsock.uds;
	api_addr.token = token_buf;
	if (eg && !o.jail.enabled) { /* jailed: the companion process runs it */
		if (!cfg.has_vsock || egress_start(eg, cfg.vsock.uds, egress_log)) {
			if (!cfg.has_vsock)
				log_err("--egress-policy needs the sandbox's vsock device");
			status = CLI_EXIT_ERROR;
			goto out_publish;
		}
	}
	if (o.no_seccomp)
		log_warn("--no-seccomp: this VMM runs WITHOUT its system call allow-lists; a guest "
			 "that breaks into it reaches the whole kernel API (debugging only)");
	for (i = 0; i < o.nr_pub; i++) {
		pub[i].seccomp = cfg.seccomp;
		if (!cfg.has_vsock || publish_start(&pub[i], &api_addr)) {
			if (!cfg.has_vsock)
				log_err("--publish needs the sandbox's vsock device");
			status = CLI_EXIT_ERROR;
			goto out_publish;
		}
	}
	/* A resume: the keeper's sockets this VMM did not take are closed, and
	 * its variable goes, so nothing started from here inherits either. */
	standby_listen_release();
	/* Standby (a detached sandbox): what a resume passes on, and the
	 * keeper that holds the published ports and the control socket while
	 * the sandbox sleeps. Before the allow-lists (the keeper is forked). */
	if (cfg.standby_dir)
		standby_prepare(&sb, &o, pub, &ctl);
	/* Built: the jailed VMM gives up root before the guest runs. */
	if (o.jail.enabled && jail_drop(&o.jail, sb.dir)) {
		status = CLI_EXIT_ERROR;
		goto out_publish;
	}
	{
		h.a = &api_addr;
		h.cmd = o.cmd.argv ? &o.cmd : NULL;
		h.restored = restore;
		h.seccomp = cfg.seccomp;
		h.ready_s = o.ready_s;
		snprintf(synced, sizeof(synced), "%s/synced", sb.rw);
		h.synced = synced;
		for (i = 0; i < nr_net_spec; i++)
			net_spec_p[i] = net_spec[i];
		h.nets = net_spec_p;
		h.nr_nets = nr_net_spec;
		h.egress_port = eg ? EGRESS_VSOCK_PORT : 0;
		/* run -- CMD: the status line while it starts (not -q) */
		h.status_on = h.cmd && !o.quiet;
		h.status_tty = isatty(STDERR_FILENO);
		h.t0_ns = cfg.t0_ns;
		h.name = sb.name;
		/* -t: the helper's raw mode, to put back if it is killed. */
		tty_cmd = h.cmd && o.cmd.tty && tty_is_foreground(STDIN_FILENO) &&
			  tcgetattr(STDIN_FILENO, &tty_saved) == 0;
		h.notify_fd = detach_ready;
		if ((h.cmd || (restore && cfg.has_vsock)) && helper_start(vm, &h, &child)) {
			status = CLI_EXIT_ERROR;
			goto out_publish;
		}
		/* No helper: the boot marker (or ready notice) tells the parent,
		 * and 'K' before it (kernel up) its status line. */
		if (vm->marker_fd < 0) {
			vm->marker_fd = detach_ready; /* helper_run_vm closes it */
			detach_ready = -1;
		}
		/* The interactive console: how to leave it, once. */
		if (cfg.console_tty && cfg.console_escape && !o.quiet)
			fprintf(stderr, "vmm: sandbox %s: console on this terminal; Ctrl-A x stops the VM "
					"(Ctrl-A Ctrl-A types a Ctrl-A)\n", sb.name);
		/* A resume takes its state now, before the guest runs again
		 * (its disks then move on: never restore this state twice). */
		if (o.in_place) {
			int r = standby_consume(sb.dir);
			char sp[PATH_MAX + 32];

			if (r) {
				log_err("resume: cannot take the standby state: %s", strerror(-r));
				status = CLI_EXIT_ERROR;
				goto out_publish;
			}
			snprintf(sp, sizeof(sp), "%s/" STANDBY_SINCE, sb.dir);
			unlink(sp);
			o.in_place = 0; /* from here on a failure is the running sandbox's */
		}
		status = helper_run_vm(vm, &h, child);
		ran = 1;
	}
	if (atomic_load(&vm->exit_reason) == VM_EXIT_STANDBY) {
		/* Suspended: the folder, its token, config and sockets' paths
		 * stay; the keeper listens on the control socket and ports. */
		char since[32], sp[PATH_MAX + 32];
		int sfd;

		snprintf(since, sizeof(since), "%lld\n", (long long)time(NULL));
		snprintf(sp, sizeof(sp), "%s/" STANDBY_SINCE, sb.dir);
		sfd = open(sp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (sfd >= 0) {
			if (write(sfd, since, strlen(since)) < 0)
				log_warn("%s: %s", sp, strerror(errno));
			close(sfd);
		}
		ctl.keep_paths = 1;
		sb.created = 0;
		o.detach = 0;
	}
	/* A detached sandbox leaves its record for `vmm ls`/`logs` until
	 * `vmm rm`; one whose time ran out is removed, as --ttl promises. */
	if (o.detach && atomic_load(&vm->exit_reason) != VM_EXIT_EXPIRED)
		sandbox_exited(&sb, status, vm->exit_msg);
	/* Tests only: the teardown after the record went, made long, so that
	 * a `vmm rm -f` that took the record's going for the VMM's shows
	 * (tests/guests/run.sh; cli/sandbox.c, wait_gone). */
	{
		const char *linger = getenv("VMM_TEST_LINGER_MS");

		if (linger)
			usleep((useconds_t)strtoul(linger, NULL, 10) * 1000);
	}
	/* The helper of `-t -- CMD`, stopped in raw mode (SIGKILL: helper_run_vm),
	 * leaves the terminal to us. */
	if (tty_cmd && tty_is_foreground(STDIN_FILENO))
		tcsetattr(STDIN_FILENO, TCSANOW, &tty_saved);
out_publish:
	for (i = 0; i < o.nr_pub; i++)
		publish_stop(&pub[i]);
	if (eg && !o.jail.enabled)
		egress_stop(eg);
out_destroy:
	if (ctl.api && ctl.api->pending != FCAPI_NONE)
		control_finish(&ctl, NULL, "the microVM could not be started (the VMM's log says why)");
	control_close(&ctl);
	vm_destroy(vm);
out_free:
	free(vm);
out_console:
	for (i = 0; i < VM_MAX_NETS; i++)
		if (taps[i].fd >= 0)
			tap_close(&taps[i]);
	if (console_file >= 0)
		close(console_file);
out_disks:
	if (ctl.api && ctl.api->pending != FCAPI_NONE)
		control_finish(&ctl, NULL, "the microVM could not be started (the VMM's log says why)");
	control_close(&ctl);
	while (cfg.nr_disks > 0)
		blk_options_free(&cfg.disks[--cfg.nr_disks]);
	while (o.nr_over > 0)
		blk_options_free(&o.over[--o.nr_over]);
	while (cfg.nr_fs > 0)
		fs_options_free(&cfg.fs[--cfg.nr_fs]);
	while (o.nr_over_fs > 0)
		fs_options_free(&o.over_fs[--o.nr_over_fs]);
	/* A detached sandbox that failed before it ran keeps its folder (its
	 * vmm.log says why) until vmm rm; `vmm start` keeps its record. */
	if (o.in_place && sb.created) {
		/* A failed resume: the state stays, the sandbox on standby. */
		sb.created = 0;
	} else if (o.detach && sb.created && !ran)
		sandbox_exited(&sb, status ? status : CLI_EXIT_ERROR, "failed to start (vmm logs --vmm)");
	sandbox_remove(&sb);
	uffd_backend_close(&ub); /* emptied if the VM took it */
	if (have_snap)
		snapshot_close(snap);
	zpages_free(snap, sizeof(*snap));
	if (eg)
		egress_release(eg);
	if (detach_ready >= 0)
		close(detach_ready);
	for (i = 0; i < o.nr_pub && !atomic_load(&pub[i].conns); i++) {
	}
	if (i == o.nr_pub)
		free(pub); /* else a connection thread still holds it: the process exits anyway */
	if (md) {
		mmds_destroy(md);
		free(md);
	}
	control_free(&ctl); /* its MMDS store: the VM's devices are gone */
	return status;
}
