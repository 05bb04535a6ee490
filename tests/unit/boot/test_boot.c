/* Kernel loading (ELF and bzImage, good and malformed), initrd placement,
 * boot_params and e820, boot page tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <asm/e820.h>
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot/layout.h"
#include "boot/loader.h"

#define MiB (1ull << 20)
#define RAM (64 * MiB)

struct fx {
	struct gm gm;
	uint8_t file[8192];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || gm_create_x86(&f->gm, RAM))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	gm_destroy(&f->gm);
	free(f);
	return 0;
}

/* An ELF with one PT_LOAD of 256 file bytes + 256 bss bytes at 2 MiB. */
static size_t make_elf(uint8_t *buf, uint64_t paddr, uint64_t entry)
{
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { 0 };
	size_t off = sizeof(eh) + sizeof(ph);

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = entry;
	eh.e_phoff = sizeof(eh);
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	ph.p_type = PT_LOAD;
	ph.p_offset = off;
	ph.p_vaddr = 0xffffffff80000000ull + paddr;
	ph.p_paddr = paddr;
	ph.p_filesz = 256;
	ph.p_memsz = 512;
	memcpy(buf, &eh, sizeof(eh));
	memcpy(buf + sizeof(eh), &ph, sizeof(ph));
	memset(buf + off, 0xab, 256);
	return off + 256;
}

static Elf64_Ehdr *ehdr(uint8_t *b) { return (Elf64_Ehdr *)b; }
static Elf64_Phdr *phdr(uint8_t *b) { return (Elf64_Phdr *)(b + sizeof(Elf64_Ehdr)); }

static void elf_good(void **state)
{
	struct fx *f = *state;
	struct kernel_image k;
	const char *why = NULL;
	size_t len = make_elf(f->file, 2 * MiB, 2 * MiB + 16);
	uint8_t *p;

	memset(gm_ptr(&f->gm, 2 * MiB, 512), 0x11, 512); /* bss must be zeroed */
	assert_int_equal(kernel_load(&f->gm, f->file, len, &k, &why), 0);
	assert_int_equal(k.entry, 2 * MiB + 16);
	assert_int_equal(k.load_lo, 2 * MiB);
	assert_int_equal(k.load_hi, 2 * MiB + 512);
	assert_false(k.is_bzimage);
	p = gm_ptr(&f->gm, 2 * MiB, 512);
	assert_int_equal(p[0], 0xab);
	assert_int_equal(p[255], 0xab);
	assert_int_equal(p[256], 0);
	assert_int_equal(p[511], 0);
	/* A virtual entry point is translated through its segment. */
	len = make_elf(f->file, 2 * MiB, 0xffffffff80000000ull + 2 * MiB + 32);
	assert_int_equal(kernel_load(&f->gm, f->file, len, &k, &why), 0);
	assert_int_equal(k.entry, 2 * MiB + 32);
}

/* elf_load_fd reads the same file with pread: the same guest memory and
 * image; a file shorter than the length it was given (it shrank after its
 * fstat) is refused with -EIO, not loaded half. */
static void elf_from_fd(void **state)
{
	struct fx *f = *state;
	struct kernel_image k, kb;
	const char *why = NULL;
	char path[] = "/tmp/test_boot.XXXXXX";
	size_t len = make_elf(f->file, 2 * MiB, 2 * MiB + 16);
	uint8_t *p, copy[512];
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, f->file, len), (ssize_t)len);
	assert_int_equal(kernel_load(&f->gm, f->file, len, &kb, &why), 0);
	memcpy(copy, gm_ptr(&f->gm, 2 * MiB, 512), 512);
	memset(gm_ptr(&f->gm, 2 * MiB, 512), 0x11, 512);
	assert_int_equal(elf_load_fd(&f->gm, fd, len, &k, &why), 0);
	assert_int_equal(k.entry, kb.entry);
	assert_int_equal(k.load_lo, kb.load_lo);
	assert_int_equal(k.load_hi, kb.load_hi);
	p = gm_ptr(&f->gm, 2 * MiB, 512);
	assert_memory_equal(p, copy, 512);
	/* the segment's bytes are past the end of what the file holds now */
	assert_int_equal(ftruncate(fd, (off_t)(len - 10)), 0);
	why = NULL;
	assert_int_equal(elf_load_fd(&f->gm, fd, len, &k, &why), -EIO);
	assert_non_null(why);
	/* and the checks are the same: a length that cuts the segment */
	assert_int_equal(elf_load_fd(&f->gm, fd, len - 10, &k, &why), -ENOEXEC);
	close(fd);
}

/* A file with one PT_LOAD of `filesz` bytes (byte i is i * 7) plus
 * BIG_BSS bss bytes at paddr, its bytes at file offset `off`. */
#define BIG_BSS (3 * 4096 + 1000)

static int write_big_elf(uint64_t paddr, uint64_t off, uint64_t filesz)
{
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { 0 };
	char path[] = "/tmp/test_boot_big.XXXXXX";
	int fd = mkstemp(path);
	uint8_t *seg = malloc(filesz);
	uint64_t i;

	assert_true(fd >= 0 && seg);
	unlink(path);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = paddr;
	eh.e_phoff = sizeof(eh);
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	ph.p_type = PT_LOAD;
	ph.p_offset = off;
	ph.p_paddr = ph.p_vaddr = paddr;
	ph.p_filesz = filesz;
	ph.p_memsz = filesz + BIG_BSS;
	for (i = 0; i < filesz; i++)
		seg[i] = (uint8_t)(i * 7);
	assert_int_equal(pwrite(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	assert_int_equal(pwrite(fd, &ph, sizeof(ph), sizeof(eh)), (ssize_t)sizeof(ph));
	assert_int_equal(pwrite(fd, seg, filesz, (off_t)off), (ssize_t)filesz);
	free(seg);
	return fd;
}

/* A large segment from a descriptor, over guest RAM that held other
 * bytes: every file byte in place (copied by the kernel), the bss zero
 * (its partial pages cleared, its whole pages given back), the bytes after
 * it untouched; the same from a buffer. */
static void elf_fd_large_segment(void **state)
{
	struct fx *f = *state;
	struct kernel_image k;
	const char *why = NULL;
	uint64_t paddr = 2 * MiB + 0x800, filesz = 200 * 1024 + 123, i;
	int fd = write_big_elf(paddr, 0x1900, filesz);
	const uint8_t *p;
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	memset(gm_ptr(&f->gm, 2 * MiB, MiB), 0x11, MiB);
	assert_int_equal(elf_load_fd(&f->gm, fd, (size_t)st.st_size, &k, &why), 0);
	p = gm_ptr(&f->gm, paddr, filesz + BIG_BSS + 1);
	assert_non_null(p);
	for (i = 0; i < filesz; i++)
		if (p[i] != (uint8_t)(i * 7))
			fail_msg("byte %llu of the segment is %u", (unsigned long long)i, p[i]);
	for (i = filesz; i < filesz + BIG_BSS; i++)
		if (p[i])
			fail_msg("bss byte %llu is %u", (unsigned long long)(i - filesz), p[i]);
	assert_int_equal(p[filesz + BIG_BSS], 0x11);
	assert_int_equal(p[-1], 0x11);
	close(fd);
}

#define EXPECT_ELF_ERR(f, len, err)                                                  \
	do {                                                                         \
		struct kernel_image k_;                                              \
		const char *why_ = NULL;                                             \
		assert_int_equal(kernel_load(&(f)->gm, (f)->file, (len), &k_, &why_), (err)); \
		assert_non_null(why_);                                               \
	} while (0)

static void elf_malformed(void **state)
{
	struct fx *f = *state;
	size_t len;

	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	EXPECT_ELF_ERR(f, 40, -ENOEXEC);                 /* truncated header */
	EXPECT_ELF_ERR(f, len - 1, -ENOEXEC);            /* truncated segment */
	EXPECT_ELF_ERR(f, sizeof(Elf64_Ehdr) + 8, -ENOEXEC); /* truncated phdrs */

	ehdr(f->file)->e_ident[EI_CLASS] = ELFCLASS32;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	ehdr(f->file)->e_machine = EM_386;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	ehdr(f->file)->e_type = ET_DYN;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	ehdr(f->file)->e_phoff = UINT64_MAX - 8;         /* offset overflow */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	ehdr(f->file)->e_phnum = 0;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	ehdr(f->file)->e_phentsize = 10;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	phdr(f->file)->p_filesz = 1024;                  /* > memsz */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	phdr(f->file)->p_offset = UINT64_MAX - 100;      /* offset + size wraps */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 0x7000, 0x7000);         /* over boot_params */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, RAM - 256, RAM - 256);   /* bss past the end of RAM */
	EXPECT_ELF_ERR(f, len, -ENOMEM);
	len = make_elf(f->file, UINT64_MAX - 255, UINT64_MAX - 255); /* wraps */
	EXPECT_ELF_ERR(f, len, -ENOMEM);
	len = make_elf(f->file, 2 * MiB, 3 * MiB);       /* entry outside */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_elf(f->file, 2 * MiB, 2 * MiB);
	phdr(f->file)->p_type = PT_NOTE;                 /* nothing to load */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	memcpy(f->file, "\177ELG", 4);                   /* neither ELF nor bzImage */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
}

/* A bzImage: 2 setup sectors + header, then a payload of `payload` bytes. */
static size_t make_bz(uint8_t *buf, size_t payload)
{
	struct setup_header h = { 0 };
	size_t setup = 3 * 512;

	memset(buf, 0, setup + payload);
	h.setup_sects = 2;
	h.syssize = (uint32_t)((payload + 15) / 16);
	h.boot_flag = 0xaa55;
	h.jump = 0x66eb;
	h.header = 0x53726448;
	h.version = 0x020f;
	h.loadflags = LOADED_HIGH;
	h.initrd_addr_max = 0x7fffffff;
	h.kernel_alignment = 0x200000;
	h.relocatable_kernel = 1;
	h.xloadflags = XLF_KERNEL_64;
	h.cmdline_size = 255;
	h.pref_address = 0x1000000;
	h.init_size = 0x100000;
	memcpy(buf + 0x1f1, &h, sizeof(h));
	memset(buf + setup, 0xcd, payload);
	return setup + payload;
}

static struct setup_header *bzh(uint8_t *b) { return (struct setup_header *)(b + 0x1f1); }

static void bz_good(void **state)
{
	struct fx *f = *state;
	struct kernel_image k;
	const char *why = NULL;
	size_t len = make_bz(f->file, 1000);

	assert_int_equal(kernel_load(&f->gm, f->file, len, &k, &why), 0);
	assert_true(k.is_bzimage);
	assert_int_equal(k.entry, 0x1000000 + 0x200);
	assert_int_equal(k.load_hi, 0x1000000 + 0x100000); /* init_size */
	assert_int_equal(*(uint8_t *)gm_ptr(&f->gm, 0x1000000, 1), 0xcd);
	assert_int_equal(boot_cmdline_max(&k), 255);
	/* setup_sects == 0 means 4: the payload starts at 5 * 512. */
	len = make_bz(f->file, 3000);
	bzh(f->file)->setup_sects = 0;
	bzh(f->file)->syssize = 0;
	f->file[5 * 512] = 0x77;
	assert_int_equal(kernel_load(&f->gm, f->file, len, &k, &why), 0);
	assert_int_equal(*(uint8_t *)gm_ptr(&f->gm, 0x1000000, 1), 0x77);
}

static void bz_malformed(void **state)
{
	struct fx *f = *state;
	size_t len;

	len = make_bz(f->file, 1000);
	EXPECT_ELF_ERR(f, 0x1f1 + 10, -ENOEXEC);        /* too short */
	EXPECT_ELF_ERR(f, 3 * 512, -ENOEXEC);           /* no payload */
	EXPECT_ELF_ERR(f, len - 100, -ENOEXEC);         /* shorter than syssize */
	/* Found by fuzz_kernel_load: a payload too short to hold the 64-bit
	 * entry at +0x200 would start the guest outside its kernel. */
	len = make_bz(f->file, 0x100);
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->boot_flag = 0;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->version = 0x0208;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->xloadflags = 0;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->loadflags = 0;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->setup_sects = 100;                /* setup larger than file */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->pref_address = 0x1000;
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->kernel_alignment = 0x300000;      /* not a power of two */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->pref_address = 0x1100000;         /* not aligned */
	EXPECT_ELF_ERR(f, len, -ENOEXEC);
	len = make_bz(f->file, 1000);
	bzh(f->file)->init_size = 0xffffffff;           /* needs more than RAM */
	EXPECT_ELF_ERR(f, len, -ENOMEM);
}

static void e820_layouts(void **state)
{
	struct boot_e820_entry e[8];
	struct gm big;
	int n;

	(void)state;
	assert_int_equal(gm_create_x86(&big, 5ull << 30), 0);
	n = boot_e820(&big, e, 8);
	assert_int_equal(n, 4);
	assert_int_equal(e[0].addr, 0);
	assert_int_equal(e[0].size, BOOT_EBDA_START);
	assert_int_equal(e[0].type, E820_RAM);
	assert_int_equal(e[1].type, E820_RESERVED);
	assert_int_equal(e[2].addr, BOOT_HIMEM_START);
	assert_int_equal(e[2].addr + e[2].size, GM_MMIO_GAP_START);
	assert_int_equal(e[3].addr, 1ull << 32);
	assert_int_equal(e[3].size, (5ull << 30) - GM_MMIO_GAP_START);
	assert_int_equal(boot_e820(&big, e, 2), -E2BIG);
	gm_destroy(&big);
}

static void params_and_initrd(void **state)
{
	struct fx *f = *state;
	struct kernel_image k;
	const char *why = NULL;
	struct boot_params *bp;
	uint64_t igpa = 0;
	size_t len = make_elf(f->file, 16 * MiB, 16 * MiB);
	char longline[4000];

	assert_int_equal(kernel_load(&f->gm, f->file, len, &k, &why), 0);
	assert_int_equal(boot_place_initrd(&f->gm, &k, 5000, &igpa, &why), 0);
	assert_int_equal(igpa, RAM - 8192); /* page-aligned, at the top */
	assert_int_equal(boot_params_write(&f->gm, &k, "console=ttyS0", igpa, 5000, &why), 0);
	bp = gm_ptr(&f->gm, BOOT_ZERO_PAGE, sizeof(*bp));
	assert_int_equal(bp->hdr.boot_flag, 0xaa55);
	assert_int_equal(bp->hdr.header, 0x53726448);
	assert_int_equal(bp->hdr.type_of_loader, 0xff);
	assert_int_equal(bp->hdr.cmd_line_ptr, BOOT_CMDLINE);
	assert_string_equal((char *)gm_ptr(&f->gm, BOOT_CMDLINE, 14), "console=ttyS0");
	assert_int_equal(bp->hdr.ramdisk_image, RAM - 8192);
	assert_int_equal(bp->hdr.ramdisk_size, 5000);
	assert_int_equal(bp->e820_entries, 3);

	/* Too big to fit above the kernel. */
	assert_int_equal(boot_place_initrd(&f->gm, &k, RAM - 16 * MiB, &igpa, &why), -ENOMEM);
	assert_int_equal(boot_place_initrd(&f->gm, &k, SIZE_MAX, &igpa, &why), -ENOMEM);
	/* Command line over the limit. */
	memset(longline, 'a', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = 0;
	assert_int_equal(boot_params_write(&f->gm, &k, longline, 0, 0, &why), -E2BIG);

	/* bzImage: header copied, initrd below initrd_addr_max. */
	len = make_bz(f->file, 1000);
	bzh(f->file)->initrd_addr_max = 40 * MiB - 1;
	assert_int_equal(kernel_load(&f->gm, f->file, len, &k, &why), 0);
	assert_int_equal(boot_place_initrd(&f->gm, &k, 4096, &igpa, &why), 0);
	assert_int_equal(igpa, 40 * MiB - 4096);
	assert_int_equal(boot_params_write(&f->gm, &k, "x", igpa, 4096, &why), 0);
	assert_int_equal(bp->hdr.version, 0x020f);
	assert_int_equal(bp->hdr.pref_address, 0x1000000);
}

static void page_tables(void **state)
{
	struct fx *f = *state;
	uint64_t *pml4, *pd, gdt[5];

	assert_int_equal(boot_write_tables(&f->gm), 0);
	pml4 = gm_ptr(&f->gm, BOOT_PML4, 8);
	pd = gm_ptr(&f->gm, BOOT_PD, 4 * 4096);
	assert_int_equal(pml4[0], BOOT_PDPT | 3);
	assert_int_equal(pd[0], 0x83);
	assert_int_equal(pd[2047], (2047ull << 21) | 0x83);
	assert_int_equal(gm_read(&f->gm, BOOT_GDT_ADDR, gdt, sizeof(gdt)), 0);
	assert_int_equal(gdt[BOOT_CS / 8], 0x00af9b000000ffffull);
	assert_int_equal(gdt[BOOT_DS / 8], 0x00cf93000000ffffull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(elf_good, setup, teardown),
		cmocka_unit_test_setup_teardown(elf_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(elf_from_fd, setup, teardown),
		cmocka_unit_test_setup_teardown(elf_fd_large_segment, setup, teardown),
		cmocka_unit_test_setup_teardown(bz_good, setup, teardown),
		cmocka_unit_test_setup_teardown(bz_malformed, setup, teardown),
		cmocka_unit_test(e820_layouts),
		cmocka_unit_test_setup_teardown(params_and_initrd, setup, teardown),
		cmocka_unit_test_setup_teardown(page_tables, setup, teardown),
	};

	return cmocka_run_group_tests_name("boot", tests, NULL, NULL);
}
