/* File watching for the sandbox API (docs/api.md, "watch"): inotify
 * events turned into create/modify/delete/rename events with paths,
 * merged over a short window (the batch below is the pure, unit-tested
 * part), and an explicit overflow event when events were lost. */
#ifndef GUEST_WATCH_H
#define GUEST_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/wire/json.h"

#define WATCH_BATCH_MAX 256      /* events in one EVENT frame */
#define WATCH_POOL (64u * 1024)  /* bytes of paths in one batch */
#define WATCH_NONE UINT32_MAX

enum watch_type { WATCH_CREATE, WATCH_MODIFY, WATCH_DELETE, WATCH_RENAME, WATCH_OVERFLOW };

struct watch_event {
	uint8_t type, dir;
	uint32_t path, to;       /* offsets into pool (to: WATCH_NONE) */
	uint32_t cookie;         /* rename: pairs IN_MOVED_FROM with IN_MOVED_TO */
};

struct watch_batch {
	struct watch_event ev[WATCH_BATCH_MAX];
	unsigned n;
	char pool[WATCH_POOL];
	size_t used;
	uint64_t first_ms;       /* when the oldest event came (the window) */
};

void watch_batch_reset(struct watch_batch *b);
/* Adds an event unless the batch says it already: a modify of a path the
 * batch created or modified, a repeated create, delete or overflow.
 * WATCH_RENAME adds "path moved away" (cookie set), which
 * watch_batch_moved_to completes. 0 added, 1 merged, -ENOSPC: flush the
 * batch, then add again. */
int watch_batch_add(struct watch_batch *b, enum watch_type t, int dir, const char *path, uint32_t cookie);
/* The arrival side of a move: completes the rename with that cookie, or
 * (moved in from outside the watch) a create. As watch_batch_add. */
int watch_batch_moved_to(struct watch_batch *b, int dir, const char *path, uint32_t cookie);
/* {"events":[{"type":"create","path":P,"dir":B},{"type":"rename","path":P,
 * "to":Q,...},{"type":"overflow"}]}; a rename whose arrival never came is
 * a delete (moved out of the watched tree). */
void watch_batch_json(const struct watch_batch *b, struct json_writer *w);

#endif
