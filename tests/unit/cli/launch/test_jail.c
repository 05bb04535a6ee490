/* The jailer's host-side bookkeeping, against fake trees: the cgroup v2 and
 * v1 layouts get the limits written where the kernel reads them (this
 * machine has only v1 controllers, so the v2 branch is tested here, on a
 * directory shaped like /sys/fs/cgroup), and jail_pick_id hands each live
 * jailed sandbox its own id, reusing those of dead ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/launch/jail.h"

static void put(const char *root, const char *rel, const char *text)
{
	char p[PATH_MAX], *s;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static char *get(const char *root, const char *rel)
{
	static char buf[256];
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void tree_gone(const char *root)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

static void cgroup_v2(void **state)
{
	char root[] = "/tmp/test_jail_v2.XXXXXX", me[24];
	struct jail j = { .cpu_milli = 1500, .mem_bytes = 256ull << 20, .pids = 64 };

	(void)state;
	assert_non_null(mkdtemp(root));
	j.cg_root = root;
	/* What the kernel shows: the root's files, and (as if the kernel
	 * made them on mkdir) the child group's interface files. */
	put(root, "cgroup.controllers", "cpuset cpu io memory pids\n");
	put(root, "cgroup.subtree_control", "");
	put(root, "vmm/cgroup.subtree_control", "");
	put(root, "vmm/sb1/cpu.max", "");
	put(root, "vmm/sb1/memory.max", "");
	put(root, "vmm/sb1/pids.max", "");
	put(root, "vmm/sb1/cgroup.procs", "");
	assert_int_equal(jail_cgroup(&j, "sb1", 2), 0);
	snprintf(me, sizeof(me), "%d", (int)getpid());
	assert_string_equal(get(root, "cgroup.subtree_control"), "+cpu +memory +pids");
	assert_string_equal(get(root, "vmm/cgroup.subtree_control"), "+cpu +memory +pids");
	assert_string_equal(get(root, "vmm/sb1/cpu.max"), "150000 100000");
	assert_string_equal(get(root, "vmm/sb1/memory.max"), "268435456");
	assert_string_equal(get(root, "vmm/sb1/pids.max"), "64");
	assert_string_equal(get(root, "vmm/sb1/cgroup.procs"), me);
	assert_non_null(strstr(j.cgroup[0], "/vmm/sb1"));
	assert_string_equal(j.cgroup[1], "");

	/* A kernel without the memory controller: an error, not a silent
	 * sandbox without its limit. */
	memset(j.cgroup, 0, sizeof(j.cgroup));
	put(root, "vmm/sb2/cpu.max", "");
	put(root, "vmm/sb2/pids.max", "");
	put(root, "vmm/sb2/cgroup.procs", "");
	assert_int_equal(jail_cgroup(&j, "sb2", 1), -ENOENT);
	assert_string_equal(get(root, "vmm/sb2/cgroup.procs"), "");
	tree_gone(root);
}

static void cgroup_v1(void **state)
{
	char root[] = "/tmp/test_jail_v1.XXXXXX", me[24];
	struct jail j = { .cpu_milli = 500, .mem_bytes = 64ull << 20, .pids = 10 };

	(void)state;
	assert_non_null(mkdtemp(root));
	j.cg_root = root;
	put(root, "cpu/vmm/sb1/cpu.cfs_period_us", "");
	put(root, "cpu/vmm/sb1/cpu.cfs_quota_us", "");
	put(root, "cpu/vmm/sb1/cgroup.procs", "");
	put(root, "memory/vmm/sb1/memory.limit_in_bytes", "");
	put(root, "memory/vmm/sb1/cgroup.procs", "");
	put(root, "pids/vmm/sb1/pids.max", "");
	put(root, "pids/vmm/sb1/cgroup.procs", "");
	assert_int_equal(jail_cgroup(&j, "sb1", 1), 0);
	snprintf(me, sizeof(me), "%d", (int)getpid());
	assert_string_equal(get(root, "cpu/vmm/sb1/cpu.cfs_period_us"), "100000");
	assert_string_equal(get(root, "cpu/vmm/sb1/cpu.cfs_quota_us"), "50000");
	assert_string_equal(get(root, "memory/vmm/sb1/memory.limit_in_bytes"), "67108864");
	assert_string_equal(get(root, "pids/vmm/sb1/pids.max"), "10");
	assert_string_equal(get(root, "cpu/vmm/sb1/cgroup.procs"), me);
	assert_string_equal(get(root, "memory/vmm/sb1/cgroup.procs"), me);
	assert_string_equal(get(root, "pids/vmm/sb1/cgroup.procs"), me);
	tree_gone(root);

	/* No limit asked: no cgroup touched at all. */
	memset(&j, 0, sizeof(j));
	j.cg_root = "/nonexistent";
	assert_int_equal(jail_cgroup(&j, "sb1", 1), 0);
	assert_string_equal(j.cgroup[0], "");
}

static void cpu_quota_parse(void **state)
{
	unsigned m = 0;

	(void)state;
	assert_int_equal(jail_parse_cpu("1.5", &m), 0);
	assert_int_equal(m, 1500);
	assert_int_equal(jail_parse_cpu("0.25", &m), 0);
	assert_int_equal(m, 250);
	assert_int_equal(jail_parse_cpu("0", &m), -EINVAL);
	assert_int_equal(jail_parse_cpu("", &m), -EINVAL);
	assert_int_equal(jail_parse_cpu("2x", &m), -EINVAL);
	assert_int_equal(jail_parse_cpu("-1", &m), -EINVAL);
	assert_int_equal(jail_parse_cpu("5000", &m), -EINVAL);
}

/* A pid that is certainly dead: a child, reaped. */
static pid_t dead_pid(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	assert_true(p > 0);
	waitpid(p, NULL, 0);
	return p;
}

static void sandbox_dir(const char *root, const char *name, pid_t pid, unsigned id)
{
	char rel[64], text[32];

	snprintf(rel, sizeof(rel), "%s/pid", name);
	snprintf(text, sizeof(text), "%d\n", (int)pid);
	put(root, rel, text);
	if (id) {
		snprintf(rel, sizeof(rel), "%s/jail-id", name);
		snprintf(text, sizeof(text), "%u\n", id);
		put(root, rel, text);
	}
}

static void ids_per_sandbox(void **state)
{
	char root[] = "/tmp/test_jail_ids.XXXXXX", folder[PATH_MAX];
	struct jail j;

	(void)state;
	assert_non_null(mkdtemp(root));
	sandbox_dir(root, "a", getpid(), JAIL_DEFAULT_ID);          /* live */
	sandbox_dir(root, "b", dead_pid(), JAIL_DEFAULT_ID + 1);    /* its VMM died */
	sandbox_dir(root, "c", getpid(), JAIL_DEFAULT_ID + 2);      /* live */
	sandbox_dir(root, "d", getpid(), 0);                        /* not jailed */
	sandbox_dir(root, "new", getpid(), 0);
	snprintf(folder, sizeof(folder), "%s/new", root);

	memset(&j, 0, sizeof(j));
	assert_int_equal(jail_pick_id(&j, root, folder), 0);
	assert_int_equal(j.uid, JAIL_DEFAULT_ID + 1);
	assert_int_equal(j.gid, JAIL_DEFAULT_ID + 1);
	assert_string_equal(get(folder, "jail-id"), "900001\n");

	/* The next one sees "new" holding 900001 now. */
	sandbox_dir(root, "new2", getpid(), 0);
	snprintf(folder, sizeof(folder), "%s/new2", root);
	memset(&j, 0, sizeof(j));
	assert_int_equal(jail_pick_id(&j, root, folder), 0);
	assert_int_equal(j.uid, JAIL_DEFAULT_ID + 3);

	/* --jail-uid given: kept (and recorded); the gid follows unless given. */
	memset(&j, 0, sizeof(j));
	j.uid = 4242;
	j.uid_given = 1;
	assert_int_equal(jail_pick_id(&j, root, folder), 0);
	assert_int_equal(j.uid, 4242);
	assert_int_equal(j.gid, 4242);
	assert_string_equal(get(folder, "jail-id"), "4242\n");
	memset(&j, 0, sizeof(j));
	j.gid = 77;
	j.gid_given = 1;
	assert_int_equal(jail_pick_id(&j, root, folder), 0);
	assert_int_equal(j.gid, 77);
	tree_gone(root);
}

/* jail_drop hands the jailed VMM the sockets it connects to, never the
 * egress proxy's control socket: owning it, a VMM the guest broke into
 * could rewrite the sandbox's egress policy (found in review). Root
 * only; in a child, which jail_drop leaves unprivileged. */
static void hand_over_keeps_egress_sock(void **state)
{
	char root[] = "/tmp/test_jail_drop.XXXXXX", p[PATH_MAX];
	static const char *const socks[] = { "vsock.sock_1024", "egress.sock" };
	struct stat st;
	unsigned i;
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	assert_non_null(mkdtemp(root));
	snprintf(p, sizeof(p), "%s/jail-rw", root);
	assert_int_equal(mkdir(p, 0700), 0);
	for (i = 0; i < 2; i++) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s", root, socks[i]);
		assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		chmod(a.sun_path, 0600);
		close(fd);
	}
	pid = fork();
	if (pid == 0) {
		struct jail j;

		memset(&j, 0, sizeof(j));
		j.uid = j.gid = JAIL_DEFAULT_ID + 77;
		_exit(jail_drop(&j, root) ? 1 : 0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(p, sizeof(p), "%s/jail-rw", root);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_uid, JAIL_DEFAULT_ID + 77);
	snprintf(p, sizeof(p), "%s/vsock.sock_1024", root);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_uid, JAIL_DEFAULT_ID + 77);
	snprintf(p, sizeof(p), "%s/egress.sock", root);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_uid, 0);
	tree_gone(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cgroup_v2),
		cmocka_unit_test(cgroup_v1),
		cmocka_unit_test(cpu_quota_parse),
		cmocka_unit_test(ids_per_sandbox),
		cmocka_unit_test(hand_over_keeps_egress_sock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
