/* Standby: a sandbox suspended in place (docs/snapshot.md, "Standby").
 *
 * The sandbox's folder holds its saved state in `standby/` (a snapshot
 * directory whose writable disks stay where they are: no copies). The
 * write and commit order keeps a crash at any point from leaving a state
 * that restores wrong:
 *   1. leftovers of an earlier crash (`standby.new`) are removed;
 *   2. the whole snapshot is written to `standby.new` (vm_snapshot's own
 *      order: a partial directory, every file fsynced, renamed; the
 *      writable disks fdatasync'd in place, the VM paused so they no
 *      longer change);
 *   3. commit: `standby.new` and `standby` swap atomically
 *      (renameat2 RENAME_EXCHANGE; a plain rename the first time), the
 *      folder fsynced;
 *   4. the old state, now `standby.new`, is removed.
 * A state is valid while `standby/state` exists. A resume consumes it
 * (state -> state.used, fsynced) before the guest runs again: from then on
 * the disks change, and that state must never be restored again. */
#ifndef VMM_STANDBY_H
#define VMM_STANDBY_H

#include <stddef.h>
#include <stdint.h>

#define STANDBY_DIR "standby"
#define STANDBY_NEW "standby.new"

enum standby_step {
	STANDBY_STEP_CLEAN,   /* before 1 */
	STANDBY_STEP_WRITE,   /* before 2 */
	STANDBY_STEP_COMMIT,  /* before 3 */
	STANDBY_STEP_DROP,    /* before 4 */
	STANDBY_STEP_DONE,
};

struct standby_writer {
	/* Writes a complete snapshot to `dir`, which does not exist. 0 or
	 * -errno (nothing left at dir on failure). */
	int (*write)(void *ctx, const char *dir);
	void *ctx;
	/* Tests: stop before this step as if the process were killed there
	 * (nothing cleaned up); -1 in real use. */
	int crash_at;
};

/* Steps 1-4 for the folder `sbdir`. 0 once committed; -errno before the
 * commit (the previous state, if any, untouched); -EINTR for crash_at. */
int standby_commit(const char *sbdir, const struct standby_writer *w) __attribute__((warn_unused_result));
/* 1 if sbdir holds a state that can be restored. */
int standby_valid(const char *sbdir);
/* A resume takes the state: state -> state.used, fsynced. 0 or -errno. */
int standby_consume(const char *sbdir) __attribute__((warn_unused_result));

struct vm;
/* `vmm suspend` and auto-standby, on vm_run's thread: pauses the VM,
 * writes and commits its state into vm->cfg.standby_dir, and asks vm_run
 * to exit (VM_EXIT_STANDBY). On failure the VM runs on and `why` says
 * what went wrong. *bytes: bytes the memory file holds on disk; *ms: how
 * long the guest was paused. 0 or -errno. */
int standby_suspend(struct vm *vm, uint64_t *bytes, uint64_t *ms, char *why, size_t why_len);

#endif
