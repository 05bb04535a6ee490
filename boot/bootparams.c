/* The Linux boot protocol's zero page (struct boot_params): the e820 map,
 * the command line and the initrd, for both loaders (boot/loader.h). */
#include "boot/loader.h"
#include "boot/layout.h"

#include <asm/e820.h>
#include <errno.h>
#include <string.h>

/* x86 COMMAND_LINE_SIZE; bzImage headers from 2.06 carry their own. */
#define CMDLINE_DEFAULT_MAX 2047u

static int e820_add(struct boot_e820_entry *out, unsigned max, unsigned *n,
		    uint64_t addr, uint64_t size, uint32_t type)
{
	if (size == 0)
		return 0;
	if (*n >= max)
		return -E2BIG;
	out[*n].addr = addr;
	out[*n].size = size;
	out[*n].type = type;
	(*n)++;
	return 0;
}

int boot_e820(const struct gm *gm, struct boot_e820_entry *out, unsigned max)
{
	unsigned i, n = 0;
	int e;

	for (i = 0; i < gm->nr; i++) {
		uint64_t start = gm->r[i].gpa, end = start + gm->r[i].size;

		if (start < BOOT_HIMEM_START) {
			/* Conventional memory, the EBDA, then the legacy hole
			 * (VGA, option ROMs, BIOS: the MP table lives there). */
			uint64_t conv_end = end < BOOT_EBDA_START ? end : BOOT_EBDA_START;

			e = e820_add(out, max, &n, start, conv_end - start, E820_RAM);
			if (e)
				return e;
			if (end > BOOT_EBDA_START) {
				e = e820_add(out, max, &n, BOOT_EBDA_START,
					     0xa0000 - BOOT_EBDA_START, E820_RESERVED);
				if (e)
					return e;
			}
			if (end <= BOOT_HIMEM_START)
				continue;
			start = BOOT_HIMEM_START;
		}
		e = e820_add(out, max, &n, start, end - start, E820_RAM);
		if (e)
			return e;
	}
	return (int)n;
}

uint32_t boot_cmdline_max(const struct kernel_image *k)
{
	if (k->is_bzimage && k->hdr.version >= 0x0206 && k->hdr.cmdline_size)
		return k->hdr.cmdline_size < BOOT_CMDLINE_MAX - 1 ? k->hdr.cmdline_size
								  : (uint32_t)BOOT_CMDLINE_MAX - 1;
	return CMDLINE_DEFAULT_MAX;
}

int boot_place_initrd(const struct gm *gm, const struct kernel_image *k,
		      size_t initrd_len, uint64_t *gpa, const char **why)
{
	uint64_t top = gm_low_end(gm), len, start;

	if (k->is_bzimage && k->hdr.version >= 0x0203 &&
	    (uint64_t)k->hdr.initrd_addr_max + 1 < top)
		top = (uint64_t)k->hdr.initrd_addr_max + 1;
	len = ((uint64_t)initrd_len + GM_PAGE_SIZE - 1) & ~(GM_PAGE_SIZE - 1);
	if (len < initrd_len || len > top) {
		*why = "initrd does not fit in guest memory below 4 GiB";
		return -ENOMEM;
	}
	start = (top - len) & ~(GM_PAGE_SIZE - 1);
	if (start < k->load_hi) {
		*why = "initrd does not fit between the kernel and the top of low memory (give the guest more --mem)";
		return -ENOMEM;
	}
	if (!gm_ptr(gm, start, len)) {
		*why = "initrd range is not RAM";
		return -EFAULT;
	}
	*gpa = start;
	return 0;
}

int boot_params_write(const struct gm *gm, const struct kernel_image *k,
		      const char *cmdline, uint64_t initrd_gpa, uint64_t initrd_len,
		      const char **why)
{
	struct boot_params *bp = gm_ptr(gm, BOOT_ZERO_PAGE, sizeof(*bp));
	size_t clen = strlen(cmdline);
	char *cl;
	int n;

	_Static_assert(sizeof(struct boot_params) == 4096, "boot_params is one page");
	if (!bp) {
		*why = "no RAM for boot_params";
		return -EFAULT;
	}
	if (clen > boot_cmdline_max(k)) {
		*why = "kernel command line is longer than the kernel accepts";
		return -E2BIG;
	}
	cl = gm_ptr(gm, BOOT_CMDLINE, clen + 1);
	if (!cl) {
		*why = "no RAM for the command line";
		return -EFAULT;
	}
	memcpy(cl, cmdline, clen + 1);

	memset(bp, 0, sizeof(*bp));
	if (k->is_bzimage)
		memcpy(&bp->hdr, &k->hdr, k->hdr_len);
	bp->hdr.type_of_loader = 0xff; /* undefined boot loader */
	bp->hdr.boot_flag = 0xaa55;
	bp->hdr.header = 0x53726448;  /* "HdrS" */
	bp->hdr.loadflags |= LOADED_HIGH | CAN_USE_HEAP;
	bp->hdr.heap_end_ptr = 0xfe00;
	if (!k->is_bzimage)
		bp->hdr.kernel_alignment = 0x1000000;
	bp->hdr.cmd_line_ptr = (uint32_t)BOOT_CMDLINE;
	bp->hdr.cmdline_size = (uint32_t)clen + 1;
	if (initrd_len) {
		bp->hdr.ramdisk_image = (uint32_t)initrd_gpa;
		bp->ext_ramdisk_image = (uint32_t)(initrd_gpa >> 32);
		bp->hdr.ramdisk_size = (uint32_t)initrd_len;
		bp->ext_ramdisk_size = (uint32_t)(initrd_len >> 32);
	}
	n = boot_e820(gm, bp->e820_table, E820_MAX_ENTRIES_ZEROPAGE);
	if (n < 0) {
		*why = "too many e820 entries";
		return n;
	}
	bp->e820_entries = (uint8_t)n;
	return 0;
}

/* GDT entry from flags (in the 0xFF0F flag/access layout), base, limit. */
static uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit)
{
	return ((uint64_t)(base & 0xff000000u) << 32) | ((uint64_t)(flags & 0xf0ffu) << 40) |
	       ((uint64_t)(limit & 0x000f0000u) << 32) | ((uint64_t)(base & 0x00ffffffu) << 16) |
	       (uint64_t)(limit & 0x0000ffffu);
}

int boot_write_tables(const struct gm *gm)
{
	const uint64_t gdt[] = {
		0,                                  /* null */
		0,                                  /* unused */
		gdt_entry(0xa09b, 0, 0xfffff),      /* 0x10: code, 64-bit, present */
		gdt_entry(0xc093, 0, 0xfffff),      /* 0x18: data, 4 GiB */
		gdt_entry(0x808b, 0, 0xfffff),      /* 0x20: 64-bit TSS (busy) */
	};
	uint64_t *pml4 = gm_ptr(gm, BOOT_PML4, GM_PAGE_SIZE);
	uint64_t *pdpt = gm_ptr(gm, BOOT_PDPT, GM_PAGE_SIZE);
	uint64_t *pd = gm_ptr(gm, BOOT_PD, 4 * GM_PAGE_SIZE);
	uint64_t zero_idt = 0;
	unsigned i;

	if (!pml4 || !pdpt || !pd)
		return -EFAULT;
	if (gm_write(gm, BOOT_GDT_ADDR, gdt, sizeof(gdt)) ||
	    gm_write(gm, BOOT_IDT_ADDR, &zero_idt, sizeof(zero_idt)))
		return -EFAULT;
	/* Identity map of 0..4 GiB with 2 MiB pages: present, writable, PS. */
	memset(pml4, 0, GM_PAGE_SIZE);
	memset(pdpt, 0, GM_PAGE_SIZE);
	pml4[0] = BOOT_PDPT | 0x3;
	for (i = 0; i < 4; i++)
		pdpt[i] = (BOOT_PD + i * GM_PAGE_SIZE) | 0x3;
	for (i = 0; i < 4 * 512; i++)
		pd[i] = ((uint64_t)i << 21) | 0x83;
	return 0;
}
