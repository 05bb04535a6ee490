/* oci_cgroup: cgroupsPath to a folder (a systemd unit and a host without
 * cgroup v2 left alone, "." and ".." refused), the join (each level made
 * with the controllers its parent has switched on for it, then the pid
 * written into cgroup.procs), and delete's record, which only ever names a
 * folder under /sys/fs/cgroup. A fake hierarchy in a temporary folder
 * stands for cgroupfs: its files take the writes as cgroupfs would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/oci/oci_cgroup.h"

struct fx {
	char mnt[64], state[96];
};

static void put(const char *dir, const char *file, const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	assert_non_null(f = fopen(p, "w"));
	fputs(text, f);
	fclose(f);
}

static void get(const char *dir, const char *file, char *buf, size_t len)
{
	char p[256];
	FILE *f;
	size_t n;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	assert_non_null(f = fopen(p, "r"));
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	snprintf(f->mnt, sizeof(f->mnt), "/tmp/test_oci_cgroup.XXXXXX");
	assert_non_null(mkdtemp(f->mnt));
	snprintf(f->state, sizeof(f->state), "%s/state", f->mnt);
	assert_int_equal(mkdir(f->state, 0700), 0);
	*state = f;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	nftw(f->mnt, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void paths(void **state)
{
	struct fx *f = *state;
	char dir[256];

	/* no cgroup.controllers at the top: not cgroup v2 */
	assert_int_equal(oci_cgroup_dir(f->mnt, "/kubepods/pod1/c1", dir, sizeof(dir)), -ENOTSUP);
	put(f->mnt, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	assert_int_equal(oci_cgroup_dir(f->mnt, "/kubepods/pod1/c1", dir, sizeof(dir)), 0);
	assert_true(strncmp(dir, f->mnt, strlen(f->mnt)) == 0);
	assert_string_equal(dir + strlen(f->mnt), "/kubepods/pod1/c1");
	/* runc's relative form: under the hierarchy's top as well */
	assert_int_equal(oci_cgroup_dir(f->mnt, "default/c2", dir, sizeof(dir)), 0);
	assert_string_equal(dir + strlen(f->mnt), "/default/c2");
	assert_int_equal(oci_cgroup_dir(f->mnt, "system.slice:cri-containerd:abc", dir, sizeof(dir)), -ENOTSUP);
	assert_int_equal(oci_cgroup_dir(f->mnt, "/kubepods/../../etc", dir, sizeof(dir)), -EINVAL);
	assert_int_equal(oci_cgroup_dir(f->mnt, "..", dir, sizeof(dir)), -EINVAL);
	assert_int_equal(oci_cgroup_dir(f->mnt, "/a/./b", dir, sizeof(dir)), -EINVAL);
	/* none, or the root alone: nothing of the container's own to join */
	assert_int_equal(oci_cgroup_dir(f->mnt, "", dir, sizeof(dir)), -ENOENT);
	assert_int_equal(oci_cgroup_dir(f->mnt, "//", dir, sizeof(dir)), -ENOENT);
	assert_int_equal(oci_cgroup_dir(f->mnt, NULL, dir, sizeof(dir)), -ENOENT);
	assert_int_equal(oci_cgroup_dir(f->mnt, "/a/b", dir, 8), -ENAMETOOLONG);
	/* a name with dots in it is a name */
	assert_int_equal(oci_cgroup_dir(f->mnt, "/kubepods.slice/..x/.y", dir, sizeof(dir)), 0);
}

static void join(void **state)
{
	struct fx *f = *state;
	char dir[256], lvl[256], leaf[256], text[256], why[512];

	put(f->mnt, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	put(f->mnt, "cgroup.subtree_control", "");
	/* kubelet's pod level exists with fewer controllers */
	snprintf(lvl, sizeof(lvl), "%s/kubepods", f->mnt);
	assert_int_equal(mkdir(lvl, 0755), 0);
	put(lvl, "cgroup.controllers", "memory pids rdma\n");
	put(lvl, "cgroup.subtree_control", "");
	/* the container's own level: a fake has no cgroup.procs until made */
	snprintf(leaf, sizeof(leaf), "%s/kubepods/pod1", f->mnt);
	assert_int_equal(mkdir(leaf, 0755), 0);
	snprintf(leaf, sizeof(leaf), "%s/kubepods/pod1/c1", f->mnt);
	assert_int_equal(mkdir(leaf, 0755), 0);
	put(leaf, "cgroup.procs", "");
	assert_int_equal(oci_cgroup_dir(f->mnt, "/kubepods/pod1/c1", dir, sizeof(dir)), 0);
	assert_int_equal(oci_cgroup_join(f->mnt, dir, 4321, why, sizeof(why)), 0);
	get(leaf, "cgroup.procs", text, sizeof(text));
	assert_string_equal(text, "4321");
	/* each of cpu, memory, pids, io its parent has, in its own write */
	get(f->mnt, "cgroup.subtree_control", text, sizeof(text));
	assert_string_equal(text, "+cpu+io+memory+pids");
	get(lvl, "cgroup.subtree_control", text, sizeof(text));
	assert_string_equal(text, "+memory+pids");
	/* back where it came from (a failed create): a plain move */
	assert_int_equal(oci_cgroup_move(leaf, 99), 0);
	get(leaf, "cgroup.procs", text, sizeof(text));
	assert_string_equal(text, "432199");
	/* the caller's own: this process's "0::" line, under the given top */
	/* the caller's own: its "0::" line under the given top, or -ENOENT
	 * on a host whose /proc/self/cgroup has none (cgroup v1 alone) */
	switch (oci_cgroup_self(f->mnt, text, sizeof(text))) {
	case 0:
		assert_true(strncmp(text, f->mnt, strlen(f->mnt)) == 0 && text[strlen(f->mnt)] == '/');
		assert_null(strstr(text, "/.."));
		break;
	case -ENOENT:
		break;
	default:
		fail_msg("oci_cgroup_self: neither a cgroup nor none");
	}
	/* a level that cannot be made: the error names it */
	assert_int_equal(oci_cgroup_dir(f->mnt, "/nope/x", dir, sizeof(dir)), 0);
	put(f->mnt, "nope", "a file where a folder should be");
	assert_int_equal(oci_cgroup_join(f->mnt, dir, 1, why, sizeof(why)), -ENOTDIR);
	assert_non_null(strstr(why, "/nope/x"));
	/* never outside the hierarchy it is given */
	assert_int_equal(oci_cgroup_join(f->mnt, "/etc/x", 1, why, sizeof(why)), -EINVAL);
}

/* The memory limit the levels above a container's cgroup set (kubelet's
 * pod and QoS levels): the lowest, "max" and missing files ignored, the
 * container's own level and the hierarchy's root not read. */
static void mem_limit(void **state)
{
	struct fx *f = *state;
	char a[128], b[128], c[160];

	snprintf(a, sizeof(a), "%s/kubepods", f->mnt);
	snprintf(b, sizeof(b), "%s/kubepods/pod1", f->mnt);
	snprintf(c, sizeof(c), "%s/kubepods/pod1/c1", f->mnt);
	assert_int_equal(mkdir(a, 0755), 0);
	assert_int_equal(mkdir(b, 0755), 0);
	assert_int_equal(mkdir(c, 0755), 0);
	assert_true(oci_cgroup_mem_limit(f->mnt, c) == UINT64_MAX);
	put(f->mnt, "memory.max", "1024\n"); /* the root: never read */
	put(c, "memory.max", "2048\n");      /* its own: not above it */
	assert_true(oci_cgroup_mem_limit(f->mnt, c) == UINT64_MAX);
	put(a, "memory.max", "max\n");
	assert_true(oci_cgroup_mem_limit(f->mnt, c) == UINT64_MAX);
	put(b, "memory.max", "536870912\n");
	assert_true(oci_cgroup_mem_limit(f->mnt, c) == 536870912ull);
	put(a, "memory.max", "268435456\n");
	assert_true(oci_cgroup_mem_limit(f->mnt, c) == 268435456ull);
	assert_true(oci_cgroup_mem_limit(f->mnt, "/elsewhere/x") == UINT64_MAX);
}

static void record(void **state)
{
	struct fx *f = *state;
	char why[512];

	/* nothing recorded: nothing to do */
	assert_int_equal(oci_cgroup_forget(f->state, why, sizeof(why)), 0);
	/* a record naming a folder outside cgroupfs is refused, not removed */
	assert_int_equal(oci_cgroup_record(f->state, f->mnt), 0);
	assert_int_equal(oci_cgroup_forget(f->state, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not a cgroup"));
	assert_int_equal(access(f->mnt, F_OK), 0);
	assert_int_equal(oci_cgroup_record(f->state, OCI_CGROUP_ROOT "/x/../../tmp"), 0);
	assert_int_equal(oci_cgroup_forget(f->state, why, sizeof(why)), -EINVAL);
	/* one that is gone already is no error */
	assert_int_equal(oci_cgroup_record(f->state, OCI_CGROUP_ROOT "/vmm-test-no-such-cgroup/c1"), 0);
	assert_int_equal(oci_cgroup_forget(f->state, why, sizeof(why)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(paths, setup, teardown),
		cmocka_unit_test_setup_teardown(join, setup, teardown),
		cmocka_unit_test_setup_teardown(mem_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(record, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
