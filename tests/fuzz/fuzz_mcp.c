/* libFuzzer target: the MCP server's message path as `vmm mcp` runs it on
 * every message (JSON-RPC parsing, dispatch, argument validation against
 * the tools' schemas; a tool whose arguments pass tries a sandbox socket
 * that does not exist and answers a tool error), the schema validator on a
 * fuzzed schema and value (split at the first NUL), and the tokens file's
 * line parser and token check. Oracle: a request always gets exactly one
 * answer, valid JSON with "jsonrpc":"2.0" and its id or null, no
 * notification gets one, and a token line that parses prints back to
 * itself. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mcp/jsonrpc.h"
#include "cli/mcp/jsonschema.h"
#include "cli/mcp/mcp.h"
#include "cli/mcp/mcp_tokens.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static char arena_buf[1 << 20], arena2[1 << 20];
	struct mcp_server s = { .addr = { .uds = "/nonexistent/vmm-fuzz.sock" }, .name = "fuzz",
				.scopes = len ? data[0] & TOKEN_SCOPE_ALL : TOKEN_SCOPE_ALL, .initialized = 1 };
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const char *text = (const char *)data, *why;
	struct jsonrpc_msg m;
	struct mcp_reply rep;
	const struct json *j;
	const uint8_t *nul;
	int code;

	if (len > (1 << 16))
		return 0;
	code = jsonrpc_parse(text, len, &a, &m, &why);
	if (mcp_handle(&s, text, len, &rep))
		return 0;
	if (!code && m.kind != JSONRPC_REQUEST) {
		if (rep.text)
			abort(); /* a notification or response is never answered */
		return 0;
	}
	if (!rep.text)
		abort(); /* a request (or garbage) always is */
	a.used = 0;
	j = json_parse(rep.text, rep.len, &a, &why);
	if (!j || !json_get(j, "id") || !json_get(j, "jsonrpc") || (!json_get(j, "result") == !json_get(j, "error")))
		abort();
	free(rep.text);

	nul = memchr(data, 0, len);
	if (nul) {
		struct json_arena b = { arena2, sizeof(arena2), 0 };
		const struct json *schema, *value;
		char msg[256];

		a.used = 0;
		schema = json_parse(text, (size_t)(nul - data), &a, &why);
		value = json_parse((const char *)nul + 1, len - (size_t)(nul - data) - 1, &b, &why);
		if (schema && value)
			jsonschema_check(schema, value, "", msg, sizeof(msg));
	}
	{
		struct token_rec rec;
		char line[256];

		if (token_parse_line(text, len, &rec) == 0) {
			struct token_rec back;

			if (token_format_line(&rec, line, sizeof(line)) ||
			    token_parse_line(line, strlen(line) - 1, &back) || memcmp(&rec, &back, sizeof(rec)))
				abort();
			if (len <= TOKEN_LEN) {
				char tok[TOKEN_LEN + 1];

				memcpy(tok, data, len);
				tok[len] = '\0';
				token_check(&rec, 1, tok, 0, 0, NULL);
			}
		}
	}
	return 0;
}
