/* Snapshot and restore of a whole VM (docs/snapshot.md).
 *
 * A snapshot is a directory:
 *   state    the state file (snapfmt.h): config, host, memory layout, VM
 *            (irqchip, PIT, kvmclock), every vCPU, every device
 *   memory   guest RAM, sparse (all-zero pages are holes); restore maps it
 *            MAP_PRIVATE: pages load lazily and clones share the page cache
 *   diskN    a copy of writable disk N as it was at the pause (reflink
 *            where the filesystem can, sparse copy otherwise)
 * It is written to DIR.partial-PID and renamed to DIR only once complete
 * and fsynced, so a failure (a full disk) never leaves a directory that
 * looks like a snapshot. */
#ifndef VMM_SNAPSHOT_H
#define VMM_SNAPSHOT_H

#include <limits.h>
#include <stdint.h>

#include "vmm/base/snapfmt_diff.h"
#include "vmm/base/snapfmt.h"
#include "vmm/vm_snapshot_mmds.h"
#include "vmm/vm.h"

#define SNAP_STATE_FILE "state"
#define SNAP_MEMORY_FILE "memory"

struct snap_disk {
	char path[PATH_MAX];  /* the disk's host path at snapshot time */
	char file[32];        /* its copy in the snapshot directory, "" if read-only */
	uint8_t ro, root;
	char id[24];
	uint64_t size;        /* bytes */
	int64_t mtime_ns;     /* read-only disks: must not have changed since */
};

struct snap_fs {
	char tag[VIRTIO_FS_TAG_LEN];
	char path[PATH_MAX];  /* the shared directory (clones share it, never copied) */
	uint8_t ro, cache;
	char at[128];         /* where guest-init mounted it ("" : /mnt/TAG, or
				 a snapshot from before this was recorded) */
};

/* The config part of a snapshot: what a restore needs to rebuild the VM. */
/* A network interface: its TAP at snapshot time (a clone is usually given
 * another) and what the guest has already seen of it. */
struct snap_net {
	char tap[16];
	uint8_t mac[6];
	uint8_t no_offload;
	uint8_t host_mac[6]; /* the TAP's own MAC, in the guest's neighbour cache */
};

struct snap_conf {
	uint64_t mem_bytes;
	uint32_t cpus;
	uint32_t tmpl;
	uint32_t ring0;
	char cmdline[4096];
	char token[128];
	uint32_t nr_disks;
	struct snap_disk disks[VM_MAX_DISKS];
	uint32_t has_vsock;
	uint64_t cid;
	char uds[PATH_MAX]; /* vsock_options.uds: any length */
	uint32_t nr_nets;
	struct snap_net nets[VM_MAX_NETS];
	uint32_t nr_fs;
	struct snap_fs fs[VM_MAX_FS];
	/* After the shared drives, absent from older snapshots (none then). */
	uint32_t has_entropy;
	struct rl_limits entropy_rl;
	uint32_t has_balloon;
	struct balloon_options balloon;
	/* Its own section (snapmmds.h), absent without an MMDS. */
	struct snap_mmds mmds;
	/* host */
	char vendor[13];
	uint32_t cpu_sig;     /* CPUID.1:EAX (family, model, stepping) */
	uint32_t tsc_khz;
};

struct snapshot {
	char dir[PATH_MAX];
	uint8_t *file;        /* the state file */
	size_t len;
	struct srd rd;        /* positioned after the config sections */
	struct snap_conf conf;
	struct snap_ident ident; /* ID, kind; a diff's base and page bitmap */
};

/* Opens DIR: reads and checks the state file (magic, version, length,
 * checksum), parses the config, checks the memory file's size. 0, or
 * -errno after one clear log line; nothing of the guest has run. */
int snapshot_open(struct snapshot *s, const char *dir) __attribute__((warn_unused_result));
/* The same for a diff's base: nothing in DIR is changed (no recovery of an
 * interrupted update), since a tampered diff may name any directory. */
int snapshot_open_base(struct snapshot *s, const char *dir) __attribute__((warn_unused_result));
/* The head of a state file body: config, host, identity, MMDS. The save
 * side of snap_build_state and the parse side of snapshot_open, without a
 * VM (unit tests). Load: 0, or -EINVAL with r->why; *ident is the caller's
 * to snapid_free. */
void snap_head_save(struct sbuf *b, struct snap_conf *c, const struct snap_ident *ident);
int snap_head_load(struct srd *r, struct snap_conf *c, struct snap_ident *ident) __attribute__((warn_unused_result));
void snapshot_close(struct snapshot *s);

/* Writes a snapshot of a paused VM to DIR (which must not exist).
 * *bytes gets the memory file's allocated size. 0 or -errno (logged). */
int vm_snapshot(struct vm *vm, const char *dir, uint64_t *mem_bytes_written)
	__attribute__((warn_unused_result));

struct snap_opts {
	int diff;              /* only the pages dirtied since the VM's last
				  snapshot or restore, layered on that one */
	const char *final_dir; /* where DIR will be renamed to by the caller
				  (the Firecracker API writes beside), or NULL */
	int disks_in_place;    /* writable disks recorded by path, not copied
				  (vm_snapshot_in_place) */
	int mapped_diff;       /* a diff on vm->mem_base_dir (the snapshot guest
				  RAM maps): the pages that differ from its file
				  (gm_private_pages), no tracking needed */
	const char *base_path; /* mapped_diff: record the base as found here (a
				  folder of links to it), or NULL */
};
struct snap_stats {
	uint64_t mem_alloc;    /* the memory file's allocated bytes */
	uint64_t mem_written;  /* bytes of guest RAM written (pwrite) */
	uint64_t pages;        /* pages in the diff (dirty pages), or all */
};
int vm_snapshot_ex(struct vm *vm, const char *dir, const struct snap_opts *o, struct snap_stats *st)
	__attribute__((warn_unused_result));

/* ---- diff snapshots and in-place updates (snapshot_diff.c) ---- */

/* Turns dirty tracking on for a VM being built (vm_create, before the
 * memory slots): the bitmap, and KVM's manual dirty-log protection where
 * the kernel has it. 0 or -errno. */
int vm_track_dirty(struct vm *vm) __attribute__((warn_unused_result));
/* ORs KVM's dirty log of every slot into vm->gm.dirty (VM paused). */
int vm_dirty_harvest(struct vm *vm) __attribute__((warn_unused_result));
/* Maps a snapshot's guest memory for a restore: a full snapshot's file
 * MAP_PRIVATE; for a diff, its chain down to a full snapshot (each base's
 * ID checked), that one mapped and every diff's pages read over it,
 * oldest first. base_dir/base_id get the full snapshot mapped (the
 * chain's bottom: vm->mem_base_dir). 0 or -errno, logged. */
int snap_map_memory(struct gm *gm, const struct snapshot *s, char base_dir[PATH_MAX], uint8_t base_id[SNAP_ID_LEN])
	__attribute__((warn_unused_result));
/* Flattens DIFF onto its base into a full snapshot at OUT (which must not
 * exist), or in place when OUT is NULL or DIFF. BASE, if not NULL, is
 * where DIFF's base is now (its ID must be the one DIFF recorded); else
 * the recorded path. The result keeps DIFF's ID: diffs layered on DIFF
 * still apply to it. 0 or -errno, logged. */
int snapshot_merge(const char *base, const char *diff, const char *out) __attribute__((warn_unused_result));
/* Writes the pages dirtied since the VM's last snapshot or restore into
 * DIR, that snapshot (a full one), in place: journal, new state, commit,
 * memory (snapdiff.h). Writable disks are re-copied beside their old copy
 * and renamed at the commit. The VM must be paused and tracking on. 0 or
 * -errno (logged); -ESTALE if DIR is not the snapshot the bitmap counts
 * from. */
int snapshot_update_inplace(struct vm *vm, const char *dir, struct snap_stats *st)
	__attribute__((warn_unused_result));
int snapshot_update_inplace_f(struct vm *vm, const char *dir, struct snap_stats *st,
			      const struct snap_fault *f) __attribute__((warn_unused_result));
/* With `disks_in_place`: the standby's repeated suspends (vmm/vm_standby.h).
 * Writable disks are not copied but fdatasync'd where they are and
 * recorded by path, as vm_snapshot_in_place does; only the dirty pages
 * (journal, then in place) and the state change. A failure after the
 * commit returns -errno with vm->snap_id already the new ID: the update
 * stands and the next open finishes it. */
int snapshot_update_inplace_ex(struct vm *vm, const char *dir, struct snap_stats *st,
			       const struct snap_fault *f, int disks_in_place) __attribute__((warn_unused_result));

/* The same with every writable disk left in place, fdatasync'd, recorded
 * by path with no copy (its `file` empty): a sandbox's own standby state
 * (vmm/vm_standby.h), restored only in place. */
int vm_snapshot_in_place(struct vm *vm, const char *dir, uint64_t *mem_written)
	__attribute__((warn_unused_result));

/* Inside vm_create, for cfg->restore: applies the VM, vCPU and device
 * state on top of the freshly built VM, every value checked first. */
int vm_restore_state(struct vm *vm, struct snapshot *s) __attribute__((warn_unused_result));
/* The TR descriptor type a restore writes back for a vCPU whose snapshot
 * says `saved`, on a host whose CPU is `vendor`: a busy 64-bit TSS as the
 * vendor's CPU keeps it, every other type (a never-run vCPU's reset TR)
 * unchanged. */
uint8_t snapshot_tr_type(uint8_t saved, const char *vendor);

/* Copies a file for a clone: FICLONE (reflink) if the filesystem can,
 * else a sparse copy (holes stay holes); fsynced. dst must not exist. */
int snap_copy_file(const char *src, const char *dst) __attribute__((warn_unused_result));
/* The same from an open descriptor (a disk device's). */
int snap_copy_fd(int in, const char *dst) __attribute__((warn_unused_result));

#endif
