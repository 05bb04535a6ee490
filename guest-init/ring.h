/* A bounded byte ring with absolute offsets, for a detached process's
 * output (docs/api.md, "Detached processes"). Byte N of the stream keeps
 * offset N forever: a reader holds an offset, and when the ring has
 * dropped the bytes under it (the oldest go first) it learns how many it
 * skipped. Pure: unit-tested and fuzzed without a process. */
#ifndef GUEST_RING_H
#define GUEST_RING_H

#include <stddef.h>
#include <stdint.h>

struct ring {
	uint8_t *buf;
	size_t cap;
	uint64_t head; /* offset of the oldest byte kept (= bytes dropped) */
	uint64_t tail; /* offset one past the newest byte (= bytes written) */
};

/* 0 or -ENOMEM/-EINVAL (cap 0). */
int ring_init(struct ring *r, size_t cap) __attribute__((warn_unused_result));
void ring_free(struct ring *r);
/* Appends len bytes, dropping the oldest past the capacity. */
void ring_write(struct ring *r, const void *data, size_t len);
static inline uint64_t ring_dropped(const struct ring *r) { return r->head; }
static inline size_t ring_len(const struct ring *r) { return (size_t)(r->tail - r->head); }
/* Copies up to max bytes from offset *off (moved up to the oldest kept
 * byte first, the bytes passed over added to *skipped) and advances *off.
 * Returns the bytes copied (0: nothing past *off yet). An offset past the
 * tail reads nothing. */
size_t ring_read(const struct ring *r, uint64_t *off, void *out, size_t max, uint64_t *skipped);

#endif
