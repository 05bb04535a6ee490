/* libFuzzer target: the sandbox API's request parser (JSON and the
 * request rules), as guest-init runs it on every connection. */
#include <stdint.h>
#include <stdlib.h>

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
	return 0;
}
