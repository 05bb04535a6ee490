/* Standby: idle accounting on a fake clock, the suspend's write and
 * commit order with a crash injected before every step, the consume
 * marker, the diff-or-full decision, and the in-place diff write of a
 * resumed sandbox (disks in place) killed after every step, against a
 * MAP_PRIVATE mapping of the memory file as the running VM has it; and
 * the copy of a disk onto a full file system. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <limits.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/idle.h"
#include "vmm/base/snapfmt_diff.h"
#include "vmm/base/snapfmt.h"
#include "vmm/vm_standby.h"
#include "vmm/vm_snapshot.h"

#define S 1000000000ull

/* ---- idle accounting (fake clock: the tests pass the time) ---- */

static void idle_after_timeout_only(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 10 * S, 100 * S);
	assert_false(idle_expired(&d, 100 * S));
	assert_false(idle_expired(&d, 109 * S));
	assert_true(idle_expired(&d, 110 * S));
}

static void idle_touch_restarts_the_period(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 10 * S, 0);
	idle_touch(&d, 8 * S);
	assert_false(idle_expired(&d, 17 * S));
	assert_true(idle_expired(&d, 18 * S));
	/* a touch from the past does not move it back */
	idle_touch(&d, 1 * S);
	assert_true(idle_expired(&d, 18 * S));
}

static void idle_open_connection_is_busy(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 10 * S, 0);
	idle_observe(&d, 1, 1, 5 * S);          /* an exec stream opens */
	idle_observe(&d, 1, 1, 100 * S);        /* still open, quiet */
	assert_false(idle_expired(&d, 1000 * S));
	idle_observe(&d, 0, 2, 200 * S);        /* closed: the period starts */
	assert_false(idle_expired(&d, 209 * S));
	idle_observe(&d, 0, 2, 209 * S);
	assert_true(idle_expired(&d, 210 * S));
}

static void idle_short_connection_between_samples_counts(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 10 * S, 0);
	idle_observe(&d, 0, 0, 5 * S);
	/* opened and closed between two samples: only the generation moved */
	idle_observe(&d, 0, 2, 9 * S);
	assert_false(idle_expired(&d, 18 * S));
	assert_true(idle_expired(&d, 19 * S));
}

static void idle_never_without_timeout(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 0, 0);
	assert_false(idle_expired(&d, 1000000 * S));
	assert_int_equal(idle_wait_ms(&d, 5 * S), -1);
}

static void idle_wait_is_bounded(void **state)
{
	struct idle d;

	(void)state;
	idle_init(&d, 3600 * S, 0);
	assert_int_equal(idle_wait_ms(&d, 0), 1000); /* looks again each second */
	idle_init(&d, S / 2, 0);
	assert_int_equal(idle_wait_ms(&d, 0), 501);
	assert_int_equal(idle_wait_ms(&d, S), 0);
}

/* ---- the commit order ---- */

static char root[64];

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/test_standby.XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static void rm_flat(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static int teardown(void **state)
{
	(void)state;
	rm_flat(root);
	return 0;
}

struct fake {
	int gen;
	int fail; /* -errno: the write fails (a full disk) after writing some */
};

static int put(const char *dir, const char *name, const char *text)
{
	char p[256];
	int fd;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

/* A real state file (header, CRC) holding only an identity: ID byte 0 is
 * `gen`, so snap_state_id (what standby_valid and standby_plan read) sees
 * one ID per generation. */
static int put_state(const char *dir, const char *name, int gen)
{
	struct snap_ident i = { .kind = SNAP_KIND_FULL };
	struct sbuf b;
	char p[256];
	int r;

	i.id[0] = (uint8_t)gen;
	i.id[1] = 0xa5;
	sb_init(&b);
	snapid_save(&b, &i);
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	r = snapfile_write(p, &b);
	sb_free(&b);
	return r;
}

/* Writes the way vm_snapshot does: a partial directory, then renamed. */
static int fake_write(void *ctx, const char *dir)
{
	struct fake *f = ctx;
	char tmp[256], text[32];
	int r;

	snprintf(tmp, sizeof(tmp), "%s.partial-%d", dir, (int)getpid());
	if (mkdir(tmp, 0700) < 0)
		return -errno;
	snprintf(text, sizeof(text), "%d", f->gen);
	if ((r = put(tmp, "memory", text)))
		return r;
	if (f->fail) {
		rm_flat(tmp);
		return f->fail;
	}
	if ((r = put_state(tmp, "state", f->gen)))
		return r;
	return rename(tmp, dir) < 0 ? -errno : 0;
}

/* The generation a restore would get: the state file's, which must match
 * its memory file's (never a mix). -1: nothing to restore. */
static int restorable(void)
{
	char p[256], mem[32] = "";
	uint8_t id[SNAP_ID_LEN];
	FILE *f;

	if (!standby_valid(root))
		return -1;
	snprintf(p, sizeof(p), "%s/standby", root);
	assert_int_equal(snap_state_id(p, id), 0);
	snprintf(p, sizeof(p), "%s/standby/memory", root);
	f = fopen(p, "r");
	assert_non_null(f);
	assert_non_null(fgets(mem, sizeof(mem), f));
	fclose(f);
	assert_int_equal(id[0], atoi(mem));
	return id[0];
}

static void commit_first_and_second(void **state)
{
	struct fake f = { .gen = 1 };
	struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
	char p[256];

	(void)state;
	assert_int_equal(restorable(), -1);
	assert_int_equal(standby_commit(root, &w), 0);
	assert_int_equal(restorable(), 1);
	/* a resume consumes it: never restored twice */
	assert_int_equal(standby_consume(root), 0);
	assert_int_equal(restorable(), -1);
	f.gen = 2;
	assert_int_equal(standby_commit(root, &w), 0);
	assert_int_equal(restorable(), 2);
	snprintf(p, sizeof(p), "%s/" STANDBY_NEW, root);
	assert_int_equal(access(p, F_OK), -1); /* the old one is gone */
}

static void failed_write_leaves_the_old_state(void **state)
{
	struct fake f = { .gen = 1 };
	struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
	char p[256];

	(void)state;
	assert_int_equal(standby_commit(root, &w), 0);
	f.gen = 2;
	f.fail = -ENOSPC;
	assert_int_equal(standby_commit(root, &w), -ENOSPC);
	assert_int_equal(restorable(), 1);
	snprintf(p, sizeof(p), "%s/" STANDBY_NEW, root);
	assert_int_equal(access(p, F_OK), -1);
}

/* Killed before each step of the second suspend (the first resume has
 * consumed the first state, as it does before the guest runs): what is
 * left restores as nothing (the sandbox is dead: its disks moved on since
 * the first state) or as the new state, whole; and the next suspend
 * cleans up and commits. Never the consumed state, never a mix. */
static void crash_at_every_step(void **state)
{
	int step;

	(void)state;
	for (step = STANDBY_STEP_CLEAN; step < STANDBY_STEP_DONE; step++) {
		struct fake f = { .gen = 1 };
		struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
		int got;

		rm_flat(root);
		assert_int_equal(mkdir(root, 0700), 0);
		assert_int_equal(standby_commit(root, &w), 0);
		assert_int_equal(standby_consume(root), 0);
		f.gen = 2;
		w.crash_at = step;
		assert_int_equal(standby_commit(root, &w), -EINTR);
		got = restorable();
		if (step <= STANDBY_STEP_COMMIT)
			assert_int_equal(got, -1);
		else
			assert_int_equal(got, 2);
		/* the next suspend after a restart */
		f.gen = 3;
		w.crash_at = -1;
		assert_int_equal(standby_commit(root, &w), 0);
		assert_int_equal(restorable(), 3);
	}
}

/* A crash in the middle of the write (vm_snapshot's partial directory
 * left behind) is cleaned by the next suspend. */
static void partial_leftover_is_removed(void **state)
{
	struct fake f = { .gen = 5 };
	struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
	char p[256];

	(void)state;
	snprintf(p, sizeof(p), "%s/" STANDBY_NEW ".partial-99999", root);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(put(p, "memory", "junk"), 0);
	assert_int_equal(standby_commit(root, &w), 0);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(restorable(), 5);
}


/* ---- the consume marker ---- */

/* A resume leaves the state file where it is and names its ID in
 * state.consumed: not restorable again; an in-place update's new state
 * (another ID) is, with no step but its own rename. */
static void consume_marks_the_id(void **state)
{
	struct fake f = { .gen = 1 };
	struct standby_writer w = { .write = fake_write, .ctx = &f, .crash_at = -1 };
	char dir[256], p[300], to[300];

	(void)state;
	assert_int_equal(standby_commit(root, &w), 0);
	assert_int_equal(restorable(), 1);
	assert_int_equal(standby_consume(root), 0);
	assert_int_equal(restorable(), -1);
	snprintf(dir, sizeof(dir), "%s/standby", root);
	snprintf(p, sizeof(p), "%s/state", dir);
	assert_int_equal(access(p, F_OK), 0); /* still there: the diff's base */
	/* what snap_inplace_commit's commit does: state.new renamed over
	 * state. The same ID again is still consumed; another is valid. */
	snprintf(p, sizeof(p), "%s/" SNAP_STATE_NEW, dir);
	snprintf(to, sizeof(to), "%s/state", dir);
	assert_int_equal(put_state(dir, SNAP_STATE_NEW, 1), 0);
	assert_int_equal(rename(p, to), 0);
	assert_int_equal(standby_valid(root), 0);
	assert_int_equal(put_state(dir, SNAP_STATE_NEW, 2), 0);
	assert_int_equal(rename(p, to), 0);
	assert_int_equal(standby_valid(root), 1);
	/* a damaged marker counts as consumed (the safe way round) */
	assert_int_equal(standby_consume(root), 0);
	assert_int_equal(put_state(dir, SNAP_STATE_NEW, 3), 0);
	assert_int_equal(rename(p, to), 0);
	snprintf(p, sizeof(p), "%s/" STANDBY_CONSUMED, dir);
	assert_int_equal(truncate(p, 3), 0);
	assert_int_equal(standby_valid(root), 0);
	/* a damaged state with no marker: consuming it moves it away whole */
	assert_int_equal(unlink(p), 0);
	snprintf(p, sizeof(p), "%s/state", dir);
	assert_int_equal(truncate(p, 10), 0);
	assert_int_equal(standby_valid(root), 1); /* exists, no marker */
	assert_int_equal(standby_consume(root), 0);
	assert_int_equal(standby_valid(root), 0);
	assert_int_equal(access(p, F_OK), -1);
}

/* ---- which write a suspend does ---- */

static void plan_diff_only_from_this_state(void **state)
{
	uint8_t id[SNAP_ID_LEN] = { 7, 0xa5 }, zero[SNAP_ID_LEN] = { 0 }, other[SNAP_ID_LEN] = { 8, 0xa5 };
	char dir[256], real[4096], p[300];
	const char *why;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/standby", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(put_state(dir, "state", 7), 0);
	assert_int_equal(put(dir, "memory", "7"), 0);
	assert_non_null(realpath(dir, real));

	assert_int_equal(standby_plan(root, 1, real, id, &why), STANDBY_DIFF);
	assert_null(why);
	/* tracking off */
	assert_int_equal(standby_plan(root, 0, real, id, &why), STANDBY_FULL);
	assert_non_null(strstr(why, "tracking"));
	/* no base: a first suspend (booted, or restored from a gold snapshot
	 * elsewhere) */
	assert_int_equal(standby_plan(root, 1, "", id, &why), STANDBY_FULL);
	assert_int_equal(standby_plan(root, 1, real, zero, &why), STANDBY_FULL);
	/* restored from another snapshot (the gold one) */
	assert_int_equal(standby_plan(root, 1, "/tmp", id, &why), STANDBY_FULL);
	assert_non_null(strstr(why, "did not resume"));
	/* a base that moved on: -ESTALE's case */
	assert_int_equal(standby_plan(root, 1, real, other, &why), STANDBY_FULL);
	assert_non_null(strstr(why, "stale"));
	/* a consumed state is still the base (the marker changes nothing) */
	assert_int_equal(standby_consume(root), 0);
	assert_int_equal(standby_plan(root, 1, real, id, &why), STANDBY_DIFF);
	/* no memory file to write into */
	snprintf(p, sizeof(p), "%s/memory", dir);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(standby_plan(root, 1, real, id, &why), STANDBY_FULL);
	/* no standby/ at all */
	rm_flat(dir);
	assert_int_equal(standby_plan(root, 1, real, id, &why), STANDBY_FULL);
}

/* ---- the in-place diff of a resumed sandbox, killed after each step ---- */

#define NPAGES 32u
#define PG 4096u

static uint8_t old_byte(unsigned pg) { return (uint8_t)(0x10 + pg); }
static uint8_t new_byte(unsigned pg) { return (uint8_t)(0x80 + pg); }

static int stop_at;
static int stop_hook(void *ctx, enum snap_step s)
{
	(void)ctx;
	return (int)s == stop_at;
}

static void file_pages(const char *path, uint8_t *out)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, out, NPAGES * PG, 0), (ssize_t)(NPAGES * PG));
	close(fd);
}

/* The standby folder as a first suspend and its resume leave it: state
 * (ID gen 1) and memory (old bytes), consumed; a writable disk in the
 * sandbox's folder, recorded by path (never copied, never renamed). The
 * running VM's RAM is a MAP_PRIVATE mapping of standby/memory (as
 * gm_open_file maps it). The guest writes some pages (private copies,
 * marked as the KVM dirty log and gm_ptr_w would), and the balloon
 * discards one it had written (MADV_DONTNEED: the page reads the file's
 * content again; the guest's write marked it). Then the diff write runs, stopped
 * after step `stop` as a kill -9 there would stop it (-1: not stopped).
 * Checks: the mapping's view never changes under the write; what a resume
 * then finds is nothing (before the commit: the old state was consumed)
 * or the new state whole, once snap_recover (every open's first step) has
 * run; the old memory file is untouched before the commit; the disk is
 * untouched and no diskN.next appears. */
static void diff_write_killed_at(int stop)
{
	static const unsigned written[] = { 0, 1, 2, 5, 6, 7, 20, 31 };
	struct snap_ident ni = { .kind = SNAP_KIND_FULL };
	struct snap_fault fault = { stop_hook, NULL };
	struct snap_inplace u = { 0 };
	uint8_t *map, *want, *got, *old, id[SNAP_ID_LEN];
	char dir[256], mem[300], disk[300], p[300];
	struct dirty d;
	struct sbuf b;
	uint64_t bytes = 0;
	unsigned i;
	int fd, r, discarded = 9;

	rm_flat(root);
	assert_int_equal(mkdir(root, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/standby", root);
	snprintf(mem, sizeof(mem), "%s/memory", dir);
	snprintf(disk, sizeof(disk), "%s/disk.img", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(put(root, "disk.img", "the guest's disk"), 0);
	old = malloc(NPAGES * PG);
	want = malloc(NPAGES * PG);
	got = malloc(NPAGES * PG);
	assert_non_null(old);
	assert_non_null(want);
	assert_non_null(got);
	for (i = 0; i < NPAGES; i++)
		memset(old + i * PG, old_byte(i), PG);
	fd = open(mem, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, old, NPAGES * PG, 0), (ssize_t)(NPAGES * PG));
	close(fd);
	assert_int_equal(put_state(dir, "state", 1), 0);
	assert_int_equal(standby_consume(root), 0); /* the resume */
	assert_int_equal(standby_valid(root), 0);

	/* The resumed VM. */
	fd = open(mem, O_RDONLY);
	assert_true(fd >= 0);
	map = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	assert_true(map != MAP_FAILED);
	assert_int_equal(dirty_init(&d, NPAGES), 0);
	for (i = 0; i < sizeof(written) / sizeof(written[0]); i++) {
		memset(map + written[i] * PG, new_byte(written[i]), PG);
		dirty_mark(&d, (uint64_t)written[i] * PG, PG);
	}
	memset(map + discarded * PG, 0xee, PG);
	dirty_mark(&d, (uint64_t)discarded * PG, PG);
	assert_int_equal(madvise(map + discarded * PG, PG, MADV_DONTNEED), 0);
	assert_int_equal(map[discarded * PG], old_byte(discarded)); /* the file's page again */
	memcpy(want, map, NPAGES * PG);

	/* The suspend's diff write (snapshot_update_inplace_ex's commit,
	 * disk_mask 0: disks in place). */
	ni.id[0] = 2;
	ni.id[1] = 0xa5;
	sb_init(&b);
	snapid_save(&b, &ni);
	u.dir = dir;
	u.mem = map;
	u.total = NPAGES * PG;
	u.pages = &d;
	u.state = &b;
	memcpy(u.new_id, ni.id, SNAP_ID_LEN);
	u.disk_mask = 0;
	stop_at = stop;
	u.fault = stop >= 0 ? &fault : NULL;
	r = snap_inplace_commit(&u, &bytes);
	assert_int_equal(r, stop >= 0 ? -ECANCELED : 0);
	/* 9 pages in the journal, after its header and one index page */
	assert_int_equal(bytes, 4096 + 4096 + 9 * PG);
	/* The running VM saw nothing change (the failure case runs on). */
	assert_memory_equal(map, want, NPAGES * PG);
	munmap(map, NPAGES * PG); /* killed */

	/* The resume: valid? then open (snap_recover first). */
	if (stop >= 0 && stop < SNAP_STEP_COMMITTED) {
		assert_int_equal(standby_valid(root), 0);
		file_pages(mem, got);
		assert_memory_equal(got, old, NPAGES * PG); /* old state untouched */
		assert_int_equal(snap_recover(dir), 0);
		snprintf(p, sizeof(p), "%s/" SNAP_JOURNAL_FILE, dir);
		assert_int_equal(access(p, F_OK), -1); /* discarded */
		assert_int_equal(standby_valid(root), 0);
	} else {
		assert_int_equal(standby_valid(root), 1);
		assert_int_equal(snap_recover(dir), 0);
		assert_int_equal(snap_state_id(dir, id), 0);
		assert_int_equal(id[0], 2);
		file_pages(mem, got);
		assert_memory_equal(got, want, NPAGES * PG);
		/* and the next resume consumes it */
		assert_int_equal(standby_consume(root), 0);
		assert_int_equal(standby_valid(root), 0);
	}
	{
		char text[64] = "";
		FILE *f = fopen(disk, "r");

		assert_non_null(f);
		assert_non_null(fgets(text, sizeof(text), f));
		fclose(f);
		assert_string_equal(text, "the guest's disk");
	}
	for (i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/disk%u.next", dir, i);
		assert_int_equal(access(p, F_OK), -1);
		snprintf(p, sizeof(p), "%s/disk%u", dir, i);
		assert_int_equal(access(p, F_OK), -1);
	}
	sb_free(&b);
	dirty_free(&d);
	free(old);
	free(want);
	free(got);
}

static void diff_write_killed_at_every_step(void **state)
{
	int s;

	(void)state;
	for (s = 0; s < SNAP_STEP_COUNT; s++)
		diff_write_killed_at(s);
	diff_write_killed_at(-1);
}

/* ---- the copy of a disk (snap_copy_fd: an image's root for a sandbox,
 * standby's disks) on a full file system ---- */

/* In a child in its own user and mount namespaces: a 200 KiB tmpfs (not
 * a whole number of the copy's 64 KiB steps, so one write is short), a
 * 4 MiB memfd of data (another file system: copy_file_range says EXDEV,
 * the read/write fallback runs) copied onto it. Exit 0: -ENOSPC and no
 * file left; 1: another result (CI saw EXDEV); 77: no user namespaces. */
static int copy_onto_full_tmpfs(const char *dir)
{
	char dst[PATH_MAX], *buf;
	size_t n = 4u << 20;
	int in, r;

	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];
	int fd;

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return 77;
	/* our ids mapped, or files cannot be made (EOVERFLOW) */
	fd = open("/proc/self/setgroups", O_WRONLY);
	if (fd < 0 || write(fd, "deny", 4) != 4)
		return 77;
	close(fd);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	fd = open("/proc/self/uid_map", O_WRONLY);
	if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map))
		return 77;
	close(fd);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	fd = open("/proc/self/gid_map", O_WRONLY);
	if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map))
		return 77;
	close(fd);
	if (mount("none", dir, "tmpfs", 0, "size=200k") < 0)
		return 77;
	in = memfd_create("src", 0);
	buf = malloc(n);
	if (in < 0 || !buf)
		return 1;
	memset(buf, 0x5a, n);
	if (write(in, buf, n) != (ssize_t)n)
		return 1;
	snprintf(dst, sizeof(dst), "%s/copy", dir);
	r = snap_copy_fd(in, dst);
	if (r != -ENOSPC) {
		fprintf(stderr, "snap_copy_fd onto a full file system: %d (%s), not -ENOSPC\n", r, strerror(-r));
		return 1;
	}
	return access(dst, F_OK) == 0 ? 1 : 0;
}

static void copy_on_a_full_disk_says_enospc(void **state)
{
	char dir[] = "/tmp/vmm-copy-XXXXXX";
	int st;
	pid_t pid;

	(void)state;
	assert_non_null(mkdtemp(dir));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(copy_onto_full_tmpfs(dir));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	rmdir(dir);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77) {
		print_message("skip: no user namespace with a tmpfs mount on this host (unshare or mount refused)\n");
		skip();
	}
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(idle_after_timeout_only),
		cmocka_unit_test(idle_touch_restarts_the_period),
		cmocka_unit_test(idle_open_connection_is_busy),
		cmocka_unit_test(idle_short_connection_between_samples_counts),
		cmocka_unit_test(idle_never_without_timeout),
		cmocka_unit_test(idle_wait_is_bounded),
		cmocka_unit_test_setup_teardown(commit_first_and_second, setup, teardown),
		cmocka_unit_test_setup_teardown(failed_write_leaves_the_old_state, setup, teardown),
		cmocka_unit_test_setup_teardown(crash_at_every_step, setup, teardown),
		cmocka_unit_test_setup_teardown(partial_leftover_is_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(consume_marks_the_id, setup, teardown),
		cmocka_unit_test_setup_teardown(plan_diff_only_from_this_state, setup, teardown),
		cmocka_unit_test_setup_teardown(diff_write_killed_at_every_step, setup, teardown),
		cmocka_unit_test(copy_on_a_full_disk_says_enospc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
