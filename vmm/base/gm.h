/* Guest memory. The only module that turns a guest-physical range into a
 * host pointer: every caller passes (gpa, len) and gets NULL unless the whole
 * range lies inside one RAM region (checked without overflow).
 *
 * Backing: one memfd (MAP_SHARED, so device threads and, later, snapshot
 * dumps see the same pages), a snapshot's memory file mapped MAP_PRIVATE
 * (lazy, copy-on-write; clones share the page cache), or anonymous private
 * memory that a page-fault handler fills (vmm/base/uffd.h). */
#ifndef VMM_GM_H
#define VMM_GM_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/base/dirty.h"

#define GM_MAX_REGIONS 4
#define GM_PAGE_SIZE 4096ull

/* x86 layout: RAM from 0 up to the 32-bit MMIO gap, the rest above 4 GiB. */
#define GM_MMIO_GAP_START 0xC0000000ull /* 3 GiB: virtio-mmio, IOAPIC, LAPIC */
#define GM_MMIO_GAP_END 0x100000000ull  /* 4 GiB */

struct gm_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t file_off; /* offset in the backing file */
	uint8_t *host;
};

struct gm {
	int fd;
	uint8_t *map;      /* one mapping of the whole backing file */
	uint64_t total;    /* bytes of RAM = size of the backing file */
	int private_map;   /* MAP_PRIVATE: a snapshot's memory file, or anonymous */
	unsigned nr;
	struct gm_region r[GM_MAX_REGIONS];
	/* Pages written since the last snapshot, by file offset (dirty.h);
	 * off (w NULL) unless gm_track_dirty was called. */
	struct dirty dirty;
};

/* Region layout for `ram` bytes of x86 RAM. Returns the number of regions
 * written to `out` (1 or 2), or -EINVAL for a size that is 0, not a page
 * multiple, or would end past the 52-bit physical address space. */
int gm_x86_layout(uint64_t ram, struct gm_region out[GM_MAX_REGIONS]);

/* Creates anonymous memfd-backed memory with the given regions (gpa, size;
 * file_off and host are filled in). Regions must be page-aligned, sorted
 * and not overlap. Returns 0 or -errno. */
int gm_create(struct gm *gm, const struct gm_region *regions, unsigned nr)
	__attribute__((warn_unused_result));
int gm_create_x86(struct gm *gm, uint64_t ram)
	__attribute__((warn_unused_result));
/* Maps a memory file written by gm_dump() back, MAP_PRIVATE. */
int gm_open_file(struct gm *gm, const char *path, const struct gm_region *regions,
		 unsigned nr) __attribute__((warn_unused_result));
/* Anonymous private memory with the given regions, nothing populated and
 * no backing file (fd -1): for a page-fault handler to fill (vmm/base/uffd.h). */
int gm_create_anon(struct gm *gm, const struct gm_region *regions, unsigned nr)
	__attribute__((warn_unused_result));
void gm_destroy(struct gm *gm);
/* Copies len bytes of `fd` from offset `off` into guest RAM at [gpa,
 * gpa+len), inside the kernel: sendfile into the memfd (gm_create), so no
 * page of the mapping faults and nothing is copied through user space
 * (a vmlinux's 11.5 MB: most of a cold start's `load`). The file is read,
 * never mapped: replacing or rewriting it later changes no running guest.
 * Moves the memfd's file offset: before any vCPU or device thread runs.
 * 0, -EINVAL (not RAM), -EOPNOTSUPP (not a memfd-backed gm: the caller
 * reads with pread), -EIO (the file ended first) or -errno from sendfile
 * (-EINVAL where the kernel cannot send from this file: pread then). */
int gm_load_file(const struct gm *gm, uint64_t gpa, int fd, uint64_t off, uint64_t len)
	__attribute__((warn_unused_result));
/* The pages of a file mapping (gm_open_file) that no longer hold the
 * file's content: written since the mapping was made, by the guest, KVM
 * or the VMM (each write to a MAP_PRIVATE page copies it into an anonymous
 * page), read from /proc/self/pagemap (present or swapped, and not a file
 * page). Every other page reads as the file. *out (dirty.h, one bit per
 * page by file offset) is initialised here. No dirty-page tracking is
 * needed. 0 or -errno; -EINVAL for memory that is not a file mapping. */
int gm_private_pages(const struct gm *gm, struct dirty *out) __attribute__((warn_unused_result));

/* Host pointer for [gpa, gpa+len), or NULL if any byte of it is not RAM.
 * A pointer the caller writes through must be marked (gm_ptr_w or
 * gm_mark_host) once tracking is on: KVM's dirty log sees only vCPU
 * writes, never a device thread's. */
void *gm_ptr(const struct gm *gm, uint64_t gpa, uint64_t len);
/* gm_ptr for writing: the range is marked dirty. */
void *gm_ptr_w(const struct gm *gm, uint64_t gpa, uint64_t len);

/* Dirty tracking (docs/snapshot.md): allocates the bitmap; from now on
 * gm_write, gm_ptr_w and gm_mark* mark the pages they touch, gm_discard*
 * too on shared memory (a private mapping's discarded page reads its file
 * again).
 * 0 or -errno. Before any device thread runs. */
int gm_track_dirty(struct gm *gm) __attribute__((warn_unused_result));
/* Marks a host range inside guest RAM (a writable chain buffer, a used
 * ring) dirty; a range outside RAM is ignored. Any thread, lock-free. */
static inline void gm_mark_host(const struct gm *gm, const void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p, base = (uintptr_t)gm->map;

	if (gm->dirty.w && a >= base && a - base < gm->total && len <= gm->total - (a - base))
		dirty_mark(&gm->dirty, a - base, len);
}
/* Copies; 0 or -EFAULT. The range must lie in one region. */
int gm_read(const struct gm *gm, uint64_t gpa, void *dst, uint64_t len)
	__attribute__((warn_unused_result));
int gm_write(const struct gm *gm, uint64_t gpa, const void *src, uint64_t len)
	__attribute__((warn_unused_result));
/* Gives the pages of [gpa, gpa+len) back to the host (virtio-balloon):
 * both page-aligned, the whole range in one RAM region (checked as
 * gm_ptr does). The shared memfd's pages are freed (MADV_REMOVE: a
 * MADV_DONTNEED would only unmap them, the memfd keeps them); a snapshot's
 * private mapping drops its copies (MADV_DONTNEED). The guest reads the
 * range as zeros (memfd) or as the snapshot had it (private) afterwards;
 * anonymous memory a page-fault handler serves (gm_create_anon, vmm/base/uffd.h)
 * reads as the handler decides: it gets UFFD_EVENT_REMOVE first.
 * 0, -EFAULT (not RAM), -EINVAL (unaligned) or -errno from madvise. */
int gm_discard(const struct gm *gm, uint64_t gpa, uint64_t len) __attribute__((warn_unused_result));
/* The same for a host range inside guest RAM (a validated chain buffer):
 * only the whole pages inside it are given back. 0, -EFAULT, -errno. */
int gm_discard_host(const struct gm *gm, void *p, uint64_t len) __attribute__((warn_unused_result));
/* Bytes of RAM below 4 GiB / the end of the low region. */
uint64_t gm_low_end(const struct gm *gm);

/* Writes all RAM to `fd` from offset 0, leaving all-zero pages as holes.
 * Returns 0 or -errno (a full disk is -ENOSPC, the file is then incomplete). */
int gm_dump(const struct gm *gm, int fd) __attribute__((warn_unused_result));

#endif
