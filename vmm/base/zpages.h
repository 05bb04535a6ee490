/* Zero-filled memory on pages of its own, for large state most of which a
 * process never touches: fresh anonymous pages stay out of its RSS until
 * written, where calloc may hand back heap memory used before and clear
 * all of it. Under ASan, calloc, so that its redzones guard the block. */
#ifndef VMM_ZPAGES_H
#define VMM_ZPAGES_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Whether n bytes at p are all zero, compared a 256-byte block at a time.
 * Reading fresh anonymous pages maps the kernel's shared zero page, which
 * no RSS counts, where clearing them would make them the process's own. */
static inline int mem_is_zero(const void *p, size_t n)
{
	static const unsigned char zero[256];
	const unsigned char *b = p;

	for (; n >= sizeof(zero); b += sizeof(zero), n -= sizeof(zero))
		if (memcmp(b, zero, sizeof(zero)))
			return 0;
	return !n || !memcmp(b, zero, n);
}

static inline void *zpages_alloc(size_t n)
{
#ifdef __SANITIZE_ADDRESS__
	return calloc(1, n);
#else
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
#endif
}

/* n: the size given to zpages_alloc. NULL is ignored. */
static inline void zpages_free(void *p, size_t n)
{
#ifdef __SANITIZE_ADDRESS__
	(void)n;
	free(p);
#else
	if (p)
		munmap(p, n);
#endif
}

#endif
