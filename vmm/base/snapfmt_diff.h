/* Diff snapshots and in-place snapshot updates: the file formats and the
 * crash-safe commit, with no KVM and no struct vm (unit-tested against fake
 * memory). The VM-level glue is in snapshot_diff.c; docs/snapshot.md
 * ("Diff snapshots", "Updating a snapshot in place") describes both.
 *
 * Identity. Every state file this vmm writes carries an `SNID` section
 * right after `HOST`: a random 16-byte ID (new for every snapshot and for
 * every in-place update) and the kind. A diff's section adds its base's
 * directory and ID and the page bitmap: which pages its memory file holds.
 *
 * A diff's memory file is laid out as a full one (same size, page N at
 * offset N * 4096, as Firecracker's Diff memory files are): the pages the
 * bitmap lists are written, everything else is a hole. The bitmap, not the
 * holes, is authoritative: a dirtied page that is all zeros is written
 * too, and a filesystem that fills holes changes nothing.
 *
 * In-place update (the standby's repeated suspends): the new pages go to a
 * redo journal first, then the new state file commits, then the pages are
 * copied into the memory file and the journal removed. snap_recover, run
 * by every open, finishes or discards a journal that a crash left. */
#ifndef VMM_SNAPDIFF_H
#define VMM_SNAPDIFF_H

#include <limits.h>
#include <stdint.h>

#include "vmm/base/dirty.h"
#include "vmm/base/snapfmt.h"

#define SNAP_ID_LEN 16
#define SNAP_KIND_FULL 0u
#define SNAP_KIND_DIFF 1u
#define SNAP_MAX_CHAIN 16 /* diffs on diffs, down to the full snapshot */
#define SNAP_JOURNAL_FILE "memory.journal"
#define SNAP_STATE_NEW "state.new"
#define SNAP_TAG_SNID SNAP_TAG('S', 'N', 'I', 'D')

struct snap_ident {
	uint8_t id[SNAP_ID_LEN];  /* all zeros: written before identities existed */
	uint32_t kind;            /* SNAP_KIND_* */
	/* A diff only: */
	char base_dir[PATH_MAX];  /* absolute, as it was when the diff was taken */
	uint8_t base_id[SNAP_ID_LEN];
	struct dirty pages;       /* the pages the memory file holds */
};

int snapid_new(uint8_t id[SNAP_ID_LEN]) __attribute__((warn_unused_result));
int snapid_is_zero(const uint8_t id[SNAP_ID_LEN]);
/* The SNID section (begin, fields, end). */
void snapid_save(struct sbuf *b, const struct snap_ident *i);
/* Reads an SNID section if the reader is at one (else *i is a full
 * snapshot with a zero ID). `pages`: the guest's page count, which a
 * diff's bitmap must have. 0, or -EINVAL with r->why set. */
int snapid_load(struct srd *r, struct snap_ident *i, uint64_t pages) __attribute__((warn_unused_result));
void snapid_free(struct snap_ident *i);
/* The ID in DIR's state file (zeros if it has none). 0 or -errno. */
int snap_state_id(const char *dir, uint8_t id[SNAP_ID_LEN]) __attribute__((warn_unused_result));

/* Writes the pages `d` lists from `mem` (total bytes) to `fd` at their
 * offsets, runs of pages in one pwrite; the file is then `total` bytes,
 * holes elsewhere. *written: bytes written. 0 or -errno. */
int snapmem_write_pages(const uint8_t *mem, uint64_t total, const struct dirty *d, int fd,
			uint64_t *written) __attribute__((warn_unused_result));
/* Reads the pages `d` lists from `fd` into `mem` (the overlay of a diff).
 * 0, -EIO (the file is short) or -errno. */
int snapmem_read_pages(uint8_t *mem, uint64_t total, const struct dirty *d, int fd)
	__attribute__((warn_unused_result));

/* Copies the pages `d` lists from file `src` to file `dst` (flattening a
 * diff onto a copy of its base). 0, -EIO (src short) or -errno. */
int snapmem_copy_pages(int dst, int src, const struct dirty *d) __attribute__((warn_unused_result));
/* A state file body with its SNID section replaced by `i` (appended after
 * HOST's place if it had none). 0 or -errno; `out` is sb_init'ed here. */
int snapid_replace(const uint8_t *body, size_t len, const struct snap_ident *i, struct sbuf *out)
	__attribute__((warn_unused_result));

/* The steps of an in-place commit, for fault injection: the hook runs
 * after each and, if it returns nonzero, the commit stops right there as
 * a crash would (no cleanup) and returns -ECANCELED. */
enum snap_step {
	SNAP_STEP_JOURNAL,       /* journal written and fsynced (+ its directory entry) */
	SNAP_STEP_STATE_NEW,     /* state.new written and fsynced */
	SNAP_STEP_COMMITTED,     /* state.new renamed over state, directory fsynced */
	SNAP_STEP_MEMORY_HALF,   /* half the pages copied into the memory file */
	SNAP_STEP_MEMORY,        /* all pages in the memory file, fsynced; disks renamed */
	SNAP_STEP_DONE,          /* journal removed, directory fsynced */
	SNAP_STEP_COUNT
};
struct snap_fault {
	int (*hook)(void *ctx, enum snap_step step);
	void *ctx;
};

struct snap_inplace {
	const char *dir;             /* an existing snapshot directory */
	const uint8_t *mem;          /* guest RAM as the memory file lays it out */
	uint64_t total;
	const struct dirty *pages;   /* the pages to write */
	const struct sbuf *state;    /* the new state file's body */
	uint8_t new_id[SNAP_ID_LEN]; /* the ID that body carries */
	uint32_t disk_mask;          /* bit N: DIR/diskN.next (written, fsynced) replaces diskN */
	const struct snap_fault *fault; /* NULL in production */
};
/* Commits an in-place update of DIR (order and crash analysis in
 * docs/snapshot.md). *written: bytes written to the journal. 0 or -errno;
 * a failure before the commit point leaves DIR as it was (the journal is
 * removed), one after it is finished by the next snap_recover. */
int snap_inplace_commit(const struct snap_inplace *u, uint64_t *written) __attribute__((warn_unused_result));
/* Finishes or discards what an interrupted commit left in DIR: a journal
 * whose ID is the state file's is applied (idempotent) and removed; any
 * other journal, a state.new and diskN.next files not committed are
 * removed. 0 (also when there was nothing to do) or -errno. */
int snap_recover(const char *dir) __attribute__((warn_unused_result));

#endif
