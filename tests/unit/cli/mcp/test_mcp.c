/* The MCP server's pure parts: JSON-RPC parsing and errors, the JSON
 * Schema subset and every tool's schema, the protocol's answers that need
 * no sandbox, the output capture, access tokens (hashing, storage lines,
 * expiry, scope), and the HTTP header lookup the transport uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/mcp/jsonrpc.h"
#include "cli/mcp/jsonschema.h"
#include "cli/mcp/mcp.h"
#include "cli/mcp/mcp_api.h"
#include "cli/mcp/mcp_tools.h"
#include "cli/mcp/mcp_tokens.h"
#include "vmm/base/http.h"

_Alignas(16) static char arena_buf[1 << 16];

static const struct json *parse(const char *s)
{
	_Alignas(16) static char buf[1 << 16];
	static size_t used;
	struct json_arena a;
	const char *err;
	const struct json *j;

	if (used > sizeof(buf) / 2)
		used = 0;
	a = (struct json_arena){ buf + used, sizeof(buf) / 2, 0 };
	j = json_parse(s, strlen(s), &a, &err);
	used = (used + a.used + 15) & ~(size_t)15; /* the arena aligns within itself only */
	assert_non_null(j);
	return j;
}

/* ---- JSON-RPC ------------------------------------------------------------ */

static int rpc(const char *s, struct jsonrpc_msg *m)
{
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const char *why = NULL;
	int r = jsonrpc_parse(s, strlen(s), &a, m, &why);

	if (r)
		assert_non_null(why);
	return r;
}

static void jsonrpc_messages(void **state)
{
	struct jsonrpc_msg m;

	(void)state;
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}", &m), 0);
	assert_int_equal(m.kind, JSONRPC_REQUEST);
	assert_string_equal(m.method, "ping");
	assert_string_equal(m.id, "7");
	assert_null(m.params);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"method\":\"x\",\"params\":{}}", &m), 0);
	assert_string_equal(m.id, "\"a\\\"b\"");
	assert_non_null(m.params);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m), 0);
	assert_int_equal(m.kind, JSONRPC_NOTIFICATION);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", &m), 0);
	assert_int_equal(m.kind, JSONRPC_RESPONSE);
}

static void jsonrpc_errors(void **state)
{
	struct jsonrpc_msg m;

	(void)state;
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":1,", &m), JSONRPC_PARSE_ERROR);
	assert_string_equal(m.id, "null");
	assert_int_equal(rpc("", &m), JSONRPC_PARSE_ERROR);
	assert_int_equal(rpc("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", &m), JSONRPC_INVALID_REQUEST);
	assert_int_equal(rpc("42", &m), JSONRPC_INVALID_REQUEST);
	/* the id is kept for the error when it is valid */
	assert_int_equal(rpc("{\"jsonrpc\":\"1.0\",\"id\":9,\"method\":\"ping\"}", &m), JSONRPC_INVALID_REQUEST);
	assert_string_equal(m.id, "9");
	assert_int_equal(rpc("{\"id\":9,\"method\":\"ping\"}", &m), JSONRPC_INVALID_REQUEST);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", &m), JSONRPC_INVALID_REQUEST);
	assert_string_equal(m.id, "null");
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", &m), JSONRPC_INVALID_REQUEST);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", &m), JSONRPC_INVALID_REQUEST);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", &m), JSONRPC_INVALID_REQUEST);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", &m), JSONRPC_INVALID_REQUEST);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":3}", &m), JSONRPC_INVALID_REQUEST);
	assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"id\":1}", &m), JSONRPC_INVALID_REQUEST);
}

static void jsonrpc_writers(void **state)
{
	char buf[512];
	struct json_writer w;

	(void)state;
	jw_init(&w, buf, sizeof(buf));
	jsonrpc_error(&w, "\"x\"", JSONRPC_METHOD_NOT_FOUND, "no \"such\" method", "{\"a\":1}");
	assert_string_equal(jw_done(&w), "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":-32601,"
					 "\"message\":\"no \\\"such\\\" method\",\"data\":{\"a\":1}}}");
	jw_init(&w, buf, sizeof(buf));
	jsonrpc_result_begin(&w, "4");
	jw_raw(&w, "{}");
	jsonrpc_result_end(&w);
	assert_string_equal(jw_done(&w), "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}");
}

/* ---- JSON Schema ---------------------------------------------------------- */

static int valid(const char *schema, const char *value, char *why)
{
	return jsonschema_check(parse(schema), parse(value), "", why, 256);
}

static void schema_subset(void **state)
{
	static const char s[] =
		"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10},"
		"\"s\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":3},\"e\":{\"enum\":[\"a\",\"b\"]},"
		"\"u\":{\"type\":[\"integer\",\"string\"]},\"l\":{\"type\":\"array\",\"maxItems\":2,"
		"\"items\":{\"type\":\"boolean\"}},\"o\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},"
		"\"required\":[\"x\"],\"additionalProperties\":false}},\"required\":[\"n\"],\"additionalProperties\":false}";
	char why[256];

	(void)state;
	assert_int_equal(valid(s, "{\"n\":1}", why), 0);
	assert_int_equal(valid(s, "{\"n\":10,\"s\":\"abc\",\"e\":\"b\",\"u\":\"t\",\"l\":[true,false],\"o\":{\"x\":1.5}}",
			       why), 0);
	assert_int_equal(valid(s, "{\"n\":3,\"u\":4}", why), 0);
#define BAD(v, msg)                                        \
	do {                                               \
		assert_int_equal(valid(s, v, why), -1);    \
		assert_string_equal(why, msg);             \
	} while (0)
	BAD("{}", "n: is required");
	BAD("[]", "must be an object, not an array");
	BAD("{\"n\":0}", "n: must be at least 1");
	BAD("{\"n\":11}", "n: must be at most 10");
	BAD("{\"n\":1.5}", "n: must be an integer, not a number");
	BAD("{\"n\":\"1\"}", "n: must be an integer, not a string");
	BAD("{\"n\":1,\"s\":\"\"}", "s: must not be empty");
	BAD("{\"n\":1,\"s\":\"abcd\"}", "s: must be at most 3 bytes long");
	BAD("{\"n\":1,\"e\":\"c\"}", "e: must be one of \"a\", \"b\"");
	BAD("{\"n\":1,\"u\":true}", "u: must be integer or string, not a boolean");
	BAD("{\"n\":1,\"l\":[true,true,true]}", "l: must have at most 2 items");
	BAD("{\"n\":1,\"l\":[true,1]}", "l[1]: must be a boolean, not a number");
	BAD("{\"n\":1,\"o\":{}}", "o.x: is required");
	BAD("{\"n\":1,\"o\":{\"x\":1,\"y\":2}}", "o.y: is not a known argument");
	BAD("{\"n\":1,\"zz\":null}", "zz: is not a known argument");
	BAD("{\"n\":1,\"n\":2}", "n: is given twice");
	BAD("{\"n\":1e300}", "n: must be an integer, not a number");
#undef BAD
}

/* A schema whose type or enum list is longer than the message buffer: the
 * list is cut short, never written past (fuzz_mcp found the overrun). */
static void schema_long_lists(void **state)
{
	char schema[2048], why[256], name[80];
	size_t n;
	int i;

	(void)state;
	n = (size_t)snprintf(schema, sizeof(schema), "{\"type\":[");
	for (i = 0; i < 12; i++) {
		memset(name, 'a' + i, 40);
		name[40] = '\0';
		n += (size_t)snprintf(schema + n, sizeof(schema) - n, "%s\"%s\"", i ? "," : "", name);
	}
	snprintf(schema + n, sizeof(schema) - n, "]}");
	assert_int_equal(valid(schema, "1", why), -1);
	assert_non_null(strstr(why, "must be aaaa"));
	assert_non_null(strstr(why, ", not a number"));
	n = (size_t)snprintf(schema, sizeof(schema), "{\"enum\":[");
	for (i = 0; i < 20; i++) {
		memset(name, 'a' + i, 40);
		name[40] = '\0';
		n += (size_t)snprintf(schema + n, sizeof(schema) - n, "%s\"%s\"", i ? "," : "", name);
	}
	snprintf(schema + n, sizeof(schema) - n, "]}");
	assert_int_equal(valid(schema, "\"z\"", why), -1);
	assert_non_null(strstr(why, "must be one of \"aaaa"));
}

/* Every tool's schema parses, is a closed object, and names in
 * "required" only properties it has. */
static void tool_schemas(void **state)
{
	size_t i;

	(void)state;
	assert_int_equal(mcp_nr_tools, 9);
	for (i = 0; i < mcp_nr_tools; i++) {
		const struct json *s = parse(mcp_tools[i].schema), *props, *req, *e, *ap;
		const char *type;

		assert_int_equal(json_get_str(s, "type", &type), 0);
		assert_string_equal(type, "object");
		props = json_get(s, "properties");
		assert_non_null(props);
		ap = json_get(s, "additionalProperties");
		assert_true(ap && ap->type == JSON_BOOL && !ap->u.boolean);
		req = json_get(s, "required");
		for (e = req ? req->u.kids.first : NULL; e; e = e->next)
			assert_non_null(json_get(props, e->u.str.s));
		assert_true(mcp_tools[i].scope && !(mcp_tools[i].scope & ~(unsigned)TOKEN_SCOPE_ALL));
		assert_ptr_equal(mcp_tool_find(mcp_tools[i].name), &mcp_tools[i]);
	}
	assert_null(mcp_tool_find("nope"));
}

/* ---- the protocol, without a sandbox ----------------------------------------- */

static char *handle(struct mcp_server *s, const char *msg, struct mcp_reply *rep)
{
	assert_int_equal(mcp_handle(s, msg, strlen(msg), rep), 0);
	return rep->text;
}

static void protocol(void **state)
{
	struct mcp_server s = { .addr = { .uds = "/nonexistent/sock" }, .name = "t", .scopes = TOKEN_SCOPE_ALL };
	struct mcp_reply rep;
	char *t;

	(void)state;
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &rep);
	assert_non_null(strstr(t, "\"code\":-32600"));
	free(t);
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{}}", &rep);
	assert_non_null(strstr(t, "\"code\":-32602"));
	assert_int_equal(s.initialized, 0);
	free(t);
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		       "\"2099-01-01\",\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}", &rep);
	/* an unknown revision: we answer with ours */
	assert_non_null(strstr(t, "\"protocolVersion\":\"2025-06-18\""));
	assert_true(rep.initialize);
	free(t);
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		       "\"2025-03-26\",\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}", &rep);
	assert_non_null(strstr(t, "\"protocolVersion\":\"2025-03-26\""));
	free(t);
	assert_null(handle(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &rep));
	assert_null(handle(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"no/such/notification\"}", &rep));
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}", &rep);
	assert_string_equal(t, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"result\":{}}");
	free(t);
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"prompts/list\"}", &rep);
	assert_non_null(strstr(t, "\"code\":-32601"));
	free(t);
	/* bad arguments are refused before anything reaches the sandbox
	 * (whose socket here does not exist) */
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"exec\","
		       "\"arguments\":{\"command\":\"x\",\"timeout_s\":\"10\"}}}", &rep);
	assert_non_null(strstr(t, "\"code\":-32602"));
	assert_non_null(strstr(t, "timeout_s: must be an integer"));
	free(t);
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"rm_rf\"}}", &rep);
	assert_non_null(strstr(t, "\"code\":-32602"));
	assert_non_null(strstr(t, "Unknown tool"));
	free(t);
	/* a tool the scopes do not allow: not listed, and refused */
	s.scopes = TOKEN_SCOPE_MCP | TOKEN_SCOPE_FILES_READ;
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}", &rep);
	assert_null(strstr(t, "\"name\":\"exec\""));
	assert_non_null(strstr(t, "\"name\":\"read_file\""));
	free(t);
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"exec\","
		       "\"arguments\":{\"command\":\"x\"}}}", &rep);
	assert_non_null(strstr(t, "\"code\":-32001"));
	assert_true(rep.forbidden);
	free(t);
	/* a tool that runs and cannot reach the sandbox: a tool error */
	t = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		       "\"arguments\":{\"path\":\"/x\"}}}", &rep);
	assert_non_null(strstr(t, "\"isError\":true"));
	assert_non_null(strstr(t, "cannot reach the sandbox API"));
	free(t);
}

/* 1 if s[0..n) is valid UTF-8 (as a strict decoder such as Python's wants). */
static int valid_utf8(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		size_t k = u[i] < 0x80 ? 0 : (u[i] & 0xe0) == 0xc0 && u[i] >= 0xc2 ? 1 : (u[i] & 0xf0) == 0xe0 ? 2
			   : u[i] >= 0xf0 && u[i] <= 0xf4 ? 3 : 9;

		if (k == 9 || n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++)
			if ((u[i + j] & 0xc0) != 0x80)
				return 0;
		i += k + 1;
	}
	return 1;
}

/* An error that quotes the request: an argument's name of 300 control
 * bytes escapes to six times its length (the "data" member once did not
 * fit and went out cut off, invalid JSON; found by fuzz_mcp), and a
 * method's name cut mid-character or not UTF-8 at all is mended. */
static void errors_quote_request(void **state)
{
	struct mcp_server s = { .addr = { .uds = "/nonexistent/sock" }, .name = "t", .scopes = TOKEN_SCOPE_ALL,
				.initialized = 1 };
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j, *e;
	struct mcp_reply rep;
	const char *why, *msg;
	char req[2048], *t;
	int n;

	(void)state;
	n = snprintf(req, sizeof(req), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
		     "{\"name\":\"read_file\",\"arguments\":{\"path\":\"/x\",\"");
	for (int i = 0; i < 300; i++)
		n += snprintf(req + n, sizeof(req) - (size_t)n, "\\u0001");
	snprintf(req + n, sizeof(req) - (size_t)n, "\":1}}}");
	t = handle(&s, req, &rep);
	j = json_parse(t, strlen(t), &a, &why);
	assert_non_null(j);
	e = json_get(j, "error");
	assert_non_null(e);
	assert_non_null(json_get(e, "data"));
	assert_non_null(strstr(t, "is not a known argument"));
	free(t);

	/* "Method not found: " quotes 100 bytes: the 100th starts "é" */
	n = snprintf(req, sizeof(req), "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"%.99s\xc3\xa9\xff\"}",
		     "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm");
	t = handle(&s, req, &rep);
	assert_true(valid_utf8(t, strlen(t)));
	a.used = 0;
	j = json_parse(t, strlen(t), &a, &why);
	assert_non_null(j);
	assert_int_equal(json_get_str(json_get(j, "error"), "message", &msg), 0);
	assert_non_null(strstr(msg, "\xef\xbf\xbd")); /* the cut "é" became U+FFFD */
	free(t);
	(void)n;
}

/* ---- capture ----------------------------------------------------------------- */

static void capture_head_tail(void **state)
{
	struct capture c;
	char *t;
	size_t n;
	int i;

	(void)state;
	assert_int_equal(capture_init(&c, 4, 4), 0);
	capture_add(&c, "abc", 3);
	t = capture_text(&c, &n);
	assert_string_equal(t, "abc");
	free(t);
	capture_add(&c, "defghij", 7); /* abcd | efghij: tail keeps ghij */
	t = capture_text(&c, &n);
	assert_string_equal(t, "abcd\n[... 2 bytes omitted ...]\nghij");
	free(t);
	for (i = 0; i < 5; i++)
		capture_add(&c, "0123456789", 10); /* the ring wraps many times */
	t = capture_text(&c, &n);
	assert_int_equal(c.total, 60);
	assert_string_equal(t, "abcd\n[... 52 bytes omitted ...]\n6789");
	free(t);
	capture_free(&c);
	assert_int_equal(capture_init(&c, 4, 0), 0); /* head only */
	capture_add(&c, "abcdefgh", 8);
	t = capture_text(&c, &n);
	assert_string_equal(t, "abcd\n[... 4 bytes omitted ...]\n");
	free(t);
	capture_free(&c);
}

/* ---- tokens ----------------------------------------------------------------- */

static void token_scopes(void **state)
{
	unsigned m;
	char why[160], buf[96];

	(void)state;
	assert_int_equal(token_parse_scopes("exec,files:read", &m, NULL, why, sizeof(why)), 0);
	assert_int_equal(m, TOKEN_SCOPE_EXEC | TOKEN_SCOPE_FILES_READ);
	assert_int_equal(token_parse_scopes("all", &m, NULL, why, sizeof(why)), 0);
	assert_int_equal(m, TOKEN_SCOPE_ALL);
	token_scopes_str(TOKEN_SCOPE_ALL, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "exec,files:read,files:write,processes,mcp");
	assert_int_equal(token_parse_scopes("exec,root", &m, NULL, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "root"));
	assert_int_equal(token_parse_scopes("", &m, NULL, why, sizeof(why)), -EINVAL);
	assert_int_equal(token_parse_scopes("exec,", &m, NULL, why, sizeof(why)), -EINVAL);
	assert_int_equal(token_parse_scopes(",exec", &m, NULL, why, sizeof(why)), -EINVAL);
	assert_int_equal(token_parse_scopes("files", &m, NULL, why, sizeof(why)), -EINVAL);
	/* without a place for them, drive scopes are unknown names */
	assert_int_equal(token_parse_scopes("mcp,drive:x", &m, NULL, why, sizeof(why)), -EINVAL);
}

/* Drive scopes: names (bounded), parsed and formatted round trip. */
static void token_drive_scopes(void **state)
{
	struct token_drives d;
	unsigned m;
	char why[160], buf[TOKEN_SCOPES_TEXT_MAX], many[1024];
	size_t k = 0;
	int i;

	(void)state;
	assert_int_equal(token_parse_scopes("mcp,drive:shared,drive:logs:ro", &m, &d, why, sizeof(why)), 0);
	assert_int_equal(m, TOKEN_SCOPE_MCP);
	assert_int_equal(d.n, 2);
	assert_string_equal(d.d[0].name, "shared");
	assert_false(d.d[0].ro);
	assert_string_equal(d.d[1].name, "logs");
	assert_true(d.d[1].ro);
	assert_non_null(token_drive_find(&d, "logs"));
	assert_null(token_drive_find(&d, "log"));
	token_scopes_str(m, &d, buf, sizeof(buf));
	assert_string_equal(buf, "mcp,drive:shared,drive:logs:ro");
	assert_int_equal(token_parse_scopes("drive:a.b-c_9", &m, &d, why, sizeof(why)), 0); /* drives alone parse */
	assert_int_equal(m, 0);
	assert_int_equal(d.n, 1);
	assert_int_equal(token_parse_scopes("drive:", &m, &d, why, sizeof(why)), -EINVAL);
	assert_int_equal(token_parse_scopes("drive::ro", &m, &d, why, sizeof(why)), -EINVAL);
	assert_int_equal(token_parse_scopes("drive:../x", &m, &d, why, sizeof(why)), -EINVAL);
	assert_int_equal(token_parse_scopes("drive:.x", &m, &d, why, sizeof(why)), -EINVAL);
	assert_int_equal(token_parse_scopes("drive:a:rw", &m, &d, why, sizeof(why)), -EINVAL);
	assert_int_equal(token_parse_scopes("drive:abcdefghijabcdefghijabcdefghijabcdef", &m, &d, why, sizeof(why)),
			 -EINVAL); /* 36 */
	assert_int_equal(token_parse_scopes("drive:x,drive:x:ro", &m, &d, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "twice"));
	for (i = 0; i <= TOKEN_DRIVES_MAX; i++)
		k += (size_t)snprintf(many + k, sizeof(many) - k, "%sdrive:abcdefghijabcdefghijabcdefghij%02d:ro",
				      i ? "," : "", i);
	assert_int_equal(token_parse_scopes(many, &m, &d, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "more than 8"));
	/* the longest list there can be fits the file's line, and reads back */
	many[strlen(many) - strlen(",drive:abcdefghijabcdefghijabcdefghij08:ro")] = '\0';
	{
		char tok[TOKEN_LEN + 1], line[1024];
		struct token_rec rec, back;

		assert_int_equal(token_parse_scopes(many, &m, &d, why, sizeof(why)), 0);
		assert_int_equal(d.n, TOKEN_DRIVES_MAX);
		assert_int_equal(token_generate(tok, &rec, 7, 0, TOKEN_SCOPE_ALL, &d), 0);
		assert_int_equal(token_format_line(&rec, line, sizeof(line)), 0);
		assert_int_equal(token_parse_line(line, strlen(line) - 1, &back), 0);
		assert_memory_equal(&back, &rec, sizeof(rec));
		assert_int_equal(back.drives.n, TOKEN_DRIVES_MAX);
	}
}

/* Which drive a path is on (mcp_drive.c), from the record's mounts. */
static void drive_path_match(void **state)
{
	struct token_drives d;
	unsigned m;
	char why[256], name[64], rel[256];
	const char *mounts = "shared:/drives/shared,logs:/var/log/app:ro,inner:/drives/shared/inner";

	(void)state;
	assert_int_equal(token_parse_scopes("mcp,drive:shared,drive:logs", &m, &d, why, sizeof(why)), 0);
#define MATCH(path, w) mcp_drive_match(mounts, &d, path, w, name, sizeof(name), rel, sizeof(rel), why, sizeof(why))
	assert_int_equal(MATCH("/drives/shared/a/b.txt", 1), 0);
	assert_string_equal(name, "shared");
	assert_string_equal(rel, "a/b.txt");
	assert_int_equal(MATCH("//drives/./shared//a/", 0), 0);
	assert_string_equal(rel, "a");
	assert_int_equal(MATCH("/drives/shared", 0), 0);
	assert_string_equal(rel, "");
	/* outside every mount, a lookalike prefix, "..", relative */
	assert_int_equal(MATCH("/etc/passwd", 0), -EACCES);
	assert_non_null(strstr(why, "no drive"));
	assert_int_equal(MATCH("/drives/sharedx/f", 0), -EACCES);
	assert_int_equal(MATCH("/drives/shared/../../etc/passwd", 0), -EACCES);
	assert_int_equal(MATCH("/drives/shared/a/..", 0), -EACCES);
	assert_int_equal(MATCH("drives/shared/f", 0), -EACCES);
	/* a nested mount of a drive the token does not name wins over its parent */
	assert_int_equal(MATCH("/drives/shared/inner/f", 0), -EACCES);
	assert_non_null(strstr(why, "drive inner"));
	/* read-only: in the sandbox (mounted :ro), or for the token */
	assert_int_equal(MATCH("/var/log/app/x", 0), 0);
	assert_int_equal(MATCH("/var/log/app/x", 1), -EACCES);
	assert_non_null(strstr(why, "mounted :ro"));
	assert_int_equal(token_parse_scopes("mcp,drive:shared:ro", &m, &d, why, sizeof(why)), 0);
	assert_int_equal(MATCH("/drives/shared/a", 0), 0);
	assert_int_equal(MATCH("/drives/shared/a", 1), -EACCES);
	assert_non_null(strstr(why, "drive:NAME:ro"));
#undef MATCH
}

static void token_lifecycle(void **state)
{
	char tok[TOKEN_LEN + 1], tok2[TOKEN_LEN + 1], line[1024], bad[TOKEN_LEN + 1];
	struct token_rec recs[2], back;
	const struct token_rec *which;
	unsigned char h[32];

	(void)state;
	assert_int_equal(token_generate(tok, &recs[0], 1000, 3600, TOKEN_SCOPE_MCP | TOKEN_SCOPE_FILES_READ, NULL), 0);
	assert_int_equal(strlen(tok), TOKEN_LEN);
	assert_memory_equal(tok, "vmt_", 4);
	assert_memory_equal(tok + 4, recs[0].id, TOKEN_ID_LEN);
	token_hash(tok, h);
	assert_memory_equal(h, recs[0].hash, 32);
	assert_int_equal(recs[0].expires, 4600);
	assert_int_equal(token_generate(tok2, &recs[1], 1000, 0, TOKEN_SCOPE_ALL, NULL), 0);
	assert_int_equal(recs[1].expires, 0);
	assert_string_not_equal(tok, tok2);
	assert_int_equal(token_generate(tok2, &back, 1000, -1, TOKEN_SCOPE_ALL, NULL), -EINVAL);
	assert_int_equal(token_generate(tok2, &back, 1000, 10, 0, NULL), -EINVAL);
	assert_int_equal(token_generate(tok2, &back, 1000, 10, 1u << 20, NULL), -EINVAL);

	/* the stored line: only the hash, and it reads back the same */
	assert_int_equal(token_format_line(&recs[0], line, sizeof(line)), 0);
	assert_null(strstr(line, tok + 5 + TOKEN_ID_LEN));
	assert_int_equal(token_parse_line(line, strlen(line) - 1, &back), 0);
	assert_memory_equal(&back, &recs[0], sizeof(back));
	assert_int_equal(token_parse_line("abc 00 1 2 exec", 15, &back), -EINVAL);
	line[3] = 'G'; /* not hex */
	assert_int_equal(token_parse_line(line, strlen(line) - 1, &back), -EINVAL);

	/* checks */
	assert_int_equal(token_check(recs, 2, tok, 1000, TOKEN_SCOPE_MCP, &which), TOKEN_OK);
	assert_ptr_equal(which, &recs[0]);
	assert_int_equal(token_check(recs, 2, tok, 4599, TOKEN_SCOPE_MCP | TOKEN_SCOPE_FILES_READ, NULL), TOKEN_OK);
	assert_int_equal(token_check(recs, 2, tok, 4600, TOKEN_SCOPE_MCP, NULL), TOKEN_EXPIRED);
	assert_int_equal(token_check(recs, 2, tok, 1000, TOKEN_SCOPE_EXEC, NULL), TOKEN_OUT_OF_SCOPE);
	assert_int_equal(token_check(recs, 2, tok, 1000, TOKEN_SCOPE_MCP | TOKEN_SCOPE_FILES_WRITE, NULL),
			 TOKEN_OUT_OF_SCOPE);
	assert_int_equal(token_check(recs, 2, tok2, 1LL << 40, TOKEN_SCOPE_ALL, NULL), TOKEN_OK); /* never expires */
	/* a wrong secret with a right id; a revoked (absent) token; junk */
	memcpy(bad, tok, sizeof(bad));
	bad[TOKEN_LEN - 1] = bad[TOKEN_LEN - 1] == '0' ? '1' : '0';
	assert_int_equal(token_check(recs, 2, bad, 1000, TOKEN_SCOPE_MCP, &which), TOKEN_UNKNOWN);
	assert_null(which);
	assert_int_equal(token_check(&recs[1], 1, tok, 1000, TOKEN_SCOPE_MCP, NULL), TOKEN_UNKNOWN);
	assert_int_equal(token_check(recs, 2, "host-test-token", 1000, 0, NULL), TOKEN_UNKNOWN);
	assert_int_equal(token_check(recs, 2, "", 1000, 0, NULL), TOKEN_UNKNOWN);
	assert_int_equal(token_check(recs, 2, NULL, 1000, 0, NULL), TOKEN_UNKNOWN);
	bad[TOKEN_LEN - 1] = 'Z';
	assert_int_equal(token_check(recs, 2, bad, 1000, 0, NULL), TOKEN_UNKNOWN);
}

static void token_file(void **state)
{
	char dir[] = "/tmp/test_mcp.XXXXXX", path[64];
	char tok[TOKEN_LEN + 1];
	struct token_rec recs[3], *got;
	size_t n;
	FILE *f;
	int i;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(token_load(dir, &got, &n), 0); /* none yet */
	assert_int_equal(n, 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(token_generate(tok, &recs[i], 5, i * 100, TOKEN_SCOPE_ALL, NULL), 0);
	assert_int_equal(token_save(dir, recs, 3), 0);
	assert_int_equal(token_load(dir, &got, &n), 0);
	assert_int_equal(n, 3);
	assert_memory_equal(got, recs, sizeof(recs));
	free(got);
	snprintf(path, sizeof(path), "%s/tokens", dir);
	{
		struct stat st;

		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	/* a damaged file is refused whole */
	f = fopen(path, "a");
	fputs("garbage line\n", f);
	fclose(f);
	assert_int_equal(token_load(dir, &got, &n), -EINVAL);
	unlink(path);
	rmdir(dir);
}

/* ---- the HTTP header lookup ------------------------------------------------------ */

static void http_headers(void **state)
{
	static const char req[] = "POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization:   Bearer abc  \r\n"
				  "mcp-session-id: s1\r\nX-Twice: 1\r\nX-Twice: 2\r\n\r\n{}";
	char v[64];
	size_t hl = strlen(req) - 2;

	(void)state;
	assert_int_equal(http_header(req, hl, "Authorization", v, sizeof(v)), 0);
	assert_string_equal(v, "Bearer abc");
	assert_int_equal(http_header(req, hl, "Mcp-Session-Id", v, sizeof(v)), 0);
	assert_string_equal(v, "s1");
	assert_int_equal(http_header(req, hl, "Origin", v, sizeof(v)), -ENOENT);
	assert_int_equal(http_header(req, hl, "X-Twice", v, sizeof(v)), -EEXIST);
	assert_int_equal(http_header(req, hl, "Authorization", v, 4), -E2BIG);
	assert_int_equal(http_header(req, hl, "Host: x\r\nAuthorization", v, sizeof(v)), -ENOENT);
}

static void http_body_limit(void **state)
{
	static char big[70000];
	struct http_request r;
	int n;

	(void)state;
	n = snprintf(big, sizeof(big), "POST /mcp HTTP/1.1\r\nContent-Length: 60000\r\n\r\n");
	memset(big + n, 'x', 60000);
	assert_int_equal(http_parse(big, (size_t)n + 60000, &r), -EPROTO);
	assert_int_equal(r.status, 400); /* Firecracker: 400 with a fault_message */
	assert_int_equal(http_parse_limit(big, (size_t)n + 60000, &r, MCP_MESSAGE_MAX), n + 60000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(jsonrpc_messages),  cmocka_unit_test(jsonrpc_errors),
		cmocka_unit_test(jsonrpc_writers),   cmocka_unit_test(schema_subset),
		cmocka_unit_test(schema_long_lists),
		cmocka_unit_test(tool_schemas),      cmocka_unit_test(protocol), cmocka_unit_test(errors_quote_request),
		cmocka_unit_test(capture_head_tail), cmocka_unit_test(token_scopes),
		cmocka_unit_test(token_lifecycle),   cmocka_unit_test(token_file),
		cmocka_unit_test(token_drive_scopes), cmocka_unit_test(drive_path_match),
		cmocka_unit_test(http_headers),      cmocka_unit_test(http_body_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
