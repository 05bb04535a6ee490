/* ARP and a minimal TCP server for the MMDS: see mmds_net.h. RFC 826
 * (ARP), RFC 791 (IPv4), RFC 9293 (TCP). */
#include "devices/mmds_net.h"

#include <stdlib.h>
#include <string.h>

static const uint8_t mmds_mac[6] = MMDS_NET_MAC;

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_ARP 0x0806
#define IP_HLEN 20
#define TCP_HLEN 20
#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_PSH 0x08
#define TCP_ACK 0x10
#define HTTP_PORT 80

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* RFC 1071 */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += get16(p + i);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Sequence-space comparisons (RFC 9293 3.4). */
static int seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static int seq_le(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) <= 0;
}

void mmds_net_init(struct mmds_net *s, struct mmds *m)
{
	memset(s, 0, sizeof(*s));
	s->mmds = m;
	s->iss_seed = (uint32_t)(uintptr_t)s ^ 0x9e3779b9u;
}

static void conn_free(struct mmds_net *s, struct mmds_conn *c)
{
	(void)s;
	free(c->rx);
	free(c->tx);
	memset(c, 0, sizeof(*c));
}

void mmds_net_destroy(struct mmds_net *s)
{
	unsigned i;

	for (i = 0; i < MMDS_NET_CONNS; i++)
		conn_free(s, &s->conns[i]);
}

void mmds_net_reset(struct mmds_net *s)
{
	mmds_net_destroy(s);
	s->q_head = s->q_count = 0;
}

int mmds_net_wants(const struct mmds_net *s, const uint8_t *f, size_t len)
{
	uint32_t ip = s->mmds->ipv4;

	if (len < ETH_HLEN)
		return 0;
	switch (get16(f + 12)) {
	case ETH_P_ARP:
		/* htype 1, ptype IPv4, hlen 6, plen 4, op request, target IP */
		return len >= ETH_HLEN + 28 && get16(f + 14) == 1 && get16(f + 16) == ETH_P_IP && f[18] == 6 &&
		       f[19] == 4 && get16(f + 20) == 1 && get32(f + 38) == ip;
	case ETH_P_IP:
		return len >= ETH_HLEN + IP_HLEN && (f[14] >> 4) == 4 && get32(f + 30) == ip;
	default:
		return 0;
	}
}

static uint8_t *q_slot(struct mmds_net *s)
{
	if (s->q_count >= MMDS_NET_QUEUE)
		return NULL;
	return s->q[(s->q_head + s->q_count) % MMDS_NET_QUEUE].data;
}

static void q_commit(struct mmds_net *s, size_t len)
{
	s->q[(s->q_head + s->q_count) % MMDS_NET_QUEUE].len = (uint16_t)len;
	s->q_count++;
	s->stats.frames_out++;
}

unsigned mmds_net_pending(const struct mmds_net *s)
{
	return s->q_count;
}

size_t mmds_net_pop(struct mmds_net *s, uint8_t *buf, size_t cap)
{
	size_t len;

	if (!s->q_count)
		return 0;
	len = s->q[s->q_head].len;
	if (len > cap)
		len = cap;
	memcpy(buf, s->q[s->q_head].data, len);
	s->q_head = (s->q_head + 1) % MMDS_NET_QUEUE;
	s->q_count--;
	return len;
}

static void arp_reply(struct mmds_net *s, const uint8_t *f)
{
	uint8_t *o = q_slot(s);

	if (!o) {
		s->stats.dropped++; /* the guest asks again */
		return;
	}
	memcpy(o, f + 6, 6);            /* to the asker */
	memcpy(o + 6, mmds_mac, 6);
	put16(o + 12, ETH_P_ARP);
	put16(o + 14, 1);
	put16(o + 16, ETH_P_IP);
	o[18] = 6;
	o[19] = 4;
	put16(o + 20, 2);               /* reply */
	memcpy(o + 22, mmds_mac, 6);    /* sender: the MMDS */
	put32(o + 28, s->mmds->ipv4);
	memcpy(o + 32, f + 22, 10);     /* target: the asker's MAC and IP */
	q_commit(s, ETH_HLEN + 28);
	s->stats.arp_replies++;
}

/* One TCP segment to the guest: 0, or -1 if the queue is full (nothing
 * queued). */
static int emit(struct mmds_net *s, const uint8_t peer_mac[6], uint32_t peer_ip, uint16_t peer_port,
		uint32_t seq, uint32_t ack, uint8_t flags, uint16_t wnd, const char *data, size_t dlen, int mss_opt)
{
	uint8_t *o = q_slot(s), *ip, *tcp;
	size_t thl = TCP_HLEN + (mss_opt ? 4 : 0), tot = IP_HLEN + thl + dlen;
	uint32_t sum;

	if (!o)
		return -1;
	memcpy(o, peer_mac, 6);
	memcpy(o + 6, mmds_mac, 6);
	put16(o + 12, ETH_P_IP);
	ip = o + ETH_HLEN;
	ip[0] = 0x45;
	ip[1] = 0;
	put16(ip + 2, (uint16_t)tot);
	put16(ip + 4, s->ip_id++);
	put16(ip + 6, 0x4000);          /* DF */
	ip[8] = 64;
	ip[9] = 6;
	put16(ip + 10, 0);
	put32(ip + 12, s->mmds->ipv4);
	put32(ip + 16, peer_ip);
	put16(ip + 10, csum_fold(csum_add(0, ip, IP_HLEN)));
	tcp = ip + IP_HLEN;
	put16(tcp, HTTP_PORT);
	put16(tcp + 2, peer_port);
	put32(tcp + 4, seq);
	put32(tcp + 8, ack);
	tcp[12] = (uint8_t)((thl / 4) << 4);
	tcp[13] = flags;
	put16(tcp + 14, wnd);
	put16(tcp + 16, 0);
	put16(tcp + 18, 0);
	if (mss_opt) {
		tcp[20] = 2;
		tcp[21] = 4;
		put16(tcp + 22, MMDS_NET_MSS);
	}
	if (dlen)
		memcpy(tcp + thl, data, dlen);
	/* pseudo-header (RFC 9293 3.1) */
	sum = csum_add(0, ip + 12, 8);
	sum += 6 + (uint32_t)(thl + dlen);
	sum = csum_add(sum, tcp, thl + dlen);
	put16(tcp + 16, csum_fold(sum));
	q_commit(s, ETH_HLEN + tot);
	return 0;
}

static uint16_t rcv_wnd(const struct mmds_conn *c)
{
	return (uint16_t)(MMDS_MAX_REQUEST - c->rx_len);
}

/* A reset for a segment no connection owns (RFC 9293 3.10.7.1). */
static void reset_for(struct mmds_net *s, const uint8_t *mac, uint32_t ip, uint16_t port, uint32_t seq,
		      uint32_t ack, uint8_t flags, size_t dlen)
{
	s->stats.resets++;
	if (flags & TCP_ACK)
		emit(s, mac, ip, port, ack, 0, TCP_RST, 0, NULL, 0, 0);
	else
		emit(s, mac, ip, port, 0, seq + (uint32_t)dlen + ((flags & TCP_SYN) ? 1 : 0) +
					      ((flags & TCP_FIN) ? 1 : 0),
		     TCP_RST | TCP_ACK, 0, NULL, 0, 0);
}

/* A whole request in rx that serve() has yet to answer (it waits for the
 * previous answer to be acknowledged). */
static int request_waits(const struct mmds_conn *c)
{
	return c->rx_len && mmds_request_complete(c->rx, c->rx_len) != 0;
}

/* Sends what the window and the queue allow, then a FIN if it is time, or
 * a bare ACK if one is owed. */
static void conn_send(struct mmds_net *s, struct mmds_conn *c)
{
	if (c->state == MT_SYN_RCVD) {
		/* only when asked: the SYN and its retransmissions */
		if (c->owe_ack && !emit(s, c->peer_mac, c->peer_ip, c->peer_port, c->iss, c->rcv_nxt,
					TCP_SYN | TCP_ACK, rcv_wnd(c), NULL, 0, 1))
			c->owe_ack = 0;
		return;
	}
	for (;;) {
		uint32_t inflight = c->snd_nxt - c->snd_una;
		size_t off = inflight, left, n;

		if (c->fin_sent && inflight)
			off--; /* the FIN's sequence number is not a byte of tx */
		if (off >= c->tx_len || inflight >= c->wnd)
			break;
		left = c->tx_len - off;
		n = left < c->mss ? left : c->mss;
		if (n > c->wnd - inflight)
			n = c->wnd - inflight;
		if (emit(s, c->peer_mac, c->peer_ip, c->peer_port, c->snd_nxt, c->rcv_nxt,
			 TCP_ACK | (n == left ? TCP_PSH : 0), rcv_wnd(c), c->tx + off, n, 0))
			return;
		c->snd_nxt += (uint32_t)n;
		c->owe_ack = 0;
	}
	if (!c->fin_sent && (c->fin_after || (c->peer_fin && !request_waits(c))) &&
	    c->snd_nxt - c->snd_una == c->tx_len) {
		if (emit(s, c->peer_mac, c->peer_ip, c->peer_port, c->snd_nxt, c->rcv_nxt, TCP_FIN | TCP_ACK,
			 rcv_wnd(c), NULL, 0, 0))
			return;
		c->snd_nxt++;
		c->fin_sent = 1;
		c->owe_ack = 0;
	}
	if (c->owe_ack && !emit(s, c->peer_mac, c->peer_ip, c->peer_port, c->snd_nxt, c->rcv_nxt, TCP_ACK,
				rcv_wnd(c), NULL, 0, 0))
		c->owe_ack = 0;
}

/* Answers the next whole request received (pipelined ones in order), one
 * at a time: the next is read only once the guest has acknowledged all of
 * the previous answer. Requests wait in rx meanwhile and the window we
 * advertise shrinks with it, so a guest that pipelines requests and never
 * acknowledges makes the VMM hold one answer per connection, not one per
 * request (RFC 9112 9.3.2 lets a server answer pipelined requests as it
 * can, in order). */
static void serve(struct mmds_net *s, struct mmds_conn *c, uint64_t now)
{
	while (!c->fin_after && c->rx_len && !c->tx_len) {
		long n = mmds_request_complete(c->rx, c->rx_len);
		size_t rlen = 0;
		int status, close = 0;
		char *r, *nt;

		if (n == 0)
			return;
		if (n < 0) {
			static const char bad[] = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n"
						  "Content-Type: text/plain\r\nContent-Length: 22\r\n\r\n"
						  "Invalid HTTP request.\n";

			r = strdup(bad);
			rlen = sizeof(bad) - 1;
			close = 1;
			n = (long)c->rx_len;
		} else {
			r = mmds_respond(s->mmds, c->rx, (size_t)n, now, &rlen, &status, &close);
		}
		memmove(c->rx, c->rx + n, c->rx_len - (size_t)n);
		c->rx_len -= (size_t)n;
		if (!r) {
			c->fin_after = 1; /* out of memory: close rather than hang */
			return;
		}
		nt = realloc(c->tx, c->tx_len + rlen);
		if (!nt) {
			free(r);
			c->fin_after = 1;
			return;
		}
		memcpy(nt + c->tx_len, r, rlen);
		c->tx = nt;
		c->tx_len += rlen;
		free(r);
		if (close)
			c->fin_after = 1;
	}
}

static struct mmds_conn *conn_find(struct mmds_net *s, uint32_t ip, uint16_t port)
{
	unsigned i;

	for (i = 0; i < MMDS_NET_CONNS; i++)
		if (s->conns[i].state != MT_FREE && s->conns[i].peer_ip == ip && s->conns[i].peer_port == port)
			return &s->conns[i];
	return NULL;
}

/* A free slot, else the longest idle one past MMDS_NET_IDLE_NS. */
static struct mmds_conn *conn_slot(struct mmds_net *s, uint64_t now)
{
	struct mmds_conn *old = NULL;
	unsigned i;

	for (i = 0; i < MMDS_NET_CONNS; i++) {
		struct mmds_conn *c = &s->conns[i];

		if (c->state == MT_FREE)
			return c;
		if (now - c->last >= MMDS_NET_IDLE_NS && (!old || c->last < old->last))
			old = c;
	}
	if (old)
		conn_free(s, old);
	return old;
}

static void tcp_input(struct mmds_net *s, const uint8_t *f, const uint8_t *ip, size_t ip_len, uint64_t now)
{
	size_t ihl = (size_t)(ip[0] & 15) * 4, thl;
	const uint8_t *tcp = ip + ihl, *data;
	uint32_t peer_ip = get32(ip + 12), seq, ack;
	uint16_t sport, dport, win;
	uint8_t flags;
	size_t dlen;
	struct mmds_conn *c;

	if (ip_len < ihl + TCP_HLEN)
		goto drop;
	thl = (size_t)(tcp[12] >> 4) * 4;
	if (thl < TCP_HLEN || ip_len < ihl + thl)
		goto drop;
	sport = get16(tcp);
	dport = get16(tcp + 2);
	seq = get32(tcp + 4);
	ack = get32(tcp + 8);
	flags = tcp[13];
	win = get16(tcp + 14);
	data = tcp + thl;
	dlen = ip_len - ihl - thl;
	if (dport != HTTP_PORT) {
		if (!(flags & TCP_RST))
			reset_for(s, f + 6, peer_ip, sport, seq, ack, flags, dlen);
		return;
	}
	c = conn_find(s, peer_ip, sport);
	if (flags & TCP_RST) {
		if (c)
			conn_free(s, c);
		return;
	}
	if (c && (flags & TCP_SYN) && !(c->state == MT_SYN_RCVD && seq + 1 == c->rcv_nxt)) {
		conn_free(s, c); /* a new connection from a port we still knew */
		c = NULL;
	}
	if (!c) {
		const uint8_t *o;

		if ((flags & (TCP_SYN | TCP_ACK)) != TCP_SYN) {
			reset_for(s, f + 6, peer_ip, sport, seq, ack, flags, dlen);
			return;
		}
		c = conn_slot(s, now);
		if (!c) {
			reset_for(s, f + 6, peer_ip, sport, seq, ack, flags, dlen);
			return;
		}
		memset(c, 0, sizeof(*c));
		c->rx = malloc(MMDS_MAX_REQUEST);
		if (!c->rx) {
			reset_for(s, f + 6, peer_ip, sport, seq, ack, flags, dlen);
			return;
		}
		c->state = MT_SYN_RCVD;
		memcpy(c->peer_mac, f + 6, 6);
		c->peer_ip = peer_ip;
		c->peer_port = sport;
		c->rcv_nxt = seq + 1;
		s->iss_seed = s->iss_seed * 1103515245u + 12345u + (uint32_t)now;
		c->iss = s->iss_seed;
		c->snd_una = c->iss;
		c->snd_nxt = c->iss + 1;
		c->mss = 536; /* RFC 9293 3.7.1: without the option */
		c->wnd = win;
		for (o = tcp + TCP_HLEN; o < tcp + thl;) {
			if (o[0] == 0)
				break;
			if (o[0] == 1) {
				o++;
				continue;
			}
			if (o + 1 >= tcp + thl || o[1] < 2 || o + o[1] > tcp + thl)
				break;
			if (o[0] == 2 && o[1] == 4) {
				uint16_t m = get16(o + 2);

				c->mss = m < 64 ? 64 : m > MMDS_NET_MSS ? MMDS_NET_MSS : m;
			}
			o += o[1];
		}
		c->last = now;
		c->owe_ack = 1;
		s->stats.conns++;
		conn_send(s, c);
		return;
	}
	c->last = now;
	if (flags & TCP_SYN) {
		c->owe_ack = 1; /* our SYN-ACK was lost or late: again */
		conn_send(s, c);
		return;
	}
	if (!(flags & TCP_ACK))
		return; /* RFC 9293 3.10.7.4: drop a segment without ACK */
	if (seq_lt(c->snd_una, ack) && seq_le(ack, c->snd_nxt)) {
		uint32_t adv = ack - c->snd_una;

		if (c->state == MT_SYN_RCVD) {
			c->state = MT_OPEN;
			adv--; /* our SYN */
		}
		if (c->fin_sent && ack == c->snd_nxt)
			adv--; /* our FIN */
		if (adv > c->tx_len)
			adv = (uint32_t)c->tx_len;
		if (adv) {
			memmove(c->tx, c->tx + adv, c->tx_len - adv);
			c->tx_len -= adv;
		}
		c->snd_una = ack;
		if (!c->tx_len && c->rx_len)
			serve(s, c, now); /* the previous answer is all acknowledged */
	} else if (c->state == MT_SYN_RCVD) {
		reset_for(s, f + 6, peer_ip, sport, seq, ack, flags, dlen);
		conn_free(s, c);
		return;
	}
	c->wnd = win;
	if (dlen || (flags & TCP_FIN)) {
		if (seq != c->rcv_nxt || c->peer_fin) {
			c->owe_ack = 1; /* out of order or again: say where we are */
		} else {
			if (dlen > MMDS_MAX_REQUEST - c->rx_len) {
				/* more than a request may be, and the window said so */
				reset_for(s, f + 6, peer_ip, sport, seq, ack, TCP_ACK, 0);
				conn_free(s, c);
				return;
			}
			memcpy(c->rx + c->rx_len, data, dlen);
			c->rx_len += dlen;
			c->rcv_nxt += (uint32_t)dlen;
			if (flags & TCP_FIN) {
				c->rcv_nxt++;
				c->peer_fin = 1;
			}
			c->owe_ack = 1;
			serve(s, c, now);
		}
	}
	conn_send(s, c);
	if (c->fin_sent && c->snd_una == c->snd_nxt && c->peer_fin && !c->owe_ack)
		conn_free(s, c); /* both FINs acknowledged: done (no TIME-WAIT: we never reuse a port) */
	return;
drop:
	s->stats.dropped++;
}

void mmds_net_input(struct mmds_net *s, const uint8_t *f, size_t len, uint64_t now)
{
	size_t ip_len;

	s->stats.frames_in++;
	if (get16(f + 12) == ETH_P_ARP) {
		arp_reply(s, f);
		return;
	}
	/* IPv4 to the MMDS: header sane, not a fragment, TCP */
	if (len < ETH_HLEN + IP_HLEN || (f[14] & 15) < 5)
		goto drop;
	ip_len = get16(f + 16);
	if (ip_len < (size_t)(f[14] & 15) * 4 || ip_len > len - ETH_HLEN)
		goto drop;
	if ((get16(f + 20) & 0x3fff) != 0 || f[23] != 6)
		goto drop;
	tcp_input(s, f, f + ETH_HLEN, ip_len, now);
	return;
drop:
	s->stats.dropped++;
}

void mmds_net_pump(struct mmds_net *s)
{
	unsigned i;

	for (i = 0; i < MMDS_NET_CONNS && s->q_count < MMDS_NET_QUEUE; i++)
		if (s->conns[i].state != MT_FREE)
			conn_send(s, &s->conns[i]);
}
