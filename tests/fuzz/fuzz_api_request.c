/* libFuzzer target: the sandbox API's request parser (JSON and the
 * request rules, versions 1 and 2), as guest-init runs it on every
 * connection; the same bytes as a token window and as a peer address, as
 * a script for a detached process's output ring (checked against a plain
 * copy of the stream) and as inotify events for the watch coalescer. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/wire/api.h"
#include "guest-init/ops.h"
#include "guest-init/ring.h"
#include "guest-init/guest_watch.h"

/* The ring against the stream it was fed: whatever it holds is the
 * stream's tail, offsets are absolute, skips are exact. */
static void fuzz_ring(const uint8_t *data, size_t len)
{
	static uint8_t stream[1 << 16], out[4096];
	struct ring r;
	uint64_t off = 0, skipped = 0;
	size_t total = 0, i = 1;

	if (len < 1 || ring_init(&r, 1 + data[0] % 200))
		return;
	while (i < len) {
		size_t n = data[i++] % 64;

		if (n < 48) {
			n = n < len - i ? n : len - i;
			if (total + n > sizeof(stream))
				break;
			memcpy(stream + total, data + i, n);
			ring_write(&r, data + i, n);
			total += n;
			i += n;
		} else {
			uint64_t before = off, sk = skipped;
			size_t got = ring_read(&r, &off, out, n * 4, &skipped);

			if (off < before || got > n * 4 || off > total || skipped - sk != (off - got) - before ||
			    memcmp(out, stream + off - got, got))
				abort();
		}
		if (r.tail != total || r.head != (total > r.cap ? total - r.cap : 0))
			abort();
	}
	ring_free(&r);
}

static void fuzz_watch(const uint8_t *data, size_t len)
{
	static struct watch_batch b;
	static char out[WATCH_POOL * 2 + WATCH_BATCH_MAX * 64];
	struct json_writer w;
	size_t i = 0;

	watch_batch_reset(&b);
	while (i + 3 <= len) {
		char path[32];
		unsigned t = data[i] % 6, n = data[i + 1] % 24;
		int rc;

		/* Short paths from a small alphabet, so they repeat. */
		path[0] = '/';
		for (unsigned k = 0; k < n && i + 3 + k < len; k++)
			path[1 + k] = (char)('a' + data[i + 3 + k] % 4);
		path[1 + n] = '\0';
		rc = t == 5 ? watch_batch_moved_to(&b, data[i + 2] & 1, path, data[i + 2] >> 4)
			    : watch_batch_add(&b, (enum watch_type)(t % 5), data[i + 2] & 1, path, data[i + 2] >> 4);
		if (rc == -ENOSPC)
			watch_batch_reset(&b);
		else if (rc != 0 && rc != 1)
			abort();
		if (b.n > WATCH_BATCH_MAX || b.used > WATCH_POOL)
			abort();
		i += 3 + n;
	}
	jw_init(&w, out, sizeof(out));
	watch_batch_json(&b, &w);
	if (!jw_done(&w))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static char arena_buf[1 << 17];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	struct api_request r;
	const char *err = NULL;
	int eno = 0;

	if (api_parse((const char *)data, len, (len & 1) ? "tok" : NULL, &a, &r, &err, &eno)) {
		if (!err || !eno)
			abort();
	} else if (r.op == OP_EXEC && (r.argc == 0 || r.argv[r.argc] != NULL)) {
		abort();
	} else if ((r.version < 1 || r.version > 2) || (r.version == 1 && (r.op >= OP_PROCESSES || r.detach)) ||
		   (r.tag && !api_valid_tag(r.tag)) || r.nr_paths >= API_MAX_PATHS ||
		   ((r.op == OP_ATTACH || r.op == OP_SIGNAL) && !r.id == !r.tag) ||
		   (r.ring_bytes && (r.ring_bytes < API_RING_MIN || r.ring_bytes > API_RING_MAX))) {
		abort();
	}
	fuzz_ring(data, len);
	fuzz_watch(data, len);
	{
		char tok[API_TOKEN_MAX];
		int t = api_token_parse(data, len < 128 ? len : 128, tok, sizeof(tok));

		if (t < -1 || t > 1 || (t >= 0 && strlen(tok) >= sizeof(tok)) || (t == 1) != (t >= 0 && tok[0]))
			abort();
		(void)api_peer_allowed(data, len);
	}
	return 0;
}
