/* vmm oci (also run as vmm-oci): an OCI runtime with runc's command line,
 * so containerd's shim and Podman's conmon run each container in a vmm
 * microVM (docs/oci-runtime.md). create boots the VM with the bundle's
 * root over virtio-fs and forks the init proxy, the host process whose pid
 * goes to --pid-file: it waits on exec.fifo until start, then runs the
 * container's process through guest-init (chrooted into the shared root,
 * as its user), carries its stdio and exits with its status. */
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/oci/oci.h"
#include "vmm/wire/proto.h"

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

/* An error of the runtime, as runc says one: on stderr ("vmm oci: MSG")
 * and in --log (oci_log_line: runc's JSON lines with --log-format json,
 * which containerd reads back). Returns CLI_EXIT_ERROR. The subsystem
 * (cli/oci/) hands its errors up; this verb says them. */
static int oci_fail(const struct oci_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int oci_fail(const struct oci_ctx *c, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "vmm oci: %s\n", msg);
	oci_log_line(c, "error", msg);
	return CLI_EXIT_ERROR;
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

	char err[640];
	int r;

	if (oci_vm_remove(c, id, err, sizeof(err)))
		(void)oci_fail(c, "%s: %s", id, err);
	if (oci_state_dir(c->root, id, dir, sizeof(dir)))
		return;
	if (oci_cgroup_forget(dir, err, sizeof(err)))
		oci_info(c, "%s: its cgroup stays: %s", id, err);
	/* never a tree with a container's root still bound in it */
	if ((r = oci_mounts_under(dir)) > 0) {
		(void)oci_fail(c, "%s: %s is kept: %d mounts are left in it", id, dir, r);
		return;
	}
	/* once more after a moment: a VMM that was stopping may have
	 * written one last file there */
	if ((r = cli_rm_tree(dir)) && r != -ENOENT) {
		usleep(200 * 1000);
		if ((r = cli_rm_tree(dir)) && r != -ENOENT)
			(void)oci_fail(c, "%s: removing %s: %s", id, dir, strerror(-r));
	}
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
		return oci_fail(c, "%s: state too large for its hooks", st->id);
	if ((r = oci_hooks_run(s, k, state, why, sizeof(why)))) {
		if (k == OCI_HOOK_POSTSTART || k == OCI_HOOK_POSTSTOP) {
			/* runtime.md: a warning, the lifecycle goes on */
			oci_info(c, "warning: %s", why);
			fprintf(stderr, "vmm oci: warning: %s\n", why);
			return 0;
		}
		return oci_fail(c, "%s: %s", st->id, why);
	}
	return 0;
}

/* create's child: the container's init proxy (oci_init_proxy), on the
 * console or in a session of its own, in the container's network
 * namespace as runc's init is; it exits with the process's status. */
static void init_proxy_child(const struct oci_ctx *c, const char *id, const struct oci_spec *s, const char *fifo,
			     int lock, int slave, int nsfd) __attribute__((noreturn));
static void init_proxy_child(const struct oci_ctx *c, const char *id, const struct oci_spec *s, const char *fifo,
			     int lock, int slave, int nsfd)
{
	char why[1536];
	int r;

	if (lock >= 0)
		close(lock);
	if (slave >= 0)
		oci_console_attach(slave);
	else
		setsid();
	if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
		_exit(oci_fail(c, "%s: joining %s: %s", id, s->netns, strerror(errno)));
	r = oci_init_proxy(c, id, &s->process, fifo, why, sizeof(why));
	if (why[0])
		oci_fail(c, "%s", why);
	_exit(r);
}

/* A pod's workload container (cli/oci/oci_pod.h): no VM of its own. Its
 * pod's VM must run here and speak "pod"; its root and bind sources are
 * bound into the pod share on the host, and the guest script that makes
 * its root and cgroup goes before its mount script (*script). The pod's
 * network namespace is opened for the init proxy only (*nsfd). 0 or
 * CLI_EXIT_ERROR (logged). */
static int pod_container_create(const struct oci_ctx *c, const char *id, const char *sbid, const struct oci_spec *s,
				char shares[][PATH_MAX], unsigned nshares, char **script, int *nsfd)
{
	char why[1536], *pre, *all;
	struct sandbox_addr a;
	struct sandbox sb;

	if (oci_vm_addr(c, id, &sb, &a))
		return oci_fail(c, "%s: its pod's sandbox %s has no VM here (is the sandbox run by vmm oci under this root?)",
				id, sbid);
	if (oci_guest_capable(id, &a, 1, why, sizeof(why)))
		return oci_fail(c, "%s", why);
	if (s->netns && (*nsfd = open(s->netns, O_RDONLY | O_CLOEXEC)) < 0)
		return oci_fail(c, "network namespace %s: %s", s->netns, strerror(errno));
	if (oci_rootfs_targets(s, why, sizeof(why)) || oci_pod_attach(c, sbid, id, s, shares, nshares, why, sizeof(why)))
		return oci_fail(c, "%s: %s", id, why);
	if (!(pre = oci_pod_guest_prepare(s, id)) || asprintf(&all, "%s%s", pre, *script) < 0) {
		free(pre);
		return oci_fail(c, "out of memory");
	}
	free(pre);
	free(*script);
	*script = all;
	return 0;
}

/* The container's own VM (alone, or a pod's sandbox with the pod share),
 * booted and found at *a. 0 or CLI_EXIT_ERROR (logged). */
static int vm_create(const struct oci_ctx *c, const char *id, const struct oci_spec *s, enum oci_role role,
		     char shares[][PATH_MAX], unsigned nshares, const char *netopt, int nsfd, struct sandbox *sb,
		     struct sandbox_addr *a)
{
	char pod_dir[PATH_MAX], why[1536];
	int r;

	if (role == OCI_POD_SANDBOX &&
	    ((r = oci_pod_dir(c, id, pod_dir, sizeof(pod_dir))) || (r = oci_pod_share_make(pod_dir))))
		return oci_fail(c, "%s: the pod's share %s: %s", id, pod_dir, strerror(-r));
	if (oci_vm_boot(c, id, s, shares, nshares, netopt, nsfd, role == OCI_POD_SANDBOX ? pod_dir : NULL, why,
			sizeof(why)))
		return oci_fail(c, "%s", why);
	if (oci_vm_addr(c, id, sb, a))
		return oci_fail(c, "%s: the VM started but cannot be found", id);
	if (oci_guest_capable(id, a, role == OCI_POD_SANDBOX, why, sizeof(why)))
		return oci_fail(c, "%s", why);
	if (role == OCI_POD_SANDBOX && nsfd >= 0 && oci_net_forward_local(nsfd, OCI_POD_FORWARD_PORT, why, sizeof(why)))
		oci_info(c, "%s: no port-forward into the pod (%s)", id, why);
	return 0;
}

/* Into the container's cgroup (cli/oci/oci_cgroup.h) before anything of
 * it starts: what create forks (the VMM, the init proxy) is counted there;
 * the one create came from in prev (for a failed create to go back to,
 * so that the cleanup can remove the container's).
 * A cgroup that cannot be made or joined is logged, not fatal: the guest
 * enforces the container's limits either way. 0 or CLI_EXIT_ERROR for a
 * cgroupsPath that climbs out of the hierarchy. */
static int join_cgroup(const struct oci_ctx *c, const char *id, const struct oci_spec *s, enum oci_role role,
		       const char *dir, char *prev, size_t prevlen)
{
	char cg[PATH_MAX], why[PATH_MAX + 128];
	unsigned long long mib;
	unsigned ncpu;
	uint64_t lim;
	int r;

	prev[0] = '\0';
	r = oci_cgroup_dir(OCI_CGROUP_ROOT, s->cgroups_path, cg, sizeof(cg));
	if (r == -EINVAL || r == -ENAMETOOLONG)
		return oci_fail(c, "linux.cgroupsPath %s: not a cgroup path", s->cgroups_path);
	if (r == -ENOTSUP)
		oci_info(c, "%s: cgroup %s left alone (%s)", id, s->cgroups_path,
			 strchr(s->cgroups_path, ':') ? "a systemd unit" : "no cgroup v2 here");
	if (r)
		return 0;
	/* A VM the cgroups above would hold to less than its guest's RAM and
	 * the VMM's own would be killed whole by the host once its guest
	 * fills its memory (page cache is enough), where the guest would
	 * have picked one process: then it stays out (kubelet's pod limit
	 * is the containers' plus the RuntimeClass overhead, which must
	 * cover the guest's and the VMM's). */
	if (role != OCI_POD_CONTAINER && !oci_vm_size(s, &mib, &ncpu, why, sizeof(why)) &&
	    (lim = oci_cgroup_mem_limit(OCI_CGROUP_ROOT, cg)) != UINT64_MAX &&
	    lim >> 20 < mib + OCI_VMM_OWN_MIB) {
		oci_info(c, "%s: not counted in its cgroup %s: its memory.max above, %llu MiB, is below the VM's %llu MiB "
			 "and the VMM's own %d MiB (raise the RuntimeClass overhead)", id, s->cgroups_path,
			 (unsigned long long)(lim >> 20), mib, OCI_VMM_OWN_MIB);
		return 0;
	}
	/* recorded first: delete removes what was made even if joining fails */
	if (oci_cgroup_record(dir, cg))
		oci_info(c, "%s: cannot record its cgroup %s; it stays after the container", id, cg);
	if (oci_cgroup_self(OCI_CGROUP_ROOT, prev, prevlen))
		prev[0] = '\0';
	if (oci_cgroup_join(OCI_CGROUP_ROOT, cg, 0, why, sizeof(why))) {
		oci_info(c, "%s: not counted in its cgroup: %s", id, why);
		prev[0] = '\0';
	}
	return 0;
}

/* create's options and ID. 0 or CLI_EXIT_ERROR (logged). */
static int create_args(const struct oci_ctx *c, int argc, char **argv, const char **bundle, const char **pid_file,
		       const char **console, const char **id)
{
	const char *v;
	int i, r;

	for (i = 1; i < argc; i++) {
		if ((r = opt(argc, argv, &i, "bundle", "b", bundle)) || (r = opt(argc, argv, &i, "pid-file", NULL, pid_file)) ||
		    (r = opt(argc, argv, &i, "console-socket", NULL, console)) ||
		    (r = opt(argc, argv, &i, "preserve-fds", NULL, &v)) || (r = opt(argc, argv, &i, "no-pivot", NULL, NULL)) ||
		    (r = opt(argc, argv, &i, "no-new-keyring", NULL, NULL))) {
			if (r < 0)
				return oci_fail(c, "create: option %s needs a value", argv[i]);
			continue;
		}
		if (argv[i][0] == '-' || *id)
			return oci_fail(c, "create: unexpected argument '%s'", argv[i]);
		*id = argv[i];
	}
	if (!*id)
		return oci_fail(c, "create: requires a container ID");
	if (!oci_id_ok(*id))
		return oci_fail(c, "invalid container ID '%s': 1-%d of A-Z a-z 0-9 _ + - .", *id, OCI_ID_MAX);
	return 0;
}

static int oci_create(const struct oci_ctx *c, int argc, char **argv)
{
	const char *bundle = NULL, *pid_file = NULL, *console = NULL, *id = NULL;
	char cwd[PATH_MAX], why[1536], dir[PATH_MAX], fifo[PATH_MAX + 16], err[2048];
	char cg_prev[PATH_MAX] = "";
	static char shares[16][PATH_MAX];
	int share_of[OCI_MAX_MOUNTS], r, lock = -1, slave = -1, made = 0;
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
	enum oci_role role;
	const char *sbid;
	struct oci_where wh;
	char prefix[PATH_MAX];

	if (!s)
		return oci_fail(c, "out of memory");
	if ((r = create_args(c, argc, argv, &bundle, &pid_file, &console, &id)))
		goto out;
	if (!bundle)
		bundle = getcwd(cwd, sizeof(cwd));
	if (!bundle || bundle[0] != '/') {
		if (!bundle || !realpath(bundle, cwd)) {
			r = oci_fail(c, "bundle %s: %s", bundle ? bundle : "", strerror(errno));
			goto out;
		}
		bundle = cwd;
	}
	r = oci_spec_load(s, bundle, why, sizeof(why));
	if (r == -ENOENT) {
		r = oci_fail(c, "JSON specification file config.json not found in %s", bundle);
		goto out;
	}
	if (r) {
		r = oci_fail(c, "%s/config.json: %s", bundle, r == -EINVAL ? why : strerror(-r));
		goto out;
	}
	if (!s->has_process) {
		r = oci_fail(c, "%s/config.json: process: required to create a container", bundle);
		goto out;
	}
	if (stat(s->root, &sst) || !S_ISDIR(sst.st_mode)) {
		r = oci_fail(c, "root.path %s: not a directory", s->root);
		goto out;
	}
	if (s->process.terminal && !console) {
		r = oci_fail(c, "process.terminal is set: --console-socket is required");
		goto out;
	}
	if (!s->process.terminal && console) {
		r = oci_fail(c, "--console-socket given but process.terminal is false");
		goto out;
	}
	r = oci_state_create(c->root, id);
	if (r == -EEXIST) {
		r = oci_fail(c, "container with id exists: %s", id);
		goto out;
	}
	if (r) {
		r = oci_fail(c, "state directory %s: %s", c->root, strerror(-r));
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
		r = oci_fail(c, "%s: cannot write its state", dir);
		goto out;
	}
	role = oci_pod_role(s, &sbid);
	if ((role == OCI_POD_CONTAINER && oci_pod_record(c, id, sbid)) || oci_pod_record_pidns(c, id, role, s)) {
		r = oci_fail(c, "%s: cannot record its pod", dir);
		goto out;
	}
	if ((r = join_cgroup(c, id, s, role, dir, cg_prev, sizeof(cg_prev))))
		goto out;
	oci_where_of(c, id, 1, &wh);
	if (role == OCI_POD_CONTAINER)
		snprintf(prefix, sizeof(prefix), "%s/%s/b", OCI_POD_GUEST_SHARE, id);
	else
		snprintf(prefix, sizeof(prefix), "/mnt/b");
	if (!(script = oci_mount_script(s, wh.root, prefix, shares, &nshares, share_of))) {
		r = oci_fail(c, "out of memory");
		goto out;
	}
	if (role == OCI_POD_CONTAINER) {
		if ((r = pod_container_create(c, id, sbid, s, shares, nshares, &script, &nsfd)))
			goto out;
		if (oci_vm_addr(c, id, &sb, &a)) {
			r = oci_fail(c, "%s: the VM of its pod %s is gone", id, sbid);
			goto out;
		}
	} else if ((r = oci_net_prepare(c, s, &net, netopt_buf, sizeof(netopt_buf), &netopt, &nsfd, why, sizeof(why)))) {
		r = oci_fail(c, "%s", why);
		goto out;
	} else if ((r = vm_create(c, id, s, role, shares, nshares, netopt, nsfd, &sb, &a))) {
		goto out;
	}
	if (netopt && oci_net_connect(s->netns, &net, why, sizeof(why))) {
		r = oci_fail(c, "%s: connecting the VM to %s in %s: %s", id, net.ifname, s->netns, why);
		goto out;
	}
	if (netopt && oci_vm_net_record(c, id, s->netns, net.ifname))
		oci_info(c, "%s: cannot record its network; the veth's qdisc stays after it", id);
	{
		const char *sh[] = { "sh", "-c", script, NULL };
		int rc = oci_guest_run(&a, sh, err, sizeof(err));

		if (rc) {
			r = oci_fail(c, "%s: preparing the container's mounts in the VM failed (%d): %s", id, rc, err);
			goto out;
		}
	}
	snprintf(fifo, sizeof(fifo), "%s/exec.fifo", dir);
	if (mkfifo(fifo, 0600) < 0) {
		r = oci_fail(c, "%s: %s", fifo, strerror(errno));
		goto out;
	}
	if (console && (slave = oci_console_setup(console, s->process.console_rows, s->process.console_cols)) < 0) {
		r = oci_fail(c, "--console-socket %s: %s", console, strerror(-slave));
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r = oci_fail(c, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		init_proxy_child(c, id, s, fifo, lock, slave, nsfd);
	if (slave >= 0)
		close(slave);
	st.pid = pid;
	{
		char state;

		if (cli_proc_stat(pid, &state, &st.pid_start)) {
			r = oci_fail(c, "%s: the init proxy died at once", id);
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
	if (oci_state_save(c->root, &st) || (pid_file && oci_write_pid_file(pid_file, pid))) {
		r = oci_fail(c, "%s: cannot write its state or --pid-file %s", id, pid_file ? pid_file : "");
		goto out;
	}
	oci_info(c, "%s: created (VM %s, init proxy %d%s%s)", id, dir, (int)pid, netopt ? ", network " : "",
	     netopt ? netopt : "");
	r = 0;
out:
	if (r && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (nsfd >= 0)
		close(nsfd);
	if (r && cg_prev[0])
		(void)oci_cgroup_move(cg_prev, 0);
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

	return r ? oci_fail(c, "%s/config.json: %s", st->bundle, r == -EINVAL ? why : strerror(-r)) : 0;
}

/* Looks the container up (-ENOENT: "does not exist") under its lock. */
static int load(const struct oci_ctx *c, const char *id, int exclusive, struct oci_state *st, int *lock)
{
	int r;

	*lock = -1;
	if (!id || !oci_id_ok(id))
		return oci_fail(c, "container ID missing or invalid");
	r = oci_state_lock(c->root, id, exclusive);
	if (r >= 0) {
		*lock = r;
		r = oci_state_load(c->root, id, st);
	}
	if (r == -ENOENT)
		return oci_fail(c, "container does not exist: %s", id);
	if (r) {
		if (*lock >= 0)
			close(*lock);
		*lock = -1;
		return oci_fail(c, "%s: unreadable state: %s", id, strerror(-r));
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
		return oci_fail(c, "out of memory");
	if ((r = load(c, id, 1, &st, &lock))) {
		free(s);
		return r;
	}
	r = CLI_EXIT_ERROR;
	switch (oci_status_now(st.status, oci_proxy_alive(&st))) {
	case OCI_CREATED:
		break;
	case OCI_RUNNING:
		oci_fail(c, "cannot start an already running container");
		goto out;
	default:
		oci_fail(c, "cannot start a container that has stopped");
		goto out;
	}
	/* runtime.md "Lifecycle" 8: startContainer before the process runs */
	if (spec_for_hooks(c, &st, s) || hooks(c, s, OCI_HOOK_START_CONTAINER, &st, OCI_CREATED))
		goto out;
	oci_state_dir(c->root, id, dir, sizeof(dir));
	snprintf(fifo, sizeof(fifo), "%s/exec.fifo", dir);
	fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		oci_fail(c, "%s: %s", fifo, strerror(errno));
		goto out;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) != 1 || read(fd, &b, 1) != 1) {
		close(fd);
		oci_fail(c, "%s: the init proxy did not take the start", id);
		goto out;
	}
	close(fd);
	unlink(fifo);
	st.status = OCI_RUNNING;
	if (oci_state_save(c->root, &st)) {
		oci_fail(c, "%s: cannot write its state", id);
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
	oci_exit_load(c->root, &st);
	close(lock);
	if (oci_state_render(&st, oci_status_now(st.status, oci_proxy_alive(&st)), 0, buf, sizeof(buf)))
		return oci_fail(c, "%s: state too large", id);
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
		return oci_fail(c, "kill: %s is not a signal", sigs);
	if ((r = load(c, id, 0, &st, &lock)))
		return r;
	close(lock);
	now = oci_status_now(st.status, oci_proxy_alive(&st));
	if (now == OCI_STOPPED)
		return oci_fail(c, "container not running");
	if (now == OCI_CREATED) {
		/* nothing runs in the guest yet: the proxy stands for it */
		return kill(st.pid, sig) < 0 ? oci_fail(c, "kill %d: %s", (int)st.pid, strerror(errno)) : 0;
	}
	{
		struct oci_where wh;

		oci_where_of(c, id, 0, &wh);
		snprintf(fields, sizeof(fields), "\"op\":\"signal\",\"tag\":\"%s\",\"signal\":%d", wh.tag, sig);
	}
	if (oci_vm_addr(c, id, &sb, &a) || api_call2(&a, fields, "kill", out, sizeof(out), NULL, 0)) {
		/* the VM is gone or the process ended meanwhile: the proxy */
		if (kill(st.pid, sig == SIGKILL ? SIGKILL : SIGTERM) < 0)
			return oci_fail(c, "container not running");
	}
	return 0;
}

static int oci_delete(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = NULL;
	char dir[PATH_MAX], err[640];
	struct oci_state st;
	int i, force = 0, lock, r;

	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f") || !strcmp(argv[i], "-force"))
			force = 1;
		else if (argv[i][0] != '-')
			id = argv[i];
	if (!id || !oci_id_ok(id))
		return oci_fail(c, "delete: container ID missing or invalid");
	lock = oci_state_lock(c->root, id, 1);
	if (lock == -ENOENT || (lock >= 0 && oci_state_load(c->root, id, &st) == -ENOENT)) {
		if (lock >= 0)
			close(lock);
		/* runc: delete --force of an unknown container is no error */
		if (force) {
			/* what is left of a pod's share goes first: never a
			 * recursive removal into a container's bound root */
			if (!oci_state_dir(c->root, id, dir, sizeof(dir)) && !oci_pod_unmount_under(dir, 0) &&
			    oci_mounts_under(dir) == 0)
				cli_rm_tree(dir);
			return 0;
		}
		return oci_fail(c, "container does not exist: %s", id);
	}
	if (lock < 0)
		return oci_fail(c, "%s: %s", id, strerror(-lock));
	r = 0;
	switch (oci_status_now(st.status, oci_proxy_alive(&st))) {
	case OCI_STOPPED:
	case OCI_CREATED: /* runc deletes a created container without --force */
	case OCI_CREATING:
		break;
	case OCI_RUNNING:
		if (!force) {
			r = oci_fail(c, "cannot delete container %s that is not stopped: running", id);
			goto out;
		}
	}
	if (oci_proxy_alive(&st))
		kill(st.pid, SIGKILL);
	if (oci_vm_remove(c, id, err, sizeof(err)))
		(void)oci_fail(c, "%s: %s", id, err);
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
	oci_info(c, "%s: deleted", id);
out:
	close(lock);
	return r;
}

/* exec: the process from --process FILE or the arguments, on top of the
 * container's own (env, cwd, user), as runc does. */
static int oci_exec(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = NULL, *procfile = NULL, *pid_file = NULL, *console = NULL, *v;
	char why[512], err[600], *fields = NULL, *text = NULL;
	int i, r, lock, detach = 0, tty = 0, slave = -1;
	struct oci_spec *s = calloc(1, sizeof(*s));
	struct oci_process *p;
	struct oci_state st;
	struct sandbox_addr a;
	struct sandbox sb;
	struct json_arena ar = { 0 };
	struct oci_where wh;
	pid_t pid;

	if (!s)
		return oci_fail(c, "out of memory");
	p = &s->process;
	for (i = 1; i < argc && !id; i++) {
		if ((r = opt(argc, argv, &i, "process", "p", &procfile)) || (r = opt(argc, argv, &i, "pid-file", NULL, &pid_file)) ||
		    (r = opt(argc, argv, &i, "console-socket", NULL, &console)) ||
		    (r = opt(argc, argv, &i, "detach", "d", NULL)) || (r = opt(argc, argv, &i, "tty", "t", NULL))) {
			if (r < 0) {
				r = oci_fail(c, "exec: option %s needs a value", argv[i]);
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
			r = oci_fail(c, "exec: unknown option %s", argv[i]);
			goto out;
		}
		id = argv[i];
	}
	if ((r = load(c, id, 0, &st, &lock)))
		goto out;
	close(lock);
	if (oci_status_now(st.status, oci_proxy_alive(&st)) != OCI_RUNNING) {
		r = oci_fail(c, "cannot exec in a stopped container");
		goto out;
	}
	/* the container's own process first: the defaults */
	if ((r = oci_spec_load(s, st.bundle, why, sizeof(why)))) {
		r = oci_fail(c, "%s/config.json: %s", st.bundle, why);
		goto out;
	}
	if (procfile) {
		size_t len;
		FILE *f = fopen(procfile, "re");
		const struct json *j;
		const char *jerr = NULL;

		if (!f) {
			r = oci_fail(c, "--process %s: %s", procfile, strerror(errno));
			goto out;
		}
		text = malloc(OCI_SPEC_MAX_BYTES);
		len = text ? fread(text, 1, OCI_SPEC_MAX_BYTES, f) : 0;
		fclose(f);
		ar.size = len * 8 + 65536;
		ar.buf = text ? malloc(ar.size) : NULL;
		if (!ar.buf || !(j = json_parse(text, len, &ar, &jerr)) || oci_process_parse(j, p, why, sizeof(why))) {
			r = oci_fail(c, "--process %s: %s", procfile, jerr ? jerr : why);
			goto out;
		}
	} else {
		if (i >= argc) {
			r = oci_fail(c, "exec: a command is required");
			goto out;
		}
		p->argc = 0;
		for (; i < argc && p->argc < OCI_MAX_ARGS; i++)
			p->args[p->argc++] = argv[i];
		p->args[p->argc] = NULL;
		p->terminal = tty;
	}
	if (p->terminal && !console && detach) {
		r = oci_fail(c, "exec: a terminal needs --console-socket");
		goto out;
	}
	if (oci_vm_addr(c, id, &sb, &a)) {
		r = oci_fail(c, "%s: its VM is gone", id);
		goto out;
	}
	if (oci_pod_wait_init(c, id)) {
		r = oci_fail(c, "%s: exec: the container's process has not started (no guest pid after 5 s)", id);
		goto out;
	}
	oci_where_of(c, id, 0, &wh);
	if (!(fields = malloc(OCI_FIELDS_MAX)) || oci_process_fields(p, &wh, 0, fields, OCI_FIELDS_MAX)) {
		r = oci_fail(c, "exec: request too large");
		goto out;
	}
	if (console && (slave = oci_console_setup(console, p->console_rows, p->console_cols)) < 0) {
		r = oci_fail(c, "--console-socket %s: %s", console, strerror(-slave));
		goto out;
	}
	if (!detach) {
		r = oci_exec_proxy(&a, fields, p, slave, err, sizeof(err));
		if (r == -EHOSTUNREACH)
			r = oci_fail(c, "%s: cannot reach its VM", id);
		else if (err[0])
			oci_fail(c, "%s: %s", id, err);
		r = r < 0 ? CLI_EXIT_ERROR : r;
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (slave < 0)
			setsid();
		r = oci_exec_proxy(&a, fields, p, slave, err, sizeof(err));
		if (err[0])
			oci_fail(c, "%s: %s", id, err);
		_exit(r < 0 ? 1 : r);
	}
	if (slave >= 0)
		close(slave);
	if (pid < 0 || (pid_file && oci_write_pid_file(pid_file, pid))) {
		r = oci_fail(c, "exec: cannot start its proxy or write --pid-file");
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
			return oci_fail(c, "ps: --format needs a value");
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
		return oci_fail(c, "ps: --format is table or json");
	return 0;
}

/* update --resources FILE|- ID (runc's; containerd's shim sends the
 * runtime spec's LinuxResources as JSON on stdin): a pod's container's
 * memory limit and CPU quota set in its cgroup in the guest. A container
 * alone is its VM, whose size is fixed: refused, saying so. */
static int oci_update(const struct oci_ctx *c, int argc, char **argv)
{
	const char *id = NULL, *file = NULL;
	char sbid[OCI_ID_MAX + 2], err[512], *text = malloc(OCI_SPEC_MAX_BYTES + 1);
	struct json_arena ar = { 0 };
	const struct json *j, *m, *cpu;
	const char *jerr = NULL;
	int64_t mem = 0, quota = 0, period = 0;
	struct sandbox_addr a;
	struct sandbox sb;
	size_t len = 0;
	int i, r;
	FILE *f;

	for (i = 1; i < argc; i++)
		if ((r = opt(argc, argv, &i, "resources", "r", &file)) < 0) {
			free(text);
			return oci_fail(c, "update: --resources needs a value");
		} else if (!r && argv[i][0] != '-') {
			id = argv[i];
		}
	if (!text || !id || !oci_id_ok(id)) {
		free(text);
		return oci_fail(c, "update: container ID missing or invalid");
	}
	r = CLI_EXIT_ERROR;
	if (oci_pod_of(c, id, sbid, sizeof(sbid))) {
		oci_fail(c, "update: %s runs in a VM of its own, whose size is fixed: its limits cannot change", id);
		goto out;
	}
	f = !file || !strcmp(file, "-") ? stdin : fopen(file, "re");
	if (f) {
		len = fread(text, 1, OCI_SPEC_MAX_BYTES, f);
		if (f != stdin)
			fclose(f);
	}
	ar.size = len * 8 + 4096;
	if (!f || !(ar.buf = malloc(ar.size)) || !(j = json_parse(text, len, &ar, &jerr)) || j->type != JSON_OBJ) {
		oci_fail(c, "update: --resources %s: %s", file ? file : "-", jerr ? jerr : "not a JSON object");
		goto out;
	}
	if ((m = json_get(j, "memory")))
		json_get_int(m, "limit", &mem);
	if ((cpu = json_get(j, "cpu"))) {
		json_get_int(cpu, "quota", &quota);
		json_get_int(cpu, "period", &period);
	}
	if (oci_vm_addr(c, id, &sb, &a)) {
		oci_fail(c, "%s: its pod's VM is gone", id);
		goto out;
	}
	if (oci_pod_guest_limits(&a, id, mem, quota, period > 0 ? (uint64_t)period : 0, err, sizeof(err))) {
		oci_fail(c, "%s: setting its limits in the guest: %s", id, err);
		goto out;
	}
	oci_info(c, "%s: updated (memory %lld, cpu quota %lld/%lld)", id, (long long)mem, (long long)quota,
		 (long long)period);
	r = 0;
out:
	free(ar.buf);
	free(text);
	return r;
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
		"  update --resources FILE|- ID   a pod's container's memory and CPU limits\n"
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
				return oci_fail(&c, "option %s needs a value", argv[i]);
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
		return oci_fail(&c, "cannot find the vmm binary: %s", strerror(errno));
	c.self[n] = '\0';
	verb = argv[i];
	argc -= i;
	argv += i;
	if (strcmp(verb, "features") && strcmp(verb, "version") && strcmp(verb, "--version") &&
	    (r = oci_root_check(c.root)))
		return oci_fail(&c, "state directory %s: %s (not yours alone)", c.root, strerror(-r));
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
	if (!strcmp(verb, "update"))
		return oci_update(&c, argc, argv);
	if (!strcmp(verb, "features"))
		return oci_features();
	if (!strcmp(verb, "--version") || !strcmp(verb, "version")) {
		printf("vmm-oci version %s\nspec: %s\n", VMM_VERSION, OCI_VERSION);
		return 0;
	}
	return oci_fail(&c, "unknown command %s (create, start, state, kill, delete, exec, ps, update, features)", verb);
}

/* containerd-shim-vmm-v2 (another link to vmm): containerd's shim for
 * vmm oci, containerd's runc shim with vmm's in front for in-guest stats
 * (cli/oci/oci_shim.h, docs/kubernetes.md "The shim"). containerd reads
 * start's stdout and stderr together as the shim's address, so start
 * prints the address and nothing else, or why it failed. */
int oci_shim_main(int argc, char **argv)
{
	char upstream[PATH_MAX], addr[256], err[1024];
	struct oci_shim_args a;

	if (oci_shim_args(argc, argv, &a)) {
		fprintf(stderr, "usage: %s -namespace NS -address ADDR -publish-binary PATH -id ID start|delete\n",
			OCI_SHIM_NAME);
		return 2;
	}
	if (oci_shim_upstream(&a, upstream, sizeof(upstream))) {
		fprintf(stderr, "%s needs containerd's containerd-shim-runc-v2 (beside containerd or on PATH): not found\n",
			OCI_SHIM_NAME);
		return 1;
	}
	if (!strcmp(a.action, "start")) {
		if (oci_shim_start(&a, upstream, argv, addr, sizeof(addr), err, sizeof(err))) {
			fprintf(stderr, "%s: %s\n", OCI_SHIM_NAME, err);
			return 1;
		}
		fputs(addr, stdout);
		return 0;
	}
	/* delete (containerd's clean-up after a shim that died) and anything
	 * else: the runc shim's own */
	argv[0] = upstream;
	execv(upstream, argv);
	fprintf(stderr, "%s: %s\n", upstream, strerror(errno));
	return 1;
}

const struct cli_verb cli_verb_oci = {
	.name = "oci",
	.summary = "an OCI runtime (runc's command line) for containerd and Podman",
	.run = oci_main,
	.usage = oci_usage,
};
