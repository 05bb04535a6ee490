/* libFuzzer target: the whole virtio-vsock device, not only its packet
 * parser. Each input builds a fresh device (transport, event loop,
 * listening Unix socket) whose loop thread is stopped at once: this
 * thread then drives the loop itself (evloop_poll), so a run is
 * deterministic. The input is a script of operations interleaving
 *  - a guest driver on fake guest memory (tests/unit/vq_builder.h): tx
 *    packets of every op (well-formed or not) on a few ports, rx buffers
 *    posted or withheld (of several sizes, some wrong), event buffers,
 *    queue notifications, device reset and re-initialisation through the
 *    status register, answers to the last packets the device sent;
 *  - host peers on real Unix sockets in a temp dir: clients connecting
 *    through `uds` (CONNECT lines, complete or not), listeners on
 *    `uds_PORT` that accept or not, writes, reads, half and full closes;
 *  - the VMM: loop batches (every handler and after_batch), a transport
 *    reset (snapshot restore).
 * After every operation the device's bookkeeping is checked: every
 * connection in the round-robin is in the table (issue 17: a reset
 * connection stayed queued after it was freed). Run under ASan+UBSan, with
 * leak detection: everything is closed and freed at the end of an input.
 *
 * Operation encoding (missing bytes read as 0, so zeros are a sensible
 * default everywhere): one byte picks the operation, its arguments follow;
 * see the OP_* cases below. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/virtio_vsock.h"
#include "tests/unit/virtio_driver.h"
#include "tests/unit/vq_builder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

#define GCID 3
#define HPF VSOCK_HOST_PORT_FIRST
#define NHOST 16         /* host-side sockets we hold */
#define NLISTEN 3        /* listeners on uds_1000.. uds_1002 */
#define MAX_OPS 256
#define F_BASE ((1ull << VIRTIO_F_VERSION_1))

struct in {
	const uint8_t *p;
	size_t n;
};

static uint8_t u8(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static uint16_t u16(struct in *in)
{
	uint16_t lo = u8(in);

	return (uint16_t)(lo | (uint16_t)u8(in) << 8);
}

static uint32_t u32(struct in *in)
{
	uint32_t lo = u16(in);

	return lo | (uint32_t)u16(in) << 16;
}

struct fz {
	struct vqb rx, tx, ev;
	struct vsock_dev v;
	char dir[64], uds[96];
	int host[NHOST];
	int listen[NLISTEN];
};

static struct fz F;
static uint8_t buf[VSOCK_MAX_PAYLOAD + 64];

static uint32_t host_port(struct in *in)
{
	static const uint32_t t[] = { 1000, 1001, 1002, HPF, HPF + 1, HPF + 2, 0, 7 };
	uint8_t b = u8(in);

	return b == 0xff ? u32(in) : t[b % 8];
}

static uint32_t guest_port(struct in *in)
{
	static const uint32_t t[] = { 1024, 1025, 1026, 52, 0, 53, 1000, 0xffffffffu };
	uint8_t b = u8(in);

	return b == 0xff ? u32(in) : t[b % 8];
}

/* ---- the guest ------------------------------------------------------------ */

static void ring_reset(struct vqb *b)
{
	memset(gm_ptr(&b->gm, b->base + VQB_DESC, VQB_INDIRECT - VQB_DESC), 0, VQB_INDIRECT - VQB_DESC);
	b->next_desc = 0;
	b->avail_idx = 0;
	b->next_data = b->base + VQB_DATA;
	b->next_ind = b->base + VQB_INDIRECT;
}

static void driver_setup(uint8_t feat)
{
	uint64_t f = F_BASE;
	struct vq_config c[3];

	if (feat & 1)
		f |= 1ull << VIRTIO_F_EVENT_IDX;
	if (feat & 2)
		f |= 1ull << VIRTIO_F_INDIRECT_DESC;
	ring_reset(&F.rx);
	ring_reset(&F.tx);
	ring_reset(&F.ev);
	c[0] = vqb_config(&F.rx);
	c[1] = vqb_config(&F.tx);
	c[2] = vqb_config(&F.ev);
	vd_setup_n(&F.v.vdev, f, c, 3);
}

/* Room for n descriptors and `bytes` of data in the queue's areas. */
static void room(struct vqb *b, unsigned n, uint32_t bytes)
{
	if (b->next_desc + n > b->size)
		b->next_desc = 0;
	if (b->next_data + bytes + 64 * n > b->base + VQB_SPAN)
		b->next_data = b->base + VQB_DATA;
}

/* A packet from the guest: header then `plen` payload bytes, in `split`
 * descriptors (1: together, 2: header | payload, 3: the header split). */
static void tx_post(const struct virtio_vsock_hdr *h, uint32_t plen, unsigned split)
{
	uint32_t total = (uint32_t)sizeof(*h) + plen, lens[3], off = 0;
	const int w[3] = { 0, 0, 0 };
	unsigned n, i;
	uint16_t head;

	memcpy(buf, h, sizeof(*h));
	memset(buf + sizeof(*h), 0x5a, plen);
	if (split == 2 && plen) {
		n = 2;
		lens[0] = sizeof(*h);
		lens[1] = plen;
	} else if (split == 3) {
		n = 2;
		lens[0] = 20;
		lens[1] = total - 20;
	} else {
		n = 1;
		lens[0] = total;
	}
	room(&F.tx, n, total);
	head = vqb_chain(&F.tx, n, lens, w);
	for (i = 0; i < n; i++) {
		struct virtq_desc *d = vqb_desc(&F.tx, (uint16_t)(head + i));

		memcpy(gm_ptr(&F.tx.gm, d->addr, d->len), buf + off, d->len);
		off += d->len;
	}
	vd_notify(&F.v.vdev, VSOCK_QUEUE_TX);
}

static void op_tx(struct in *in)
{
	uint8_t op = u8(in), variant = u8(in), ba = u8(in);
	struct virtio_vsock_hdr h = {
		.src_cid = GCID, .dst_cid = VSOCK_HOST_CID, .type = VIRTIO_VSOCK_TYPE_STREAM,
	};
	uint32_t plen;

	h.src_port = guest_port(in);
	h.dst_port = host_port(in);
	h.op = (uint16_t)(op % 9); /* 0 and 8 are not ops */
	h.flags = u8(in);
	plen = u16(in) % (VSOCK_MAX_PAYLOAD + 1);
	h.len = (variant & 0x20) ? u16(in) : (h.op == VIRTIO_VSOCK_OP_RW ? plen : 0);
	h.buf_alloc = ba == 0 ? 65536 : ba == 1 ? 0 : ba == 2 ? 4096 : ba == 3 ? VSOCK_BUF_ALLOC : u32(in);
	h.fwd_cnt = (variant & 0x40) ? u32(in) : 0;
	if (variant & 0x04)
		h.src_cid = GCID + 1;
	if (variant & 0x08)
		h.dst_cid = 9;
	if (variant & 0x10)
		h.type = 2;
	tx_post(&h, plen, (variant & 3) ? (variant & 3) : 1);
}

/* The guest answers the packet the device sent `back` packets ago (the
 * last one for 0), with its ports swapped: how it accepts a host REQUEST. */
static void op_answer(struct in *in)
{
	uint8_t back = u8(in) % 4, op = u8(in), fl = u8(in);
	uint16_t used = vqb_used_idx(&F.rx);
	struct virtio_vsock_hdr got, h = {
		.src_cid = GCID, .dst_cid = VSOCK_HOST_CID, .type = VIRTIO_VSOCK_TYPE_STREAM,
		.buf_alloc = 65536,
	};
	struct virtq_used_elem e;
	struct virtq_desc *d;
	uint32_t plen = u16(in) % 4097;
	void *p;

	if ((uint16_t)(used - 0) <= back)
		return;
	e = vqb_used(&F.rx, (uint16_t)(used - 1 - back));
	d = vqb_desc(&F.rx, (uint16_t)(e.id % F.rx.size));
	p = gm_ptr(&F.rx.gm, d->addr, sizeof(got));
	if (!p)
		return;
	memcpy(&got, p, sizeof(got));
	h.src_port = got.dst_port;
	h.dst_port = got.src_port;
	h.op = (uint16_t)(op % 8);
	if (!h.op)
		h.op = VIRTIO_VSOCK_OP_RESPONSE;
	h.flags = fl;
	h.fwd_cnt = got.len; /* roughly what a reader would have consumed */
	h.len = h.op == VIRTIO_VSOCK_OP_RW ? plen : 0;
	tx_post(&h, h.op == VIRTIO_VSOCK_OP_RW ? plen : 0, 1);
}

static void op_rx(struct in *in)
{
	static const uint32_t sizes[] = { VSOCK_MAX_PAYLOAD + 44, 4096 + 44, 44, 64, 43, 45, 300, 100 };
	uint8_t count = u8(in) % 8 + 1, sz = u8(in), fl = u8(in);
	uint32_t size = sizes[sz % 8];
	unsigned i;

	for (i = 0; i < count; i++) {
		uint32_t lens[2] = { size, 0 };
		int w[2] = { !(fl & 1), 1 };

		if ((fl & 2) && size > 44) {
			lens[0] = 30; /* the header across two descriptors */
			lens[1] = size - 30;
			room(&F.rx, 2, size);
			vqb_chain(&F.rx, 2, lens, w);
		} else {
			room(&F.rx, 1, size);
			vqb_chain(&F.rx, 1, lens, w);
		}
	}
	vqb_set_used_event(&F.rx, vqb_used_idx(&F.rx));
	if (!(fl & 4))
		vd_notify(&F.v.vdev, VSOCK_QUEUE_RX);
}

static void op_event(struct in *in)
{
	uint8_t fl = u8(in);
	const uint32_t lens[] = { (fl & 1) ? 2 : 4 };
	const int w[] = { 1 };

	room(&F.ev, 1, 4);
	vqb_chain(&F.ev, 1, lens, w);
	if (!(fl & 2))
		vd_notify(&F.v.vdev, VSOCK_QUEUE_EVENT);
}

/* ---- the host ---------------------------------------------------------------- */

static int *host_slot(struct in *in)
{
	return &F.host[u8(in) % NHOST];
}

static int keep_host(int fd)
{
	unsigned i;

	for (i = 0; i < NHOST; i++) {
		if (F.host[i] < 0) {
			F.host[i] = fd;
			return 0;
		}
	}
	close(fd);
	return -1;
}

static void op_host_connect(struct in *in)
{
	uint8_t kind = u8(in);
	uint32_t port = guest_port(in);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[80];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), n;

	if (fd < 0)
		abort();
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", F.uds);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd); /* backlog full, or the device is gone */
		return;
	}
	switch (kind % 4) {
	case 0:
		n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
		break;
	case 1:
		n = snprintf(line, sizeof(line), "CONNECT %u", port); /* the rest later, or never */
		break;
	case 2:
		n = snprintf(line, sizeof(line), "CONNECT %u\r\nextra", port);
		break;
	default:
		n = 0;
		break;
	}
	if (n > 0 && send(fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* the device may have closed it already */
	}
	keep_host(fd);
}

static void op_host_write(struct in *in)
{
	int fd = *host_slot(in);
	uint32_t n = u16(in) % (sizeof(buf) + 1);

	if (fd < 0)
		return;
	memset(buf, 0x6b, n);
	if (n == 1)
		buf[0] = '\n'; /* ends a partial CONNECT line */
	if (send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* full, reset or closed: all fine */
	}
}

static void op_host_read(struct in *in)
{
	int fd = *host_slot(in);
	uint32_t n = u16(in) % sizeof(buf) + 1;

	if (fd >= 0 && recv(fd, buf, n, MSG_DONTWAIT) < 0) {
		/* nothing yet, or reset */
	}
}

static void op_host_shutdown(struct in *in)
{
	int fd = *host_slot(in);
	static const int how[] = { SHUT_WR, SHUT_RD, SHUT_RDWR };

	if (fd >= 0)
		shutdown(fd, how[u8(in) % 3]);
}

static void op_host_close(struct in *in)
{
	int *fd = host_slot(in);

	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void listener_path(unsigned i, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "%s_%u", F.uds, 1000 + i);
}

static void listener_open(unsigned i)
{
	struct sockaddr_un sa;
	int fd;

	if (F.listen[i] >= 0)
		return;
	listener_path(i, &sa);
	unlink(sa.sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4))
		abort();
	F.listen[i] = fd;
}

static void listener_close(unsigned i)
{
	struct sockaddr_un sa;

	if (F.listen[i] < 0)
		return;
	close(F.listen[i]);
	F.listen[i] = -1;
	listener_path(i, &sa);
	unlink(sa.sun_path);
}

static void op_listener(struct in *in)
{
	unsigned i = u8(in) % NLISTEN;
	uint8_t action = u8(in) % 3;
	int fd;

	if (action == 0) {
		listener_open(i);
	} else if (action == 1) {
		listener_close(i);
	} else if (F.listen[i] >= 0) {
		while ((fd = accept4(F.listen[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
			keep_host(fd);
	}
}

/* ---- the VMM ----------------------------------------------------------------- */

static void poll_loop(unsigned batches)
{
	while (batches--)
		if (evloop_poll(&F.v.vdev.loop, 0) < 0)
			abort();
}

/* Every connection in the round-robin is a live one in the table. */
static void check(void)
{
	struct vsock_dev *v = &F.v;
	unsigned i, j;

	if (v->nr_conns > VSOCK_MAX_CONNS || v->nr_rst > VSOCK_RST_QUEUE || v->pend_len > v->nr_conns)
		abort();
	for (i = 0; i < v->pend_len; i++) {
		struct vsock_conn *c = v->pend[(v->pend_head + i) % VSOCK_MAX_CONNS];

		for (j = 0; j < v->nr_conns && v->conns[j] != c; j++)
			;
		if (j == v->nr_conns) {
			fprintf(stderr, "fuzz_vsock: a connection in the rx round-robin is not in the table\n");
			abort();
		}
	}
}

enum {
	OP_TX, OP_RX, OP_POLL, OP_NOTIFY, OP_EVENT, OP_ANSWER, OP_HOST_CONNECT, OP_HOST_WRITE,
	OP_HOST_READ, OP_HOST_SHUTDOWN, OP_HOST_CLOSE, OP_LISTENER, OP_RESET, OP_SETUP,
	OP_STATUS, OP_TRANSPORT_RESET, NR_OPS
};

static void once(void)
{
	const struct gm_region r = { .gpa = 0, .size = VQB_RAM };

	log_set_level(LOG_ERROR);
	if (gm_create(&F.rx.gm, &r, 1))
		abort();
	F.rx.size = 64;
	vqb_init_view(&F.tx, &F.rx, 1, 64);
	vqb_init_view(&F.ev, &F.rx, 2, 8);
	snprintf(F.dir, sizeof(F.dir), "/tmp/vmm-fuzz-vsock-XXXXXX");
	if (!mkdtemp(F.dir))
		abort();
	snprintf(F.uds, sizeof(F.uds), "%s/v.sock", F.dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static int ready;
	struct vsock_options o = { .cid = GCID };
	struct in in = { data, len };
	unsigned i, ops = 0;

	if (!ready) {
		once();
		ready = 1;
	}
	for (i = 0; i < NHOST; i++)
		F.host[i] = -1;
	for (i = 0; i < NLISTEN; i++)
		F.listen[i] = -1;
	snprintf(o.uds, sizeof(o.uds), "%s", F.uds);
	ring_reset(&F.rx);
	ring_reset(&F.tx);
	ring_reset(&F.ev);
	if (virtio_vsock_init(&F.v, &o, -1, &F.rx.gm, VIRTIO_MMIO_BASE, 5))
		abort();
	evloop_stop(&F.v.vdev.loop); /* this thread runs the loop from here on */
	driver_setup(u8(&in));
	listener_open(0);
	while (in.n && ops++ < MAX_OPS) {
		switch (u8(&in) % NR_OPS) {
		case OP_TX: op_tx(&in); break;
		case OP_RX: op_rx(&in); break;
		case OP_POLL: poll_loop(u8(&in) % 4 + 1); break;
		case OP_NOTIFY: vd_notify(&F.v.vdev, u8(&in) % 4); break;
		case OP_EVENT: op_event(&in); break;
		case OP_ANSWER: op_answer(&in); break;
		case OP_HOST_CONNECT: op_host_connect(&in); break;
		case OP_HOST_WRITE: op_host_write(&in); break;
		case OP_HOST_READ: op_host_read(&in); break;
		case OP_HOST_SHUTDOWN: op_host_shutdown(&in); break;
		case OP_HOST_CLOSE: op_host_close(&in); break;
		case OP_LISTENER: op_listener(&in); break;
		case OP_RESET: vd_wr(&F.v.vdev, 0x070, 0); break;
		case OP_SETUP: driver_setup(u8(&in)); break;
		case OP_STATUS: vd_wr(&F.v.vdev, 0x070, u8(&in)); break;
		case OP_TRANSPORT_RESET: virtio_vsock_transport_reset(&F.v); break;
		}
		check();
	}
	poll_loop(4);
	check();
	/* Everything goes: the device (its loop, sockets, connections), then
	 * the host's sockets. */
	virtio_vsock_destroy(&F.v);
	for (i = 0; i < NHOST; i++)
		if (F.host[i] >= 0)
			close(F.host[i]);
	for (i = 0; i < NLISTEN; i++)
		listener_close(i);
	return 0;
}
