/* bzImage loader, 64-bit boot protocol (Documentation/arch/x86/boot.rst):
 * the setup header is checked, the protected-mode kernel is copied to its
 * preferred load address and entered at load address + 0x200. */
#include "boot/loader.h"
#include "boot/layout.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define HDR_OFFSET 0x1f1u

static int fail(const char **why, const char *msg, int err)
{
	if (why)
		*why = msg;
	return err;
}

int bzimage_load(const struct gm *gm, const uint8_t *data, size_t len,
		 struct kernel_image *out, const char **why)
{
	struct setup_header h;
	uint64_t setup_len, payload_len, load, need;
	uint32_t hdr_len;
	uint8_t *dst;

	memset(out, 0, sizeof(*out));
	if (len < HDR_OFFSET + sizeof(h))
		return fail(why, "file is too short to be a bzImage or an ELF vmlinux", -ENOEXEC);
	memcpy(&h, data + HDR_OFFSET, sizeof(h));
	if (h.boot_flag != 0xaa55 || h.header != 0x53726448)
		return fail(why, "not a kernel image (no ELF magic, no bzImage \"HdrS\" header)", -ENOEXEC);
	if (h.version < 0x020c)
		return fail(why, "bzImage boot protocol older than 2.12 (no 64-bit entry)", -ENOEXEC);
	if (!(h.xloadflags & XLF_KERNEL_64))
		return fail(why, "bzImage has no 64-bit entry point (XLF_KERNEL_64)", -ENOEXEC);
	if (!(h.loadflags & LOADED_HIGH))
		return fail(why, "bzImage is not a high-loaded kernel", -ENOEXEC);
	/* The header ends where the jump at 0x200 lands: 0x202 + its offset. */
	hdr_len = 0x202u + data[0x201] - HDR_OFFSET;
	if (hdr_len > sizeof(h))
		hdr_len = sizeof(h);
	setup_len = ((uint64_t)(h.setup_sects ? h.setup_sects : 4) + 1) * 512;
	if (setup_len >= len)
		return fail(why, "bzImage is truncated (no protected-mode kernel after the setup code)", -ENOEXEC);
	payload_len = len - setup_len;
	if (payload_len <= 0x200)
		return fail(why, "bzImage kernel is too small to hold its 64-bit entry (at +0x200)", -ENOEXEC);
	/* syssize counts 16-byte paragraphs, rounded up. */
	if (h.syssize && (uint64_t)h.syssize * 16 > payload_len + 15)
		return fail(why, "bzImage is truncated (shorter than its header's syssize)", -ENOEXEC);
	load = h.pref_address ? h.pref_address : BOOT_KERNEL_LOAD;
	if (load < BOOT_HIMEM_START)
		return fail(why, "bzImage asks to be loaded below 1 MiB", -ENOEXEC);
	if (h.kernel_alignment && (h.kernel_alignment & (h.kernel_alignment - 1)))
		return fail(why, "bzImage kernel_alignment is not a power of two", -ENOEXEC);
	if (h.kernel_alignment && load % h.kernel_alignment)
		return fail(why, "bzImage preferred address is not aligned as it requires", -ENOEXEC);
	/* init_size: memory the kernel needs from its load address while it
	 * decompresses itself. */
	need = h.init_size > payload_len ? h.init_size : payload_len;
	dst = gm_ptr(gm, load, need);
	if (!dst)
		return fail(why, "bzImage does not fit in guest RAM (give the guest more --mem)", -ENOMEM);
	memcpy(dst, data + setup_len, payload_len);
	out->entry = load + 0x200;
	out->load_lo = load;
	out->load_hi = load + need;
	out->is_bzimage = 1;
	out->hdr = h;
	out->hdr_len = hdr_len;
	return 0;
}
