/* virtio-vsock device: see virtio_vsock.h for the host-side convention. */
#include "devices/virtio_vsock.h"
#include "vmm/base/kvopt.h"
#include "vmm/base/unixsock.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

enum conn_state {
	CONN_HANDSHAKE,   /* host client: reading "CONNECT <port>\n" */
	CONN_CONNECTING,  /* REQUEST sent to the guest, waiting for RESPONSE */
	CONN_ESTABLISHED,
};

/* Control packets a connection owes the guest. */
#define PEND_REQUEST 1u
#define PEND_RESPONSE 2u
#define PEND_CREDIT_UPDATE 4u
#define PEND_CREDIT_REQUEST 8u
#define PEND_SHUTDOWN 16u
#define PEND_RST 32u

/* A connection is referenced from these places, and only these; each has
 * its flag (the epoll registration: src.fd >= 0), conn_kill() takes it out
 * of every one, and conn_free() refuses to free one still referenced:
 *  - dev->conns[] (in_table): guest packets find it by its ports;
 *  - dev->pend[] (in_pend): the round-robin of connections owing the
 *    guest a packet (control bits in `pending`, or host data);
 *  - the epoll set, with &src as the event's data; a batch of events
 *    already returned may still name it after conn_kill() (evloop_del()
 *    marks it), hence
 *  - dev->graveyard (in_graveyard): killed, freed after the loop's batch.
 * There are no timers and no per-connection packet queues: what a
 * connection owes the guest is the `pending` bits and the host socket. */
struct vsock_conn {
	struct evloop_source src; /* the host Unix socket */
	struct vsock_dev *dev;
	enum conn_state state;
	uint32_t local_port;      /* host side */
	uint32_t peer_port;       /* guest side */
	unsigned pending;         /* PEND_* */
	int in_table;             /* in dev->conns */
	int idle_exempt;          /* to dev->idle_exempt_port: not activity */
	int in_pend;              /* queued in dev->pend */
	int in_graveyard;         /* in dev->graveyard */
	int host_readable;        /* socket has data (EPOLLIN disarmed meanwhile) */
	int host_eof;             /* host will send no more */
	int guest_shut_send;      /* guest will send no more */
	int guest_shut_rcv;       /* guest will receive no more */
	int dead;
	uint32_t events;          /* what epoll watches now */
	char line[64];            /* handshake */
	unsigned line_len;
	/* guest -> host: bytes accepted from the guest, not yet written out */
	uint8_t *txbuf;
	uint32_t tx_head, tx_len;
	uint32_t fwd_cnt;         /* bytes written to the host socket */
	uint32_t fwd_sent;        /* fwd_cnt the guest last heard of */
	/* host -> guest credit */
	uint32_t peer_buf_alloc, peer_fwd_cnt;
	uint32_t rx_cnt;          /* bytes sent to the guest */
	int credit_requested;
	struct vsock_conn *next_dead;
};

/* ---- pure checks ------------------------------------------------------ */

enum vsock_verdict vsock_check(const struct virtio_vsock_hdr *h, uint64_t payload,
			       uint64_t guest_cid, const char **why)
{
	uint16_t op = le16toh(h->op);
	uint32_t len = le32toh(h->len);

	/* 5.10.6.2: a packet from another source CID is not ours to answer. */
	if (le64toh(h->src_cid) != guest_cid) {
		*why = "source CID is not the guest's";
		return VSOCK_DROP;
	}
	if (op == VIRTIO_VSOCK_OP_RST) {
		*why = "RST";
		/* Never answer an RST with an RST. */
		return le64toh(h->dst_cid) == VSOCK_HOST_CID ? VSOCK_ACCEPT : VSOCK_DROP;
	}
	if (le64toh(h->dst_cid) != VSOCK_HOST_CID) {
		*why = "destination CID is not the host";
		return VSOCK_REPLY_RST;
	}
	if (le16toh(h->type) != VIRTIO_VSOCK_TYPE_STREAM) {
		*why = "socket type is not STREAM";
		return VSOCK_REPLY_RST;
	}
	if (op < VIRTIO_VSOCK_OP_REQUEST || op > VIRTIO_VSOCK_OP_CREDIT_REQUEST) {
		*why = "unknown op";
		return VSOCK_REPLY_RST;
	}
	if (op == VIRTIO_VSOCK_OP_RW && (len > VSOCK_MAX_PAYLOAD || len > payload)) {
		*why = "payload length larger than the packet or the limit";
		return VSOCK_REPLY_RST;
	}
	return VSOCK_ACCEPT;
}

int vsock_options_parse(const char *s, struct vsock_options *o, const char **why)
{
	char *copy = strdup(s), *cur = copy, *key, *v;
	int r = 0, have_cid = 0;

	memset(o, 0, sizeof(*o));
	if (!copy)
		return -ENOMEM;
	while ((key = kvopt_next(&cur, &v))) {
		if (!strcmp(key, "cid") && v) {
			char *end;

			errno = 0;
			o->cid = strtoull(v, &end, 10);
			/* 0-2 are reserved (hypervisor, local, host); the top
			 * value means "any". */
			if (errno || *end || end == v || o->cid < 3 || o->cid >= 0xffffffffull) {
				*why = "cid must be a number from 3 to 4294967294";
				r = -EINVAL;
				break;
			}
			have_cid = 1;
		} else if (!strcmp(key, "uds") && v && *v) {
			/* Room for "_<port>" after the path, for guest-initiated
			 * connections; any length otherwise (vmm/base/unixsock.h). */
			if (strlen(v) >= sizeof(o->uds) - 12) {
				*why = "uds path too long";
				r = -EINVAL;
				break;
			}
			snprintf(o->uds, sizeof(o->uds), "%s", v);
		} else {
			*why = "unknown --vsock option (cid=N,uds=PATH)";
			r = -EINVAL;
			break;
		}
	}
	if (!r && (!have_cid || !o->uds[0])) {
		*why = "--vsock needs cid=N and uds=PATH";
		r = -EINVAL;
	}
	free(copy);
	return r;
}

/* ---- connections -------------------------------------------------------- */

/* The connection a guest packet is for. A host client still sending its
 * CONNECT line has no ports yet: the guest cannot address it. */
static struct vsock_conn *conn_find(struct vsock_dev *v, uint32_t local, uint32_t peer)
{
	unsigned i;

	for (i = 0; i < v->nr_conns; i++) {
		struct vsock_conn *c = v->conns[i];

		if (c->state != CONN_HANDSHAKE && c->local_port == local && c->peer_port == peer)
			return c;
	}
	return NULL;
}

/* Is `local` the host port of a connection other than `self`? */
static int port_taken(struct vsock_dev *v, uint32_t local, const struct vsock_conn *self)
{
	unsigned i;

	for (i = 0; i < v->nr_conns; i++)
		if (v->conns[i] != self && v->conns[i]->local_port == local)
			return 1;
	return 0;
}

static void conn_arm(struct vsock_conn *c, uint32_t events)
{
	if (c->src.fd < 0 || c->events == events)
		return;
	/* epoll reports EPOLLHUP/EPOLLERR even when nothing is watched, on
	 * every wait for as long as the socket is hung up: watching nothing
	 * is one-shot, so a closed host end costs one more call, not a
	 * spinning loop while the guest takes its time (re-arming lifts it). */
	if (evloop_mod(&c->dev->vdev.loop, &c->src, events ? events : EPOLLONESHOT) == 0)
		c->events = events;
}

static void pend(struct vsock_conn *c)
{
	struct vsock_dev *v = c->dev;

	if (c->in_pend || c->dead)
		return;
	/* Only live connections are queued, each once: it cannot be full. */
	v->pend[(v->pend_head + v->pend_len) % VSOCK_MAX_CONNS] = c;
	v->pend_len++;
	c->in_pend = 1;
}

/* Next connection in the round-robin, taken off it; NULL if none. */
static struct vsock_conn *pend_pop(struct vsock_dev *v)
{
	struct vsock_conn *c;

	if (!v->pend_len)
		return NULL;
	c = v->pend[v->pend_head];
	v->pend_head = (v->pend_head + 1) % VSOCK_MAX_CONNS;
	v->pend_len--;
	c->in_pend = 0;
	return c;
}

/* Takes `c` out of the round-robin, keeping the others' order. */
static void unpend(struct vsock_conn *c)
{
	struct vsock_dev *v = c->dev;
	unsigned i, j;

	if (!c->in_pend)
		return;
	for (i = j = 0; i < v->pend_len; i++) {
		struct vsock_conn *x = v->pend[(v->pend_head + i) % VSOCK_MAX_CONNS];

		if (x != c)
			v->pend[(v->pend_head + j++) % VSOCK_MAX_CONNS] = x;
	}
	v->pend_len = j;
	c->in_pend = 0;
}

/* Stops watching the host socket and closes it. */
static void conn_close_host(struct vsock_conn *c)
{
	int fd = c->src.fd;

	if (fd < 0)
		return;
	evloop_del(&c->dev->vdev.loop, &c->src);
	close(fd);
}

static void conn_handler(struct evloop *l, struct evloop_source *s, uint32_t events);

static struct vsock_conn *conn_new(struct vsock_dev *v, int fd, enum conn_state st,
				   uint32_t local, uint32_t peer, uint32_t events)
{
	struct vsock_conn *c;

	if (v->nr_conns >= VSOCK_MAX_CONNS)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->dev = v;
	c->state = st;
	c->local_port = local;
	c->peer_port = peer;
	c->events = events;
	if (evloop_add(&v->vdev.loop, &c->src, fd, events, conn_handler, c)) {
		free(c);
		return NULL;
	}
	v->conns[v->nr_conns++] = c;
	c->in_table = 1;
	if (v->idle_exempt_port && local == v->idle_exempt_port) {
		c->idle_exempt = 1;
		v->nr_exempt++;
	} else {
		atomic_fetch_add(&v->act_gen, 1);
	}
	atomic_store(&v->act_conns, v->nr_conns - v->nr_exempt);
	return c;
}

/* Closes the host socket and forgets the connection: out of the table,
 * the round-robin and the epoll set. Its memory goes to the graveyard
 * until the loop's batch is over (an event of this batch may still point
 * at it; the loop skips it, evloop_del() marked it). */
static void conn_kill(struct vsock_conn *c)
{
	struct vsock_dev *v = c->dev;
	unsigned i;

	if (c->dead)
		return;
	c->dead = 1;
	conn_close_host(c);
	for (i = 0; i < v->nr_conns; i++) {
		if (v->conns[i] == c) {
			v->conns[i] = v->conns[--v->nr_conns];
			c->in_table = 0;
			if (c->idle_exempt)
				v->nr_exempt--;
			else
				atomic_fetch_add(&v->act_gen, 1);
			atomic_store(&v->act_conns, v->nr_conns - v->nr_exempt);
			break;
		}
	}
	unpend(c);
	free(c->txbuf);
	c->txbuf = NULL;
	c->next_dead = v->graveyard;
	v->graveyard = c;
	c->in_graveyard = 1;
}

/* The last step: only for a connection nothing refers to any more. One
 * that is still referenced is a bug here that would become a
 * use-after-free: stop instead. */
static void conn_free(struct vsock_conn *c)
{
	if (!c->dead || c->in_table || c->in_pend || c->src.fd >= 0) {
		log_err("vsock: BUG: freeing a connection still in use (table %d, queue %d, fd %d)",
			c->in_table, c->in_pend, c->src.fd);
		abort();
	}
	free(c);
}

/* Frees the graveyard: only between two batches of the loop. */
static void graveyard_free(struct vsock_dev *v)
{
	while (v->graveyard) {
		struct vsock_conn *c = v->graveyard;

		v->graveyard = c->next_dead;
		c->in_graveyard = 0;
		conn_free(c);
	}
}

/* Abortive close: RST to the guest, then gone. The connection stays in
 * the table meanwhile (so that the guest's packets for it are not
 * answered with more RSTs) and in the round-robin until the RST is out. */
static void conn_reset(struct vsock_conn *c)
{
	if (c->dead)
		return;
	conn_close_host(c);
	c->pending = PEND_RST;
	c->host_readable = 0;
	pend(c);
}

static void queue_rst(struct vsock_dev *v, uint32_t local, uint32_t peer)
{
	if (v->nr_rst == VSOCK_RST_QUEUE) {
		v->dropped++;
		return; /* the guest's connect times out instead */
	}
	v->rst[v->nr_rst].src_port = local;
	v->rst[v->nr_rst].dst_port = peer;
	v->nr_rst++;
}

static uint32_t peer_credit(const struct vsock_conn *c)
{
	uint32_t used = c->rx_cnt - c->peer_fwd_cnt;

	return used >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - used;
}

/* Both directions finished: the graceful close is complete. */
static void maybe_finish(struct vsock_conn *c)
{
	if (c->state == CONN_ESTABLISHED && c->host_eof && c->guest_shut_send && c->tx_len == 0)
		conn_reset(c);
}

/* ---- guest -> host data ------------------------------------------------- */

static void flush_tx(struct vsock_conn *c)
{
	while (c->tx_len) {
		uint32_t chunk = VSOCK_BUF_ALLOC - c->tx_head;
		ssize_t w;

		if (chunk > c->tx_len)
			chunk = c->tx_len;
		w = send(c->src.fd, c->txbuf + c->tx_head, chunk, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				conn_arm(c, c->events | EPOLLOUT);
				return;
			}
			conn_reset(c); /* the host side went away */
			return;
		}
		c->tx_head = (c->tx_head + (uint32_t)w) % VSOCK_BUF_ALLOC;
		c->tx_len -= (uint32_t)w;
		c->fwd_cnt += (uint32_t)w;
	}
	c->tx_head = 0;
	conn_arm(c, c->events & ~(uint32_t)EPOLLOUT);
	if (c->guest_shut_send)
		shutdown(c->src.fd, SHUT_WR);
	/* Tell the guest about the room we made, before it runs dry. */
	if (c->fwd_cnt - c->fwd_sent >= VSOCK_BUF_ALLOC / 4) {
		c->pending |= PEND_CREDIT_UPDATE;
		pend(c);
	}
	maybe_finish(c);
}

static void rx_payload(struct vsock_conn *c, struct vq_reader *r, uint32_t len)
{
	uint32_t room = VSOCK_BUF_ALLOC - c->tx_len;

	if (len > room) {
		/* 5.10.6.3: the guest sent more than its credit. */
		if (log_ratelimit_ok(&c->dev->rl))
			log_warn("vsock: guest port %u overran its credit, connection reset", c->peer_port);
		conn_reset(c);
		return;
	}
	if (c->tx_len == 0) {
		/* Straight from guest memory to the socket when nothing waits. */
		struct vq_reader probe = *r;
		int n = vq_reader_iov(&probe, len, c->dev->iov, VQ_MAX_CHAIN);

		if (n > 0) {
			struct msghdr m = { .msg_iov = c->dev->iov, .msg_iovlen = (size_t)n };
			ssize_t w = sendmsg(c->src.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);

			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				conn_reset(c);
				return;
			}
			if (w > 0) {
				uint8_t skip[512];
				uint32_t left = (uint32_t)w;

				c->fwd_cnt += (uint32_t)w;
				while (left) {
					uint32_t k = left > sizeof(skip) ? (uint32_t)sizeof(skip) : left;

					vq_read(r, skip, k);
					left -= k;
				}
				len -= (uint32_t)w;
			}
		}
	}
	if (len) {
		if (!c->txbuf && !(c->txbuf = malloc(VSOCK_BUF_ALLOC))) {
			conn_reset(c);
			return;
		}
		while (len) {
			uint32_t tail = (c->tx_head + c->tx_len) % VSOCK_BUF_ALLOC;
			uint32_t k = VSOCK_BUF_ALLOC - tail;

			if (k > len)
				k = len;
			vq_read(r, c->txbuf + tail, k);
			c->tx_len += k;
			len -= k;
		}
	}
	flush_tx(c);
}

/* ---- tx: packets from the guest ------------------------------------------ */

static void guest_connect(struct vsock_dev *v, uint32_t host_port, uint32_t guest_port,
			  const struct virtio_vsock_hdr *h)
{
	char path[sizeof(v->opt.uds) + 12];
	struct vsock_conn *c;
	int fd;

	/* vsock_options_parse() left room for "_<port>". */
	snprintf(path, sizeof(path), "%s_%u", v->opt.uds, host_port);
	fd = unix_connect_at(v->dir_fd, path, SOCK_NONBLOCK);
	if (fd < 0) {
		log_debug("vsock: guest port %u -> host port %u refused (%s): %s", guest_port, host_port,
			  path, strerror(-fd));
		queue_rst(v, host_port, guest_port);
		return;
	}
	c = conn_new(v, fd, CONN_ESTABLISHED, host_port, guest_port, EPOLLIN | EPOLLRDHUP);
	if (!c) {
		close(fd);
		queue_rst(v, host_port, guest_port);
		return;
	}
	/* The REQUEST carries the guest's receive buffer, as every packet. */
	c->peer_buf_alloc = le32toh(h->buf_alloc);
	c->peer_fwd_cnt = le32toh(h->fwd_cnt);
	c->pending |= PEND_RESPONSE;
	pend(c);
}

void vsock_handle_tx(struct vsock_dev *v, const struct vq_chain *ch)
{
	struct virtio_vsock_hdr h;
	struct vq_reader r;
	struct vsock_conn *c;
	const char *why = "";
	uint32_t local, peer, flags;
	enum vsock_verdict verdict;
	uint16_t op;

	vq_reader_init(&r, ch);
	/* The header may span descriptors; the payload may share the first. */
	if (vq_read(&r, &h, sizeof(h)) != sizeof(h)) {
		v->dropped++;
		return;
	}
	verdict = vsock_check(&h, r.left, v->opt.cid, &why);
	local = le32toh(h.dst_port);
	peer = le32toh(h.src_port);
	if (verdict == VSOCK_DROP) {
		if (le16toh(h.op) != VIRTIO_VSOCK_OP_RST)
			v->dropped++;
		return;
	}
	if (verdict == VSOCK_REPLY_RST) {
		if (log_ratelimit_ok(&v->rl))
			log_debug("vsock: refused a guest packet: %s", why);
		c = conn_find(v, local, peer);
		if (c)
			conn_reset(c);
		else
			queue_rst(v, local, peer);
		return;
	}
	op = le16toh(h.op);
	flags = le32toh(h.flags);
	c = conn_find(v, local, peer);
	if (c && !c->dead) {
		/* Every packet carries the guest's view of its receive buffer. */
		c->peer_buf_alloc = le32toh(h.buf_alloc);
		c->peer_fwd_cnt = le32toh(h.fwd_cnt);
		if (c->host_readable && peer_credit(c))
			pend(c);
	}
	switch (op) {
	case VIRTIO_VSOCK_OP_REQUEST:
		if (c)
			conn_reset(c);
		else
			guest_connect(v, local, peer, &h);
		break;
	case VIRTIO_VSOCK_OP_RESPONSE:
		if (!c || c->state != CONN_CONNECTING) {
			if (c)
				conn_reset(c);
			else
				queue_rst(v, local, peer);
			break;
		}
		{
			char ok[32];
			int n = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);

			if (send(c->src.fd, ok, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n) {
				conn_reset(c);
				break;
			}
		}
		c->state = CONN_ESTABLISHED;
		conn_arm(c, EPOLLIN | EPOLLRDHUP);
		if (v->refused_said == c->peer_port + 1u)
			v->refused_said = 0; /* it listens now: a later refusal is news */
		break;
	case VIRTIO_VSOCK_OP_RST:
		if (c) {
			if (c->state == CONN_CONNECTING && v->refused_said != c->peer_port + 1u) {
				v->refused_said = c->peer_port + 1u;
				log_info("vsock: guest refused the connection to port %u (nothing listens there yet: "
					 "normal while the guest boots; said once)", c->peer_port);
			} else if (c->state == CONN_CONNECTING) {
				log_debug("vsock: guest refused the connection to port %u", c->peer_port);
			}
			conn_kill(c);
		}
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		if (!c) {
			queue_rst(v, local, peer);
			break;
		}
		if (flags & VIRTIO_VSOCK_SHUTDOWN_RCV) {
			c->guest_shut_rcv = 1;
			conn_arm(c, c->events & ~(uint32_t)(EPOLLIN | EPOLLRDHUP));
			c->host_readable = 0;
		}
		if (flags & VIRTIO_VSOCK_SHUTDOWN_SEND) {
			c->guest_shut_send = 1;
			if (c->tx_len == 0 && c->src.fd >= 0)
				shutdown(c->src.fd, SHUT_WR);
		}
		/* Both ways shut: finish with an RST once our data is out, as
		 * a Linux peer expects (it waits for the RST to close). */
		if (c->guest_shut_rcv && c->guest_shut_send) {
			if (c->tx_len)
				flush_tx(c);
			if (!c->dead && !(c->pending & PEND_RST))
				conn_reset(c);
		} else {
			maybe_finish(c);
		}
		break;
	case VIRTIO_VSOCK_OP_RW:
		if (!c || c->state != CONN_ESTABLISHED) {
			if (c)
				conn_reset(c);
			else
				queue_rst(v, local, peer);
			break;
		}
		if (c->guest_shut_send || (c->pending & PEND_RST))
			break; /* data after its own SHUTDOWN: dropped */
		rx_payload(c, &r, le32toh(h.len));
		break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		if (!c)
			queue_rst(v, local, peer);
		break; /* the credit fields were taken above */
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		if (!c) {
			queue_rst(v, local, peer);
			break;
		}
		c->pending |= PEND_CREDIT_UPDATE;
		pend(c);
		break;
	}
}

/* ---- rx: packets to the guest ------------------------------------------- */

static void fill_hdr(struct vsock_dev *v, struct virtio_vsock_hdr *h, uint32_t local, uint32_t peer,
		     uint16_t op)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = htole64(VSOCK_HOST_CID);
	h->dst_cid = htole64(v->opt.cid);
	h->src_port = htole32(local);
	h->dst_port = htole32(peer);
	h->type = htole16(VIRTIO_VSOCK_TYPE_STREAM);
	h->op = htole16(op);
	h->buf_alloc = htole32(VSOCK_BUF_ALLOC);
}

/* Writes the next packet `c` owes the guest into the chain. Returns the
 * bytes written, 0 if it owed nothing after all. */
static uint32_t conn_packet(struct vsock_conn *c, const struct vq_chain *ch)
{
	struct vsock_dev *v = c->dev;
	struct virtio_vsock_hdr h;
	struct vq_writer w;
	uint32_t payload = 0;

	vq_writer_init(&w, ch);
	if (c->pending & PEND_RST) {
		fill_hdr(v, &h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_RST);
		c->pending = 0;
		vq_write(&w, &h, sizeof(h));
		conn_kill(c);
		return sizeof(h);
	}
	if (c->pending & PEND_REQUEST) {
		fill_hdr(v, &h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_REQUEST);
		c->pending &= ~PEND_REQUEST;
	} else if (c->pending & PEND_RESPONSE) {
		fill_hdr(v, &h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_RESPONSE);
		c->pending &= ~PEND_RESPONSE;
	} else if (c->pending & PEND_CREDIT_UPDATE) {
		fill_hdr(v, &h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
		c->pending &= ~PEND_CREDIT_UPDATE;
	} else if (c->pending & PEND_CREDIT_REQUEST) {
		fill_hdr(v, &h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_CREDIT_REQUEST);
		c->pending &= ~PEND_CREDIT_REQUEST;
	} else if (c->host_readable && c->state == CONN_ESTABLISHED && !c->guest_shut_rcv) {
		uint32_t credit = peer_credit(c), room;
		struct vq_writer data = w;
		ssize_t n;
		int k;

		if (!credit) {
			if (!c->credit_requested) {
				c->credit_requested = 1;
				fill_hdr(v, &h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_CREDIT_REQUEST);
				goto send_hdr;
			}
			return 0; /* wait for the guest's credit update */
		}
		if (data.left <= sizeof(h))
			return 0;
		room = (uint32_t)(data.left - sizeof(h));
		if (room > credit)
			room = credit;
		if (room > VSOCK_MAX_PAYLOAD)
			room = VSOCK_MAX_PAYLOAD;
		{
			struct vq_writer skip = data;

			vq_write(&skip, &h, sizeof(h)); /* placeholder, rewritten below */
			k = vq_writer_iov(&skip, room, v->iov, VQ_MAX_CHAIN);
		}
		if (k <= 0)
			return 0;
		{
			struct msghdr m = { .msg_iov = v->iov, .msg_iovlen = (size_t)k };

			n = recvmsg(c->src.fd, &m, MSG_DONTWAIT);
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			/* Drained: listen for more. */
			c->host_readable = 0;
			conn_arm(c, c->events | EPOLLIN);
			return 0;
		}
		if (n <= 0) {
			/* EOF (or an error): the host sends no more. */
			c->host_readable = 0;
			c->host_eof = 1;
			if (n < 0) {
				conn_reset(c);
				return 0;
			}
			fill_hdr(v, &h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_SHUTDOWN);
			h.flags = htole32(VIRTIO_VSOCK_SHUTDOWN_SEND);
			c->credit_requested = 0;
			goto send_hdr;
		}
		payload = (uint32_t)n;
		c->rx_cnt += payload;
		fill_hdr(v, &h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_RW);
		h.len = htole32(payload);
	} else {
		return 0;
	}
send_hdr:
	h.fwd_cnt = htole32(c->fwd_cnt);
	c->fwd_sent = c->fwd_cnt;
	vq_write(&w, &h, sizeof(h));
	if (c->host_eof && (le16toh(h.op) == VIRTIO_VSOCK_OP_SHUTDOWN))
		maybe_finish(c);
	return (uint32_t)sizeof(h) + payload;
}

/* Does the connection still owe the guest something? */
static int conn_wants_rx(const struct vsock_conn *c)
{
	if (c->dead)
		return 0;
	if (c->pending)
		return 1;
	return c->host_readable && c->state == CONN_ESTABLISHED && !c->guest_shut_rcv &&
	       (peer_credit(c) || !c->credit_requested);
}

static void rx_pump(struct vsock_dev *v)
{
	struct virtio_dev *d = &v->vdev;
	struct vq *q = &d->q[VSOCK_QUEUE_RX].vq;
	const char *why = NULL;
	int pushed = 0;
	unsigned idle = 0; /* connections in a row that had nothing for this buffer */

	if (!virtio_live(d) || !d->q[VSOCK_QUEUE_RX].ready)
		return;
	for (;;) {
		struct virtio_vsock_hdr h;
		struct vq_writer w;
		uint32_t len = 0;
		int r;

		if (!v->nr_rst && !v->pend_len)
			break;
		r = vq_pop(q, &v->rxchain, &why);
		if (r < 0) {
			virtio_needs_reset(d, why);
			return;
		}
		if (r == 0)
			break; /* no buffers: the guest's rx notification resumes us */
		if (v->rxchain.nr_read || v->rxchain.write_len < sizeof(h)) {
			/* 5.10.6.1: rx buffers are device-writable and hold a header. */
			virtio_needs_reset(d, "vsock rx buffer too small or not writable");
			return;
		}
		if (v->nr_rst) {
			v->nr_rst--;
			fill_hdr(v, &h, v->rst[v->nr_rst].src_port, v->rst[v->nr_rst].dst_port,
				 VIRTIO_VSOCK_OP_RST);
			vq_writer_init(&w, &v->rxchain);
			vq_write(&w, &h, sizeof(h));
			len = sizeof(h);
		} else {
			struct vsock_conn *c = pend_pop(v);

			len = conn_packet(c, &v->rxchain);
			/* Round-robin: one packet per connection per turn. */
			if (conn_wants_rx(c))
				pend(c);
		}
		if (!len) {
			vq_unpop(q);
			/* Data that does not fit this buffer (one with room for a
			 * header only) waits; after a whole round of that, stop
			 * rather than offer the same buffer again forever. */
			if (++idle > v->pend_len)
				break;
			continue;
		}
		idle = 0;
		vq_push(q, v->rxchain.head, len);
		pushed = 1;
	}
	vq_set_avail_event(q);
	if (pushed)
		virtio_queue_used(d, VSOCK_QUEUE_RX);
}

static void send_event_reset(struct vsock_dev *v)
{
	struct virtio_dev *d = &v->vdev;
	struct vq *q = &d->q[VSOCK_QUEUE_EVENT].vq;
	const char *why = NULL;
	uint32_t ev = htole32(VIRTIO_VSOCK_EVENT_TRANSPORT_RESET);
	struct vq_writer w;
	int r;

	if (!v->event_reset_pending || !virtio_live(d) || !d->q[VSOCK_QUEUE_EVENT].ready)
		return;
	r = vq_pop(q, &v->chain, &why);
	if (r < 0) {
		virtio_needs_reset(d, why);
		return;
	}
	if (r == 0) {
		/* Sent when the guest adds an event buffer: ask for that kick. */
		vq_notify_after(q, vq_avail_idx(q));
		return;
	}
	vq_writer_init(&w, &v->chain);
	if (vq_write(&w, &ev, sizeof(ev)) != sizeof(ev)) {
		virtio_needs_reset(d, "vsock event buffer too small");
		return;
	}
	vq_push(q, v->chain.head, sizeof(ev));
	v->event_reset_pending = 0;
	v->reset_unacked = 1;
	v->reset_avail_idx = vq_avail_idx(q);
	/* With EVENT_IDX the driver kicks after refilling only if asked to:
	 * ask for the first buffer past the ones it has already given. */
	vq_notify_after(q, v->reset_avail_idx);
	virtio_queue_used(d, VSOCK_QUEUE_EVENT);
}

/* Host connections are held (not accepted) while the guest has a
 * transport reset to handle; see reset_unacked. */
static void hold_host_connections(struct vsock_dev *v)
{
	struct virtio_dev *d = &v->vdev;
	int hold = virtio_live(d) && d->q[VSOCK_QUEUE_EVENT].ready &&
		   (v->event_reset_pending || v->reset_unacked);

	if (v->reset_unacked && vq_avail_idx(&d->q[VSOCK_QUEUE_EVENT].vq) != v->reset_avail_idx) {
		v->reset_unacked = 0; /* the guest refilled: it handled the event */
		hold = v->event_reset_pending;
	}
	if (v->listen_fd >= 0 && hold != v->listen_held) {
		if (evloop_mod(&v->vdev.loop, &v->listen_src, hold ? 0 : EPOLLIN) == 0)
			v->listen_held = hold;
	}
}

/* ---- host sockets --------------------------------------------------------- */

static void handshake(struct vsock_conn *c)
{
	for (;;) {
		char ch;
		ssize_t n = recv(c->src.fd, &ch, 1, MSG_DONTWAIT);
		unsigned long port;
		char *end;

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			conn_kill(c);
			return;
		}
		if (ch != '\n') {
			if (c->line_len + 1 >= sizeof(c->line)) {
				log_warn("vsock: host client sent an over-long CONNECT line; closed");
				conn_kill(c);
				return;
			}
			c->line[c->line_len++] = ch;
			continue;
		}
		c->line[c->line_len] = '\0';
		if (c->line_len && c->line[c->line_len - 1] == '\r')
			c->line[c->line_len - 1] = '\0';
		errno = 0;
		if (strncmp(c->line, "CONNECT ", 8) ||
		    (port = strtoul(c->line + 8, &end, 10), errno || *end || end == c->line + 8 ||
						  port > 0xffffffffUL)) {
			log_warn("vsock: host client sent \"%s\", not \"CONNECT <port>\"; closed", c->line);
			conn_kill(c);
			return;
		}
		if (!virtio_live(&c->dev->vdev)) {
			/* No driver in the guest (yet): nobody could answer the
			 * REQUEST. The client sees its connection closed and
			 * may try again, rather than wait forever. */
			conn_kill(c);
			return;
		}
		c->peer_port = (uint32_t)port;
		do {
			c->local_port = c->dev->next_port++;
			if (c->dev->next_port < VSOCK_HOST_PORT_FIRST)
				c->dev->next_port = VSOCK_HOST_PORT_FIRST;
		} while (port_taken(c->dev, c->local_port, c));
		c->state = CONN_CONNECTING;
		c->pending |= PEND_REQUEST;
		conn_arm(c, EPOLLRDHUP);
		pend(c);
		return;
	}
}

static void conn_handler(struct evloop *l, struct evloop_source *s, uint32_t events)
{
	struct vsock_conn *c = s->arg;
	struct vsock_dev *v = c->dev;

	(void)l;
	if (c->state == CONN_HANDSHAKE) {
		handshake(c);
	} else if (c->state == CONN_CONNECTING) {
		if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
			conn_reset(c); /* the client gave up before the guest answered */
	} else {
		if (events & EPOLLERR) {
			conn_reset(c);
		} else {
			if (events & EPOLLOUT)
				flush_tx(c);
			if (c->src.fd >= 0 && (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) &&
			    !c->guest_shut_rcv && !c->host_eof) {
				/* Read when the guest can take it: disarm until then. */
				c->host_readable = 1;
				conn_arm(c, c->events & ~(uint32_t)(EPOLLIN | EPOLLRDHUP));
				pend(c);
			}
		}
	}
	rx_pump(v);
}

static void listen_handler(struct evloop *l, struct evloop_source *s, uint32_t events)
{
	struct vsock_dev *v = s->arg;

	(void)l;
	(void)events;
	for (;;) {
		int fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (!conn_new(v, fd, CONN_HANDSHAKE, 0, 0, EPOLLIN)) {
			if (log_ratelimit_ok(&v->rl))
				log_warn("vsock: too many connections (%u); refused one", VSOCK_MAX_CONNS);
			close(fd);
		}
	}
}

static void after_batch(struct evloop *l, void *arg)
{
	(void)l;
	graveyard_free(arg);
}

/* ---- virtio ops --------------------------------------------------------- */

static int64_t tx_chain(struct virtio_dev *d, const struct vq_chain *c)
{
	vsock_handle_tx(container_of(d, struct vsock_dev, vdev), c);
	return 0; /* tx buffers are only read */
}

static void vsock_queue_notify(struct virtio_dev *d, unsigned qi)
{
	struct vsock_dev *v = container_of(d, struct vsock_dev, vdev);

	if (qi == VSOCK_QUEUE_TX)
		virtio_serve_queue(d, qi, &v->chain, tx_chain);
	else if (qi == VSOCK_QUEUE_EVENT)
		send_event_reset(v);
	hold_host_connections(v);
	rx_pump(v); /* rx buffers came, or tx produced replies */
}

/* Kills every connection (each leaves the round-robin on its way); their
 * memory waits in the graveyard for the end of the loop's batch. */
static void close_all(struct vsock_dev *v)
{
	while (v->nr_conns)
		conn_kill(v->conns[0]);
	v->pend_head = 0;
	v->nr_rst = 0;
}

/* Driver reset: the guest forgot every connection; so do we. */
static void vsock_reset(struct virtio_dev *d)
{
	struct vsock_dev *v = container_of(d, struct vsock_dev, vdev);

	close_all(v);
	graveyard_free(v); /* the loop is paused: no batch is under way */
	v->event_reset_pending = 0;
	v->reset_unacked = 0;
	hold_host_connections(v); /* not live now: host connections flow again */
}

static const struct virtio_dev_ops vsock_ops = {
	.device_id = VIRTIO_ID_VSOCK,
	.nr_queues = 3,
	.queue_max = VSOCK_QUEUE_SIZE,
	.queue_notify = vsock_queue_notify,
	.reset = vsock_reset,
};

void virtio_vsock_transport_reset(struct vsock_dev *v)
{
	close_all(v);
	v->event_reset_pending = 1;
	send_event_reset(v);
	hold_host_connections(v);
}

int virtio_vsock_init(struct vsock_dev *v, const struct vsock_options *o, int vm_fd,
		      const struct gm *gm, uint64_t base, unsigned irq)
{
	const struct log_ratelimit rl = LOG_RATELIMIT_INIT;
	uint64_t features = (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC);
	int r;

	memset(v, 0, offsetof(struct vsock_dev, chain)); /* not the scratch (virtio_vsock.h) */
	v->opt = *o;
	v->rl = rl;
	v->next_port = VSOCK_HOST_PORT_FIRST;
	v->config.guest_cid = htole64(o->cid);
	v->dir_fd = unix_dir_open(o->uds);
	if (v->dir_fd < 0) {
		log_err("--vsock uds %s: its folder: %s", o->uds, strerror(-v->dir_fd));
		return v->dir_fd;
	}
	v->listen_fd = unix_listen(o->uds, 128, 0, "--vsock uds");
	if (v->listen_fd < 0) {
		r = v->listen_fd;
		goto err_dir;
	}
	r = virtio_mmio_init(&v->vdev, &vsock_ops, "virtio-vsock", vm_fd, gm, base, irq, features,
			     (uint8_t *)&v->config, sizeof(v->config));
	if (r)
		goto err_listen;
	/* Sources may be added while the loop runs only from its thread:
	 * pause it around the listener's registration. */
	evloop_pause(&v->vdev.loop);
	v->vdev.loop.after_batch = after_batch;
	v->vdev.loop.after_arg = v;
	r = evloop_add(&v->vdev.loop, &v->listen_src, v->listen_fd, EPOLLIN, listen_handler, v);
	evloop_resume(&v->vdev.loop);
	if (r)
		goto err_dev;
	return 0;

err_dev:
	virtio_mmio_destroy(&v->vdev);
err_listen:
	close(v->listen_fd);
	unlink(o->uds);
err_dir:
	close(v->dir_fd);
	v->dir_fd = -1;
	return r;
}

void virtio_vsock_destroy(struct vsock_dev *v)
{
	virtio_mmio_destroy(&v->vdev); /* stops the loop thread first */
	close_all(v);
	graveyard_free(v);
	if (v->listen_fd >= 0) {
		close(v->listen_fd);
		unlink(v->opt.uds);
	}
	v->listen_fd = -1;
	if (v->dir_fd >= 0)
		close(v->dir_fd);
	v->dir_fd = -1;
}
