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
 * A state is valid while `standby/state` exists and `standby/state.consumed`
 * does not name its ID. A resume consumes it (writes that marker, fsynced)
 * before the guest runs again: from then on the disks change, and that
 * state must never be restored again.
 *
 * Why a marker and not a rename of the state file: the second and later
 * suspends of a resumed sandbox update `standby/` in place (only the pages
 * dirtied since the resume: snapshot_update_inplace_ex, snapdiff.h), and
 * that update's base is exactly the consumed state. With the marker the
 * state file stays where the in-place machinery (its open, its journal
 * recovery, which compares the journal's ID with `state`'s) expects it,
 * and the update's commit (state.new renamed over state, a new ID) is by
 * itself what makes the folder valid again: the marker names the old ID,
 * so no second step, and no window, exists between "new state committed"
 * and "new state restorable". A crash before that rename leaves the old,
 * consumed state: nothing restorable (the sandbox is dead, its disks as
 * the guest left them), never the old state on newer disks. The marker
 * holds the state's ID, not its inode: a copied folder keeps it.
 *
 * Which write a suspend does: for a sandbox whose RAM maps another
 * snapshot's memory file (a clone, or one woken from a diff standby), a
 * diff on that snapshot of the pages that differ from its file (found in
 * the mapping, no tracking: gm_private_pages), its base linked into the
 * folder as `standby.base-ID` so that it outlives the snapshot it came
 * from; that needs the folder and the snapshot on one file system. Else
 * (standby_plan) the in-place diff when this run resumed from this very
 * state (dirty tracking on, vm->snap_dir this folder's standby/,
 * vm->snap_id its state's ID); the full write otherwise (the first suspend,
 * tracking off, a base that changed: -ESTALE). */
#ifndef VMM_STANDBY_H
#define VMM_STANDBY_H

#include <stddef.h>
#include <stdint.h>

#define STANDBY_DIR "standby"
#define STANDBY_NEW "standby.new"
#define STANDBY_CONSUMED "state.consumed" /* in standby/: the ID a resume took */
/* "standby.base-ID": links to the state and memory files of the snapshot a
 * clone's RAM maps (its ID's first 8 bytes in hex), the base a diff standby
 * names. */
#define STANDBY_BASE "standby.base-"

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
/* 1 if sbdir holds a state that can be restored: standby/state exists and
 * the consume marker does not name its ID. */
int standby_valid(const char *sbdir);
/* A resume takes the state: its ID into standby/state.consumed (written
 * beside, fsynced, renamed, the directory fsynced). 0 or -errno. */
int standby_consume(const char *sbdir) __attribute__((warn_unused_result));

enum standby_kind {
	STANDBY_FULL, /* the whole state to standby.new, swapped in (standby_commit) */
	STANDBY_DIFF, /* the dirty pages into standby/ in place (snapdiff.h) */
};
/* Decides the write for a suspend into sbdir by a VM whose dirty tracking
 * is on (`tracking`) and whose bitmap counts from snapshot `snap_dir` with
 * ID `snap_id` (vm->snap_dir, vm->snap_id). STANDBY_DIFF only when
 * snap_dir is sbdir/standby (by realpath), its state file's ID is snap_id
 * (non-zero), and its memory file is a regular file; else STANDBY_FULL and
 * *why says why (a static string). No KVM: unit-tested. */
enum standby_kind standby_plan(const char *sbdir, int tracking, const char *snap_dir,
			       const uint8_t snap_id[16], const char **why);

struct standby_stats {
	uint64_t bytes;     /* written for the memory: the full file's allocation,
			     * or the journal plus the pages in place */
	uint64_t pages;     /* a diff: the dirty pages written */
	uint64_t ms;        /* how long the guest was paused */
	int diff;           /* 1: the in-place diff ran; 0: the full write */
	const char *full_why; /* a full write: why not a diff */
};

struct vm;
/* `vmm suspend` and auto-standby, on vm_run's thread: pauses the VM,
 * writes and commits its state into vm->cfg.standby_dir (the diff or the
 * full write, standby_plan), and asks vm_run to exit (VM_EXIT_STANDBY).
 * On failure before the commit the VM runs on and `why` says what went
 * wrong. 0 or -errno.
 * Test hook: with VMM_TEST_STANDBY_KILL=N in the environment, a diff
 * write raises SIGKILL at in-place step N (enum snap_step), as `kill -9`
 * there would (tests/e2e/standby.sh). */
int standby_suspend(struct vm *vm, struct standby_stats *st, char *why, size_t why_len);

#endif
