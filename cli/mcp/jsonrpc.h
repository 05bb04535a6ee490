/* JSON-RPC 2.0 messages (https://www.jsonrpc.org/specification) as MCP
 * uses them: one message per text (MCP 2025-06-18 dropped batches), an id
 * that is a string or an integer (never null). Pure: parse, then write. */
#ifndef CLI_JSONRPC_H
#define CLI_JSONRPC_H

#include <stddef.h>

#include "vmm/wire/json.h"

/* The error codes JSON-RPC 2.0 section 5.1 defines. */
#define JSONRPC_PARSE_ERROR -32700
#define JSONRPC_INVALID_REQUEST -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS -32602
#define JSONRPC_INTERNAL_ERROR -32603
/* Server-defined (-32000..-32099): the caller's token does not allow it. */
#define JSONRPC_FORBIDDEN -32001

#define JSONRPC_ID_MAX 256 /* an id, as JSON text, longer than this is refused */

enum jsonrpc_kind { JSONRPC_REQUEST, JSONRPC_NOTIFICATION, JSONRPC_RESPONSE };

struct jsonrpc_msg {
	enum jsonrpc_kind kind;
	const char *method;         /* requests and notifications */
	const struct json *params;  /* an object or array, or NULL */
	char id[JSONRPC_ID_MAX + 1]; /* the id as JSON text ("7", "\"a\""); "null" when unknown */
};

/* Parses text[0..len). 0, or a JSON-RPC error code (PARSE_ERROR: not
 * JSON; INVALID_REQUEST: JSON but not a valid message) with *why set (a
 * static message) and m->id the request's id if it had a valid one
 * ("null" otherwise), for the error response. */
int jsonrpc_parse(const char *text, size_t len, struct json_arena *a, struct jsonrpc_msg *m, const char **why);

/* A whole error response into w: {"jsonrpc":"2.0","id":ID,"error":{"code",
 * "message"[,"data":DATA]}}; data_json is raw JSON or NULL. */
void jsonrpc_error(struct json_writer *w, const char *id, int code, const char *message, const char *data_json);
/* The start of a result response, up to "result": (the caller writes the
 * result value), and its end. */
void jsonrpc_result_begin(struct json_writer *w, const char *id);
void jsonrpc_result_end(struct json_writer *w);

#endif
