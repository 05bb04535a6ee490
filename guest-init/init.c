/* guest-init: PID 1 of a vmm sandbox, and the sandbox API server.
 *
 * As PID 1: mounts, hostname, loopback, a shell on the console, reaping of
 * every orphan, SIGTERM forwarded to all processes and a clean power-off on
 * request; it never exits (a PID 1 exit panics the kernel). It serves the
 * API (docs/api.md) on vsock port 1024, one process per connection (the
 * next one forked ahead of time: a spare worker waits in accept), and
 * writes the boot marker once the API listens.
 *
 * The API's access token comes from the vmm port's token window (port
 * I/O: only root reads it), read afresh for every connection, so a clone
 * restored from a snapshot takes its own token; never from a file or the
 * environment. Only the host (vsock CID 2) may connect: a guest process
 * reaching the port over vsock loopback is refused (api_peer_allowed).
 *
 * Kernel command line: vmm.token=SECRET (only under a VMM without the
 * token window, an older vmm: there every guest process can read it),
 * vmm.hostname=NAME, vmm.api_port=N, vmm.shell=0 (no console shell),
 * vmm.net=MAC[,ip=ADDR/PREFIX][,gw=ADDR][,dns=ADDR] per network interface
 * (net.h), vmm.fs=TAG[,ro][,at=DIR] (repeatable: mount the virtio-fs drive TAG at /mnt/TAG or DIR),
 * vmm.egress=PORT (the egress proxy's guest side on 127.0.0.1:PORT: egress.h).
 *
 * Outside a VM (for tests): guest-init --serve-unix PATH serves the same
 * API on a Unix socket, without the PID 1 duties. Called through a link
 * named nohup, flock or script, it is that tool (tools.h). */
#include "vmm/wire/api.h"
#include "guest-init/applets.h"
#include "guest-init/guest_egress.h"
#include "guest-init/ops.h"
#include "guest-init/net.h"
#include "guest-init/tools.h"
#include "vmm/wire/proto.h"
#include "vmm/wire/vsock.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __x86_64__
#include <sys/io.h>
#endif

#define VMM_PORT 0x0550
#define VMM_PORT_BOOT_READY 0x7b
#define VMM_PORT_POWEROFF 0x01
#define VMM_TOKEN_BASE 0x0560 /* devices/devices.h */
#define VMM_TOKEN_LEN 128
#define REGISTRY "/run/vmm-api"
#define MAX_NETS 8

struct init {
	int pid1;
	char token[256];
	char hostname[65];
	unsigned port;
	int shell;
	pid_t shell_pid;
	int listen_fd;
	int notice_fd;        /* the ready notice's connection to the host, -1: none */
	unsigned notice_gen;  /* connections made so far (each restore makes one) */
	const char *notice_unix; /* --serve-unix tests: the notice over this socket */
	int restored;         /* the notice was reconnected: a clone's first request is next */
	uint64_t refused_ms;  /* last "refused" console line (one per 10 s) */
	unsigned refused;     /* connections refused since then */
	struct api_config api;
	unsigned nr_nets;
	unsigned egress_port;
	struct procs_limits procs; /* the process manager's bounds */
	pid_t procs_pid;           /* the process manager (procs.c), 0: none */
	char nets[MAX_NETS][128];
	/* The spare API worker (serve_loop): a process forked ahead of time,
	 * blocked in accept() on listen_fd, so the next connection (a
	 * restored clone's sync) is served with no fork on its path. */
	pid_t spare_pid;      /* waiting in accept, 0: none */
	int spare_fd;         /* its pipe: a byte once it took a connection, -1 */
	unsigned spare_gen;   /* notice_gen when it was forked (its notice_fd's) */
	pid_t first_pid;      /* serving a clone's first request (no spare until it ends), 0 */
	char state;           /* NOTICE_SETTLED or _PENDING as last told, 0: not yet */
	unsigned spare_fails; /* spares that ended without a connection, in a row */
};

/* A spare that keeps ending without a connection is not made again. */
#define SPARE_MAX_FAILS 3

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "guest-init: ");
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(buf, "\n");
	if (write(2, buf, strlen(buf)) < 0) {
		/* no console: nothing to do */
	}
}

/* ioperm() bits are inherited by fork() and kept across execve() and
 * setuid(): PID 1 drops them again, or every process it starts (an exec'd
 * command that gives up root too) could use the port. */
static void vmm_port(unsigned char v)
{
#ifdef __x86_64__
	if (ioperm(VMM_PORT, 1, 1) == 0) {
		outb(v, VMM_PORT);
		ioperm(VMM_PORT, 1, 0);
	}
#else
	(void)v;
#endif
}

/* The API token from the VMM's token window (api_token_parse's result).
 * Port I/O needs CAP_SYS_RAWIO: PID 1 and its API processes have it, a
 * process that gave up root does not. The bits go off again at once. */
static int token_window(char *out, size_t len)
{
#ifdef __x86_64__
	unsigned char win[VMM_TOKEN_LEN];
	unsigned i;
	int r, via_iopl;

	memset(win, 0, sizeof(win));
	/* iopl(3), not ioperm: Linux emulates it with a shared all-ports
	 * bitmap, where a process's first ioperm allocates and fills 8 KiB
	 * of its own (and frees it when its last port goes off). Each API
	 * connection reads the window, in a fresh worker: the fill was 9% of
	 * a restored clone's sync on a host that emulates guest ring 0. */
	via_iopl = iopl(3) == 0;
	if (!via_iopl && ioperm(VMM_TOKEN_BASE, VMM_TOKEN_LEN, 1) < 0)
		return -1;
	for (i = 0; i < VMM_TOKEN_LEN; i += 4) {
		uint32_t v = inl((unsigned short)(VMM_TOKEN_BASE + i));

		memcpy(win + i, &v, sizeof(v));
		if (memchr(win + i, 0, sizeof(v)))
			break; /* the rest is padding */
	}
	if (via_iopl)
		iopl(0);
	else
		ioperm(VMM_TOKEN_BASE, VMM_TOKEN_LEN, 0);
	r = api_token_parse(win, sizeof(win), out, len);
	explicit_bzero(win, sizeof(win));
	return r;
#else
	(void)out;
	(void)len;
	return -1;
#endif
}

static void mount_one(const char *src, const char *dst, const char *type, unsigned long flags,
		      const char *data)
{
	mkdir(dst, 0755);
	if (mount(src, dst, type, flags, data) < 0 && errno != EBUSY)
		say("mount %s on %s: %s", type, dst, strerror(errno));
}

/* mkdir -p for a mount point (guest-init's own paths, checked by the VMM). */
static void mkdir_parents(const char *dir)
{
	char p[128];
	size_t i;

	snprintf(p, sizeof(p), "%s", dir);
	for (i = 1; p[i]; i++)
		if (p[i] == '/') {
			p[i] = '\0';
			mkdir(p, 0755);
			p[i] = '/';
		}
}

/* vmm.fs=TAG[,ro][,at=DIR]: the VMM shares a host directory as virtio-fs
 * TAG (docs/virtio-fs.md); it goes at /mnt/TAG, or a drive's DIR (vmm run
 * --drive NAME[:DIR], default /drives/NAME; the VMM checked DIR is
 * absolute with no "." or ".." part). */
static void mount_shared(const char *arg)
{
	char tag[40], dir[128] = "";
	unsigned long flags = MS_NOSUID | MS_NODEV;
	size_t n = strcspn(arg, ",");
	const char *opt;

	if (n == 0 || n >= sizeof(tag)) {
		say("vmm.fs=%s: not a drive tag", arg);
		return;
	}
	memcpy(tag, arg, n);
	tag[n] = '\0';
	if (strchr(tag, '/') || !strcmp(tag, ".") || !strcmp(tag, "..")) {
		say("vmm.fs=%s: not a drive tag", arg);
		return;
	}
	for (opt = arg + n; *opt == ','; opt += 1 + strcspn(opt + 1, ",")) {
		size_t len = strcspn(opt + 1, ",");

		if (len == 2 && !strncmp(opt + 1, "ro", 2))
			flags |= MS_RDONLY;
		else if (len > 4 && len - 3 < sizeof(dir) && !strncmp(opt + 1, "at=/", 4) && !strstr(opt, ".."))
			snprintf(dir, sizeof(dir), "%.*s", (int)(len - 3), opt + 4);
	}
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/mnt/%s", tag);
		mkdir("/mnt", 0755);
	}
	mkdir_parents(dir);
	mount_one(tag, dir, "virtiofs", flags, NULL);
}

static void read_cmdline(struct init *in)
{
	char buf[4096], *tok, *save = NULL;
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
		if (!strncmp(tok, "vmm.token=", 10))
			snprintf(in->token, sizeof(in->token), "%s", tok + 10);
		else if (!strncmp(tok, "vmm.hostname=", 13))
			snprintf(in->hostname, sizeof(in->hostname), "%s", tok + 13);
		else if (!strncmp(tok, "vmm.api_port=", 13))
			in->port = (unsigned)strtoul(tok + 13, NULL, 10);
		else if (!strcmp(tok, "vmm.shell=0"))
			in->shell = 0;
		else if (!strncmp(tok, "vmm.net=", 8) && in->nr_nets < MAX_NETS)
			snprintf(in->nets[in->nr_nets++], sizeof(in->nets[0]), "%s", tok + 8);
		else if (!strncmp(tok, "vmm.egress=", 11))
			in->egress_port = (unsigned)strtoul(tok + 11, NULL, 10);
		else if (!strncmp(tok, "vmm.fs=", 7))
			mount_shared(tok + 7);
		else if (!strncmp(tok, "vmm.proc_ring=", 14))
			in->procs.ring_bytes = (size_t)strtoul(tok + 14, NULL, 10);
		else if (!strncmp(tok, "vmm.max_procs=", 14))
			in->procs.max_procs = (unsigned)strtoul(tok + 14, NULL, 10);
	}
}

static void loopback_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
}

static void setup_system(struct init *in)
{
	mount_one("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	mount_one("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "mode=0620,ptmxmode=0666");
	mount_one("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_one("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_one("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	/* POSIX message queues, and cgroup v2 where systemd puts it, with its
	 * nsdelegate (a cgroup namespace bounds what a container may
	 * delegate): Podman, Docker and crun/runc find the hierarchy there.
	 * A kernel without them only logs the failed mount. */
	mount_one("mqueue", "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, "nsdelegate");
	mkdir(REGISTRY, 0700);
	read_cmdline(in);
	if (sethostname(in->hostname, strlen(in->hostname)) < 0)
		say("sethostname: %s", strerror(errno));
	loopback_up();
	for (unsigned i = 0; i < in->nr_nets; i++) {
		char err[160];

		if (gnet_apply(in->nets[i], err, sizeof(err)))
			say("network: %s", err);
	}
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	setenv("HOME", "/root", 1);
	if (in->egress_port) {
		char url[64];
		int r = gegress_start(in->egress_port);

		if (r < 0) {
			say("egress proxy on 127.0.0.1:%u: %s", in->egress_port, strerror(-r));
		} else {
			/* The console shell's environment; the API's commands
			 * get the same from api.c. */
			snprintf(url, sizeof(url), "http://127.0.0.1:%u", in->egress_port);
			setenv("HTTP_PROXY", url, 1);
			setenv("HTTPS_PROXY", url, 1);
			setenv("http_proxy", url, 1);
			setenv("https_proxy", url, 1);
			setenv("NO_PROXY", "localhost,127.0.0.1", 1);
			if (access(GEGRESS_BUNDLE, R_OK) == 0) {
				setenv("SSL_CERT_FILE", GEGRESS_BUNDLE, 1);
				setenv("REQUESTS_CA_BUNDLE", GEGRESS_BUNDLE, 1);
				setenv("CURL_CA_BUNDLE", GEGRESS_BUNDLE, 1);
				setenv("GIT_SSL_CAINFO", GEGRESS_BUNDLE, 1);
				setenv("NODE_EXTRA_CA_CERTS", GEGRESS_CA, 1);
			}
		}
	}
	/* busybox's applet links, once, if it is the only userland: from the
	 * list the initramfs carries (applets.h), else by busybox itself. */
	if (access("/bin/busybox", X_OK) == 0 && access("/bin/ls", X_OK) < 0) {
		int r = applets_install(APPLETS_LIST, "/bin", "/bin/busybox", NULL);

		if (r == -ENOENT) {
			pid_t p = fork();

			if (p == 0) {
				execl("/bin/busybox", "busybox", "--install", "-s", "/bin", (char *)NULL);
				_exit(127);
			}
			if (p > 0)
				waitpid(p, NULL, 0);
		} else if (r < 0) {
			say("busybox applet links from %s: %s", APPLETS_LIST, strerror(-r));
		}
	}
}

static pid_t spawn_shell(void)
{
	pid_t p = fork();

	if (p == 0) {
		sigset_t none;
		int fd;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		fd = open("/dev/console", O_RDWR);
		if (fd >= 0) {
			ioctl(fd, TIOCSCTTY, 1);
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		if (chdir("/root") < 0 && chdir("/") < 0)
			_exit(127);
		execl("/bin/sh", "-sh", (char *)NULL);
		_exit(127);
	}
	return p;
}

/* Everything stops: TERM to all, a moment to go, KILL, sync, power off.
 * The console's shell also gets a hang-up, as when its terminal goes
 * away: an interactive shell ignores SIGTERM, and waited out the whole
 * moment (every `vmm stop` of a sandbox with a console took 3 s). CONT
 * lets a stopped process take its TERM now. */
/* Reaps children until none is left or ms have passed; how many it reaped.
 * Bounded: a process in uninterruptible sleep (a file system that does
 * not answer) must not hold up the power-off. */
static unsigned reap_for(unsigned ms)
{
	uint64_t end = now_ms() + ms;
	unsigned n = 0;

	while (now_ms() < end) {
		pid_t p = waitpid(-1, NULL, WNOHANG);

		if (p < 0 && errno == ECHILD)
			break;
		if (p > 0)
			n++;
		else
			usleep(10000);
	}
	return n;
}

static void __attribute__((noreturn)) power_off(struct init *in)
{
	unsigned killed;

	say("powering off");
	kill(-1, SIGTERM);
	if (in->shell_pid > 0)
		kill(in->shell_pid, SIGHUP);
	kill(-1, SIGCONT);
	(void)reap_for(3000);
	kill(-1, SIGKILL);
	killed = reap_for(1000);
	if (killed)
		say("%u process%s still running 3 s after SIGTERM: killed", killed, killed == 1 ? "" : "es");
	sync();
	mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL);
	vmm_port(VMM_PORT_POWEROFF);
	/* Not under vmm (or the port failed): the kernel's own way. */
	reboot(RB_POWER_OFF);
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}

/* From <linux/random.h>, which musl's headers do not carry. */
#ifndef RNDADDENTROPY
#define RNDADDENTROPY _IOW('R', 0x03, int[2])
#endif
#ifndef RNDRESEEDCRNG
#define RNDRESEEDCRNG _IO('R', 0x07)
#endif

/* After a snapshot restore every clone holds the same CRNG state and a
 * clock stopped at the snapshot: the host sends the time and fresh
 * entropy, credited and followed by a reseed, so two clones never hand out
 * the same random bytes. */
static int sync_guest(int64_t time_s, int64_t time_ns, const uint8_t *seed, size_t len)
{
	struct timespec ts = { .tv_sec = (time_t)time_s, .tv_nsec = (long)time_ns };
	struct {
		int entropy_count;
		int buf_size;
		uint8_t buf[API_MAX_SEED];
	} pool;
	int fd, r = 0;

	if (clock_settime(CLOCK_REALTIME, &ts) < 0)
		return -1;
	if (!len)
		return 0;
	fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	pool.entropy_count = (int)(len * 8);
	pool.buf_size = (int)len;
	memcpy(pool.buf, seed, len);
	if (ioctl(fd, RNDADDENTROPY, &pool) < 0)
		r = -1;
	else
		(void)ioctl(fd, RNDRESEEDCRNG); /* Linux 4.17+; older ones reseed soon anyway */
	close(fd);
	return r;
}

static int request_shutdown(void)
{
	/* Runs in a connection's process: ask PID 1. */
	return kill(1, SIGUSR2);
}

static int listen_vsock(unsigned port)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The ready notice (docs/vsock.md): tells the host the API listens, and
 * keeps the connection, whose reset by a restore's transport reset is how
 * a clone learns it was restored: it then connects again. A host that
 * does not take it (an older VMM: nothing listens, ECONNRESET) is not
 * asked again. */
static void notice_connect(struct init *in)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST,
				  .svm_port = API_NOTICE_PORT };
	struct sockaddr_un su = { .sun_family = AF_UNIX };
	int un = in->notice_unix != NULL;
	int fd = socket(un ? AF_UNIX : AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	in->notice_fd = -1;
	in->notice_gen++;
	if (fd < 0)
		return;
	if (un)
		snprintf(su.sun_path, sizeof(su.sun_path), "%s", in->notice_unix);
	if (connect(fd, un ? (struct sockaddr *)&su : (struct sockaddr *)&sa,
		    un ? (socklen_t)sizeof(su) : (socklen_t)sizeof(sa)) < 0 ||
	    write(fd, READY_NOTICE, sizeof(READY_NOTICE) - 1) != (ssize_t)(sizeof(READY_NOTICE) - 1)) {
		close(fd);
		return;
	}
	in->notice_fd = fd;
}

/* Tells the host whether a snapshot would catch a spare waiting (proto.h,
 * NOTICE_SETTLED/_PENDING). Never blocks: a host that stopped reading
 * costs the hint, not PID 1. A fresh connection hears only changes (so an
 * older VMM, which closes a notice connection that says more than the
 * line, is not made to take a connection per request). */
static void notice_state(struct init *in, char c)
{
	if (c == in->state)
		return;
	in->state = c;
	if (in->notice_fd >= 0 && send(in->notice_fd, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* a reset connection: the next restore's reconnect says "ready" */
	}
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0)
		return -1;
	return fd;
}

/* A connection from inside the guest (vsock loopback): closed unread.
 * One console line per 10 s at most, whatever a guest process does. */
static void refuse_peer(struct init *in, const struct sockaddr_storage *peer, socklen_t len)
{
	struct sockaddr_vm vm = { .svm_cid = VMADDR_CID_ANY };
	uint64_t now = now_ms();

	if (peer->ss_family == AF_VSOCK && len >= (socklen_t)sizeof(vm))
		memcpy(&vm, peer, sizeof(vm));
	in->refused++;
	if (in->refused_ms && now - in->refused_ms < 10000)
		return;
	say("refused %u API connection(s) (last from vsock CID %u): only the host, CID 2, may connect",
	    in->refused, vm.svm_cid);
	in->refused_ms = now;
	in->refused = 0;
}

/* The process manager owns the detached processes (procs.c). Started
 * before any connection (every connection's process inherits its
 * channel), and again if it ever dies (its processes are lost then). */
static void start_procs(struct init *in)
{
	int chan = -1;
	pid_t p;

	if (in->api.procs_fd >= 0)
		close(in->api.procs_fd);
	in->api.procs_fd = -1;
	p = procs_start(&in->procs, &in->api, &chan);
	if (p < 0) {
		say("process manager: %s; no detached processes", strerror((int)-p));
		in->procs_pid = 0;
		return;
	}
	in->procs_pid = p;
	in->api.procs_fd = chan;
}

/* In a forked API child of a host test server (--serve-unix): it dies with
 * the server, as the procs server does (procs_start), so that killing the
 * server leaves no child holding the caller's files or locks. PID 1's
 * children need nothing: the VM ends with it. */
static void die_with_server(const struct init *in, pid_t server)
{
	if (!in->pid1 && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != server))
		_exit(0);
}

/* Forks the spare worker when there is none: at once when the last one
 * took a connection (one fork per connection, and a snapshot taken
 * while that connection is served still finds a spare), except while a
 * clone's first request is served (its sync is the whole path to ready,
 * and a fork beside it on the clone's one vCPU would slow it): then once
 * that request is done. The spare takes connections from listen_fd
 * itself: one from the host is announced on its pipe and served, others
 * (guest processes over vsock loopback) refused, as serve_loop does. */
static void spare_start(struct init *in, int sfd)
{
	int pfd[2];
	pid_t p, server;

	if (in->spare_pid || in->first_pid || in->listen_fd < 0)
		return;
	if (in->spare_fails >= SPARE_MAX_FAILS || pipe2(pfd, O_CLOEXEC) < 0) {
		notice_state(in, NOTICE_SETTLED); /* none is coming: nothing to wait for */
		return;
	}
	server = getpid();
	p = fork();
	if (p < 0) {
		close(pfd[0]);
		close(pfd[1]);
		notice_state(in, NOTICE_SETTLED);
		return;
	}
	if (p == 0) {
		sigset_t none;

		die_with_server(in, server);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		close(pfd[0]);
		close(sfd);
		for (;;) {
			struct sockaddr_storage peer;
			socklen_t plen = sizeof(peer);
			int c = accept4(in->listen_fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);

			if (c < 0) {
				if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
					continue;
				_exit(1);
			}
			if (!api_peer_allowed(&peer, plen)) {
				refuse_peer(in, &peer, plen);
				close(c);
				continue;
			}
			/* Told before serving, the host first: its next request
			 * (a snapshot) must not find the old "settled". Then the
			 * parent, which forks the next spare. */
			if (in->notice_fd >= 0) {
				char st = NOTICE_PENDING;

				if (send(in->notice_fd, &st, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
					/* reset by a restore: the parent says it */
				}
				close(in->notice_fd);
			}
			if (write(pfd[1], "A", 1) < 0)
				_exit(1);
			close(pfd[1]);
			close(in->listen_fd);
			in->api.spare = 1;
			api_serve(c, &in->api);
			_exit(0);
		}
	}
	close(pfd[1]);
	in->spare_pid = p;
	in->spare_fd = pfd[0];
	in->spare_gen = in->notice_gen;
	notice_state(in, NOTICE_SETTLED);
}

/* The spare said it took a connection, or its pipe ended (it died). */
static void spare_taken(struct init *in)
{
	char b;
	ssize_t n = read(in->spare_fd, &b, 1);

	close(in->spare_fd);
	in->spare_fd = -1;
	if (n == 1) {
		in->spare_fails = 0;
		/* The spare told the host on its copy of the notice
		 * connection, unless a restore replaced that since. */
		if (in->spare_gen == in->notice_gen)
			in->state = NOTICE_PENDING;
		notice_state(in, NOTICE_PENDING);
		if (in->restored)
			in->first_pid = in->spare_pid;
		in->restored = 0;
	} else {
		in->spare_fails++;
	}
	in->spare_pid = 0;
}

/* A spare that is waiting is stopped (the process manager changed: it
 * holds the old channel); the next one is forked by serve_loop. */
static void spare_stop(struct init *in)
{
	if (!in->spare_pid)
		return;
	kill(in->spare_pid, SIGKILL);
	close(in->spare_fd);
	in->spare_fd = -1;
	in->spare_pid = 0;
	notice_state(in, NOTICE_PENDING);
}

static void serve_loop(struct init *in)
{
	sigset_t set;
	int sfd;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);

	for (;;) {
		/* While a spare waits in accept(), it takes the connections. */
		struct pollfd p[4] = { { .fd = sfd, .events = POLLIN },
				       { .fd = in->spare_pid ? -1 : in->listen_fd, .events = POLLIN },
				       { .fd = in->notice_fd, .events = POLLIN },
				       { .fd = in->spare_fd, .events = POLLIN } };

		spare_start(in, sfd);
		p[1].fd = in->spare_pid ? -1 : in->listen_fd;
		p[3].fd = in->spare_fd;
		if (poll(p, in->listen_fd >= 0 ? 4 : 1, -1) < 0)
			continue;
		/* The host never writes on the notice connection: readable
		 * means it ended (a restore reset it, or the VMM closed it).
		 * Before the spare's news: a clone's sync, held by the device
		 * until the guest took the transport reset, can wake this loop
		 * in the same round, and must count as the clone's first. */
		if (in->notice_fd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			close(in->notice_fd);
			notice_connect(in);
			in->restored = 1;
			in->state = 0; /* the new connection has heard nothing */
		}
		if (in->spare_fd >= 0 && (p[3].revents & (POLLIN | POLLHUP | POLLERR)))
			spare_taken(in);
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo == SIGCHLD) {
				pid_t pid;
				int st;

				/* Reap everything: connection handlers and orphans. */
				while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
					if (pid == in->shell_pid && in->pid1) {
						in->shell_pid = 0;
						power_off(in);
					}
					if (pid == in->procs_pid) {
						say("the process manager ended; detached processes are lost");
						start_procs(in);
						spare_stop(in);
					}
					if (pid == in->first_pid)
						in->first_pid = 0;
				}
			} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGUSR2 || si.ssi_signo == SIGINT) {
				if (in->pid1)
					power_off(in);
				exit(0);
			}
		}
		if (in->listen_fd >= 0 && (p[1].revents & POLLIN)) {
			struct sockaddr_storage peer;
			socklen_t plen = sizeof(peer);
			int c = accept4(in->listen_fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
			pid_t h, server;

			if (c < 0)
				continue;
			if (!api_peer_allowed(&peer, plen)) {
				refuse_peer(in, &peer, plen);
				close(c);
				continue;
			}
			server = getpid();
			h = fork();
			if (h > 0 && in->restored) {
				in->first_pid = h; /* no spare in the snapshot: this one first */
				in->restored = 0;
			}
			if (h == 0) {
				sigset_t none;

				die_with_server(in, server);
				sigemptyset(&none);
				sigprocmask(SIG_SETMASK, &none, NULL);
				close(in->listen_fd);
				close(sfd);
				if (in->notice_fd >= 0)
					close(in->notice_fd);
				if (in->spare_fd >= 0)
					close(in->spare_fd);
				api_serve(c, &in->api);
				_exit(0);
			}
			close(c);
		}
	}
}

int main(int argc, char **argv)
{
	static struct init in;
	tool_fn *tool;

	in.pid1 = getpid() == 1;
	/* Called as nohup, flock or script (a link to guest-init: tools.h). */
	if (!in.pid1 && (tool = tools_lookup(argv[0])))
		return tool(argc, argv);
	in.port = API_VSOCK_PORT;
	in.shell = 1;
	in.listen_fd = -1;
	in.notice_fd = -1;
	in.spare_fd = -1;
	in.api.procs_fd = -1;
	snprintf(in.hostname, sizeof(in.hostname), "sandbox");
	in.api.start_ms = now_ms();
	in.api.shutdown = request_shutdown;
	in.api.sync = sync_guest;
	in.api.net = gnet_apply;
	in.api.egress = gegress_start;
	in.api.egress_port = gegress_port;
	/* Ctrl-Alt-Del (the VMM's SendCtrlAltDel on the i8042 keyboard):
	 * SIGINT to PID 1, a clean power-off (serve_loop), rather than the
	 * kernel's immediate restart. */
	if (in.pid1)
		reboot(RB_DISABLE_CAD);

	if (!in.pid1) {
		const char *reg = getenv("VMM_API_REGISTRY");

		if (argc != 3 || strcmp(argv[1], "--serve-unix")) {
			fprintf(stderr, "usage: guest-init --serve-unix PATH   (as PID 1 it takes no arguments)\n");
			return 2;
		}
		in.api.token = getenv("VMM_API_TOKEN");
		in.api.registry = reg ? reg : NULL;
		in.api.shutdown = NULL;
		in.api.sync = NULL;
		in.api.net = NULL;
		in.api.egress = NULL;
		in.api.egress_port = NULL;
		/* Tests of the notice's spare states (tests/api/spare_test.py). */
		in.notice_unix = getenv("VMM_API_NOTICE_UNIX");
		in.listen_fd = listen_unix(argv[2]);
		if (in.listen_fd < 0) {
			perror(argv[2]);
			return 1;
		}
		if (getenv("VMM_API_MAX_PROCS"))
			in.procs.max_procs = (unsigned)strtoul(getenv("VMM_API_MAX_PROCS"), NULL, 10);
		if (getenv("VMM_API_RING_BYTES"))
			in.procs.ring_bytes = (size_t)strtoul(getenv("VMM_API_RING_BYTES"), NULL, 10);
		start_procs(&in);
		if (in.notice_unix)
			notice_connect(&in);
		printf("guest-init: serving on %s\n", argv[2]);
		fflush(stdout);
		serve_loop(&in);
		return 0;
	}

	setup_system(&in);
	/* The token window, if this VMM has one (read again per connection);
	 * else an older VMM's vmm.token= (read_cmdline). */
	{
		char probe[API_TOKEN_MAX];

		if (token_window(probe, sizeof(probe)) >= 0) {
			in.api.token_read = token_window;
			explicit_bzero(in.token, sizeof(in.token));
		}
		explicit_bzero(probe, sizeof(probe));
	}
	in.api.token = !in.api.token_read && in.token[0] ? in.token : NULL;
	in.api.registry = REGISTRY;
	in.listen_fd = listen_vsock(in.port);
	if (in.listen_fd < 0)
		say("no vsock (%s): the API is not served; add --vsock to vmm run", strerror(errno));
	else
		say("API ready on vsock port %u", in.port);
	start_procs(&in);
	vmm_port(VMM_PORT_BOOT_READY);
	if (in.listen_fd >= 0)
		notice_connect(&in);
	if (in.shell)
		in.shell_pid = spawn_shell();
	serve_loop(&in);
	return 0; /* not reached */
}
