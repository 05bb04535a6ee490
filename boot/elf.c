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

/* Where the file's bytes come from: a buffer (tests, the fuzzer, a mapped
 * file) or a descriptor read with pread, straight into guest memory. */
struct elf_src {
	const uint8_t *data; /* NULL: read fd */
	int fd;
	size_t len;
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

/* One segment's file bytes to dst, its place in guest RAM: from a
 * descriptor, sendfile into the memfd (no page fault, no copy through this
 * process: gm_load_file), falling back to pread where that is refused
 * (not a memfd, a file sendfile cannot read); from a buffer, memcpy. */
static int seg_load(const struct gm *gm, const struct elf_src *s, const Elf64_Phdr *ph, uint8_t *dst)
{
	int r;

	if (!s->data && ph->p_filesz) {
		r = gm_load_file(gm, ph->p_paddr, s->fd, ph->p_offset, ph->p_filesz);
		if (r != -EOPNOTSUPP && r != -EINVAL)
			return r;
	}
	return src_read(s, ph->p_offset, dst, ph->p_filesz);
}

/* Zeroes a segment's bss (len bytes at gpa, p its host address): the
 * partial pages at its ends with memset, the whole pages between given
 * back (gm_discard: a memfd's pages are freed, and read as zeros without
 * being written or even faulted in now; a vmlinux's bss is 2.5 MB). */
static void bss_clear(const struct gm *gm, uint64_t gpa, uint8_t *p, uint64_t len)
{
	uint64_t head = (GM_PAGE_SIZE - gpa % GM_PAGE_SIZE) % GM_PAGE_SIZE, mid;

	if (head >= len) {
		memset(p, 0, len);
		return;
	}
	mid = (len - head) & ~(GM_PAGE_SIZE - 1);
	memset(p, 0, head);
	/* Only the memfd reads as zeros once given back: a private
	 * mapping would read as its file again. */
	if (mid && (gm->private_map || gm->fd < 0 || gm_discard(gm, gpa + head, mid)))
		memset(p + head, 0, mid);
	memset(p + head + mid, 0, len - head - mid);
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
		/* From a descriptor: copied inside the kernel where guest RAM
		 * is a memfd (gm_load_file), else one pread into guest RAM. */
		if (seg_load(gm, src, &ph, dst))
			return fail(why, "cannot read an ELF segment", -EIO);
		bss_clear(gm, ph.p_paddr + ph.p_filesz, dst + ph.p_filesz, ph.p_memsz - ph.p_filesz);
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
	const struct elf_src src = { .data = data, .fd = -1, .len = len };

	return elf_load_src(gm, &src, out, why);
}

int elf_load_fd(const struct gm *gm, int fd, size_t len, struct kernel_image *out, const char **why)
{
	const struct elf_src src = { .data = NULL, .fd = fd, .len = len };

	return elf_load_src(gm, &src, out, why);
}

int kernel_load(const struct gm *gm, const uint8_t *data, size_t len,
		struct kernel_image *out, const char **why)
{
	if (len >= SELFMAG && !memcmp(data, ELFMAG, SELFMAG))
		return elf_load(gm, data, len, out, why);
	return bzimage_load(gm, data, len, out, why);
}
