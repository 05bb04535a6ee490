/* Dirty-page bitmap (docs/snapshot.md, "Diff snapshots").
 *
 * One bit per 4 KiB page of guest RAM, indexed by the page's offset in the
 * memory file (gm's backing file: regions laid end to end), so a bit names
 * the same page in the VM, in a full snapshot's memory file and in a diff.
 *
 * Two writers set bits: the snapshot code, which ORs in KVM's dirty log
 * (the pages vCPUs wrote), and device threads, which write guest RAM from
 * userspace where KVM does not see it (gm marks every range it hands out
 * for writing). Setting is an atomic OR on a 64-bit word: cheap, lock-free,
 * safe from any thread. Reading and clearing happen while the VM is paused
 * (vCPUs and device loops parked), except dirty_take, which exchanges each
 * word with 0 and so loses no concurrent set. */
#ifndef VMM_DIRTY_H
#define VMM_DIRTY_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DIRTY_PAGE_SHIFT 12u

struct dirty {
	uint64_t *w; /* NULL: tracking off (every call is a no-op); only __atomic builtins touch it */
	uint64_t pages;
	uint64_t words;
};

/* Allocates a clear bitmap for `pages` pages. 0, -EINVAL or -ENOMEM.
 * (Inline, as dirty_mark: gm.c links without dirty.c.) */
static inline __attribute__((warn_unused_result)) int dirty_init(struct dirty *d, uint64_t pages)
{
	memset(d, 0, sizeof(*d));
	if (pages == 0)
		return -EINVAL;
	d->w = calloc((pages + 63) / 64, sizeof(*d->w));
	if (!d->w)
		return -ENOMEM;
	d->words = (pages + 63) / 64;
	d->pages = pages;
	return 0;
}

static inline void dirty_free(struct dirty *d)
{
	free((void *)d->w);
	memset(d, 0, sizeof(*d));
}

/* Marks the pages [off, off+len) of the memory file touches (byte offsets;
 * len 0 marks nothing). Ranges past the end are clipped: callers pass
 * ranges gm already checked. Any thread. */
static inline void dirty_mark(const struct dirty *d, uint64_t off, uint64_t len)
{
	uint64_t p, last;

	if (!d->w || len == 0)
		return;
	p = off >> DIRTY_PAGE_SHIFT;
	last = (off + len - 1) >> DIRTY_PAGE_SHIFT;
	if (last >= d->pages)
		last = d->pages - 1;
	while (p <= last) {
		uint64_t bit = p & 63, n = last - p + 1, mask;

		mask = (n >= 64 - bit) ? ~0ull << bit : ((1ull << n) - 1) << bit;
		/* Relaxed: the pause that precedes every reader (vm_pause's
		 * mutex and evloop_pause) orders these before the read. */
		__atomic_fetch_or(&d->w[p >> 6], mask, __ATOMIC_RELAXED);
		p += 64 - bit;
	}
}

static inline int dirty_test(const struct dirty *d, uint64_t page)
{
	return d->w && page < d->pages &&
	       (__atomic_load_n(&d->w[page >> 6], __ATOMIC_RELAXED) >> (page & 63)) & 1;
}

/* ORs `nbits` bits of `src` (64-bit words, bit i = page first+i; KVM's
 * dirty log has this layout on x86-64) into the bitmap. */
void dirty_or_bits(struct dirty *d, uint64_t first, const uint64_t *src, uint64_t nbits);
/* ORs another bitmap of the same size in (a failed snapshot gives back
 * what it took). -EINVAL if the sizes differ. */
int dirty_merge(struct dirty *dst, const struct dirty *src);
/* Moves every set bit into `out` (same size, cleared first) and clears the
 * bitmap, word by word with an atomic exchange: a concurrent mark lands
 * either in `out` or in the bitmap, never nowhere. */
int dirty_take(struct dirty *d, struct dirty *out);
void dirty_clear(struct dirty *d);
/* Number of set bits. */
uint64_t dirty_count(const struct dirty *d);
/* Next set bit at or after `from`, or d->pages if none. */
uint64_t dirty_next(const struct dirty *d, uint64_t from);

/* KVM's dirty log for one memory slot (`slot` of `npages` pages, first
 * page `first` in the bitmap), ORed in. With `manual` (the VM enabled
 * KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2) the harvested bits are cleared and
 * the pages write-protected again with KVM_CLEAR_DIRTY_LOG; without it,
 * KVM_GET_DIRTY_LOG already did both. 0 or -errno. */
int dirty_kvm_harvest(struct dirty *d, int vm_fd, unsigned slot, uint64_t first, uint64_t npages,
		      int manual) __attribute__((warn_unused_result));

#endif
