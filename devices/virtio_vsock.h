/* virtio-vsock (virtio 1.2 section 5.10) in userspace, host side on Unix
 * sockets the Firecracker way:
 *  - host-initiated: a client connects to the Unix socket `uds`, writes
 *    "CONNECT <port>\n", gets "OK <hostport>\n", then a byte stream with
 *    the guest's listener on <port>;
 *  - guest-initiated: a connection to host port P goes to the Unix socket
 *    "<uds>_P" if something listens there, and is refused otherwise.
 * Stream sockets only, credit-based flow control both ways: the VMM never
 * buffers more than the credit it granted (VSOCK_BUF_ALLOC per
 * connection) and reads from a host socket only what the guest has room
 * for. */
#ifndef DEVICES_VIRTIO_VSOCK_H
#define DEVICES_VIRTIO_VSOCK_H

#include <stdatomic.h>
#include <limits.h>
#include <stdint.h>

#include "devices/virtio_mmio.h"

#define VIRTIO_ID_VSOCK 19
#define VSOCK_HOST_CID 2
#define VSOCK_QUEUE_RX 0
#define VSOCK_QUEUE_TX 1
#define VSOCK_QUEUE_EVENT 2
#define VSOCK_QUEUE_SIZE 256

#define VIRTIO_VSOCK_TYPE_STREAM 1
enum {
	VIRTIO_VSOCK_OP_INVALID = 0,
	VIRTIO_VSOCK_OP_REQUEST = 1,
	VIRTIO_VSOCK_OP_RESPONSE = 2,
	VIRTIO_VSOCK_OP_RST = 3,
	VIRTIO_VSOCK_OP_SHUTDOWN = 4,
	VIRTIO_VSOCK_OP_RW = 5,
	VIRTIO_VSOCK_OP_CREDIT_UPDATE = 6,
	VIRTIO_VSOCK_OP_CREDIT_REQUEST = 7,
};
#define VIRTIO_VSOCK_SHUTDOWN_RCV 1
#define VIRTIO_VSOCK_SHUTDOWN_SEND 2
#define VIRTIO_VSOCK_EVENT_TRANSPORT_RESET 0

#define VSOCK_BUF_ALLOC (256u * 1024)  /* credit we grant per connection */
#define VSOCK_MAX_PAYLOAD (64u * 1024) /* largest packet payload we accept or send */
#define VSOCK_MAX_CONNS 1024
#define VSOCK_RST_QUEUE 64             /* connection-less RSTs waiting for rx buffers */
#define VSOCK_HOST_PORT_FIRST (1u << 30)

struct virtio_vsock_hdr {
	uint64_t src_cid;
	uint64_t dst_cid;
	uint32_t src_port;
	uint32_t dst_port;
	uint32_t len;
	uint16_t type;
	uint16_t op;
	uint32_t flags;
	uint32_t buf_alloc;
	uint32_t fwd_cnt;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_vsock_hdr) == 44, "vsock header is 44 bytes (5.10.6)");

/* What to do with a packet from the guest (pure check of its header). */
enum vsock_verdict {
	VSOCK_ACCEPT,  /* well-formed: handle it */
	VSOCK_REPLY_RST, /* refuse it with an RST to its sender */
	VSOCK_DROP,    /* drop silently (spoofed source, or an RST itself) */
};
/* `payload` is how many bytes follow the header in the chain. */
enum vsock_verdict vsock_check(const struct virtio_vsock_hdr *h, uint64_t payload,
			       uint64_t guest_cid, const char **why);

struct vsock_options {
	uint64_t cid;
	/* Any length (vmm/base/unixsock.h); "_<port>" is appended for the
	 * listeners of guest-initiated connections, so room is left for it. */
	char uds[PATH_MAX];
};
/* Parses "cid=N,uds=PATH". 0 or -EINVAL (why set). */
int vsock_options_parse(const char *s, struct vsock_options *o, const char **why);

struct vsock_conn;

struct vsock_dev {
	struct virtio_dev vdev;
	struct vsock_options opt;
	struct { uint64_t guest_cid; } __attribute__((packed)) config;
	int listen_fd;
	/* An O_PATH descriptor of uds's folder: the device loop, whose filter
	 * allows no open, connects through it to a "uds_PORT" too long for
	 * sun_path (vmm/base/unixsock.h). */
	int dir_fd;
	struct evloop_source listen_src;
	struct vsock_conn *conns[VSOCK_MAX_CONNS];
	unsigned nr_conns;
	uint32_t next_port;
	/* Round-robin of connections with something for the guest. */
	struct vsock_conn *pend[VSOCK_MAX_CONNS];
	unsigned pend_head, pend_len;
	/* RSTs for packets that had no connection. */
	struct { uint32_t src_port, dst_port; } rst[VSOCK_RST_QUEUE];
	unsigned nr_rst;
	struct vsock_conn *graveyard; /* freed after the loop's batch */
	int event_reset_pending;
	/* A transport reset went to the guest and it has not yet put a new
	 * event buffer back (which it does after handling the event): host
	 * connections wait in the listen backlog meanwhile, or the guest
	 * could take our REQUEST first and then reset the new connection
	 * without a word to us. */
	int reset_unacked;
	uint16_t reset_avail_idx;
	int listen_held;
	struct log_ratelimit rl;
	uint64_t dropped;
	/* The guest port whose refusal was last logged, plus one (0: none):
	 * a host client retrying while the guest boots (vmm run waiting for
	 * the API) is told once, not once a retry; an accepted connection to
	 * that port clears it. */
	uint32_t refused_said;
	/* For idle accounting (vmm/idle.h), read by vm_run's thread: the
	 * connections open now, and a count of every open and close. */
	_Atomic unsigned act_conns;
	_Atomic uint64_t act_gen;
	/* A host port whose connections do not count as activity (0: none):
	 * guest-init's ready notice stays connected for the guest's life. */
	uint32_t idle_exempt_port;
	unsigned nr_exempt;      /* of conns[], those to idle_exempt_port */
	/* Scratch for the chains in hand, last and never cleared (each pop
	 * writes what is read): 48 KiB that stay untouched pages but for the
	 * few a chain uses. */
	struct vq_chain chain;
	struct vq_chain rxchain;
	struct iovec iov[VQ_MAX_CHAIN];
};

int virtio_vsock_init(struct vsock_dev *v, const struct vsock_options *o, int vm_fd,
		      const struct gm *gm, uint64_t base, unsigned irq)
	__attribute__((warn_unused_result));
void virtio_vsock_destroy(struct vsock_dev *v);
/* Tells the guest all its connections are gone (snapshot restore):
 * VIRTIO_VSOCK_EVENT_TRANSPORT_RESET on the event queue. Loop thread or
 * with the loop paused. */
void virtio_vsock_transport_reset(struct vsock_dev *v);
/* Handles one tx chain (exposed for the fuzzer). Loop thread only. */
void vsock_handle_tx(struct vsock_dev *v, const struct vq_chain *c);

#endif
