/* The control API's HTTP parser (vmm/base/http.c) and the Firecracker routes'
 * validation and state rules (vmm/fcapi*.c), without sockets or KVM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/api/control.h"
#include "vmm/cpuid.h"
#include "vmm/api/fcapi.h"
#include "vmm/api/fcapi_priv.h" /* FCAPI_DESER: Firecracker's frame around serde_json's errors */
#include "vmm/base/http.h"
#include "vmm/base/log.h"
#include "tests/unit/vq_builder.h"

#include <sys/stat.h>

/* ---- the parser --------------------------------------------------------- */

static int parse(const char *s, struct http_request *r)
{
	return http_parse(s, strlen(s), r);
}

static void http_simple_get(void **state)
{
	struct http_request r;
	const char *s = "GET /machine-config?x=1 HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n";

	(void)state;
	assert_int_equal(parse(s, &r), (int)strlen(s));
	assert_int_equal(r.method, HTTP_GET);
	assert_string_equal(r.path, "/machine-config");
	assert_null(r.body);
	assert_true(r.keep_alive);
}

static void http_put_with_body_and_pipelining(void **state)
{
	struct http_request r;
	const char *s = "PUT /vm HTTP/1.1\r\ncontent-length: 5\r\n\r\n{\"a\"}GET / HTTP/1.1\r\n\r\n";
	int n;

	(void)state;
	n = parse(s, &r);
	assert_int_equal(n, (int)(strstr(s, "GET") - s));
	assert_int_equal(r.method, HTTP_PUT);
	assert_int_equal(r.body_len, 5);
	assert_memory_equal(r.body, "{\"a\"}", 5);
	/* The next request follows in the same buffer. */
	assert_int_equal(http_parse(s + n, strlen(s + n), &r), (int)strlen(s + n));
	assert_int_equal(r.method, HTTP_GET);
}

static void http_incomplete(void **state)
{
	struct http_request r;
	const char *full = "PATCH /vm HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789";
	size_t i;

	(void)state;
	/* Every proper prefix needs more bytes; none is an error. */
	for (i = 0; i < strlen(full); i++)
		assert_int_equal(http_parse(full, i, &r), 0);
	assert_int_equal(http_parse(full, strlen(full), &r), (int)strlen(full));
	assert_int_equal(r.method, HTTP_PATCH);
}

static void http_expect_continue(void **state)
{
	struct http_request r;
	const char *s = "PUT /drives/a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
	char buf[256];

	(void)state;
	assert_int_equal(parse(s, &r), 0);
	assert_true(r.expect_continue);
	snprintf(buf, sizeof(buf), "%s{}", s);
	assert_int_equal(parse(buf, &r), (int)strlen(buf));
	assert_false(r.expect_continue);
	assert_int_equal(parse("PUT / HTTP/1.1\r\nExpect: something\r\n\r\n", &r), -EPROTO);
	assert_int_equal(r.status, 417);
}

static void http_connection_header(void **state)
{
	struct http_request r;

	(void)state;
	assert_true(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", &r) > 0);
	assert_false(r.keep_alive);
	assert_true(parse("GET / HTTP/1.0\r\n\r\n", &r) > 0);
	assert_false(r.keep_alive);
	assert_true(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &r) > 0);
	assert_true(r.keep_alive);
	assert_true(parse("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n", &r) > 0);
	assert_false(r.keep_alive);
}

struct bad_case {
	const char *req;
	int status;
};

static void http_refusals(void **state)
{
	static const struct bad_case cases[] = {
		{ "GET / HTTP/2.0\r\n\r\n", 505 },
		{ "GET / FOO/1.1\r\n\r\n", 400 },
		{ "GET /\r\n\r\n", 400 },
		{ "GET  / HTTP/1.1\r\n\r\n", 400 },
		{ "G(T / HTTP/1.1\r\n\r\n", 400 },
		{ "GET http:///x HTTP/1.1\r\n\r\n", 400 },
		{ "GET https://localhost/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET localhost/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET /a\x01 HTTP/1.1\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411 },
		{ "PUT / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length: 51201\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\n folded: x\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nno colon\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\n: empty name\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nX: a\x02" "b\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\n\n", 400 },
		{ "GET / HTTP/1.1\r\nHost: x\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nHost: x\n\n", 400 },
	};
	struct http_request r;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = parse(cases[i].req, &r);

		if (n != -EPROTO || r.status != cases[i].status)
			fail_msg("case %zu (%s): got %d status %d, want %d", i, cases[i].req, n, r.status,
				 cases[i].status);
		assert_non_null(r.why);
	}
	/* A repeated identical Content-Length is fine. */
	assert_true(parse("PUT / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n", &r) > 0);
}

/* Firecracker's server: an absolute-form target is its path, one trailing
 * slash is dropped, an oversize body is 400 with a fault message (not 413),
 * and the limit is what --http-api-max-payload-size says. */
static void http_firecracker_forms(void **state)
{
	struct http_request r;

	(void)state;
	assert_true(parse("GET http://localhost/machine-config HTTP/1.1\r\n\r\n", &r) > 0);
	assert_string_equal(r.path, "/machine-config");
	assert_true(parse("GET http://localhost HTTP/1.1\r\n\r\n", &r) > 0);
	assert_string_equal(r.path, "/");
	assert_true(parse("PUT HTTP://localhost/drives/a?x=1 HTTP/1.1\r\n\r\n", &r) > 0);
	assert_string_equal(r.path, "/drives/a");
	assert_true(parse("GET /machine-config/ HTTP/1.1\r\n\r\n", &r) > 0);
	assert_string_equal(r.path, "/machine-config");
	assert_true(parse("GET / HTTP/1.1\r\n\r\n", &r) > 0);
	assert_string_equal(r.path, "/");
	assert_int_equal(parse("PUT /logger HTTP/1.1\r\nContent-Length: 51201\r\n\r\n", &r), -EPROTO);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.why, "larger than the limit of 51200"));
	assert_int_equal(http_parse_limit("PUT /logger HTTP/1.1\r\nContent-Length: 60000\r\n\r\n", 44, &r, 100000), 0);
	assert_int_equal(http_parse_limit("PUT /logger HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 44, &r, 10), -EPROTO);
	assert_int_equal(r.status, 400);
}

static void http_size_limits(void **state)
{
	struct http_request r;
	char *big = malloc(HTTP_MAX_HEADER + 64), path[HTTP_MAX_PATH + 40];

	(void)state;
	assert_non_null(big);
	/* Headers that never end within 8 KiB. */
	strcpy(big, "GET / HTTP/1.1\r\n");
	while (strlen(big) < HTTP_MAX_HEADER)
		strcat(big, "X-Pad: aaaaaaaaaaaaaaaaaaaa\r\n");
	assert_int_equal(http_parse(big, strlen(big), &r), -EPROTO);
	assert_int_equal(r.status, 431);
	/* ... but just under it, still waiting. */
	assert_int_equal(http_parse(big, 4000, &r), 0);
	free(big);
	memset(path, 'a', sizeof(path));
	memcpy(path, "GET /", 5);
	strcpy(path + HTTP_MAX_PATH + 5, " HTTP/1.1\r\n\r\n");
	assert_int_equal(parse(path, &r), -EPROTO);
	assert_int_equal(r.status, 414);
	/* A bad request line is refused before the headers end. */
	assert_int_equal(parse("GET / HTTP/3\r\nHost: x\r\n", &r), -EPROTO);
}

static void http_writer(void **state)
{
	char out[256], small[20];
	size_t n;

	(void)state;
	n = http_response(out, sizeof(out), 204, NULL, 0, 1);
	out[n] = '\0';
	assert_string_equal(out, "HTTP/1.1 204 No Content\r\nServer: vmm\r\nContent-Length: 0\r\n\r\n");
	n = http_response_hdr(out, sizeof(out), 204, NULL, 0, 1, "Deprecation: true\r\n");
	out[n] = '\0';
	assert_string_equal(out, "HTTP/1.1 204 No Content\r\nServer: vmm\r\nDeprecation: true\r\nContent-Length: 0\r\n\r\n");
	n = http_response(out, sizeof(out), 400, "{}", 2, 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "Content-Type: application/json\r\n"));
	assert_non_null(strstr(out, "Connection: close\r\n\r\n{}"));
	assert_int_equal(http_response(small, sizeof(small), 200, "{}", 2, 1), 0);
	n = http_fault(out, sizeof(out), "a \"quoted\" word");
	assert_string_equal(out, "{\"fault_message\":\"a \\\"quoted\\\" word\"}");
	assert_int_equal(n, strlen(out));
}

/* ---- the routes ----------------------------------------------------------- */

static struct fcapi api;
static char kernel[64], disk[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	fcapi_init(&api, "unit");
	snprintf(kernel, sizeof(kernel), "/tmp/vmm-test-http-k.%d", (int)getpid());
	snprintf(disk, sizeof(disk), "/tmp/vmm-test-http-d.%d", (int)getpid());
	fd = open(kernel, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	close(fd);
	fd = open(disk, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(kernel);
	unlink(disk);
	return 0;
}

static char out[FCAPI_REPLY_MAX];
static size_t out_len;

/* Sends METHOD PATH with BODY (may be NULL); returns the status. */
static int req(const char *method, const char *path, const char *body)
{
	char buf[8192];
	struct http_request r;
	int n;

	n = snprintf(buf, sizeof(buf), "%s %s HTTP/1.1\r\nContent-Length: %zu\r\n\r\n%s", method, path,
		     body ? strlen(body) : 0, body ? body : "");
	assert_true(http_parse(buf, (size_t)n, &r) == n);
	n = fcapi_handle(&api, &r, out, sizeof(out), &out_len);
	out[out_len] = '\0';
	return n;
}

static void expect_fault(int status, const char *method, const char *path, const char *body,
			 const char *words)
{
	int got = req(method, path, body);

	if (got != status || !strstr(out, "\"fault_message\"") || !strstr(out, words))
		fail_msg("%s %s %s: %d %s (want %d with '%s')", method, path, body ? body : "", got, out,
			 status, words);
}

static void route_info_and_unknown(void **state)
{
	(void)state;
	assert_int_equal(req("GET", "/", NULL), 200);
	assert_non_null(strstr(out, "\"state\":\"Not started\""));
	assert_non_null(strstr(out, "\"id\":\"unit\""));
	assert_non_null(strstr(out, "\"app_name\""));
	assert_non_null(strstr(out, "\"vmm_version\""));
	assert_int_equal(req("GET", "/version", NULL), 200);
	expect_fault(400, "GET", "/nope", NULL, "Invalid request method and/or path");
	expect_fault(400, "DELETE", "/", NULL, "Invalid request method and/or path");
	expect_fault(400, "POST", "/actions", "{}", "Invalid request method and/or path");
	expect_fault(400, "PATCH", "/boot-source", "{}", "Invalid request method and/or path");
	expect_fault(400, "PUT", "/drives/", "{}", "Invalid request method and/or path");
	expect_fault(400, "PUT", "/drives/a/b", "{}", "Invalid request method and/or path");
}

static void route_body_errors(void **state)
{
	(void)state;
	expect_fault(400, "PUT", "/machine-config", NULL, "Empty PUT request.");
	expect_fault(400, "PATCH", "/machine-config", NULL, "Empty PATCH request.");
	expect_fault(400, "PATCH", "/machine-config", "{}", "Empty PATCH request.");
	/* Firecracker refuses any PATCH of a device before the start, an
	 * empty one too. */
	expect_fault(400, "PATCH", "/drives/rootfs", "{\"drive_id\":\"rootfs\"}", "not supported before starting");
	expect_fault(400, "PATCH", "/network-interfaces/eth0", "{\"iface_id\":\"eth0\"}",
		     "The requested operation is not supported before starting the microVM.");
	expect_fault(400, "GET", "/machine-config", "{}", "GET request cannot have a body.");
	expect_fault(400, "GET", "/", "x", "GET request cannot have a body.");
	/* Firecracker's serde refuses 2.0 where an integer is wanted. */
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":2.0,\"mem_size_mib\":64}",
		     "invalid type: floating point `2.0`, expected u8 at line 1 column 17.");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":1e2}",
		     "invalid type: floating point `100.0`, expected usize at line 1 column 34.");
	expect_fault(400, "PUT", "/machine-config", "{", "invalid JSON");
	expect_fault(400, "PUT", "/machine-config", "[1]", "invalid type: sequence, expected a map");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64,\"x\":1}",
		     FCAPI_DESER "unknown field `x`, expected one of `vcpu_count`, `mem_size_mib`, `smt`, "
		     "`cpu_template`, `track_dirty_pages`, `huge_pages` at line 1 column 37.");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"vcpu_count\":2,\"mem_size_mib\":64}",
		     "duplicate field `vcpu_count` at line 1 column 28.");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":\"1\",\"mem_size_mib\":64}",
		     "\\\"1\\\", expected u8 at line 1 column 17.");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1.5,\"mem_size_mib\":64}",
		     "invalid type: floating point `1.5`, expected u8");
	/* 1e999 reads as an infinity: named, not a crash (fuzz_http found it). */
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1e999,\"mem_size_mib\":64}",
		     "invalid type: floating point `inf`, expected u8");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":-1,\"mem_size_mib\":64}",
		     "invalid value: integer `-1`, expected u8 at line 1 column 16.");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":256,\"mem_size_mib\":64}",
		     "invalid value: integer `256`, expected u8");
	/* Firecracker's own test_api.py bodies (Python's json.dumps) and the
	 * texts it matches; serde_json reports the end of the object. */
	expect_fault(400, "PUT", "/machine-config", "{\"mem_size_mib\": 128}",
		     FCAPI_DESER "missing field `vcpu_count` at line 1 column 21.");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\": 2}", "missing field `mem_size_mib` at line 1 column 17.");
	expect_fault(400, "PUT", "/machine-config", "{\"mem_size_mib\": 18446744073709551616}",
		     FCAPI_DESER "invalid type: floating point `18446744073709552000.0`, expected usize at line 1 column 37.");
	/* Firecracker's parser unit tests: lines and columns over newlines. */
	expect_fault(400, "PUT", "/snapshot/load", "{\n            \"snapshot_path\": \"foo\",\n            \"mem_backend\": {\n"
		     "                \"backend_path\": \"bar\"\n            }\n        }",
		     FCAPI_DESER "missing field `backend_type` at line 5 column 13.");
	expect_fault(400, "PUT", "/snapshot/load", "{\n            \"mem_backend\": {\n                \"backend_path\": \"bar\",\n"
		     "                \"backend_type\": \"Uffd\"\n            }\n        }",
		     FCAPI_DESER "missing field `snapshot_path` at line 6 column 9.");
}

static void route_machine_config(void **state)
{
	(void)state;
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_non_null(strstr(out, "\"vcpu_count\":1,\"mem_size_mib\":128"));
	assert_int_equal(req("PUT", "/machine-config", "{\"vcpu_count\":2,\"mem_size_mib\":256,\"smt\":false,"
			     "\"track_dirty_pages\":false,\"cpu_template\":\"None\",\"huge_pages\":null}"), 204);
	assert_int_equal(out_len, 0);
	assert_int_equal(req("PATCH", "/machine-config", "{\"mem_size_mib\":512}"), 204);
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_non_null(strstr(out, "\"vcpu_count\":2,\"mem_size_mib\":512"));
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":0,\"mem_size_mib\":64}", "must be greater than 0");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":65,\"mem_size_mib\":64}", "must be greater than 0");
	/* Firecracker's MachineConfigError for 0, PUT and PATCH. */
	expect_fault(400, "PATCH", "/machine-config", "{\"mem_size_mib\":0}",
		     "The memory size (MiB) is either 0, or not a multiple of the configured page size.");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":8}", "mem_size_mib");
	/* SMT: 1 or an even number of vCPUs (Firecracker's rule). */
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":3,\"mem_size_mib\":64,\"smt\":true}",
		     "1 or an even number if SMT");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64,\"cpu_template\":\"X3\"}",
		     "unknown variant `X3`, expected one of `C3`, `T2`, `T2S`, `None`, `T2CL`, `T2A`");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64,\"huge_pages\":\"2M\"}",
		     "huge_pages");
	/* Refused requests changed nothing. */
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_non_null(strstr(out, "\"vcpu_count\":2,\"mem_size_mib\":512"));
	assert_false(api.deprecated);
	assert_int_equal(req("PATCH", "/machine-config", "{\"cpu_template\":\"safe\"}"), 204);
	assert_true(api.deprecated); /* answered with Deprecation: true */
	assert_true(api.cfg.tmpl_set);
	/* GET shows no template outside Firecracker's enum. */
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_null(strstr(out, "cpu_template"));
	assert_false(api.deprecated);
	assert_non_null(strstr(out, "\"smt\":false,\"track_dirty_pages\":false"));
	/* smt and track_dirty_pages are taken and recorded. */
	assert_int_equal(req("PATCH", "/machine-config", "{\"smt\":true,\"track_dirty_pages\":true}"), 204);
	expect_fault(400, "PATCH", "/machine-config", "{\"vcpu_count\":3}", "SMT");
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_non_null(strstr(out, "\"smt\":true,\"track_dirty_pages\":true"));
	assert_int_equal(req("PATCH", "/machine-config", "{\"smt\":false,\"track_dirty_pages\":false}"), 204);
}

static void route_boot_source(void **state)
{
	char body[512];

	(void)state;
	expect_fault(400, "PUT", "/boot-source", "{}", "missing field `kernel_image_path` at line 1 column 2.");
	expect_fault(400, "PUT", "/boot-source", "{\"kernel_image_path\":\"relative\"}",
		     "The kernel file cannot be opened: No such file or directory (os error 2)");
	expect_fault(400, "PUT", "/boot-source", "{\"kernel_image_path\":\"\"}", "must not be empty");
	expect_fault(400, "PUT", "/boot-source", "{\"kernel_image_path\":\"/nonexistent/k\"}", "No such file");
	expect_fault(400, "PUT", "/boot-source", "{\"kernel_image_path\":\"/tmp\"}", "not a regular file");
	snprintf(body, sizeof(body), "{\"kernel_image_path\":\"%s\",\"initrd_path\":\"/nonexistent\"}", kernel);
	expect_fault(400, "PUT", "/boot-source", body, "The initrd file cannot be opened");
	snprintf(body, sizeof(body), "{\"kernel_image_path\":\"%s\",\"boot_args\":7}", kernel);
	expect_fault(400, "PUT", "/boot-source", body, "invalid type: integer `7`, expected a string");
	/* InstanceStart needs a kernel. */
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", "kernel");
	/* A relative path is relative to the VMM's working directory. */
	{
		char cwd[4096];

		assert_non_null(getcwd(cwd, sizeof(cwd)));
		assert_int_equal(chdir("/tmp"), 0);
		snprintf(body, sizeof(body), "{\"kernel_image_path\":\"%s\",\"boot_args\":\"console=ttyS0 quiet\"}",
			 kernel + strlen("/tmp/"));
		assert_int_equal(req("PUT", "/boot-source", body), 204);
		assert_int_equal(chdir(cwd), 0);
		assert_string_equal(api.cfg.kernel, kernel);
	}
	assert_true(api.cfg.has_boot);
	assert_string_equal(api.cfg.boot_args, "console=ttyS0 quiet");
}

static void route_drives(void **state)
{
	char body[512];

	(void)state;
	snprintf(body, sizeof(body), "{\"drive_id\":\"rootfs\",\"path_on_host\":\"%s\",\"is_root_device\":true}", disk);
	assert_int_equal(req("PUT", "/drives/rootfs", body), 204);
	expect_fault(400, "PUT", "/drives/other", body, "does not match");
	snprintf(body, sizeof(body), "{\"drive_id\":\"data\",\"path_on_host\":\"%s\",\"is_root_device\":true}", disk);
	expect_fault(400, "PUT", "/drives/data", body, "root block device already exists");
	snprintf(body, sizeof(body), "{\"drive_id\":\"data\",\"path_on_host\":\"%s\",\"is_root_device\":false,"
		 "\"is_read_only\":true,\"cache_type\":\"Writeback\",\"io_engine\":\"Sync\",\"rate_limiter\":null,"
		 "\"partuuid\":\"\"}", disk);
	assert_int_equal(req("PUT", "/drives/data", body), 204);
	assert_int_equal(api.cfg.nr_drives, 2);
	/* The same id again replaces it. */
	assert_int_equal(req("PUT", "/drives/data", body), 204);
	assert_int_equal(api.cfg.nr_drives, 2);
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/nonexistent\",\"is_root_device\":false}",
		     "No such file");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"is_root_device\":false}", "path_on_host");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\"}", "is_root_device");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":\"yes\"}",
		     "invalid type: string \\\"yes\\\", expected a boolean");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"partuuid\":\"abc\"}", "partuuid");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"io_engine\":\"Async\"}", "io_engine");
	/* Firecracker's RateLimiter: size tokens per refill_time ms, a bucket
	 * of size; an empty limiter, or size/refill_time 0, is no limit. */
	snprintf(body, sizeof(body), "{\"drive_id\":\"data\",\"path_on_host\":\"%s\",\"is_root_device\":false,"
		 "\"is_read_only\":true,\"rate_limiter\":{\"bandwidth\":{\"size\":1048576,\"refill_time\":100},"
		 "\"ops\":{\"size\":50,\"one_time_burst\":0,\"refill_time\":1000}}}", disk);
	assert_int_equal(req("PUT", "/drives/data", body), 204);
	assert_int_equal(api.cfg.drives[1].rl.bytes_per_s, 10485760);
	assert_int_equal(api.cfg.drives[1].rl.bytes_burst, 1048576);
	assert_int_equal(api.cfg.drives[1].rl.ops_per_s, 50);
	assert_int_equal(api.cfg.drives[1].rl.ops_burst, 50);
	snprintf(body, sizeof(body), "{\"drive_id\":\"data\",\"path_on_host\":\"%s\",\"is_root_device\":false,"
		 "\"is_read_only\":true,\"rate_limiter\":{\"bandwidth\":{\"size\":0,\"refill_time\":100}}}", disk);
	assert_int_equal(req("PUT", "/drives/data", body), 204);
	assert_int_equal(api.cfg.drives[1].rl.bytes_per_s, 0);
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"rate_limiter\":{\"bandwidth\":{\"size\":10}}}", "missing field `refill_time` at line 1 column 98.");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"rate_limiter\":{\"bytes\":{}}}", "unknown field `bytes`, expected `bandwidth` or `ops`");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"rate_limiter\":{\"ops\":{\"size\":10,\"one_time_burst\":5,\"refill_time\":10}}}",
		     "one_time_burst");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"rate_limiter\":{\"ops\":{\"size\":-1,\"refill_time\":10}}}",
		     "invalid value: integer `-1`, expected u64");
	expect_fault(400, "PUT", "/drives/a.b", "{\"drive_id\":\"a.b\",\"path_on_host\":\"/x\",\"is_root_device\":false}",
		     "drive_id");
	expect_fault(400, "PUT", "/drives/abcdefghijklmnopqrstu",
		     "{\"drive_id\":\"abcdefghijklmnopqrstu\",\"path_on_host\":\"/x\",\"is_root_device\":false}", "drive_id");
}

static void route_vsock_net_fs(void **state)
{
	(void)state;
	assert_int_equal(req("PUT", "/vsock", "{\"guest_cid\":3,\"uds_path\":\"/tmp/v.sock\",\"vsock_id\":\"vsock0\"}"), 204);
	assert_int_equal(api.cfg.cid, 3);
	expect_fault(400, "PUT", "/vsock", "{\"guest_cid\":2,\"uds_path\":\"/tmp/v.sock\"}", "guest_cid");
	expect_fault(400, "PUT", "/vsock", "{\"guest_cid\":4294967295,\"uds_path\":\"/tmp/v.sock\"}", "guest_cid");
	expect_fault(400, "PUT", "/vsock", "{\"guest_cid\":3}", "uds_path");
	expect_fault(400, "PUT", "/network-interfaces/eth0", "{\"iface_id\":\"eth0\"}", "host_dev_name");
	expect_fault(400, "PUT", "/network-interfaces/eth0",
		     "{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap0\",\"guest_mac\":\"zz\"}", "guest_mac");
	expect_fault(400, "PUT", "/network-interfaces/eth0",
		     "{\"iface_id\":\"eth1\",\"host_dev_name\":\"tap0\"}", "does not match");
	expect_fault(400, "PUT", "/network-interfaces/eth0",
		     "{\"iface_id\":\"eth0\",\"host_dev_name\":\"a-very-long-tap-name\"}", "host_dev_name");
	expect_fault(400, "PUT", "/network-interfaces/eth0",
		     "{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap0\",\"guest_mac\":\"01:00:5e:00:00:01\"}",
		     "unicast");
	expect_fault(400, "PUT", "/network-interfaces/eth0",
		     "{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap0\",\"rx_rate_limiter\":{\"ops\":1}}",
		     "invalid type: integer `1`, expected a map");
	assert_int_equal(req("PUT", "/network-interfaces/eth0",
			     "{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap0\",\"guest_mac\":\"06:00:AC:10:00:02\"}"), 204);
	assert_int_equal(req("PUT", "/network-interfaces/eth1",
			     "{\"iface_id\":\"eth1\",\"host_dev_name\":\"tap1\",\"rx_rate_limiter\":{\"bandwidth\":"
			     "{\"size\":125000,\"refill_time\":1000}},\"tx_rate_limiter\":{\"ops\":{\"size\":10,"
			     "\"refill_time\":10}}}"), 204);
	assert_int_equal(api.cfg.nr_net, 2);
	assert_int_equal(api.cfg.net[1].rx.bytes_per_s, 125000);
	assert_int_equal(api.cfg.net[1].tx.ops_per_s, 1000);
	assert_int_equal(api.cfg.net[1].tx.ops_burst, 10);
	assert_int_equal(api.cfg.net[0].rx.bytes_per_s, 0);
	expect_fault(400, "PUT", "/fs/share", "{\"tag\":\"share\"}", "path_on_host");
	expect_fault(400, "PUT", "/fs/share", "{\"tag\":\"share\",\"path_on_host\":\"/nonexistent\"}", "not a directory");
	expect_fault(400, "PUT", "/fs/share", "{\"fs_id\":\"other\",\"tag\":\"share\",\"path_on_host\":\"/tmp\"}",
		     "does not match");
	expect_fault(400, "PUT", "/fs/share", "{\"tag\":\"\",\"path_on_host\":\"/tmp\"}", "tag");
	expect_fault(400, "PUT", "/fs/share", "{\"tag\":\"a/b\",\"path_on_host\":\"/tmp\"}", "tag");
	assert_int_equal(req("PUT", "/fs/share", "{\"tag\":\"share\",\"path_on_host\":\"/tmp\",\"read_only\":true}"), 204);
	expect_fault(400, "PUT", "/fs/other", "{\"tag\":\"share\",\"path_on_host\":\"/tmp\"}", "taken");
	assert_int_equal(req("PUT", "/fs/share", "{\"fs_id\":\"share\",\"tag\":\"share\",\"path_on_host\":\"/\"}"), 204);
	assert_int_equal(api.cfg.nr_fs, 1);
}

static void route_preboot_state_rules(void **state)
{
	(void)state;
	expect_fault(400, "PATCH", "/vm", "{\"state\":\"Paused\"}", "before starting");
	expect_fault(400, "PATCH", "/vm", "{\"state\":\"Stopped\"}", "Paused or Resumed");
	expect_fault(400, "PUT", "/snapshot/create", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/tmp/s/memory\"}",
		     "before starting");
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"SendCtrlAltDel\"}", "before starting");
	/* Firecracker: 204 whether or not metrics are configured. */
	assert_int_equal(req("PUT", "/actions", "{\"action_type\":\"FlushMetrics\"}"), 204);
	expect_fault(400, "PATCH", "/drives/rootfs", "{\"drive_id\":\"rootfs\",\"path_on_host\":\"/x\"}", "before starting");
	expect_fault(400, "PATCH", "/drives/rootfs", "{\"drive_id\":\"other\",\"path_on_host\":\"/x\"}", "does not match");
	expect_fault(400, "PATCH", "/drives/rootfs", "{\"drive_id\":\"rootfs\",\"is_read_only\":true}",
		     "unknown field `is_read_only`, expected one of `drive_id`, `path_on_host`, `rate_limiter` at line 1 "
		     "column 35.");
	expect_fault(400, "PATCH", "/network-interfaces/eth0", "{\"iface_id\":\"eth0\",\"rx_rate_limiter\":{}}",
		     "before starting");
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"Reboot\"}", "unknown 'action_type'");
	expect_fault(400, "PUT", "/actions", "{}", "action_type");
	/* Configured already: no snapshot load. */
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/tmp/s/memory\"}",
		     "not allowed after configuring");
	assert_false(api.load_failed); /* Firecracker serves on after this one too */
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\"}", "missing field: either");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/a\","
		     "\"mem_backend\":{\"backend_path\":\"/a\",\"backend_type\":\"File\"}}", "too many fields");
	/* Uffd parses (vmm/base/uffd.h) and meets the same pre-boot rule. */
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\","
		     "\"mem_backend\":{\"backend_path\":\"/a\",\"backend_type\":\"Uffd\"}}",
		     "not allowed after configuring");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\","
		     "\"mem_backend\":{\"backend_path\":\"/a\",\"backend_type\":\"foo\"}}", "unknown variant");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/a\","
		     "\"network_overrides\":{}}", "invalid type: map, expected a sequence");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\","
		     "\"mem_backend\":{\"backend_path\":\"/a\"}}", "missing field `backend_type`");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\","
		     "\"mem_backend\":{\"backend_type\":\"File\"}}", "missing field `backend_path`");
	expect_fault(400, "PUT", "/snapshot/load", "{\"mem_backend\":{\"backend_type\":\"File\",\"backend_path\":\"x\"}}",
		     "missing field `snapshot_path`");
	/* InstanceStart: deferred to the caller, then answered. */
	assert_int_equal(req("PUT", "/actions", "{\"action_type\":\"InstanceStart\"}"), 0);
	assert_int_equal(api.pending, FCAPI_START);
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", "being started");
	assert_int_equal(fcapi_finish(&api, NULL, out, sizeof(out), &out_len), 204);
	assert_int_equal(api.pending, FCAPI_NONE);
}

static void route_vm_config(void **state)
{
	struct vm_config cfg;
	char why[128];

	(void)state;
	memset(&cfg, 0, sizeof(cfg));
	assert_int_equal(fcapi_vm_config(&api, &cfg, why, sizeof(why)), 0);
	assert_string_equal(cfg.kernel, kernel);
	assert_null(cfg.initrd);
	assert_int_equal(cfg.cpus, 2);
	assert_int_equal(cfg.mem_bytes, 512ull << 20);
	assert_int_equal(cfg.nr_disks, 2);
	assert_true(cfg.disks[0].root); /* the root drive is /dev/vda */
	assert_string_equal(cfg.disks[0].id, "rootfs");
	assert_true(cfg.disks[1].ro);
	assert_true(cfg.has_vsock);
	assert_string_equal(cfg.vsock.uds, "/tmp/v.sock");
	assert_int_equal(cfg.nr_nets, 2);
	assert_string_equal(cfg.nets[0].tap, "tap0");
	assert_true(cfg.nets[0].has_mac);
	assert_int_equal(cfg.nets[0].mac[5], 2);
	assert_string_equal(cfg.nets[1].tap, "tap1");
	/* The rate limiters reach the devices' options. */
	assert_int_equal(cfg.nets[1].rx.bytes_per_s, 125000);
	assert_int_equal(cfg.nets[1].tx.ops_per_s, 1000);
	assert_int_equal(cfg.nets[1].tx.ops_burst, 10);
	assert_int_equal(cfg.nr_fs, 1);
	assert_string_equal(cfg.fs[0].tag, "share");
	assert_string_equal(cfg.fs[0].path, "/");
	assert_false(cfg.fs[0].ro);
	while (cfg.nr_disks)
		blk_options_free(&cfg.disks[--cfg.nr_disks]);
	while (cfg.nr_fs)
		fs_options_free(&cfg.fs[--cfg.nr_fs]);
}

/* The launcher's drive resolver, made up: drive "work" allows only sandbox
 * "alice", read-write, with a 1 MiB limit; anything else is refused in
 * drive_allowed's words. */
static int fake_resolve(void *ctx, struct fcapi_fs *fs, char *why, size_t len)
{
	const char *who = ctx;

	if (strcmp(fs->drive, "work")) {
		snprintf(why, len, "no drive %s (vmm drive create %s)", fs->drive, fs->drive);
		return -ENOENT;
	}
	if (strcmp(who, "alice")) {
		snprintf(why, len, "drive work does not allow sandbox %s (not on its allow list; vmm drive allow work %s)",
			 who, who);
		return -EACCES;
	}
	snprintf(fs->path, sizeof(fs->path), "/srv/drives/work/data");
	if (!fs->at[0])
		snprintf(fs->at, sizeof(fs->at), "/drives/work");
	fs->limit = 1 << 20;
	snprintf(fs->usage, sizeof(fs->usage), "/srv/drives/work/usage");
	return 0;
}

/* PUT /fs {"drive": NAME}: through the launcher's resolver (the allow list
 * refuses with a 400 in Firecracker's style, nothing stored), the drive's
 * folder, limit and count reach the VM's options, GET /vm/config names the
 * drive, not its folder. */
static void route_fs_drive(void **state)
{
	struct vm_config cfg;
	char why[128];

	(void)state;
	fcapi_init(&api, "drives");
	expect_fault(400, "PUT", "/fs/w", "{\"drive\":\"work\"}", "no drive store");
	api.drive_resolve = fake_resolve;
	api.drive_ctx = (void *)"eve";
	expect_fault(400, "PUT", "/fs/w", "{\"drive\":\"work\"}", "drive work does not allow sandbox eve");
	assert_int_equal(api.cfg.nr_fs, 0);
	api.drive_ctx = (void *)"alice";
	expect_fault(400, "PUT", "/fs/w", "{\"drive\":\"nosuch\"}", "no drive nosuch");
	expect_fault(400, "PUT", "/fs/w", "{\"drive\":\"work\",\"path_on_host\":\"/tmp\"}", "not both");
	expect_fault(400, "PUT", "/fs/w", "{\"drive\":\"a/b\"}", "'drive'");
	expect_fault(400, "PUT", "/fs/w", "{\"drive\":\"work\",\"mount_point\":\"rel\"}", "mount_point");
	expect_fault(400, "PUT", "/fs/w", "{\"drive\":\"work\",\"mount_point\":\"/a/../b\"}", "mount_point");
	expect_fault(400, "PUT", "/fs/w", "{\"tag\":\"t\",\"path_on_host\":\"/tmp\",\"mount_point\":\"/x\"}",
		     "for a 'drive'");
	expect_fault(400, "PUT", "/fs/w", "{\"drive\":\"work\",\"size\":1}", "unknown field `size`");
	assert_int_equal(api.cfg.nr_fs, 0);
	/* the tag is the drive's name unless given */
	assert_int_equal(req("PUT", "/fs/w", "{\"drive\":\"work\",\"mount_point\":\"/work\"}"), 204);
	assert_int_equal(api.cfg.nr_fs, 1);
	assert_string_equal(api.cfg.fs[0].tag, "work");
	assert_string_equal(api.cfg.fs[0].at, "/work");
	expect_fault(400, "PUT", "/fs/other", "{\"drive\":\"work\"}", "tag work is taken");
	assert_int_equal(req("PUT", "/fs/share", "{\"tag\":\"share\",\"path_on_host\":\"/tmp\"}"), 204);
	assert_int_equal(req("GET", "/vm/config", NULL), 200);
	assert_non_null(strstr(out, "{\"fs_id\":\"w\",\"tag\":\"work\",\"drive\":\"work\",\"mount_point\":\"/work\""));
	assert_null(strstr(out, "/srv/drives"));
	assert_int_equal(req("PUT", "/boot-source", "{\"kernel_image_path\":\"/bin/sh\"}"), 204);
	memset(&cfg, 0, sizeof(cfg));
	assert_int_equal(fcapi_vm_config(&api, &cfg, why, sizeof(why)), 0);
	assert_int_equal(cfg.nr_fs, 2);
	assert_string_equal(cfg.fs[0].path, "/srv/drives/work/data");
	assert_string_equal(cfg.fs[0].at, "/work");
	assert_int_equal(cfg.fs[0].limit, 1 << 20);
	assert_string_equal(cfg.fs[0].usage, "/srv/drives/work/usage");
	/* a host folder has none of that */
	assert_null(cfg.fs[1].at);
	assert_null(cfg.fs[1].usage);
	assert_int_equal(cfg.fs[1].limit, 0);
	while (cfg.nr_fs)
		fs_options_free(&cfg.fs[--cfg.nr_fs]);
}

/* Firecracker's static templates by name: the masks stand in the custom
 * template's slot, GET names them, and the start is refused on a host of
 * the other vendor in Firecracker's words (C3/T2/T2S/T2CL Intel, T2A AMD). */
static void vm_config_for(const char *tmpl, int want_ok)
{
	struct vm_config cfg;
	char why[256], body[64];

	snprintf(body, sizeof(body), "{\"cpu_template\":\"%s\"}", tmpl);
	assert_int_equal(req("PATCH", "/machine-config", body), 204);
	assert_true(api.cfg.has_cpu_tmpl);
	assert_false(api.cfg.tmpl_set);
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	snprintf(body, sizeof(body), "\"cpu_template\":\"%s\"", tmpl);
	assert_non_null(strstr(out, body));
	memset(&cfg, 0, sizeof(cfg));
	why[0] = '\0';
	if (!want_ok) {
		assert_int_equal(fcapi_vm_config(&api, &cfg, why, sizeof(why)), -EINVAL);
		assert_string_equal(why, "Start microvm error: Failed to get CPU template: CPU vendor mismatched between "
				    "actual CPU and CPU template.");
		return;
	}
	assert_int_equal(fcapi_vm_config(&api, &cfg, why, sizeof(why)), 0);
	assert_ptr_equal(cfg.cpu_tmpl, &api.cfg.cpu_tmpl);
	while (cfg.nr_disks)
		blk_options_free(&cfg.disks[--cfg.nr_disks]);
	while (cfg.nr_fs)
		fs_options_free(&cfg.fs[--cfg.nr_fs]);
}

static void route_static_cpu_template(void **state)
{
	int amd = cpu_host_amd();

	(void)state;
	vm_config_for("C3", !amd);
	assert_int_equal(api.cfg.cpu_tmpl.nr_leaves, 5);
	vm_config_for("T2", !amd);
	vm_config_for("T2S", !amd);
	assert_int_equal(api.cfg.cpu_tmpl.nr_msrs, 1);
	assert_int_equal(api.cfg.cpu_tmpl.msrs[0].addr, 0x10a);
	vm_config_for("T2CL", !amd);
	vm_config_for("T2A", amd);
	assert_int_equal(api.cfg.cpu_tmpl.nr_leaves, 6);
	assert_int_equal(api.cfg.cpu_tmpl.nr_msrs, 0);
	/* None takes it away again. */
	assert_int_equal(req("PATCH", "/machine-config", "{\"cpu_template\":\"None\"}"), 204);
	assert_false(api.cfg.has_cpu_tmpl);
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_null(strstr(out, "cpu_template"));
}

/* After InstanceStart: a VM exists (a stand-in: only the state is read). */
static void route_postboot_state_rules(void **state)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	char body[256];

	(void)state;
	assert_non_null(vm);
	vm->nr_vcpus = 2;
	vm->cfg.mem_bytes = 512ull << 20;
	api.vm = vm;
	assert_int_equal(req("GET", "/", NULL), 200);
	assert_non_null(strstr(out, "\"state\":\"Running\""));
	snprintf(body, sizeof(body), "{\"kernel_image_path\":\"%s\"}", kernel);
	expect_fault(400, "PUT", "/boot-source", body, "after starting");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64}", "after starting");
	expect_fault(400, "PUT", "/vsock", "{\"guest_cid\":3,\"uds_path\":\"/tmp/v.sock\"}", "after starting");
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", "after starting");
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"SendCtrlAltDel\"}", "no vsock device");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/tmp/s/memory\"}",
		     "not allowed");
	expect_fault(400, "PUT", "/snapshot/create", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/tmp/s/memory\"}",
		     "paused");
	expect_fault(400, "PUT", "/snapshot/create", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/tmp/s/memory\","
		     "\"snapshot_type\":\"Diff\"}", "paused");
	expect_fault(400, "PUT", "/snapshot/create", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/tmp/s/memory\","
		     "\"snapshot_type\":\"Incremental\"}", "Full or Diff");
	vm->paused = 1;
	assert_int_equal(req("GET", "/", NULL), 200);
	assert_non_null(strstr(out, "\"state\":\"Paused\""));
	expect_fault(400, "PUT", "/snapshot/create", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/tmp/s/memory\","
		     "\"snapshot_type\":\"Diff\"}", "dirty page tracking");
	/* Overwrites an earlier snapshot, never anything else. */
	expect_fault(400, "PUT", "/snapshot/create", "{\"snapshot_path\":\"/tmp\",\"mem_file_path\":\"/tmp/memory\"}",
		     "is not a snapshot");
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_non_null(strstr(out, "\"vcpu_count\":2,\"mem_size_mib\":512"));
	api.vm = NULL;
	free(vm);
}

static void config_file(void **state)
{
	struct fcapi a;
	char text[1024], why[256];

	(void)state;
	fcapi_init(&a, "cf");
	snprintf(text, sizeof(text),
		 "{\"boot-source\":{\"kernel_image_path\":\"%s\",\"boot_args\":\"console=ttyS0\"},"
		 "\"drives\":[{\"drive_id\":\"rootfs\",\"path_on_host\":\"%s\",\"is_root_device\":true,"
		 "\"is_read_only\":false}],\"machine-config\":{\"vcpu_count\":2,\"mem_size_mib\":64},"
		 "\"network-interfaces\":[],\"vsock\":null}", kernel, disk);
	assert_int_equal(fcapi_apply_config_file(&a, text, strlen(text), why, sizeof(why)), 0);
	assert_int_equal(a.cfg.vcpus, 2);
	assert_int_equal(a.cfg.nr_drives, 1);
	fcapi_init(&a, "cf");
	assert_int_equal(fcapi_apply_config_file(&a, "{\"balloon\":{}}", 14, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "balloon"));
	/* Firecracker's example configuration: null sections, a logger. */
	fcapi_init(&a, "cf");
	snprintf(text, sizeof(text),
		 "{\"boot-source\":{\"kernel_image_path\":\"%s\"},\"drives\":null,\"cpu-config\":null,"
		 "\"balloon\":null,\"logger\":{\"level\":\"Info\",\"show_level\":false},\"metrics\":null,"
		 "\"machine-config\":{\"vcpu_count\":2.0,\"mem_size_mib\":64}}", kernel);
	assert_int_equal(fcapi_apply_config_file(&a, text, strlen(text), why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "invalid type: floating point `2.0`, expected u8"));
	fcapi_init(&a, "cf");
	snprintf(text, sizeof(text),
		 "{\"boot-source\":{\"kernel_image_path\":\"%s\"},\"drives\":null,\"cpu-config\":null,"
		 "\"balloon\":null,\"logger\":{\"level\":\"Info\",\"show_level\":false},\"metrics\":null,"
		 "\"machine-config\":{\"vcpu_count\":2,\"mem_size_mib\":64}}", kernel);
	assert_int_equal(fcapi_apply_config_file(&a, text, strlen(text), why, sizeof(why)), 0);
	assert_true(a.cfg.logger.set);
	fcapi_close(&a);
	fcapi_init(&a, "cf");
	assert_int_equal(fcapi_apply_config_file(&a, "{\"machine-config\":{\"vcpu_count\":1}}", 35, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "machine-config: " FCAPI_DESER "missing field `mem_size_mib`"));
	fcapi_init(&a, "cf");
	assert_int_equal(fcapi_apply_config_file(&a, "{}", 2, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "boot-source"));
	assert_int_equal(fcapi_apply_config_file(&a, "{\"drives\":{}}", 13, why, sizeof(why)), -EINVAL);
	assert_int_equal(fcapi_apply_config_file(&a, "nope", 4, why, sizeof(why)), -EINVAL);
}

/* PUT /logger: vmm's log lines go to the file in Firecracker's shape;
 * PUT /metrics: JSON lines, one on FlushMetrics; both once (metrics) and
 * only before boot. */
static void route_logger_metrics(void **state)
{
	char body[512], log_path[64], met_path[64], buf[4096];
	struct fcapi a;
	ssize_t n;
	int fd;

	(void)state;
	fcapi_init(&a, "lm");
	snprintf(log_path, sizeof(log_path), "/tmp/vmm-test-http-log.%d", (int)getpid());
	snprintf(met_path, sizeof(met_path), "/tmp/vmm-test-http-met.%d", (int)getpid());
	unlink(log_path);
	unlink(met_path);
	{
		struct fcapi saved = api;

		api = a;
		expect_fault(400, "PUT", "/logger", "{\"level\":\"Loud\"}", "Invalid value for logger level");
		expect_fault(400, "PUT", "/logger", "{\"log_path\":\"/nonexistent/dir/log\"}", "Failed to open");
		expect_fault(400, "PUT", "/logger", "{\"show_level\":1}", "boolean");
		snprintf(body, sizeof(body), "{\"log_path\":\"%s\",\"level\":\"Warning\",\"show_level\":true,"
			 "\"show_log_origin\":true}", log_path);
		assert_int_equal(req("PUT", "/logger", body), 204);
		log_warn("a line for the logger %d", 42);
		log_info("below the level");
		expect_fault(400, "PUT", "/metrics", "{}", "metrics_path");
		snprintf(body, sizeof(body), "{\"metrics_path\":\"%s\"}", met_path);
		assert_int_equal(req("PUT", "/metrics", body), 204);
		expect_fault(400, "PUT", "/metrics", body, "Reinitialization of metrics not allowed");
		assert_int_equal(req("PUT", "/actions", "{\"action_type\":\"FlushMetrics\"}"), 204);
		assert_int_equal(req("GET", "/vm/config", NULL), 200);
		assert_non_null(strstr(out, "\"logger\":{\"log_path\":\""));
		assert_non_null(strstr(out, "\"level\":\"Warning\",\"show_level\":true,\"show_log_origin\":true"));
		assert_non_null(strstr(out, "\"metrics\":{\"metrics_path\":\""));
		a = api;
		api = saved;
	}
	fcapi_close(&a); /* a last metrics line, the log back to stderr */
	log_set_level(LOG_INFO);
	fd = open(log_path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	/* "TIME [ID:THREAD:LEVEL:FILE:LINE] message" */
	assert_non_null(strstr(buf, " [lm:"));
	assert_non_null(strstr(buf, ":WARN:tests/unit/vmm/api/test_http.c:"));
	assert_non_null(strstr(buf, "] a line for the logger 42\n"));
	assert_null(strstr(buf, "below the level"));
	fd = open(met_path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	/* Two lines (FlushMetrics, close), each a JSON object; counters are
	 * what happened since the line before. */
	assert_non_null(strstr(buf, "{\"utc_timestamp_ms\":"));
	assert_non_null(strstr(buf, "\"put_api_requests\":{\"actions_count\":0,"));
	assert_non_null(strstr(buf, "\"logger_count\":4,\"logger_fails\":3,"));
	assert_non_null(strstr(buf, "\"metrics_count\":3,\"metrics_fails\":2"));
	assert_non_null(strchr(strchr(buf, '\n') + 1, '\n'));
	assert_non_null(strstr(strchr(buf, '\n'), "\"actions_count\":1,"));
	unlink(log_path);
	unlink(met_path);
}

/* GET /vm/config: the configuration in --config-file's shape, which
 * --config-file takes back. */
static void route_get_vm_config(void **state)
{
	struct fcapi b;
	char why[256];
	char *copy;

	(void)state;
	assert_int_equal(req("GET", "/vm/config", NULL), 200);
	assert_non_null(strstr(out, "\"boot-source\":{\"kernel_image_path\":\""));
	assert_non_null(strstr(out, "\"drives\":[{\"drive_id\":\"rootfs\""));
	assert_non_null(strstr(out, "\"machine-config\":{\"vcpu_count\":2,\"mem_size_mib\":512"));
	assert_non_null(strstr(out, "\"network-interfaces\":[{\"iface_id\":\"eth0\""));
	assert_non_null(strstr(out, "\"rx_rate_limiter\":{\"bandwidth\":{\"size\":125000,\"refill_time\":1000}}"));
	assert_non_null(strstr(out, "\"vsock\":{\"guest_cid\":3,\"uds_path\":\"/tmp/v.sock\"}"));
	assert_null(strstr(out, "cpu_template"));
	/* Round trip (the TAP checks need no TAP: they parse names). */
	copy = strdup(out);
	assert_non_null(copy);
	expect_fault(400, "GET", "/vm/config", "{}", "GET request cannot have a body");
	fcapi_init(&b, "rt");
	if (fcapi_apply_config_file(&b, copy, strlen(copy), why, sizeof(why)))
		fail_msg("%s: %s", copy, why);
	assert_int_equal(b.cfg.nr_drives, api.cfg.nr_drives);
	assert_int_equal(b.cfg.nr_net, api.cfg.nr_net);
	assert_int_equal(b.cfg.net[1].rx.bytes_per_s, 125000);
	free(copy);
}

static void route_duplicate_mac(void **state)
{
	(void)state;
	assert_int_equal(req("PUT", "/network-interfaces/eth0",
			     "{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap0\",\"guest_mac\":\"06:00:AC:10:00:02\"}"), 204);
	expect_fault(400, "PUT", "/network-interfaces/eth9",
		     "{\"iface_id\":\"eth9\",\"host_dev_name\":\"tap9\",\"guest_mac\":\"06:00:ac:10:00:02\"}",
		     "The MAC address is already in use");
	/* The same interface again may keep its MAC. */
	assert_int_equal(req("PUT", "/network-interfaces/eth0",
			     "{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap0\",\"guest_mac\":\"06:00:AC:10:00:02\"}"), 204);
	assert_int_equal(req("PUT", "/vsock", "{\"guest_cid\":3,\"uds_path\":\"/tmp/v.sock\",\"vsock_id\":\"v\"}"), 204);
	assert_true(api.deprecated);
	assert_int_equal(req("PUT", "/vsock", "{\"guest_cid\":3,\"uds_path\":\"/tmp/v.sock\"}"), 204);
	assert_false(api.deprecated);
}

/* PUT /snapshot/load on a fresh VMM: overrides, track_dirty_pages,
 * clock_realtime; a deprecated mem_file_path is answered Deprecation. */
static void route_snapshot_load_options(void **state)
{
	char dir[64], p[128], body[1024];
	struct fcapi saved = api;
	int fd;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/vmm-test-http-snap.%d", (int)getpid());
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(p, sizeof(p), "%s/state", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/memory", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	fcapi_init(&api, "load");
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\",\"mem_backend\":{\"backend_type\":\"File\",\"backend_path\":"
		 "\"%s\"},\"network_overrides\":[{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap-a/b\"}]}", dir, p);
	expect_fault(400, "PUT", "/snapshot/load", body, "host_dev_name");
	assert_true(api.load_failed); /* well-formed, refused: vmm serve exits */
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\",\"mem_backend\":{\"backend_type\":\"File\",\"backend_path\":"
		 "\"%s\"},\"network_overrides\":[{\"iface_id\":\"eth0\"}]}", dir, p);
	expect_fault(400, "PUT", "/snapshot/load", body, "missing field `host_dev_name`");
	assert_false(api.load_failed); /* serde's refusal: the API serves on */
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\",\"mem_backend\":{\"backend_type\":\"File\",\"backend_path\":"
		 "\"%s\"},\"vsock_override\":{\"uds_path\":\"\"}}", dir, p);
	expect_fault(400, "PUT", "/snapshot/load", body, "vsock_override");
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\",\"mem_backend\":{\"backend_type\":\"File\",\"backend_path\":"
		 "\"%s\"},\"track_dirty_pages\":true,\"resume_vm\":true,\"clock_realtime\":true,\"network_overrides\":"
		 "[{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap7\"},{\"iface_id\":\"net2\",\"host_dev_name\":\"tap8\"}],"
		 "\"vsock_override\":{\"uds_path\":\"/tmp/new.sock\"}}", dir, p);
	assert_int_equal(req("PUT", "/snapshot/load", body), 0);
	assert_int_equal(api.pending, FCAPI_LOAD);
	assert_false(api.deprecated);
	assert_true(api.load_resume);
	assert_true(api.load_clock_realtime);
	assert_true(api.cfg.track_dirty_pages);
	assert_int_equal(api.nr_load_net, 2);
	assert_string_equal(api.load_net[1].iface_id, "net2");
	assert_string_equal(api.load_net[1].host_dev, "tap8");
	assert_string_equal(api.load_vsock_uds, "/tmp/new.sock");
	assert_int_equal(fcapi_finish(&api, NULL, out, sizeof(out), &out_len), 204);
	/* Relative paths and the deprecated mem_file_path. */
	fcapi_init(&api, "load");
	{
		char cwd[4096];

		assert_non_null(getcwd(cwd, sizeof(cwd)));
		assert_int_equal(chdir("/tmp"), 0);
		snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\",\"mem_file_path\":\"%s/memory\"}",
			 dir + 5, dir + 5);
		assert_int_equal(req("PUT", "/snapshot/load", body), 0);
		assert_int_equal(chdir(cwd), 0);
	}
	assert_true(api.deprecated);
	assert_string_equal(api.load_dir, dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/state", dir);
	unlink(p);
	rmdir(dir);
	api = saved;
}

/* PATCH /drives/{id} and /network-interfaces/{id} on a running VM: a real
 * virtio-blk device behind a stand-in VM takes the new file (its size
 * becomes the capacity, the config generation moves) and rate limiter. */
static void route_patch_running(void **state)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct blk_options o = { 0 };
	struct vqb b;
	char body[512], big[64];
	uint32_t gen;
	int fd;

	(void)state;
	assert_non_null(vm);
	assert_int_equal(vqb_init(&b, 16), 0);
	snprintf(big, sizeof(big), "/tmp/vmm-test-http-big.%d", (int)getpid());
	fd = open(big, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 2 << 20), 0);
	close(fd);
	vm->disks[0] = calloc(1, sizeof(struct virtio_blk));
	assert_non_null(vm->disks[0]);
	o.path = disk; /* empty */
	snprintf(o.id, sizeof(o.id), "rootfs");
	assert_int_equal(virtio_blk_init(vm->disks[0], &o, -1, &b.gm, 0xd0000000, 5, 0), 0);
	vm->cfg.nr_disks = 1;
	vm->nr_vcpus = 2;
	api.vm = vm;
	assert_int_equal(vm->disks[0]->capacity, 0);
	gen = vm->disks[0]->vdev.config_gen;
	expect_fault(400, "PATCH", "/drives/nope", "{\"drive_id\":\"nope\",\"path_on_host\":\"/x\"}", "Invalid block device ID");
	expect_fault(400, "PATCH", "/drives/rootfs", "{\"drive_id\":\"rootfs\",\"path_on_host\":\"/nonexistent\"}",
		     "No such file");
	assert_int_equal(vm->disks[0]->vdev.config_gen, gen); /* refused: unchanged */
	snprintf(body, sizeof(body), "{\"drive_id\":\"rootfs\",\"path_on_host\":\"%s\"}", big);
	assert_int_equal(req("PATCH", "/drives/rootfs", body), 204);
	assert_int_equal(vm->disks[0]->capacity, (2 << 20) / 512);
	assert_int_equal(le64toh(vm->disks[0]->config.capacity), (2 << 20) / 512);
	assert_true(vm->disks[0]->vdev.config_gen != gen);
	assert_string_equal(api.cfg.drives[0].path, big);
	/* The limiter alone; only the bucket given changes. */
	assert_int_equal(req("PATCH", "/drives/rootfs", "{\"drive_id\":\"rootfs\",\"rate_limiter\":{\"ops\":{\"size\":100,"
			     "\"refill_time\":1000}}}"), 204);
	assert_int_equal(vm->disks[0]->rl.ops.rate, 100);
	assert_int_equal(vm->disks[0]->rl.bytes.rate, 0);
	assert_true(vm->disks[0]->timer_fd >= 0);
	assert_int_equal(req("PATCH", "/drives/rootfs", "{\"drive_id\":\"rootfs\",\"rate_limiter\":{\"bandwidth\":{\"size\":1000,"
			     "\"refill_time\":100}}}"), 204);
	assert_int_equal(vm->disks[0]->rl.ops.rate, 100);
	assert_int_equal(vm->disks[0]->rl.bytes.rate, 10000);
	assert_int_equal(req("GET", "/vm/config", NULL), 200);
	assert_non_null(strstr(out, big));
	expect_fault(400, "PATCH", "/network-interfaces/eth0", "{\"iface_id\":\"eth0\",\"rx_rate_limiter\":{}}",
		     "Invalid network interface ID"); /* the stand-in has no net device */
	api.vm = NULL;
	virtio_blk_destroy(vm->disks[0]);
	free(vm->disks[0]);
	free(vm);
	vqb_destroy(&b);
	unlink(big);
}

/* The control socket's close leaves the Firecracker API state, and its
 * MMDS store, to control_free: a network device answers the guest's MMDS
 * requests from that store until vm_destroy stops it, which comes after
 * control_close. control_free frees it all (ASan's leak check sees the
 * store's JSON), and a second call does nothing. */
static void control_free_after_close(void **state)
{
	char dir[] = "/tmp/vmm-test-ctl-XXXXXX", path[64], why[128], *got;
	struct control c;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/control.sock", dir);
	assert_int_equal(control_open(&c, path, "t"), 0);
	assert_int_equal(mmds_put(&c.api->mmds, "{\"k\":\"v\"}", 9, why, sizeof(why)), 0);
	control_close(&c);
	assert_int_equal(access(path, F_OK), -1); /* the socket is gone */
	assert_non_null(c.api);
	got = mmds_get(&c.api->mmds);
	assert_non_null(got);
	assert_string_equal(got, "{\"k\":\"v\"}");
	free(got);
	control_free(&c);
	assert_null(c.api);
	assert_null(c.body);
	control_free(&c);
	assert_int_equal(rmdir(dir), 0);
}

/* PUT /entropy, the balloon's routes: Firecracker's bodies and pre-/post-
 * boot rules, the VM configuration they make, GET /vm/config. */
static void route_entropy_balloon(void **state)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct vm_config cfg;
	struct vqb b;
	char why[128];

	(void)state;
	fcapi_init(&api, "dev");
	assert_non_null(vm);
	/* Entropy: an optional rate_limiter, nothing else. */
	assert_int_equal(req("PUT", "/entropy", "{}"), 204);
	assert_true(api.cfg.has_entropy);
	assert_int_equal(req("PUT", "/entropy", "{\"rate_limiter\":{\"bandwidth\":{\"size\":1000,\"refill_time\":100}}}"),
			 204);
	assert_int_equal(api.cfg.entropy_rl.bytes_per_s, 10000);
	expect_fault(400, "PUT", "/entropy", "{\"rate\":1}", "unknown field `rate`, expected `rate_limiter`");
	expect_fault(400, "PUT", "/entropy", "{\"rate_limiter\":{\"bandwidth\":{\"size\":-1,\"refill_time\":1}}}",
		     "invalid value: integer `-1`, expected u64");
	/* Balloon: amount_mib and deflate_on_oom required, at most the guest's memory. */
	expect_fault(400, "PUT", "/balloon", "{\"amount_mib\":1}", "missing field `deflate_on_oom`");
	expect_fault(400, "PUT", "/balloon", "{\"amount_mib\":129,\"deflate_on_oom\":true}", "too large");
	expect_fault(400, "PUT", "/balloon", "{\"amount_mib\":1,\"deflate_on_oom\":true,\"free_page_hinting\":true}",
		     "free_page_hinting");
	expect_fault(400, "GET", "/balloon", NULL, "not configured");
	assert_int_equal(req("PUT", "/balloon", "{\"amount_mib\":16,\"deflate_on_oom\":true,"
			     "\"stats_polling_interval_s\":1,\"free_page_reporting\":true}"), 204);
	assert_int_equal(req("GET", "/balloon", NULL), 200);
	assert_non_null(strstr(out, "\"amount_mib\":16"));
	assert_non_null(strstr(out, "\"deflate_on_oom\":true"));
	assert_non_null(strstr(out, "\"stats_polling_interval_s\":1"));
	expect_fault(400, "PATCH", "/balloon", "{\"amount_mib\":8}", "before starting");
	expect_fault(400, "GET", "/balloon/statistics", NULL, "before starting");
	assert_int_equal(req("GET", "/vm/config", NULL), 200);
	assert_non_null(strstr(out, "\"balloon\":{\"amount_mib\":16"));
	assert_non_null(strstr(out, "\"entropy\":{\"rate_limiter\":{\"bandwidth\""));
	/* The VM gets both devices. */
	api.cfg.has_boot = 1;
	memset(&cfg, 0, sizeof(cfg));
	assert_int_equal(fcapi_vm_config(&api, &cfg, why, sizeof(why)), 0);
	assert_true(cfg.has_entropy);
	assert_int_equal(cfg.entropy.rl.bytes_per_s, 10000);
	assert_true(cfg.has_balloon);
	assert_int_equal(cfg.balloon.amount_mib, 16);
	assert_int_equal(cfg.balloon.stats_interval_s, 1);
	assert_true(cfg.balloon.free_page_reporting && cfg.balloon.deflate_on_oom);

	/* Running: PATCH the target and the interval, read the statistics. */
	assert_int_equal(vqb_init(&b, 16), 0);
	vm->cfg.mem_bytes = 4 << 20;
	vm->balloon = calloc(1, sizeof(*vm->balloon));
	assert_non_null(vm->balloon);
	cfg.balloon.amount_mib = 2; /* of the 4 MiB stand-in */
	assert_int_equal(virtio_balloon_init(vm->balloon, &cfg.balloon, -1, &b.gm, 0xd0000000, 5), 0);
	api.vm = vm;
	expect_fault(400, "PUT", "/balloon", "{\"amount_mib\":1,\"deflate_on_oom\":true}", "after starting");
	expect_fault(400, "PUT", "/entropy", "{}", "after starting");
	expect_fault(400, "PATCH", "/balloon", "{\"amount_mib\":5}", "too large");
	expect_fault(400, "PATCH", "/balloon", "{}", "missing field `amount_mib`");
	assert_int_equal(req("PATCH", "/balloon", "{\"amount_mib\":3}"), 204);
	assert_int_equal(le32toh(vm->balloon->config.num_pages), 3 * 256);
	assert_int_equal(req("GET", "/balloon", NULL), 200);
	assert_non_null(strstr(out, "\"amount_mib\":3"));
	vm->balloon->config.actual = htole32(512);
	vm->balloon->stats.valid[VIRTIO_BALLOON_S_MEMFREE] = 1;
	vm->balloon->stats.val[VIRTIO_BALLOON_S_MEMFREE] = 12345;
	assert_int_equal(req("GET", "/balloon/statistics", NULL), 200);
	assert_non_null(strstr(out, "\"target_pages\":768"));
	assert_non_null(strstr(out, "\"actual_pages\":512"));
	assert_non_null(strstr(out, "\"target_mib\":3"));
	assert_non_null(strstr(out, "\"actual_mib\":2"));
	assert_non_null(strstr(out, "\"free_memory\":12345"));
	assert_null(strstr(out, "swap_in"));
	assert_int_equal(req("PATCH", "/balloon/statistics", "{\"stats_polling_interval_s\":2}"), 204);
	assert_int_equal(vm->balloon->stats_interval_s, 2);
	expect_fault(400, "PATCH", "/balloon/statistics", "{\"stats_polling_interval_s\":0}", "after boot");
	api.vm = NULL;
	virtio_balloon_destroy(vm->balloon);
	free(vm->balloon);
	free(vm);
	vqb_destroy(&b);
	fcapi_init(&api, "unit");
}

/* The one token check (vmm/base/http.h), shared with the egress proxy: a
 * comma-separated list, any case, blanks around items, empty items. */
static void http_token_list(void **state)
{
	(void)state;
	assert_int_equal(http_has_token("close", 5, "close"), 1);
	assert_int_equal(http_has_token("Keep-Alive, CLOSE", 17, "close"), 1);
	assert_int_equal(http_has_token(" ,, keep-alive\t ,", 17, "keep-alive"), 1);
	assert_int_equal(http_has_token("closed", 6, "close"), 0);
	assert_int_equal(http_has_token("x-close, upgrade", 16, "close"), 0);
	assert_int_equal(http_has_token("", 0, "close"), 0);
	/* n bounds the value: a token past it is not seen */
	assert_int_equal(http_has_token("upgrade, close", 8, "close"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(http_token_list),
		cmocka_unit_test(http_simple_get),
		cmocka_unit_test(http_put_with_body_and_pipelining),
		cmocka_unit_test(http_incomplete),
		cmocka_unit_test(http_expect_continue),
		cmocka_unit_test(http_connection_header),
		cmocka_unit_test(http_refusals),
		cmocka_unit_test(http_firecracker_forms),
		cmocka_unit_test(http_size_limits),
		cmocka_unit_test(http_writer),
		cmocka_unit_test(control_free_after_close),
		/* In order: each builds on the configuration before it. */
		cmocka_unit_test(route_info_and_unknown),
		cmocka_unit_test(route_body_errors),
		cmocka_unit_test(route_machine_config),
		cmocka_unit_test(route_boot_source),
		cmocka_unit_test(route_drives),
		cmocka_unit_test(route_vsock_net_fs),
		cmocka_unit_test(route_preboot_state_rules),
		cmocka_unit_test(route_vm_config),
		cmocka_unit_test(route_static_cpu_template),
		cmocka_unit_test(route_duplicate_mac),
		cmocka_unit_test(route_get_vm_config),
		cmocka_unit_test(route_patch_running),
		cmocka_unit_test(route_postboot_state_rules),
		cmocka_unit_test(route_snapshot_load_options),
		cmocka_unit_test(route_logger_metrics),
		cmocka_unit_test(config_file),
		cmocka_unit_test(route_entropy_balloon),
		cmocka_unit_test(route_fs_drive),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
