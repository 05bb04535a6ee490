/* Standby: suspend in place, the write and commit order (standby.h). */
#include "vmm/vm_standby.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/base/log.h"
#include "vmm/vm_snapshot.h"
#include "vmm/base/snapfmt_diff.h"
#include "vmm/base/snapfmt.h"
#include "vmm/vm.h"

static int join(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Removes a flat state directory (the files a snapshot writes), never
 * through a symbolic link. Missing: fine. */
static void remove_flat(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	struct dirent *e;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(fd, e->d_name, 0);
	closedir(d);
	rmdir(path);
}

/* Leftovers of vm_snapshot's own partial directories for standby.new. */
static void remove_partials(const char *sbdir)
{
	DIR *d = opendir(sbdir);
	struct dirent *e;
	char p[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, STANDBY_NEW ".partial-", sizeof(STANDBY_NEW ".partial-") - 1) &&
		    !join(p, sizeof(p), sbdir, e->d_name))
			remove_flat(p);
	closedir(d);
}

int standby_commit(const char *sbdir, const struct standby_writer *w)
{
	char cur[PATH_MAX], nxt[PATH_MAX];
	struct stat st;
	int r;

	if ((r = join(cur, sizeof(cur), sbdir, STANDBY_DIR)) || (r = join(nxt, sizeof(nxt), sbdir, STANDBY_NEW)))
		return r;
	if (w->crash_at == STANDBY_STEP_CLEAN)
		return -EINTR;
	/* 1. an earlier suspend that died before its commit */
	remove_flat(nxt);
	remove_partials(sbdir);
	if (w->crash_at == STANDBY_STEP_WRITE)
		return -EINTR;
	/* 2. the whole state, beside the current one */
	r = w->write(w->ctx, nxt);
	if (r) {
		remove_flat(nxt);
		return r;
	}
	if (w->crash_at == STANDBY_STEP_COMMIT)
		return -EINTR;
	/* 3. the commit: one atomic rename */
	if (lstat(cur, &st) == 0)
		r = renameat2(AT_FDCWD, nxt, AT_FDCWD, cur, RENAME_EXCHANGE) < 0 ? -errno : 0;
	else
		r = rename(nxt, cur) < 0 ? -errno : 0;
	if (r) {
		log_err("standby: cannot commit %s: %s", cur, strerror(-r));
		remove_flat(nxt);
		return r;
	}
	if ((r = snap_fsync_dir(sbdir))) {
		/* Renamed but maybe not on disk: the new state or the old
		 * one comes back after a power cut, both whole. Say so. */
		log_warn("standby: fsync %s: %s", sbdir, strerror(-r));
	}
	if (w->crash_at == STANDBY_STEP_DROP)
		return -EINTR;
	/* 4. the state it replaced */
	remove_flat(nxt);
	return 0;
}

/* The ID the consume marker names: 0, -ENOENT (no marker) or -errno. */
static int read_marker(const char *dir, uint8_t id[SNAP_ID_LEN])
{
	char p[PATH_MAX];
	ssize_t n;
	int fd, r;

	if ((r = join(p, sizeof(p), dir, STANDBY_CONSUMED)))
		return r;
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, id, SNAP_ID_LEN);
	r = n < 0 ? -errno : n == SNAP_ID_LEN ? 0 : -EINVAL;
	close(fd);
	return r;
}

int standby_valid(const char *sbdir)
{
	uint8_t id[SNAP_ID_LEN], used[SNAP_ID_LEN];
	char dir[PATH_MAX], p[PATH_MAX];
	struct stat st;
	int r;

	if (join(dir, sizeof(dir), sbdir, STANDBY_DIR) || join(p, sizeof(p), dir, SNAP_STATE_FILE))
		return 0;
	if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	r = read_marker(dir, used);
	if (r == -ENOENT)
		return 1;
	/* A marker that cannot be read counts as naming this state: the
	 * safe way round (a sandbox shown dead, never a stale restore). */
	if (r || snap_state_id(dir, id))
		return 0;
	return memcmp(id, used, SNAP_ID_LEN) != 0;
}

int standby_consume(const char *sbdir)
{
	char dir[PATH_MAX], tmp[PATH_MAX], to[PATH_MAX];
	uint8_t id[SNAP_ID_LEN];
	int fd, r;

	if ((r = join(dir, sizeof(dir), sbdir, STANDBY_DIR)) ||
	    (r = join(tmp, sizeof(tmp), dir, STANDBY_CONSUMED ".tmp")) ||
	    (r = join(to, sizeof(to), dir, STANDBY_CONSUMED)))
		return r;
	if (snap_state_id(dir, id)) {
		/* A state whose ID cannot be read (damaged) is taken out of
		 * the way whole: nothing is left that could be restored. */
		if ((r = join(tmp, sizeof(tmp), dir, SNAP_STATE_FILE)) ||
		    (r = join(to, sizeof(to), dir, SNAP_STATE_FILE ".used")))
			return r;
		if (rename(tmp, to) < 0)
			return -errno;
		return snap_fsync_dir(dir);
	}
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, id, SNAP_ID_LEN) != SNAP_ID_LEN)
		r = errno ? -errno : -EIO;
	else if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	if (!r && rename(tmp, to) < 0)
		r = -errno;
	if (r) {
		unlink(tmp);
		return r;
	}
	return snap_fsync_dir(dir);
}

enum standby_kind standby_plan(const char *sbdir, int tracking, const char *snap_dir,
			       const uint8_t snap_id[SNAP_ID_LEN], const char **why)
{
	char dir[PATH_MAX], real[PATH_MAX], p[PATH_MAX];
	uint8_t id[SNAP_ID_LEN];
	struct stat st;

	*why = NULL;
	if (!tracking) {
		*why = "dirty-page tracking is off";
		return STANDBY_FULL;
	}
	if (!snap_dir || !snap_dir[0] || snapid_is_zero(snap_id)) {
		*why = "no base: the first suspend of this run";
		return STANDBY_FULL;
	}
	if (join(dir, sizeof(dir), sbdir, STANDBY_DIR) || !realpath(dir, real) || strcmp(real, snap_dir)) {
		*why = "this run did not resume from this standby state";
		return STANDBY_FULL;
	}
	if (snap_state_id(dir, id) || memcmp(id, snap_id, SNAP_ID_LEN)) {
		*why = "the standby state changed since this run resumed from it (stale base)";
		return STANDBY_FULL;
	}
	if (join(p, sizeof(p), dir, SNAP_MEMORY_FILE) || lstat(p, &st) < 0 || !S_ISREG(st.st_mode)) {
		*why = "the standby memory file is missing";
		return STANDBY_FULL;
	}
	return STANDBY_DIFF;
}

struct full_write {
	struct vm *vm;
	uint64_t bytes;
};

static int write_full(void *ctx, const char *dir)
{
	struct full_write *f = ctx;

	return vm_snapshot_in_place(f->vm, dir, &f->bytes);
}

/* VMM_TEST_STANDBY_KILL: a real kill -9 at one step of the diff write. */
static int kill_at(void *ctx, enum snap_step step)
{
	if ((int)step == *(const int *)ctx) {
		log_warn("standby: VMM_TEST_STANDBY_KILL: SIGKILL after in-place step %d", (int)step);
		raise(SIGKILL);
	}
	return 0;
}

/* The in-place diff (MAP_PRIVATE analysis in docs/snapshot.md, "Repeated
 * suspends"). 0 once committed; -errno before the commit (nothing of the
 * old state touched); -ESTALE/-EINVAL: the base does not fit after all. */
static int write_diff(struct vm *vm, const char *dir, struct standby_stats *out)
{
	const char *env = getenv("VMM_TEST_STANDBY_KILL");
	int step = env && *env ? atoi(env) : -1;
	struct snap_fault f = { .hook = kill_at, .ctx = &step };
	uint8_t before[SNAP_ID_LEN];
	struct snap_stats st = { 0 };
	int r;

	memcpy(before, vm->snap_id, SNAP_ID_LEN);
	r = snapshot_update_inplace_ex(vm, dir, &st, step >= 0 ? &f : NULL, 1);
	if (r && memcmp(before, vm->snap_id, SNAP_ID_LEN)) {
		/* Committed, a later step failed: the journal holds the
		 * pages and the next open (the resume's) finishes it. The
		 * VM must not run on past a committed state. */
		log_warn("standby: %s: committed; finishing it failed (%s): the resume will",
			 dir, strerror(-r));
		r = 0;
	}
	if (r)
		return r;
	out->diff = 1;
	out->pages = st.pages;
	out->bytes = st.mem_written + st.pages * 4096; /* the journal, then the pages in place */
	return 0;
}

/* ---- a diff on the snapshot the RAM maps ---- */

/* sbdir/standby.base-ID for the mapped snapshot's ID. */
static int base_name(const struct vm *vm, const char *sbdir, char *out, size_t len)
{
	char name[sizeof(STANDBY_BASE) + 17];
	unsigned i;

	snprintf(name, sizeof(name), STANDBY_BASE);
	for (i = 0; i < 8; i++)
		snprintf(name + sizeof(STANDBY_BASE) - 1 + 2 * i, 3, "%02x", vm->mem_base_id[i]);
	return join(out, len, sbdir, name);
}

/* The mapped snapshot's state and memory files, hard-linked into
 * sbdir/standby.base-ID (made once: a sandbox woken from a diff standby
 * maps that folder itself). Links cost no space and keep the files when
 * the snapshot is moved or removed; it is never changed in place (only a
 * standby state is, and a standby state is never a clone's source).
 * out: the folder's real path. 0 or -errno (-EXDEV: not one file system). */
static int base_links(const struct vm *vm, const char *sbdir, char *out)
{
	static const char *const files[] = { SNAP_STATE_FILE, SNAP_MEMORY_FILE };
	char base[PATH_MAX], tmp[PATH_MAX + 8], from[PATH_MAX], to[PATH_MAX + 16];
	uint8_t id[SNAP_ID_LEN];
	unsigned i;
	int r;

	if ((r = base_name(vm, sbdir, base, sizeof(base))))
		return r;
	if (snap_state_id(base, id) == 0 && !memcmp(id, vm->mem_base_id, SNAP_ID_LEN))
		return realpath(base, out) ? 0 : -errno;
	remove_flat(base); /* a damaged one */
	snprintf(tmp, sizeof(tmp), "%s.new", base);
	remove_flat(tmp);
	if (mkdir(tmp, 0700) < 0)
		return -errno;
	for (i = 0; i < 2; i++) {
		if ((r = join(from, sizeof(from), vm->mem_base_dir, files[i])))
			goto fail;
		snprintf(to, sizeof(to), "%s/%s", tmp, files[i]);
		if (link(from, to) < 0) {
			r = -errno;
			goto fail;
		}
	}
	/* the files linked are the ones the RAM maps: same ID */
	if (snap_state_id(tmp, id) || memcmp(id, vm->mem_base_id, SNAP_ID_LEN)) {
		r = -ESTALE;
		goto fail;
	}
	if ((r = snap_fsync_dir(tmp)))
		goto fail;
	if (rename(tmp, base) < 0) {
		r = -errno;
		goto fail;
	}
	(void)snap_fsync_dir(sbdir);
	return realpath(base, out) ? 0 : -errno;
fail:
	remove_flat(tmp);
	return r;
}

/* After a commit: the base folders the committed state does not name. */
static void drop_bases(const char *sbdir, const char *keep)
{
	DIR *d = opendir(sbdir);
	struct dirent *e;
	char p[PATH_MAX], real[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, STANDBY_BASE, sizeof(STANDBY_BASE) - 1) &&
		    !join(p, sizeof(p), sbdir, e->d_name) &&
		    (!keep || !realpath(p, real) || strcmp(real, keep)))
			remove_flat(p);
	closedir(d);
}

struct mapped_write {
	struct vm *vm;
	const char *base;
	struct snap_stats st;
};

static int write_mapped(void *ctx, const char *dir)
{
	struct mapped_write *m = ctx;
	struct snap_opts o = { .mapped_diff = 1, .disks_in_place = 1, .base_path = m->base };

	return vm_snapshot_ex(m->vm, dir, &o, &m->st);
}

/* A clone's suspend: 1 if it wrote the diff on its mapped snapshot, 0 if
 * that does not apply here (*why says why: the full write follows), or
 * -errno if writing failed (the sandbox runs on). */
static int suspend_mapped(struct vm *vm, struct standby_stats *out)
{
	char own[PATH_MAX], real[PATH_MAX], base[PATH_MAX];
	struct mapped_write m = { .vm = vm, .base = base };
	struct standby_writer w = { .write = write_mapped, .ctx = &m, .crash_at = -1 };
	int r;

	if (!vm->mem_base_dir[0])
		return 0; /* booted, or restored through a page-fault handler */
	if (!join(own, sizeof(own), vm->cfg.standby_dir, STANDBY_DIR) && realpath(own, real) &&
	    !strcmp(real, vm->mem_base_dir))
		return 0; /* it maps its own full standby state: the in-place diff */
	if ((r = base_links(vm, vm->cfg.standby_dir, base))) {
		out->full_why = r == -EXDEV ? "the snapshot it came from is on another file system"
					    : "its snapshot could not be linked into the folder";
		log_info("standby: no diff on %s: %s", vm->mem_base_dir, strerror(-r));
		return 0;
	}
	if ((r = standby_commit(vm->cfg.standby_dir, &w)))
		return r;
	drop_bases(vm->cfg.standby_dir, base);
	out->diff = 1;
	out->pages = m.st.pages;
	out->bytes = m.st.mem_written;
	return 1;
}

int standby_suspend(struct vm *vm, struct standby_stats *out, char *why, size_t why_len)
{
	struct full_write ctx = { .vm = vm };
	struct standby_writer w = { .write = write_full, .ctx = &ctx, .crash_at = -1 };
	struct standby_stats none = { 0 };
	int was_paused = vm->paused, full, r;
	const char *plan_why = NULL;
	uint64_t t0 = log_now_ns();
	char dir[PATH_MAX];

	if (!out)
		out = &none;
	memset(out, 0, sizeof(*out));
	if (!vm->cfg.standby_dir) {
		snprintf(why, why_len, "this sandbox cannot go on standby (only a detached, unjailed "
				       "sandbox of the state directory can)");
		return -ENOTSUP;
	}
	if ((r = vm_pause(vm))) {
		snprintf(why, why_len, "%s", r == -ETIMEDOUT ? "a vCPU did not stop within 10 s"
							      : "the VM is stopping");
		return r;
	}
	/* A clone: the pages that differ from the snapshot it maps. */
	if ((r = suspend_mapped(vm, out)) < 0) {
		snprintf(why, why_len, "writing the state to %s/" STANDBY_DIR " failed: %s (the sandbox "
			 "runs on; nothing was left behind)", vm->cfg.standby_dir, strerror(-r));
		goto fail;
	}
	if (r > 0)
		goto done;
	/* The second and later suspends of a resumed sandbox: only the pages
	 * dirtied since its resume, into standby/ in place. */
	full = standby_plan(vm->cfg.standby_dir, vm->gm.dirty.w != NULL, vm->snap_dir, vm->snap_id,
			    &plan_why) == STANDBY_FULL;
	if (!out->full_why)
		out->full_why = plan_why; /* else why the clone's diff was not taken */
	if (!full) {
		if (!(r = join(dir, sizeof(dir), vm->cfg.standby_dir, STANDBY_DIR)))
			r = write_diff(vm, dir, out);
		if (r == -ESTALE || r == -EINVAL) {
			/* Refused before anything was written: the full write. */
			out->full_why = "the standby state does not fit an in-place update";
			full = 1;
		} else if (r) {
			snprintf(why, why_len, "writing the dirty pages into %s/" STANDBY_DIR " failed: %s "
				 "(the sandbox runs on; the state there is as it was)", vm->cfg.standby_dir,
				 strerror(-r));
			goto fail;
		}
	}
	if (full) {
		if ((r = standby_commit(vm->cfg.standby_dir, &w))) {
			snprintf(why, why_len, "writing the state to %s/" STANDBY_DIR " failed: %s (the sandbox "
				 "runs on; nothing was left behind)", vm->cfg.standby_dir, strerror(-r));
			goto fail;
		}
		out->bytes = ctx.bytes;
		drop_bases(vm->cfg.standby_dir, NULL);
	}
done:
	out->ms = (log_now_ns() - t0) / 1000000;
	vm_request_exit(vm, VM_EXIT_STANDBY, "on standby (state in %s/" STANDBY_DIR ")", vm->cfg.standby_dir);
	return 0;
fail:
	if (!was_paused)
		vm_resume(vm);
	return r;
}
