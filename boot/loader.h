/* Linux kernel loading: vmlinux (ELF64) and bzImage (64-bit boot protocol),
 * initrd placement, the command line and boot_params with its e820 map.
 * Every function here works on a byte buffer (or, elf_load_fd, a file read
 * with pread) and guest memory only, so unit tests and fuzzers reach all of
 * it without KVM. */
#ifndef BOOT_LOADER_H
#define BOOT_LOADER_H

#include <asm/bootparam.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/base/gm.h"

struct kernel_image {
	uint64_t entry;     /* guest-physical 64-bit entry point */
	uint64_t load_lo;   /* lowest guest-physical byte the kernel occupies */
	uint64_t load_hi;   /* one past the highest (incl. bss / init_size) */
	int is_bzimage;
	struct setup_header hdr; /* bzImage: copied from the file; ELF: zero */
	uint32_t hdr_len;        /* bytes of hdr valid from the file */
};

/* Detects ELF or bzImage and loads it. 0 or -errno; on error `why` (if not
 * NULL) gets a short reason for the user. */
int kernel_load(const struct gm *gm, const uint8_t *data, size_t len,
		struct kernel_image *out, const char **why)
	__attribute__((warn_unused_result));
int elf_load(const struct gm *gm, const uint8_t *data, size_t len,
	     struct kernel_image *out, const char **why)
	__attribute__((warn_unused_result));
/* elf_load reading the file from fd (len bytes, its size): headers with
 * pread, then each segment into guest memory inside the kernel where it
 * is a memfd (gm_load_file: sendfile), else with pread. The same checks as
 * elf_load; a short read (the file changed) is -EIO. */
int elf_load_fd(const struct gm *gm, int fd, size_t len, struct kernel_image *out, const char **why)
	__attribute__((warn_unused_result));
int bzimage_load(const struct gm *gm, const uint8_t *data, size_t len,
		 struct kernel_image *out, const char **why)
	__attribute__((warn_unused_result));

/* Builds the e820 map for the RAM regions of `gm`. Returns the number of
 * entries (<= max) or -E2BIG. */
int boot_e820(const struct gm *gm, struct boot_e820_entry *out, unsigned max);

/* Places the initrd as high as it may go (page-aligned, below 4 GiB and the
 * kernel's initrd_addr_max, above the kernel). 0 or -errno. */
int boot_place_initrd(const struct gm *gm, const struct kernel_image *k,
		      size_t initrd_len, uint64_t *gpa, const char **why)
	__attribute__((warn_unused_result));

/* Writes boot_params at BOOT_ZERO_PAGE and the command line at BOOT_CMDLINE.
 * initrd_gpa/len may be 0. */
int boot_params_write(const struct gm *gm, const struct kernel_image *k,
		      const char *cmdline, uint64_t initrd_gpa, uint64_t initrd_len,
		      const char **why) __attribute__((warn_unused_result));

/* Writes the GDT, IDT and identity-mapping page tables the 64-bit entry
 * needs. */
int boot_write_tables(const struct gm *gm) __attribute__((warn_unused_result));

/* The command-line limit the kernel accepts (bytes, without the NUL). */
uint32_t boot_cmdline_max(const struct kernel_image *k);

#endif
