/* libFuzzer: the E2B gateway's parsers (cli/e2b/e2b_priv.h), bytes in:
 * the first byte picks the path. 0: a request stream (e2b_req_parse with
 * chunked bodies decoded in place, each request's query decoded); 1: a
 * Connect envelope stream and each message as process.Process JSON
 * (StartRequest, a selector, a signal); 2: a multipart/form-data body
 * (the rest after a boundary line); 3: base64 both ways; 4: binary
 * protobuf as one method's request and response (the next byte picks
 * it), transcoded to JSON and, when that parses, back to binary, whose
 * JSON must be the same. Every parse stays within the input; nothing is
 * sent anywhere. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/e2b/e2b_priv.h"

static void requests(char *buf, size_t len)
{
	while (len) {
		struct e2b_req r;
		char v[512];
		long n = e2b_req_parse(buf, len, 1 << 16, &r);

		if (n <= 0)
			return;
		e2b_query_get(r.query, "path", v, sizeof(v));
		e2b_query_get(r.query, "username", v, sizeof(v));
		e2b_req_header(&r, "Content-Type", v, sizeof(v));
		if ((size_t)n > len)
			abort();
		buf += n;
		len -= (size_t)n;
	}
}

static void messages(const uint8_t *p, size_t len)
{
	_Alignas(16) static char arena_buf[1 << 16];

	while (len) {
		struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
		const struct json *root;
		struct e2b_start s;
		const uint8_t *msg;
		const char *why, *err, *tag;
		uint8_t flags;
		size_t mlen;
		uint32_t pid;
		long n = connect_envelope(p, len, 1 << 16, &flags, &msg, &mlen);

		if (n <= 0)
			return;
		root = json_parse((const char *)msg, mlen, &a, &err);
		if (root && e2b_start_parse(root, &s, &why) == 0)
			e2b_start_free(&s);
		if (root) {
			e2b_selector(root, &pid, &tag);
			e2b_signal_parse(root);
		}
		p += n;
		len -= (size_t)n;
	}
}

static void multipart(const char *p, size_t len)
{
	const char *nl = memchr(p, '\n', len);
	char ct[128], boundary[80];
	struct mp_part part;
	size_t pos = 0, bl;
	int k, parts = 0;

	if (!nl || (bl = (size_t)(nl - p)) > 90)
		return;
	memcpy(ct, "multipart/form-data; boundary=", 30);
	memcpy(ct + 30, p, bl);
	ct[30 + bl] = '\0';
	if (mp_boundary(ct, boundary, sizeof(boundary)))
		return;
	p = nl + 1;
	len -= bl + 1;
	while ((k = mp_next(p, len, boundary, &pos, &part)) == 1 && parts++ < 1000)
		if (part.data < p || part.data + part.len > p + len)
			abort();
}

static void protobuf(const uint8_t *p, size_t len)
{
	static const char *const m[][2] = {
		{ "process.Process", "Start" },	       { "process.Process", "List" },
		{ "process.Process", "SendSignal" },   { "process.Process", "SendInput" },
		{ "process.Process", "Update" },       { "filesystem.Filesystem", "ListDir" },
		{ "filesystem.Filesystem", "Stat" },   { "filesystem.Filesystem", "WatchDir" },
	};
	_Alignas(16) static char arena_buf[1 << 18];
	static char j1[1 << 17], j2[1 << 17];
	static uint8_t bin[1 << 17];
	const struct pb_msg *msgs[2];
	unsigned k;

	if (!len)
		return;
	if (e2b_pb_method(m[p[0] % 8][0], m[p[0] % 8][1], &msgs[0], &msgs[1]))
		abort();
	for (k = 0; k < 2; k++) {
		struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
		struct json_writer w;
		const struct json *j;
		const char *err;
		long n;

		jw_init(&w, j1, sizeof(j1));
		if (e2b_pb_to_json(msgs[k], p + 1, len - 1, &w) || !jw_done(&w))
			continue;
		j = json_parse(j1, w.len, &a, &err);
		if (!j)
			abort(); /* the writer's JSON always parses */
		n = e2b_pb_from_json(msgs[k], j, bin, sizeof(bin));
		if (n < 0)
			continue; /* e.g. a timestamp out of range */
		jw_init(&w, j2, sizeof(j2));
		if (e2b_pb_to_json(msgs[k], bin, (size_t)n, &w) || !jw_done(&w) || strcmp(j1, j2))
			abort(); /* binary -> JSON -> binary -> JSON is stable */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy;

	if (size < 1)
		return 0;
	copy = malloc(size);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	switch (data[0] % 5) {
	case 0:
		requests(copy, size - 1);
		break;
	case 1:
		messages(data + 1, size - 1);
		break;
	case 2:
		multipart(copy, size - 1);
		break;
	case 4:
		protobuf(data + 1, size - 1);
		break;
	default: {
		char *enc = malloc(4 * (size / 3 + 2));
		unsigned char *dec = malloc(size + 3);

		if (enc && dec) {
			size_t n = e2b_b64_encode(data + 1, size - 1, enc);

			if (e2b_b64_decode(enc, n, dec, size + 3) != (long)(size - 1) || memcmp(dec, data + 1, size - 1))
				abort();
			e2b_b64_decode(copy, size - 1, dec, size + 3);
		}
		free(enc);
		free(dec);
	}
	}
	free(copy);
	return 0;
}
