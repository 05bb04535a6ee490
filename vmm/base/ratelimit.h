/* Token-bucket rate limiter for device I/O (virtio-net rx/tx, virtio-blk):
 * two buckets, bytes and operations (packets or requests), each refilled
 * continuously at its rate up to its burst size. A rate of 0 means no limit
 * for that bucket. Pure arithmetic on a caller-supplied clock, so tests
 * drive time; the device arms a timer for the delay rl_take() returns. */
#ifndef VMM_RATELIMIT_H
#define VMM_RATELIMIT_H

#include <stdint.h>

struct rl_bucket {
	uint64_t rate;      /* tokens per second, 0: unlimited */
	uint64_t burst;     /* bucket size in tokens (default: one second's worth) */
	uint64_t tokens_ns; /* tokens held, in units of 1/1e9 token (no rounding drift) */
	uint64_t last_ns;   /* when tokens_ns was last brought up to date */
};

struct ratelimit {
	struct rl_bucket bytes;
	struct rl_bucket ops;
};

/* A device direction's limits as configured: rates per second and bucket
 * sizes (0: one second's worth); rates 0: no limit. */
struct rl_limits {
	uint64_t bytes_per_s, bytes_burst;
	uint64_t ops_per_s, ops_burst;
};

/* Rates 0 disable a bucket; burst 0 means "one second's worth". The
 * buckets start full. */
void rl_init(struct ratelimit *rl, uint64_t bytes_per_s, uint64_t bytes_burst,
	     uint64_t ops_per_s, uint64_t ops_burst, uint64_t now_ns);
void rl_init_limits(struct ratelimit *rl, const struct rl_limits *l, uint64_t now_ns);
/* Is any bucket limited? */
int rl_enabled(const struct ratelimit *rl);
/* Takes `bytes` and one operation if both buckets hold enough; returns 0.
 * Otherwise takes nothing and returns how many ns to wait before trying
 * again (at least 1). An operation larger than the burst is let through
 * once the bucket is full (and empties it), so nothing waits forever. */
uint64_t rl_take(struct ratelimit *rl, uint64_t bytes, uint64_t now_ns);

/* Parses a rate such as "10M", "1.5G", "800k", "1000" (per second; k/M/G
 * are powers of 1000, Ki/Mi/Gi of 1024). 0 or -EINVAL. */
int rl_parse_rate(const char *s, uint64_t *out);

#endif
