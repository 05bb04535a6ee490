/* Shared by the virtqueue and virtio-blk fuzzers: lays fuzzer bytes out as
 * a driver's rings in a fake guest memory. Input layout:
 *   byte 0: flags (bit 0 INDIRECT_DESC, bit 1 EVENT_IDX), byte 1: log2 size
 *   then: descriptor table (16 * size bytes), avail ring (6 + 2 * size),
 *   then the rest fills the data area (buffers and indirect tables may
 *   point anywhere, in RAM or not). */
#ifndef TESTS_FUZZ_RING_H
#define TESTS_FUZZ_RING_H

#include <stdlib.h>
#include <string.h>

#include "devices/virtqueue.h"
#include "vmm/base/log.h"

#define FR_RAM (256u * 1024)
#define FR_DESC 0x1000u
#define FR_AVAIL 0x3000u
#define FR_USED 0x4000u
#define FR_DATA 0x8000u

static struct gm *fr_gm(void)
{
	static struct gm gm;
	static int ready;
	const struct gm_region r = { .gpa = 0, .size = FR_RAM };

	if (!ready) {
		log_set_level(LOG_ERROR);
		if (gm_create(&gm, &r, 1))
			abort();
		ready = 1;
	}
	return &gm;
}

/* Returns 0 and an initialised queue, or -1 if the input is too short. */
static int fr_setup(const uint8_t *data, size_t len, struct vq *q)
{
	struct gm *gm = fr_gm();
	struct vq_config c;
	size_t need, rest;
	uint16_t size;
	const char *why;

	if (len < 2)
		return -1;
	size = (uint16_t)(1u << (data[1] % 6)); /* 1..32 */
	need = 2 + 16u * size + 6 + 2u * size;
	if (len < need)
		return -1;
	memset(gm->map, 0, FR_RAM);
	memcpy(gm_ptr(gm, FR_DESC, 16u * size), data + 2, 16u * size);
	memcpy(gm_ptr(gm, FR_AVAIL, 6 + 2u * size), data + 2 + 16u * size, 6 + 2u * size);
	rest = len - need;
	if (rest > FR_RAM - FR_DATA)
		rest = FR_RAM - FR_DATA;
	memcpy(gm_ptr(gm, FR_DATA, rest), data + need, rest);
	c.size = size;
	c.desc = FR_DESC;
	c.avail = FR_AVAIL;
	c.used = FR_USED;
	if (vq_init(q, gm, &c, 256, data[0] & 2, data[0] & 1, &why))
		abort(); /* the layout above is always valid */
	return 0;
}

#endif
