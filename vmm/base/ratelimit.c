/* Token buckets; see ratelimit.h. Tokens are held in units of 1e-9 token
 * so that refilling at `rate` tokens/s over dt ns adds exactly rate * dt. */
#include "vmm/base/ratelimit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NS 1000000000ull
/* Largest rate and burst (10 G tokens): burst * NS + rate fits in 64 bits. */
#define RL_MAX (10ull * NS)

static void bucket_init(struct rl_bucket *b, uint64_t rate, uint64_t burst, uint64_t now)
{
	memset(b, 0, sizeof(*b));
	if (!rate)
		return;
	if (rate > RL_MAX)
		rate = RL_MAX;
	if (!burst)
		burst = rate;
	if (burst > RL_MAX)
		burst = RL_MAX;
	b->rate = rate;
	b->burst = burst;
	b->tokens_ns = burst * NS;
	b->last_ns = now;
}

void rl_init(struct ratelimit *rl, uint64_t bytes_per_s, uint64_t bytes_burst,
	     uint64_t ops_per_s, uint64_t ops_burst, uint64_t now_ns)
{
	bucket_init(&rl->bytes, bytes_per_s, bytes_burst, now_ns);
	bucket_init(&rl->ops, ops_per_s, ops_burst, now_ns);
}

void rl_init_limits(struct ratelimit *rl, const struct rl_limits *l, uint64_t now_ns)
{
	rl_init(rl, l->bytes_per_s, l->bytes_burst, l->ops_per_s, l->ops_burst, now_ns);
}

int rl_enabled(const struct ratelimit *rl)
{
	return rl->bytes.rate || rl->ops.rate;
}

static void refill(struct rl_bucket *b, uint64_t now)
{
	uint64_t max = b->burst * NS, dt;

	if (now <= b->last_ns)
		return;
	dt = now - b->last_ns;
	b->last_ns = now;
	/* Overflow-safe: once dt would fill the bucket, it is full. */
	if (dt >= (max - b->tokens_ns) / b->rate + 1)
		b->tokens_ns = max;
	else
		b->tokens_ns += b->rate * dt;
	if (b->tokens_ns > max)
		b->tokens_ns = max;
}

/* ns until `b` holds `n` tokens (0: it does now). */
static uint64_t wait_for(struct rl_bucket *b, uint64_t n, uint64_t now)
{
	uint64_t need;

	if (!b->rate)
		return 0;
	refill(b, now);
	if (n > b->burst)
		n = b->burst; /* larger than the bucket: a full bucket will do */
	need = n * NS;
	if (b->tokens_ns >= need)
		return 0;
	return (need - b->tokens_ns + b->rate - 1) / b->rate;
}

static void take(struct rl_bucket *b, uint64_t n)
{
	if (!b->rate)
		return;
	if (n > b->burst)
		n = b->burst;
	b->tokens_ns -= n * NS;
}

uint64_t rl_take(struct ratelimit *rl, uint64_t bytes, uint64_t now_ns)
{
	uint64_t wb = wait_for(&rl->bytes, bytes, now_ns), wo = wait_for(&rl->ops, 1, now_ns);

	if (wb || wo)
		return wb > wo ? wb : wo;
	take(&rl->bytes, bytes);
	take(&rl->ops, 1);
	return 0;
}

int rl_parse_rate(const char *s, uint64_t *out)
{
	char *end;
	double v, mul = 1;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	if (*end) {
		int binary = end[1] == 'i';

		switch (*end) {
		case 'k': case 'K': mul = binary ? 1024.0 : 1e3; break;
		case 'M': mul = binary ? 1048576.0 : 1e6; break;
		case 'G': mul = binary ? 1073741824.0 : 1e9; break;
		default: return -EINVAL;
		}
		if (end[1 + binary])
			return -EINVAL;
	}
	v *= mul;
	if (v >= 1.8e19)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}
