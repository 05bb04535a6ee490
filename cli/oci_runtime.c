/* vmm oci (also run as vmm-oci): an OCI runtime with runc's command line,
 * so containerd's shim and Podman's conmon run each container in a vmm
 * microVM (docs/oci-runtime.md). create boots the VM with the bundle's
 * root over virtio-fs and forks the init proxy, the host process whose pid
 * goes to --pid-file: it waits on exec.fifo until start, then runs the
 * container's process through guest-init (chrooted into the shared root,
 * as its user), carries its stdio and exits with its status. */
#define _GNU_SOURCE
#include "api_client.h"
#include "cli.h"
#include "oci_hooks.h"
#include "oci_net.h"
#include "oci_spec.h"
#include "oci_state.h"
#include "sandbox.h"
#include "../guest-init/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef VMM_VERSION
#define VMM_VERSION "0.0.0-dev"
#endif

#define OCI_VM_NAME "c"            /* the VM's sandbox name in ROOT/ID/vm */
#define OCI_GUEST_ROOT "/mnt/rootfs" /* where guest-init mounts tag rootfs */
#define OCI_MEM_OVERHEAD_MIB 64    /* guest kernel + guest-init over a memory limit */
#define OCI_FIELDS_MAX 65536

/* The global options every verb shares. */
struct oci_ctx {
	const char *root;
	const char *log;
	int log_json;
	char self[PATH_MAX]; /* the vmm binary, for the VMM it starts */
};

static void oci_log(const struct oci_ctx *c, const char *level, const char *fmt, va_list ap)
{
	char msg[2048], ts[40];
	struct json_writer w;
	char line[4096];
	struct tm tm;
	time_t now = time(NULL);
	FILE *f;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (!strcmp(level, "error"))
		fprintf(stderr, "vmm oci: %s\n", msg);
	if (!c->log || !(f = fopen(c->log, "ae")))
		return;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (c->log_json) {
		/* runc's lines, which containerd reads back for the error */
		jw_init(&w, line, sizeof(line));
		jw_obj(&w);
		jw_key(&w, "level");
		jw_str(&w, level);
		jw_key(&w, "msg");
		jw_str(&w, msg);
		jw_key(&w, "time");
		jw_str(&w, ts);
		jw_obj_end(&w);
		fprintf(f, "%s\n", jw_done(&w) ? line : "{\"level\":\"error\",\"msg\":\"(message too long)\"}");
	} else {
		fprintf(f, "time=\"%s\" level=%s msg=\"%s\"\n", ts, level, msg);
	}
	fclose(f);
}

static int fail(const struct oci_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const struct oci_ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	oci_log(c, "error", fmt, ap);
	va_end(ap);
	return CLI_EXIT_ERROR;
}

static void info(const struct oci_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void info(const struct oci_ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	oci_log(c, "info", fmt, ap);
	va_end(ap);
}

/* ---- options ------------------------------------------------------------- */

/* runc's flags come as --flag V, --flag=V, and Go's -flag V. Is argv[*i]
 * the option `name` (without dashes; `alias` a one-letter form or NULL)?
 * Sets *val for one that takes a value (and steps *i past it). 1 matched,
 * 0 not, -1 missing its value. */
static int opt(int argc, char **argv, int *i, const char *name, const char *alias, const char **val)
{
	const char *a = argv[*i], *eq;
	size_t n;

	if (a[0] != '-')
		return 0;
	a += a[1] == '-' ? 2 : 1;
	eq = strchr(a, '=');
	n = eq ? (size_t)(eq - a) : strlen(a);
	if (!((strlen(name) == n && !strncmp(a, name, n)) || (alias && strlen(alias) == n && !strncmp(a, alias, n))))
		return 0;
	if (!val)
		return eq ? -1 : 1;
	if (eq) {
		*val = eq + 1;
		return 1;
	}
	if (*i + 1 >= argc)
		return -1;
	*val = argv[++*i];
	return 1;
}

/* ---- the VM -------------------------------------------------------------- */

static int vm_env(const struct oci_ctx *c, const char *id)
{
	char dir[PATH_MAX], vm[PATH_MAX + 8];

	if (oci_state_dir(c->root, id, dir, sizeof(dir)))
		return -EINVAL;
	snprintf(vm, sizeof(vm), "%s/vm", dir);
	return setenv("VMM_STATE_DIR", vm, 1) ? -errno : 0;
}

/* Runs `vmm ARGS...` (this binary) with the container's VMM_STATE_DIR,
 * inside the network namespace nsfd (-1: ours); its stderr into err (the
 * last line kept). Its exit status, or -errno. */
static int vmm_cmd_ns(const struct oci_ctx *c, const char *id, int nsfd, char *const *args, char *err,
		      size_t errlen)
{
	int p[2], st, nul;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	if (err && errlen)
		err[0] = '\0';
	if (vm_env(c, id) || pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(p[1], 2);
		/* The VMM outlives us: keep it out of the engine's process
		 * group and session, so a signal to them is not its. */
		setsid();
		{
			sigset_t none;

			/* the init proxy blocks the signals it forwards */
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
		}
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0) {
			fprintf(stderr, "joining the container's network namespace: %s\n", strerror(errno));
			_exit(126);
		}
		execv(c->self, args);
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], err + got, got + 1 < errlen ? errlen - got - 1 : 0)) > 0)
		got += (size_t)n;
	if (errlen) {
		char buf[256];

		while (read(p[0], buf, sizeof(buf)) > 0)
			;
		err[got] = '\0';
		while (got && err[got - 1] == '\n')
			err[--got] = '\0';
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return oci_exit_status(st);
}

static int vmm_cmd(const struct oci_ctx *c, const char *id, char *const *args, char *err, size_t errlen)
{
	return vmm_cmd_ns(c, id, -1, args, err, errlen);
}

static void vm_remove(const struct oci_ctx *c, const char *id)
{
	char *const args[] = { (char *)"vmm", (char *)"rm", (char *)"-f", (char *)OCI_VM_NAME, NULL };
	char err[512];

	vmm_cmd(c, id, args, err, sizeof(err));
}

static int vm_addr(const struct oci_ctx *c, const char *id, struct sandbox *sb, struct sandbox_addr *a)
{
	if (vm_env(c, id))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->port = cli_api_port();
	return sandbox_api_addr(OCI_VM_NAME, 0, sb, a) ? -ENOENT : 0;
}

/* Shell-quotes s into the script. */
static void sh_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	fputc('\'', f);
}

/* The directory a bind's host source is shared through: itself, or a
 * file's parent. */
static void bind_dir(const char *src, char *dir, size_t len, const char **base)
{
	struct stat st;
	char *slash;

	snprintf(dir, len, "%s", src);
	*base = NULL;
	if (stat(src, &st) == 0 && !S_ISDIR(st.st_mode) && (slash = strrchr(dir, '/'))) {
		*base = src + (slash - dir) + 1;
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
}

/* The mounts as a guest shell script, and the shares binds need: the
 * share tag of mount i in tag_of[i] ("b0", "b1", ...). */
static char *mount_script(const struct oci_spec *s, char shares[][PATH_MAX], unsigned *nshares, int *share_of)
{
	char *text = NULL, dir[PATH_MAX];
	size_t len = 0;
	const char *base;
	unsigned i, j, k;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	fprintf(f, "R=%s\n", OCI_GUEST_ROOT);
	*nshares = 0;
	for (i = 0; i < s->nmounts; i++) {
		const struct oci_mount *m = &s->mounts[i];
		int is_dev = !strcmp(m->dest, "/dev");

		share_of[i] = -1;
		fputs("d=\"$R\"", f);
		sh_quote(f, m->dest);
		fputc('\n', f);
		switch (m->kind) {
		case OCI_MNT_BIND:
			bind_dir(m->source, dir, sizeof(dir), &base);
			for (j = 0; j < *nshares && strcmp(shares[j], dir); j++)
				;
			if (j == *nshares) {
				if (*nshares == 16) {
					fprintf(f, "echo 'vmm oci: more than 16 bind sources: %s skipped' >&2\n", m->dest);
					break;
				}
				snprintf(shares[(*nshares)++], PATH_MAX, "%s", dir);
			}
			share_of[i] = (int)j;
			if (base) {
				fputs("mkdir -p \"$(dirname \"$d\")\" && { [ -e \"$d\" ] || touch \"$d\"; } && ", f);
				fprintf(f, "mount --bind /mnt/b%u/", j);
				sh_quote(f, base);
				fputs(" \"$d\"", f);
			} else {
				fprintf(f, "mkdir -p \"$d\" && mount --bind /mnt/b%u \"$d\"", j);
			}
			fprintf(f, "%s\n", m->ro ? " && mount -o remount,bind,ro \"$d\"" : "");
			break;
		case OCI_MNT_TMPFS:
			/* The VM is the boundary: its whole devtmpfs is the
			 * container's /dev (runc makes a tmpfs with nodes). */
			if (is_dev) {
				fputs("mkdir -p \"$d\" && mount -t devtmpfs devtmpfs \"$d\"\n", f);
				break;
			}
			/* fallthrough */
		default:
			fputs("mkdir -p \"$d\" && mount -t ", f);
			sh_quote(f, m->kind == OCI_MNT_CGROUP ? "cgroup2" : m->type);
			/* options mount(8) takes as they are; the bind-style
			 * and propagation ones it would refuse are left out */
			for (k = 0; k < m->nopts; k++) {
				static const char *const skip[] = { "rbind", "bind", "rprivate", "private", "rslave",
								    "slave", "rshared", "shared", "newinstance" };
				size_t q;

				for (q = 0; q < sizeof(skip) / sizeof(skip[0]) && strcmp(m->opts[k], skip[q]); q++)
					;
				if (q < sizeof(skip) / sizeof(skip[0]))
					continue;
				fputs(k ? "," : " -o ", f);
				fputs(m->opts[k], f); /* quoted as a whole below if odd */
			}
			fputc(' ', f);
			sh_quote(f, m->source ? m->source : m->type);
			/* what a VM may lack (mqueue, cgroup) is not fatal */
			fprintf(f, " \"$d\"%s\n",
				m->kind == OCI_MNT_MQUEUE || m->kind == OCI_MNT_CGROUP || m->kind == OCI_MNT_OTHER ?
					" 2>/dev/null || true" :
					"");
		}
	}
	if (s->hostname) {
		fputs("hostname ", f);
		sh_quote(f, s->hostname);
		fputc('\n', f);
	}
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}

/* Runs a command in the guest (not in the container) quietly: its exit
 * status, its stderr in err. */
static int guest_run(const struct sandbox_addr *a, const char *const *argv, char *err, size_t errlen)
{
	static uint8_t buf[FRAME_MAX + 1];
	struct exec_opts o = { .argv = argv };
	char fields[OCI_FIELDS_MAX];
	size_t got = 0, n;
	uint8_t type;
	int fd, r = -EPROTO;

	err[0] = '\0';
	if (api_exec_fields(&o, fields, sizeof(fields)))
		return -E2BIG;
	if ((fd = api_open(a, fields)) < 0)
		return fd;
	while (frame_read(fd, &type, buf, FRAME_MAX, &n) == 0) {
		buf[n] = '\0';
		if (type == F_STDERR && got + n + 1 < errlen) {
			memcpy(err + got, buf, n);
			got += n;
			err[got] = '\0';
		} else if (type == F_EXIT) {
			char ab[512];
			struct json_arena ar = { ab, sizeof(ab), 0 };
			const struct json *j = json_parse((char *)buf, n, &ar, &(const char *){ NULL });
			int64_t code = 255;

			if (j)
				json_get_int(j, "exit_code", &code);
			r = (int)code;
			break;
		} else if (type == F_ERROR) {
			snprintf(err, errlen, "%.*s", (int)(errlen - 1), (char *)buf);
			r = -EIO;
			break;
		}
	}
	close(fd);
	return r;
}

/* ---- the container process ----------------------------------------------- */

/* The exec request for a container process p (argv, env, cwd, user,
 * limits, chrooted into the shared root). */
static int process_fields(const struct oci_process *p, int detach_init, char *buf, size_t len)
{
	struct exec_opts o = {
		.argv = p->args,
		.env = p->envc ? p->env : NULL,
		.cwd = p->cwd,
		.tty = p->terminal,
		.stdin_pass = 1,
		.detach = detach_init,
		.tag = detach_init ? "init" : NULL,
	};
	struct json_writer w;
	size_t n;
	unsigned i;

	if (api_exec_fields(&o, buf, len))
		return -E2BIG;
	n = strlen(buf);
	jw_init(&w, buf + n, len - n);
	w.need_comma = 1;
	jw_key(&w, "root");
	jw_str(&w, OCI_GUEST_ROOT);
	jw_key(&w, "uid");
	jw_int(&w, p->uid);
	jw_key(&w, "gid");
	jw_int(&w, p->gid);
	jw_key(&w, "groups");
	jw_arr(&w);
	for (i = 0; i < p->ngroups; i++)
		jw_int(&w, p->groups[i]);
	jw_arr_end(&w);
	jw_key(&w, "no_new_privs");
	jw_bool(&w, p->no_new_privs);
	jw_key(&w, "rlimits");
	jw_arr(&w);
	for (i = 0; i < p->nrlimits; i++) {
		jw_obj(&w);
		jw_key(&w, "type");
		jw_int(&w, p->rlimits[i].resource);
		jw_key(&w, "soft");
		jw_int(&w, p->rlimits[i].soft == UINT64_MAX ? -1 : (int64_t)p->rlimits[i].soft);
		jw_key(&w, "hard");
		jw_int(&w, p->rlimits[i].hard == UINT64_MAX ? -1 : (int64_t)p->rlimits[i].hard);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	return jw_done(&w) ? 0 : -E2BIG;
}

/* --console-socket: a pty here, its master sent over the socket
 * (SCM_RIGHTS, as runc does); the slave is returned. -errno on failure. */
static int console_setup(const char *sock, unsigned rows, unsigned cols)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char name[] = "/dev/ptmx";
	struct iovec iov = { name, sizeof(name) - 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int master, slave = -1, s = -1, r;

	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) || unlockpt(master) ||
	    (slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		goto err;
	if (rows && cols) {
		struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };

		ioctl(master, TIOCSWINSZ, &ws);
	}
	if (strlen(sock) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		goto err;
	}
	strcpy(sa.sun_path, sock);
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto err;
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &master, sizeof(int));
	if (sendmsg(s, &msg, 0) < 0)
		goto err;
	close(s);
	close(master);
	return slave;
err:
	r = -errno;
	if (s >= 0)
		close(s);
	if (slave >= 0)
		close(slave);
	if (master >= 0)
		close(master);
	return r;
}

/* In a proxy: the slave becomes our controlling terminal and stdio. */
static void console_attach(int slave)
{
	setsid();
	ioctl(slave, TIOCSCTTY, 0);
	dup2(slave, 0);
	dup2(slave, 1);
	dup2(slave, 2);
	if (slave > 2)
		close(slave);
}

static int write_pid_file(const char *path, pid_t pid)
{
	char tmp[PATH_MAX + 16], buf[32];
	int fd, n;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%d", (int)pid);
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		unlink(tmp);
		return -EIO;
	}
	close(fd);
	return rename(tmp, path) < 0 ? -errno : 0;
}

/* The signals an engine sends the init proxy itself (conmon's and the
 * shim's kill of the pid they hold, a terminal's ^C) that go on to the
 * container's process. */
static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

struct forwarder {
	struct sandbox_addr a;
	sigset_t set;
};

/* A thread of the proxy: each forwarded signal to the process (tag
 * "init") through guest-init's API. */
static void *forward_signals(void *arg)
{
	struct forwarder *f = arg;
	char fields[128], out[256];
	int sig;

	for (;;) {
		if (sigwait(&f->set, &sig))
			continue;
		snprintf(fields, sizeof(fields), "\"op\":\"signal\",\"tag\":\"init\",\"signal\":%d", sig);
		api_call2(&f->a, fields, "signal", out, sizeof(out));
	}
	return NULL;
}

/* The init proxy (the --pid-file process): waits for start on the FIFO,
 * starts the container's process detached (tag "init", so kill reaches it
 * whatever becomes of us), follows it with our stdio and exits with its
 * status. */
static int init_proxy(const struct oci_ctx *c, const char *id, const struct oci_process *p, const char *fifo)
{
	char *fields = malloc(OCI_FIELDS_MAX), out[512];
	struct forwarder *fwd = calloc(1, sizeof(*fwd)); /* the thread's until we exit */
	struct sandbox_addr a;
	struct sandbox sb;
	struct api_error e;
	pthread_t th;
	unsigned i;
	int fd, r;

	if (!fields || !fwd)
		return 1;
	/* start opens the FIFO's other end: until then, nothing runs */
	fd = open(fifo, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1)
		return 1;
	close(fd);
	if (vm_addr(c, id, &sb, &a) || process_fields(p, 1, fields, OCI_FIELDS_MAX))
		return fail(c, "%s: the container's VM is gone", id), 1;
	/* from here on the forwarded signals are the process's: blocked here
	 * before it starts, so none is lost, and taken by the forwarder */
	fwd->a = a;
	sigemptyset(&fwd->set);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&fwd->set, forwarded[i]);
	pthread_sigmask(SIG_BLOCK, &fwd->set, NULL);
	fd = api_open_v(&a, 2, fields);
	if (fd < 0)
		return fail(c, "%s: cannot reach the container's VM: %s", id, strerror(-fd)), 1;
	r = api_result(fd, out, sizeof(out), &e);
	close(fd);
	if (r) {
		/* as a shell reports a command it cannot run */
		fprintf(stderr, "vmm oci: %s: %s\n", p->args[0], r == -1 ? e.message : "the VM went away");
		return e.eno == ENOENT || e.eno == EACCES ? (e.eno == ENOENT ? 127 : 126) : 1;
	}
	free(fields);
	if (pthread_create(&th, NULL, forward_signals, fwd) == 0)
		pthread_detach(th);
	r = api_attach(&a, "init", 1, p->terminal);
	/* The container's init is gone: so is the container (runc's stops
	 * with it). The VM goes before we exit, so once the engine sees the
	 * exit, state says stopped and nothing of it runs. */
	vm_remove(c, id);
	return r < 0 ? 1 : r;
}

/* ---- verbs --------------------------------------------------------------- */

static void now_rfc3339(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char s[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.19s.%09ldZ", s, ts.tv_nsec % 1000000000L);
}

static void annotations_json(const struct oci_spec *s, char *buf, size_t len)
{
	struct json_writer w;
	unsigned i;

	jw_init(&w, buf, len);
	jw_obj(&w);
	for (i = 0; i < s->nann; i++) {
		jw_key(&w, s->ann_key[i]);
		jw_str(&w, s->ann_val[i]);
	}
	jw_obj_end(&w);
	if (!jw_done(&w))
		snprintf(buf, len, "{}");
}

/* Removes what create made for id: the VM and the folder. */
static void cleanup(const struct oci_ctx *c, const char *id)
{
	char dir[PATH_MAX];

	vm_remove(c, id);
	if (!oci_state_dir(c->root, id, dir, sizeof(dir)))
		cli_rm_tree(dir);
}

static int boot_vm(const struct oci_ctx *c, const char *id, const struct oci_spec *s, char shares[][PATH_MAX],
		   unsigned nshares, const char *netopt, int nsfd)
{
	char *args[64], fs[20][PATH_MAX + 64], mem[32], cpus[16], err[1024];
	const char *v;
	unsigned long long mib = 512;
	unsigned n = 0, i, ncpu = 1;
	int r;

	args[n++] = "vmm";
	args[n++] = "run";
	args[n++] = "-d";
	args[n++] = "--name";
	args[n++] = OCI_VM_NAME;
	snprintf(fs[0], sizeof(fs[0]), "tag=rootfs,path=%s%s", s->root, s->root_ro ? ",ro" : "");
	args[n++] = "--fs";
	args[n++] = fs[0];
	for (i = 0; i < nshares; i++) {
		snprintf(fs[i + 1], sizeof(fs[i + 1]), "tag=b%u,path=%.4000s", i, shares[i]);
		args[n++] = "--fs";
		args[n++] = fs[i + 1];
	}
	/* memory: the limit plus the guest's own overhead; else the
	 * annotation, else vmm's default */
	if (s->mem_limit > 0)
		mib = ((unsigned long long)s->mem_limit >> 20) + OCI_MEM_OVERHEAD_MIB;
	if ((v = oci_spec_annotation(s, "io.vmm.mem")) && cli_parse_mib(v, &mib))
		return fail(c, "annotation io.vmm.mem: %s is not a size", v);
	if (s->cpu_quota > 0 && s->cpu_period > 0)
		ncpu = (unsigned)((s->cpu_quota + (int64_t)s->cpu_period - 1) / (int64_t)s->cpu_period);
	if ((v = oci_spec_annotation(s, "io.vmm.cpus")))
		ncpu = (unsigned)strtoul(v, NULL, 10);
	if (ncpu < 1 || ncpu > 64)
		return fail(c, "vCPUs: %u is not 1..64", ncpu);
	snprintf(mem, sizeof(mem), "%llu", mib);
	snprintf(cpus, sizeof(cpus), "%u", ncpu);
	args[n++] = "--mem";
	args[n++] = mem;
	args[n++] = "--cpus";
	args[n++] = cpus;
	if ((v = oci_spec_annotation(s, "io.vmm.kernel"))) {
		args[n++] = "--kernel";
		args[n++] = (char *)v;
	}
	if (netopt) {
		args[n++] = "--net";
		args[n++] = (char *)netopt;
	}
	args[n] = NULL;
	r = vmm_cmd_ns(c, id, nsfd, args, err, sizeof(err));
	if (r)
		return fail(c, "%s: the VM did not start: %s", id, err[0] ? err : strerror(r < 0 ? -r : EIO));
	return 0;
}

/* The container's network (docs/oci-runtime.md, "Networking"): the
 * namespace's veth as --net for the VMM, which starts inside it. 0 with
 * *netopt NULL when there is none to join (no path, or only lo). */
static int net_prepare(const struct oci_ctx *c, const struct oci_spec *s, struct oci_net *n, char *opt,
		       size_t optlen, const char **netopt, int *nsfd)
{
	char why[512], text[4096];
	const char *v;
	unsigned i;
	int r;

	*netopt = NULL;
	*nsfd = -1;
	if (!s->netns)
		return 0;
	/* the proxy (whose /proc/PID/ns/net a pod's other containers join)
	 * lives in the namespace even when the VM takes no interface */
	if ((*nsfd = open(s->netns, O_RDONLY | O_CLOEXEC)) < 0)
		return fail(c, "network namespace %s: %s", s->netns, strerror(errno));
	/* A pod's sandbox (pause) container leaves the pod's interface to
	 * the container that runs the workload (one VM per container). */
	if (((v = oci_spec_annotation(s, "io.kubernetes.cri.container-type")) && !strcmp(v, "sandbox")) ||
	    ((v = oci_spec_annotation(s, "io.kubernetes.cri-o.ContainerType")) && !strcmp(v, "sandbox")))
		return 0;
	r = oci_net_probe(s->netns, n, why, sizeof(why));
	if (r == -ENOENT)
		return 0;
	if (r)
		return fail(c, "%s", why);
	if (n->taken) {
		/* another container's VM has the namespace's interface */
		info(c, "network namespace %s: its interface is another VM's; this one has no network", s->netns);
		return 0;
	}
	/* the guest's resolv.conf: the nameserver of the one the engine
	 * binds into the container (which the container sees anyway) */
	for (i = 0; i < s->nmounts; i++) {
		FILE *f;
		size_t got;

		if (s->mounts[i].kind != OCI_MNT_BIND || strcmp(s->mounts[i].dest, "/etc/resolv.conf") ||
		    !(f = fopen(s->mounts[i].source, "re")))
			continue;
		got = fread(text, 1, sizeof(text) - 1, f);
		text[got] = '\0';
		fclose(f);
		if (oci_net_nameserver(text, n->dns, sizeof(n->dns)))
			n->dns[0] = '\0';
	}
	if (oci_net_option(n, opt, optlen))
		return fail(c, "network: option too long");
	*netopt = opt;
	return 0;
}

/* An older guest-init ignores exec's container members and would run
 * the process as root outside the container's root: refuse it. */
static int guest_capable(const struct oci_ctx *c, const char *id, const struct sandbox_addr *a)
{
	char out[1024];
	const char *f;

	if (api_call2(a, "\"op\":\"health\"", "health", out, sizeof(out)))
		return fail(c, "%s: the VM's guest-init does not answer", id);
	f = strstr(out, "\"features\"");
	if (!f || !strstr(f, "\"container\""))
		return fail(c, "%s: the VM's guest-init is too old for containers (no \"container\" feature: it would "
			       "run the process as root outside the container's root); use a current initramfs",
			    id);
	return 0;
}

/* Runs the hooks of kind k with the state as status says. */
static int hooks(const struct oci_ctx *c, const struct oci_spec *s, enum oci_hook_kind k, const struct oci_state *st,
		 enum oci_status status)
{
	char state[16384], why[1200];
	int r;

	if (!s->nhooks[k])
		return 0;
	if (oci_state_render(st, status, 0, state, sizeof(state)))
		return fail(c, "%s: state too large for its hooks", st->id);
	if ((r = oci_hooks_run(s, k, state, why, sizeof(why)))) {
		if (k == OCI_HOOK_POSTSTART || k == OCI_HOOK_POSTSTOP) {
			/* runtime.md: a warning, the lifecycle goes on */
			info(c, "warning: %s", why);
			fprintf(stderr, "vmm oci: warning: %s\n", why);
			return 0;
		}
		return fail(c, "%s: %s", st->id, why);
	}
	return 0;
}

static int oci_create(const struct oci_ctx *c, int argc, char **argv)
{
	const char *bundle = NULL, *pid_file = NULL, *console = NULL, *id = NULL, *v;
	char cwd[PATH_MAX], why[512], dir[PATH_MAX], fifo[PATH_MAX + 16], err[2048];
	static char shares[16][PATH_MAX];
	int share_of[OCI_MAX_MOUNTS], i, r, lock = -1, slave = -1, made = 0;
	struct oci_spec *s = calloc(1, sizeof(*s));
	struct oci_state st = { 0 };
	struct sandbox_addr a;
	struct sandbox sb;
	unsigned nshares = 0;
	char *script = NULL;
	struct stat sst;
	struct oci_net net;
	char netopt_buf[256];
	const char *netopt = NULL;
	int nsfd = -1;
	pid_t pid = -1;

	if (!s)
		return fail(c, "out of memory");
	for (i = 1; i < argc; i++) {
		if ((r = opt(argc, argv, &i, "bundle", "b", &bundle)) || (r = opt(argc, argv, &i, "pid-file", NULL, &pid_file)) ||
		    (r = opt(argc, argv, &i, "console-socket", NULL, &console)) ||
		    (r = opt(argc, argv, &i, "preserve-fds", NULL, &v)) || (r = opt(argc, argv, &i, "no-pivot", NULL, NULL)) ||
		    (r = opt(argc, argv, &i, "no-new-keyring", NULL, NULL))) {
			if (r < 0) {
				r = fail(c, "create: option %s needs a value", argv[i]);
				goto out;
			}
			continue;
		}
		if (argv[i][0] == '-' || id) {
			r = fail(c, "create: unexpected argument '%s'", argv[i]);
			goto out;
		}
		id = argv[i];
	}
	if (!id) {
		r = fail(c, "create: requires a container ID");
		goto out;
	}
	if (!oci_id_ok(id)) {
		r = fail(c, "invalid container ID '%s': 1-%d of A-Z a-z 0-9 _ + - .", id, OCI_ID_MAX);
		goto out;
	}
	if (!bundle)
		bundle = getcwd(cwd, sizeof(cwd));
	if (!bundle || bundle[0] != '/') {
		if (!bundle || !realpath(bundle, cwd)) {
			r = fail(c, "bundle %s: %s", bundle ? bundle : "", strerror(errno));
			goto out;
		}
		bundle = cwd;
	}
	r = oci_spec_load(s, bundle, why, sizeof(why));
	if (r == -ENOENT) {
		r = fail(c, "JSON specification file config.json not found in %s", bundle);
		goto out;
	}
	if (r) {
		r = fail(c, "%s/config.json: %s", bundle, r == -EINVAL ? why : strerror(-r));
		goto out;
	}
	if (!s->has_process) {
		r = fail(c, "%s/config.json: process: required to create a container", bundle);
		goto out;
	}
	if (stat(s->root, &sst) || !S_ISDIR(sst.st_mode)) {
		r = fail(c, "root.path %s: not a directory", s->root);
		goto out;
	}
	if (s->process.terminal && !console) {
		r = fail(c, "process.terminal is set: --console-socket is required");
		goto out;
	}
	if (!s->process.terminal && console) {
		r = fail(c, "--console-socket given but process.terminal is false");
		goto out;
	}
	r = oci_state_create(c->root, id);
	if (r == -EEXIST) {
		r = fail(c, "container with id exists: %s", id);
		goto out;
	}
	if (r) {
		r = fail(c, "state directory %s: %s", c->root, strerror(-r));
		goto out;
	}
	made = 1;
	lock = oci_state_lock(c->root, id, 1);
	oci_state_dir(c->root, id, dir, sizeof(dir));
	snprintf(st.id, sizeof(st.id), "%s", id);
	snprintf(st.bundle, sizeof(st.bundle), "%s", bundle);
	now_rfc3339(st.created, sizeof(st.created));
	annotations_json(s, st.annotations, sizeof(st.annotations));
	st.status = OCI_CREATING;
	if (lock < 0 || oci_state_save(c->root, &st)) {
		r = fail(c, "%s: cannot write its state", dir);
		goto out;
	}
	if (!(script = mount_script(s, shares, &nshares, share_of))) {
		r = fail(c, "out of memory");
		goto out;
	}
	if ((r = net_prepare(c, s, &net, netopt_buf, sizeof(netopt_buf), &netopt, &nsfd)))
		goto out;
	if ((r = boot_vm(c, id, s, shares, nshares, netopt, nsfd)))
		goto out;
	if (vm_addr(c, id, &sb, &a)) {
		r = fail(c, "%s: the VM started but cannot be found", id);
		goto out;
	}
	if ((r = guest_capable(c, id, &a)))
		goto out;
	if (netopt && oci_net_connect(s->netns, &net, why, sizeof(why))) {
		r = fail(c, "%s: connecting the VM to %s in %s: %s", id, net.ifname, s->netns, why);
		goto out;
	}
	{
		const char *sh[] = { "sh", "-c", script, NULL };
		int rc = guest_run(&a, sh, err, sizeof(err));

		if (rc) {
			r = fail(c, "%s: preparing the container's mounts in the VM failed (%d): %s", id, rc, err);
			goto out;
		}
	}
	snprintf(fifo, sizeof(fifo), "%s/exec.fifo", dir);
	if (mkfifo(fifo, 0600) < 0) {
		r = fail(c, "%s: %s", fifo, strerror(errno));
		goto out;
	}
	if (console && (slave = console_setup(console, s->process.console_rows, s->process.console_cols)) < 0) {
		r = fail(c, "--console-socket %s: %s", console, strerror(-slave));
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r = fail(c, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		if (lock >= 0)
			close(lock);
		if (slave >= 0)
			console_attach(slave);
		else
			setsid();
		/* in the container's network namespace, as runc's init is */
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
			_exit(fail(c, "%s: joining %s: %s", id, s->netns, strerror(errno)));
		_exit(init_proxy(c, id, &s->process, fifo));
	}
	if (slave >= 0)
		close(slave);
	st.pid = pid;
	{
		char state;

		if (cli_proc_stat(pid, &state, &st.pid_start)) {
			r = fail(c, "%s: the init proxy died at once", id);
			goto out;
		}
	}
	/* runtime.md "Lifecycle" 5-7: the environment exists, the process
	 * has not run (the proxy waits for start) */
	if ((r = hooks(c, s, OCI_HOOK_PRESTART, &st, OCI_CREATING)) ||
	    (r = hooks(c, s, OCI_HOOK_CREATE_RUNTIME, &st, OCI_CREATING)) ||
	    (r = hooks(c, s, OCI_HOOK_CREATE_CONTAINER, &st, OCI_CREATING)))
		goto out;
	st.status = OCI_CREATED;
	if (oci_state_save(c->root, &st) || (pid_file && write_pid_file(pid_file, pid))) {
		r = fail(c, "%s: cannot write its state or --pid-file %s", id, pid_file ? pid_file : "");
		goto out;
	}
	info(c, "%s: created (VM %s, init proxy %d%s%s)", id, dir, (int)pid, netopt ? ", network " : "",
	     netopt ? netopt : "");
	r = 0;
out:
	if (r && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (nsfd >= 0)
		close(nsfd);
	if (r && made)
		cleanup(c, id);
	if (lock >= 0)
		close(lock);
	free(script);
	oci_spec_free(s);
	free(s);
	return r;
}

/* The bundle's config.json again, for its hooks. */
static int spec_for_hooks(const struct oci_ctx *c, const struct oci_state *st, struct oci_spec *s)
{
	char why[512];
	int r = oci_spec_load(s, st->bundle, why, sizeof(why));

	return r ? fail(c, "%s/config.json: %s", st->bundle, r == -EINVAL ? why : strerror(-r)) : 0;
}

/* Looks the container up (-ENOENT: "does not exist") under its lock. */
static int load(const struct oci_ctx *c, const char *id, int exclusive, struct oci_state *st, int *lock)
{
	int r;

	*lock = -1;
	if (!id || !oci_id_ok(id))
		return fail(c, "container ID missing or invalid");
	r = oci_state_lock(c->root, id, exclusive);
	if (r >= 0) {
		*lock = r;
		r = oci_state_load(c->root, id, st);
	}
	if (r == -ENOENT)
		return fail(c, "container does not exist: %s", id);
	if (r) {
		if (*lock >= 0)
			close(*lock);
		*lock = -1;
		return fail(c, "%s: unreadable state: %s", id, strerror(-r));
	}
	return 0;
}

static const char *one_id(int argc, char **argv, int first)
{
	int i;

	for (i = first; i < argc; i++)
		if (argv[i][0] != '-')
			return argv[i];
	return NULL;
}

static int oci_start(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = one_id(argc, argv, 1);
	char dir[PATH_MAX], fifo[PATH_MAX + 16], b;
	struct oci_spec *s = calloc(1, sizeof(*s));
	struct oci_state st;
	struct pollfd pfd;
	int lock, fd, r;

	if (!s)
		return fail(c, "out of memory");
	if ((r = load(c, id, 1, &st, &lock))) {
		free(s);
		return r;
	}
	r = CLI_EXIT_ERROR;
	switch (oci_status_now(st.status, oci_proxy_alive(&st))) {
	case OCI_CREATED:
		break;
	case OCI_RUNNING:
		fail(c, "cannot start an already running container");
		goto out;
	default:
		fail(c, "cannot start a container that has stopped");
		goto out;
	}
	/* runtime.md "Lifecycle" 8: startContainer before the process runs */
	if (spec_for_hooks(c, &st, s) || hooks(c, s, OCI_HOOK_START_CONTAINER, &st, OCI_CREATED))
		goto out;
	oci_state_dir(c->root, id, dir, sizeof(dir));
	snprintf(fifo, sizeof(fifo), "%s/exec.fifo", dir);
	fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		fail(c, "%s: %s", fifo, strerror(errno));
		goto out;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) != 1 || read(fd, &b, 1) != 1) {
		close(fd);
		fail(c, "%s: the init proxy did not take the start", id);
		goto out;
	}
	close(fd);
	unlink(fifo);
	st.status = OCI_RUNNING;
	if (oci_state_save(c->root, &st)) {
		fail(c, "%s: cannot write its state", id);
		goto out;
	}
	hooks(c, s, OCI_HOOK_POSTSTART, &st, OCI_RUNNING);
	r = 0;
out:
	close(lock);
	oci_spec_free(s);
	free(s);
	return r;
}

static int oci_state_verb(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = one_id(argc, argv, 1);
	struct oci_state st;
	char buf[16384];
	int lock, r;

	if ((r = load(c, id, 0, &st, &lock)))
		return r;
	close(lock);
	if (oci_state_render(&st, oci_status_now(st.status, oci_proxy_alive(&st)), 0, buf, sizeof(buf)))
		return fail(c, "%s: state too large", id);
	printf("%s\n", buf);
	return 0;
}

static int oci_kill(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = NULL, *sigs = "SIGTERM";
	char fields[128], out[256];
	struct oci_state st;
	struct sandbox_addr a;
	struct sandbox sb;
	enum oci_status now;
	int i, n = 0, lock, r, sig;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--all") || !strcmp(argv[i], "-a") || !strcmp(argv[i], "-all"))
			continue;
		if (n == 0)
			id = argv[i];
		else if (n == 1)
			sigs = argv[i];
		n++;
	}
	if ((sig = oci_signal_parse(sigs)) < 0)
		return fail(c, "kill: %s is not a signal", sigs);
	if ((r = load(c, id, 0, &st, &lock)))
		return r;
	close(lock);
	now = oci_status_now(st.status, oci_proxy_alive(&st));
	if (now == OCI_STOPPED)
		return fail(c, "container not running");
	if (now == OCI_CREATED) {
		/* nothing runs in the guest yet: the proxy stands for it */
		return kill(st.pid, sig) < 0 ? fail(c, "kill %d: %s", (int)st.pid, strerror(errno)) : 0;
	}
	snprintf(fields, sizeof(fields), "\"op\":\"signal\",\"tag\":\"init\",\"signal\":%d", sig);
	if (vm_addr(c, id, &sb, &a) || api_call2(&a, fields, "kill", out, sizeof(out))) {
		/* the VM is gone or the process ended meanwhile: the proxy */
		if (kill(st.pid, sig == SIGKILL ? SIGKILL : SIGTERM) < 0)
			return fail(c, "container not running");
	}
	return 0;
}

static int oci_delete(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = NULL;
	char dir[PATH_MAX];
	struct oci_state st;
	int i, force = 0, lock, r;

	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f") || !strcmp(argv[i], "-force"))
			force = 1;
		else if (argv[i][0] != '-')
			id = argv[i];
	if (!id || !oci_id_ok(id))
		return fail(c, "delete: container ID missing or invalid");
	lock = oci_state_lock(c->root, id, 1);
	if (lock == -ENOENT || (lock >= 0 && oci_state_load(c->root, id, &st) == -ENOENT)) {
		if (lock >= 0)
			close(lock);
		/* runc: delete --force of an unknown container is no error */
		if (force) {
			if (!oci_state_dir(c->root, id, dir, sizeof(dir)))
				cli_rm_tree(dir);
			return 0;
		}
		return fail(c, "container does not exist: %s", id);
	}
	if (lock < 0)
		return fail(c, "%s: %s", id, strerror(-lock));
	r = 0;
	switch (oci_status_now(st.status, oci_proxy_alive(&st))) {
	case OCI_STOPPED:
	case OCI_CREATED: /* runc deletes a created container without --force */
	case OCI_CREATING:
		break;
	case OCI_RUNNING:
		if (!force) {
			r = fail(c, "cannot delete container %s that is not stopped: running", id);
			goto out;
		}
	}
	if (oci_proxy_alive(&st))
		kill(st.pid, SIGKILL);
	vm_remove(c, id);
	{
		/* runtime.md "Lifecycle" 12: poststop after the container is
		 * gone; a bundle that is gone already has none to run */
		struct oci_spec *s = calloc(1, sizeof(*s));
		char why[512];

		if (s && oci_spec_load(s, st.bundle, why, sizeof(why)) == 0)
			hooks(c, s, OCI_HOOK_POSTSTOP, &st, OCI_STOPPED);
		if (s)
			oci_spec_free(s);
		free(s);
	}
	cleanup(c, id);
	info(c, "%s: deleted", id);
out:
	close(lock);
	return r;
}

/* exec: the process from --process FILE or the arguments, on top of the
 * container's own (env, cwd, user), as runc does. */
static int oci_exec(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = NULL, *procfile = NULL, *pid_file = NULL, *console = NULL, *v;
	char why[512], *fields = NULL, *text = NULL;
	int i, r, lock, detach = 0, tty = 0, slave = -1;
	struct oci_spec *s = calloc(1, sizeof(*s));
	struct oci_process *p;
	struct oci_state st;
	struct sandbox_addr a;
	struct sandbox sb;
	struct json_arena ar = { 0 };
	pid_t pid;

	if (!s)
		return fail(c, "out of memory");
	p = &s->process;
	for (i = 1; i < argc && !id; i++) {
		if ((r = opt(argc, argv, &i, "process", "p", &procfile)) || (r = opt(argc, argv, &i, "pid-file", NULL, &pid_file)) ||
		    (r = opt(argc, argv, &i, "console-socket", NULL, &console)) ||
		    (r = opt(argc, argv, &i, "detach", "d", NULL)) || (r = opt(argc, argv, &i, "tty", "t", NULL))) {
			if (r < 0) {
				r = fail(c, "exec: option %s needs a value", argv[i]);
				goto out;
			}
			if (!strcmp(argv[i] + strspn(argv[i], "-"), "detach") || !strcmp(argv[i], "-d"))
				detach = 1;
			if (!strcmp(argv[i] + strspn(argv[i], "-"), "tty") || !strcmp(argv[i], "-t"))
				tty = 1;
			continue;
		}
		/* options vmm takes the container's values for */
		if ((r = opt(argc, argv, &i, "cwd", NULL, &v)) || (r = opt(argc, argv, &i, "env", "e", &v)) ||
		    (r = opt(argc, argv, &i, "user", "u", &v)) || (r = opt(argc, argv, &i, "cap", "c", &v)) ||
		    (r = opt(argc, argv, &i, "process-label", NULL, &v)) || (r = opt(argc, argv, &i, "apparmor", NULL, &v)) ||
		    (r = opt(argc, argv, &i, "preserve-fds", NULL, &v)) || (r = opt(argc, argv, &i, "cgroup", NULL, &v)) ||
		    (r = opt(argc, argv, &i, "no-new-privs", NULL, NULL)))
			continue;
		if (argv[i][0] == '-') {
			r = fail(c, "exec: unknown option %s", argv[i]);
			goto out;
		}
		id = argv[i];
	}
	if ((r = load(c, id, 0, &st, &lock)))
		goto out;
	close(lock);
	if (oci_status_now(st.status, oci_proxy_alive(&st)) != OCI_RUNNING) {
		r = fail(c, "cannot exec in a stopped container");
		goto out;
	}
	/* the container's own process first: the defaults */
	if ((r = oci_spec_load(s, st.bundle, why, sizeof(why)))) {
		r = fail(c, "%s/config.json: %s", st.bundle, why);
		goto out;
	}
	if (procfile) {
		size_t len;
		FILE *f = fopen(procfile, "re");
		const struct json *j;
		const char *jerr = NULL;

		if (!f) {
			r = fail(c, "--process %s: %s", procfile, strerror(errno));
			goto out;
		}
		text = malloc(OCI_SPEC_MAX_BYTES);
		len = text ? fread(text, 1, OCI_SPEC_MAX_BYTES, f) : 0;
		fclose(f);
		ar.size = len * 8 + 65536;
		ar.buf = text ? malloc(ar.size) : NULL;
		if (!ar.buf || !(j = json_parse(text, len, &ar, &jerr)) || oci_process_parse(j, p, why, sizeof(why))) {
			r = fail(c, "--process %s: %s", procfile, jerr ? jerr : why);
			goto out;
		}
	} else {
		if (i >= argc) {
			r = fail(c, "exec: a command is required");
			goto out;
		}
		p->argc = 0;
		for (; i < argc && p->argc < OCI_MAX_ARGS; i++)
			p->args[p->argc++] = argv[i];
		p->args[p->argc] = NULL;
		p->terminal = tty;
	}
	if (p->terminal && !console && detach) {
		r = fail(c, "exec: a terminal needs --console-socket");
		goto out;
	}
	if (vm_addr(c, id, &sb, &a)) {
		r = fail(c, "%s: its VM is gone", id);
		goto out;
	}
	if (!(fields = malloc(OCI_FIELDS_MAX)) || process_fields(p, 0, fields, OCI_FIELDS_MAX)) {
		r = fail(c, "exec: request too large");
		goto out;
	}
	if (console && (slave = console_setup(console, p->console_rows, p->console_cols)) < 0) {
		r = fail(c, "--console-socket %s: %s", console, strerror(-slave));
		goto out;
	}
	if (!detach) {
		int fd = api_open(&a, fields);
		struct exec_opts o = { .tty = p->terminal, .stdin_pass = 1 };

		if (slave >= 0)
			console_attach(slave);
		r = fd < 0 ? fail(c, "%s: cannot reach its VM", id) : api_session(fd, &o, p->args[0]);
		r = r < 0 ? CLI_EXIT_ERROR : r;
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct exec_opts o = { .tty = p->terminal, .stdin_pass = 1 };
		int fd;

		if (slave >= 0)
			console_attach(slave);
		else
			setsid();
		fd = api_open(&a, fields);
		_exit(fd < 0 ? 1 : (r = api_session(fd, &o, p->args[0])) < 0 ? 1 : r);
	}
	if (slave >= 0)
		close(slave);
	if (pid < 0 || (pid_file && write_pid_file(pid_file, pid))) {
		r = fail(c, "exec: cannot start its proxy or write --pid-file");
		goto out;
	}
	r = 0;
out:
	free(fields);
	free(text);
	free(ar.buf);
	oci_spec_free(s);
	free(s);
	return r;
}

static int oci_ps(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = NULL, *fmt = "table";
	struct oci_state st;
	int i, lock, r, alive;

	for (i = 1; i < argc; i++)
		if ((r = opt(argc, argv, &i, "format", "f", &fmt)) < 0)
			return fail(c, "ps: --format needs a value");
		else if (!r && argv[i][0] != '-')
			id = argv[i];
	if ((r = load(c, id, 0, &st, &lock)))
		return r;
	close(lock);
	alive = oci_proxy_alive(&st);
	/* The host's view: the container's processes run in its VM; the
	 * init proxy is the one host pid that stands for them. */
	if (!strcmp(fmt, "json"))
		alive ? printf("[%d]\n", (int)st.pid) : printf("[]\n");
	else if (!strcmp(fmt, "table"))
		alive ? printf("PID\tCMD\n%d\tvmm oci init proxy (%s)\n", (int)st.pid, id) : printf("PID\tCMD\n");
	else
		return fail(c, "ps: --format is table or json");
	return 0;
}

static int oci_features(void)
{
	printf("{\"ociVersionMin\":\"1.0.0\",\"ociVersionMax\":\"%s\","
	       "\"hooks\":[\"prestart\",\"createRuntime\",\"createContainer\",\"startContainer\","
	       "\"poststart\",\"poststop\"],"
	       "\"mountOptions\":[\"ro\",\"rw\",\"nosuid\",\"nodev\",\"noexec\",\"bind\",\"rbind\"],"
	       "\"linux\":{\"namespaces\":[\"network\"],\"capabilities\":[],"
	       "\"cgroup\":{\"v1\":false,\"v2\":false,\"systemd\":false,\"systemdUser\":false},"
	       "\"seccomp\":{\"enabled\":false},\"apparmor\":{\"enabled\":false},\"selinux\":{\"enabled\":false}},"
	       "\"annotations\":{\"io.vmm.runtime\":\"microvm\"}}\n",
	       OCI_VERSION);
	return 0;
}

static void oci_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm oci [global options] COMMAND [options] ID   (also: vmm-oci ...)\n\n"
		"An OCI runtime with runc's command line: containerd's shim and Podman run\n"
		"each container in a vmm microVM with it (docs/oci-runtime.md).\n\n"
		"global options:\n"
		"  --root DIR           state directory (default " OCI_DEFAULT_ROOT ")\n"
		"  --log FILE           errors and events go here too\n"
		"  --log-format F       text or json (runc's lines)\n"
		"  --systemd-cgroup     accepted; the VMM is not put in a systemd scope\n\n"
		"commands:\n"
		"  create [--bundle DIR] [--pid-file F] [--console-socket S] ID\n"
		"                       boot the VM, prepare the process (not started)\n"
		"  start ID             run the prepared process\n"
		"  state ID             the runtime spec's state, as JSON\n"
		"  kill [--all] ID [SIG]  signal the process (default TERM)\n"
		"  delete [--force] ID  stop the VM, remove the container\n"
		"  exec [--process F | ARGS] [--detach] [--pid-file F] [--console-socket S]\n"
		"       [--tty] ID [CMD...]   another process in the container\n"
		"  ps [--format table|json] ID\n"
		"  features             what this runtime supports, as JSON\n"
		"  --version\n");
}

int oci_main(int argc, char **argv)
{
	struct oci_ctx c = { .root = OCI_DEFAULT_ROOT };
	const char *fmt = NULL, *verb, *ignored;
	ssize_t n;
	int i, r;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-v")) {
			printf("vmm-oci version %s\nspec: %s\n", VMM_VERSION, OCI_VERSION);
			return 0;
		}
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			oci_usage(stdout);
			return 0;
		}
		if ((r = opt(argc, argv, &i, "root", NULL, &c.root)) || (r = opt(argc, argv, &i, "log", NULL, &c.log)) ||
		    (r = opt(argc, argv, &i, "log-format", NULL, &fmt)) ||
		    (r = opt(argc, argv, &i, "systemd-cgroup", NULL, NULL)) || (r = opt(argc, argv, &i, "debug", NULL, NULL)) ||
		    (r = opt(argc, argv, &i, "rootless", NULL, &ignored)) ||
		    (r = opt(argc, argv, &i, "criu", NULL, &ignored))) {
			if (r < 0)
				return fail(&c, "option %s needs a value", argv[i]);
			continue;
		}
		return cli_usage_error("oci", "unknown option '%s'", argv[i]);
	}
	if (fmt && strcmp(fmt, "text") && strcmp(fmt, "json"))
		fmt = NULL;
	c.log_json = fmt && !strcmp(fmt, "json");
	if (i >= argc) {
		oci_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	n = readlink("/proc/self/exe", c.self, sizeof(c.self) - 1);
	if (n <= 0)
		return fail(&c, "cannot find the vmm binary: %s", strerror(errno));
	c.self[n] = '\0';
	verb = argv[i];
	argc -= i;
	argv += i;
	if (strcmp(verb, "features") && strcmp(verb, "version") && strcmp(verb, "--version") &&
	    (r = oci_root_check(c.root)))
		return fail(&c, "state directory %s: %s (not yours alone)", c.root, strerror(-r));
	if (!strcmp(verb, "create"))
		return oci_create(&c, argc, argv);
	if (!strcmp(verb, "start"))
		return oci_start(&c, argc, argv);
	if (!strcmp(verb, "state"))
		return oci_state_verb(&c, argc, argv);
	if (!strcmp(verb, "kill"))
		return oci_kill(&c, argc, argv);
	if (!strcmp(verb, "delete"))
		return oci_delete(&c, argc, argv);
	if (!strcmp(verb, "exec"))
		return oci_exec(&c, argc, argv);
	if (!strcmp(verb, "ps"))
		return oci_ps(&c, argc, argv);
	if (!strcmp(verb, "features"))
		return oci_features();
	if (!strcmp(verb, "--version") || !strcmp(verb, "version")) {
		printf("vmm-oci version %s\nspec: %s\n", VMM_VERSION, OCI_VERSION);
		return 0;
	}
	return fail(&c, "unknown command %s (create, start, state, kill, delete, exec, ps, features)", verb);
}

const struct cli_verb cli_verb_oci = {
	.name = "oci",
	.summary = "an OCI runtime (runc's command line) for containerd and Podman",
	.run = oci_main,
	.usage = oci_usage,
};
