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
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cli/sandbox/api_client.h"
#include "cli/util/util.h"
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
	assert_int_equal(oci_process_fields(&p, 1, buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "\"root\":\"" OCI_GUEST_ROOT "\""));
	assert_non_null(strstr(buf, "\"uid\":1000"));
	assert_non_null(strstr(buf, "\"gid\":1001"));
	assert_non_null(strstr(buf, "\"groups\":[5,6]"));
	assert_non_null(strstr(buf, "\"no_new_privs\":true"));
	assert_non_null(strstr(buf, "\"hard\":-1")); /* unlimited */
	assert_non_null(strstr(buf, "\"tag\":\"init\""));
	assert_int_equal(oci_process_fields(&p, 0, buf, sizeof(buf)), 0);
	assert_null(strstr(buf, "\"tag\""));
	assert_int_equal(oci_process_fields(&p, 0, buf, 64), -E2BIG);
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
		cmocka_unit_test(console_socket),
		cmocka_unit_test(pid_file),
		cmocka_unit_test(exec_proxy_forwards_signals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
