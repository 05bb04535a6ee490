/* virtio-net (virtio 1.2 section 5.1) over a TAP interface. One rx and one
 * tx queue, no control queue. The virtio-net header crosses the TAP as it
 * is (IFF_VNET_HDR), so checksum and TCP segmentation offloads work in both
 * directions without the VMM touching the payload: tx frames go from guest
 * memory to the TAP with one writev, rx frames are read once into a bounce
 * buffer and copied into the guest's (mergeable) buffers. */
#ifndef DEVICES_VIRTIO_NET_H
#define DEVICES_VIRTIO_NET_H

#include <stdint.h>
#include <sys/uio.h>

#include "devices/mmds_net.h"
#include "devices/tap.h"
#include "devices/virtio_mmio.h"
#include "vmm/base/ratelimit.h"

#define VIRTIO_ID_NET 1

/* Feature bits (5.1.3). */
#define VIRTIO_NET_F_CSUM 0
#define VIRTIO_NET_F_GUEST_CSUM 1
#define VIRTIO_NET_F_MAC 5
#define VIRTIO_NET_F_GUEST_TSO4 7
#define VIRTIO_NET_F_GUEST_TSO6 8
#define VIRTIO_NET_F_GUEST_ECN 9
#define VIRTIO_NET_F_HOST_TSO4 11
#define VIRTIO_NET_F_HOST_TSO6 12
#define VIRTIO_NET_F_HOST_ECN 13
#define VIRTIO_NET_F_MRG_RXBUF 15
#define VIRTIO_NET_F_STATUS 16

#define VIRTIO_NET_S_LINK_UP 1

/* Header flags and GSO types (5.1.6). */
#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1
#define VIRTIO_NET_HDR_F_DATA_VALID 2
#define VIRTIO_NET_HDR_GSO_NONE 0
#define VIRTIO_NET_HDR_GSO_TCPV4 1
#define VIRTIO_NET_HDR_GSO_UDP 3
#define VIRTIO_NET_HDR_GSO_TCPV6 4
#define VIRTIO_NET_HDR_GSO_ECN 0x80

#define NET_QUEUE_RX 0
#define NET_QUEUE_TX 1
#define NET_QUEUE_SIZE 256
#define NET_ETH_HLEN 14
/* Largest frame either way: a 64 KiB TSO packet plus Ethernet and VLAN
 * headers. */
#define NET_MAX_FRAME (65535u + NET_ETH_HLEN + 4u)
#define NET_TX_BUDGET 256 /* frames per turn before the loop looks at rx */
#define NET_RX_BUDGET 256
#define NET_MAX_IOV 1024  /* IOV_MAX on Linux: header + frame pieces in one writev */

struct virtio_net_hdr_v1 {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_net_hdr_v1) == 12, "virtio-net header is 12 bytes (5.1.6)");
#define NET_HDR_LEN ((uint32_t)sizeof(struct virtio_net_hdr_v1))

/* Config space (5.1.4). */
struct virtio_net_config {
	uint8_t mac[6];
	uint16_t status;
	uint16_t max_virtqueue_pairs;
	uint16_t mtu;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_net_config) == 12, "net config layout (5.1.4)");

/* --net tap=NAME[,mac=MAC][,ip=ADDR/PREFIX][,gw=ADDR][,dns=ADDR]
 *       [,host_ip=ADDR/PREFIX][,offload=off]
 *       [,rx_bps=RATE][,rx_pps=RATE][,tx_bps=RATE][,tx_pps=RATE][,mmds[=v1|v2]] */
struct net_options {
	char tap[16];
	uint8_t mac[6];
	int has_mac;
	uint32_t ip, gw, dns;       /* guest side (network order), 0: none */
	unsigned prefix;
	uint32_t host_ip;           /* host side of the TAP, 0: leave it alone */
	unsigned host_prefix;
	int no_offload;
	struct rl_limits rx, tx;    /* rx_bps=, rx_pps=, tx_bps=, tx_pps= */
	uint8_t host_mac[6];        /* restore: the snapshot's TAP's MAC, given to this one */
	int has_host_mac;
	int mmds;                   /* 1, 2: frames for the MMDS address are the MMDS's
				       (vm_config.mmds), V1 or V2 when the CLI makes it */
};

/* 0, or -EINVAL with *why set. A MAC is made up (locally administered) when
 * none is given. */
int net_options_parse(const char *s, struct net_options *o, const char **why);
/* "vmm.net=MAC[,ip=ADDR/PREFIX][,gw=ADDR][,dns=ADDR]": what guest-init
 * reads to configure the interface with that MAC (docs/networking.md). */
int net_guest_cmdline(const struct net_options *o, char *buf, size_t len);
void net_format_mac(const uint8_t mac[6], char out[18]);

struct net_stats {
	uint64_t rx_packets, rx_bytes, rx_dropped;
	uint64_t tx_packets, tx_bytes, tx_dropped, tx_malformed;
	uint64_t throttled;      /* times the rate limiter made rx or tx wait */
};

struct virtio_net {
	struct virtio_dev vdev;
	struct net_options opt;
	struct tap tap;
	struct virtio_net_config config;
	int active;              /* offloads applied, TAP watched */
	unsigned cur_offloads;   /* TAP_OFF_* currently set on the TAP */
	uint32_t tap_events;     /* what the TAP source waits for now */
	struct evloop_source tap_src;
	int timer_fd;            /* rate limiter wake-up */
	int timer_armed;
	struct evloop_source timer_src;
	struct ratelimit rx_rl, tx_rl;
	/* rx: one frame (header included) read from the TAP, waiting for guest
	 * buffers or for the limiter. */
	uint8_t *rx_frame;
	uint32_t rx_len;
	int rx_paid;             /* the limiter already let rx_frame through */
	int rx_wait_buffers, rx_wait_timer;
	int tx_wait_tap, tx_wait_timer;
	struct vq_chain chain;
	struct iovec iov[NET_MAX_IOV];
	struct { uint16_t head; uint32_t len; } used[NET_QUEUE_SIZE];
	struct net_stats stats;
	struct log_ratelimit rl;
	/* MMDS (devices/mmds_net.h): frames for its address never reach the
	 * TAP; its answers go to the guest before the TAP's frames. */
	struct mmds_net *mmds;
	uint8_t *mmds_buf;       /* one guest frame, for the MMDS to read */
};

/* Pure checks (unit tests, fuzzers). A tx header the guest wrote for a
 * frame of frame_len bytes: 0, or -EINVAL with *why. */
int net_tx_check(const struct virtio_net_hdr_v1 *h, uint64_t frame_len, uint64_t features,
		 const char **why);
/* A header the TAP wrote, before it goes to the guest: fixed up for what
 * the driver negotiated, or -EINVAL (drop the frame). */
int net_rx_fix(struct virtio_net_hdr_v1 *h, uint64_t features);

/* Device thread only (exposed for the fuzzer). Sends one transmit chain to
 * the TAP: 0 once it is consumed (sent, or dropped and counted), -EAGAIN if
 * the TAP is full (nothing was sent). */
int virtio_net_tx_one(struct virtio_net *n, const struct vq_chain *c);
/* Places the waiting rx frame (rx_frame[0..rx_len)) in the rx ring: 0 when
 * it is done (delivered, *pushed set, or dropped and counted), 1 if the
 * ring has not enough buffers yet (nothing consumed), -1 if the driver
 * broke a rule (the device is in NEEDS_RESET). */
int virtio_net_rx_place(struct virtio_net *n, int *pushed);

/* Opens (or creates) the TAP `o` names, gives it the snapshot's MAC and the
 * host address if `o` says so. The jailer does this before the VMM leaves
 * the host's network namespace. 0 or -errno (logged). */
int virtio_net_open_tap(const struct net_options *o, struct tap *t) __attribute__((warn_unused_result));
/* Opens the TAP and sets up the device. */
int virtio_net_init(struct virtio_net *n, const struct net_options *o, int vm_fd,
		    const struct gm *gm, uint64_t base, unsigned irq, unsigned index)
	__attribute__((warn_unused_result));
/* Sets up the device on an open TAP (taken over, closed on failure). Tests
 * pass a SOCK_SEQPACKET socket, which keeps frame boundaries as a TAP does. */
int virtio_net_init_tap(struct virtio_net *n, const struct net_options *o, struct tap *t,
			int vm_fd, const struct gm *gm, uint64_t base, unsigned irq, unsigned index)
	__attribute__((warn_unused_result));
void virtio_net_destroy(struct virtio_net *n);
/* Serves the MMDS `m` on this interface (before the guest runs). 0 or
 * -ENOMEM. */
int virtio_net_enable_mmds(struct virtio_net *n, struct mmds *m) __attribute__((warn_unused_result));
/* New limits on a running device (NULL: keep that direction's):
 * Firecracker's PATCH /network-interfaces/{id}. Main thread. */
void virtio_net_set_limits(struct virtio_net *n, const struct rl_limits *rx, const struct rl_limits *tx);
void virtio_net_limits(const struct virtio_net *n, struct rl_limits *rx, struct rl_limits *tx);

#endif
