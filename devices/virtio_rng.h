/* virtio-rng, the entropy device (virtio 1.2 section 5.4): one request
 * queue of device-writable buffers the device fills from the host's
 * getrandom(2). Firecracker's PUT /entropy, with its rate_limiter. */
#ifndef DEVICES_VIRTIO_RNG_H
#define DEVICES_VIRTIO_RNG_H

#include <stdint.h>
#include <sys/uio.h>

#include "devices/virtio_mmio.h"

#define VIRTIO_ID_RNG 4
#define RNG_QUEUE_SIZE 256
/* Bytes put in one request at most: 5.4.6.1 lets the device use less
 * than the whole buffer, and Linux's hw_random asks for at most a page
 * (rng_buffer_size), so a larger buffer is filled this far. */
#define RNG_MAX_REQ (64u << 10)

struct rng_options {
	struct rl_limits rl; /* bytes and requests per second, 0: none */
};

struct virtio_rng {
	struct virtio_dev vdev;
	struct rl_limits limits; /* as configured */
	struct vq_chain chain;
	struct iovec iov[VQ_MAX_CHAIN];
	struct ratelimit rl;
	int timer_fd;        /* -1 without a limit */
	int throttled;       /* waiting for the timer */
	struct evloop_source timer_src;
	/* Counters (Firecracker's entropy metrics where they apply). */
	uint64_t reqs, bytes, fails, waits;
	/* The source of the bytes: getrandom(2) unless a test sets another
	 * before the driver starts. Returns bytes written or -errno. */
	long (*fill)(void *buf, size_t len);
};

/* Serves one request: fills the chain's writable buffers (up to
 * RNG_MAX_REQ bytes). Returns the bytes written (0 if the host's source
 * failed: the request completes empty, the driver asks again), or -1 if
 * the chain breaks 5.4.6.2 (a driver-readable buffer, or none writable):
 * the device then needs reset. Device thread only (exposed for the
 * fuzzer). */
int64_t virtio_rng_handle(struct virtio_rng *r, const struct vq_chain *c);

int virtio_rng_init(struct virtio_rng *r, const struct rng_options *o, int vm_fd, const struct gm *gm,
		    uint64_t base, unsigned irq) __attribute__((warn_unused_result));
void virtio_rng_destroy(struct virtio_rng *r);

/* Parses "[bps=RATE][,ops=RATE]" (vmm run --entropy; "on" or "" for no
 * limit). 0 or -EINVAL (why set). */
int rng_options_parse(const char *s, struct rng_options *o, const char **why);

#endif
