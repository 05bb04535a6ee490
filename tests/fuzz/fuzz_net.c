/* libFuzzer target: virtio-net's guest-facing paths on rings the fuzzer
 * lays out (tests/fuzz/fuzz_ring.h). Byte 0 bit 2: the transmit path (each
 * chain checked and written to /dev/null as the TAP) or the receive path (a
 * frame from the input's tail placed into the driver's rx buffers); bits
 * 3-7 pick the negotiated features (mergeable buffers, checksum and TSO
 * offloads both ways). The MMDS is on: a transmitted frame for its
 * address goes to devices/mmds_net.c instead of the TAP. */
#include <fcntl.h>
#include <stdlib.h>
#include <stdint.h>
#include <unistd.h>

#include "devices/virtio_net.h"
#include "tests/fuzz/fuzz_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static uint64_t features(uint8_t b)
{
	uint64_t f = 1ull << VIRTIO_F_VERSION_1;

	if (b & 0x08)
		f |= 1ull << VIRTIO_NET_F_MRG_RXBUF;
	if (b & 0x10)
		f |= (1ull << VIRTIO_NET_F_CSUM) | (1ull << VIRTIO_NET_F_GUEST_CSUM);
	if (b & 0x20)
		f |= (1ull << VIRTIO_NET_F_HOST_TSO4) | (1ull << VIRTIO_NET_F_GUEST_TSO4);
	if (b & 0x40)
		f |= (1ull << VIRTIO_NET_F_HOST_TSO6) | (1ull << VIRTIO_NET_F_GUEST_TSO6);
	return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct virtio_net n;
	static uint8_t frame[NET_HDR_LEN + NET_MAX_FRAME];
	static int ready;
	static struct mmds mm;
	char why[128];
	const struct log_ratelimit rl = LOG_RATELIMIT_INIT;
	struct vq q;
	int i;

	if (!ready) {
		n.tap.fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (n.tap.fd < 0)
			abort();
		n.vdev.irq_fd = -1;
		n.rx_frame = frame;
		n.rl = rl;
		n.vdev.rl = rl;
		/* the MMDS on this interface: frames for 169.254.169.254 are its */
		static const char store[] = "{\"a\":{\"b\":\"c\"}}";

		if (mmds_init(&mm) || mmds_put(&mm, store, sizeof(store) - 1, why, sizeof(why)) ||
		    virtio_net_enable_mmds(&n, &mm))
			abort();
		ready = 1;
	}
	if (fr_setup(data, len, &q))
		return 0;
	n.vdev.driver_features = features(data[0]);
	atomic_store(&n.vdev.status, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
					     VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
	if (data[0] & 4) {
		for (i = 0; i < 16; i++) {
			const char *why = NULL;

			if (vq_pop(&q, &n.chain, &why) <= 0)
				break;
			if (virtio_net_tx_one(&n, &n.chain) == 0)
				vq_push(&q, n.chain.head, 0);
		}
		while (mmds_net_pending(n.mmds))
			(void)mmds_net_pop(n.mmds, frame, sizeof(frame));
		return 0;
	}
	/* rx: the last bytes of the input are the frame (header included). */
	n.vdev.q[NET_QUEUE_RX].vq = q;
	n.rx_len = (uint32_t)(len < sizeof(frame) ? len : sizeof(frame));
	if (n.rx_len < NET_HDR_LEN + NET_ETH_HLEN)
		return 0;
	memcpy(frame, data + len - n.rx_len, n.rx_len);
	for (i = 0; i < 4 && n.rx_len; i++) {
		int pushed = 0, r = virtio_net_rx_place(&n, &pushed);

		if (r != 0)
			break;
	}
	n.rx_len = 0;
	return 0;
}
