/* The host processes that stand for a vmm oci container's processes
 * (cli/oci/oci_proxy.h): the init proxy (the --pid-file pid) and an exec's,
 * and the console (--console-socket) they hold as their terminal. */
#include "cli/oci/oci_proxy.h"
#include "cli/oci/oci_events.h"
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/oci/oci_state.h"
#include "cli/oci/oci_vm.h"
#include "vmm/base/unixsock.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

/* The exec request for a container process p (argv, env, cwd, user,
 * limits, chrooted into the shared root). */
int oci_process_fields(const struct oci_process *p, const struct oci_where *wh, int detach_init, char *buf,
		       size_t len)
{
	struct exec_opts o = {
		.argv = p->args,
		.env = p->envc ? p->env : NULL,
		.cwd = p->cwd,
		.tty = p->terminal,
		.stdin_pass = 1,
		.detach = detach_init,
		.tag = detach_init ? wh->tag : NULL,
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
	jw_str(&w, wh->root);
	if (wh->cgroup[0]) {
		jw_key(&w, "cgroup");
		jw_str(&w, wh->cgroup);
	}
	if (wh->mntns[0]) {
		jw_key(&w, "mntns");
		jw_str(&w, wh->mntns);
	}
	if (wh->pidns[0]) {
		jw_key(&w, "pidns");
		jw_str(&w, wh->pidns);
	}
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
int oci_console_setup(const char *sock, unsigned rows, unsigned cols)
{
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
	{
		/* This pty only carries bytes to the guest's, whose line
		 * discipline echoes and edits: raw from the start, or what the
		 * engine types before the proxy's session sets it raw is
		 * echoed twice (ctr run -t's NUL showed as "^@^@") */
		struct termios t;

		if (tcgetattr(slave, &t) == 0) {
			cfmakeraw(&t);
			tcsetattr(slave, TCSANOW, &t);
		}
	}
	/* The engine's socket, at a path of any length (vmm/base/unixsock.h). */
	if ((s = unix_connect(sock, 0)) < 0) {
		errno = -s;
		goto err;
	}
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
void oci_console_attach(int slave)
{
	setsid();
	ioctl(slave, TIOCSCTTY, 0);
	dup2(slave, 0);
	dup2(slave, 1);
	dup2(slave, 2);
	if (slave > 2)
		close(slave);
}

int oci_write_pid_file(const char *path, pid_t pid)
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

/* The signals an engine sends a proxy itself (conmon's and the shim's
 * kill of the pid they hold, ctr task kill --exec-id, a terminal's ^C)
 * that go on to the container's process: api_session forwards them as
 * SIGNAL frames on the attach or exec connection (forward_usr adds
 * USR1/USR2 to its INT/TERM/HUP/QUIT). Blocked from the moment the
 * process may run, so none arriving before the session is lost: the
 * session's signalfd takes those pending too. */
static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

static void block_forwarded(void)
{
	sigset_t set;
	unsigned i;

	sigemptyset(&set);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&set, forwarded[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

/* The init proxy's work after start: the status to exit with, and why
 * (in why) when the process did not run or its session broke. */
static int run_init(const struct oci_ctx *c, const char *id, const struct oci_process *p, char *why, size_t whylen)
{
	char *fields = malloc(OCI_FIELDS_MAX), out[512], err[600];
	struct oci_where wh;
	struct sandbox_addr a;
	struct sandbox sb;
	struct api_error e;
	int fd, r;

	if (!fields)
		return 1;
	oci_where_of(c, id, 1, &wh);
	if (oci_vm_addr(c, id, &sb, &a) || oci_process_fields(p, &wh, 1, fields, OCI_FIELDS_MAX)) {
		free(fields);
		return cli_seterr(why, whylen, 1, "%s: the container's VM is gone", id);
	}
	block_forwarded();
	fd = api_open_v(&a, 2, fields);
	free(fields);
	if (fd < 0)
		return cli_seterr(why, whylen, 1, "%s: cannot reach the container's VM: %s", id, strerror(-fd));
	r = api_result(fd, out, sizeof(out), &e);
	close(fd);
	if (r) {
		/* as a shell reports a command it cannot run */
		cli_seterr(why, whylen, 0, "%s: %s", p->args[0], r == -1 ? e.message : "the VM went away");
		return e.eno == ENOENT || e.eno == EACCES ? (e.eno == ENOENT ? 127 : 126) : 1;
	}
	if (wh.cgroup[0] || wh.pidns[0]) {
		/* a pod's container (or sandbox): its execs join its init's
		 * mount and PID namespaces, a container of a pod that shares
		 * its processes the sandbox's */
		char ab[1024];
		struct json_arena ar = { ab, sizeof(ab), 0 };
		const struct json *j = json_parse(out, strlen(out), &ar, &(const char *){ NULL });
		int64_t gpid = 0;

		if (j && !json_get_int(j, "pid", &gpid) && gpid > 1)
			oci_pod_record_gpid(c, id, (long)gpid);
	}
	r = api_attach_forward(&a, wh.tag, p->terminal, err, sizeof(err));
	if (err[0])
		cli_seterr(why, whylen, 0, "%s: %s", id, err);
	return r < 0 ? 1 : r;
}

/* The init proxy (the --pid-file process): waits for start on the FIFO,
 * starts the container's process detached (tag "init", so kill reaches it
 * whatever becomes of us), follows it with our stdio and exits with its
 * status, which it also records for `state` (oci_exit_record). */
int oci_init_proxy(const struct oci_ctx *c, const char *id, const struct oci_process *p, const char *fifo, char *why,
		   size_t whylen)
{
	int fd, r;

	cli_seterr(why, whylen, 0, "%s", "");
	/* start opens the FIFO's other end: until then, nothing runs */
	fd = open(fifo, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1)
		return 1;
	close(fd);
	r = run_init(c, id, p, why, whylen);
	/* The container's init is gone: so is the container (runc's stops
	 * with it). The VM goes before we exit, so once the engine sees the
	 * exit, state says stopped and nothing of it runs. A pod's container
	 * leaves the pod's VM running: what is left of its processes ends
	 * (its root and cgroup stay until delete, as runc's do). */
	{
		char sbid[OCI_ID_MAX + 2], err[640];
		struct sandbox_addr a;
		struct sandbox sb;

		if (oci_pod_of(c, id, sbid, sizeof(sbid))) {
			if (oci_vm_remove(c, id, err, sizeof(err)))
				oci_info(c, "%s: %s", id, err);
		} else if (!oci_vm_addr(c, id, &sb, &a)) {
			/* an OOM kill in its guest cgroup: told before the exit
			 * (cli/oci/oci_events.h), which the shim reports after us */
			if (oci_pod_guest_oomed(&a, id) == 1) {
				int e = oci_event_oom_publish(id, err, sizeof(err));

				if (e && e != -ENOENT)
					oci_info(c, "%s: its OOM kill is not reported: %s", id, err);
				else
					oci_info(c, "%s: the guest's OOM killer ended a process of it%s", id,
						 e ? " (no containerd shim to tell)" : "");
			}
			if (oci_pod_guest_remove(&a, id, 0, err, sizeof(err)))
				oci_info(c, "%s: ending what is left of its processes: %s", id, err);
		}
	}
	if (oci_exit_record(c->root, id, r))
		oci_info(c, "%s: cannot record its exit status %d", id, r);
	return r;
}

int oci_exec_proxy(const struct sandbox_addr *a, const char *fields, const struct oci_process *p, int slave,
		   char *err, size_t errlen)
{
	struct exec_opts o = { .tty = p->terminal, .stdin_pass = 1, .forward_usr = 1 };
	int fd;

	block_forwarded();
	if (slave >= 0)
		oci_console_attach(slave);
	fd = api_open(a, fields);
	if (fd < 0)
		return cli_seterr(err, errlen, -EHOSTUNREACH, "%s", "");
	return api_session(fd, &o, p->args[0], err, errlen);
}
