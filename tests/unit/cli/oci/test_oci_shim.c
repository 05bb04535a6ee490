/* containerd-shim-vmm-v2's parts that need no containerd: Protocol
 * Buffers' encoding both ways (vmm/wire/pb), a cgroup's files read into
 * containerd's cgroup v2 Metrics (oci_stats), ttrpc's frame header, and
 * which calls the shim keeps for itself: only Task.Stats of a pod's
 * workload container, everything else passed on as it came. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/wire/pb.h"
#include "cli/oci/oci_pod.h"
#include "cli/oci/oci_shim.h"
#include "cli/oci/oci_stats.h"

/* The value of varint field num in data[0..n) (0 when absent). */
static uint64_t get_uint(const uint8_t *data, size_t n, unsigned num)
{
	struct pb_reader r;
	struct pb_entry f;
	uint64_t v = 0;

	pb_reader_init(&r, data, n);
	while (pb_next(&r, &f) > 0)
		if (f.num == num && f.wire == 0)
			v = f.v;
	return v;
}

/* The bytes of length-delimited field num (NULL when absent). */
static const uint8_t *get_msg(const uint8_t *data, size_t n, unsigned num, size_t *len)
{
	const uint8_t *m;

	return pb_get_bytes(data, n, num, &m, len) ? NULL : m;
}

static void pb_both_ways(void **state)
{
	uint8_t buf[256], big[300];
	struct pb_writer w;
	struct pb_reader r;
	struct pb_entry f;
	char s[32];

	(void)state;
	pb_init(&w, buf, sizeof(buf));
	pb_uint(&w, 1, 0); /* proto3's default: left out */
	pb_uint(&w, 2, 127);
	pb_uint(&w, 3, 128);
	pb_uint(&w, 4, UINT64_MAX);
	pb_str(&w, 5, "");
	pb_str(&w, 6, "abc");
	pb_bytes(&w, 7, "", 0);
	assert_int_equal(pb_done(&w), (int)w.len);
	/* 2:127 is 2 bytes, 3:128 is 3, 4:max is 1 + 10, 6 is 5, 7 is 2 */
	assert_int_equal(w.len, 2 + 3 + 11 + 5 + 2);
	assert_int_equal(buf[0], 2 << 3);
	assert_int_equal(buf[1], 127);
	assert_memory_equal(buf + 2, "\x18\x80\x01", 3);
	assert_int_equal(get_uint(buf, w.len, 1), 0);
	assert_int_equal(get_uint(buf, w.len, 2), 127);
	assert_int_equal(get_uint(buf, w.len, 3), 128);
	assert_true(get_uint(buf, w.len, 4) == UINT64_MAX);
	assert_int_equal(pb_get_str(buf, w.len, 6, s, sizeof(s)), 0);
	assert_string_equal(s, "abc");
	assert_int_equal(pb_get_str(buf, w.len, 7, s, sizeof(s)), 0);
	assert_string_equal(s, "");
	assert_int_equal(pb_get_str(buf, w.len, 5, s, sizeof(s)), -ENOENT);
	assert_int_equal(pb_get_str(buf, w.len, 6, s, 3), -E2BIG);
	/* a length of two bytes, and an Any around it */
	memset(big, 'x', sizeof(big));
	pb_init(&w, buf, sizeof(buf));
	pb_bytes(&w, 1, big, 200);
	assert_int_equal(pb_done(&w), 1 + 2 + 200);
	pb_init(&w, buf, sizeof(buf));
	pb_bytes(&w, 1, big, 300);
	assert_int_equal(pb_done(&w), -E2BIG);
	pb_uint(&w, 2, 1); /* nothing after an overflow */
	assert_int_equal(pb_done(&w), -E2BIG);
	pb_init(&w, buf, sizeof(buf));
	pb_any(&w, 3, "t.u/X", big, 130);
	assert_int_equal(pb_done(&w), 1 + 2 + (1 + 1 + 5) + (1 + 2 + 130));
	pb_reader_init(&r, buf, w.len);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_int_equal(f.num, 3);
	assert_int_equal(f.len, w.len - 3);
	assert_int_equal(pb_get_str(f.data, f.len, 1, s, sizeof(s)), 0);
	assert_string_equal(s, "t.u/X");
	assert_int_equal(pb_next(&r, &f), 0);
	/* a field that comes twice: the last, as protobuf takes it; absent;
	 * not a message */
	{
		const uint8_t *b;
		size_t blen = 0;

		pb_init(&w, buf, sizeof(buf));
		pb_str(&w, 3, "first");
		pb_str(&w, 3, "last");
		assert_int_equal(pb_get_bytes(buf, w.len, 3, &b, &blen), 0);
		assert_int_equal(blen, 4);
		assert_memory_equal(b, "last", 4);
		assert_int_equal(pb_get_bytes(buf, w.len, 4, &b, &blen), -ENOENT);
		assert_int_equal(pb_get_bytes("\x1a\x05" "abc", 5, 3, &b, &blen), -EPROTO);
	}
	/* a NUL in a string */
	pb_init(&w, buf, sizeof(buf));
	pb_bytes(&w, 1, "a\0b", 3);
	assert_int_equal(pb_get_str(buf, w.len, 1, s, sizeof(s)), -EINVAL);
}

static void pb_refuses_what_is_not_a_message(void **state)
{
	static const struct {
		const char *b;
		size_t n;
	} bad[] = {
		{ "\x08", 1 },                                             /* a tag, no varint */
		{ "\x08\x80", 2 },                                         /* a varint cut short */
		{ "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12 }, /* over 10 bytes */
		{ "\x0a\x05" "abc", 5 },                                   /* a length past the end */
		{ "\x0b", 1 },                                             /* a group (wire type 3) */
		{ "\x0e", 1 },                                             /* wire type 6 */
		{ "\x00\x01", 2 },                                         /* field 0 */
		{ "\x09" "1234567", 8 },                                   /* a fixed64 cut short */
	};
	struct pb_reader r;
	struct pb_entry f;
	char s[8];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pb_reader_init(&r, bad[i].b, bad[i].n);
		assert_int_equal(pb_next(&r, &f), -EPROTO);
	}
	assert_int_equal(pb_get_str("\x0a\x05" "abc", 5, 1, s, sizeof(s)), -EPROTO);
	/* fixed32 and fixed64, little-endian */
	pb_reader_init(&r, "\x0d\x01\x02\x03\x04\x11\x01\0\0\0\0\0\0\x80", 14);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_int_equal(f.wire, 5);
	assert_int_equal(f.v, 0x04030201);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_true(f.v == 0x8000000000000001ull);
	assert_int_equal(pb_next(&r, &f), 0);
}

/* What `grep -H ''` prints of a guest cgroup's files (a 6.1 kernel's,
 * abridged), with lines the parser does not know */
static const char grep_out[] = "cpu.stat:usage_usec 1500123\n"
			       "cpu.stat:user_usec 1000000\n"
			       "cpu.stat:system_usec 500123\n"
			       "cpu.stat:nr_periods 7\n"
			       "cpu.stat:core_sched.force_idle_usec 0\n"
			       "memory.current:73400320\n"
			       "memory.max:max\n"
			       "memory.stat:anon 67108864\n"
			       "memory.stat:file 4194304\n"
			       "memory.stat:inactive_file 1048576\n"
			       "memory.stat:active_file 3145728\n"
			       "memory.stat:pgfault 16500\n"
			       "memory.stat:pgmajfault 3\n"
			       "memory.stat:workingset_refault_anon 0\n"
			       "memory.stat:thp_collapse_alloc 1\n"
			       "memory.events:oom 1\n"
			       "memory.events:oom_kill 1\n"
			       "pids.current:4\n"
			       "pids.max:max\n"
			       "memory.stat:anon not-a-number\n"
			       "no colon here\n"
			       "other.file:5";

/* The pod's VM, faked: a pod's container is one with ROOT/ID/sandbox
 * (as oci_pod.c has it); its VM answers when vm_up is set, with what
 * guest_says prints ("exit 1": no cgroup; "hang": never, a guest that
 * holds the connection: the fake waits until it is killed, so the test
 * ends only if it is). oci_stats_of asks from a child process, so the
 * fake checks its arguments itself: the container's ID is $1 of the
 * script, never in it. */
static int vm_up;
static const char *guest_says = grep_out;

int oci_pod_of(const struct oci_ctx *c, const char *id, char *sbid, size_t len)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s/sandbox", c->root, id);
	if (access(p, F_OK))
		return -ENOENT;
	snprintf(sbid, len, "s1");
	return 0;
}

int oci_vm_addr(const struct oci_ctx *c, const char *id, struct sandbox *sb, struct sandbox_addr *a)
{
	(void)c;
	(void)id;
	(void)sb;
	(void)a;
	return vm_up ? 0 : -ENOENT;
}

int oci_guest_output(const struct sandbox_addr *a, const char *const *argv, char *out, size_t outlen, size_t *outn,
		     char *err, size_t errlen)
{
	size_t n = strlen(guest_says);

	(void)a;
	err[0] = '\0';
	if (strcmp(argv[0], "sh") || strcmp(argv[1], "-c") || !argv[3] || !argv[4] || strstr(argv[2], argv[4]) ||
	    argv[5])
		return -EINVAL;
	if (!strcmp(guest_says, "hang"))
		for (;;)
			pause(); /* until killed: the test returns only if it is */
	if (!strcmp(guest_says, "exit 1")) {
		snprintf(err, errlen, "sh: cd: can't cd");
		return 1;
	}
	if (n > outlen)
		return -E2BIG;
	memcpy(out, guest_says, n);
	*outn = n;
	return 0;
}

static void stats_from_a_cgroup(void **state)
{
	struct oci_stats st;

	(void)state;
	assert_int_equal(oci_stats_parse(grep_out, strlen(grep_out), &st), 0);
	assert_int_equal(st.cpu[1], 1500123);
	assert_int_equal(st.cpu[2], 1000000);
	assert_int_equal(st.cpu[3], 500123);
	assert_int_equal(st.cpu[4], 7);
	assert_int_equal(st.mem[32], 73400320);
	assert_true(st.mem[33] == UINT64_MAX);
	assert_int_equal(st.mem[1], 67108864); /* the malformed later line changed nothing */
	assert_int_equal(st.mem[2], 4194304);
	assert_int_equal(st.mem[13], 1048576);
	assert_int_equal(st.mem[14], 3145728);
	assert_int_equal(st.mem[18], 16500);
	assert_int_equal(st.mem[19], 3);
	assert_int_equal(st.mem[31], 1);
	assert_int_equal(st.events[4], 1);
	assert_int_equal(st.events[5], 1);
	assert_int_equal(st.pids[1], 4);
	assert_true(st.pids[2] == UINT64_MAX);
	assert_int_equal(oci_stats_parse("", 0, &st), -EINVAL);
	assert_int_equal(oci_stats_parse("x:1\ncpu.stat:nope 3\n", 19, &st), -EINVAL);
	/* the last line without its newline still counts */
	assert_int_equal(oci_stats_parse("pids.current:9", 14, &st), 0);
	assert_int_equal(st.pids[1], 9);
}

static void stats_as_metrics(void **state)
{
	uint8_t buf[2048];
	const uint8_t *m;
	struct oci_stats st;
	size_t len = 0;
	int n;

	(void)state;
	assert_int_equal(oci_stats_parse(grep_out, strlen(grep_out), &st), 0);
	n = oci_stats_metrics(&st, buf, sizeof(buf));
	assert_true(n > 0);
	/* Metrics { pids = 1; cpu = 2; memory = 4; memory_events = 8; } */
	assert_non_null(m = get_msg(buf, (size_t)n, 1, &len));
	assert_int_equal(get_uint(m, len, 1), 4);
	assert_non_null(m = get_msg(buf, (size_t)n, 2, &len));
	assert_int_equal(get_uint(m, len, 1), 1500123);
	assert_int_equal(get_uint(m, len, 3), 500123);
	assert_non_null(m = get_msg(buf, (size_t)n, 4, &len));
	assert_int_equal(get_uint(m, len, 32), 73400320); /* usage */
	assert_int_equal(get_uint(m, len, 13), 1048576);  /* inactive_file */
	assert_true(get_uint(m, len, 33) == UINT64_MAX);  /* usage_limit */
	assert_int_equal(get_uint(m, len, 1), 67108864);
	assert_non_null(m = get_msg(buf, (size_t)n, 8, &len));
	assert_int_equal(get_uint(m, len, 5), 1);
	assert_null(get_msg(buf, (size_t)n, 5, &len));
	assert_int_equal(oci_stats_metrics(&st, buf, 20), -E2BIG);
}

static void ttrpc_headers(void **state)
{
	static const uint8_t h[10] = { 0, 0, 1, 2, 0, 0, 0, 5, 1, 0 };
	static const uint8_t huge[10] = { 0, 0x40, 0, 1, 0, 0, 0, 1, 1, 0 };
	struct oci_ttrpc_header t;

	(void)state;
	assert_int_equal(oci_ttrpc_header(h, &t), 0);
	assert_int_equal(t.len, 258);
	assert_int_equal(t.stream, 5);
	assert_int_equal(t.type, 1);
	assert_int_equal(oci_ttrpc_header(huge, &t), -EPROTO); /* over ttrpc's 4 MiB */
}

/* A ttrpc Request for service/method with payload StatsRequest{id}. */
static size_t request(uint8_t *buf, size_t cap, const char *service, const char *method, const char *id)
{
	uint8_t p[300];
	struct pb_writer w;

	pb_init(&w, p, sizeof(p));
	pb_str(&w, 1, id);
	{
		size_t plen = w.len;

		pb_init(&w, buf, cap);
		pb_str(&w, 1, service);
		pb_str(&w, 2, method);
		pb_bytes(&w, 3, p, plen);
		pb_uint(&w, 4, 1000000000);
	}
	assert_true(pb_done(&w) > 0);
	return w.len;
}

static void passes_on_what_is_not_its_own(void **state)
{
	char dir[] = "/tmp/vmm-shim-test.XXXXXX", path[512];
	uint8_t req[1024], resp[4096];
	size_t n, rlen = 0;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* not the task service, not Stats */
	n = request(req, sizeof(req), "containerd.task.v2.Task", "State", "c1");
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	n = request(req, sizeof(req), "containerd.other.v1.Task", "Stats", "c1");
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	/* Stats of a task without the runc shim's options.json */
	n = request(req, sizeof(req), "containerd.task.v2.Task", "Stats", "c1");
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	/* with them, but not a pod's container (no ROOT/NS/c1/sandbox) */
	snprintf(path, sizeof(path), "%s/c1", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/c1/options.json", dir);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "{\"binary_name\":\"/x/vmm-oci\",\"root\":\"%s/root\"}", dir);
	fclose(f);
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	/* a pod's container whose VM is gone: the host's view, passed on */
	snprintf(path, sizeof(path), "%s/root", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/root/k8s.io", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/root/k8s.io/c1", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/root/k8s.io/c1/sandbox", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("s1\n", f);
	fclose(f);
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	/* its VM up, but no cgroup for it there */
	vm_up = 1;
	guest_says = "exit 1";
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	vm_up = 0;
	guest_says = grep_out;
	/* ids that are not runc's, and bytes that are not a request */
	n = request(req, sizeof(req), "containerd.task.v2.Task", "Stats", "../c1");
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	assert_int_equal(oci_shim_answer((const uint8_t *)"\x0a\x50", 2, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	assert_int_equal(rlen, 0);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

/* Task.Stats of a pod's container: answered from its cgroup in the VM,
 * as a ttrpc Response { payload = StatsResponse { stats = Any {
 * io.containerd.cgroups.v2.Metrics } } } with no status (OK). */
static void answers_stats_of_a_pod_container(void **state)
{
	char dir[] = "/tmp/vmm-shim-test.XXXXXX", path[512], url[64];
	uint8_t req[1024], resp[4096];
	const uint8_t *sr, *any, *m, *mem;
	size_t n, rlen = 0, len = 0, alen = 0, mlen = 0, memlen = 0;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "mkdir -p %s/c2 %s/root/k8s.io/c2 && echo s1 > %s/root/k8s.io/c2/sandbox", dir, dir, dir);
	assert_int_equal(system(path), 0);
	snprintf(path, sizeof(path), "%s/c2/options.json", dir);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "{\"binary_name\":\"vmm-oci\",\"root\":\"%s/root\",\"systemd_cgroup\":false}", dir);
	fclose(f);
	vm_up = 1;
	n = request(req, sizeof(req), "containerd.task.v3.Task", "Stats", "c2"); /* containerd 2.x's */
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 1);
	n = request(req, sizeof(req), "containerd.task.v2.Task", "Stats", "c2");
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 1);
	vm_up = 0;
	assert_null(get_msg(resp, rlen, 1, &len)); /* Status: none, OK */
	assert_non_null(sr = get_msg(resp, rlen, 2, &len));
	assert_non_null(any = get_msg(sr, len, 1, &alen));
	assert_int_equal(pb_get_str(any, alen, 1, url, sizeof(url)), 0);
	assert_string_equal(url, "io.containerd.cgroups.v2.Metrics");
	assert_non_null(m = get_msg(any, alen, 2, &mlen));
	assert_non_null(mem = get_msg(m, mlen, 4, &memlen));
	assert_int_equal(get_uint(mem, memlen, 32), 73400320);
	assert_non_null(mem = get_msg(m, mlen, 2, &memlen));
	assert_int_equal(get_uint(mem, memlen, 1), 1500123);
	/* the runc shim's default root when its options name none */
	snprintf(path, sizeof(path), "%s/c2/options.json", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("{}", f);
	fclose(f);
	vm_up = 1;
	assert_int_equal(oci_shim_answer(req, n, "k8s.io", dir, resp, sizeof(resp), &rlen), 0);
	vm_up = 0;
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

/* A guest that never answers holds the caller no longer than its
 * timeout: the child asking it is killed. */
static void a_guest_that_hangs(void **state)
{
	char dir[] = "/tmp/vmm-shim-test.XXXXXX", path[512], why[256];
	struct oci_ctx c = { 0 };
	struct oci_stats st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "mkdir -p %s/c3 && echo s1 > %s/c3/sandbox", dir, dir);
	assert_int_equal(system(path), 0);
	c.root = dir;
	vm_up = 1;
	guest_says = "hang";
	assert_int_equal(oci_stats_of(&c, "c3", &st, 300, why, sizeof(why)), -ETIMEDOUT);
	assert_non_null(strstr(why, "no figures in 300 ms"));
	guest_says = grep_out;
	/* and the same container answers when its guest does */
	assert_int_equal(oci_stats_of(&c, "c3", &st, 5000, why, sizeof(why)), 0);
	assert_int_equal(st.mem[32], 73400320);
	vm_up = 0;
	assert_int_equal(oci_stats_of(&c, "c3", &st, 5000, why, sizeof(why)), -ESRCH);
	assert_int_equal(oci_stats_of(&c, "c4", &st, 5000, why, sizeof(why)), -ENOENT);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

/* A Task.Create without runc's options (runtime_type io.containerd.vmm.v2)
 * gets them: binary_name vmm-oci, root /run/containerd/vmm-oci; every
 * other field of the request and of its payload as it came. runc's own
 * options, and other calls, pass as they are. */
static void create_gets_runc_options(void **state)
{
	uint8_t payload[512], body[1024], out[4096], any[128], ro[64];
	const uint8_t *p, *o, *v;
	struct pb_writer w;
	size_t n, plen = 0, olen = 0, vlen = 0, rlen = 0;
	char s[128];

	(void)state;
	/* the CRI's runtimeoptions.v1.Options { type_url, config_path } */
	pb_init(&w, ro, sizeof(ro));
	pb_str(&w, 2, "/etc/x.toml");
	n = w.len;
	pb_init(&w, any, sizeof(any));
	pb_str(&w, 1, "runtimeoptions.v1.Options");
	pb_bytes(&w, 2, ro, n);
	n = w.len;
	pb_init(&w, payload, sizeof(payload));
	pb_str(&w, 1, "c1");
	pb_str(&w, 2, "/run/b/c1");
	pb_bytes(&w, 10, any, n);
	pb_str(&w, 6, "/run/fifo/stdout");
	n = w.len;
	pb_init(&w, body, sizeof(body));
	pb_str(&w, 1, "containerd.task.v2.Task");
	pb_str(&w, 2, "Create");
	pb_bytes(&w, 3, payload, n);
	pb_uint(&w, 4, 7000000000);
	assert_true(pb_done(&w) > 0);
	assert_int_equal(oci_shim_create_options(body, w.len, "/usr/bin/vmm-oci", out, sizeof(out), &rlen), 1);
	assert_int_equal(pb_get_str(out, rlen, 2, s, sizeof(s)), 0);
	assert_string_equal(s, "Create");
	assert_int_equal(get_uint(out, rlen, 4), 7000000000);
	assert_non_null(p = get_msg(out, rlen, 3, &plen));
	assert_int_equal(pb_get_str(p, plen, 1, s, sizeof(s)), 0);
	assert_string_equal(s, "c1");
	assert_int_equal(pb_get_str(p, plen, 6, s, sizeof(s)), 0);
	assert_string_equal(s, "/run/fifo/stdout");
	assert_non_null(o = get_msg(p, plen, 10, &olen));
	assert_int_equal(pb_get_str(o, olen, 1, s, sizeof(s)), 0);
	assert_string_equal(s, "containerd.runc.v1.Options");
	assert_non_null(v = get_msg(o, olen, 2, &vlen));
	assert_int_equal(pb_get_str(v, vlen, 6, s, sizeof(s)), 0);
	assert_string_equal(s, "/usr/bin/vmm-oci");
	assert_int_equal(pb_get_str(v, vlen, 7, s, sizeof(s)), 0);
	assert_string_equal(s, "/run/containerd/vmm-oci");
	/* runc's options as they are: no rewrite */
	n = rlen;
	assert_int_equal(oci_shim_create_options(out, n, "/other/vmm-oci", body, sizeof(body), &rlen), 0);
	/* a Create with no options at all gets them too */
	pb_init(&w, payload, sizeof(payload));
	pb_str(&w, 1, "c2");
	n = w.len;
	pb_init(&w, body, sizeof(body));
	pb_str(&w, 1, "containerd.task.v2.Task");
	pb_str(&w, 2, "Create");
	pb_bytes(&w, 3, payload, n);
	assert_int_equal(oci_shim_create_options(body, w.len, "/x/vmm-oci", out, sizeof(out), &rlen), 1);
	/* other calls, and bytes that are not a request */
	n = request(body, sizeof(body), "containerd.task.v2.Task", "Start", "c1");
	assert_int_equal(oci_shim_create_options(body, n, "/x/vmm-oci", out, sizeof(out), &rlen), 0);
	assert_int_equal(oci_shim_create_options((const uint8_t *)"\x0a\x50", 2, "/x/vmm-oci", out, sizeof(out), &rlen), 0);
	/* no room for the rewrite: passed on as it came */
	pb_init(&w, body, sizeof(body));
	pb_str(&w, 1, "containerd.task.v2.Task");
	pb_str(&w, 2, "Create");
	pb_bytes(&w, 3, payload, 4);
	assert_int_equal(oci_shim_create_options(body, w.len, "/x/vmm-oci", out, 20, &rlen), 0);
}

/* The runc shim's start answer, containerd 1.x's and 2.x's, read; ours
 * given back in the same form. */
static void start_answers(void **state)
{
	char path[108], out[256];
	int v;

	(void)state;
	assert_int_equal(oci_shim_parse_start("unix:///run/containerd/s/abc", path, sizeof(path), &v), 0);
	assert_string_equal(path, "/run/containerd/s/abc");
	assert_int_equal(v, 0);
	assert_int_equal(oci_shim_format_start(v, "/run/containerd/s/abc-vmm", out, sizeof(out)), 0);
	assert_string_equal(out, "unix:///run/containerd/s/abc-vmm");
	assert_int_equal(oci_shim_parse_start("{\"version\":3,\"address\":\"unix:///run/containerd/s/d\",\"protocol\":\"ttrpc\"}",
					      path, sizeof(path), &v),
			 0);
	assert_string_equal(path, "/run/containerd/s/d");
	assert_int_equal(v, 3);
	assert_int_equal(oci_shim_format_start(v, "/run/containerd/s/d-vmm", out, sizeof(out)), 0);
	assert_string_equal(out, "{\"version\":3,\"address\":\"unix:///run/containerd/s/d-vmm\",\"protocol\":\"ttrpc\"}");
	/* what it cannot stand in front of */
	assert_int_equal(oci_shim_parse_start("{\"version\":3,\"address\":\"vsock://3:1\",\"protocol\":\"ttrpc\"}", path,
					      sizeof(path), &v),
			 -EINVAL);
	assert_int_equal(oci_shim_parse_start("{\"version\":3,\"address\":\"unix:///s\",\"protocol\":\"grpc\"}", path,
					      sizeof(path), &v),
			 -EINVAL);
	assert_int_equal(oci_shim_parse_start("{\"address\":\"unix:///s\"}", path, sizeof(path), &v), -EINVAL);
	assert_int_equal(oci_shim_parse_start("time=... level=error msg=boom", path, sizeof(path), &v), -EINVAL);
	assert_int_equal(oci_shim_parse_start("unix://", path, sizeof(path), &v), -EINVAL);
	memset(out, 'a', 120);
	memcpy(out, "unix:///", 8);
	out[120] = '\0'; /* a path with no room for "-vmm" in sun_path */
	assert_int_equal(oci_shim_parse_start(out, path, sizeof(path), &v), -EINVAL);
	assert_int_equal(oci_shim_format_start(3, "/run/containerd/s/d-vmm", out, 20), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pb_both_ways),
		cmocka_unit_test(pb_refuses_what_is_not_a_message),
		cmocka_unit_test(stats_from_a_cgroup),
		cmocka_unit_test(stats_as_metrics),
		cmocka_unit_test(ttrpc_headers),
		cmocka_unit_test(passes_on_what_is_not_its_own),
		cmocka_unit_test(answers_stats_of_a_pod_container),
		cmocka_unit_test(a_guest_that_hangs),
		cmocka_unit_test(create_gets_runc_options),
		cmocka_unit_test(start_answers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
