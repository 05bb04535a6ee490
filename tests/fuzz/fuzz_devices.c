/* libFuzzer target: the entropy and balloon devices' request paths
 * (virtio_rng_handle, virtio_balloon_pfns, _read_stats, _report) on chains
 * the fuzzer lays out (fuzz_ring.h). Byte 0 bits 2-4 pick the path. */
#include <stdint.h>
#include <string.h>

#include "devices/virtio_balloon.h"
#include "devices/virtio_rng.h"
#include "tests/fuzz/fuzz_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static long pattern(void *buf, size_t n)
{
	memset(buf, 0x5a, n);
	return n > 3 ? (long)n - 3 : (long)n; /* short reads too */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct virtio_rng rng;
	static struct virtio_balloon bal;
	struct vq q;
	unsigned path;
	int r, n = 0;

	if (fr_setup(data, len, &q))
		return 0;
	rng.fill = pattern;
	rng.vdev.gm = fr_gm();
	bal.vdev.gm = fr_gm();
	path = (data[0] >> 2) & 7;
	for (;;) {
		struct vq_chain *c = path ? &bal.chain : &rng.chain;
		const char *why = NULL;
		uint64_t before = bal.inflated + bal.deflated;
		int64_t w = 0;

		r = vq_pop(&q, c, &why);
		if (r <= 0 || ++n > 16)
			break;
		switch (path) {
		case 0:
			w = virtio_rng_handle(&rng, c);
			if (w > (int64_t)c->write_len || w > (int64_t)RNG_MAX_REQ)
				abort(); /* never claims more than the guest gave */
			if (w < 0 && !c->nr_read && c->write_len)
				abort();
			break;
		case 1:
		case 2:
			w = virtio_balloon_pfns(&bal, c, path == 1);
			if (w < 0 && bal.inflated + bal.deflated != before)
				abort(); /* a refused request touched no page */
			break;
		case 3:
			w = virtio_balloon_read_stats(&bal, c);
			break;
		default:
			w = virtio_balloon_report(&bal, c);
			break;
		}
		if (w < 0)
			break; /* the device would now need reset */
		vq_push(&q, c->head, (uint32_t)w);
	}
	return 0;
}
