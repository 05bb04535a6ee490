/* virtio-net: option parsing, the pure header checks, the token bucket, and
 * the device driven through the transport with fake guest memory and a
 * SOCK_SEQPACKET socket standing in for the TAP (it keeps frame boundaries
 * as a TAP does). No KVM, no TAP, no privileges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include "devices/virtio_net.h"
#include "tests/unit/virtio_driver.h"
#include "tests/unit/vq_builder.h"

/* ---- options ------------------------------------------------------------- */

static void options(void **state)
{
	struct net_options o;
	const char *why = NULL;
	char buf[160];

	(void)state;
	assert_int_equal(net_options_parse("tap=vmm0", &o, &why), 0);
	assert_string_equal(o.tap, "vmm0");
	assert_int_equal(o.mac[0] & 3, 2); /* made up: locally administered unicast */
	assert_int_equal(o.ip, 0);
	assert_int_equal(net_options_parse("tap=t1,mac=02:11:22:33:44:55,ip=172.16.0.2/30,gw=172.16.0.1,"
					   "dns=1.1.1.1,host_ip=172.16.0.1,rx_bps=10M,tx_pps=1k,offload=off",
					   &o, &why), 0);
	assert_int_equal(o.mac[5], 0x55);
	assert_int_equal(o.prefix, 30);
	assert_int_equal(o.host_prefix, 24);
	assert_int_equal(o.host_ip, inet_addr("172.16.0.1"));
	assert_int_equal(o.rx.bytes_per_s, 10000000);
	assert_int_equal(o.tx.ops_per_s, 1000);
	assert_int_equal(o.no_offload, 1);
	assert_int_equal(net_guest_cmdline(&o, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "vmm.net=02:11:22:33:44:55,ip=172.16.0.2/30,gw=172.16.0.1,dns=1.1.1.1");
	assert_int_equal(net_guest_cmdline(&o, buf, 20), -ENOSPC);

	assert_int_equal(net_options_parse("mac=02:11:22:33:44:55", &o, &why), -EINVAL);      /* no tap */
	assert_int_equal(net_options_parse("tap=", &o, &why), -EINVAL);
	assert_int_equal(net_options_parse("tap=a23456789012345678", &o, &why), -EINVAL);   /* > 15 */
	assert_int_equal(net_options_parse("tap=x,mac=01:11:22:33:44:55", &o, &why), -EINVAL); /* multicast */
	assert_int_equal(net_options_parse("tap=x,mac=02:11:22:33:44", &o, &why), -EINVAL);
	assert_int_equal(net_options_parse("tap=x,mac=02:11:22:33:44:55:66", &o, &why), -EINVAL);
	assert_int_equal(net_options_parse("tap=x,ip=10.0.0.300/24", &o, &why), -EINVAL);
	assert_int_equal(net_options_parse("tap=x,ip=10.0.0.2/33", &o, &why), -EINVAL);
	assert_int_equal(net_options_parse("tap=x,gw=10.0.0.1", &o, &why), -EINVAL);       /* gw without ip */
	assert_int_equal(net_options_parse("tap=x,rx_bps=fast", &o, &why), -EINVAL);
	assert_int_equal(net_options_parse("tap=x,rx_bps=-5", &o, &why), -EINVAL);
	assert_int_equal(net_options_parse("tap=x,offload=maybe", &o, &why), -EINVAL);
	assert_int_equal(net_options_parse("tap=x,color=red", &o, &why), -EINVAL);
	assert_non_null(why);
}

/* ---- header checks ------------------------------------------------------- */

#define F(b) (1ull << (b))

static void tx_check(void **state)
{
	struct virtio_net_hdr_v1 h;
	const char *why = NULL;
	uint64_t all = F(VIRTIO_NET_F_CSUM) | F(VIRTIO_NET_F_HOST_TSO4) | F(VIRTIO_NET_F_HOST_TSO6);

	(void)state;
	memset(&h, 0, sizeof(h));
	assert_int_equal(net_tx_check(&h, 60, 0, &why), 0);
	assert_int_equal(net_tx_check(&h, 13, 0, &why), -EINVAL);               /* runt */
	assert_int_equal(net_tx_check(&h, NET_MAX_FRAME + 1, all, &why), -EINVAL); /* oversized */
	h.flags = VIRTIO_NET_HDR_F_DATA_VALID;                                   /* rx-only flag */
	assert_int_equal(net_tx_check(&h, 60, all, &why), -EINVAL);
	h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	h.csum_start = 34;
	h.csum_offset = 16;
	assert_int_equal(net_tx_check(&h, 60, 0, &why), -EINVAL);                /* CSUM not negotiated */
	assert_int_equal(net_tx_check(&h, 60, all, &why), 0);
	assert_int_equal(net_tx_check(&h, 51, all, &why), -EINVAL);              /* field beyond the frame */
	h.csum_start = 0xffff;
	h.csum_offset = 0xffff;                                                  /* no 16-bit wrap */
	assert_int_equal(net_tx_check(&h, 60000, all, &why), -EINVAL);
	h.csum_start = 34;
	h.csum_offset = 16;
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	h.gso_size = 1448;
	h.hdr_len = 66;
	assert_int_equal(net_tx_check(&h, 9000, all, &why), 0);
	assert_int_equal(net_tx_check(&h, 9000, F(VIRTIO_NET_F_CSUM), &why), -EINVAL); /* no HOST_TSO4 */
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV6;
	assert_int_equal(net_tx_check(&h, 9000, all, &why), 0);
	assert_int_equal(net_tx_check(&h, 9000, all & ~F(VIRTIO_NET_F_HOST_TSO6), &why), -EINVAL);
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN;          /* HOST_ECN not offered */
	assert_int_equal(net_tx_check(&h, 9000, all, &why), -EINVAL);
	h.gso_type = VIRTIO_NET_HDR_GSO_UDP;
	assert_int_equal(net_tx_check(&h, 9000, all, &why), -EINVAL);
	h.gso_type = 9;
	assert_int_equal(net_tx_check(&h, 9000, all, &why), -EINVAL);
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	h.gso_size = 0;
	assert_int_equal(net_tx_check(&h, 9000, all, &why), -EINVAL);
	h.gso_size = 1448;
	h.flags = 0;                                                             /* TSO without csum */
	assert_int_equal(net_tx_check(&h, 9000, all, &why), -EINVAL);
	h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	h.hdr_len = 9001;
	assert_int_equal(net_tx_check(&h, 9000, all, &why), -EINVAL);
}

static void rx_fix(void **state)
{
	struct virtio_net_hdr_v1 h;
	uint64_t g = F(VIRTIO_NET_F_GUEST_CSUM) | F(VIRTIO_NET_F_GUEST_TSO4);

	(void)state;
	memset(&h, 0, sizeof(h));
	h.flags = VIRTIO_NET_HDR_F_DATA_VALID;
	h.num_buffers = 7;
	assert_int_equal(net_rx_fix(&h, 0), 0);
	assert_int_equal(h.flags, 0); /* 5.1.6.3.2: zero without GUEST_CSUM */
	assert_int_equal(h.num_buffers, 0);
	h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	assert_int_equal(net_rx_fix(&h, 0), -EINVAL);
	assert_int_equal(net_rx_fix(&h, g), 0);
	h.flags = 0xff;
	assert_int_equal(net_rx_fix(&h, g), 0);
	assert_int_equal(h.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID);
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	assert_int_equal(net_rx_fix(&h, g), 0);
	assert_int_equal(net_rx_fix(&h, F(VIRTIO_NET_F_GUEST_CSUM)), -EINVAL);
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV6;
	assert_int_equal(net_rx_fix(&h, g), -EINVAL);
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN;
	assert_int_equal(net_rx_fix(&h, g), -EINVAL);
	h.gso_type = VIRTIO_NET_HDR_GSO_UDP;
	assert_int_equal(net_rx_fix(&h, g | F(VIRTIO_NET_F_GUEST_TSO6)), -EINVAL);
}

/* ---- token bucket -------------------------------------------------------- */

static void ratelimit(void **state)
{
	struct ratelimit rl;
	uint64_t t = 1000000000ull, v;

	(void)state;
	rl_init(&rl, 0, 0, 0, 0, t);
	assert_false(rl_enabled(&rl));
	assert_int_equal(rl_take(&rl, 1ull << 40, t), 0);

	/* 1000 bytes/s, bucket 1000: full at start. */
	rl_init(&rl, 1000, 0, 0, 0, t);
	assert_true(rl_enabled(&rl));
	assert_int_equal(rl_take(&rl, 600, t), 0);
	assert_int_equal(rl_take(&rl, 400, t), 0);
	v = rl_take(&rl, 100, t);                        /* empty: 100 bytes take 0.1 s */
	assert_int_equal(v, 100000000);
	assert_int_equal(rl_take(&rl, 100, t + 50000000), 50000000);
	assert_int_equal(rl_take(&rl, 100, t + 100000000), 0);
	/* An operation larger than the bucket passes once the bucket is full. */
	assert_true(rl_take(&rl, 5000, t + 200000000) > 0);
	assert_int_equal(rl_take(&rl, 5000, t + 1100000000ull), 0);
	assert_true(rl_take(&rl, 1, t + 1100000000ull) > 0);
	/* Refill stops at the burst, even after a long idle time. */
	assert_int_equal(rl_take(&rl, 1000, t + 3600000000000ull), 0);
	assert_true(rl_take(&rl, 1, t + 3600000000000ull) > 0);
	/* A clock that goes backwards adds nothing. */
	assert_true(rl_take(&rl, 1, t) > 0);

	/* Operations: 2 per second, burst 2, with bytes unlimited. */
	rl_init(&rl, 0, 0, 2, 0, t);
	assert_int_equal(rl_take(&rl, 1 << 20, t), 0);
	assert_int_equal(rl_take(&rl, 1 << 20, t), 0);
	assert_int_equal(rl_take(&rl, 1, t), 500000000);
	/* Both: the longer wait wins, nothing is taken while waiting. */
	rl_init(&rl, 100, 100, 10, 1, t);
	assert_int_equal(rl_take(&rl, 100, t), 0);
	assert_int_equal(rl_take(&rl, 10, t + 50000000), 50000000); /* bytes: 5 more needed */
	assert_int_equal(rl_take(&rl, 10, t + 100000000), 0);
	/* Huge rates do not overflow. */
	rl_init(&rl, UINT64_MAX, 0, 0, 0, t);
	assert_int_equal(rl_take(&rl, 1000, t), 0);
	assert_int_equal(rl_take(&rl, 1000, t + 1000000000000ull), 0);

	assert_int_equal(rl_parse_rate("10M", &v), 0);
	assert_int_equal(v, 10000000);
	assert_int_equal(rl_parse_rate("1.5Gi", &v), 0);
	assert_int_equal(v, 1610612736);
	assert_int_equal(rl_parse_rate("800k", &v), 0);
	assert_int_equal(v, 800000);
	assert_int_equal(rl_parse_rate("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(rl_parse_rate("", &v), -EINVAL);
	assert_int_equal(rl_parse_rate("10X", &v), -EINVAL);
	assert_int_equal(rl_parse_rate("10Mb", &v), -EINVAL);
	assert_int_equal(rl_parse_rate("-1", &v), -EINVAL);
	assert_int_equal(rl_parse_rate("1e30", &v), -EINVAL);
}

/* ---- the device ---------------------------------------------------------- */

struct fx {
	struct vqb rx, tx;
	struct virtio_net n;
	int host;      /* our end of the fake TAP */
	uint64_t features;
};

#define F_BASE (F(VIRTIO_F_VERSION_1) | F(VIRTIO_F_EVENT_IDX) | F(VIRTIO_NET_F_MAC) | F(VIRTIO_NET_F_STATUS))
#define F_OFFL (F(VIRTIO_NET_F_CSUM) | F(VIRTIO_NET_F_GUEST_CSUM) | F(VIRTIO_NET_F_GUEST_TSO4) | \
		F(VIRTIO_NET_F_HOST_TSO4))

static int fx_open(struct fx *f, const struct net_options *o)
{
	struct tap t = { .fd = -1, .name = "fake0", .offloads = TAP_OFF_CSUM | TAP_OFF_TSO4 | TAP_OFF_TSO6 };
	int sv[2];

	if (vqb_init(&f->rx, 64))
		return -1;
	vqb_init_view(&f->tx, &f->rx, 1, 64);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -1;
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	t.fd = sv[0];
	f->host = sv[1];
	return virtio_net_init_tap(&f->n, o, &t, -1, &f->rx.gm, 0xd0000000, 5, 0);
}

static int fx_start(struct fx *f, uint64_t features)
{
	struct vq_config c[2] = { vqb_config(&f->rx), vqb_config(&f->tx) };

	f->features = features;
	return (vd_setup_n(&f->n.vdev, features, c, 2) & VIRTIO_STATUS_DRIVER_OK) ? 0 : -1;
}

static int setup_with(void **state, uint64_t features)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct net_options o;
	const char *why;

	if (!f || net_options_parse("tap=fake0,mac=02:00:00:00:00:07", &o, &why) || fx_open(f, &o) ||
	    fx_start(f, features))
		return -1;
	*state = f;
	return 0;
}

static int setup_plain(void **state) { return setup_with(state, F_BASE); }
static int setup_mrg(void **state) { return setup_with(state, F_BASE | F_OFFL | F(VIRTIO_NET_F_MRG_RXBUF)); }

static int teardown(void **state)
{
	struct fx *f = *state;

	virtio_net_destroy(&f->n);
	close(f->host);
	vqb_destroy(&f->rx);
	free(f);
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int wait_used(struct vqb *b, uint16_t want)
{
	double end = now() + 5;

	while ((int16_t)(vqb_used_idx(b) - want) < 0) {
		if (now() > end)
			return -1;
		usleep(1000);
	}
	return 0;
}

/* Sends a frame from the guest: header + payload over `split` descriptors. */
static uint16_t guest_send(struct fx *f, const struct virtio_net_hdr_v1 *h, const uint8_t *p, uint32_t plen,
			   int split)
{
	uint32_t lens[2];
	const int w[2] = { 0, 0 };
	uint16_t head = f->tx.next_desc;
	uint8_t *frame = malloc(sizeof(*h) + plen);
	unsigned n = split == 2 ? 2 : 1, i;
	uint32_t off = 0;

	memcpy(frame, h, sizeof(*h));
	memcpy(frame + sizeof(*h), p, plen);
	if (n == 1) {
		lens[0] = (uint32_t)sizeof(*h) + plen;
	} else {
		lens[0] = 5; /* the header itself split */
		lens[1] = (uint32_t)sizeof(*h) + plen - 5;
	}
	vqb_set_used_event(&f->tx, vqb_used_idx(&f->tx));
	head = vqb_chain(&f->tx, n, lens, w);
	for (i = 0; i < n; i++) {
		struct virtq_desc *d = vqb_desc(&f->tx, (uint16_t)(head + i));

		memcpy(gm_ptr(&f->tx.gm, d->addr, lens[i]), frame + off, lens[i]);
		off += lens[i];
	}
	free(frame);
	vd_notify(&f->n.vdev, NET_QUEUE_TX);
	return head;
}

static ssize_t host_recv(struct fx *f, void *buf, size_t len)
{
	struct pollfd p = { .fd = f->host, .events = POLLIN };

	if (poll(&p, 1, 5000) != 1)
		return -1;
	return recv(f->host, buf, len, 0);
}

static void post_rx(struct fx *f, unsigned n, uint32_t size)
{
	const uint32_t lens[] = { size };
	const int w[] = { 1 };
	unsigned i;

	for (i = 0; i < n; i++)
		vqb_chain(&f->rx, 1, lens, w);
	vqb_set_used_event(&f->rx, vqb_used_idx(&f->rx));
	vd_notify(&f->n.vdev, NET_QUEUE_RX);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed);
}

static void host_send(struct fx *f, const struct virtio_net_hdr_v1 *h, const uint8_t *p, size_t plen)
{
	struct iovec iov[2] = { { (void *)h, sizeof(*h) }, { (void *)p, plen } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };

	assert_int_equal(sendmsg(f->host, &m, 0), (ssize_t)(sizeof(*h) + plen));
}

static void tx_frames(void **state)
{
	struct fx *f = *state;
	struct virtio_net_hdr_v1 h = { 0 }, got_h;
	uint8_t p[1500], got[2000];
	ssize_t n;

	fill(p, sizeof(p), 1);
	guest_send(f, &h, p, 60, 1);
	n = host_recv(f, got, sizeof(got));
	assert_int_equal(n, 12 + 60);
	memcpy(&got_h, got, 12);
	assert_int_equal(got_h.flags, 0);
	assert_memory_equal(got + 12, p, 60);
	assert_int_equal(wait_used(&f->tx, 1), 0);
	assert_int_equal(vqb_used(&f->tx, 0).len, 0); /* tx buffers are only read */

	guest_send(f, &h, p, 1500, 2); /* header split over two descriptors */
	assert_int_equal(host_recv(f, got, sizeof(got)), 12 + 1500);
	assert_memory_equal(got + 12, p, 1500);
	assert_int_equal(wait_used(&f->tx, 2), 0);
	assert_int_equal(f->n.stats.tx_packets, 2);
	assert_int_equal(f->n.stats.tx_bytes, 1560);
}

/* Hostile transmit chains are dropped and counted; the device goes on. */
static void tx_malformed(void **state)
{
	struct fx *f = *state;
	struct virtio_net_hdr_v1 h = { 0 };
	uint8_t p[64], got[256];
	const uint32_t lens1[] = { 8 }, lens2[] = { 12 + 60, 16 };
	const int w1[] = { 0 }, w2[] = { 0, 1 };
	uint16_t used = 0;

	fill(p, sizeof(p), 2);
	vqb_set_used_event(&f->tx, 0);
	vqb_chain(&f->tx, 1, lens1, w1); /* shorter than the header */
	vd_notify(&f->n.vdev, NET_QUEUE_TX);
	assert_int_equal(wait_used(&f->tx, ++used), 0);
	vqb_chain(&f->tx, 2, lens2, w2); /* with a device-writable part */
	vd_notify(&f->n.vdev, NET_QUEUE_TX);
	assert_int_equal(wait_used(&f->tx, ++used), 0);
	guest_send(f, &h, p, 10, 1);     /* runt frame */
	assert_int_equal(wait_used(&f->tx, ++used), 0);
	h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM; /* CSUM not negotiated */
	guest_send(f, &h, p, 60, 1);
	assert_int_equal(wait_used(&f->tx, ++used), 0);
	h.flags = 0;
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4; /* TSO not negotiated */
	guest_send(f, &h, p, 60, 1);
	assert_int_equal(wait_used(&f->tx, ++used), 0);
	assert_int_equal(f->n.stats.tx_malformed, 5);
	assert_int_equal(f->n.stats.tx_packets, 0);
	/* Nothing reached the TAP, and a good frame still does. */
	h.gso_type = 0;
	guest_send(f, &h, p, 60, 1);
	assert_int_equal(host_recv(f, got, sizeof(got)), 72);
	assert_memory_equal(got + 12, p, 60);
	assert_false(vd_rd(&f->n.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
}

static void rx_single(void **state)
{
	struct fx *f = *state;
	struct virtio_net_hdr_v1 h = { .flags = VIRTIO_NET_HDR_F_DATA_VALID, .num_buffers = 9 }, gh;
	uint8_t p[1514];
	struct virtq_desc *d;
	struct virtq_used_elem e;

	fill(p, sizeof(p), 3);
	post_rx(f, 2, 1526);
	host_send(f, &h, p, 100);
	assert_int_equal(wait_used(&f->rx, 1), 0);
	e = vqb_used(&f->rx, 0);
	assert_int_equal(e.len, 112);
	d = vqb_desc(&f->rx, (uint16_t)e.id);
	memcpy(&gh, gm_ptr(&f->rx.gm, d->addr, 12), 12);
	assert_int_equal(gh.flags, 0);        /* no GUEST_CSUM: flags cleared */
	assert_int_equal(gh.num_buffers, 1);
	assert_memory_equal(gm_ptr(&f->rx.gm, d->addr + 12, 100), p, 100);

	host_send(f, &h, p, 1514); /* 1526 bytes: exactly the buffer */
	assert_int_equal(wait_used(&f->rx, 2), 0);
	assert_int_equal(vqb_used(&f->rx, 1).len, 1526);
	/* A frame larger than the driver's buffer (it took no MRG_RXBUF):
	 * dropped, the buffer kept for the next frame. */
	post_rx(f, 1, 200);
	host_send(f, &h, p, 1000);
	host_send(f, &h, p, 50);
	assert_int_equal(wait_used(&f->rx, 3), 0);
	assert_int_equal(vqb_used(&f->rx, 2).len, 62);
	assert_int_equal(f->n.stats.rx_dropped, 1);
	/* A segmented frame the driver did not negotiate: dropped. */
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	host_send(f, &h, p, 60);
	h.gso_type = 0;
	post_rx(f, 1, 1526);
	host_send(f, &h, p, 61);
	assert_int_equal(wait_used(&f->rx, 4), 0);
	assert_int_equal(vqb_used(&f->rx, 3).len, 73);
	assert_int_equal(f->n.stats.rx_dropped, 2);
}

/* MRG_RXBUF: a 5000-byte frame over 1536-byte buffers takes four, and the
 * first header says so; then back-pressure: with no buffers, frames wait
 * (the TAP is not watched) and flow in order once buffers come. */
static void rx_mergeable_and_backpressure(void **state)
{
	struct fx *f = *state;
	struct virtio_net_hdr_v1 h = { .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM, .csum_start = 34, .csum_offset = 16 }, gh;
	uint8_t p[5000], got[6000];
	uint32_t off = 0;
	unsigned i;

	fill(p, sizeof(p), 4);
	post_rx(f, 4, 1536);
	host_send(f, &h, p, sizeof(p));
	assert_int_equal(wait_used(&f->rx, 4), 0);
	for (i = 0; i < 4; i++) {
		struct virtq_used_elem e = vqb_used(&f->rx, (uint16_t)i);
		struct virtq_desc *d = vqb_desc(&f->rx, (uint16_t)e.id);

		assert_true(e.len <= 1536);
		memcpy(got + off, gm_ptr(&f->rx.gm, d->addr, e.len), e.len);
		off += e.len;
	}
	assert_int_equal(off, 12 + sizeof(p));
	memcpy(&gh, got, 12);
	assert_int_equal(gh.num_buffers, 4);
	assert_int_equal(gh.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM); /* passed through with GUEST_CSUM */
	assert_int_equal(gh.csum_start, 34);
	assert_memory_equal(got + 12, p, sizeof(p));

	/* No buffers now: three frames wait. */
	h.flags = 0;
	for (i = 0; i < 3; i++) {
		p[0] = (uint8_t)i;
		host_send(f, &h, p, 4000); /* 4012 bytes: three buffers each */
	}
	usleep(50000);
	assert_int_equal(vqb_used_idx(&f->rx), 4);
	assert_false(f->n.tap_events & EPOLLIN); /* not polling the TAP meanwhile */
	/* Two buffers: not enough for 4012 bytes; still waiting. */
	post_rx(f, 2, 1536);
	usleep(50000);
	assert_int_equal(vqb_used_idx(&f->rx), 4);
	post_rx(f, 10, 1536);
	assert_int_equal(wait_used(&f->rx, 4 + 3 * 3), 0);
	for (i = 0; i < 3; i++) {
		struct virtq_used_elem e = vqb_used(&f->rx, (uint16_t)(4 + 3 * i));
		struct virtq_desc *d = vqb_desc(&f->rx, (uint16_t)e.id);
		const uint8_t *b = gm_ptr(&f->rx.gm, d->addr, 13);

		memcpy(&gh, b, 12);
		assert_int_equal(gh.num_buffers, 3);
		assert_int_equal(b[12], i); /* in order */
	}
	assert_int_equal(f->n.stats.rx_packets, 4);
	assert_int_equal(f->n.stats.rx_dropped, 0);
}

/* A frame no ring of these buffers can hold is dropped, not waited for. */
static void rx_ring_too_small(void **state)
{
	struct fx *f = *state;
	struct virtio_net_hdr_v1 h = { 0 };
	static uint8_t p[65000];

	post_rx(f, 64, 512); /* the whole ring: 64 * 512 < 65012 */
	host_send(f, &h, p, sizeof(p));
	host_send(f, &h, p, 100);
	assert_int_equal(wait_used(&f->rx, 1), 0);
	assert_int_equal(vqb_used(&f->rx, 0).len, 112);
	assert_int_equal(f->n.stats.rx_dropped, 1);
}

/* A device-readable rx buffer is a driver bug: NEEDS_RESET; after a reset
 * the device works again. */
static void rx_bad_buffer_needs_reset(void **state)
{
	struct fx *f = *state;
	struct virtio_net_hdr_v1 h = { 0 };
	uint8_t p[100];
	const uint32_t lens[] = { 1526 };
	const int w[] = { 0 };

	fill(p, sizeof(p), 5);
	vqb_chain(&f->rx, 1, lens, w);
	vd_notify(&f->n.vdev, NET_QUEUE_RX);
	host_send(f, &h, p, 100);
	assert_int_equal(vd_wait_irq(&f->n.vdev) & VIRTIO_MMIO_INT_CONFIG, VIRTIO_MMIO_INT_CONFIG);
	assert_true(vd_rd(&f->n.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET);

	vqb_destroy(&f->rx);
	assert_int_equal(vqb_init(&f->rx, 64), 0);
	vqb_init_view(&f->tx, &f->rx, 1, 64);
	f->n.vdev.gm = &f->rx.gm;
	assert_int_equal(fx_start(f, f->features), 0);
	post_rx(f, 1, 1526);
	host_send(f, &h, p, 100);
	assert_int_equal(wait_used(&f->rx, 1), 0);
	assert_memory_equal(gm_ptr(&f->rx.gm, vqb_desc(&f->rx, (uint16_t)vqb_used(&f->rx, 0).id)->addr + 12, 100),
			    p, 100);
}

/* Segmentation offload both ways: a TSO frame from the guest reaches the
 * TAP with its header; one from the TAP reaches the guest. */
static void tso_passthrough(void **state)
{
	struct fx *f = *state;
	struct virtio_net_hdr_v1 h = { .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM, .gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
				       .hdr_len = 66, .gso_size = 1448, .csum_start = 34, .csum_offset = 16 }, gh;
	static uint8_t p[60000], got[60100];

	fill(p, sizeof(p), 6);
	guest_send(f, &h, p, sizeof(p), 1);
	assert_int_equal(host_recv(f, got, sizeof(got)), 12 + (ssize_t)sizeof(p));
	memcpy(&gh, got, 12);
	assert_int_equal(gh.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
	assert_int_equal(gh.gso_size, 1448);
	assert_memory_equal(got + 12, p, sizeof(p));

	post_rx(f, 50, 4096);
	host_send(f, &h, p, sizeof(p));
	assert_int_equal(wait_used(&f->rx, 15), 0); /* 60012 / 4096 -> 15 buffers */
	memcpy(&gh, gm_ptr(&f->rx.gm, vqb_desc(&f->rx, (uint16_t)vqb_used(&f->rx, 0).id)->addr, 12), 12);
	assert_int_equal(gh.num_buffers, 15);
	assert_int_equal(gh.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
	assert_int_equal(f->n.stats.rx_dropped, 0);
}

/* The limiter delays, never loses: 10 frames at 4 frames/s (burst 4). */
static void tx_rate_limited(void **state)
{
	struct fx f = { 0 };
	struct net_options o;
	struct virtio_net_hdr_v1 h = { 0 };
	uint8_t p[60], got[100];
	const char *why;
	int i;

	(void)state;
	assert_int_equal(net_options_parse("tap=fake0,tx_pps=40,rx_pps=40", &o, &why), 0);
	assert_int_equal(fx_open(&f, &o), 0);
	assert_int_equal(fx_start(&f, F_BASE), 0);
	fill(p, sizeof(p), 7);
	for (i = 0; i < 50; i++) {
		p[0] = (uint8_t)i;
		guest_send(&f, &h, p, sizeof(p), 1);
	}
	for (i = 0; i < 50; i++) {
		assert_int_equal(host_recv(&f, got, sizeof(got)), 72);
		assert_int_equal(got[12], i);
	}
	assert_int_equal(wait_used(&f.tx, 50), 0);
	assert_true(f.n.stats.throttled > 0);
	assert_int_equal(f.n.stats.tx_packets, 50);

	post_rx(&f, 50, 1526);
	for (i = 0; i < 50; i++)
		host_send(&f, &h, p, sizeof(p));
	assert_int_equal(wait_used(&f.rx, 50), 0);
	assert_int_equal(f.n.stats.rx_packets, 50);
	virtio_net_destroy(&f.n);
	close(f.host);
	vqb_destroy(&f.rx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(options),
		cmocka_unit_test(tx_check),
		cmocka_unit_test(rx_fix),
		cmocka_unit_test(ratelimit),
		cmocka_unit_test_setup_teardown(tx_frames, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(tx_malformed, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(rx_single, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(rx_mergeable_and_backpressure, setup_mrg, teardown),
		cmocka_unit_test_setup_teardown(rx_ring_too_small, setup_mrg, teardown),
		cmocka_unit_test_setup_teardown(rx_bad_buffer_needs_reset, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(tso_passthrough, setup_mrg, teardown),
		cmocka_unit_test(tx_rate_limited),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
