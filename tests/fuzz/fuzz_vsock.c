/* libFuzzer target: guest-to-host vsock packets (any layout, any header)
 * through the device's tx handling, with a host listener on port 1000 so
 * connections get established and the state machine is reached. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/virtio_vsock.h"
#include "tests/fuzz/fuzz_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static struct vsock_dev v;
static int lfd = -1;

static void setup(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (evloop_init(&v.vdev.loop, "fuzz-vsock"))
		abort();
	v.opt.cid = 3;
	v.next_port = VSOCK_HOST_PORT_FIRST;
	snprintf(v.opt.uds, sizeof(v.opt.uds), "/tmp/vmm-fuzz-vsock-%d", (int)getpid());
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_1000", v.opt.uds);
	unlink(sa.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1024))
		abort();
	v.rl.interval_ns = 1000000000ull;
	v.rl.burst = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static int ready;
	struct vq q;
	int r, n = 0, fd;

	if (!ready) {
		setup();
		ready = 1;
	}
	if (fr_setup(data, len, &q))
		return 0;
	for (;;) {
		const char *why = NULL;

		r = vq_pop(&q, &v.chain, &why);
		if (r <= 0 || ++n > 32)
			break;
		vsock_handle_tx(&v, &v.chain);
		vq_push(&q, v.chain.head, 0);
		if (v.nr_conns > VSOCK_MAX_CONNS || v.nr_rst > VSOCK_RST_QUEUE)
			abort();
	}
	/* Forget every connection between inputs. */
	virtio_vsock_transport_reset(&v);
	while ((fd = accept(lfd, NULL, NULL)) >= 0)
		close(fd);
	return 0;
}
