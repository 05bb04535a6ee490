/* The MCP server's protocol half (cli/mcp/mcp.h): lifecycle, tools/list,
 * tools/call with argument validation, and the stdio transport. The
 * revision followed is 2025-06-18 (modelcontextprotocol.io/specification):
 * basic/lifecycle (initialize, notifications/initialized, version
 * negotiation), basic/utilities/ping, server/tools (tools/list,
 * tools/call, errors), basic/transports (stdio). */
#include "cli/mcp/mcp.h"
#include "cli/mcp/jsonrpc.h"
#include "cli/mcp/jsonschema.h"
#include "cli/mcp/mcp_tools.h"
#include "cli/drive/drive.h"
#include "cli/mcp/mcp_tokens.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef VMM_VERSION
#define VMM_VERSION "0.0.0-dev"
#endif

/* The revisions we answer in, newest first: a client asking for one of
 * them gets it, any other gets the newest (lifecycle: version
 * negotiation). What we use of them is the same in all. */
static const char *const protocols[] = { "2025-06-18", "2025-03-26", "2024-11-05" };

int mcp_protocol_known(const char *v)
{
	size_t i;

	for (i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++)
		if (!strcmp(v, protocols[i]))
			return 1;
	return 0;
}

static void error_reply(struct json_writer *w, const char *id, int code, const char *msg, const char *data)
{
	jsonrpc_error(w, id, code, msg, data);
}

/* {"key":"why"} in buf, or NULL when it does not fit: a cut-off object
 * would make the whole answer invalid JSON. */
static const char *data_why(char *buf, size_t len, const char *key, const char *why)
{
	struct json_writer w;

	jw_init(&w, buf, len);
	jw_obj(&w);
	jw_key(&w, key);
	jw_str(&w, why);
	jw_obj_end(&w);
	return jw_done(&w) ? buf : NULL;
}

/* The text blocks and structuredContent of a tool's result. */
static void write_result(struct json_writer *w, const struct mcp_result *r)
{
	jw_obj(w);
	jw_key(w, "content");
	jw_arr(w);
	if (r->text || !r->note[0]) {
		jw_obj(w);
		jw_key(w, "type");
		jw_str(w, "text");
		jw_key(w, "text");
		jw_text(w, r->text ? r->text : "", r->text ? r->len : 0);
		jw_obj_end(w);
	}
	if (r->note[0]) {
		jw_obj(w);
		jw_key(w, "type");
		jw_str(w, "text");
		jw_key(w, "text");
		jw_text(w, r->note, strlen(r->note));
		jw_obj_end(w);
	}
	jw_arr_end(w);
	if (r->structured[0]) {
		jw_key(w, "structuredContent");
		jw_raw(w, r->structured);
	}
	jw_key(w, "isError");
	jw_bool(w, r->is_error);
	jw_obj_end(w);
}

/* Could one of the token's drive scopes allow t (on some path)? */
static int drive_may(const struct mcp_server *s, const struct mcp_tool *t)
{
	unsigned i;

	for (i = 0; t->drive_ok && i < s->drives.n; i++)
		if (t->drive_ok == MCP_DRIVE_READ || !s->drives.d[i].ro)
			return 1;
	return 0;
}

static void tools_list(struct mcp_server *s, struct json_writer *w, const char *id)
{
	size_t i;

	jsonrpc_result_begin(w, id);
	jw_obj(w);
	jw_key(w, "tools");
	jw_arr(w);
	for (i = 0; i < mcp_nr_tools; i++) {
		const struct mcp_tool *t = &mcp_tools[i];

		if ((s->scopes & t->scope) != t->scope && !drive_may(s, t))
			continue; /* the token cannot call it: not offered */
		jw_obj(w);
		jw_key(w, "name");
		jw_str(w, t->name);
		jw_key(w, "title");
		jw_str(w, t->title);
		jw_key(w, "description");
		jw_str(w, t->description);
		jw_key(w, "inputSchema");
		jw_raw(w, t->schema);
		jw_key(w, "annotations");
		jw_obj(w);
		jw_key(w, "title");
		jw_str(w, t->title);
		jw_key(w, "readOnlyHint");
		jw_bool(w, t->read_only);
		jw_key(w, "destructiveHint");
		jw_bool(w, t->destructive);
		jw_key(w, "openWorldHint");
		jw_bool(w, 0);
		jw_obj_end(w);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
	jsonrpc_result_end(w);
}

/* The reply buffer, which a large tool result grows. */
struct outbuf {
	char *buf;
	size_t cap;
};

/* The refusal of a call the token's scopes do not allow (HTTP: 403). why:
 * what a drive scope's check said, or "". Returns 0. */
static int forbid(struct json_writer *w, const char *id, const struct mcp_tool *t, const char *why,
		  struct mcp_reply *out)
{
	char sc[96], msg[1024], data[6 * sizeof(msg) + 64];

	token_scopes_str(t->scope, NULL, sc, sizeof(sc));
	snprintf(msg, sizeof(msg), "the access token does not allow %s (it needs the scope %s%s)%s%s", t->name, sc,
		 t->drive_ok ? ", or a drive scope naming the path's drive" : "", why[0] ? ": " : "", why);
	error_reply(w, id, JSONRPC_FORBIDDEN, msg, data_why(data, sizeof(data), "required_scope", sc));
	out->forbidden = 1;
	return 0;
}

static int tools_call(struct mcp_server *s, const struct jsonrpc_msg *m, struct json_writer *w, struct outbuf *ob,
		      struct mcp_reply *out)
{
	static const char call_schema[] =
		"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1},"
		"\"arguments\":{\"type\":\"object\"},\"_meta\":{\"type\":\"object\"}},\"required\":[\"name\"]}";
	/* data: why with every byte escaped as \uXXXX still fits */
	char arena_buf[32768], why[512], data[6 * sizeof(why) + 64], msg[640];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	struct mcp_result res = { 0 };
	const struct json *schema, *args;
	const struct mcp_tool *t;
	struct mcp_call call = { .a = &s->addr };
	struct drive_files df;
	char rel[PATH_MAX];
	const char *name;
	int r, on_drive;

	schema = json_parse(call_schema, strlen(call_schema), &ar, &(const char *){ NULL });
	if (!m->params || jsonschema_check(schema, m->params, "params", why, sizeof(why))) {
		error_reply(w, m->id, JSONRPC_INVALID_PARAMS, m->params ? why : "tools/call needs params", NULL);
		return 0;
	}
	json_get_str(m->params, "name", &name);
	t = mcp_tool_find(name);
	if (!t) {
		snprintf(msg, sizeof(msg), "Unknown tool: %.200s", name);
		error_reply(w, m->id, JSONRPC_INVALID_PARAMS, msg, NULL);
		return 0;
	}
	/* without the tool's scope, a drive scope may still allow it on a
	 * path of its drive: decided once the arguments are checked */
	on_drive = (s->scopes & t->scope) != t->scope;
	if (on_drive && !drive_may(s, t))
		return forbid(w, m->id, t, "", out);
	args = json_get(m->params, "arguments");
	if (!args)
		args = &(const struct json){ .type = JSON_OBJ };
	schema = json_parse(t->schema, strlen(t->schema), &ar, &(const char *){ NULL });
	if (!schema) {
		error_reply(w, m->id, JSONRPC_INTERNAL_ERROR, "the tool's schema does not parse", NULL);
		return 0;
	}
	if (jsonschema_check(schema, args, "", why, sizeof(why))) {
		snprintf(msg, sizeof(msg), "Invalid arguments for tool %s: %s", t->name, why);
		error_reply(w, m->id, JSONRPC_INVALID_PARAMS, msg, data_why(data, sizeof(data), "argument_error", why));
		return 0;
	}
	if (on_drive) {
		r = mcp_drive_target(s, t, args, &df, rel, sizeof(rel), why, sizeof(why));
		if (r == -EACCES)
			return forbid(w, m->id, t, why, out);
		if (r) {
			error_reply(w, m->id, JSONRPC_INTERNAL_ERROR, why, NULL);
			return 0;
		}
		call.drive = &df;
		call.rel = rel;
	}
	r = t->run(&call, args, &res);
	if (on_drive)
		drive_files_close(&df);
	if (r) {
		snprintf(msg, sizeof(msg), "%s failed: %s", t->name, strerror(-r));
		error_reply(w, m->id, JSONRPC_INTERNAL_ERROR, msg, NULL);
		mcp_result_free(&res);
		return 0;
	}
	/* Worst case for the text: every byte escaped as \uXXXX. Nothing is
	 * written yet: the buffer can grow under the writer. */
	if (ob->cap < 6 * res.len + 8192) {
		char *nb = realloc(ob->buf, 6 * res.len + 8192);

		if (!nb) {
			mcp_result_free(&res);
			return -ENOMEM;
		}
		ob->buf = nb;
		ob->cap = 6 * res.len + 8192;
		jw_init(w, ob->buf, ob->cap);
	}
	jsonrpc_result_begin(w, m->id);
	write_result(w, &res);
	jsonrpc_result_end(w);
	mcp_result_free(&res);
	return 0;
}

static void initialize(struct mcp_server *s, const struct jsonrpc_msg *m, struct json_writer *w)
{
	static const char init_schema[] =
		"{\"type\":\"object\",\"properties\":{\"protocolVersion\":{\"type\":\"string\",\"minLength\":1},"
		"\"capabilities\":{\"type\":\"object\"},\"clientInfo\":{\"type\":\"object\"}},"
		"\"required\":[\"protocolVersion\",\"capabilities\",\"clientInfo\"]}";
	char arena_buf[4096], why[512], title[160];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *schema = json_parse(init_schema, strlen(init_schema), &ar, &(const char *){ NULL });
	const char *want = "";

	if (!m->params || jsonschema_check(schema, m->params, "params", why, sizeof(why))) {
		error_reply(w, m->id, JSONRPC_INVALID_PARAMS, m->params ? why : "initialize needs params", NULL);
		return;
	}
	json_get_str(m->params, "protocolVersion", &want);
	snprintf(s->protocol, sizeof(s->protocol), "%s", mcp_protocol_known(want) ? want : MCP_PROTOCOL_LATEST);
	s->initialized = 1;
	snprintf(title, sizeof(title), "vmm sandbox %s", s->name);
	jsonrpc_result_begin(w, m->id);
	jw_obj(w);
	jw_key(w, "protocolVersion");
	jw_str(w, s->protocol);
	jw_key(w, "capabilities");
	jw_raw(w, "{\"tools\":{\"listChanged\":false}}");
	jw_key(w, "serverInfo");
	jw_obj(w);
	jw_key(w, "name");
	jw_str(w, "vmm");
	jw_key(w, "title");
	jw_str(w, title);
	jw_key(w, "version");
	jw_str(w, VMM_VERSION);
	jw_obj_end(w);
	jw_key(w, "instructions");
	jw_str(w, "A Linux sandbox (a KVM virtual machine). Commands run as root; paths are absolute in the "
		  "sandbox. Use start_process for anything that keeps running (servers, watchers).");
	jw_obj_end(w);
	jsonrpc_result_end(w);
}

static int dispatch(struct mcp_server *s, const struct jsonrpc_msg *m, struct json_writer *w, struct outbuf *ob,
		    struct mcp_reply *out)
{
	if (!strcmp(m->method, "initialize")) {
		initialize(s, m, w);
		out->initialize = s->initialized;
		return 0;
	}
	if (!strcmp(m->method, "ping")) {
		jsonrpc_result_begin(w, m->id);
		jw_raw(w, "{}");
		jsonrpc_result_end(w);
		return 0;
	}
	if (!s->initialized) {
		error_reply(w, m->id, JSONRPC_INVALID_REQUEST, "the session is not initialized: send initialize first",
			    NULL);
		return 0;
	}
	if (!strcmp(m->method, "tools/list")) {
		tools_list(s, w, m->id);
		return 0;
	}
	if (!strcmp(m->method, "tools/call"))
		return tools_call(s, m, w, ob, out);
	{
		char msg[160];

		snprintf(msg, sizeof(msg), "Method not found: %.100s", m->method);
		error_reply(w, m->id, JSONRPC_METHOD_NOT_FOUND, msg, NULL);
	}
	return 0;
}

int mcp_handle(struct mcp_server *s, const char *text, size_t len, struct mcp_reply *out)
{
	size_t arena_size = 4 * len + 65536;
	char *arena = malloc(arena_size);
	struct json_arena ar = { arena, arena_size, 0 };
	struct outbuf ob = { malloc(65536), 65536 };
	struct jsonrpc_msg m;
	struct json_writer w;
	const char *why = "";
	int code, r = 0;

	memset(out, 0, sizeof(*out));
	if (!arena || !ob.buf) {
		r = -ENOMEM;
		goto out;
	}
	code = jsonrpc_parse(text, len, &ar, &m, &why);
	if (!code && m.kind != JSONRPC_REQUEST)
		goto out; /* notifications (initialized, cancelled...) and responses: nothing to say */
	jw_init(&w, ob.buf, ob.cap);
	if (code)
		error_reply(&w, m.id, code, why, NULL);
	else if ((r = dispatch(s, &m, &w, &ob, out)))
		goto out;
	if (!jw_done(&w)) {
		jw_init(&w, ob.buf, ob.cap);
		error_reply(&w, m.id, JSONRPC_INTERNAL_ERROR, "the answer is too large", NULL);
	}
	out->text = ob.buf;
	out->len = w.len;
	ob.buf = NULL;
out:
	free(ob.buf);
	free(arena);
	return r;
}

/* ---- stdio ------------------------------------------------------------------- */

int mcp_serve_stdio(struct mcp_server *s, int in, int outfd)
{
	size_t cap = 65536, len = 0, skip = 0;
	char *buf = malloc(cap);
	int r = 0;

	if (!buf)
		return -ENOMEM;
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		char *nl;
		ssize_t n;

		while ((nl = memchr(buf, '\n', len))) {
			size_t line = (size_t)(nl - buf);
			struct mcp_reply rep;

			if (skip) {
				skip = 0; /* the end of an overlong message: dropped */
			} else if (line && !(line == 1 && buf[0] == '\r')) {
				if (mcp_handle(s, buf, line, &rep)) {
					r = -ENOMEM;
					goto out;
				}
				if (rep.text) {
					rep.text[rep.len++] = '\n'; /* the writer left room: need > len */
					if (write_full(outfd, rep.text, rep.len)) {
						free(rep.text);
						r = -EPIPE;
						goto out;
					}
					free(rep.text);
				}
			}
			memmove(buf, nl + 1, len - line - 1);
			len -= line + 1;
		}
		if (len == cap) {
			if (cap >= MCP_MESSAGE_MAX) {
				/* One message too large: say so (its id is unknown) and
				 * drop it up to its newline. */
				static const char too_long[] =
					"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
					"\"message\":\"message larger than 8 MiB\"}}\n";

				if (!skip && write_full(outfd, too_long, sizeof(too_long) - 1)) {
					r = -EPIPE;
					goto out;
				}
				skip = 1;
				len = 0;
			} else {
				char *nb = realloc(buf, cap * 2);

				if (!nb) {
					r = -ENOMEM;
					goto out;
				}
				buf = nb;
				cap *= 2;
			}
		}
		n = read(in, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the client closed our stdin: the session is over */
		len += (size_t)n;
	}
out:
	free(buf);
	return r;
}
