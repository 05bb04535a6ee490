/* Idle accounting for auto-standby: see idle.h. */
#include "vmm/idle.h"

#include <limits.h>

void idle_init(struct idle *d, uint64_t timeout_ns, uint64_t now_ns)
{
	d->timeout_ns = timeout_ns;
	d->since_ns = now_ns;
	d->busy = 0;
	d->seen_gen = 0;
}

void idle_touch(struct idle *d, uint64_t now_ns)
{
	if (now_ns > d->since_ns)
		d->since_ns = now_ns;
}

void idle_observe(struct idle *d, unsigned busy, uint64_t gen, uint64_t now_ns)
{
	if (busy || d->busy || gen != d->seen_gen)
		idle_touch(d, now_ns);
	d->busy = busy;
	d->seen_gen = gen;
}

int idle_expired(const struct idle *d, uint64_t now_ns)
{
	if (!d->timeout_ns || d->busy)
		return 0;
	return now_ns >= d->since_ns && now_ns - d->since_ns >= d->timeout_ns;
}

int idle_wait_ms(const struct idle *d, uint64_t now_ns)
{
	uint64_t left;

	if (!d->timeout_ns)
		return -1;
	if (d->busy)
		return 1000; /* look again: the count moves without waking us */
	if (idle_expired(d, now_ns))
		return 0;
	left = d->since_ns + d->timeout_ns - (now_ns > d->since_ns ? now_ns : d->since_ns);
	left = left / 1000000 + 1;
	if (left > 1000)
		left = 1000; /* activity the device threads see does not wake this poll */
	return (int)left;
}
