/* Idle accounting for auto-standby (--idle-timeout, docs/snapshot.md).
 *
 * Pure bookkeeping over a clock the caller passes in (monotonic ns), so a
 * unit test drives it with a fake one. A sandbox is busy while anything
 * counts as in flight (an open vsock connection: API calls, exec streams,
 * cp, published-port connections, guest-initiated connections); it is idle
 * once nothing has been in flight for the timeout. Owned by one thread
 * (vm_run's); the device threads publish their counts through atomics that
 * the owner samples with idle_observe. */
#ifndef VMM_IDLE_H
#define VMM_IDLE_H

#include <stdint.h>

struct idle {
	uint64_t timeout_ns; /* 0: never idle */
	uint64_t since_ns;   /* the last moment something was in flight */
	unsigned busy;       /* in flight at the last observation */
	uint64_t seen_gen;   /* activity generation at the last observation */
};

void idle_init(struct idle *d, uint64_t timeout_ns, uint64_t now_ns);
/* An event that happened at now_ns (a control request). */
void idle_touch(struct idle *d, uint64_t now_ns);
/* A sample of what is in flight (`busy`) and a generation counter that
 * moves on every start or end of activity (so a connection opened and
 * closed between two samples still counts). */
void idle_observe(struct idle *d, unsigned busy, uint64_t gen, uint64_t now_ns);
/* 1 once the sandbox has been idle for the timeout. */
int idle_expired(const struct idle *d, uint64_t now_ns);
/* Milliseconds until idle_expired could become true (for a poll timeout);
 * -1: never (no timeout, or busy). */
int idle_wait_ms(const struct idle *d, uint64_t now_ns);

#endif
