/* The control API's HTTP parser (vmm/http.c) and the Firecracker routes'
 * validation and state rules (vmm/fcapi.c), without sockets or KVM. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/fcapi.h"
#include "vmm/http.h"

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
		{ "GET http://localhost/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET /a\x01 HTTP/1.1\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411 },
		{ "PUT / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400 },
		{ "PUT / HTTP/1.1\r\nContent-Length: 51201\r\n\r\n", 413 },
		{ "PUT / HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\n", 413 },
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
	expect_fault(400, "PUT", "/machine-config", NULL, "needs a JSON body");
	expect_fault(400, "PUT", "/machine-config", "{", "invalid JSON");
	expect_fault(400, "PUT", "/machine-config", "[1]", "must be a JSON object");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64,\"x\":1}",
		     "unknown field 'x'");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"vcpu_count\":2,\"mem_size_mib\":64}",
		     "given twice");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":\"1\",\"mem_size_mib\":64}",
		     "'vcpu_count' must be a non-negative integer");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1.5,\"mem_size_mib\":64}", "integer");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":-1,\"mem_size_mib\":64}", "integer");
	expect_fault(400, "PUT", "/machine-config", "{\"mem_size_mib\":64}", "missing required field 'vcpu_count'");
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
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":0,\"mem_size_mib\":64}", "from 1 to");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":65,\"mem_size_mib\":64}", "from 1 to");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":8}", "mem_size_mib");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64,\"smt\":true}", "smt");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64,\"track_dirty_pages\":true}",
		     "track_dirty_pages");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64,\"cpu_template\":\"T2\"}",
		     "cpu_template");
	expect_fault(400, "PUT", "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":64,\"huge_pages\":\"2M\"}",
		     "huge_pages");
	/* Refused requests changed nothing. */
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_non_null(strstr(out, "\"vcpu_count\":2,\"mem_size_mib\":512"));
	assert_int_equal(req("PATCH", "/machine-config", "{\"cpu_template\":\"safe\"}"), 204);
	assert_int_equal(req("GET", "/machine-config", NULL), 200);
	assert_non_null(strstr(out, "\"cpu_template\":\"safe\""));
}

static void route_boot_source(void **state)
{
	char body[512];

	(void)state;
	expect_fault(400, "PUT", "/boot-source", "{}", "missing required field 'kernel_image_path'");
	expect_fault(400, "PUT", "/boot-source", "{\"kernel_image_path\":\"relative\"}", "absolute");
	expect_fault(400, "PUT", "/boot-source", "{\"kernel_image_path\":\"/nonexistent/k\"}", "No such file");
	expect_fault(400, "PUT", "/boot-source", "{\"kernel_image_path\":\"/tmp\"}", "not a regular file");
	snprintf(body, sizeof(body), "{\"kernel_image_path\":\"%s\",\"initrd_path\":\"/nonexistent\"}", kernel);
	expect_fault(400, "PUT", "/boot-source", body, "initrd_path");
	snprintf(body, sizeof(body), "{\"kernel_image_path\":\"%s\",\"boot_args\":7}", kernel);
	expect_fault(400, "PUT", "/boot-source", body, "'boot_args' must be a string");
	/* InstanceStart needs a kernel. */
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", "kernel");
	snprintf(body, sizeof(body), "{\"kernel_image_path\":\"%s\",\"boot_args\":\"console=ttyS0 quiet\"}", kernel);
	assert_int_equal(req("PUT", "/boot-source", body), 204);
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
		     "must be a boolean");
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
		     "\"rate_limiter\":{\"bandwidth\":{\"size\":10}}}", "rate_limiter.bandwidth");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"rate_limiter\":{\"bytes\":{}}}", "rate_limiter");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"rate_limiter\":{\"ops\":{\"size\":10,\"one_time_burst\":5,\"refill_time\":10}}}",
		     "one_time_burst");
	expect_fault(400, "PUT", "/drives/x", "{\"drive_id\":\"x\",\"path_on_host\":\"/x\",\"is_root_device\":false,"
		     "\"rate_limiter\":{\"ops\":{\"size\":-1,\"refill_time\":10}}}", "size");
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
		     "rx_rate_limiter");
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
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"FlushMetrics\"}", "metrics");
	expect_fault(400, "PUT", "/actions", "{\"action_type\":\"Reboot\"}", "unknown 'action_type'");
	expect_fault(400, "PUT", "/actions", "{}", "action_type");
	/* Configured already: no snapshot load. */
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/tmp/s/memory\"}",
		     "not allowed after configuring");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\"}", "exactly one");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\",\"mem_file_path\":\"/a\","
		     "\"mem_backend\":{\"backend_path\":\"/a\",\"backend_type\":\"File\"}}", "exactly one");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\","
		     "\"mem_backend\":{\"backend_path\":\"/a\",\"backend_type\":\"Uffd\"}}", "only File");
	expect_fault(400, "PUT", "/snapshot/load", "{\"snapshot_path\":\"/tmp/s\","
		     "\"mem_backend\":{\"backend_path\":\"/a\"}}", "mem_backend: missing required field 'backend_type'");
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
		     "\"snapshot_type\":\"Diff\"}", "only Full");
	expect_fault(400, "PUT", "/snapshot/create", "{\"snapshot_path\":\"s\",\"mem_file_path\":\"m\"}", "absolute");
	vm->paused = 1;
	assert_int_equal(req("GET", "/", NULL), 200);
	assert_non_null(strstr(out, "\"state\":\"Paused\""));
	expect_fault(400, "PUT", "/snapshot/create", "{\"snapshot_path\":\"/tmp\",\"mem_file_path\":\"/tmp/memory\"}",
		     "exists");
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
	assert_int_equal(fcapi_apply_config_file(&a, "{\"logger\":{}}", 13, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "logger"));
	fcapi_init(&a, "cf");
	assert_int_equal(fcapi_apply_config_file(&a, "{\"machine-config\":{\"vcpu_count\":1}}", 35, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "machine-config: missing required field 'mem_size_mib'"));
	fcapi_init(&a, "cf");
	assert_int_equal(fcapi_apply_config_file(&a, "{}", 2, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "boot-source"));
	assert_int_equal(fcapi_apply_config_file(&a, "{\"drives\":{}}", 13, why, sizeof(why)), -EINVAL);
	assert_int_equal(fcapi_apply_config_file(&a, "nope", 4, why, sizeof(why)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(http_simple_get),
		cmocka_unit_test(http_put_with_body_and_pipelining),
		cmocka_unit_test(http_incomplete),
		cmocka_unit_test(http_expect_continue),
		cmocka_unit_test(http_connection_header),
		cmocka_unit_test(http_refusals),
		cmocka_unit_test(http_size_limits),
		cmocka_unit_test(http_writer),
		/* In order: each builds on the configuration before it. */
		cmocka_unit_test(route_info_and_unknown),
		cmocka_unit_test(route_body_errors),
		cmocka_unit_test(route_machine_config),
		cmocka_unit_test(route_boot_source),
		cmocka_unit_test(route_drives),
		cmocka_unit_test(route_vsock_net_fs),
		cmocka_unit_test(route_preboot_state_rules),
		cmocka_unit_test(route_vm_config),
		cmocka_unit_test(route_postboot_state_rules),
		cmocka_unit_test(config_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
