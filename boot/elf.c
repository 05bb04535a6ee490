/* vmlinux loader: an ELF64 x86-64 executable whose PT_LOAD segments go to
 * their physical addresses (p_paddr), entered at its 64-bit entry point with
 * paging already on (identity map), as Firecracker and kvmtool do. */
#include "boot/loader.h"
#include "boot/layout.h"

#include <elf.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define ELF_MAX_PHDRS 64

static int fail(const char **why, const char *msg, int err)
{
	if (why)
		*why = msg;
	return err;
}

/* A segment's page-aligned middle is mapped from the file only from this
 * size on: below it a copy costs less than a mapping of its own. */
#define ELF_MAP_MIN (64 * 1024)

/* Where the file's bytes come from: a buffer (tests, the fuzzer, a mapped
 * file) or a descriptor, whose segments are mapped over guest memory
 * (map_gm) or read with pread straight into it. */
struct elf_src {
	const uint8_t *data; /* NULL: read fd */
	int fd;
	size_t len;
	struct gm *map_gm;   /* the descriptor's segments may be mapped here */
};

/* Copies n bytes at off (off + n <= len, checked by the caller). */
static int src_read(const struct elf_src *s, uint64_t off, void *dst, size_t n)
{
	size_t got = 0;

	if (s->data) {
		memcpy(dst, s->data + off, n);
		return 0;
	}
	while (got < n) {
		ssize_t r = pread(s->fd, (uint8_t *)dst + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO; /* the file shrank under us */
		got += (size_t)r;
	}
	return 0;
}

/* One segment's file bytes to dst (its place in guest RAM). From a
 * descriptor, the page-aligned middle of a segment whose file offset and
 * address agree within a page is mapped from the file (gm_map_file: the
 * page cache's pages, shared by every VM that boots this kernel, and no
 * copy before the guest's first touch); its ends, and anything that cannot
 * be mapped, are read with pread. */
static int seg_load(const struct elf_src *s, const Elf64_Phdr *ph, uint8_t *dst)
{
	uint64_t skew = ph->p_paddr % GM_PAGE_SIZE, head = skew ? GM_PAGE_SIZE - skew : 0, mid = 0, tail;

	if (s->map_gm && skew == ph->p_offset % GM_PAGE_SIZE && head < ph->p_filesz)
		mid = (ph->p_filesz - head) & ~(GM_PAGE_SIZE - 1);
	if (mid < ELF_MAP_MIN ||
	    gm_map_file(s->map_gm, ph->p_paddr + head, s->fd, ph->p_offset + head, mid) != 0)
		return src_read(s, ph->p_offset, dst, ph->p_filesz);
	tail = ph->p_filesz - head - mid;
	if (src_read(s, ph->p_offset, dst, head))
		return -EIO;
	return src_read(s, ph->p_offset + head + mid, dst + head + mid, tail);
}

static int elf_load_src(const struct gm *gm, const struct elf_src *src,
			struct kernel_image *out, const char **why)
{
	size_t len = src->len;
	Elf64_Ehdr eh;
	uint64_t lo = UINT64_MAX, hi = 0, entry = 0;
	int have_entry = 0;
	unsigned i, loads = 0;

	memset(out, 0, sizeof(*out));
	if (len < sizeof(eh))
		return fail(why, "ELF file shorter than its header", -ENOEXEC);
	if (src_read(src, 0, &eh, sizeof(eh)))
		return fail(why, "cannot read the ELF header", -EIO);
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG))
		return fail(why, "not an ELF file", -ENOEXEC);
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return fail(why, "ELF file is not 64-bit little-endian", -ENOEXEC);
	if (eh.e_machine != EM_X86_64)
		return fail(why, "ELF file is not for x86-64", -ENOEXEC);
	if (eh.e_type != ET_EXEC)
		return fail(why, "ELF file is not an executable", -ENOEXEC);
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
	    eh.e_phnum > ELF_MAX_PHDRS)
		return fail(why, "ELF program header table is malformed", -ENOEXEC);
	if (eh.e_phoff > len ||
	    (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > len - eh.e_phoff)
		return fail(why, "ELF program headers run past the end of the file", -ENOEXEC);

	for (i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		uint8_t *dst;

		if (src_read(src, eh.e_phoff + (uint64_t)i * sizeof(ph), &ph, sizeof(ph)))
			return fail(why, "cannot read the ELF program headers", -EIO);
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		if (ph.p_filesz > ph.p_memsz)
			return fail(why, "ELF segment file size exceeds its memory size", -ENOEXEC);
		if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset)
			return fail(why, "ELF segment runs past the end of the file (truncated?)", -ENOEXEC);
		if (ph.p_paddr < BOOT_HIMEM_START)
			return fail(why, "ELF segment would overwrite the boot area below 1 MiB", -ENOEXEC);
		dst = gm_ptr(gm, ph.p_paddr, ph.p_memsz);
		if (!dst)
			return fail(why, "ELF segment does not fit in guest RAM (give the guest more --mem)", -ENOMEM);
		if (seg_load(src, &ph, dst))
			return fail(why, "cannot read an ELF segment", -EIO);
		memset(dst + ph.p_filesz, 0, ph.p_memsz - ph.p_filesz);
		if (ph.p_paddr < lo)
			lo = ph.p_paddr;
		if (ph.p_paddr + ph.p_memsz > hi)
			hi = ph.p_paddr + ph.p_memsz;
		/* The entry may be given as a physical address (vmlinux) or a
		 * virtual one inside a segment: translate it through the
		 * segment that holds it. */
		if (!have_entry && eh.e_entry >= ph.p_paddr && eh.e_entry - ph.p_paddr < ph.p_memsz) {
			entry = eh.e_entry;
			have_entry = 1;
		} else if (!have_entry && eh.e_entry >= ph.p_vaddr &&
			   eh.e_entry - ph.p_vaddr < ph.p_memsz) {
			entry = ph.p_paddr + (eh.e_entry - ph.p_vaddr);
			have_entry = 1;
		}
		loads++;
	}
	if (loads == 0)
		return fail(why, "ELF file has no loadable segment", -ENOEXEC);
	if (!have_entry)
		return fail(why, "ELF entry point is outside every loaded segment", -ENOEXEC);
	out->entry = entry;
	out->load_lo = lo;
	out->load_hi = hi;
	return 0;
}

int elf_load(const struct gm *gm, const uint8_t *data, size_t len,
	     struct kernel_image *out, const char **why)
{
	const struct elf_src src = { .data = data, .fd = -1, .len = len, .map_gm = NULL };

	return elf_load_src(gm, &src, out, why);
}

int elf_load_fd(struct gm *gm, int fd, size_t len, struct kernel_image *out, const char **why)
{
	const struct elf_src src = { .data = NULL, .fd = fd, .len = len, .map_gm = gm };

	return elf_load_src(gm, &src, out, why);
}

int kernel_load(const struct gm *gm, const uint8_t *data, size_t len,
		struct kernel_image *out, const char **why)
{
	if (len >= SELFMAG && !memcmp(data, ELFMAG, SELFMAG))
		return elf_load(gm, data, len, out, why);
	return bzimage_load(gm, data, len, out, why);
}
