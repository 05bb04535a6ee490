/* virtio-net device over a TAP: see virtio_net.h. Everything runs on the
 * device's event-loop thread: queue notifications, the TAP's readiness and
 * the rate limiter's timer.
 *
 * Back-pressure: the TAP is read only while the guest has rx buffers (a
 * frame that does not fit waits in the bounce buffer, the TAP is no longer
 * watched, and the kernel's TAP queue fills and drops); tx waits for the TAP
 * to be writable again. Nothing spins while idle. */
#include "devices/virtio_net.h"
#include "vmm/base/kvopt.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define RX_BUF_LEN (NET_HDR_LEN + NET_MAX_FRAME)

/* ---- options ------------------------------------------------------------ */

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char end;
	int i;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) != 6 ||
	    strlen(s) != 17)
		return -EINVAL;
	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	if (mac[0] & 1) /* multicast: not an interface address */
		return -EINVAL;
	return 0;
}

static int parse_ip(const char *s, uint32_t *ip)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1 || a.s_addr == 0)
		return -EINVAL;
	*ip = a.s_addr;
	return 0;
}

static int parse_cidr(char *s, uint32_t *ip, unsigned *prefix)
{
	char *slash = strchr(s, '/'), *end;
	unsigned long p = 24;

	if (slash) {
		*slash = '\0';
		errno = 0;
		p = strtoul(slash + 1, &end, 10);
		if (errno || end == slash + 1 || *end || p < 1 || p > 32)
			return -EINVAL;
	}
	if (parse_ip(s, ip))
		return -EINVAL;
	*prefix = (unsigned)p;
	return 0;
}

int net_options_parse(const char *s, struct net_options *o, const char **why)
{
	char *copy = strdup(s), *cur = copy, *tok, *v;
	int r = 0;

	memset(o, 0, sizeof(*o));
	if (!copy)
		return -ENOMEM;
	while ((tok = kvopt_next(&cur, &v))) {
		uint64_t *rate = NULL;

		if (!strcmp(tok, "tap") && v && *v) {
			if (strlen(v) >= sizeof(o->tap) || strchr(v, '/')) {
				*why = "tap= needs an interface name of at most 15 characters";
				r = -EINVAL;
				break;
			}
			snprintf(o->tap, sizeof(o->tap), "%s", v);
			continue;
		}
		if (!strcmp(tok, "mac") && v) {
			if (parse_mac(v, o->mac)) {
				*why = "mac= needs a unicast address like 02:00:00:00:00:01";
				r = -EINVAL;
				break;
			}
			o->has_mac = 1;
			continue;
		}
		if (!strcmp(tok, "ip") && v) {
			if (parse_cidr(v, &o->ip, &o->prefix)) {
				*why = "ip= needs ADDR/PREFIX, e.g. 172.16.0.2/24";
				r = -EINVAL;
				break;
			}
			continue;
		}
		if (!strcmp(tok, "host_ip") && v) {
			if (parse_cidr(v, &o->host_ip, &o->host_prefix)) {
				*why = "host_ip= needs ADDR/PREFIX, e.g. 172.16.0.1/24";
				r = -EINVAL;
				break;
			}
			continue;
		}
		if ((!strcmp(tok, "gw") || !strcmp(tok, "dns")) && v) {
			if (parse_ip(v, tok[0] == 'g' ? &o->gw : &o->dns)) {
				*why = "gw= and dns= need an IPv4 address";
				r = -EINVAL;
				break;
			}
			continue;
		}
		if (!strcmp(tok, "mmds") && (!v || !strcmp(v, "v1") || !strcmp(v, "v2"))) {
			o->mmds = v && !strcmp(v, "v2") ? 2 : 1;
			continue;
		}
		if (!strcmp(tok, "offload") && v && (!strcmp(v, "on") || !strcmp(v, "off"))) {
			o->no_offload = !strcmp(v, "off");
			continue;
		}
		if (v && !strcmp(tok, "rx_bps"))
			rate = &o->rx.bytes_per_s;
		else if (v && !strcmp(tok, "rx_pps"))
			rate = &o->rx.ops_per_s;
		else if (v && !strcmp(tok, "tx_bps"))
			rate = &o->tx.bytes_per_s;
		else if (v && !strcmp(tok, "tx_pps"))
			rate = &o->tx.ops_per_s;
		if (rate) {
			if (rl_parse_rate(v, rate)) {
				*why = "rates are numbers per second, with an optional k, M or G (e.g. rx_bps=10M)";
				r = -EINVAL;
				break;
			}
			continue;
		}
		*why = "unknown --net option (tap=NAME[,mac=MAC][,ip=ADDR/PREFIX][,gw=ADDR][,dns=ADDR]"
		       "[,host_ip=ADDR/PREFIX][,offload=off][,rx_bps=R][,rx_pps=R][,tx_bps=R][,tx_pps=R][,mmds[=v2]])";
		r = -EINVAL;
		break;
	}
	free(copy);
	if (!r && !o->tap[0]) {
		*why = "--net needs tap=NAME";
		r = -EINVAL;
	}
	if (!r && (o->gw || o->dns) && !o->ip) {
		*why = "gw= and dns= need ip= too";
		r = -EINVAL;
	}
	if (!r && !o->has_mac) {
		/* Locally administered, unicast (IEEE 802: bits 1 and 0 of octet 0). */
		if (getrandom(o->mac, sizeof(o->mac), 0) != (ssize_t)sizeof(o->mac)) {
			*why = "no randomness for a MAC address";
			r = -EIO;
		}
		o->mac[0] = (uint8_t)((o->mac[0] & 0xfc) | 0x02);
	}
	return r;
}

void net_format_mac(const uint8_t m[6], char out[18])
{
	snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

int net_guest_cmdline(const struct net_options *o, char *buf, size_t len)
{
	char mac[18], a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN];
	int n;

	net_format_mac(o->mac, mac);
	inet_ntop(AF_INET, &o->ip, a, sizeof(a));
	inet_ntop(AF_INET, &o->gw, g, sizeof(g));
	inet_ntop(AF_INET, &o->dns, d, sizeof(d));
	n = snprintf(buf, len, "vmm.net=%s", mac);
	if (o->ip && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ",ip=%s/%u", a, o->prefix);
	if (o->gw && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ",gw=%s", g);
	if (o->dns && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ",dns=%s", d);
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

/* ---- pure header checks ------------------------------------------------- */

static int has(uint64_t features, unsigned bit)
{
	return !!(features & (1ull << bit));
}

int net_tx_check(const struct virtio_net_hdr_v1 *h, uint64_t frame_len, uint64_t f, const char **why)
{
	unsigned gso = h->gso_type & ~VIRTIO_NET_HDR_GSO_ECN;

	if (frame_len < NET_ETH_HLEN || frame_len > NET_MAX_FRAME) {
		*why = "frame shorter than an Ethernet header or longer than 64 KiB";
		return -EINVAL;
	}
	/* 5.1.6.2: the driver sets only NEEDS_CSUM on transmit (DATA_VALID
	 * and RSC_INFO are the device's). */
	if (h->flags & ~VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		*why = "transmit header with flags other than NEEDS_CSUM";
		return -EINVAL;
	}
	if (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		if (!has(f, VIRTIO_NET_F_CSUM)) {
			*why = "partial checksum without VIRTIO_NET_F_CSUM";
			return -EINVAL;
		}
		if ((uint32_t)le16toh(h->csum_start) + le16toh(h->csum_offset) + 2u > frame_len) {
			*why = "checksum position beyond the frame";
			return -EINVAL;
		}
	}
	if ((h->gso_type & VIRTIO_NET_HDR_GSO_ECN) && !has(f, VIRTIO_NET_F_HOST_ECN)) {
		*why = "ECN segmentation without VIRTIO_NET_F_HOST_ECN";
		return -EINVAL;
	}
	switch (gso) {
	case VIRTIO_NET_HDR_GSO_NONE:
		return 0;
	case VIRTIO_NET_HDR_GSO_TCPV4:
		if (!has(f, VIRTIO_NET_F_HOST_TSO4)) {
			*why = "TCPv4 segmentation without VIRTIO_NET_F_HOST_TSO4";
			return -EINVAL;
		}
		break;
	case VIRTIO_NET_HDR_GSO_TCPV6:
		if (!has(f, VIRTIO_NET_F_HOST_TSO6)) {
			*why = "TCPv6 segmentation without VIRTIO_NET_F_HOST_TSO6";
			return -EINVAL;
		}
		break;
	default:
		*why = "segmentation type not offered";
		return -EINVAL;
	}
	/* 5.1.6.2.1: a segmented packet carries a partial checksum and a
	 * segment size. */
	if (!(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) || !h->gso_size ||
	    le16toh(h->hdr_len) > frame_len) {
		*why = "segmented frame without checksum offset, segment size or a sane header length";
		return -EINVAL;
	}
	return 0;
}

int net_rx_fix(struct virtio_net_hdr_v1 *h, uint64_t f)
{
	unsigned gso = h->gso_type & ~VIRTIO_NET_HDR_GSO_ECN;

	/* 5.1.6.3.2: without GUEST_CSUM the flags are zero and the packet is
	 * fully checksummed: one with a partial checksum cannot go. */
	if (!has(f, VIRTIO_NET_F_GUEST_CSUM)) {
		if (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM)
			return -EINVAL;
		h->flags = 0;
	} else {
		h->flags &= VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID;
	}
	if ((h->gso_type & VIRTIO_NET_HDR_GSO_ECN) && !has(f, VIRTIO_NET_F_GUEST_ECN))
		return -EINVAL;
	switch (gso) {
	case VIRTIO_NET_HDR_GSO_NONE:
		break;
	case VIRTIO_NET_HDR_GSO_TCPV4:
		if (!has(f, VIRTIO_NET_F_GUEST_TSO4))
			return -EINVAL;
		break;
	case VIRTIO_NET_HDR_GSO_TCPV6:
		if (!has(f, VIRTIO_NET_F_GUEST_TSO6))
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	h->num_buffers = 0;
	return 0;
}

/* ---- event plumbing ----------------------------------------------------- */

static void update_tap_events(struct virtio_net *n)
{
	uint32_t ev = 0;

	if (n->active && virtio_live(&n->vdev)) {
		if (!n->rx_wait_buffers && !n->rx_wait_timer)
			ev |= EPOLLIN;
		if (n->tx_wait_tap)
			ev |= EPOLLOUT;
	}
	if (ev != n->tap_events && evloop_mod(&n->vdev.loop, &n->tap_src, ev) == 0)
		n->tap_events = ev;
}

static void arm_timer(struct virtio_net *n, uint64_t ns)
{
	struct itimerspec its = { 0 };

	if (n->timer_armed)
		return; /* it fires soon; whoever waits looks again then */
	its.it_value.tv_sec = (time_t)(ns / 1000000000ull);
	its.it_value.tv_nsec = (long)(ns % 1000000000ull);
	if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
		its.it_value.tv_nsec = 1;
	if (timerfd_settime(n->timer_fd, 0, &its, NULL) == 0)
		n->timer_armed = 1;
}

/* Once the driver is live: the TAP gets the offloads it negotiated
 * (5.1.6.3: only what the driver accepts may reach it). */
static void activate(struct virtio_net *n)
{
	uint64_t f = n->vdev.driver_features;
	unsigned off = 0;

	if (n->active)
		return;
	if (has(f, VIRTIO_NET_F_GUEST_CSUM)) {
		off = TAP_OFF_CSUM;
		if (has(f, VIRTIO_NET_F_GUEST_TSO4))
			off |= TAP_OFF_TSO4;
		if (has(f, VIRTIO_NET_F_GUEST_TSO6))
			off |= TAP_OFF_TSO6;
	}
	off &= n->tap.offloads;
	if (off != n->cur_offloads) {
		/* If the TAP refuses, frames it hands over with an offload the
		 * driver did not take are dropped by net_rx_fix(). */
		if (tap_set_offloads(&n->tap, off) == 0)
			n->cur_offloads = off;
		else if (log_ratelimit_ok(&n->rl))
			log_warn("%s: TAP %s refused offloads 0x%x", n->vdev.name, n->tap.name, off);
	}
	n->active = 1;
}

/* ---- rx: TAP to guest --------------------------------------------------- */

enum { RX_DONE = 0, RX_NO_BUFFERS = 1, RX_BROKEN = -1 };

static void rx_drop(struct virtio_net *n, const char *why)
{
	n->stats.rx_dropped++;
	n->rx_len = 0;
	if (why && log_ratelimit_ok(&n->rl))
		log_debug("%s: rx frame dropped: %s", n->vdev.name, why);
}

/* Places rx_frame in the guest's buffers: one chain, or with MRG_RXBUF as
 * many as it takes (5.1.6.4), num_buffers written into the first one's
 * header once known. Chains are pushed only when the whole frame is in. */
int virtio_net_rx_place(struct virtio_net *n, int *pushed)
{
	struct virtio_dev *d = &n->vdev;
	struct vq *q = &d->q[NET_QUEUE_RX].vq;
	int mrg = virtio_has_feature(d, VIRTIO_NET_F_MRG_RXBUF);
	struct virtio_net_hdr_v1 *h = (struct virtio_net_hdr_v1 *)n->rx_frame;
	struct vq_buf hb[NET_HDR_LEN];
	unsigned nb = 0, nhb = 0, i;
	uint32_t off = 0, len = n->rx_len;
	const char *why = NULL;

	if (net_rx_fix(h, d->driver_features)) {
		rx_drop(n, "offload the driver did not accept");
		return RX_DONE;
	}
	h->num_buffers = htole16(1);
	while (off < len) {
		struct vq_writer w;
		uint32_t k;
		int r = vq_pop(q, &n->chain, &why);

		if (r < 0) {
			virtio_needs_reset(d, why);
			return RX_BROKEN;
		}
		if (r == 0) {
			vq_unpop_n(q, (uint16_t)nb);
			return RX_NO_BUFFERS;
		}
		if (n->chain.nr_read) {
			virtio_needs_reset(d, "virtio-net rx buffer is device-readable");
			return RX_BROKEN;
		}
		/* 5.1.6.3.1: with MRG_RXBUF every buffer holds at least a header. */
		if (mrg && n->chain.write_len < NET_HDR_LEN) {
			virtio_needs_reset(d, "virtio-net rx buffer smaller than the header");
			return RX_BROKEN;
		}
		if (!mrg && n->chain.write_len < len) {
			/* The driver's buffers are too small for this frame (it
			 * did not ask for large ones): the frame goes, the
			 * buffer stays for the next. */
			vq_unpop(q);
			rx_drop(n, "frame larger than the driver's rx buffer");
			return RX_DONE;
		}
		if (nb == 0) {
			/* Remember where the header lies, to patch num_buffers. */
			uint32_t want = NET_HDR_LEN;

			for (i = n->chain.nr_read; want && i < n->chain.nr_read + n->chain.nr_write; i++) {
				hb[nhb] = n->chain.buf[i];
				if (hb[nhb].len > want)
					hb[nhb].len = want;
				want -= hb[nhb].len;
				nhb++;
			}
		}
		k = len - off;
		if (n->chain.write_len < k)
			k = (uint32_t)n->chain.write_len;
		vq_writer_init(&w, &n->chain);
		vq_write(&w, n->rx_frame + off, k);
		n->used[nb].head = n->chain.head;
		n->used[nb].len = k;
		nb++;
		off += k;
		if (off < len && nb >= q->size) {
			/* Even a full ring of these buffers cannot hold it. */
			vq_unpop_n(q, (uint16_t)nb);
			rx_drop(n, "frame larger than the whole rx ring");
			return RX_DONE;
		}
	}
	if (nb > 1) {
		struct vq_writer w = { .buf = hb, .nr = nhb, .i = 0, .off = 0, .left = NET_HDR_LEN };

		h->num_buffers = htole16((uint16_t)nb);
		vq_write(&w, h, NET_HDR_LEN);
	}
	for (i = 0; i < nb; i++)
		vq_push(q, n->used[i].head, n->used[i].len);
	n->stats.rx_packets++;
	n->stats.rx_bytes += len - NET_HDR_LEN;
	n->rx_len = 0;
	*pushed = 1;
	return RX_DONE;
}

static void rx_pump(struct virtio_net *n)
{
	struct virtio_dev *d = &n->vdev;
	struct vq *q = &d->q[NET_QUEUE_RX].vq;
	int pushed = 0, budget = NET_RX_BUDGET;

	if (!n->active || !virtio_live(d) || !d->q[NET_QUEUE_RX].ready || n->rx_wait_timer)
		return;
	n->rx_wait_buffers = 0;
	while (budget-- > 0) {
		int r;

		if (!n->rx_len && n->mmds && mmds_net_pending(n->mmds)) {
			/* The MMDS's answer: a plain frame (no offloads), never
			 * rate limited (it only answers what the guest sent). */
			memset(n->rx_frame, 0, NET_HDR_LEN);
			n->rx_len = NET_HDR_LEN + (uint32_t)mmds_net_pop(n->mmds, n->rx_frame + NET_HDR_LEN,
									 RX_BUF_LEN - NET_HDR_LEN);
			n->rx_paid = 1;
			mmds_net_pump(n->mmds); /* room in its queue again */
		}
		if (!n->rx_len) {
			ssize_t got = read(n->tap.fd, n->rx_frame, RX_BUF_LEN);

			if (got < 0) {
				if (errno == EINTR)
					continue;
				if (errno != EAGAIN && log_ratelimit_ok(&n->rl))
					log_warn("%s: reading TAP %s: %s", d->name, n->tap.name, strerror(errno));
				break;
			}
			if ((size_t)got < NET_HDR_LEN + NET_ETH_HLEN) {
				rx_drop(n, "runt frame from the TAP");
				continue;
			}
			n->rx_len = (uint32_t)got;
			n->rx_paid = 0;
		}
		if (!n->rx_paid && rl_enabled(&n->rx_rl)) {
			uint64_t wait = rl_take(&n->rx_rl, n->rx_len - NET_HDR_LEN, log_now_ns());

			if (wait) {
				n->stats.throttled++;
				n->rx_wait_timer = 1;
				arm_timer(n, wait);
				break;
			}
		}
		n->rx_paid = 1;
		for (;;) {
			uint16_t idx = vq_avail_idx(q);

			r = virtio_net_rx_place(n, &pushed);
			if (r != RX_NO_BUFFERS)
				break;
			/* Ask for a kick at the next buffer the driver adds, then
			 * look again: one added meanwhile must not be missed. */
			vq_notify_after(q, idx);
			if (vq_avail_idx(q) == idx)
				break;
		}
		if (r == RX_BROKEN)
			return;
		if (r == RX_NO_BUFFERS) {
			n->rx_wait_buffers = 1;
			break;
		}
	}
	/* Out of budget with frames left: the TAP is level-triggered, so the
	 * loop comes back to it after the other sources had their turn. */
	if (pushed)
		virtio_queue_used(d, NET_QUEUE_RX);
}

/* ---- tx: guest to TAP --------------------------------------------------- */

int virtio_net_tx_one(struct virtio_net *n, const struct vq_chain *c)
{
	struct virtio_net_hdr_v1 h;
	struct vq_reader r;
	const char *why = NULL;
	uint64_t frame;
	ssize_t w;
	int cnt;

	if (c->nr_write || c->read_len < NET_HDR_LEN) {
		why = c->nr_write ? "device-writable transmit buffer" : "transmit buffer without a header";
		goto malformed;
	}
	frame = c->read_len - NET_HDR_LEN;
	vq_reader_init(&r, c);
	vq_read(&r, &h, sizeof(h));
	if (net_tx_check(&h, frame, n->vdev.driver_features, &why))
		goto malformed;
	h.num_buffers = 0;
	if (n->mmds && frame <= NET_MAX_FRAME) {
		uint8_t peek[MMDS_NET_PEEK];
		size_t pl = frame < sizeof(peek) ? (size_t)frame : sizeof(peek);
		struct vq_reader r2 = r;

		vq_read(&r2, peek, pl);
		if (mmds_net_wants(n->mmds, peek, pl)) {
			vq_read(&r, n->mmds_buf, frame);
			mmds_net_input(n->mmds, n->mmds_buf, (size_t)frame, log_now_ns());
			n->stats.tx_packets++;
			n->stats.tx_bytes += frame;
			return 0;
		}
	}
	n->iov[0].iov_base = &h;
	n->iov[0].iov_len = sizeof(h);
	cnt = vq_reader_iov(&r, frame, n->iov + 1, NET_MAX_IOV - 1);
	if (cnt < 0) {
		why = "frame in more pieces than one write takes";
		goto malformed;
	}
	do
		w = writev(n->tap.fd, n->iov, cnt + 1);
	while (w < 0 && errno == EINTR);
	if (w < 0) {
		if (errno == EAGAIN || errno == ENOBUFS)
			return -EAGAIN;
		/* EIO/EBADFD: the interface is down; EINVAL: the kernel did
		 * not like the header. Either way the frame is lost, as on a
		 * wire. */
		n->stats.tx_dropped++;
		if (log_ratelimit_ok(&n->rl))
			log_debug("%s: TAP %s: %s; frame dropped", n->vdev.name, n->tap.name, strerror(errno));
		return 0;
	}
	n->stats.tx_packets++;
	n->stats.tx_bytes += frame;
	return 0;
malformed:
	n->stats.tx_malformed++;
	if (log_ratelimit_ok(&n->rl))
		log_warn("%s: dropped a malformed frame from the guest: %s", n->vdev.name, why);
	return 0;
}

static void serve_tx(struct virtio_net *n)
{
	struct virtio_dev *d = &n->vdev;
	struct vq *q = &d->q[NET_QUEUE_TX].vq;
	const char *why = NULL;
	int pushed = 0, budget = NET_TX_BUDGET, r;

	if (!n->active || !virtio_live(d) || !d->q[NET_QUEUE_TX].ready || n->tx_wait_tap ||
	    n->tx_wait_timer)
		return;
	for (;;) {
		while (budget > 0 && (r = vq_pop(q, &n->chain, &why)) > 0) {
			if (rl_enabled(&n->tx_rl)) {
				uint64_t bytes = n->chain.read_len > NET_HDR_LEN ? n->chain.read_len - NET_HDR_LEN : 0;
				uint64_t wait = rl_take(&n->tx_rl, bytes, log_now_ns());

				if (wait) {
					vq_unpop(q);
					n->stats.throttled++;
					n->tx_wait_timer = 1;
					arm_timer(n, wait);
					goto out;
				}
			}
			if (virtio_net_tx_one(n, &n->chain) == -EAGAIN) {
				vq_unpop(q);
				n->tx_wait_tap = 1;
				goto out;
			}
			vq_push(q, n->chain.head, 0);
			pushed = 1;
			budget--;
		}
		if (budget <= 0) {
			/* Let rx have its turn; come back through our own
			 * notification rather than waiting for a kick that the
			 * driver will not send (avail_event was not moved). */
			uint64_t one = 1;

			if (write(d->q[NET_QUEUE_TX].notify_fd, &one, sizeof(one)) < 0) {
				/* saturated: already pending */
			}
			goto out;
		}
		if (r < 0) {
			virtio_needs_reset(d, why);
			goto out;
		}
		vq_set_avail_event(q);
		if (!vq_has_work(q))
			break;
	}
out:
	if (pushed)
		virtio_queue_used(d, NET_QUEUE_TX);
	if (n->mmds && mmds_net_pending(n->mmds))
		rx_pump(n); /* the MMDS answered */
}

/* ---- handlers and ops --------------------------------------------------- */

static void tap_handler(struct evloop *l, struct evloop_source *s, uint32_t events)
{
	struct virtio_net *n = s->arg;

	(void)l;
	if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
		n->tx_wait_tap = 0;
		serve_tx(n);
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		rx_pump(n);
	update_tap_events(n);
}

static void timer_handler(struct evloop *l, struct evloop_source *s, uint32_t events)
{
	struct virtio_net *n = s->arg;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(n->timer_fd, &v, sizeof(v)) < 0 && errno == EAGAIN)
		return;
	n->timer_armed = 0;
	n->rx_wait_timer = 0;
	n->tx_wait_timer = 0;
	serve_tx(n);
	rx_pump(n);
	update_tap_events(n);
}

static void net_queue_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_net *n = container_of(d, struct virtio_net, vdev);

	activate(n);
	if (qi == NET_QUEUE_TX)
		serve_tx(n);
	else
		rx_pump(n); /* buffers came: a waiting frame may fit now */
	update_tap_events(n);
}

/* Driver reset (loop paused): forget the waiting frame, stop watching. */
static void net_reset(struct virtio_dev *d)
{
	struct virtio_net *n = container_of(d, struct virtio_net, vdev);

	n->active = 0;
	n->rx_len = 0;
	n->rx_paid = 0;
	n->rx_wait_buffers = n->rx_wait_timer = 0;
	n->tx_wait_tap = n->tx_wait_timer = 0;
	if (n->mmds)
		mmds_net_reset(n->mmds);
	update_tap_events(n);
}

static const struct virtio_dev_ops net_ops = {
	.device_id = VIRTIO_ID_NET,
	.nr_queues = 2,
	.queue_max = NET_QUEUE_SIZE,
	.queue_notify = net_queue_notify,
	.reset = net_reset,
};

int virtio_net_init_tap(struct virtio_net *n, const struct net_options *o, struct tap *t,
			int vm_fd, const struct gm *gm, uint64_t base, unsigned irq, unsigned index)
{
	const struct log_ratelimit rl = LOG_RATELIMIT_INIT;
	uint64_t now = log_now_ns(), features;
	char name[24];
	int r;

	memset(n, 0, sizeof(*n));
	n->opt = *o;
	n->tap = *t;
	n->rl = rl;
	n->timer_fd = -1;
	n->rx_frame = malloc(RX_BUF_LEN);
	if (!n->rx_frame) {
		r = -ENOMEM;
		goto err;
	}
	n->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (n->timer_fd < 0) {
		r = -errno;
		goto err;
	}
	rl_init_limits(&n->rx_rl, &o->rx, now);
	rl_init_limits(&n->tx_rl, &o->tx, now);
	memcpy(n->config.mac, o->mac, 6);
	n->config.status = htole16(VIRTIO_NET_S_LINK_UP);
	n->config.max_virtqueue_pairs = htole16(1);
	features = (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC) |
		   (1ull << VIRTIO_NET_F_MAC) | (1ull << VIRTIO_NET_F_STATUS) |
		   (1ull << VIRTIO_NET_F_MRG_RXBUF);
	if (!o->no_offload) {
		/* Guest to host: the TAP takes partial checksums and TSO
		 * frames as they come. Host to guest: what the TAP can give. */
		features |= (1ull << VIRTIO_NET_F_CSUM) | (1ull << VIRTIO_NET_F_HOST_TSO4) |
			    (1ull << VIRTIO_NET_F_HOST_TSO6);
		if (t->offloads & TAP_OFF_CSUM)
			features |= 1ull << VIRTIO_NET_F_GUEST_CSUM;
		if ((t->offloads & (TAP_OFF_CSUM | TAP_OFF_TSO4)) == (TAP_OFF_CSUM | TAP_OFF_TSO4))
			features |= 1ull << VIRTIO_NET_F_GUEST_TSO4;
		if ((t->offloads & (TAP_OFF_CSUM | TAP_OFF_TSO6)) == (TAP_OFF_CSUM | TAP_OFF_TSO6))
			features |= 1ull << VIRTIO_NET_F_GUEST_TSO6;
	}
	snprintf(name, sizeof(name), "virtio-net%u", index);
	r = virtio_mmio_init(&n->vdev, &net_ops, name, vm_fd, gm, base, irq, features,
			     (uint8_t *)&n->config, sizeof(n->config));
	if (r)
		goto err;
	/* Sources are added while the loop is paused (evloop.h). */
	evloop_pause(&n->vdev.loop);
	r = evloop_add(&n->vdev.loop, &n->tap_src, n->tap.fd, 0, tap_handler, n);
	if (!r)
		r = evloop_add(&n->vdev.loop, &n->timer_src, n->timer_fd, EPOLLIN, timer_handler, n);
	evloop_resume(&n->vdev.loop);
	if (r) {
		virtio_mmio_destroy(&n->vdev);
		goto err;
	}
	return 0;
err:
	log_err("--net tap=%s: cannot set up the device: %s", o->tap, strerror(-r));
	if (n->timer_fd >= 0)
		close(n->timer_fd);
	free(n->rx_frame);
	n->rx_frame = NULL;
	tap_close(&n->tap);
	t->fd = -1;
	return r;
}

int virtio_net_open_tap(const struct net_options *o, struct tap *t)
{
	int r = tap_open(t, o->tap);

	if (r)
		return r;
	/* A restored guest still has the snapshot's TAP in its neighbour
	 * cache: this TAP takes that MAC, so the clone reaches its host side
	 * at once instead of after the cache entry expires. */
	if (o->has_host_mac && tap_set_mac(t, o->host_mac))
		log_warn("--net tap=%s: cannot give it the snapshot's TAP MAC; the clone may take a while to "
			 "reach the host side (its neighbour cache entry has to expire)", o->tap);
	if (o->host_ip && (r = tap_set_host_addr(t, o->host_ip, o->host_prefix))) {
		tap_close(t);
		return r;
	}
	return 0;
}

int virtio_net_init(struct virtio_net *n, const struct net_options *o, int vm_fd,
		    const struct gm *gm, uint64_t base, unsigned irq, unsigned index)
{
	struct tap t;
	int r = virtio_net_open_tap(o, &t);

	if (r)
		return r;
	return virtio_net_init_tap(n, o, &t, vm_fd, gm, base, irq, index);
}

void virtio_net_destroy(struct virtio_net *n)
{
	const struct net_stats *s = &n->stats;

	virtio_mmio_destroy(&n->vdev); /* stops the loop thread first */
	if (s->rx_dropped || s->tx_dropped || s->tx_malformed)
		log_info("%s: rx %llu frames (%llu dropped), tx %llu frames (%llu dropped, %llu malformed)",
			 n->vdev.name, (unsigned long long)s->rx_packets, (unsigned long long)s->rx_dropped,
			 (unsigned long long)s->tx_packets, (unsigned long long)s->tx_dropped,
			 (unsigned long long)s->tx_malformed);
	if (n->timer_fd >= 0)
		close(n->timer_fd);
	n->timer_fd = -1;
	free(n->rx_frame);
	n->rx_frame = NULL;
	if (n->mmds) {
		mmds_net_destroy(n->mmds);
		free(n->mmds);
		n->mmds = NULL;
	}
	free(n->mmds_buf);
	n->mmds_buf = NULL;
	tap_close(&n->tap);
}

int virtio_net_enable_mmds(struct virtio_net *n, struct mmds *m)
{
	struct mmds_net *s = malloc(sizeof(*s));
	uint8_t *buf = malloc(NET_MAX_FRAME);

	if (!s || !buf) {
		free(s);
		free(buf);
		return -ENOMEM;
	}
	mmds_net_init(s, m);
	n->mmds_buf = buf;
	n->mmds = s;
	return 0;
}

/* PATCH /network-interfaces/{id} (Firecracker): new rx/tx limits on a
 * running device (NULL: keep that direction's). Main thread; the device
 * loop is parked meanwhile. A direction that waited for the limiter is
 * woken by its armed timer and tries again under the new limits. */
void virtio_net_set_limits(struct virtio_net *n, const struct rl_limits *rx, const struct rl_limits *tx)
{
	uint64_t now = log_now_ns();

	evloop_pause(&n->vdev.loop);
	if (rx) {
		rl_init_limits(&n->rx_rl, rx, now);
		n->opt.rx = *rx;
	}
	if (tx) {
		rl_init_limits(&n->tx_rl, tx, now);
		n->opt.tx = *tx;
	}
	evloop_resume(&n->vdev.loop);
}

void virtio_net_limits(const struct virtio_net *n, struct rl_limits *rx, struct rl_limits *tx)
{
	*rx = (struct rl_limits){ n->rx_rl.bytes.rate, n->rx_rl.bytes.burst, n->rx_rl.ops.rate, n->rx_rl.ops.burst };
	*tx = (struct rl_limits){ n->tx_rl.bytes.rate, n->tx_rl.bytes.burst, n->tx_rl.ops.rate, n->tx_rl.ops.burst };
}
