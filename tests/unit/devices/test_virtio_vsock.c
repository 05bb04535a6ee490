/* virtio-vsock: the header check, then the connection state machine driven
 * by synthetic guest packets through the transport (fake guest memory,
 * real Unix sockets on the host side, no KVM). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "devices/virtio_vsock.h"
#include "vmm/base/unixsock.h"
#include "vmm/seccomp.h"
#include "tests/unit/virtio_driver.h"
#include "tests/unit/vq_builder.h"

#define GCID 7
#define RXBUF (VSOCK_MAX_PAYLOAD + 44)
#define RXBUF_SMALL (4096 + 44) /* Linux's rx buffer size */

static struct virtio_vsock_hdr hdr(uint16_t op, uint32_t src_port, uint32_t dst_port, uint32_t len)
{
	struct virtio_vsock_hdr h = {
		.src_cid = GCID, .dst_cid = VSOCK_HOST_CID, .src_port = src_port, .dst_port = dst_port,
		.len = len, .type = VIRTIO_VSOCK_TYPE_STREAM, .op = op, .buf_alloc = 65536, .fwd_cnt = 0,
	};

	return h;
}

static void check_table(void **state)
{
	struct virtio_vsock_hdr h = hdr(VIRTIO_VSOCK_OP_RW, 1, 2, 100);
	const char *why;

	(void)state;
	assert_int_equal(vsock_check(&h, 100, GCID, &why), VSOCK_ACCEPT);
	assert_int_equal(vsock_check(&h, 99, GCID, &why), VSOCK_REPLY_RST);  /* len > payload */
	h.len = VSOCK_MAX_PAYLOAD + 1;
	assert_int_equal(vsock_check(&h, 1 << 20, GCID, &why), VSOCK_REPLY_RST);
	h = hdr(VIRTIO_VSOCK_OP_REQUEST, 1, 2, 0);
	h.src_cid = GCID + 1; /* spoofed */
	assert_int_equal(vsock_check(&h, 0, GCID, &why), VSOCK_DROP);
	h = hdr(VIRTIO_VSOCK_OP_REQUEST, 1, 2, 0);
	h.dst_cid = 9; /* another guest */
	assert_int_equal(vsock_check(&h, 0, GCID, &why), VSOCK_REPLY_RST);
	h = hdr(VIRTIO_VSOCK_OP_REQUEST, 1, 2, 0);
	h.type = 2; /* SEQPACKET: not offered */
	assert_int_equal(vsock_check(&h, 0, GCID, &why), VSOCK_REPLY_RST);
	h = hdr(0, 1, 2, 0);
	assert_int_equal(vsock_check(&h, 0, GCID, &why), VSOCK_REPLY_RST);
	h = hdr(8, 1, 2, 0);
	assert_int_equal(vsock_check(&h, 0, GCID, &why), VSOCK_REPLY_RST);
	h = hdr(VIRTIO_VSOCK_OP_RST, 1, 2, 0);
	assert_int_equal(vsock_check(&h, 0, GCID, &why), VSOCK_ACCEPT);
	h.dst_cid = 9; /* an RST is never answered */
	assert_int_equal(vsock_check(&h, 0, GCID, &why), VSOCK_DROP);
}

static void options(void **state)
{
	struct vsock_options o;
	const char *why;

	(void)state;
	assert_int_equal(vsock_options_parse("cid=3,uds=/tmp/x.sock", &o, &why), 0);
	assert_int_equal(o.cid, 3);
	assert_string_equal(o.uds, "/tmp/x.sock");
	assert_int_equal(vsock_options_parse("cid=2,uds=/tmp/x", &o, &why), -EINVAL);
	assert_int_equal(vsock_options_parse("cid=4294967295,uds=/tmp/x", &o, &why), -EINVAL);
	assert_int_equal(vsock_options_parse("cid=x,uds=/tmp/x", &o, &why), -EINVAL);
	assert_int_equal(vsock_options_parse("cid=5", &o, &why), -EINVAL);
	assert_int_equal(vsock_options_parse("uds=/tmp/x", &o, &why), -EINVAL);
	assert_int_equal(vsock_options_parse("cid=5,uds=/tmp/x,color=red", &o, &why), -EINVAL);
}

/* ---- the device ----------------------------------------------------------- */

struct fx {
	struct vqb rx, tx, ev;
	struct vsock_dev v;
	char dir[64], uds[96];
	char deep[256], long_uds[320]; /* setup_long: a folder past sun_path's 108 bytes */
};

#define F_VS ((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC))

static int setup_in(void **state, int deep)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct vsock_options o = { .cid = GCID };
	struct vq_config c[3];

	if (!f || vqb_init(&f->rx, 64))
		return -1;
	vqb_init_view(&f->tx, &f->rx, 1, 64);
	vqb_init_view(&f->ev, &f->rx, 2, 8);
	snprintf(f->dir, sizeof(f->dir), "/tmp/vmm-vsock-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->uds, sizeof(f->uds), "%s/v.sock", f->dir);
	if (deep) {
		/* "<dir>/<150 d>/v.sock": ~190 bytes, as a Kubernetes container's
		 * state folder under a long root (vmm/base/unixsock.h) */
		snprintf(f->deep, sizeof(f->deep), "%s/%0150d", f->dir, 0);
		memset(f->deep + strlen(f->dir) + 1, 'd', 150);
		if (mkdir(f->deep, 0700) < 0)
			return -1;
		snprintf(f->long_uds, sizeof(f->long_uds), "%s/v.sock", f->deep);
	}
	snprintf(o.uds, sizeof(o.uds), "%s", deep ? f->long_uds : f->uds);
	if (virtio_vsock_init(&f->v, &o, -1, &f->rx.gm, 0xd0000000, 5))
		return -1;
	c[0] = vqb_config(&f->rx);
	c[1] = vqb_config(&f->tx);
	c[2] = vqb_config(&f->ev);
	if (!(vd_setup_n(&f->v.vdev, F_VS, c, 3) & VIRTIO_STATUS_DRIVER_OK))
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_in(state, 0);
}

static int setup_long(void **state)
{
	return setup_in(state, 1);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	virtio_vsock_destroy(&f->v);
	vqb_destroy(&f->rx);
	if (f->deep[0])
		rmdir(f->deep);
	rmdir(f->dir);
	free(f);
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits until the queue's used index reaches `want` (5 s at most). */
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

/* Posts n rx buffers (one descriptor each). Small ones (Linux's size) fit
 * the test memory 200 at a time; big ones (a whole packet) 13 at a time. */
static uint32_t rx_size = RXBUF;
static void post_rx(struct fx *f, unsigned n)
{
	const uint32_t lens[] = { rx_size };
	const int w[] = { 1 };
	unsigned i;

	for (i = 0; i < n; i++) {
		if (f->rx.next_desc >= 60)
			f->rx.next_desc = 0;
		if (f->rx.next_data + rx_size > f->rx.base + VQB_SPAN)
			f->rx.next_data = f->rx.base + VQB_DATA;
		vqb_chain(&f->rx, 1, lens, w);
	}
	vqb_set_used_event(&f->rx, vqb_used_idx(&f->rx));
	vd_notify(&f->v.vdev, VSOCK_QUEUE_RX);
}

/* Sends a packet from the guest: header and payload in `split` descriptors
 * (1: together; 2: header then payload; 3: the header itself split). */
static void send_pkt(struct fx *f, struct virtio_vsock_hdr h, const void *payload, uint32_t plen,
		     int split)
{
	uint8_t *buf = malloc(sizeof(h) + plen);
	uint32_t lens[3];
	int w[3] = { 0, 0, 0 };
	unsigned n, i;
	uint16_t head, before = vqb_used_idx(&f->tx);
	uint32_t off = 0;

	memcpy(buf, &h, sizeof(h));
	if (plen)
		memcpy(buf + sizeof(h), payload, plen);
	if (split == 1 || !plen) {
		n = 1;
		lens[0] = (uint32_t)sizeof(h) + plen;
		if (split == 3) {
			n = 2;
			lens[0] = 20;
			lens[1] = (uint32_t)sizeof(h) - 20 + plen;
		}
	} else if (split == 2) {
		n = 2;
		lens[0] = sizeof(h);
		lens[1] = plen;
	} else {
		n = 3;
		lens[0] = 20;
		lens[1] = sizeof(h) - 20;
		lens[2] = plen;
	}
	if (f->tx.next_desc + n >= 64)
		f->tx.next_desc = 0;
	if (f->tx.next_data + sizeof(h) + plen + 64 > f->tx.base + VQB_SPAN)
		f->tx.next_data = f->tx.base + VQB_DATA;
	head = vqb_chain(&f->tx, n, lens, w);
	for (i = 0; i < n; i++) {
		struct virtq_desc *d = vqb_desc(&f->tx, (uint16_t)(head + i));

		memcpy(gm_ptr(&f->tx.gm, d->addr, d->len), buf + off, d->len);
		off += d->len;
	}
	free(buf);
	vqb_set_used_event(&f->tx, before);
	vd_notify(&f->v.vdev, VSOCK_QUEUE_TX);
	assert_int_equal(wait_used(&f->tx, (uint16_t)(before + 1)), 0);
}

/* Next packet the device put in the rx queue; -1 if none comes in `secs`. */
static int recv_pkt(struct fx *f, uint16_t *seen, struct virtio_vsock_hdr *h, uint8_t *payload,
		    double secs)
{
	double end = now() + secs;
	struct virtq_used_elem e;
	struct virtq_desc *d;

	while (vqb_used_idx(&f->rx) == *seen) {
		if (now() > end)
			return -1;
		usleep(1000);
	}
	e = vqb_used(&f->rx, *seen);
	(*seen)++;
	d = vqb_desc(&f->rx, (uint16_t)e.id);
	memcpy(h, gm_ptr(&f->rx.gm, d->addr, sizeof(*h)), sizeof(*h));
	assert_int_equal(e.len, sizeof(*h) + h->len);
	if (payload && h->len)
		memcpy(payload, gm_ptr(&f->rx.gm, d->addr + sizeof(*h), h->len), h->len);
	assert_int_equal(h->src_cid, VSOCK_HOST_CID);
	assert_int_equal(h->dst_cid, GCID);
	return 0;
}

/* The device's socket path (the long one under setup_long). */
static const char *uds_of(const struct fx *f)
{
	return f->deep[0] ? f->long_uds : f->uds;
}

static int host_listener(struct fx *f, unsigned port)
{
	char p[400];
	int fd;

	snprintf(p, sizeof(p), "%s_%u", uds_of(f), port);
	fd = unix_listen(p, 8, 0, "test listener");
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_SETFL, 0), 0); /* blocking accept() */
	return fd;
}

static int host_client(struct fx *f)
{
	int fd = unix_connect(uds_of(f), 0);

	assert_true(fd >= 0);
	return fd;
}

static ssize_t read_timeout(int fd, void *buf, size_t n, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return -2;
	return read(fd, buf, n);
}

static void config_cid(void **state)
{
	struct fx *f = *state;
	uint64_t cid = 0;

	f->v.vdev.bus.ops->read(&f->v.vdev.bus, 0x100, &cid, 8);
	assert_int_equal(cid, GCID);
}

/* Guest connects to host port 1000 (a listener exists), data both ways,
 * graceful close in both directions. */
static void guest_initiated(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint8_t pl[RXBUF];
	uint16_t seen = 0;
	int lfd = host_listener(f, 1000), cfd;
	char buf[64];

	post_rx(f, 12);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 5555, 1000, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	assert_int_equal(h.src_port, 1000);
	assert_int_equal(h.dst_port, 5555);
	assert_int_equal(h.buf_alloc, VSOCK_BUF_ALLOC);
	cfd = accept(lfd, NULL, NULL);
	assert_true(cfd >= 0);
	/* guest -> host, header and payload together and split */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 5555, 1000, 5), "hello", 5, 1);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 5555, 1000, 6), " world", 6, 2);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 5555, 1000, 1), "!", 1, 3);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 5555, 1000, 1), "?", 1, 4);
	assert_int_equal(read_timeout(cfd, buf, sizeof(buf), 2000), 13);
	assert_memory_equal(buf, "hello world!?", 13);
	/* host -> guest */
	assert_int_equal(write(cfd, "pong", 4), 4);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_int_equal(h.len, 4);
	assert_memory_equal(pl, "pong", 4);
	assert_int_equal(h.fwd_cnt, 13); /* what we forwarded so far */
	/* guest half-close: the host reads EOF, can still write */
	{
		struct virtio_vsock_hdr s = hdr(VIRTIO_VSOCK_OP_SHUTDOWN, 5555, 1000, 0);

		s.flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
		send_pkt(f, s, NULL, 0, 1);
	}
	assert_int_equal(read_timeout(cfd, buf, sizeof(buf), 2000), 0);
	assert_int_equal(write(cfd, "late", 4), 4);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_memory_equal(pl, "late", 4);
	/* host closes: the guest hears SHUTDOWN(SEND), then the RST that ends it */
	close(cfd);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_SHUTDOWN);
	assert_int_equal(h.flags, VIRTIO_VSOCK_SHUTDOWN_SEND);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	close(lfd);
}

/* Idle accounting (vmm/idle.h): a connection to the exempt port (the
 * ready notice, open for the guest's life) is not activity; any other is. */
static void idle_exempt_port_not_counted(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint8_t pl[RXBUF];
	uint16_t seen = 0;
	int l1 = host_listener(f, 1025), l2 = host_listener(f, 1000);
	uint64_t gen;

	f->v.idle_exempt_port = 1025;
	post_rx(f, 8);
	gen = atomic_load(&f->v.act_gen);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 5001, 1025, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	assert_int_equal(atomic_load(&f->v.act_conns), 0);
	assert_int_equal(atomic_load(&f->v.act_gen), gen);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 5002, 1000, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	assert_int_equal(atomic_load(&f->v.act_conns), 1);
	assert_true(atomic_load(&f->v.act_gen) > gen);
	close(l1);
	close(l2);
}

static void guest_connect_refused(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;

	post_rx(f, 4);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 777, 4242, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	assert_int_equal(h.src_port, 4242);
	assert_int_equal(h.dst_port, 777);
}

/* vmm run retrying the API while the guest boots: each CONNECT to a port
 * nothing listens on yet is refused (RST); the log says so once, not once
 * a retry, and again only after that port accepted a connection. */
static void host_refusals_logged_once(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint8_t pl[RXBUF];
	uint16_t seen = 0;
	struct log_sink sink = { .fd = -1, .id = "t" };
	char logbuf[8192];
	int lp[2], round, lines = 0;
	ssize_t n;

	assert_int_equal(pipe2(lp, O_NONBLOCK | O_CLOEXEC), 0);
	sink.fd = lp[1];
	log_set_sink(&sink);
	log_set_level(LOG_INFO);
	post_rx(f, 16);
	for (round = 0; round < 5; round++) {
		int c = host_client(f);
		char line[64];

		assert_int_equal(write(c, "CONNECT 1024\n", 13), 13);
		assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
		assert_int_equal(h.op, VIRTIO_VSOCK_OP_REQUEST);
		if (round == 3) {
			/* the API listens now: accepted, then closed */
			send_pkt(f, hdr(VIRTIO_VSOCK_OP_RESPONSE, 1024, h.src_port, 0), NULL, 0, 1);
			assert_true(read_timeout(c, line, sizeof(line) - 1, 2000) > 0);
			send_pkt(f, hdr(VIRTIO_VSOCK_OP_RST, 1024, h.src_port, 0), NULL, 0, 1);
		} else {
			send_pkt(f, hdr(VIRTIO_VSOCK_OP_RST, 1024, h.src_port, 0), NULL, 0, 1);
		}
		assert_int_equal(read_timeout(c, line, sizeof(line), 2000), 0); /* closed */
		close(c);
	}
	log_set_level(LOG_ERROR);
	log_set_sink(NULL);
	n = read(lp[0], logbuf, sizeof(logbuf) - 1);
	logbuf[n > 0 ? n : 0] = '\0';
	for (char *p = logbuf; (p = strstr(p, "refused the connection to port 1024")); p++)
		lines++;
	/* rounds 0-2 refused: one line; round 3 accepted; round 4 refused: one more */
	assert_int_equal(lines, 2);
	close(lp[0]);
	close(lp[1]);
}

/* Host client: CONNECT, the guest accepts, data, guest RST = abortive. */
static void host_initiated(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint8_t pl[RXBUF];
	uint16_t seen = 0;
	int c = host_client(f);
	char line[64];
	unsigned hostport;
	ssize_t n;

	post_rx(f, 8);
	assert_int_equal(write(c, "CONNECT 52\n", 11), 11);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_REQUEST);
	assert_int_equal(h.dst_port, 52);
	hostport = h.src_port;
	assert_true(hostport >= VSOCK_HOST_PORT_FIRST);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RESPONSE, 52, hostport, 0), NULL, 0, 1);
	n = read_timeout(c, line, sizeof(line) - 1, 2000);
	assert_true(n > 0);
	line[n] = 0;
	{
		char want[32];

		snprintf(want, sizeof(want), "OK %u\n", hostport);
		assert_string_equal(line, want);
	}
	assert_int_equal(write(c, "abc", 3), 3);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_memory_equal(pl, "abc", 3);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RST, 52, hostport, 0), NULL, 0, 1);
	assert_int_equal(read_timeout(c, line, sizeof(line), 2000), 0); /* closed */
	close(c);
	/* A packet for the connection that no longer exists: RST back. */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 52, hostport, 1), "x", 1, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
}

/* Host ports are never handed out twice, even when the counter comes
 * round to one that is in use. */
static void host_ports_unique(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;
	int c1 = host_client(f), c2;
	uint32_t first;

	post_rx(f, 8);
	assert_int_equal(write(c1, "CONNECT 60\n", 11), 11);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	first = h.src_port;
	evloop_pause(&f->v.vdev.loop);
	f->v.next_port = first; /* as if the counter had wrapped around */
	evloop_resume(&f->v.vdev.loop);
	c2 = host_client(f);
	assert_int_equal(write(c2, "CONNECT 61\n", 11), 11); /* another guest port */
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_REQUEST);
	assert_int_not_equal(h.src_port, first);
	close(c1);
	close(c2);
}

static void host_connect_guest_refuses(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;
	int c = host_client(f);
	char buf[16];

	post_rx(f, 4);
	assert_int_equal(write(c, "CONNECT 9\n", 10), 10);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_REQUEST);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RST, 9, h.src_port, 0), NULL, 0, 1);
	assert_int_equal(read_timeout(c, buf, sizeof(buf), 2000), 0);
	close(c);
	/* A malformed handshake is closed without a packet to the guest. */
	c = host_client(f);
	assert_int_equal(write(c, "CONNECT nine\n", 13), 13);
	assert_int_equal(read_timeout(c, buf, sizeof(buf), 2000), 0);
	close(c);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 0.2), -1);
}

/* Sets up a guest-initiated connection to a host listener; returns the
 * host's end. */
static int establish(struct fx *f, uint16_t *seen, unsigned gport, unsigned hport, int *lfd,
		     uint32_t guest_buf)
{
	struct virtio_vsock_hdr h = hdr(VIRTIO_VSOCK_OP_REQUEST, gport, hport, 0);
	int c;

	*lfd = host_listener(f, hport);
	h.buf_alloc = guest_buf;
	send_pkt(f, h, NULL, 0, 1);
	assert_int_equal(recv_pkt(f, seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	c = accept(*lfd, NULL, NULL);
	assert_true(c >= 0);
	return c;
}

/* The guest grants 4 KiB: the device sends no more than that until the
 * guest's fwd_cnt moves, asks for credit once, then resumes. */
static void credit_exhaustion_and_recovery(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h, cu;
	uint8_t pl[RXBUF], big[10000];
	uint16_t seen = 0;
	int lfd, c;
	uint32_t got = 0;

	post_rx(f, 12);
	c = establish(f, &seen, 600, 2000, &lfd, 4096);
	memset(big, 0x33, sizeof(big));
	assert_int_equal(write(c, big, sizeof(big)), (ssize_t)sizeof(big));
	while (got < 4096) {
		assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
		if (h.op == VIRTIO_VSOCK_OP_RW)
			got += h.len;
	}
	assert_int_equal(got, 4096);
	/* Out of credit: at most a CREDIT_REQUEST, no data. */
	while (recv_pkt(f, &seen, &h, pl, 0.3) == 0)
		assert_int_equal(h.op, VIRTIO_VSOCK_OP_CREDIT_REQUEST);
	/* The guest consumed it all: credit update, the rest flows. */
	cu = hdr(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 600, 2000, 0);
	cu.buf_alloc = 4096;
	cu.fwd_cnt = 4096;
	send_pkt(f, cu, NULL, 0, 1);
	while (got < 8192) {
		assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
		if (h.op == VIRTIO_VSOCK_OP_RW)
			got += h.len;
	}
	assert_int_equal(got, 8192);
	cu.buf_alloc = 65536;
	send_pkt(f, cu, NULL, 0, 1);
	while (got < sizeof(big)) {
		assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
		if (h.op == VIRTIO_VSOCK_OP_RW)
			got += h.len;
	}
	assert_int_equal(got, sizeof(big));
	/* CREDIT_REQUEST from the guest gets a CREDIT_UPDATE. */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_CREDIT_REQUEST, 600, 2000, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	close(c);
	close(lfd);
}

/* The host does not read; the guest keeps sending: the device buffers up
 * to the credit it granted, then a guest that overruns it is reset. */
static void guest_overruns_credit(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	static uint8_t chunk[VSOCK_MAX_PAYLOAD];
	uint16_t seen = 0;
	int lfd, c, i, reset = 0;

	post_rx(f, 12);
	c = establish(f, &seen, 601, 2001, &lfd, 65536);
	memset(chunk, 0x44, sizeof(chunk));
	for (i = 0; i < 40 && !reset; i++) {
		send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 601, 2001, sizeof(chunk)), chunk, sizeof(chunk), 2);
		while (recv_pkt(f, &seen, &h, NULL, 0.05) == 0)
			if (h.op == VIRTIO_VSOCK_OP_RST)
				reset = 1;
	}
	assert_true(reset);
	/* Never more than socket buffer + credit went anywhere. */
	assert_true(i * (int)sizeof(chunk) <= 4 * 1024 * 1024);
	close(c);
	close(lfd);
}

static void malformed_packets(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;
	const uint32_t lens[] = { 20 };
	const int w[] = { 0 };
	uint16_t before;

	post_rx(f, 12);
	/* Short header: dropped, no reply. */
	before = vqb_used_idx(&f->tx);
	vqb_chain(&f->tx, 1, lens, w);
	vqb_set_used_event(&f->tx, before);
	vd_notify(&f->v.vdev, VSOCK_QUEUE_TX);
	assert_int_equal(wait_used(&f->tx, (uint16_t)(before + 1)), 0);
	/* Spoofed source CID: dropped. */
	h = hdr(VIRTIO_VSOCK_OP_REQUEST, 1, 2, 0);
	h.src_cid = 99;
	send_pkt(f, h, NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 0.2), -1);
	/* Unknown op, wrong type, length beyond the packet: RST. */
	send_pkt(f, hdr(42, 3, 4, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	h = hdr(VIRTIO_VSOCK_OP_REQUEST, 3, 4, 0);
	h.type = 3;
	send_pkt(f, h, NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 3, 4, 1000), "short", 5, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	/* RST for nothing: nothing. SHUTDOWN for nothing: RST. */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RST, 3, 4, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 0.2), -1);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_SHUTDOWN, 3, 4, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	/* A RESPONSE nobody asked for: RST. */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RESPONSE, 3, 4, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	assert_int_equal(f->v.vdev.status & VIRTIO_STATUS_NEEDS_RESET, 0);
}

static void no_rx_buffers_then_some(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;

	/* No rx buffers: the RST waits, then goes out once buffers arrive. */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 1, 4343, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 0.2), -1);
	post_rx(f, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
}

static void transport_reset_event(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { 4 };
	const int w[] = { 1 };
	uint16_t head;
	uint32_t ev = 0xffffffff;

	head = vqb_chain(&f->ev, 1, lens, w);
	vqb_set_used_event(&f->ev, 0);
	evloop_pause(&f->v.vdev.loop);
	virtio_vsock_transport_reset(&f->v);
	evloop_resume(&f->v.vdev.loop);
	assert_int_equal(wait_used(&f->ev, 1), 0);
	memcpy(&ev, gm_ptr(&f->ev.gm, vqb_desc(&f->ev, head)->addr, 4), 4);
	assert_int_equal(ev, VIRTIO_VSOCK_EVENT_TRANSPORT_RESET);
}

static void many_connections(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint8_t pl[RXBUF];
	uint16_t seen = 0;
	int lfd = host_listener(f, 3000), fds[300];
	unsigned i, got = 0, seen_ports[300] = { 0 };

	rx_size = RXBUF_SMALL;
	post_rx(f, 60);
	for (i = 0; i < 300; i++) {
		send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 10000 + i, 3000, 0), NULL, 0, 1);
		if (recv_pkt(f, &seen, &h, NULL, 5))
			fail_msg("no RESPONSE for connection %u (rx avail %u used %u)", i, f->rx.avail_idx,
				 vqb_used_idx(&f->rx));
		assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
		fds[i] = accept(lfd, NULL, NULL);
		assert_true(fds[i] >= 0);
		/* Like a driver: new buffers only for used ones it has read. */
		if ((uint16_t)(f->rx.avail_idx - seen) < 8)
			post_rx(f, 8);
	}
	/* Every host end writes at once: each connection gets its turn. */
	for (i = 0; i < 300; i++)
		assert_int_equal(write(fds[i], "x", 1), 1);
	while (got < 300) {
		if ((uint16_t)(f->rx.avail_idx - seen) < 8)
			post_rx(f, 16);
		assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
		assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
		assert_true(h.dst_port >= 10000 && h.dst_port < 10300);
		if (seen_ports[h.dst_port - 10000])
			fail_msg("port %u twice (packet %u, len %u, used %u, avail %u)", h.dst_port, got, h.len,
				 vqb_used_idx(&f->rx), f->rx.avail_idx);
		seen_ports[h.dst_port - 10000] = 1;
		got++;
	}
	for (i = 0; i < 300; i++)
		close(fds[i]);
	close(lfd);
	rx_size = RXBUF;
}

/* Issue 17: a connection the guest resets while it still has a packet
 * queued for the guest (no rx buffers yet) must leave that queue. Before
 * the fix it stayed in the round-robin after being freed, and the next rx
 * buffer made the device write through the dangling pointer (ASan:
 * heap-use-after-free; without ASan the freed connection's RESPONSE went
 * out). Guest-initiated, to a "uds_PORT" listener. */
static void guest_rst_while_queued(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;
	int lfd = host_listener(f, 1500), c;
	char buf[8];

	send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 4000, 1500, 0), NULL, 0, 1); /* RESPONSE queued */
	c = accept(lfd, NULL, NULL);
	assert_true(c >= 0);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RST, 4000, 1500, 0), NULL, 0, 1);
	assert_int_equal(read_timeout(c, buf, sizeof(buf), 2000), 0); /* host end closed */
	post_rx(f, 4);
	/* Nothing for the connection that is gone. */
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 0.3), -1);
	/* The device carries on: a new connection is served. */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 4001, 1500, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	assert_int_equal(h.dst_port, 4001);
	assert_int_equal(f->v.vdev.status & VIRTIO_STATUS_NEEDS_RESET, 0);
	close(c);
	close(lfd);
}

/* The same with a host-initiated connection (vmm exec, --publish): its
 * REQUEST waits for an rx buffer, the guest resets it by the host port it
 * can guess (they are handed out in order from 2^30). */
static void guest_rst_host_request_queued(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;
	int c = host_client(f), c2;
	char buf[8];

	assert_int_equal(write(c, "CONNECT 52\n", 11), 11);
	/* Wait until the device took the line (the client's socket buffer
	 * drains), then reset the connection it made. */
	usleep(100 * 1000);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RST, 52, VSOCK_HOST_PORT_FIRST, 0), NULL, 0, 1);
	assert_int_equal(read_timeout(c, buf, sizeof(buf), 2000), 0);
	post_rx(f, 4);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 0.3), -1);
	c2 = host_client(f);
	assert_int_equal(write(c2, "CONNECT 53\n", 11), 11);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_REQUEST);
	assert_int_equal(h.dst_port, 53);
	close(c);
	close(c2);
}

/* A connection whose RST to the guest is queued (the host end reset it)
 * and that the guest resets meanwhile: one packet at most, no reuse. */
static void guest_rst_while_rst_queued(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;
	int lfd, c;

	post_rx(f, 1);
	c = establish(f, &seen, 4100, 1600, &lfd, 65536);
	/* Host side goes away with data unread: ECONNRESET on our end. */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 4100, 1600, 3), "abc", 3, 1);
	close(c);
	usleep(100 * 1000);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RW, 4100, 1600, 3), "abc", 3, 1); /* EPIPE: RST queued */
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_RST, 4100, 1600, 0), NULL, 0, 1);
	post_rx(f, 4);
	while (recv_pkt(f, &seen, &h, NULL, 0.3) == 0)
		assert_int_equal(h.dst_port, 4100);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_REQUEST, 4101, 1600, 0), NULL, 0, 1);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	assert_int_equal(h.dst_port, 4101);
	close(lfd);
}

/* A host client still sending its CONNECT line has no ports yet (0, 0):
 * guest packets for ports 0/0 must not reach it. Before, a CREDIT_REQUEST
 * queued it for the guest, and the client closing then freed it while
 * queued (the use-after-free above, by another way in). */
static void handshake_not_addressable(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;
	int c = host_client(f), c2;
	char buf[8];

	assert_int_equal(write(c, "CONN", 4), 4);
	usleep(100 * 1000);
	send_pkt(f, hdr(VIRTIO_VSOCK_OP_CREDIT_REQUEST, 0, 0, 0), NULL, 0, 1);
	close(c); /* the device kills the half-done handshake */
	usleep(100 * 1000);
	post_rx(f, 4);
	/* Only the RST a CREDIT_REQUEST for no connection gets. */
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 0.3), -1);
	c2 = host_client(f);
	assert_int_equal(write(c2, "CONNECT 54\n", 11), 11);
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_REQUEST);
	assert_int_equal(h.dst_port, 54);
	(void)buf;
	close(c2);
}

/* An rx buffer with room for a header only cannot carry data: the device
 * must not spin on it (it gave it back and took it again forever). */
static void rx_buffer_header_only(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	uint16_t seen = 0;
	int lfd, c;

	post_rx(f, 1);
	c = establish(f, &seen, 4200, 1700, &lfd, 65536);
	rx_size = sizeof(h);
	post_rx(f, 1);
	rx_size = RXBUF;
	assert_int_equal(write(c, "data", 4), 4);
	usleep(100 * 1000);
	/* The loop thread still serves the tx queue. If it is stuck, the
	 * teardown could not stop it either: give up on the whole binary. */
	{
		struct virtio_vsock_hdr cr = hdr(VIRTIO_VSOCK_OP_CREDIT_REQUEST, 4200, 1700, 0);
		uint16_t before = vqb_used_idx(&f->tx);
		const uint32_t lens[] = { sizeof(cr) };
		const int w[] = { 0 };
		uint16_t head;

		if (f->tx.next_desc + 1 >= 64)
			f->tx.next_desc = 0;
		head = vqb_chain(&f->tx, 1, lens, w);
		memcpy(gm_ptr(&f->tx.gm, vqb_desc(&f->tx, head)->addr, sizeof(cr)), &cr, sizeof(cr));
		vqb_set_used_event(&f->tx, before);
		vd_notify(&f->v.vdev, VSOCK_QUEUE_TX);
		if (wait_used(&f->tx, (uint16_t)(before + 1))) {
			print_error("vsock device thread stuck on a header-only rx buffer\n");
			_exit(1);
		}
	}
	/* The CREDIT_UPDATE fits the small buffer. */
	assert_int_equal(recv_pkt(f, &seen, &h, NULL, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	close(c);
	close(lfd);
}

/* CPU time the device's loop thread uses over `ms` of this thread
 * sleeping: next to nothing for an idle device, a good share of the time
 * for a spinning one (even on a loaded machine). */
static double loop_cpu_while_sleeping(struct fx *f, int ms)
{
	struct timespec a, b;
	clockid_t id;

	assert_int_equal(pthread_getcpuclockid(f->v.vdev.loop.thread, &id), 0);
	clock_gettime(id, &a);
	usleep((useconds_t)ms * 1000);
	clock_gettime(id, &b);
	return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

/* The host end closes with data the guest has no rx buffer for yet: epoll
 * reports the hang-up on every wait even with nothing watched, and the
 * device thread must not spin on it while the guest takes its time. Nor
 * when the guest shut its receive side and the host its send side. */
static void host_hangup_no_spin(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h, s;
	uint8_t pl[RXBUF];
	uint16_t seen = 0;
	int lfd, c, c2, lfd2;

	post_rx(f, 1);
	c = establish(f, &seen, 4300, 1800, &lfd, 65536);
	assert_int_equal(write(c, "bye", 3), 3);
	close(c);
	usleep(50 * 1000);
	if (loop_cpu_while_sleeping(f, 500) > 0.03)
		fail_msg("device thread spins on a hung-up host socket");
	post_rx(f, 4);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_memory_equal(pl, "bye", 3);
	assert_int_equal(recv_pkt(f, &seen, &h, pl, 5), 0);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_SHUTDOWN);
	/* Guest SHUTDOWN(RCV), then the host half-closes. */
	post_rx(f, 1);
	c2 = establish(f, &seen, 4301, 1801, &lfd2, 65536);
	s = hdr(VIRTIO_VSOCK_OP_SHUTDOWN, 4301, 1801, 0);
	s.flags = VIRTIO_VSOCK_SHUTDOWN_RCV;
	send_pkt(f, s, NULL, 0, 1);
	shutdown(c2, SHUT_WR);
	usleep(50 * 1000);
	if (loop_cpu_while_sleeping(f, 500) > 0.03)
		fail_msg("device thread spins on a half-closed host socket");
	close(c2);
	close(lfd);
	close(lfd2);
}

/* ---- bulk frees under the seccomp filters ------------------------------ */

/* One packet from the guest, header and payload in one descriptor, without
 * cmocka (bulk_frees_under_filters' child): 0 once the device used it,
 * -1 if it did not within 5 s. */
static int churn_pkt(struct fx *f, uint16_t op, uint32_t port, uint32_t plen)
{
	struct virtio_vsock_hdr h = hdr(op, port, 5000, plen);
	uint32_t len = (uint32_t)sizeof(h) + plen;
	uint16_t head, before = vqb_used_idx(&f->tx);
	const int w[] = { 0 };

	if (f->tx.next_desc + 1 >= 64)
		f->tx.next_desc = 0;
	if (f->tx.next_data + len + 64 > f->tx.base + VQB_SPAN)
		f->tx.next_data = f->tx.base + VQB_DATA;
	head = vqb_chain(&f->tx, 1, &len, w);
	memcpy(gm_ptr(&f->tx.gm, vqb_desc(&f->tx, head)->addr, sizeof(h)), &h, sizeof(h));
	vqb_set_used_event(&f->tx, before);
	vd_notify(&f->v.vdev, VSOCK_QUEUE_TX);
	return wait_used(&f->tx, (uint16_t)(before + 1));
}

static int lockdown(void *arg)
{
	(void)arg;
	return sc_install(SC_DEVICE);
}

/* The child: a process set up as the VMM's main() does, the device's loop
 * under the device filter, this thread under the vCPU's; then what a guest
 * did to stop the VMM (status 159): connections to a host port that never
 * reads each sending 240 KiB (the device buffers what the socket does not
 * take: 256 KiB each) and then RST, six at a time, three times; 800 open
 * connections, then a driver reset, which frees them on this thread.
 * Exits 0, or 2 (setup) / 3 (a packet not used); a trap exits 159. */
static void churn_child(int report)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	void *state = NULL;
	struct fx *f;
	unsigned round, k, i;
	int lfd;

	if (sc_process_init() || setup(&state))
		_exit(2);
	f = state;
	if (write(report, f->dir, sizeof(f->dir)) != (ssize_t)sizeof(f->dir))
		_exit(2);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_5000", f->uds);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 4096))
		_exit(2);
	if (evloop_call(&f->v.vdev.loop, lockdown, NULL) || sc_install(SC_VCPU))
		_exit(2);
	for (round = 0; round < 3; round++) {
		for (k = 0; k < 6; k++) {
			if (churn_pkt(f, VIRTIO_VSOCK_OP_REQUEST, 1000 + round * 16 + k, 0))
				_exit(3);
			for (i = 0; i < 4; i++)
				if (churn_pkt(f, VIRTIO_VSOCK_OP_RW, 1000 + round * 16 + k, 60 << 10))
					_exit(3);
		}
		for (k = 0; k < 6; k++)
			if (churn_pkt(f, VIRTIO_VSOCK_OP_RST, 1000 + round * 16 + k, 0))
				_exit(3);
	}
	for (k = 0; k < 800; k++)
		if (churn_pkt(f, VIRTIO_VSOCK_OP_REQUEST, 2000 + k, 0))
			_exit(3);
	vd_wr(&f->v.vdev, 0x070, 0);
	_exit(0); /* no teardown: the vCPU list has no unlink (the parent cleans up) */
}

/* A guest picks which thread frees what: glibc's first trim of a thread
 * arena's heap opened /proc/sys/vm/overcommit_memory, which the device and
 * vCPU filters trapped, and the VMM exited 159. */
static void bulk_frees_under_filters(void **state)
{
	char dir[64] = "", path[128];
	int p[2], st = 0;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char fd[16];

		/* A fresh process: glibc probes once per process, and this one
		 * may have done it already (the other tests' device threads). */
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		execl("/proc/self/exe", "test_virtio_vsock", "--churn-child", fd, (char *)NULL);
		_exit(2);
	}
	close(p[1]);
	if (read(p[0], dir, sizeof(dir)) != (ssize_t)sizeof(dir))
		dir[0] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (dir[0]) {
		snprintf(path, sizeof(path), "%s/v.sock_5000", dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/v.sock", dir);
		unlink(path);
		rmdir(dir);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "child: status 0x%x\n", st);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* argv[1], if given, runs only the tests whose names match it. */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(check_table),
		cmocka_unit_test(options),
		cmocka_unit_test_setup_teardown(config_cid, setup, teardown),
		cmocka_unit_test_setup_teardown(guest_initiated, setup, teardown),
		cmocka_unit_test_setup_teardown(idle_exempt_port_not_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(guest_connect_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(host_refusals_logged_once, setup, teardown),
		cmocka_unit_test_setup_teardown(host_initiated, setup, teardown),
		/* a socket path past sun_path's 108 bytes, both directions */
		cmocka_unit_test_setup_teardown(guest_initiated, setup_long, teardown),
		cmocka_unit_test_setup_teardown(host_initiated, setup_long, teardown),
		cmocka_unit_test_setup_teardown(guest_connect_refused, setup_long, teardown),
		cmocka_unit_test_setup_teardown(host_ports_unique, setup, teardown),
		cmocka_unit_test_setup_teardown(host_connect_guest_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(credit_exhaustion_and_recovery, setup, teardown),
		cmocka_unit_test_setup_teardown(guest_overruns_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(malformed_packets, setup, teardown),
		cmocka_unit_test_setup_teardown(no_rx_buffers_then_some, setup, teardown),
		cmocka_unit_test_setup_teardown(transport_reset_event, setup, teardown),
		cmocka_unit_test_setup_teardown(many_connections, setup, teardown),
		cmocka_unit_test_setup_teardown(guest_rst_while_queued, setup, teardown),
		cmocka_unit_test_setup_teardown(guest_rst_host_request_queued, setup, teardown),
		cmocka_unit_test_setup_teardown(guest_rst_while_rst_queued, setup, teardown),
		cmocka_unit_test_setup_teardown(handshake_not_addressable, setup, teardown),
		cmocka_unit_test_setup_teardown(rx_buffer_header_only, setup, teardown),
		cmocka_unit_test_setup_teardown(host_hangup_no_spin, setup, teardown),
		cmocka_unit_test(bulk_frees_under_filters),
	};

	log_set_level(LOG_ERROR);
	if (argc == 3 && !strcmp(argv[1], "--churn-child"))
		churn_child(atoi(argv[2]));
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("virtio_vsock", tests, NULL, NULL);
}
