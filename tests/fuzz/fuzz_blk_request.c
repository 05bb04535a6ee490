/* libFuzzer target: virtio-blk requests, parsed and executed against a
 * 1 MiB in-memory image, from chains the fuzzer lays out. */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devices/virtio_blk.h"
#include "tests/fuzz/fuzz_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct virtio_blk b;
	static int ready;
	struct vq q;
	int r, n = 0;

	if (!ready) {
		b.fd = memfd_create("fuzz-blk", 0);
		if (b.fd < 0 || ftruncate(b.fd, 1 << 20))
			abort();
		b.capacity = (1 << 20) / 512;
		memcpy(b.serial, "fuzz", 4);
		ready = 1;
	}
	if (fr_setup(data, len, &q))
		return 0;
	b.ro = data[0] & 4;
	b.vdev.driver_features = (data[0] & 8) ? ~0ull : 0;
	for (;;) {
		const char *why = NULL;
		int64_t w;

		r = vq_pop(&q, &b.chain, &why);
		if (r <= 0 || ++n > 16)
			break;
		w = virtio_blk_handle(&b, &b.chain);
		if (w > (int64_t)b.chain.write_len)
			abort(); /* never claims more than the guest gave */
		if (w >= 0)
			vq_push(&q, b.chain.head, (uint32_t)w);
	}
	return 0;
}
