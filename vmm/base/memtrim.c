/* Start-up's pages given back (memtrim.h). */
#include "vmm/base/memtrim.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int mem_stack_range(const char *maps, unsigned long addr, unsigned long *lo, unsigned long *hi)
{
	const char *line = maps;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		unsigned long a, b;
		char *end;

		a = strtoul(line, &end, 16);
		if (*end == '-') {
			b = strtoul(end + 1, &end, 16);
			if (a <= addr && addr < b && len >= 7 && !memcmp(line + len - 7, "[stack]", 7)) {
				*lo = a;
				*hi = b;
				return 0;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

/* /proc/self/maps into buf (NUL-terminated, cut at its size). */
static int read_maps(char *buf, size_t size)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read_upto(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = 0;
	return 0;
}

int mem_stack_low_probe(unsigned long addr, unsigned long *lo)
{
	unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE), ok = addr & ~(page - 1), bad, mid;
	unsigned char v;

	if (ok < MEMTRIM_PROBE_SPAN)
		return -ENOENT;
	bad = ok - MEMTRIM_PROBE_SPAN;
	if (mincore((void *)bad, page, &v) == 0)
		return -ENOENT; /* something mapped there: not the layout we know */
	if (errno != ENOMEM || mincore((void *)ok, page, &v) < 0)
		return -ENOENT;
	while (ok - bad > page) {
		mid = bad + (ok - bad) / page / 2 * page;
		if (mincore((void *)mid, page, &v) == 0)
			ok = mid;
		else if (errno == ENOMEM)
			bad = mid;
		else
			return -errno;
	}
	*lo = ok;
	return 0;
}

long mem_trim_startup(size_t keep)
{
	static const size_t maps_size = 256 << 10;
	unsigned long lo, hi, here = (unsigned long)(uintptr_t)__builtin_frame_address(0), top;
	long page = sysconf(_SC_PAGESIZE);
	char *maps;
	int r;

	/* Off the stack: this must not itself deepen what it releases. */
	maps = malloc(maps_size);
	if (!maps)
		return -ENOMEM;
	r = read_maps(maps, maps_size);
	if (!r)
		r = mem_stack_range(maps, here, &lo, &hi);
	else
		r = mem_stack_low_probe(here, &lo); /* no /proc: a jail */
	free(maps);
	malloc_trim(0);
	if (r)
		return r;
	top = (here - keep) & ~((unsigned long)page - 1);
	if (top <= lo) /* the caller is not `keep` above the stack's bottom */
		return 0;
	if (madvise((void *)lo, top - lo, MADV_DONTNEED) < 0)
		return -errno;
	return (long)((top - lo) >> 10);
}
