/* A detached process's output ring (guest-init/ring.h). */
#include "guest-init/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ring_init(struct ring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	if (cap == 0)
		return -EINVAL;
	r->buf = malloc(cap);
	if (!r->buf)
		return -ENOMEM;
	r->cap = cap;
	return 0;
}

void ring_free(struct ring *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

void ring_write(struct ring *r, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t pos, first;

	if (!r->buf || len == 0)
		return;
	if (len > r->cap) {
		/* Only the newest cap bytes can stay. */
		p += len - r->cap;
		r->tail += len - r->cap;
		len = r->cap;
	}
	pos = (size_t)(r->tail % r->cap);
	first = r->cap - pos < len ? r->cap - pos : len;
	memcpy(r->buf + pos, p, first);
	memcpy(r->buf, p + first, len - first);
	r->tail += len;
	if (r->tail - r->head > r->cap)
		r->head = r->tail - r->cap;
}

size_t ring_read(const struct ring *r, uint64_t *off, void *out, size_t max, uint64_t *skipped)
{
	size_t n, pos, first;

	if (*off < r->head) {
		if (skipped)
			*skipped += r->head - *off;
		*off = r->head;
	}
	if (*off >= r->tail || !r->buf)
		return 0;
	n = (size_t)(r->tail - *off) < max ? (size_t)(r->tail - *off) : max;
	pos = (size_t)(*off % r->cap);
	first = r->cap - pos < n ? r->cap - pos : n;
	memcpy(out, r->buf + pos, first);
	memcpy((uint8_t *)out + first, r->buf, n - first);
	*off += n;
	return n;
}
