/* Standby: suspend in place, the write and commit order (standby.h). */
#define _GNU_SOURCE
#include "standby.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "snapshot.h"
#include "snapfmt.h"
#include "vm.h"

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

int standby_valid(const char *sbdir)
{
	char p[PATH_MAX];
	struct stat st;

	if (snprintf(p, sizeof(p), "%s/" STANDBY_DIR "/" SNAP_STATE_FILE, sbdir) >= (int)sizeof(p))
		return 0;
	return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int standby_consume(const char *sbdir)
{
	char from[PATH_MAX], to[PATH_MAX], dir[PATH_MAX];

	if (snprintf(dir, sizeof(dir), "%s/" STANDBY_DIR, sbdir) >= (int)sizeof(dir) ||
	    join(from, sizeof(from), dir, SNAP_STATE_FILE) || join(to, sizeof(to), dir, SNAP_STATE_FILE ".used"))
		return -ENAMETOOLONG;
	if (rename(from, to) < 0)
		return -errno;
	return snap_fsync_dir(dir);
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

int standby_suspend(struct vm *vm, uint64_t *bytes, uint64_t *ms, char *why, size_t why_len)
{
	struct full_write ctx = { .vm = vm };
	struct standby_writer w = { .write = write_full, .ctx = &ctx, .crash_at = -1 };
	int was_paused = vm->paused, r;
	uint64_t t0 = log_now_ns();

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
	/* ---- WHERE THE IN-PLACE DIFF WRITE PLUGS IN ----
	 * Today every suspend writes the whole state (memory, sparse) to
	 * standby.new and swaps it in. With dirty-page tracking (vmm/gm.c),
	 * a second suspend will instead write only the pages dirtied since
	 * the last one into standby/memory in place, fsync it, then commit a
	 * new state file atomically; it replaces this standby_commit call.
	 * The contract stays: nothing committed until every byte is on disk,
	 * and on failure the VM runs on. */
	r = standby_commit(vm->cfg.standby_dir, &w);
	if (r) {
		snprintf(why, why_len, "writing the state to %s/" STANDBY_DIR " failed: %s (the sandbox "
			 "runs on; nothing was left behind)", vm->cfg.standby_dir, strerror(-r));
		if (!was_paused)
			vm_resume(vm);
		return r;
	}
	if (bytes)
		*bytes = ctx.bytes;
	if (ms)
		*ms = (log_now_ns() - t0) / 1000000;
	vm_request_exit(vm, VM_EXIT_STANDBY, "on standby (state in %s/" STANDBY_DIR ")", vm->cfg.standby_dir);
	return 0;
}
