/* libFuzzer target: the MMDS as a guest reaches it (devices/mmds_net.c,
 * devices/mmds.c): a sequence of Ethernet frames, each [len u16][flags
 * u8][bytes], fed to mmds_net_input. Flag bit 0 aims the frame at the MMDS
 * (IPv4 ethertype, destination address, TCP port 80), so the fuzzer spends
 * its time in the TCP state machine and the HTTP handling rather than in
 * finding the address; bit 1 drains the queue towards the guest (as the
 * device does), bit 2 advances the clock by a minute (idle connections,
 * token expiry); bits 3-4 set the version and IMDS compatibility; bit 5
 * resets the device (mmds_net_reset) after the frame. After every frame no
 * connection may hold more than one answer (a guest that pipelines and
 * never acknowledges must not grow the VMM), and the queue stays within
 * its bounds. One
 * store and one responder live across inputs, as in a running VM. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devices/mmds.h"
#include "devices/mmds_net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

/* The largest single answer for the store below: a 1200-byte text body or
 * the store, and the headers. */
#define MAX_ANSWER 2048u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct mmds m;
	static struct mmds_net s;
	static uint64_t now;
	static int ready;
	uint8_t f[2048], out[MMDS_NET_FRAME];
	char why[128];
	size_t off = 0;

	if (!ready) {
		static const char store[] = "{\"latest\":{\"meta-data\":{\"ami-id\":\"ami-1\",\"n\":5,\"l\":[1,{\"x\":\"y\"}]}}}";

		if (mmds_init(&m) || mmds_put(&m, store, sizeof(store) - 1, why, sizeof(why)))
			abort();
		mmds_net_init(&s, &m);
		ready = 1;
	}
	while (off + 3 <= len) {
		size_t n = (size_t)(data[off] | data[off + 1] << 8) % sizeof(f);
		uint8_t flags = data[off + 2];

		off += 3;
		if (n > len - off)
			n = len - off;
		memcpy(f, data + off, n);
		off += n;
		m.version = (flags & 8) ? MMDS_V2 : MMDS_V1;
		m.imds_compat = (flags & 16) != 0;
		if ((flags & 1) && n >= 14 + 20 + 20) {
			f[12] = 0x08;
			f[13] = 0x00;
			f[14] = (uint8_t)((f[14] & 0x0f) | 0x40);
			f[30] = 169;
			f[31] = 254;
			f[32] = 169;
			f[33] = 254;
			f[23] = 6;
			f[20] &= 0x80; /* not a fragment */
			{
				size_t ihl = (size_t)(f[14] & 15) * 4;

				if (ihl >= 20 && 14 + ihl + 4 <= n) {
					f[14 + ihl + 2] = 0;
					f[14 + ihl + 3] = 80;
				}
				f[16] = (uint8_t)((n - 14) >> 8);
				f[17] = (uint8_t)(n - 14);
			}
		}
		if (flags & 4)
			now += 60ull * 1000000000ull;
		now += 1000;
		if (mmds_net_wants(&s, f, n))
			mmds_net_input(&s, f, n, now);
		for (unsigned i = 0; i < MMDS_NET_CONNS; i++)
			if (s.conns[i].tx_len > MAX_ANSWER || s.conns[i].rx_len > MMDS_MAX_REQUEST)
				abort();
		if (s.q_count > MMDS_NET_QUEUE)
			abort();
		if (flags & 32) {
			mmds_net_reset(&s);
			if (mmds_net_pending(&s))
				abort();
		}
		if (flags & 2) {
			while (mmds_net_pop(&s, out, sizeof(out)))
				mmds_net_pump(&s);
		}
	}
	/* the device drains the queue before the next batch */
	while (mmds_net_pop(&s, out, sizeof(out)))
		mmds_net_pump(&s);
	return 0;
}
