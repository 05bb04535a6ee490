/* libFuzzer target: the sandbox API's request parser (JSON and the
 * request rules), as guest-init runs it on every connection; the same
 * bytes as a token window and as a peer address. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest-init/api.h"

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
	}
	{
		char tok[API_TOKEN_MAX];
		int t = api_token_parse(data, len < 128 ? len : 128, tok, sizeof(tok));

		if (t < -1 || t > 1 || (t >= 0 && strlen(tok) >= sizeof(tok)) || (t == 1) != (t >= 0 && tok[0]))
			abort();
		(void)api_peer_allowed(data, len);
	}
	return 0;
}
