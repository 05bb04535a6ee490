/* vmm oci's proxies (cli/oci/oci_proxy.c): the exec request of a container
 * process, --console-socket (the pty master over SCM_RIGHTS), --pid-file,
 * and an exec's proxy against a fake guest API: its output, its exit
 * status, and the signals sent to it forwarded as SIGNAL frames. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cli/sandbox/api_client.h"
#include "cli/util/util.h"
#include "cli/oci/oci_pod.h"
#include "cli/oci/oci_proxy.h"
#include "vmm/wire/proto.h"

/* oci_vm.c is the VMM side: the proxy's calls into it, stubbed. */
int oci_vm_addr(const struct oci_ctx *c, const char *id, struct sandbox *sb, struct sandbox_addr *a)
{
	(void)c, (void)id, (void)sb, (void)a;
	return -ENOENT;
}
int oci_vm_remove(const struct oci_ctx *c, const char *id, char *err, size_t errlen)
{
	(void)c, (void)id, (void)err, (void)errlen;
	return 0;
}
void oci_info(const struct oci_ctx *c, const char *fmt, ...)
{
	(void)c, (void)fmt;
}
int oci_guest_run(const struct sandbox_addr *a, const char *const *argv, char *err, size_t errlen)
{
	(void)a, (void)argv, (void)err, (void)errlen;
	return -ENOSYS;
}

static void process_fields(void **state)
{
	struct oci_process p = { .args = { "sh", "-c", "true", NULL }, .argc = 3, .env = { "PATH=/bin", NULL },
				 .envc = 1, .cwd = "/w", .uid = 1000, .gid = 1001, .groups = { 5, 6 }, .ngroups = 2,
				 .no_new_privs = 1, .nrlimits = 1 };
	char buf[OCI_FIELDS_MAX];

	(void)state;
	p.rlimits[0].resource = RLIMIT_NOFILE;
	p.rlimits[0].soft = 1024;
	p.rlimits[0].hard = UINT64_MAX;
	struct oci_where alone = { .root = OCI_GUEST_ROOT, .tag = "init" };

	assert_int_equal(oci_process_fields(&p, &alone, 1, buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "\"root\":\"" OCI_GUEST_ROOT "\""));
	assert_null(strstr(buf, "\"cgroup\""));
	assert_null(strstr(buf, "\"mntns\""));
	assert_non_null(strstr(buf, "\"uid\":1000"));
	assert_non_null(strstr(buf, "\"gid\":1001"));
	assert_non_null(strstr(buf, "\"groups\":[5,6]"));
	assert_non_null(strstr(buf, "\"no_new_privs\":true"));
	assert_non_null(strstr(buf, "\"hard\":-1")); /* unlimited */
	assert_non_null(strstr(buf, "\"tag\":\"init\""));
	assert_int_equal(oci_process_fields(&p, &alone, 0, buf, sizeof(buf)), 0);
	assert_null(strstr(buf, "\"tag\""));
	assert_int_equal(oci_process_fields(&p, &alone, 0, buf, 64), -E2BIG);
}

/* A pod's container: its role from the CRI's annotations, where it runs
 * (root, tag, cgroup, mount namespace) from its state folder, and the
 * guest script that makes its root and cgroup with its limits. */
static void pod_roles_and_places(void **state)
{
	static const char id[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char root[] = "/tmp/vmm-test-pod.XXXXXX", sbid[256], dir[PATH_MAX + 8], buf[OCI_FIELDS_MAX], *script;
	struct oci_spec s = { .nann = 2, .ann_key = { "io.kubernetes.cri.container-type", "io.kubernetes.cri.sandbox-id" },
			      .ann_val = { "container", "sb1" }, .mem_limit = 64 << 20, .cpu_quota = 50000,
			      .cpu_period = 100000 };
	struct oci_process p = { .args = { "true", NULL }, .argc = 1 };
	struct oci_ctx c = { 0 };
	struct oci_where w;
	const char *sb;

	(void)state;
	assert_int_equal(oci_pod_role(&s, &sb), OCI_POD_CONTAINER);
	assert_string_equal(sb, "sb1");
	s.ann_val[1] = "../x"; /* not an ID: alone */
	assert_int_equal(oci_pod_role(&s, &sb), OCI_ALONE);
	s.ann_val[0] = "sandbox";
	assert_int_equal(oci_pod_role(&s, &sb), OCI_POD_SANDBOX);
	s.nann = 0;
	assert_int_equal(oci_pod_role(&s, &sb), OCI_ALONE);
	assert_null(sb);

	assert_non_null(mkdtemp(root));
	c.root = root;
	snprintf(dir, sizeof(dir), "%s/%s", root, id);
	assert_int_equal(mkdir(dir, 0700), 0);
	oci_where_of(&c, id, 1, &w); /* no record: alone */
	assert_string_equal(w.root, OCI_GUEST_ROOT);
	assert_string_equal(w.tag, "init");
	assert_string_equal(w.cgroup, "");
	assert_int_equal(oci_pod_of(&c, id, sbid, sizeof(sbid)), -ENOENT);
	assert_int_equal(oci_pod_record(&c, id, "sb1"), 0);
	assert_int_equal(oci_pod_of(&c, id, sbid, sizeof(sbid)), 0);
	assert_string_equal(sbid, "sb1");
	oci_where_of(&c, id, 1, &w);
	assert_string_equal(w.root, OCI_POD_GUEST_ROOTS "/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	assert_string_equal(w.cgroup, OCI_POD_CGROUP "/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	assert_string_equal(w.mntns, "new");
	/* a tag starts with no digit and fits API_TAG_MAX */
	assert_int_equal(strlen(w.tag), 64);
	assert_int_equal(w.tag[0], 'c');
	assert_int_equal(oci_process_fields(&p, &w, 1, buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "\"mntns\":\"new\""));
	assert_non_null(strstr(buf, "\"cgroup\":\"" OCI_POD_CGROUP "/"));
	/* an exec joins its init's mount namespace once the init runs */
	oci_where_of(&c, id, 0, &w);
	assert_string_equal(w.mntns, "");
	oci_pod_record_gpid(&c, id, 42);
	oci_where_of(&c, id, 0, &w);
	assert_string_equal(w.mntns, "/proc/42/ns/mnt");
	assert_int_equal(oci_pod_dir(&c, "sb1", dir, sizeof(dir)), 0);
	assert_non_null(strstr(dir, "/sb1/pod"));

	assert_non_null(script = oci_pod_guest_prepare(&s, id));
	assert_non_null(strstr(script, "mount --bind " OCI_POD_GUEST_SHARE "/0123"));
	assert_non_null(strstr(script, "echo 67108864 > \"$G/memory.max\""));
	assert_non_null(strstr(script, "echo '50000 100000' > \"$G/cpu.max\""));
	free(script);
	snprintf(dir, sizeof(dir), "%s/%s", root, id);
	assert_int_equal(cli_rm_tree(dir), 0);
	assert_int_equal(rmdir(root), 0);
}

/* PID namespaces in a pod: the sandbox's init makes the pod's, a
 * container's init a new one or (the pod shares its processes) the
 * sandbox's; execs join their init's; no pid entry: the guest's. */
static void pod_pid_namespaces(void **state)
{
	static const char *const ids[] = { "sb1", "own", "shared", "guests", "alone" };
	char root[] = "/tmp/vmm-test-pidns.XXXXXX", dir[PATH_MAX + 8], buf[OCI_FIELDS_MAX];
	struct oci_spec s = { 0 };
	struct oci_process p = { .args = { "true", NULL }, .argc = 1 };
	struct oci_ctx c = { 0 };
	struct oci_where w;
	unsigned i;

	(void)state;
	assert_non_null(mkdtemp(root));
	c.root = root;
	for (i = 0; i < 5; i++) {
		snprintf(dir, sizeof(dir), "%s/%s", root, ids[i]);
		assert_int_equal(mkdir(dir, 0700), 0);
		if (i >= 1 && i <= 3)
			assert_int_equal(oci_pod_record(&c, ids[i], "sb1"), 0);
	}
	s.pidns = OCI_PIDNS_NEW;
	assert_int_equal(oci_pod_record_pidns(&c, "sb1", OCI_POD_SANDBOX, &s), 0);
	assert_int_equal(oci_pod_record_pidns(&c, "own", OCI_POD_CONTAINER, &s), 0);
	assert_int_equal(oci_pod_record_pidns(&c, "alone", OCI_ALONE, &s), 0); /* a VM of its own: as before */
	s.pidns = OCI_PIDNS_JOIN;
	assert_int_equal(oci_pod_record_pidns(&c, "shared", OCI_POD_CONTAINER, &s), 0);
	s.pidns = OCI_PIDNS_NONE;
	assert_int_equal(oci_pod_record_pidns(&c, "guests", OCI_POD_CONTAINER, &s), 0);

	oci_where_of(&c, "sb1", 1, &w);
	assert_string_equal(w.pidns, "new");
	assert_string_equal(w.root, OCI_GUEST_ROOT);
	oci_pod_record_gpid(&c, "sb1", 7);
	oci_where_of(&c, "sb1", 0, &w);
	assert_string_equal(w.pidns, "/proc/7/ns/pid");
	oci_where_of(&c, "own", 1, &w);
	assert_string_equal(w.pidns, "new");
	assert_int_equal(oci_process_fields(&p, &w, 1, buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "\"pidns\":\"new\""));
	oci_pod_record_gpid(&c, "own", 42);
	oci_where_of(&c, "own", 0, &w);
	assert_string_equal(w.pidns, "/proc/42/ns/pid");
	oci_where_of(&c, "shared", 1, &w);
	assert_string_equal(w.pidns, "/proc/7/ns/pid");
	oci_pod_record_gpid(&c, "shared", 43);
	oci_where_of(&c, "shared", 0, &w);
	assert_string_equal(w.pidns, "/proc/43/ns/pid");
	oci_where_of(&c, "guests", 1, &w);
	assert_string_equal(w.pidns, "");
	oci_where_of(&c, "alone", 1, &w);
	assert_string_equal(w.pidns, "");
	assert_int_equal(oci_process_fields(&p, &w, 1, buf, sizeof(buf)), 0);
	assert_null(strstr(buf, "\"pidns\""));
	for (i = 0; i < 5; i++) {
		snprintf(dir, sizeof(dir), "%s/%s", root, ids[i]);
		assert_int_equal(cli_rm_tree(dir), 0);
	}
	assert_int_equal(rmdir(root), 0);
}

/* As root: a container's root and a bind source bound into the pod
 * share, seen through it, and unmounted and removed again (never a
 * file under them). */
static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static void pod_attach_detach(void **state)
{
	char root[] = "/tmp/vmm-test-pod.XXXXXX", p[PATH_MAX + 64], pod[PATH_MAX + 8], text[32];
	static char shares[1][PATH_MAX];
	struct oci_spec s = { 0 };
	struct oci_ctx c = { 0 };
	char why[512];
	int r;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_non_null(mkdtemp(root));
	c.root = root;
	snprintf(s.root, sizeof(s.root), "%s/image", root);
	snprintf(shares[0], PATH_MAX, "%s/vol", root);
	snprintf(p, sizeof(p), "%s/sb1", root);
	assert_int_equal(mkdir(s.root, 0700) | mkdir(shares[0], 0700) | mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/image/hello", root);
	assert_int_equal(write_file(p, "root"), 0);
	snprintf(p, sizeof(p), "%s/vol/data", root);
	assert_int_equal(write_file(p, "vol"), 0);
	/* no pod share: the sandbox is not a pod's */
	assert_int_equal(oci_pod_attach(&c, "sb1", "c1", &s, shares, 1, why, sizeof(why)), -ENOENT);
	assert_int_equal(oci_pod_dir(&c, "sb1", pod, sizeof(pod)), 0);
	assert_int_equal(mkdir(pod, 0700), 0);
	r = oci_pod_attach(&c, "sb1", "c1", &s, shares, 1, why, sizeof(why));
	if (r == -EPERM) { /* no mounts here (a container) */
		snprintf(p, sizeof(p), "rm -rf %s", root);
		assert_int_equal(system(p), 0);
		skip();
	}
	assert_int_equal(r, 0);
	snprintf(p, sizeof(p), "%s/c1/rootfs/hello", pod);
	assert_int_equal(cli_read_text(p, text, sizeof(text)), 0);
	assert_string_equal(text, "root");
	snprintf(p, sizeof(p), "%s/c1/b0/data", pod);
	assert_int_equal(cli_read_text(p, text, sizeof(text)), 0);
	assert_string_equal(text, "vol");
	assert_int_equal(oci_mounts_under(pod), 2);
	assert_int_equal(oci_mounts_under(root), 2);
	/* the whole pod folder, as the sandbox's removal does */
	assert_int_equal(oci_pod_unmount_under(pod, 1), 0);
	assert_int_equal(oci_mounts_under(root), 0);
	assert_int_equal(access(pod, F_OK), -1);
	/* what was bound is untouched */
	snprintf(p, sizeof(p), "%s/image/hello", root);
	assert_int_equal(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/vol/data", root);
	assert_int_equal(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "rm -rf %s", root);
	assert_int_equal(system(p), 0);
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(s >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s, 4), 0);
	return s;
}

static void console_socket(void **state)
{
	char dir[] = "/tmp/test_oci_proxy.XXXXXX", sock[64], name[32], cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { name, sizeof(name) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct winsize ws;
	int l, conn, slave, master = -1, n1, n2;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/console.sock", dir);
	l = listen_at(sock);
	/* the connect completes into the backlog: one thread will do */
	slave = oci_console_setup(sock, 40, 120);
	assert_true(slave >= 0);
	conn = accept(l, NULL, NULL);
	assert_true(conn >= 0);
	assert_true(recvmsg(conn, &msg, 0) > 0);
	assert_non_null(CMSG_FIRSTHDR(&msg));
	memcpy(&master, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
	/* the master sent is the slave's: same pty number, the size set */
	assert_int_equal(ioctl(master, TIOCGPTN, &n1), 0);
	assert_true(isatty(slave));
	assert_int_equal(sscanf(ttyname(slave), "/dev/pts/%d", &n2), 1);
	assert_int_equal(n1, n2);
	assert_int_equal(ioctl(slave, TIOCGWINSZ, &ws), 0);
	assert_int_equal(ws.ws_row, 40);
	assert_int_equal(ws.ws_col, 120);
	{
		/* raw: what the engine writes is not echoed back by this pty */
		struct termios tio;

		assert_int_equal(tcgetattr(slave, &tio), 0);
		assert_false(tio.c_lflag & (ECHO | ICANON));
	}
	assert_int_equal(write(slave, "x", 1), 1);
	assert_int_equal(read(master, name, 1), 1);
	assert_int_equal(name[0], 'x');
	close(master);
	close(slave);
	close(conn);
	close(l);
	/* nobody listening: an error, no fd leaked into the caller */
	assert_true(oci_console_setup(sock, 0, 0) < 0);
	assert_int_equal(cli_rm_tree(dir), 0);
}

static void pid_file(void **state)
{
	char dir[] = "/tmp/test_oci_proxy.XXXXXX", p[64], buf[32];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/pid", dir);
	assert_int_equal(oci_write_pid_file(p, 4242), 0);
	assert_int_equal(cli_read_text(p, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "4242");
	snprintf(p, sizeof(p), "%s/no/pid", dir);
	assert_int_equal(oci_write_pid_file(p, 1), -ENOENT);
	assert_int_equal(cli_rm_tree(dir), 0);
}

/* The fake guest API's side of an exec: reads frames until one of
 * `type`; its payload into buf. 0, or -1 on EOF. */
static int read_until(int fd, uint8_t type, uint8_t *buf, size_t *len)
{
	uint8_t t;

	while (frame_read(fd, &t, buf, FRAME_MAX, len) == 0)
		if (t == type)
			return 0;
	return -1;
}

/* ctr task kill --exec-id: the shim signals the exec's proxy; each
 * signal it forwards must reach the process as a SIGNAL frame, and the
 * proxy then exits with the process's status. */
static void exec_proxy_forwards_signals(void **state)
{
	static const int sigs[] = { SIGUSR1, SIGUSR2, SIGTERM, SIGHUP };
	static uint8_t buf[FRAME_MAX + 1];
	char dir[] = "/tmp/test_oci_proxy.XXXXXX", sock[64];
	struct oci_process p = { .args = { "sleep", NULL }, .argc = 1 };
	struct sandbox_addr a;
	size_t len;
	unsigned i;
	int l, conn, st;
	pid_t pid;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/api.sock", dir);
	l = listen_at(sock);
	memset(&a, 0, sizeof(a));
	a.uds = sock;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);

		dup2(nul, 0);
		dup2(nul, 1);
		_exit(oci_exec_proxy(&a, "\"op\":\"exec\"", &p, -1, NULL, 0) & 0xff);
	}
	conn = accept(l, NULL, NULL);
	assert_true(conn >= 0);
	assert_int_equal(read_until(conn, F_REQUEST, buf, &len), 0);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		assert_int_equal(kill(pid, sigs[i]), 0);
		assert_int_equal(read_until(conn, F_SIGNAL, buf, &len), 0);
		assert_int_equal(len, 4);
		assert_int_equal(buf[0] | buf[1] << 8, sigs[i]);
	}
	assert_int_equal(frame_write(conn, F_STDOUT, "bye\n", 4), 0);
	assert_int_equal(frame_write(conn, F_EXIT, "{\"exit_code\":6}", 15), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 6);
	close(conn);
	close(l);
	assert_int_equal(cli_rm_tree(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(process_fields),
		cmocka_unit_test(pod_roles_and_places),
		cmocka_unit_test(pod_pid_namespaces),
		cmocka_unit_test(pod_attach_detach),
		cmocka_unit_test(console_socket),
		cmocka_unit_test(pid_file),
		cmocka_unit_test(exec_proxy_forwards_signals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
