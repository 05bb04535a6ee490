/* The guest's way to the MMDS (devices/mmds.h): a virtio-net device whose
 * interface is named in /mmds/config hands every frame its guest sends
 * here first. ARP requests for the MMDS address are answered with the
 * MMDS's own MAC, IPv4 to that address is consumed (TCP port 80 served,
 * anything else dropped, never reaching the TAP), and everything else goes
 * on to the TAP as before.
 *
 * The TCP side is the least a guest's stack needs to talk HTTP to a
 * server that never loses a segment: passive open with the MSS option, no
 * window scaling, in-order data only (anything else is re-acknowledged and
 * the guest retransmits), responses sent within the guest's window and
 * its MSS, a FIN after a response that closes, and a reset for anything
 * unknown. Frames towards the guest wait in a small queue that the device
 * drains into the rx ring; they are never dropped there, so nothing is
 * retransmitted (a full queue only defers the next segment until the
 * device has taken some: mmds_net_pump). Connections idle for
 * MMDS_NET_IDLE_NS are forgotten when a slot is needed. Everything here is
 * the device thread's. */
#ifndef DEVICES_MMDS_NET_H
#define DEVICES_MMDS_NET_H

#include <stddef.h>
#include <stdint.h>

#include "devices/mmds.h"

#define MMDS_NET_CONNS 16
#define MMDS_NET_QUEUE 64
#define MMDS_NET_FRAME 1514            /* Ethernet + IPv4 + TCP + a 1460-byte payload */
#define MMDS_NET_MSS 1460
#define MMDS_NET_IDLE_NS (60ull * 1000000000ull)

/* The MMDS's MAC (as Firecracker's: locally administered, unicast). */
#define MMDS_NET_MAC { 0x06, 0x01, 0x23, 0x45, 0x67, 0x01 }

enum mmds_tcp_state { MT_FREE, MT_SYN_RCVD, MT_OPEN };

struct mmds_conn {
	enum mmds_tcp_state state;
	uint8_t peer_mac[6];
	uint32_t peer_ip;        /* host order */
	uint16_t peer_port;
	uint32_t iss, snd_una, snd_nxt, rcv_nxt;
	uint32_t wnd;            /* the guest's receive window */
	uint16_t mss;            /* the guest's */
	char *rx;                /* request bytes so far (MMDS_MAX_REQUEST) */
	size_t rx_len;
	char *tx;                /* response bytes from snd_una on */
	size_t tx_len;
	int fin_after;           /* close once tx is sent */
	int fin_sent, peer_fin;
	int owe_ack;
	uint64_t last;           /* last segment, monotonic ns */
};

struct mmds_net_stats {
	uint64_t frames_in, frames_out, arp_replies, dropped, resets, conns;
};

struct mmds_net {
	struct mmds *mmds;
	struct mmds_conn conns[MMDS_NET_CONNS];
	struct { uint16_t len; uint8_t data[MMDS_NET_FRAME]; } q[MMDS_NET_QUEUE];
	unsigned q_head, q_count;
	uint16_t ip_id;
	uint32_t iss_seed;
	struct mmds_net_stats stats;
};

void mmds_net_init(struct mmds_net *s, struct mmds *m);
void mmds_net_destroy(struct mmds_net *s);
/* 1 if this Ethernet frame (no virtio-net header; its first
 * MMDS_NET_PEEK bytes, or all of it if shorter, suffice) is the MMDS's: an
 * ARP request for its address, or IPv4 to it. 0: it goes to the TAP. */
#define MMDS_NET_PEEK 42
int mmds_net_wants(const struct mmds_net *s, const uint8_t *frame, size_t len);
/* The device was reset: every connection and every frame queued for the
 * guest is forgotten (the driver that comes next knows none of them). */
void mmds_net_reset(struct mmds_net *s);
/* Takes a frame mmds_net_wants said is the MMDS's: answered, or dropped
 * (counted) if it is malformed or not TCP port 80. */
void mmds_net_input(struct mmds_net *s, const uint8_t *frame, size_t len, uint64_t now);
/* Frames for the guest: how many wait, and the next one copied out (its
 * length; 0 if none). */
unsigned mmds_net_pending(const struct mmds_net *s);
size_t mmds_net_pop(struct mmds_net *s, uint8_t *buf, size_t cap);
/* Sends what the queue had no room for before. */
void mmds_net_pump(struct mmds_net *s);

#endif
