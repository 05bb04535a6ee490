/* The E2B gateway's pure parts (cli/e2b/e2b_priv.h): chunked bodies, the
 * Connect envelope and error mapping, multipart/form-data, a request
 * read from a buffer (query, chunked rewrite, refusals), the query's
 * percent-decoding, base64, process.Process's JSON messages, and binary
 * protobuf transcoded to and from that JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/e2b/e2b_priv.h"

static const struct json *parse(const char *s)
{
	_Alignas(16) static char buf[1 << 16];
	struct json_arena a = { buf, sizeof(buf), 0 };
	const char *err;
	const struct json *j = json_parse(s, strlen(s), &a, &err);

	assert_non_null(j);
	return j;
}

static void chunked(void **state)
{
	char b[256];
	size_t out;
	long n;

	(void)state;
	strcpy(b, "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\nNEXT");
	n = e2b_chunked_decode(b, strlen(b), 100, &out);
	assert_int_equal(n, (long)strlen(b) - 4);
	assert_int_equal(out, 11);
	assert_memory_equal(b, "hello world", 11);
	/* trailers are skipped */
	strcpy(b, "3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n");
	assert_int_equal(e2b_chunked_decode(b, strlen(b), 100, &out), (long)strlen(b));
	assert_int_equal(out, 3);
	/* incomplete: 0, and the buffer is left as it was */
	strcpy(b, "5\r\nhello\r\n6\r\n wo");
	assert_int_equal(e2b_chunked_decode(b, strlen(b), 100, &out), 0);
	assert_string_equal(b, "5\r\nhello\r\n6\r\n wo");
	strcpy(b, "5\r\nhello\r\n0\r\n");
	assert_int_equal(e2b_chunked_decode(b, strlen(b), 100, &out), 0);
	/* malformed */
	strcpy(b, "zz\r\nhello\r\n0\r\n\r\n");
	assert_int_equal(e2b_chunked_decode(b, strlen(b), 100, &out), -EPROTO);
	strcpy(b, "5\r\nhelloXX0\r\n\r\n");
	assert_int_equal(e2b_chunked_decode(b, strlen(b), 100, &out), -EPROTO);
	strcpy(b, "5\nhello\r\n0\r\n\r\n");
	assert_int_equal(e2b_chunked_decode(b, strlen(b), 100, &out), -EPROTO);
	/* over the limit, and a size that would overflow */
	strcpy(b, "5\r\nhello\r\n0\r\n\r\n");
	assert_int_equal(e2b_chunked_decode(b, strlen(b), 4, &out), -E2BIG);
	strcpy(b, "fffffffffffffffffff\r\n");
	assert_int_equal(e2b_chunked_decode(b, strlen(b), 1 << 20, &out), -E2BIG);
	assert_int_equal(e2b_chunk_header(b, 255), 4);
	assert_memory_equal(b, "ff\r\n", 4);
}

static void connect_framing(void **state)
{
	uint8_t b[64], flags;
	const uint8_t *msg;
	size_t len;

	(void)state;
	connect_envelope_hdr(b, CONNECT_FLAG_END, 2);
	memcpy(b + 5, "{}", 2);
	assert_int_equal(connect_envelope(b, 7, 100, &flags, &msg, &len), 7);
	assert_int_equal(flags, CONNECT_FLAG_END);
	assert_int_equal(len, 2);
	assert_memory_equal(msg, "{}", 2);
	assert_int_equal(connect_envelope(b, 6, 100, &flags, &msg, &len), 0);
	assert_int_equal(connect_envelope(b, 4, 100, &flags, &msg, &len), 0);
	assert_int_equal(connect_envelope(b, 7, 1, &flags, &msg, &len), -EMSGSIZE);
	b[0] = CONNECT_FLAG_COMPRESSED;
	assert_int_equal(connect_envelope(b, 7, 100, &flags, &msg, &len), -EPROTO);
	connect_envelope_hdr(b, 0, 0x01020304);
	assert_memory_equal(b, "\x00\x01\x02\x03\x04", 5);
	/* the protocol's code -> HTTP status table, and errno -> code */
	assert_int_equal(connect_code_status("not_found"), 404);
	assert_int_equal(connect_code_status("unauthenticated"), 401);
	assert_int_equal(connect_code_status("deadline_exceeded"), 504);
	assert_int_equal(connect_code_status("no such code"), 500);
	assert_string_equal(connect_errno_code(-ENOENT), "not_found");
	assert_string_equal(connect_errno_code(EEXIST), "already_exists");
	assert_string_equal(connect_errno_code(-EACCES), "permission_denied");
	assert_string_equal(connect_errno_code(-EIO), "internal");
}

static void connect_bodies(void **state)
{
	char b[256];

	(void)state;
	assert_int_equal(connect_end_json(b, sizeof(b), NULL, NULL), 2);
	assert_string_equal(b, "{}");
	connect_end_json(b, sizeof(b), "not_found", "no \"x\"");
	assert_string_equal(b, "{\"error\":{\"code\":\"not_found\",\"message\":\"no \\\"x\\\"\"}}");
	connect_error_json(b, sizeof(b), "internal", "boom");
	assert_string_equal(b, "{\"code\":\"internal\",\"message\":\"boom\"}");
	assert_int_equal(connect_error_json(b, 8, "internal", "boom"), 0);
}

static void multipart(void **state)
{
	const char *body = "preamble\r\n--XyZ\r\n"
			   "Content-Disposition: form-data; name=\"file\"; filename=\"/tmp/a%22b.txt\"\r\n"
			   "Content-Type: application/octet-stream\r\n\r\n"
			   "one\r\n--XyZ\r\n"
			   "Content-Disposition: form-data; name=\"file\"; filename=\"rel/c\"\r\n\r\n"
			   "two\r\nbytes\r\n--XyZ--\r\n";
	char bd[80];
	struct mp_part p;
	size_t pos = 0;

	(void)state;
	assert_int_equal(mp_boundary("multipart/form-data; boundary=XyZ", bd, sizeof(bd)), 0);
	assert_string_equal(bd, "XyZ");
	assert_int_equal(mp_boundary("multipart/form-data; charset=x; boundary=\"a b\"", bd, sizeof(bd)), 0);
	assert_string_equal(bd, "a b");
	assert_int_equal(mp_boundary("application/json", bd, sizeof(bd)), -EINVAL);
	assert_int_equal(mp_boundary("multipart/form-data", bd, sizeof(bd)), -EINVAL);
	assert_int_equal(mp_next(body, strlen(body), "XyZ", &pos, &p), 1);
	assert_string_equal(p.name, "file");
	assert_string_equal(p.filename, "/tmp/a\"b.txt");
	assert_int_equal(p.len, 3);
	assert_memory_equal(p.data, "one", 3);
	assert_int_equal(mp_next(body, strlen(body), "XyZ", &pos, &p), 1);
	assert_string_equal(p.filename, "rel/c");
	assert_int_equal(p.len, 10);
	assert_memory_equal(p.data, "two\r\nbytes", 10);
	assert_int_equal(mp_next(body, strlen(body), "XyZ", &pos, &p), 0);
	/* malformed: no closing delimiter, no Content-Disposition */
	pos = 0;
	assert_int_equal(mp_next("--XyZ\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nabc", 53, "XyZ", &pos, &p),
			 -EPROTO);
	pos = 0;
	assert_int_equal(mp_next("--XyZ\r\nX: y\r\n\r\nabc\r\n--XyZ--", 27, "XyZ", &pos, &p), -EPROTO);
	pos = 0;
	assert_int_equal(mp_next("nothing here", 12, "XyZ", &pos, &p), -EPROTO);
}

static void request(void **state)
{
	char b[1024];
	struct e2b_req r;
	char v[64];
	long n;

	(void)state;
	strcpy(b, "GET /files?path=%2Ftmp%2Fa+b.txt&username=root HTTP/1.1\r\nHost: x\r\n"
		  "E2b-Sandbox-Id: i123\r\n\r\n");
	n = e2b_req_parse(b, strlen(b), 1000, &r);
	assert_int_equal(n, (long)strlen(b));
	assert_string_equal(r.method, "GET");
	assert_string_equal(r.path, "/files");
	assert_string_equal(r.query, "path=%2Ftmp%2Fa+b.txt&username=root");
	assert_int_equal(e2b_query_get(r.query, "path", v, sizeof(v)), 0);
	assert_string_equal(v, "/tmp/a b.txt");
	assert_int_equal(e2b_query_get(r.query, "username", v, sizeof(v)), 0);
	assert_string_equal(v, "root");
	assert_int_equal(e2b_query_get(r.query, "nope", v, sizeof(v)), -ENOENT);
	assert_int_equal(e2b_req_header(&r, "e2b-sandbox-id", v, sizeof(v)), 0);
	assert_string_equal(v, "i123");
	assert_int_equal(r.keep_alive, 1);
	/* a chunked body: decoded, its length what the parser reads */
	strcpy(b, "POST /files HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nGET");
	n = e2b_req_parse(b, strlen(b), 1000, &r);
	assert_int_equal(n, (long)strlen(b) - 3);
	assert_int_equal(r.body_len, 5);
	assert_memory_equal(r.body, "abcde", 5);
	assert_int_equal(e2b_req_header(&r, "Content-Length", v, sizeof(v)), 0);
	assert_string_equal(v, "5");
	/* more to come */
	strcpy(b, "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab");
	assert_int_equal(e2b_req_parse(b, strlen(b), 1000, &r), 0);
	strcpy(b, "POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
	assert_int_equal(e2b_req_parse(b, strlen(b), 1000, &r), 0);
	/* refusals */
	strcpy(b, "POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n");
	assert_int_equal(e2b_req_parse(b, strlen(b), 1000, &r), -EPROTO);
	assert_int_equal(r.status, 501);
	strcpy(b, "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n");
	assert_int_equal(e2b_req_parse(b, strlen(b), 1000, &r), -EPROTO);
	assert_int_equal(r.status, 400);
	strcpy(b, "POST /x HTTP/1.1\r\nContent-Length: 2000\r\n\r\n");
	assert_int_equal(e2b_req_parse(b, strlen(b), 1000, &r), -EPROTO);
	assert_int_equal(r.status, 413);
	strcpy(b, "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n");
	assert_int_equal(e2b_req_parse(b, strlen(b), 1000, &r), -EPROTO);
	assert_int_equal(r.status, 413);
	strcpy(b, "BAD\r\n\r\n");
	assert_int_equal(e2b_req_parse(b, strlen(b), 1000, &r), -EPROTO);
	/* percent-decoding refuses a bad escape and a NUL */
	assert_int_equal(e2b_query_get("p=%zz", "p", v, sizeof(v)), -EINVAL);
	assert_int_equal(e2b_query_get("p=%00", "p", v, sizeof(v)), -EINVAL);
	assert_int_equal(e2b_query_get("p=%4", "p", v, sizeof(v)), -EINVAL);
	assert_int_equal(e2b_query_get("a&p=", "p", v, sizeof(v)), 0);
	assert_string_equal(v, "");
}

static void base64(void **state)
{
	char enc[32];
	unsigned char dec[32];

	(void)state;
	assert_int_equal(e2b_b64_encode("hello", 5, enc), 8);
	assert_string_equal(enc, "aGVsbG8=");
	assert_int_equal(e2b_b64_decode("aGVsbG8=", 8, dec, sizeof(dec)), 5);
	assert_memory_equal(dec, "hello", 5);
	assert_int_equal(e2b_b64_decode("aGk=", 4, dec, sizeof(dec)), 2);
	assert_int_equal(e2b_b64_decode("", 0, dec, sizeof(dec)), 0);
	assert_int_equal(e2b_b64_decode("abc", 3, dec, sizeof(dec)), -EINVAL);
	assert_int_equal(e2b_b64_decode("a!!!", 4, dec, sizeof(dec)), -EINVAL);
}

static void start_request(void **state)
{
	struct e2b_start s;
	const char *why;

	(void)state;
	assert_int_equal(e2b_start_parse(parse("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],"
					       "\"envs\":{\"A\":\"1\",\"B\":\"x y\"},\"cwd\":\"/tmp\"},"
					       "\"tag\":\"web\",\"stdin\":true,\"pty\":{\"size\":{\"cols\":100,\"rows\":\"40\"}}}"),
					 &s, &why),
			 0);
	assert_string_equal(s.cmd, "/bin/bash");
	assert_int_equal(s.nargs, 3);
	assert_string_equal(s.args[2], "echo hi");
	assert_int_equal(s.nenvs, 2);
	assert_string_equal(s.envs[1], "B=x y");
	assert_string_equal(s.cwd, "/tmp");
	assert_string_equal(s.tag, "web");
	assert_true(s.stdin_open);
	assert_true(s.pty);
	assert_int_equal(s.cols, 100);
	assert_int_equal(s.rows, 40);
	e2b_start_free(&s);
	assert_int_equal(e2b_start_parse(parse("{}"), &s, &why), -EINVAL);
	assert_int_equal(e2b_start_parse(parse("{\"process\":{\"cmd\":\"\"}}"), &s, &why), -EINVAL);
	assert_int_equal(e2b_start_parse(parse("{\"process\":{\"cmd\":\"x\",\"args\":[1]}}"), &s, &why), -EINVAL);
	assert_int_equal(e2b_start_parse(parse("{\"process\":{\"cmd\":\"x\",\"envs\":{\"A=B\":\"c\"}}}"), &s, &why),
			 -EINVAL);
	assert_int_equal(e2b_start_parse(parse("{\"process\":{\"cmd\":\"x\"},\"stdin\":\"yes\"}"), &s, &why), -EINVAL);
}

static void selectors_and_events(void **state)
{
	char b[512], b64[64];
	struct json_writer w;
	const char *tag;
	uint32_t pid;

	(void)state;
	assert_int_equal(e2b_selector(parse("{\"process\":{\"pid\":7}}"), &pid, &tag), 0);
	assert_int_equal(pid, 7);
	assert_int_equal(e2b_selector(parse("{\"process\":{\"pid\":\"8\"}}"), &pid, &tag), 0);
	assert_int_equal(pid, 8);
	assert_int_equal(e2b_selector(parse("{\"process\":{\"tag\":\"web\"}}"), &pid, &tag), 0);
	assert_int_equal(pid, 0);
	assert_string_equal(tag, "web");
	assert_int_equal(e2b_selector(parse("{\"process\":{}}"), &pid, &tag), -EINVAL);
	assert_int_equal(e2b_selector(parse("{\"process\":{\"pid\":-1}}"), &pid, &tag), -EINVAL);
	assert_int_equal(e2b_signal_parse(parse("{\"signal\":\"SIGNAL_SIGKILL\"}")), 9);
	assert_int_equal(e2b_signal_parse(parse("{\"signal\":15}")), 15);
	assert_int_equal(e2b_signal_parse(parse("{\"signal\":\"SIGNAL_UNSPECIFIED\"}")), -EINVAL);
	assert_int_equal(e2b_signal_parse(parse("{}")), -EINVAL);
	jw_init(&w, b, sizeof(b));
	e2b_event_start(&w, 12);
	assert_string_equal(jw_done(&w), "{\"event\":{\"start\":{\"pid\":12}}}");
	jw_init(&w, b, sizeof(b));
	e2b_event_data(&w, "stderr", "hi\n", 3, b64, sizeof(b64));
	assert_string_equal(jw_done(&w), "{\"event\":{\"data\":{\"stderr\":\"aGkK\"}}}");
	jw_init(&w, b, sizeof(b));
	e2b_event_data(&w, "stdout", "0123456789", 10, b64, 8);
	assert_null(jw_done(&w)); /* no room for its base64: an error, not a cut */
	jw_init(&w, b, sizeof(b));
	e2b_event_end(&w, 3, 0);
	assert_string_equal(jw_done(&w), "{\"event\":{\"end\":{\"exitCode\":3,\"exited\":true,\"status\":\"exit status 3\","
					 "\"error\":\"exit status 3\"}}}");
	jw_init(&w, b, sizeof(b));
	e2b_event_end(&w, 137, 9);
	assert_string_equal(jw_done(&w), "{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":false,\"status\":\"signal: killed\","
					 "\"error\":\"signal: killed\"}}}");
	jw_init(&w, b, sizeof(b));
	e2b_event_end(&w, 0, 0);
	assert_string_equal(jw_done(&w), "{\"event\":{\"end\":{\"exitCode\":0,\"exited\":true,\"status\":\"exit status 0\"}}}");
}

/* Binary protobuf to the JSON mapping and back, by the tables. */
static void protobuf(void **state)
{
	const struct pb_msg *req, *resp;
	/* StartRequest{process{cmd "sh", args ["-c","echo"], envs {A:1}},
	 * pty{size{cols 80 rows 24}}, tag "t", stdin true} */
	static const uint8_t start[] = { 0x0a, 0x16, 0x0a, 0x02, 's', 'h', 0x12, 0x02, '-', 'c', 0x12, 0x04, 'e', 'c',
					 'h', 'o', 0x1a, 0x06, 0x0a, 0x01, 'A', 0x12, 0x01, '1', 0x12, 0x06, 0x0a,
					 0x04, 0x08, 0x50, 0x10, 0x18, 0x1a, 0x01, 't', 0x20, 0x01 };
	char b[1024];
	uint8_t out[1024];
	struct json_writer w;
	long n;

	(void)state;
	assert_int_equal(e2b_pb_method("process.Process", "Start", &req, &resp), 0);
	assert_int_equal(e2b_pb_method("process.Process", "Nope", &req, &resp), -ENOENT);
	assert_int_equal(e2b_pb_method("process.Proces", "Start", &req, &resp), -ENOENT);
	jw_init(&w, b, sizeof(b));
	assert_int_equal(e2b_pb_to_json(req, start, sizeof(start), &w), 0);
	assert_string_equal(jw_done(&w), "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"echo\"],\"envs\":{\"A\":\"1\"}},"
					 "\"pty\":{\"size\":{\"cols\":80,\"rows\":24}},\"tag\":\"t\",\"stdin\":true}");
	/* and back: the same bytes (fields in number order) */
	n = e2b_pb_from_json(req, parse(b), out, sizeof(out));
	assert_int_equal(n, sizeof(start));
	assert_memory_equal(out, start, sizeof(start));
	/* responses: an end event (sint32 zigzag), data as bytes */
	n = e2b_pb_from_json(resp, parse("{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":false,\"status\":\"s\"}}}"),
			     out, sizeof(out));
	assert_int_equal(n, 11);
	assert_memory_equal(out, "\x0a\x09\x1a\x07\x08\x01\x10\x00\x1a\x01s", 11);
	n = e2b_pb_from_json(resp, parse("{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}"), out, sizeof(out));
	assert_int_equal(n, 9);
	assert_memory_equal(out, "\x0a\x07\x12\x05\x0a\x03hi\n", 9);
	/* an EntryInfo: enum by name, int64 from a string, a Timestamp */
	assert_int_equal(e2b_pb_method("filesystem.Filesystem", "Stat", &req, &resp), 0);
	n = e2b_pb_from_json(resp, parse("{\"entry\":{\"name\":\"a\",\"type\":\"FILE_TYPE_DIRECTORY\",\"size\":\"300\","
					 "\"modifiedTime\":\"1970-01-01T00:01:40Z\"}}"),
			     out, sizeof(out));
	assert_true(n > 0);
	jw_init(&w, b, sizeof(b));
	assert_int_equal(e2b_pb_to_json(resp, out, (size_t)n, &w), 0);
	assert_string_equal(jw_done(&w), "{\"entry\":{\"name\":\"a\",\"type\":\"FILE_TYPE_DIRECTORY\",\"size\":\"300\","
					 "\"modifiedTime\":\"1970-01-01T00:01:40Z\"}}");
	/* malformed binary: a length past the end, a bad wire type */
	jw_init(&w, b, sizeof(b));
	assert_int_equal(e2b_pb_to_json(req, (const uint8_t *)"\x0a\x09/x", 4, &w), -EPROTO);
	jw_init(&w, b, sizeof(b));
	assert_int_equal(e2b_pb_to_json(req, (const uint8_t *)"\x08\x01", 2, &w), -EPROTO); /* path as a varint */
	/* unknown fields are skipped; an empty message is {} */
	jw_init(&w, b, sizeof(b));
	assert_int_equal(e2b_pb_to_json(req, (const uint8_t *)"\x78\x05\x0a\x01/", 5, &w), 0);
	assert_string_equal(jw_done(&w), "{\"path\":\"/\"}");
	jw_init(&w, b, sizeof(b));
	assert_int_equal(e2b_pb_to_json(req, NULL, 0, &w), 0);
	assert_string_equal(jw_done(&w), "{}");
	/* too small an output */
	assert_int_equal(e2b_pb_from_json(req, parse("{\"path\":\"/a/long/path\"}"), out, 4), -E2BIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chunked),	  cmocka_unit_test(connect_framing), cmocka_unit_test(connect_bodies),
		cmocka_unit_test(multipart),	  cmocka_unit_test(request),	     cmocka_unit_test(base64),
		cmocka_unit_test(start_request), cmocka_unit_test(selectors_and_events),
		cmocka_unit_test(protobuf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
