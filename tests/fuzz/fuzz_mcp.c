/* libFuzzer target: the MCP server's message path as `vmm mcp` runs it on
 * every message (JSON-RPC parsing, dispatch, argument validation against
 * the tools' schemas; a tool whose arguments pass tries a sandbox socket
 * that does not exist and answers a tool error), the schema validator on a
 * fuzzed schema and value (split at the first NUL), and the tokens file's
 * line parser and token check. The caller also holds the drive scope
 * drive:d, so a file tool its scope bits do not allow (with a leading '{',
 * write_file and edit_file) goes through the drive decision
 * (cli/mcp/mcp_drive.c) against the made-up record below; the drive
 * itself is never found (the stubs), so nothing touches the host. Oracle: a request always gets exactly one
 * answer, valid JSON with "jsonrpc":"2.0" and its id or null, no
 * notification gets one, and a token line that parses prints back to
 * itself. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mcp/jsonrpc.h"
#include "cli/mcp/jsonschema.h"
#include "cli/mcp/mcp.h"
#include "cli/mcp/mcp_tokens.h"
#include "cli/drive/drive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

/* The sandbox's record and the drive store, stubbed (cli/sandbox, cli/drive). */
int sandbox_status(const char *name, struct sandbox_status *st)
{
	(void)name;
	memset(st, 0, sizeof(*st));
	snprintf(st->drives, sizeof(st->drives), "d:/drives/d,e:/drives/d/e:ro,r:/:ro");
	return 0;
}

int drive_load(const char *name, struct drive *d)
{
	(void)name;
	(void)d;
	return -ENOENT;
}

int drive_files_open(const struct drive *d, struct drive_files *f)
{
	(void)d;
	(void)f;
	return -ENOENT;
}

void drive_files_close(struct drive_files *f)
{
	(void)f;
}

int drive_file_read(const struct drive_files *f, const char *rel, uint64_t off, size_t max, int nofollow, char **data,
		    size_t *len, uint64_t *size, int64_t *mode)
{
	(void)f, (void)rel, (void)off, (void)max, (void)nofollow, (void)data, (void)len, (void)size, (void)mode;
	abort(); /* never reached: no drive is ever opened */
}

int drive_file_list(const struct drive_files *f, const char *rel, size_t max, struct drive_dirent *ents, size_t *n,
		    size_t *total)
{
	(void)f, (void)rel, (void)max, (void)ents, (void)n, (void)total;
	abort();
}

int drive_file_write(struct drive_files *f, const char *rel, const void *data, size_t len, int64_t mode, int parents)
{
	(void)f, (void)rel, (void)data, (void)len, (void)mode, (void)parents;
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static char arena_buf[1 << 20], arena2[1 << 20];
	struct mcp_server s = { .addr = { .uds = "/nonexistent/vmm-fuzz.sock" }, .name = "fuzz",
				.scopes = len ? data[0] & TOKEN_SCOPE_ALL : TOKEN_SCOPE_ALL, .initialized = 1,
				.drives = { .n = 1, .d = { { "d", 0 } } } };
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
		char line[1024];

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
