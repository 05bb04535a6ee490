/* libFuzzer target: the split-virtqueue chain walker and its cursors. Every
 * chain it accepts must lie in guest RAM; every refusal must say why. */
#include <stdint.h>

#include "tests/fuzz/fuzz_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct vq_chain c;
	static uint8_t sink[1 << 16];
	struct vq q;
	int r, n = 0;

	if (fr_setup(data, len, &q))
		return 0;
	for (;;) {
		const char *why = NULL;
		struct vq_reader rd;
		struct vq_writer wr, tail;
		struct iovec iov[8];

		r = vq_pop(&q, &c, &why);
		if (r < 0 && !why)
			abort();
		if (r <= 0 || ++n > 64)
			break;
		if (c.read_len > UINT32_MAX || c.write_len > UINT32_MAX)
			abort();
		vq_reader_init(&rd, &c);
		vq_read(&rd, sink, sizeof(sink));
		vq_writer_init(&wr, &c);
		if (vq_writer_split_tail(&wr, 1, &tail) == 0)
			vq_write(&tail, "s", 1);
		vq_writer_iov(&wr, wr.left < 4096 ? wr.left : 4096, iov, 8);
		vq_write(&wr, sink, sizeof(sink));
		vq_push(&q, c.head, (uint32_t)c.write_len);
		vq_should_notify(&q);
	}
	return 0;
}
