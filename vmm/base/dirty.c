/* Dirty-page bitmap: see dirty.h. */
#include "vmm/base/dirty.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

void dirty_or_bits(struct dirty *d, uint64_t first, const uint64_t *src, uint64_t nbits)
{
	uint64_t i;

	if (!d->w)
		return;
	for (i = 0; i < (nbits + 63) / 64; i++) {
		uint64_t v = src[i], b;

		if (i * 64 + 64 > nbits && nbits % 64)
			v &= (1ull << (nbits % 64)) - 1;
		if (first % 64 == 0 && (first >> 6) + i < d->words) {
			/* Word-aligned (every slot starts on one): OR it whole. */
			if (v)
				__atomic_fetch_or(&d->w[(first >> 6) + i], v, __ATOMIC_RELAXED);
			continue;
		}
		while (v) {
			b = (uint64_t)__builtin_ctzll(v);
			v &= v - 1;
			dirty_mark(d, (first + i * 64 + b) << DIRTY_PAGE_SHIFT, 1);
		}
	}
}

int dirty_merge(struct dirty *dst, const struct dirty *src)
{
	uint64_t i;

	if (!dst->w || !src->w || dst->pages != src->pages)
		return -EINVAL;
	for (i = 0; i < dst->words; i++) {
		uint64_t v = __atomic_load_n(&src->w[i], __ATOMIC_RELAXED);

		if (v)
			__atomic_fetch_or(&dst->w[i], v, __ATOMIC_RELAXED);
	}
	return 0;
}

int dirty_take(struct dirty *d, struct dirty *out)
{
	uint64_t i;

	if (!d->w || !out->w || d->pages != out->pages)
		return -EINVAL;
	for (i = 0; i < d->words; i++)
		__atomic_store_n(&out->w[i], __atomic_exchange_n(&d->w[i], 0, __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
	return 0;
}

void dirty_clear(struct dirty *d)
{
	uint64_t i;

	for (i = 0; d->w && i < d->words; i++)
		__atomic_store_n(&d->w[i], 0, __ATOMIC_RELAXED);
}

uint64_t dirty_count(const struct dirty *d)
{
	uint64_t i, n = 0;

	for (i = 0; d->w && i < d->words; i++)
		n += (uint64_t)__builtin_popcountll(__atomic_load_n(&d->w[i], __ATOMIC_RELAXED));
	return n;
}

uint64_t dirty_next(const struct dirty *d, uint64_t from)
{
	uint64_t i, v;

	if (!d->w || from >= d->pages)
		return d->pages;
	i = from >> 6;
	v = __atomic_load_n(&d->w[i], __ATOMIC_RELAXED) & (~0ull << (from & 63));
	for (;;) {
		if (v) {
			uint64_t p = i * 64 + (uint64_t)__builtin_ctzll(v);

			return p < d->pages ? p : d->pages;
		}
		if (++i >= d->words)
			return d->pages;
		v = __atomic_load_n(&d->w[i], __ATOMIC_RELAXED);
	}
}

int dirty_kvm_harvest(struct dirty *d, int vm_fd, unsigned slot, uint64_t first, uint64_t npages,
		      int manual)
{
	uint64_t words = (npages + 63) / 64;
	uint64_t *bits = calloc(words ? words : 1, sizeof(*bits));
	struct kvm_dirty_log log = { .slot = slot };
	int r = 0;

	_Static_assert(sizeof(struct kvm_dirty_log) == _IOC_SIZE(KVM_GET_DIRTY_LOG), "KVM ABI");
	_Static_assert(sizeof(struct kvm_clear_dirty_log) == _IOC_SIZE(KVM_CLEAR_DIRTY_LOG), "KVM ABI");
	if (!bits)
		return -ENOMEM;
	log.dirty_bitmap = bits;
	if (ioctl(vm_fd, KVM_GET_DIRTY_LOG, &log) < 0) {
		r = -errno;
		goto out;
	}
	/* Ours before KVM's are cleared: a failure below loses nothing. */
	dirty_or_bits(d, first, bits, npages);
	if (manual) {
		/* KVM_CLEAR_DIRTY_LOG: first_page a multiple of 64, num_pages
		 * too unless it reaches the end of the slot. */
		struct kvm_clear_dirty_log clr = {
			.slot = slot,
			.first_page = 0,
			.num_pages = (uint32_t)npages,
			.dirty_bitmap = bits,
		};

		if (npages > UINT32_MAX) {
			r = -E2BIG;
			goto out;
		}
		if (ioctl(vm_fd, KVM_CLEAR_DIRTY_LOG, &clr) < 0)
			r = -errno;
	}
out:
	free(bits);
	return r;
}
