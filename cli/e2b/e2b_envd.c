/* envd's API through the gateway (envd/envd.yaml, the Connect services of
 * envd/process and envd/filesystem): a request carrying E2b-Sandbox-Id
 * (and E2b-Sandbox-Port 49983, envd's) is that sandbox's, checked against
 * its access token (X-Access-Token) and served over the sandbox API
 * (docs/api.md) with the sandbox's own token; a sandbox on standby is
 * woken first (E2B's auto-resume). Connect calls come as JSON, unary
 * (application/json) or server-streaming (application/connect+json, one
 * enveloped request message); binary protobuf is refused (415). */
#include "cli/e2b/e2b_priv.h"
#include "cli/mcp/mcp.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define RPC_MSG_MAX (4u << 20)

int e2b_api_call(const struct sandbox_addr *a, int version, const char *fields, char *out, size_t outlen, char *err,
		 size_t errlen)
{
	struct api_error e;
	int fd = api_open_v(a, version, fields), r;

	if (fd < 0) {
		snprintf(err, errlen, "the sandbox API: %s", strerror(-fd));
		return fd == -ENOENT ? -ECONNREFUSED : fd;
	}
	r = api_result(fd, out, outlen, &e);
	close(fd);
	if (r == -1) {
		snprintf(err, errlen, "%s", e.message[0] ? e.message : strerror(e.eno));
		return -(e.eno ? e.eno : EIO);
	}
	if (r) {
		snprintf(err, errlen, "the sandbox API closed the connection");
		return -EPIPE;
	}
	return 0;
}

void e2b_op_fields(struct json_writer *w, char *buf, size_t len, const char *op, const char *path)
{
	jw_init(w, buf, len);
	jw_key(w, "op");
	jw_str(w, op);
	jw_key(w, "path");
	jw_str(w, path);
}

int e2b_rpc_stream_begin(struct e2b_envd *e)
{
	if (e->begun)
		return 0;
	e->begun = 1;
	return e2b_stream_begin(e->c, 200, e->binary ? "application/connect+proto" : "application/connect+json");
}

/* w's JSON as the call's response message in binary (malloc'd *out). */
static long to_binary(struct e2b_envd *e, struct json_writer *w, uint8_t **out)
{
	size_t asz = 2 * w->len + 65536, cap = w->len + 64;
	struct json_arena a = { malloc(asz), asz, 0 };
	const struct json *j;
	const char *err;
	long n = -ENOMEM;

	*out = malloc(cap);
	j = a.buf && *out ? json_parse(w->buf, w->len, &a, &err) : NULL;
	if (j)
		n = e2b_pb_from_json(e->binary, j, *out, cap);
	else if (a.buf && *out)
		n = -EINVAL;
	free(a.buf);
	return n;
}

/* One envelope (flags, then text[0..len)) as one chunk. */
static int envelope(struct e2b_envd *e, uint8_t flags, const char *text, size_t len)
{
	char *buf = malloc(len + CONNECT_ENVELOPE_HDR);
	int r;

	if (!buf)
		return -ENOMEM;
	connect_envelope_hdr((uint8_t *)buf, flags, (uint32_t)len);
	memcpy(buf + CONNECT_ENVELOPE_HDR, text, len);
	r = e2b_stream_write(e->c, buf, len + CONNECT_ENVELOPE_HDR);
	free(buf);
	return r;
}

int e2b_rpc_stream_msg(struct e2b_envd *e, struct json_writer *w)
{
	uint8_t *bin = NULL;
	long n;
	int r;

	if (!jw_done(w))
		return -E2BIG;
	if (e2b_rpc_stream_begin(e))
		return -EPIPE;
	if (!e->binary)
		return envelope(e, 0, w->buf, w->len);
	n = to_binary(e, w, &bin);
	r = n < 0 ? (int)n : envelope(e, 0, (const char *)bin, (size_t)n);
	free(bin);
	return r;
}

int e2b_rpc_stream_end(struct e2b_envd *e, const char *code, const char *msg)
{
	char body[2048];
	size_t n = connect_end_json(body, sizeof(body), code, msg);

	if (e2b_rpc_stream_begin(e) || envelope(e, CONNECT_FLAG_END, body, n))
		return -EPIPE;
	return e2b_stream_end(e->c);
}

int e2b_rpc_error(struct e2b_envd *e, const char *code, const char *fmt, ...)
{
	char msg[1024], body[2048];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (e->stream)
		return e2b_rpc_stream_end(e, code, msg);
	n = connect_error_json(body, sizeof(body), code, msg);
	return e2b_send(e->c, connect_code_status(code), "application/json", body, n, NULL);
}

int e2b_rpc_reply(struct e2b_envd *e, struct json_writer *w)
{
	uint8_t *bin = NULL;
	long n;
	int r;

	if (!jw_done(w))
		return e2b_rpc_error(e, "resource_exhausted", "the answer is too large");
	if (!e->binary)
		return e2b_send(e->c, 200, "application/json", w->buf, w->len, NULL);
	n = to_binary(e, w, &bin);
	r = n < 0 ? e2b_rpc_error(e, "internal", "the answer does not encode: %s", strerror((int)-n))
		  : e2b_send(e->c, 200, "application/proto", bin, (size_t)n, NULL);
	free(bin);
	return r;
}

int e2b_rpc_empty(struct e2b_envd *e)
{
	if (e->binary)
		return e2b_send(e->c, 200, "application/proto", NULL, 0, NULL);
	return e2b_send(e->c, 200, "application/json", "{}", 2, NULL);
}

int e2b_abs_path(const char *in, char *out, size_t len)
{
	int n;

	if (!in || !*in)
		n = snprintf(out, len, "/root");
	else if (in[0] == '/')
		n = snprintf(out, len, "%s", in);
	else if (in[0] == '~' && (in[1] == '/' || !in[1]))
		n = snprintf(out, len, "/root%s", in + 1);
	else
		n = snprintf(out, len, "/root/%s", in);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The request message as JSON text: as sent, or transcoded from binary
 * (*json malloc'd then). */
static int request_json(struct e2b_envd *e, const struct pb_msg *req, const char *text, size_t len, char **json,
			size_t *jlen)
{
	struct json_writer w;
	size_t cap = 4 * len + 4096;
	int r;

	*json = NULL;
	if (!e->binary) {
		*jlen = len;
		return 0;
	}
	if (!(*json = malloc(cap)))
		return -ENOMEM;
	jw_init(&w, *json, cap);
	r = e2b_pb_to_json(req, (const uint8_t *)text, len, &w);
	if (!r && !jw_done(&w))
		r = -E2BIG;
	*jlen = w.len;
	return r;
}

/* A Connect call: its message as JSON, then the service's method. */
static int rpc(struct e2b_envd *e, const char *service, const char *method)
{
	const struct e2b_req *r = e->r;
	struct json_arena a = { malloc(RPC_MSG_MAX), RPC_MSG_MAX, 0 };
	const char *text = r->body ? r->body : "", *err = "";
	size_t len = r->body ? r->body_len : 0, jlen = 0;
	const struct pb_msg *req = NULL, *resp = NULL;
	const struct json *root = NULL;
	char ct[128] = "", *json = NULL, *codec;
	int k, known = e2b_pb_method(service, method, &req, &resp) == 0;

	if (!a.buf)
		return e2b_send_error(e->c, 500, "out of memory");
	e2b_req_header(r, "Content-Type", ct, sizeof(ct));
	e->stream = !strncasecmp(ct, "application/connect+", 20);
	codec = ct + (e->stream ? 20 : strncasecmp(ct, "application/", 12) ? 0 : 12);
	codec[strcspn(codec, "; ")] = '\0';
	if (strcasecmp(codec, "json") && strcasecmp(codec, "proto")) {
		free(a.buf);
		return e2b_send(e->c, 415, NULL, NULL, 0,
				"Accept-Post: application/json, application/proto, application/connect+json, "
				"application/connect+proto\r\n");
	}
	if (!strcasecmp(codec, "proto") && known)
		e->binary = resp;
	if (e->stream) {
		const uint8_t *msg;
		uint8_t flags;
		size_t mlen;
		long n = connect_envelope((const uint8_t *)text, len, RPC_MSG_MAX, &flags, &msg, &mlen);

		if (n <= 0 || (size_t)n != len || (flags & CONNECT_FLAG_END)) {
			free(a.buf);
			return e2b_rpc_error(e, "invalid_argument", "one enveloped request message expected");
		}
		text = (const char *)msg;
		len = mlen;
	}
	k = request_json(e, req, text, len, &json, &jlen);
	if (!k)
		root = json_parse(json ? json : jlen ? text : "{}", jlen ? jlen : 2, &a, &err);
	if (!known)
		k = e2b_rpc_error(e, "unimplemented", "%s/%s is not served by vmm's E2B gateway", service, method);
	else if (!root || root->type != JSON_OBJ)
		k = e2b_rpc_error(e, "invalid_argument", "the request message: %s",
				  k ? strerror(-k) : root ? "not an object" : err);
	else if (!strcmp(service, "process.Process"))
		k = e2b_process(e, method, root);
	else
		k = e2b_fs(e, method, root);
	free(json);
	free(a.buf);
	return k;
}

int e2b_envd(struct e2b_conn *c, const struct e2b_req *r)
{
	struct e2b_envd *e = calloc(1, sizeof(*e));
	struct sandbox_status st;
	char id[128], port[16] = "";
	const char *p = r->path;
	unsigned need = TOKEN_SCOPE_FILES_READ;
	int k;

	if (!e)
		return e2b_send_error(c, 500, "out of memory");
	e->c = c;
	e->r = r;
	e2b_req_header(r, "E2b-Sandbox-Id", id, sizeof(id));
	e2b_req_header(r, "E2b-Sandbox-Port", port, sizeof(port));
	/* E2B's proxy answers 502 for a sandbox it does not know */
	if (!sandbox_name_ok(id) || sandbox_status(id, &st) || e2b_rec_read(st.sb.dir, &e->rec) ||
	    (st.state != SB_RUNNING && st.state != SB_STANDBY && st.state != SB_STARTING)) {
		k = e2b_send_error(c, 502, "The sandbox %s was not found", id);
		goto out;
	}
	if (port[0] && atoi(port) != E2B_ENVD_PORT) {
		k = e2b_send_error(c, 502, "port %s of sandbox %s: the gateway serves envd's (%d) only", port, id,
				   E2B_ENVD_PORT);
		goto out;
	}
	if (!strcmp(p, "/health")) {
		k = e2b_send(c, 204, NULL, NULL, 0, NULL);
		goto out;
	}
	if (!strcmp(p, "/files"))
		need = strcmp(r->method, "GET") ? TOKEN_SCOPE_FILES_WRITE : TOKEN_SCOPE_FILES_READ;
	else if (!strncmp(p, "/process.Process/", 17))
		need = TOKEN_SCOPE_EXEC | TOKEN_SCOPE_PROCESSES;
	if (e2b_token_check(c, r, st.sb.dir, need)) {
		k = 0;
		goto out;
	}
	/* auto-resume: woken as `vmm resume` does (with default signals) */
	if (st.state == SB_STANDBY && e2b_vmm(c->srv, "resume", id) &&
	    (sandbox_status(id, &st) || st.state != SB_RUNNING)) { /* (or another call woke it) */
		k = e2b_send_error(c, 502, "The sandbox %s is paused and could not be resumed", id);
		goto out;
	}
	e->addr.port = cli_api_port();
	if (sandbox_api_addr(id, 0, &e->sb, &e->addr)) {
		k = e2b_send_error(c, 502, "The sandbox %s is not running", id);
		goto out;
	}
	if (!strcmp(p, "/files"))
		k = e2b_files(e);
	else if (strcmp(r->method, "POST"))
		k = e2b_send_error(c, 405, "%s %s: Connect calls are POSTs", r->method, p);
	else if (!strncmp(p, "/process.Process/", 17))
		k = rpc(e, "process.Process", p + 17);
	else if (!strncmp(p, "/filesystem.Filesystem/", 23))
		k = rpc(e, "filesystem.Filesystem", p + 23);
	else
		k = e2b_send_error(c, 404, "%s: not an envd path", p);
out:
	free(e);
	return k;
}
