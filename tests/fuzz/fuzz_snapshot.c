/* libFuzzer target: the snapshot readers a tampered state file reaches.
 * The input is checked as a whole state file (snapfile_check), then read
 * as a virtio-mmio transport record into a live device (every value must
 * be checked before it is applied; a ready queue must then serve without
 * reading outside guest RAM), and as a serial record. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devices/devices.h"
#include "devices/virtio_mmio.h"
#include "tests/fuzz/fuzz_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static struct vq_chain chain;

static void echo_notify(struct virtio_dev *d, unsigned q)
{
	const char *why;
	int r, n = 0;

	while (n++ < 8 && (r = vq_pop(&d->q[q].vq, &chain, &why)) > 0)
		vq_push(&d->q[q].vq, chain.head, (uint32_t)chain.read_len);
}

static const struct virtio_dev_ops ops = {
	.device_id = 2,
	.nr_queues = 2,
	.queue_max = 256,
	.queue_notify = echo_notify,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct virtio_dev d;
	static struct serial s;
	static uint8_t config[8];
	static int ready;
	const uint8_t *body;
	size_t blen;
	const char *why = NULL;
	struct srd r;
	unsigned q;

	if (!ready) {
		if (virtio_mmio_init(&d, &ops, "fuzz", -1, fr_gm(), 0xd0000000, 5,
				     (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC),
				     config, sizeof(config)) ||
		    serial_init(&s, NULL, 0x3f8, 4, -1))
			abort();
		evloop_pause(&d.loop);
		ready = 1;
	}
	(void)snapfile_check(data, len, &body, &blen, &why);

	sr_init(&r, data, len);
	if (virtio_mmio_restore(&d, &r, &why) == 0) {
		/* Accepted: every ready ring lies in RAM; serving it must stay
		 * inside RAM too (ASan would see a stray access). */
		for (q = 0; q < ops.nr_queues; q++)
			if (d.q[q].ready && virtio_live(&d))
				echo_notify(&d, q);
	}
	sr_init(&r, data, len);
	(void)serial_restore(&s, &r);
	return 0;
}
