/* libFuzzer target: kernel image loading (ELF and bzImage), then initrd
 * placement and boot_params, on a small guest memory. Any input must end in
 * a clean error or a load that stays inside guest RAM. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "boot/loader.h"
#include "vmm/base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct gm gm;
	static int ready;
	struct kernel_image k;
	const char *why = NULL;
	uint64_t igpa;

	if (!ready) {
		log_set_level(LOG_ERROR);
		if (gm_create_x86(&gm, 32ull << 20))
			abort();
		ready = 1;
	}
	if (kernel_load(&gm, data, len, &k, &why) == 0) {
		if (k.load_hi > gm.total || k.entry < k.load_lo || k.entry >= k.load_hi)
			abort();
		why = NULL;
		if (boot_place_initrd(&gm, &k, len, &igpa, &why) != 0 && !why)
			abort();
		why = NULL;
		if (boot_params_write(&gm, &k, "console=ttyS0", 0, 0, &why) != 0 && !why)
			abort();
	} else if (!why) {
		abort(); /* every refusal says why */
	}
	return 0;
}
