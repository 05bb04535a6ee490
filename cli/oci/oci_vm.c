/* The container's VM for vmm oci (cli/oci/oci_vm.h): the runtime's log,
 * booting, finding and removing the VM, the mounts and commands run in
 * the guest, the network namespace's veth. */
#include "cli/oci/oci_vm.h"
#include "cli/oci/oci_pod.h"
#include "cli/oci/oci_rootfs.h"
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/oci/oci_state.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void oci_log_line(const struct oci_ctx *c, const char *level, const char *msg)
{
	char ts[40];
	struct json_writer w;
	char line[4096];
	struct tm tm;
	time_t now = time(NULL);
	FILE *f;

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

void oci_info(const struct oci_ctx *c, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	oci_log_line(c, "info", msg);
}

/* ---- the VM -------------------------------------------------------------- */

/* VMM_STATE_DIR for id's VM: ROOT/ID/vm, or its pod's for a pod's
 * workload container (cli/oci/oci_pod.h). */
static int vm_env(const struct oci_ctx *c, const char *id)
{
	char dir[PATH_MAX], vm[PATH_MAX + 8], sbid[OCI_ID_MAX + 2];

	if (!oci_pod_of(c, id, sbid, sizeof(sbid)))
		id = sbid;
	if (oci_state_dir(c->root, id, dir, sizeof(dir)))
		return -EINVAL;
	snprintf(vm, sizeof(vm), "%s/vm", dir);
	return setenv("VMM_STATE_DIR", vm, 1) ? -errno : 0;
}

/* In cmd_ns's child: what failed and errno on its stderr (the pipe
 * into err), then its exit. */
static void __attribute__((noreturn)) child_fail(const char *what, int code)
{
	fprintf(stderr, "%s: %s\n", what, strerror(errno));
	_exit(code);
}

/* Runs path with args inside the
 * network namespace nsfd (-1: ours), its stderr into err (the last line
 * kept), in a session of its own. Its exit status, or -errno. */
static int cmd_ns(int nsfd, const char *path, char *const *args, char *err, size_t errlen)
{
	int p[2], st, nul;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	if (err && errlen)
		err[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
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
		/* A VMM outlives us: keep it out of the engine's process
		 * group and session, so a signal to them is not its. */
		setsid();
		{
			sigset_t none;

			/* the init proxy blocks the signals it forwards */
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
		}
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
			child_fail("joining the container's network namespace", 126);
		execv(path, args);
		child_fail(path, 127);
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

/* Runs `vmm ARGS...` (this binary) with the container's VMM_STATE_DIR,
 * inside the network namespace nsfd (-1: ours); its stderr into err (the
 * last line kept). Its exit status, or -errno. */
static int vmm_cmd_ns(const struct oci_ctx *c, const char *id, int nsfd, char *const *args, char *err,
		      size_t errlen)
{
	if (vm_env(c, id))
		return -errno;
	return cmd_ns(nsfd, c->self, args, err, errlen);
}

static int vmm_cmd(const struct oci_ctx *c, const char *id, char *const *args, char *err, size_t errlen)
{
	return vmm_cmd_ns(c, id, -1, args, err, errlen);
}

/* ROOT/ID/net: the namespace and veth create tied to the VM's TAP. */
static int net_file(const struct oci_ctx *c, const char *id, char *p, size_t len)
{
	char dir[PATH_MAX];

	if (oci_state_dir(c->root, id, dir, sizeof(dir)))
		return -EINVAL;
	return snprintf(p, len, "%s/net", dir) >= (int)len ? -ENAMETOOLONG : 0;
}

int oci_vm_net_record(const struct oci_ctx *c, const char *id, const char *nspath, const char *ifname)
{
	char p[PATH_MAX + 8], text[PATH_MAX + IF_NAMESIZE + 4];
	int r;

	if ((r = net_file(c, id, p, sizeof(p))))
		return r;
	if (snprintf(text, sizeof(text), "%s\n%s\n", nspath, ifname) >= (int)sizeof(text))
		return -ENAMETOOLONG;
	return cli_write_text(p, text, 0644);
}

/* A pod's workload container leaves its pod's VM: what runs of it,
 * its mounts and cgroup there, then its binds on the host. 0, or -errno
 * with why in err when its root stays mounted on the host. */
static int pod_container_remove(const struct oci_ctx *c, const char *id, const char *sbid, char *rm_err,
				size_t rm_errlen)
{
	char err[512], pod[PATH_MAX], dir[PATH_MAX];
	struct sandbox_addr a;
	struct sandbox sb;
	int r;

	if (oci_vm_addr(c, id, &sb, &a) == 0 && (r = oci_pod_guest_remove(&a, id, 1, err, sizeof(err))))
		oci_info(c, "%s: removing it from its pod's VM (%d): %s", id, r, err);
	if (oci_pod_dir(c, sbid, pod, sizeof(pod)) || snprintf(dir, sizeof(dir), "%s/%s", pod, id) >= (int)sizeof(dir))
		return 0;
	if ((r = oci_pod_unmount_under(dir, 1)))
		return cli_seterr(rm_err, rm_errlen, r, "unmounting its root from %s: %s", dir, strerror(-r));
	return 0;
}

int oci_vm_remove(const struct oci_ctx *c, const char *id, char *rm_err, size_t rm_errlen)
{
	char *const args[] = { (char *)"vmm", (char *)"rm", (char *)"-f", (char *)OCI_VM_NAME, NULL };
	char err[512], p[PATH_MAX + 8], text[PATH_MAX + IF_NAMESIZE + 4], *nl, sbid[OCI_ID_MAX + 2];
	int r = 0, r2;

	if (!oci_pod_of(c, id, sbid, sizeof(sbid)))
		return pod_container_remove(c, id, sbid, rm_err, rm_errlen);

	/* A VM already gone (it went with the init) is no error; any
	 * other failure is, since the caller goes on to remove the folder
	 * the VMM may still be running from. */
	if (vmm_cmd(c, id, args, err, sizeof(err)) && !strstr(err, "no sandbox named"))
		r = cli_seterr(rm_err, rm_errlen, -EIO, "removing its VM: %s", err[0] ? err : "vmm rm -f failed");
	/* a pod's sandbox: its containers' roots left bound in the pod share */
	if (!oci_pod_dir(c, id, p, sizeof(p)) && (r2 = oci_pod_unmount_under(p, 1)) && !r)
		r = cli_seterr(rm_err, rm_errlen, r2, "unmounting what is left in %s: %s", p, strerror(-r2));
	/* the TAP went with the VMM; the veth's half of the redirect stays
	 * until we take it away */
	if (net_file(c, id, p, sizeof(p)) || cli_read_text(p, text, sizeof(text)))
		return r;
	nl = strchr(text, '\n');
	if (nl) {
		char *ifname = nl + 1, *end = strchr(ifname, '\n');

		*nl = '\0';
		if (end)
			*end = '\0';
		if (oci_net_disconnect(text, ifname, err, sizeof(err)))
			oci_info(c, "%s: removing the ingress qdisc of %s in %s: %s", id, ifname, text, err);
	}
	unlink(p);
	return r;
}

int oci_vm_addr(const struct oci_ctx *c, const char *id, struct sandbox *sb, struct sandbox_addr *a)
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
char *oci_mount_script(const struct oci_spec *s, const char *groot, const char *share_prefix,
		       char shares[][PATH_MAX], unsigned *nshares, int *share_of)
{
	char *text = NULL, dir[PATH_MAX];
	size_t len = 0;
	const char *base;
	unsigned i, j, k;
	int first;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	fputs("R=", f);
	sh_quote(f, groot);
	fputc('\n', f);
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
				fprintf(f, "mount --bind %s%u/", share_prefix, j);
				sh_quote(f, base);
				fputs(" \"$d\"", f);
			} else {
				fprintf(f, "mkdir -p \"$d\" && mount --bind %s%u \"$d\"", share_prefix, j);
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
			for (k = 0, first = 1; k < m->nopts; k++) {
				static const char *const skip[] = { "rbind", "bind", "rprivate", "private", "rslave",
								    "slave", "rshared", "shared", "newinstance" };
				size_t q;

				for (q = 0; q < sizeof(skip) / sizeof(skip[0]) && strcmp(m->opts[k], skip[q]); q++)
					;
				if (q < sizeof(skip) / sizeof(skip[0]))
					continue;
				fputs(first ? " -o " : ",", f);
				first = 0;
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
 * status, its stderr in err, its stdout in out[0..*outn) when out is
 * set (what does not fit is dropped). */
static int guest_run(const struct sandbox_addr *a, const char *const *argv, char *out, size_t outlen, size_t *outn,
		     char *err, size_t errlen, uint8_t *buf)
{
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
		if (type == F_STDOUT && out && n <= outlen - *outn) {
			memcpy(out + *outn, buf, n);
			*outn += n;
		} else if (type == F_STDERR && got + n + 1 < errlen) {
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

int oci_guest_output(const struct sandbox_addr *a, const char *const *argv, char *out, size_t outlen, size_t *outn,
		     char *err, size_t errlen)
{
	uint8_t *buf = malloc(FRAME_MAX + 1); /* not in the bss (cli/sandbox/api_client.c) */
	int r;

	if (outn)
		*outn = 0;
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r = guest_run(a, argv, out, outlen, outn, err, errlen, buf);
	free(buf);
	return r;
}

int oci_guest_run(const struct sandbox_addr *a, const char *const *argv, char *err, size_t errlen)
{
	return oci_guest_output(a, argv, NULL, 0, NULL, err, errlen);
}

int oci_vm_size(const struct oci_spec *s, unsigned long long *mib_out, unsigned *ncpu_out, char *why, size_t whylen)
{
	unsigned long long mib = 512;
	unsigned ncpu = 1;
	const char *v;

	/* memory: the limit plus the guest's own overhead; else the
	 * annotation, else vmm's default */
	if (s->mem_limit > 0)
		mib = ((unsigned long long)s->mem_limit >> 20) + OCI_MEM_OVERHEAD_MIB;
	/* a pod's VM: what containerd's CRI gives the sandbox, the sum of
	 * its containers' limits (io.kubernetes.cri.sandbox-memory, and the
	 * CPU quota/period; containerd's pkg/cri/annotations) */
	if ((v = oci_spec_annotation(s, "io.kubernetes.cri.sandbox-memory")) && strtoull(v, NULL, 10) >= (1ull << 20))
		mib = (strtoull(v, NULL, 10) >> 20) + OCI_MEM_OVERHEAD_MIB;
	if ((v = oci_spec_annotation(s, "io.vmm.mem")) && cli_parse_mib(v, &mib))
		return cli_seterr(why, whylen, CLI_EXIT_ERROR, "annotation io.vmm.mem: %s is not a size", v);
	if (s->cpu_quota > 0 && s->cpu_period > 0)
		ncpu = (unsigned)((s->cpu_quota + (int64_t)s->cpu_period - 1) / (int64_t)s->cpu_period);
	{
		const char *q = oci_spec_annotation(s, "io.kubernetes.cri.sandbox-cpu-quota");
		const char *per = oci_spec_annotation(s, "io.kubernetes.cri.sandbox-cpu-period");
		long long qq = q ? strtoll(q, NULL, 10) : 0, pp = per ? strtoll(per, NULL, 10) : 0;

		if (qq > 0 && pp > 0 && (qq + pp - 1) / pp <= 64)
			ncpu = (unsigned)((qq + pp - 1) / pp);
	}
	if ((v = oci_spec_annotation(s, "io.vmm.cpus")))
		ncpu = (unsigned)strtoul(v, NULL, 10);
	if (ncpu < 1 || ncpu > 64)
		return cli_seterr(why, whylen, CLI_EXIT_ERROR, "vCPUs: %u is not 1..64", ncpu);
	*mib_out = mib;
	*ncpu_out = ncpu;
	return 0;
}

/* Boots the container's VM (vmm run -d with VMM_STATE_DIR=ROOT/ID/vm). */
int oci_vm_boot(const struct oci_ctx *c, const char *id, const struct oci_spec *s, char shares[][PATH_MAX],
		   unsigned nshares, const char *netopt, int nsfd, const char *pod_dir, char *why, size_t whylen)
{
	char *args[64], fs[20][PATH_MAX + 64], mem[32], cpus[16], err[1024];
	const char *v;
	unsigned long long mib;
	unsigned n = 0, i, ncpu;
	int r;

	/* a read-only root's mount targets, which the guest cannot make */
	if (oci_rootfs_targets(s, err, sizeof(err)))
		return cli_seterr(why, whylen, CLI_EXIT_ERROR, "%s: %s", id, err);
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
	if (pod_dir) {
		/* a pod's sandbox: the share its containers' roots come through */
		snprintf(fs[nshares + 1], sizeof(fs[0]), "tag=%s,path=%.4000s", OCI_POD_TAG, pod_dir);
		args[n++] = "--fs";
		args[n++] = fs[nshares + 1];
	}
	if (oci_vm_size(s, &mib, &ncpu, why, whylen))
		return CLI_EXIT_ERROR;
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
	if (pod_dir && nsfd >= 0) {
		/* the pod's port-forward (oci_pod_forward) */
		args[n++] = "--publish";
		args[n++] = "127.0.0.1:" OCI_POD_FORWARD_PORT ":*";
	}
	if (geteuid() == 0) {
		/* Jailed (docs/security.md, "The jailer"): pid 1 of its own PID
		 * namespace, in a mount namespace holding only what it serves;
		 * root (it serves the container's files with their owners'
		 * ids) with a file server's capabilities only, its network the
		 * container's. Not root: it has no privileges to give up. */
		args[n++] = "--jail";
		args[n++] = "--jail-uid";
		args[n++] = "0";
		if (nsfd >= 0) {
			args[n++] = "--jail-netns";
			args[n++] = (char *)s->netns;
		}
	}
	args[n] = NULL;
	r = vmm_cmd_ns(c, id, nsfd, args, err, sizeof(err));
	if (r)
		return cli_seterr(why, whylen, CLI_EXIT_ERROR, "%s: the VM did not start: %s", id,
				  err[0] ? err : strerror(r < 0 ? -r : EIO));
	return 0;
}

/* The container's network (docs/oci-runtime.md, "Networking"): the
 * namespace's veth as --net for the VMM, which starts inside it. 0 with
 * *netopt NULL when there is none to join (no path, or only lo). */
int oci_net_prepare(const struct oci_ctx *c, const struct oci_spec *s, struct oci_net *n, char *opt,
		       size_t optlen, const char **netopt, int *nsfd, char *err, size_t errlen)
{
	char why[512], text[4096];
	unsigned i;
	int r;

	*netopt = NULL;
	*nsfd = -1;
	if (!s->netns)
		return 0;
	/* the proxy (whose /proc/PID/ns/net a pod's other containers join)
	 * lives in the namespace even when the VM takes no interface */
	if ((*nsfd = open(s->netns, O_RDONLY | O_CLOEXEC)) < 0)
		return cli_seterr(err, errlen, CLI_EXIT_ERROR, "network namespace %s: %s", s->netns, strerror(errno));
	/* A pod's sandbox (pause) container boots the pod's VM, which takes
	 * the pod's interface; its workload containers run in that VM
	 * (cli/oci/oci_pod.h) and never come here. */
	r = oci_net_probe(s->netns, n, why, sizeof(why));
	if (r == -ENOENT)
		return 0;
	if (r)
		return cli_seterr(err, errlen, CLI_EXIT_ERROR, "%s", why);
	if (n->taken) {
		/* another container's VM has the namespace's interface */
		oci_info(c, "network namespace %s: its interface is another VM's; this one has no network", s->netns);
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
		return cli_seterr(err, errlen, CLI_EXIT_ERROR, "network: option too long");
	*netopt = opt;
	return 0;
}

/* An older guest-init ignores exec's container members and would run
 * the process as root outside the container's root: refuse it. */
int oci_guest_capable(const char *id, const struct sandbox_addr *a, int pod, char *why, size_t whylen)
{
	char out[1024], err[600];
	const char *f;

	if (api_call2(a, "\"op\":\"health\"", "health", out, sizeof(out), err, sizeof(err)))
		return cli_seterr(why, whylen, CLI_EXIT_ERROR, "%s: the VM's guest-init does not answer (%s)", id, err);
	f = strstr(out, "\"features\"");
	if (!f || !strstr(f, "\"container\""))
		return cli_seterr(why, whylen, CLI_EXIT_ERROR, "%s: the VM's guest-init is too old for containers (no "
				  "\"container\" feature: it would run the process as root outside the container's "
				  "root); use a current initramfs", id);
	if (pod && !strstr(f, "\"pod\""))
		return cli_seterr(why, whylen, CLI_EXIT_ERROR, "%s: the VM's guest-init is too old for pods (no \"pod\" "
				  "feature: exec's cgroup and mount namespace); use a current initramfs", id);
	return 0;
}

