/* JSON-RPC 2.0 framing for the MCP server (cli/mcp/jsonrpc.h). */
#include "cli/mcp/jsonrpc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The id as JSON text: a string (re-escaped) or an integer. */
static int id_text(const struct json *id, char *out, size_t len)
{
	struct json_writer w;

	if (id->type == JSON_NUM) {
		int64_t n;

		if (!(id->u.num <= 9007199254740992.0 && id->u.num >= -9007199254740992.0) ||
		    id->u.num != (double)(int64_t)id->u.num)
			return -1; /* MCP: an id is a string or an integer */
		n = (int64_t)id->u.num;
		snprintf(out, len, "%lld", (long long)n);
		return 0;
	}
	if (id->type != JSON_STR)
		return -1;
	jw_init(&w, out, len);
	jw_strn(&w, id->u.str.s, id->u.str.len);
	return jw_done(&w) ? 0 : -1;
}

int jsonrpc_parse(const char *text, size_t len, struct json_arena *a, struct jsonrpc_msg *m, const char **why)
{
	const struct json *root, *v, *id;
	const char *jerr;

	memset(m, 0, sizeof(*m));
	snprintf(m->id, sizeof(m->id), "null");
	root = json_parse(text, len, a, &jerr);
	if (!root) {
		*why = jerr;
		return JSONRPC_PARSE_ERROR;
	}
	if (root->type == JSON_ARR) {
		*why = "batches are not supported (MCP 2025-06-18): send one message at a time";
		return JSONRPC_INVALID_REQUEST;
	}
	if (root->type != JSON_OBJ) {
		*why = "a message must be a JSON object";
		return JSONRPC_INVALID_REQUEST;
	}
	id = json_get(root, "id");
	if (id && id_text(id, m->id, sizeof(m->id))) {
		snprintf(m->id, sizeof(m->id), "null");
		*why = "\"id\" must be a string or an integer";
		return JSONRPC_INVALID_REQUEST;
	}
	v = json_get(root, "jsonrpc");
	if (!v || v->type != JSON_STR || strcmp(v->u.str.s, "2.0")) {
		*why = "\"jsonrpc\" must be \"2.0\"";
		return JSONRPC_INVALID_REQUEST;
	}
	v = json_get(root, "method");
	if (!v) {
		if (id && (json_get(root, "result") || json_get(root, "error"))) {
			m->kind = JSONRPC_RESPONSE;
			return 0;
		}
		*why = "a message needs a \"method\" (or is a response with \"result\" or \"error\")";
		return JSONRPC_INVALID_REQUEST;
	}
	if (v->type != JSON_STR || !v->u.str.len) {
		*why = "\"method\" must be a non-empty string";
		return JSONRPC_INVALID_REQUEST;
	}
	m->method = v->u.str.s;
	v = json_get(root, "params");
	if (v && v->type != JSON_OBJ && v->type != JSON_ARR) {
		*why = "\"params\" must be an object or an array";
		return JSONRPC_INVALID_REQUEST;
	}
	m->params = v;
	m->kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
	return 0;
}

void jsonrpc_error(struct json_writer *w, const char *id, int code, const char *message, const char *data_json)
{
	jw_obj(w);
	jw_key(w, "jsonrpc");
	jw_str(w, "2.0");
	jw_key(w, "id");
	jw_raw(w, id);
	jw_key(w, "error");
	jw_obj(w);
	jw_key(w, "code");
	jw_int(w, code);
	jw_key(w, "message");
	jw_text(w, message, strlen(message)); /* it may quote the request's bytes */
	if (data_json) {
		jw_key(w, "data");
		jw_raw(w, data_json);
	}
	jw_obj_end(w);
	jw_obj_end(w);
}

void jsonrpc_result_begin(struct json_writer *w, const char *id)
{
	jw_obj(w);
	jw_key(w, "jsonrpc");
	jw_str(w, "2.0");
	jw_key(w, "id");
	jw_raw(w, id);
	jw_key(w, "result");
}

void jsonrpc_result_end(struct json_writer *w)
{
	jw_obj_end(w);
}
