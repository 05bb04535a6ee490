/* mem_trim_startup: the main stack below the caller is released (its
 * resident size falls) while the caller's own frame keeps its data; the
 * [stack] line is found in a maps text, and only the one holding the
 * address. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vmm/base/memtrim.h"

static const char maps[] =
	"55555fee9000-55555ff0b000 rw-p 00000000 00:00 0                          [heap]\n"
	"7fd0c1599000-7fd0c16ab000 rw-p 00000000 00:00 0 \n"
	"7fff2c3c6000-7fff2c3ea000 rw-p 00000000 00:00 0                          [stack]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";

static void stack_line_holding_the_address(void **state)
{
	unsigned long lo = 0, hi = 0;

	(void)state;
	assert_int_equal(mem_stack_range(maps, 0x7fff2c3d0000ul, &lo, &hi), 0);
	assert_int_equal(lo, 0x7fff2c3c6000ul);
	assert_int_equal(hi, 0x7fff2c3ea000ul);
	/* the heap holds it, not a stack; past the end; before the start */
	assert_int_equal(mem_stack_range(maps, 0x55555fef0000ul, &lo, &hi), -ENOENT);
	assert_int_equal(mem_stack_range(maps, 0x7fff2c3ea000ul, &lo, &hi), -ENOENT);
	assert_int_equal(mem_stack_range(maps, 0x7fff2c3c5fffl, &lo, &hi), -ENOENT);
	assert_int_equal(mem_stack_range("", 1, &lo, &hi), -ENOENT);
	assert_int_equal(mem_stack_range("garbage\n[stack]\n", 1, &lo, &hi), -ENOENT);
}

/* Resident KiB of this process's [stack] (smaps). */
static long stack_rss_kib(void)
{
	char line[512];
	int in_stack = 0;
	long kib = -1;
	FILE *f = fopen("/proc/self/smaps", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2)
			in_stack = strstr(line, "[stack]") != NULL;
		if (in_stack && !strncmp(line, "Rss:", 4))
			kib = strtol(line + 4, NULL, 10);
	}
	fclose(f);
	return kib;
}

/* 1 MiB of stack touched, then returned from: dead, resident. */
static __attribute__((noinline)) void deep(void)
{
	volatile char big[1 << 20];

	memset((char *)big, 0x5a, sizeof(big));
	big[0] = big[sizeof(big) - 1];
}

/* Without /proc (a jail): the probe finds the [stack] mapping's bottom
 * that /proc/self/maps gives. */
static void probe_finds_the_stack_bottom(void **state)
{
	static char text[256 << 10];
	unsigned long here = (unsigned long)(uintptr_t)__builtin_frame_address(0), lo = 0, hi = 0, probed = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	void *big;
	size_t n;

	(void)state;
	if (!f) {
		skip(); /* said by cmocka: no /proc here */
		return;
	}
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	assert_int_equal(mem_stack_range(text, here, &lo, &hi), 0);
	assert_int_equal(mem_stack_low_probe(here, &probed), 0);
	assert_true(probed == lo);
	/* a mapping that reaches the span's far end: not a stack's shape */
	big = mmap(NULL, 2 * MEMTRIM_PROBE_SPAN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(big != MAP_FAILED);
	assert_int_equal(mem_stack_low_probe((unsigned long)(uintptr_t)big + 2 * MEMTRIM_PROBE_SPAN - 64, &probed),
			 -ENOENT);
	munmap(big, 2 * MEMTRIM_PROBE_SPAN);
}

static void dead_stack_goes_back_live_frame_stays(void **state)
{
	char mine[4096];
	long before, after, released;
	size_t i;

	(void)state;
	memset(mine, 0xa5, sizeof(mine));
	deep();
	before = stack_rss_kib();
	assert_true(before >= 1024);
	released = mem_trim_startup(16 << 10);
	after = stack_rss_kib();
	assert_true(released >= 900);
	assert_true(before - after >= 900);
	for (i = 0; i < sizeof(mine); i++)
		assert_int_equal((unsigned char)mine[i], 0xa5);
	/* nothing left to give back: a second call releases only what the
	 * first one's own calls touched again */
	deep();
	assert_true(mem_trim_startup(16 << 10) >= 900);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stack_line_holding_the_address),
		cmocka_unit_test(probe_finds_the_stack_bottom),
		cmocka_unit_test(dead_stack_goes_back_live_frame_stays),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
