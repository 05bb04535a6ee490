/* vmm oci: config.json parsing (fixtures captured from what containerd's
 * ctr and Podman write, tests/unit/oci/), the state file, and the exit
 * status and signal mappings. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/util/util.h"
#include "cli/oci/oci_spec.h"
#include "cli/oci/oci_state.h"

#define FIXTURES "tests/unit/oci/"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = malloc(1 << 20);

	assert_non_null(f);
	assert_non_null(buf);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

static const struct oci_mount *find_mount(const struct oci_spec *s, const char *dest)
{
	unsigned i;

	for (i = 0; i < s->nmounts; i++)
		if (!strcmp(s->mounts[i].dest, dest))
			return &s->mounts[i];
	return NULL;
}

static void containerd_fixture(void **state)
{
	struct oci_spec s;
	char why[256];
	size_t len;
	char *text = slurp(FIXTURES "containerd-ctr-run.json", &len);

	(void)state;
	assert_int_equal(oci_spec_parse(&s, text, len, "/run/containerd/b/cap1", why, sizeof(why)), 0);
	assert_string_equal(s.version, "1.0.2-dev");
	/* relative root.path is the bundle's */
	assert_string_equal(s.root, "/run/containerd/b/cap1/rootfs");
	assert_true(s.has_process);
	assert_int_equal(s.process.argc, 2);
	assert_string_equal(s.process.args[0], "echo");
	assert_string_equal(s.process.args[1], "hi");
	assert_null(s.process.args[2]);
	assert_string_equal(s.process.cwd, "/");
	assert_int_equal(s.process.ngroups, 1);
	assert_true(s.process.no_new_privs);
	assert_int_equal(s.process.nrlimits, 1);
	assert_int_equal(s.process.rlimits[0].resource, RLIMIT_NOFILE);
	assert_int_equal(s.process.rlimits[0].soft, 1024);
	assert_non_null(find_mount(&s, "/proc"));
	assert_int_equal(find_mount(&s, "/proc")->kind, OCI_MNT_PROC);
	assert_int_equal(find_mount(&s, "/dev")->kind, OCI_MNT_TMPFS);
	assert_int_equal(find_mount(&s, "/dev/pts")->kind, OCI_MNT_DEVPTS);
	assert_int_equal(find_mount(&s, "/sys")->kind, OCI_MNT_SYSFS);
	assert_true(find_mount(&s, "/sys")->ro);
	assert_null(s.netns);
	assert_int_equal(s.pidns, OCI_PIDNS_NEW); /* {"type":"pid"}: its own */
	oci_spec_free(&s);
	free(text);
}

static void podman_fixture(void **state)
{
	const struct oci_mount *m;
	struct oci_spec s;
	char why[256];
	size_t len;
	char *text = slurp(FIXTURES "podman-run.json", &len);

	(void)state;
	assert_int_equal(oci_spec_parse(&s, text, len, "/var/lib/containers/x/userdata", why, sizeof(why)), 0);
	/* absolute root.path (the overlay mount) stays */
	assert_string_equal(s.root, "/var/lib/containers/storage/overlay/"
				    "f09ef4c5f000ca5528462c129f0af6cd37fbe509ecd945005509980ae1e3f6f8/merged");
	assert_int_equal(s.process.argc, 3);
	assert_string_equal(s.process.args[2], "echo hi; exit 3");
	assert_int_equal(s.process.envc, 4);
	assert_string_equal(s.process.env[0], "container=podman");
	assert_string_equal(s.hostname, "8ce42fff3456");
	assert_int_equal(s.process.nrlimits, 2);
	/* Podman's files are binds of single files */
	m = find_mount(&s, "/etc/resolv.conf");
	assert_non_null(m);
	assert_int_equal(m->kind, OCI_MNT_BIND);
	assert_string_equal(m->source, "/run/containers/storage/overlay-containers/"
				       "8ce42fff34564c185e36a032aabefae0ae31c6a8f06fbbbc885392253fd3fd49/userdata/resolv.conf");
	assert_int_equal(find_mount(&s, "/sys/fs/cgroup")->kind, OCI_MNT_CGROUP);
	assert_int_equal(find_mount(&s, "/dev/mqueue")->kind, OCI_MNT_MQUEUE);
	/* CNI/netavark's namespace */
	assert_string_equal(s.netns, "/run/netns/netns-22bbd5c6-a916-20bd-9717-b46b093c61f1");
	assert_string_equal(oci_spec_annotation(&s, "io.container.manager"), "libpod");
	assert_null(oci_spec_annotation(&s, "nope"));
	oci_spec_free(&s);
	free(text);
}

/* One broken document and the words its error must carry. */
static void expect_bad(const char *json, const char *words)
{
	struct oci_spec s;
	char why[256];

	assert_int_equal(oci_spec_parse(&s, json, strlen(json), "/b", why, sizeof(why)), -EINVAL);
	if (!strstr(why, words))
		fail_msg("%s: \"%s\" lacks \"%s\"", json, why, words);
	oci_spec_free(&s);
}

#define P(x) "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"},\"process\":{" x "}}"

static void invalid_documents(void **state)
{
	(void)state;
	expect_bad("", "config.json");
	expect_bad("[]", "must be a JSON object");
	expect_bad("{\"root\":{\"path\":\"r\"}}", "ociVersion");
	expect_bad("{\"ociVersion\":\"2.0.0\",\"root\":{\"path\":\"r\"}}", "version 1");
	expect_bad("{\"ociVersion\":\"1.0.2\"}", "root.path");
	expect_bad("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"\"}}", "root.path");
	expect_bad(P("\"args\":[],\"cwd\":\"/\""), "process.args");
	expect_bad(P("\"args\":[\"sh\",1],\"cwd\":\"/\""), "process.args");
	expect_bad(P("\"args\":[\"sh\"]"), "process.cwd");
	expect_bad(P("\"args\":[\"sh\"],\"cwd\":\"rel\""), "process.cwd");
	expect_bad(P("\"args\":[\"sh\"],\"cwd\":\"/a/../..\""), "process.cwd");
	expect_bad(P("\"args\":[\"sh\"],\"cwd\":\"/\",\"env\":[\"NOEQUALS\"]"), "NAME=VALUE");
	expect_bad(P("\"args\":[\"sh\"],\"cwd\":\"/\",\"user\":{\"uid\":-1}"), "uid");
	expect_bad(P("\"args\":[\"sh\"],\"cwd\":\"/\",\"user\":{\"uid\":4294967296}"), "uid");
	expect_bad(P("\"args\":[\"sh\"],\"cwd\":\"/\",\"rlimits\":[{\"type\":\"RLIMIT_BOGUS\",\"soft\":1,\"hard\":1}]"),
		   "unknown type");
	expect_bad(P("\"args\":[\"sh\"],\"cwd\":\"/\",\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":2,\"hard\":1}]"),
		   "soft above hard");
	expect_bad(P("\"args\":[\"sh\"],\"cwd\":\"/\",\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":1,\"hard\":1},"
		     "{\"type\":\"RLIMIT_NOFILE\",\"soft\":1,\"hard\":1}]"),
		   "twice");
	expect_bad("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"},\"mounts\":[{\"destination\":\"rel\"}]}",
		   "destination");
	expect_bad("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"},\"mounts\":[{\"destination\":\"/x/../../etc\"}]}",
		   "destination");
	expect_bad("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"},\"mounts\":[{\"destination\":\"/x\","
		   "\"type\":\"bind\",\"source\":\"rel\",\"options\":[\"rbind\"]}]}",
		   "absolute source");
	expect_bad("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"},\"hooks\":{\"prestart\":[{\"path\":\"/h\","
		   "\"timeout\":0}]}}",
		   "timeout");
	expect_bad("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"},\"annotations\":{\"a\":1}}", "annotations");
}

static void valid_minimal_and_limits(void **state)
{
	const char *j = "{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"/abs\",\"readonly\":true},"
			"\"process\":{\"terminal\":true,\"consoleSize\":{\"height\":40,\"width\":120},"
			"\"args\":[\"sh\"],\"cwd\":\"/w\",\"user\":{\"uid\":1000,\"gid\":100,\"additionalGids\":[5,6]},"
			"\"rlimits\":[{\"type\":\"RLIMIT_CORE\",\"soft\":18446744073709551615,\"hard\":18446744073709551615}]},"
			"\"mounts\":[{\"destination\":\"/data\",\"source\":\"/srv\",\"options\":[\"rbind\",\"ro\"]}],"
			"\"hooks\":{\"poststop\":[{\"path\":\"/bin/true\",\"args\":[\"true\"],\"timeout\":5}]},"
			"\"linux\":{\"namespaces\":[{\"type\":\"pid\",\"path\":\"/proc/7/ns/pid\"}],"
			"\"resources\":{\"memory\":{\"limit\":268435456},\"cpu\":{\"quota\":150000,\"period\":100000}}}}";
	struct oci_spec s;
	char why[256];

	(void)state;
	assert_int_equal(oci_spec_parse(&s, j, strlen(j), "/b", why, sizeof(why)), 0);
	assert_int_equal(s.pidns, OCI_PIDNS_JOIN); /* a pod that shares its processes */
	assert_string_equal(s.root, "/abs");
	assert_true(s.root_ro);
	assert_true(s.process.terminal);
	assert_int_equal(s.process.console_rows, 40);
	assert_int_equal(s.process.console_cols, 120);
	assert_int_equal(s.process.uid, 1000);
	assert_int_equal(s.process.gid, 100);
	assert_int_equal(s.process.ngroups, 2);
	assert_int_equal(s.process.groups[1], 6);
	assert_true(s.process.rlimits[0].hard == UINT64_MAX);
	/* a bind by its option alone, without a type (containerd's form) */
	assert_int_equal(s.mounts[0].kind, OCI_MNT_BIND);
	assert_string_equal(s.mounts[0].type, "bind");
	assert_true(s.mounts[0].ro);
	assert_int_equal(s.nhooks[OCI_HOOK_POSTSTOP], 1);
	assert_int_equal(s.hooks[OCI_HOOK_POSTSTOP][0].timeout_s, 5);
	assert_int_equal(s.mem_limit, 268435456);
	assert_int_equal(s.cpu_quota, 150000);
	assert_int_equal(s.cpu_period, 100000);
	oci_spec_free(&s);
}

static void load_missing_and_not_regular(void **state)
{
	char dir[] = "/tmp/test_oci_spec.XXXXXX", p[256], why[256];
	struct oci_spec s;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(oci_spec_load(&s, dir, why, sizeof(why)), -ENOENT);
	oci_spec_free(&s);
	snprintf(p, sizeof(p), "%s/config.json", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(oci_spec_load(&s, dir, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not a regular file"));
	oci_spec_free(&s);
	rmdir(p);
	rmdir(dir);
}

static void ids(void **state)
{
	(void)state;
	assert_true(oci_id_ok("8ce42fff3456"));
	assert_true(oci_id_ok("my_ctr-1.2+x"));
	assert_false(oci_id_ok(""));
	assert_false(oci_id_ok("."));
	assert_false(oci_id_ok(".."));
	assert_false(oci_id_ok("a/b"));
	assert_false(oci_id_ok("a b"));
}

static void state_roundtrip_and_status(void **state)
{
	struct oci_state s = { 0 }, back;
	char buf[16384], dir[] = "/tmp/test_oci_state.XXXXXX", root[64];
	int fd, fd2;

	(void)state;
	snprintf(s.id, sizeof(s.id), "c1");
	snprintf(s.bundle, sizeof(s.bundle), "/b/c1");
	snprintf(s.created, sizeof(s.created), "2026-12-01T00:00:00.000000000Z");
	snprintf(s.annotations, sizeof(s.annotations), "{\"k\":\"v \\\"q\\\"\"}");
	s.pid = 4242;
	s.pid_start = 99;
	s.status = OCI_RUNNING;
	assert_int_equal(oci_state_render(&s, OCI_RUNNING, 1, buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "\"status\":\"running\""));
	assert_non_null(strstr(buf, "\"ociVersion\":\"1.0.2\""));
	assert_int_equal(oci_state_parse(buf, strlen(buf), &back), 0);
	assert_string_equal(back.id, "c1");
	assert_string_equal(back.bundle, "/b/c1");
	assert_int_equal(back.pid, 4242);
	assert_int_equal(back.pid_start, 99);
	assert_int_equal(back.status, OCI_RUNNING);
	assert_string_equal(back.annotations, s.annotations);
	/* the public view of a stopped container: pid 0, no private member */
	assert_int_equal(oci_state_render(&s, OCI_STOPPED, 0, buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "\"pid\":0"));
	assert_null(strstr(buf, "vmm_pid_start"));
	assert_int_equal(oci_state_parse("{\"id\":\"../x\"}", 13, &back), -EINVAL);
	/* status: a dead proxy means stopped, whatever was recorded */
	assert_int_equal(oci_status_now(OCI_RUNNING, 1), OCI_RUNNING);
	assert_int_equal(oci_status_now(OCI_CREATED, 1), OCI_CREATED);
	assert_int_equal(oci_status_now(OCI_RUNNING, 0), OCI_STOPPED);
	assert_int_equal(oci_status_now(OCI_CREATED, 0), OCI_STOPPED);
	/* on disk: create once, the second is EEXIST; save, load */
	assert_non_null(mkdtemp(dir));
	snprintf(root, sizeof(root), "%s/root", dir);
	assert_int_equal(oci_state_lock(root, "c1", 0), -ENOENT);
	assert_int_equal(oci_state_create(root, "c1"), 0);
	assert_int_equal(oci_state_create(root, "c1"), -EEXIST);
	assert_int_equal(oci_state_create(root, "../c1"), -EINVAL);
	/* a root others can write (a --root in /tmp someone made first), or
	 * a link by its name: refused, nothing made in it */
	{
		char open_root[PATH_MAX + 16], link_root[PATH_MAX + 16], sub[PATH_MAX + 32];

		snprintf(open_root, sizeof(open_root), "%s/open", dir);
		snprintf(link_root, sizeof(link_root), "%s/link", dir);
		assert_int_equal(mkdir(open_root, 0700), 0);
		assert_int_equal(chmod(open_root, 0777), 0);
		assert_int_equal(oci_state_create(open_root, "c2"), -EPERM);
		snprintf(sub, sizeof(sub), "%s/c2", open_root);
		assert_int_equal(access(sub, F_OK), -1);
		assert_int_equal(oci_root_check(open_root), -EPERM);
		assert_int_equal(symlink(root, link_root), 0);
		assert_int_equal(oci_state_create(link_root, "c3"), -ENOTDIR);
		assert_int_equal(oci_root_check(link_root), -ENOTDIR);
		assert_int_equal(oci_root_check(root), 0);
		snprintf(sub, sizeof(sub), "%s/none", dir);
		assert_int_equal(oci_root_check(sub), 0);
		rmdir(open_root);
		unlink(link_root);
	}
	fd = oci_state_lock(root, "c1", 1);
	assert_true(fd >= 0);
	assert_int_equal(oci_state_save(root, &s), 0);
	assert_int_equal(oci_state_load(root, "c1", &back), 0);
	assert_int_equal(back.pid, 4242);
	/* the init proxy's exit status: none until recorded, then state
	 * shows it for a stopped container only */
	oci_exit_load(root, &back);
	assert_false(back.exit_known);
	assert_int_equal(oci_state_render(&back, OCI_STOPPED, 0, buf, sizeof(buf)), 0);
	assert_null(strstr(buf, "exitStatus"));
	assert_int_equal(oci_exit_record(root, "c1", 7), 0);
	oci_exit_load(root, &back);
	assert_true(back.exit_known);
	assert_int_equal(back.exit_status, 7);
	assert_int_equal(oci_state_render(&back, OCI_STOPPED, 0, buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "\"exitStatus\":7"));
	assert_int_equal(oci_state_render(&back, OCI_RUNNING, 0, buf, sizeof(buf)), 0);
	assert_null(strstr(buf, "exitStatus"));
	assert_int_equal(oci_state_render(&back, OCI_STOPPED, 1, buf, sizeof(buf)), 0);
	assert_null(strstr(buf, "exitStatus")); /* not in state.json itself */
	/* a recorded pid that is not the recorded process: not alive */
	back.pid = getpid();
	back.pid_start = 1;
	assert_false(oci_proxy_alive(&back));
	{
		char st;

		assert_int_equal(cli_proc_stat(getpid(), &st, &back.pid_start), 0);
	}
	assert_true(oci_proxy_alive(&back));
	/* a shared lock waits for the exclusive one: a child tries */
	if (fork() == 0) {
		close(fd); /* the inherited copy shares the lock with the parent's */
		fd2 = oci_state_lock(root, "c1", 0);
		_exit(fd2 >= 0 ? 0 : 1);
	}
	{
		int wst;

		usleep(1000);
		close(fd);
		wait(&wst);
		assert_int_equal(WEXITSTATUS(wst), 0);
	}
	assert_int_equal(cli_rm_tree(dir), 0);
}

static void exit_status_and_signals(void **state)
{
	int wst;
	pid_t p;

	(void)state;
	assert_int_equal(oci_exit_status(3 << 8), 3);
	assert_int_equal(oci_exit_status(0), 0);
	/* a real child killed by SIGKILL: 128 + 9 */
	p = fork();
	if (p == 0) {
		pause();
		_exit(0);
	}
	kill(p, SIGKILL);
	waitpid(p, &wst, 0);
	assert_int_equal(oci_exit_status(wst), 137);
	p = fork();
	if (p == 0)
		_exit(42);
	waitpid(p, &wst, 0);
	assert_int_equal(oci_exit_status(wst), 42);
	assert_int_equal(oci_signal_parse("KILL"), SIGKILL);
	assert_int_equal(oci_signal_parse("SIGKILL"), SIGKILL);
	assert_int_equal(oci_signal_parse("sigterm"), SIGTERM);
	assert_int_equal(oci_signal_parse("9"), 9);
	assert_int_equal(oci_signal_parse("15"), SIGTERM);
	assert_int_equal(oci_signal_parse("WINCH"), SIGWINCH);
	assert_int_equal(oci_signal_parse("RTMIN+1"), SIGRTMIN + 1);
	assert_int_equal(oci_signal_parse("0"), -EINVAL);
	assert_int_equal(oci_signal_parse("65"), -EINVAL);
	assert_int_equal(oci_signal_parse("BOGUS"), -EINVAL);
	assert_int_equal(oci_signal_parse("9x"), -EINVAL);
	assert_int_equal(oci_signal_parse(""), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(containerd_fixture),
		cmocka_unit_test(podman_fixture),
		cmocka_unit_test(invalid_documents),
		cmocka_unit_test(valid_minimal_and_limits),
		cmocka_unit_test(load_missing_and_not_regular),
		cmocka_unit_test(ids),
		cmocka_unit_test(state_roundtrip_and_status),
		cmocka_unit_test(exit_status_and_signals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
