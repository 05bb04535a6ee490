/* The Connect protocol's framing and errors (connectrpc.com/docs/protocol,
 * "Streaming-Request" and "Error Codes"), as envd speaks it and the E2B
 * SDKs' connect-web transport expects it: a unary call is one JSON body
 * each way, an error a non-200 status with {"code","message"}; a
 * streaming call's messages are envelopes (a flags byte, a 32-bit
 * big-endian length, the message), the last one flagged end-of-stream
 * (0x02) holding {"error":{...}} or {}. Pure (cli/e2b/e2b_priv.h). */
#include "cli/e2b/e2b_priv.h"

#include <errno.h>
#include <string.h>

long connect_envelope(const uint8_t *buf, size_t len, size_t max, uint8_t *flags, const uint8_t **msg,
		      size_t *msg_len)
{
	uint32_t n;

	if (len < CONNECT_ENVELOPE_HDR)
		return 0;
	n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
	if (n > max)
		return -EMSGSIZE;
	/* "Compressed" is only set when Connect-Content-Encoding was agreed:
	 * this server offers none (Connect-Accept-Encoding is not sent). */
	if (buf[0] & CONNECT_FLAG_COMPRESSED)
		return -EPROTO;
	if (len - CONNECT_ENVELOPE_HDR < n)
		return 0;
	*flags = buf[0];
	*msg = buf + CONNECT_ENVELOPE_HDR;
	*msg_len = n;
	return (long)(CONNECT_ENVELOPE_HDR + (size_t)n);
}

void connect_envelope_hdr(uint8_t hdr[CONNECT_ENVELOPE_HDR], uint8_t flags, uint32_t len)
{
	hdr[0] = flags;
	hdr[1] = (uint8_t)(len >> 24);
	hdr[2] = (uint8_t)(len >> 16);
	hdr[3] = (uint8_t)(len >> 8);
	hdr[4] = (uint8_t)len;
}

/* The protocol's table "Error Codes": each code's HTTP status. */
int connect_code_status(const char *code)
{
	static const struct {
		const char *code;
		int status;
	} t[] = {
		{ "canceled", 499 },	       { "unknown", 500 },	       { "invalid_argument", 400 },
		{ "deadline_exceeded", 504 },  { "not_found", 404 },	       { "already_exists", 409 },
		{ "permission_denied", 403 },  { "resource_exhausted", 429 }, { "failed_precondition", 400 },
		{ "aborted", 409 },	       { "out_of_range", 400 },	       { "unimplemented", 501 },
		{ "internal", 500 },	       { "unavailable", 503 },	       { "data_loss", 500 },
		{ "unauthenticated", 401 },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(t[i].code, code))
			return t[i].status;
	return 500;
}

const char *connect_errno_code(int eno)
{
	switch (eno < 0 ? -eno : eno) {
	case ENOENT:
	case ESRCH:
	case ECHILD:
		return "not_found";
	case EEXIST:
	case ENOTEMPTY:
		return "already_exists";
	case EACCES:
	case EPERM:
	case EROFS:
		return "permission_denied";
	case EINVAL:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case ELOOP:
		return "invalid_argument";
	case ENOSPC:
	case EDQUOT:
	case EAGAIN:
	case EMFILE:
		return "resource_exhausted";
	case ETIMEDOUT:
		return "deadline_exceeded";
	case ECONNREFUSED:
	case ECONNRESET:
	case EPIPE:
		return "unavailable";
	case ENOTSUP:
	case ENOSYS:
		return "unimplemented";
	default:
		return "internal";
	}
}

size_t connect_error_json(char *out, size_t cap, const char *code, const char *msg)
{
	struct json_writer w;

	jw_init(&w, out, cap);
	jw_obj(&w);
	jw_key(&w, "code");
	jw_str(&w, code);
	jw_key(&w, "message");
	jw_text(&w, msg, strlen(msg));
	jw_obj_end(&w);
	return jw_done(&w) ? w.len : 0;
}

size_t connect_end_json(char *out, size_t cap, const char *code, const char *msg)
{
	struct json_writer w;

	jw_init(&w, out, cap);
	jw_obj(&w);
	if (code) {
		jw_key(&w, "error");
		jw_obj(&w);
		jw_key(&w, "code");
		jw_str(&w, code);
		jw_key(&w, "message");
		jw_text(&w, msg ? msg : "", msg ? strlen(msg) : 0);
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	return jw_done(&w) ? w.len : 0;
}
