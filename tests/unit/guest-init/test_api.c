/* The sandbox API's request parser and JSON code (host build of the same
 * files guest-init is built from). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vmm/wire/api.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"
#include "vmm/wire/vsock.h"

static char arena_buf[1 << 17];

static int parse(const char *text, const char *token, struct api_request *r, int *eno)
{
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const char *err = NULL;
	int rc = api_parse(text, strlen(text), token, &a, r, &err, eno);

	if (rc)
		assert_non_null(err);
	return rc;
}

static void json_values(void **state)
{
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const char *err, *s;
	const char *t = " {\"a\": [1, -2.5e1, true, false, null], \"s\": \"x\\n\\u00e9\\ud83d\\ude00\\\"\", \"o\": {}} ";
	const struct json *j = json_parse(t, strlen(t), &a, &err), *arr;
	int64_t i;

	(void)state;
	assert_non_null(j);
	arr = json_get(j, "a");
	assert_int_equal(arr->type, JSON_ARR);
	assert_int_equal(arr->u.kids.count, 5);
	assert_true(arr->u.kids.first->next->u.num == -25.0);
	assert_int_equal(json_get_str(j, "s", &s), 0);
	assert_string_equal(s, "x\n\xc3\xa9\xf0\x9f\x98\x80\"");
	assert_int_equal(json_get(j, "o")->type, JSON_OBJ);
	assert_int_equal(json_get_int(j, "s", &i), -1); /* mistyped */
	{
		/* Found by fuzz_api_request: a huge number must not reach an
		 * out-of-range double-to-integer conversion. */
		struct json_arena b = { arena_buf + 65536, 65536, 0 };
		const char *h = "{\"n\":1e300,\"m\":-1e300,\"k\":3}";
		const struct json *hj = json_parse(h, strlen(h), &b, &err);

		assert_int_equal(json_get_int(hj, "n", &i), -1);
		assert_int_equal(json_get_int(hj, "m", &i), -1);
		assert_int_equal(json_get_int(hj, "k", &i), 0);
		assert_int_equal(i, 3);
	}
	assert_null(json_get(j, "missing"));
}

static void json_rejects(void **state)
{
	static const char *const bad[] = {
		"", "{", "{\"a\"}", "{\"a\":}", "[1,]", "{\"a\":1,}", "\"\\x\"", "\"abc", "tru",
		"\"\\ud800\"", "\"\\udc00\"", "\"\\u0000\"", "{} x", "\"a\001b\"", "01x",
		"[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]", /* deeper than 16 */
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
		const char *err = NULL;

		if (json_parse(bad[i], strlen(bad[i]), &a, &err))
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(err);
	}
	{
		/* An arena too small for the document: refused, not overrun. */
		char small[64];
		struct json_arena a = { small, sizeof(small), 0 };
		const char *err = NULL, *t = "[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]";

		assert_null(json_parse(t, strlen(t), &a, &err));
		assert_string_equal(err, "request too large");
	}
}

static void json_writer(void **state)
{
	char buf[64], tiny[8];
	struct json_writer w;

	(void)state;
	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "k");
	jw_str(&w, "a\"\\\n\x01");
	jw_key(&w, "n");
	jw_int(&w, -5);
	jw_key(&w, "l");
	jw_arr(&w);
	jw_bool(&w, 1);
	jw_null(&w);
	jw_arr_end(&w);
	jw_obj_end(&w);
	assert_string_equal(jw_done(&w), "{\"k\":\"a\\\"\\\\\\u000a\\u0001\",\"n\":-5,\"l\":[true,null]}");
	jw_init(&w, tiny, sizeof(tiny));
	jw_str(&w, "too long for this");
	assert_null(jw_done(&w));
}

static void requests_ok(void **state)
{
	struct api_request r;
	int eno;

	(void)state;
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\",\"-l\"],\"env\":[\"A=b\"],"
			       "\"cwd\":\"/tmp\",\"stdin\":true,\"pty\":{\"rows\":30,\"cols\":100},"
			       "\"timeout_ms\":5000}", NULL, &r, &eno), 0);
	assert_int_equal(r.op, OP_EXEC);
	assert_int_equal(r.argc, 2);
	assert_string_equal(r.argv[1], "-l");
	assert_null(r.argv[2]);
	assert_int_equal(r.envc, 1);
	assert_true(r.stdin_stream && r.pty);
	assert_int_equal(r.rows, 30);
	assert_int_equal(r.timeout_ms, 5000);
	assert_null(r.user);
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"id\"],\"user\":\"app:staff\"}", NULL, &r, &eno), 0);
	assert_string_equal(r.user, "app:staff");
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"id\"],\"user\":\"1000\"}", NULL, &r, &eno), 0);
	assert_string_equal(r.user, "1000");
	assert_int_equal(parse("{\"v\":1,\"op\":\"write\",\"path\":\"/a/b\",\"mode\":420,\"parents\":true}",
			       NULL, &r, &eno), 0);
	assert_int_equal(r.mode, 0644);
	assert_int_equal(parse("{\"v\":1,\"op\":\"rename\",\"path\":\"/a\",\"to\":\"/b\"}", NULL, &r, &eno), 0);
	assert_int_equal(parse("{\"v\":1,\"op\":\"kill\",\"pid\":42,\"signal\":9}", NULL, &r, &eno), 0);
	assert_int_equal(r.sig, 9);
	assert_int_equal(parse("{\"v\":1,\"op\":\"health\",\"token\":\"s3\"}", "s3", &r, &eno), 0);
	assert_int_equal(parse("{\"v\":1,\"op\":\"sync\",\"time_s\":1700000000,\"time_ns\":999999999,"
			       "\"seed\":\"00ff10Ab\"}", NULL, &r, &eno), 0);
	assert_int_equal(r.op, OP_SYNC);
	assert_int_equal(r.time_s, 1700000000);
	assert_int_equal(r.time_ns, 999999999);
	assert_int_equal(r.seed_len, 4);
	assert_int_equal(r.seed[1], 0xff);
	assert_int_equal(r.seed[3], 0xab);
	assert_int_equal(r.nr_net, 0);
	assert_int_equal(r.egress_port, 0);
	assert_int_equal(parse("{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"\","
			       "\"egress_port\":3128}", NULL, &r, &eno), 0);
	assert_int_equal(r.egress_port, 3128);
	assert_int_equal(parse("{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"\","
			       "\"net\":[\"02:00:00:00:00:01,mac=02:00:00:00:00:02,ip=10.0.0.2/24\",\"02:00:00:00:00:03\"]}",
			       NULL, &r, &eno), 0);
	assert_int_equal(r.nr_net, 2);
	assert_string_equal(r.net[0], "02:00:00:00:00:01,mac=02:00:00:00:00:02,ip=10.0.0.2/24");
	assert_string_equal(r.net[1], "02:00:00:00:00:03");
	assert_int_equal(parse("{\"v\":1,\"op\":\"connect\",\"port\":8080}", NULL, &r, &eno), 0);
	assert_int_equal(r.op, OP_CONNECT);
	assert_int_equal(r.port, 8080);
}

/* exec's container members (vmm oci): parsed and bounded. */
static void exec_container_members(void **state)
{
	static const char *const refused[] = {
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"root\":\"rel\"}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"uid\":-1}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"gid\":4294967295}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"groups\":[-1]}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"groups\":[1.5]}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"groups\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,"
		"16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"no_new_privs\":1}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"rlimits\":[{\"type\":16,\"soft\":1,\"hard\":1}]}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"rlimits\":[{\"type\":7,\"soft\":-2,\"hard\":1}]}",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"rlimits\":[{\"type\":7}]}",
	};
	struct api_request r;
	size_t i;
	int eno;

	(void)state;
	assert_int_equal(parse("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"detach\":true,\"root\":\"/mnt/rootfs\","
			       "\"uid\":1000,\"gid\":100,\"groups\":[5,6],\"no_new_privs\":true,"
			       "\"rlimits\":[{\"type\":7,\"soft\":1024,\"hard\":-1}]}",
			       NULL, &r, &eno),
			 0);
	assert_string_equal(r.root, "/mnt/rootfs");
	assert_int_equal(r.uid, 1000);
	assert_int_equal(r.gid, 100);
	assert_int_equal(r.ngroups, 2);
	assert_int_equal(r.groups[1], 6);
	assert_true(r.no_new_privs);
	assert_int_equal(r.nrlimits, 1);
	assert_int_equal(r.rlimits[0].res, 7);
	assert_int_equal(r.rlimits[0].soft, 1024);
	assert_true(r.rlimits[0].hard == UINT64_MAX);
	/* without them: no chroot, uid/gid unchanged */
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"]}", NULL, &r, &eno), 0);
	assert_null(r.root);
	assert_int_equal(r.uid, -1);
	assert_int_equal(r.gid, -1);
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		eno = 0;
		if (parse(refused[i], NULL, &r, &eno) != -1 || eno != EINVAL)
			fail_msg("accepted: %s", refused[i]);
	}
}

static void requests_refused(void **state)
{
	static const struct {
		const char *json;
		int eno;
	} t[] = {
		{ "[]", EPROTO },
		{ "{\"op\":\"health\"}", EPROTO },                          /* no version */
		{ "{\"v\":3,\"op\":\"health\"}", EPROTO },                  /* v1 and v2 only */
		{ "{\"v\":1,\"op\":\"processes\"}", EINVAL },               /* a v2 op */
		{ "{\"v\":1}", EINVAL },
		{ "{\"v\":1,\"op\":\"format-disk\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[]}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"\"]}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[1]}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"env\":[\"NOEQUALS\"]}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"env\":[\"=x\"]}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"cwd\":\"relative\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"user\":\"\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"user\":\"a:b:c\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"user\":\":g\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"user\":7}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"timeout_ms\":-1}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"timeout_ms\":1.5}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"pty\":{\"rows\":0}}", EINVAL },
		{ "{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"stdin\":\"yes\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"read\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"read\",\"path\":\"etc/passwd\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"rename\",\"path\":\"/a\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"write\",\"path\":\"/a\",\"mode\":99999}", EINVAL },
		{ "{\"v\":1,\"op\":\"kill\",\"pid\":1}", EINVAL },             /* never init */
		{ "{\"v\":1,\"op\":\"kill\",\"pid\":5,\"signal\":0}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"seed\":\"\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":-1,\"time_ns\":0,\"seed\":\"\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":1000000000,\"seed\":\"\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"abc\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"zz\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"0x\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"\",\"egress_port\":0}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"\",\"egress_port\":\"x\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"\",\"net\":\"x\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"\",\"net\":[1]}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"\",\"net\":[\"\"]}", EINVAL },
		{ "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"\","
		  "\"net\":[\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\"]}", EINVAL },
		{ "{\"v\":1,\"op\":\"connect\"}", EINVAL },
		{ "{\"v\":1,\"op\":\"connect\",\"port\":0}", EINVAL },
		{ "{\"v\":1,\"op\":\"connect\",\"port\":65536}", EINVAL },
	};
	struct api_request r;
	unsigned i;
	int eno;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		eno = 0;
		if (parse(t[i].json, NULL, &r, &eno) == 0)
			fail_msg("accepted: %s", t[i].json);
		if (eno != t[i].eno)
			fail_msg("%s: errno %d, want %d", t[i].json, eno, t[i].eno);
	}
	/* A seed of 257 bytes: one too many. */
	{
		static char big[1024];
		size_t n = (size_t)sprintf(big, "{\"v\":1,\"op\":\"sync\",\"time_s\":1,\"time_ns\":0,\"seed\":\"");

		for (i = 0; i < 257; i++)
			n += (size_t)sprintf(big + n, "ab");
		sprintf(big + n, "\"}");
		assert_int_equal(parse(big, NULL, &r, &eno), -1);
		big[n - 2] = '\0';
		sprintf(big + n - 2, "\"}");
		assert_int_equal(parse(big, NULL, &r, &eno), 0); /* 256 bytes: fine */
	}
	/* 257 arguments: one too many. */
	{
		static char big[8192];
		size_t n = (size_t)sprintf(big, "{\"v\":1,\"op\":\"exec\",\"argv\":[");

		for (i = 0; i < 257; i++)
			n += (size_t)sprintf(big + n, "%s\"a\"", i ? "," : "");
		sprintf(big + n, "]}");
		assert_int_equal(parse(big, NULL, &r, &eno), -1);
	}
}

static void token(void **state)
{
	struct api_request r;
	int eno;

	(void)state;
	assert_int_equal(parse("{\"v\":1,\"op\":\"health\"}", "secret", &r, &eno), -1);
	assert_int_equal(eno, EACCES);
	assert_int_equal(parse("{\"v\":1,\"op\":\"health\",\"token\":\"secreT\"}", "secret", &r, &eno), -1);
	assert_int_equal(parse("{\"v\":1,\"op\":\"health\",\"token\":\"secret1\"}", "secret", &r, &eno), -1);
	assert_int_equal(parse("{\"v\":1,\"op\":\"health\",\"token\":\"secret\"}", "secret", &r, &eno), 0);
}

static void frames(void **state)
{
	int sv[2];
	uint8_t type, buf[64];
	size_t len;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(frame_write(sv[0], F_STDOUT, "hello", 5), 0);
	assert_int_equal(frame_read(sv[1], &type, buf, sizeof(buf), &len), 0);
	assert_int_equal(type, F_STDOUT);
	assert_int_equal(len, 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(frame_write(sv[0], F_DATA, buf, sizeof(buf)), 0);
	assert_int_equal(frame_read(sv[1], &type, buf, 10, &len), -2); /* larger than asked */
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[0], "\5\0\0", 3), 3); /* a header cut short */
	close(sv[0]);
	assert_int_equal(frame_read(sv[1], &type, buf, sizeof(buf), &len), -1);
	close(sv[1]);
	assert_string_equal(errno_name(ENOENT), "ENOENT");
	assert_int_equal(errno_from_name("ENOTDIR"), ENOTDIR);
}

/* Only the host may connect: over the guest kernel's vsock loopback a
 * guest process arrives from CID 1 (VMADDR_CID_LOCAL) or the guest's own
 * CID, and is refused whatever token it has. */
static void peer_cid(void **state)
{
	struct sockaddr_vm vm = { .svm_family = AF_VSOCK, .svm_port = 51234 };
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_in in4 = { .sin_family = AF_INET };
	const unsigned cids[] = { 0, 1, 3, 4, 1000, VMADDR_CID_ANY };
	unsigned i;

	(void)state;
	vm.svm_cid = VMADDR_CID_HOST;
	assert_int_equal(api_peer_allowed(&vm, sizeof(vm)), 1);
	for (i = 0; i < sizeof(cids) / sizeof(cids[0]); i++) {
		vm.svm_cid = cids[i];
		assert_int_equal(api_peer_allowed(&vm, sizeof(vm)), 0);
	}
	/* A short address is not trusted to say CID 2. */
	vm.svm_cid = VMADDR_CID_HOST;
	assert_int_equal(api_peer_allowed(&vm, sizeof(vm) - 8), 0);
	assert_int_equal(api_peer_allowed(&vm, 1), 0);
	assert_int_equal(api_peer_allowed(NULL, 0), 0);
	/* --serve-unix: the socket's file mode guards it; an unnamed peer's
	 * address is just the family. */
	assert_int_equal(api_peer_allowed(&un, sizeof(sa_family_t)), 1);
	assert_int_equal(api_peer_allowed(&in4, sizeof(in4)), 0);
}

static void token_window(void **state)
{
	unsigned char win[128];
	char out[API_TOKEN_MAX];

	(void)state;
	memset(win, 0, sizeof(win));
	memcpy(win, "a-Z_9.x", 7);
	assert_int_equal(api_token_parse(win, sizeof(win), out, sizeof(out)), 1);
	assert_string_equal(out, "a-Z_9.x");
	/* No token configured: the window is all NULs. */
	memset(win, 0, sizeof(win));
	assert_int_equal(api_token_parse(win, sizeof(win), out, sizeof(out)), 0);
	assert_string_equal(out, "");
	/* An older VMM: unclaimed ports read as all ones. */
	memset(win, 0xff, sizeof(win));
	assert_int_equal(api_token_parse(win, sizeof(win), out, sizeof(out)), -1);
	/* Outside the token alphabet, or no room for it. */
	memset(win, 0, sizeof(win));
	memcpy(win, "ab cd", 5);
	assert_int_equal(api_token_parse(win, sizeof(win), out, sizeof(out)), -1);
	memset(win, 'x', sizeof(win));
	win[sizeof(win) - 1] = 0;
	assert_int_equal(api_token_parse(win, sizeof(win), out, 16), -1);
	assert_int_equal(api_token_parse(win, sizeof(win), out, sizeof(out)), 1);
	assert_int_equal(strlen(out), 127);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_values),
		cmocka_unit_test(json_rejects),
		cmocka_unit_test(json_writer),
		cmocka_unit_test(requests_ok),
		cmocka_unit_test(requests_refused),
		cmocka_unit_test(exec_container_members),
		cmocka_unit_test(token),
		cmocka_unit_test(peer_cid),
		cmocka_unit_test(token_window),
		cmocka_unit_test(frames),
	};

	return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
