/* The sandbox API's version 2 pieces (host build of guest-init's files):
 * the output ring, watch event coalescing, version 2 request validation,
 * and the process manager itself, driven over its channel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/wire/api.h"
#include "guest-init/ops.h"
#include "vmm/wire/proto.h"
#include "guest-init/ring.h"
#include "guest-init/guest_watch.h"

/* ---- ring ---------------------------------------------------------------------- */

static void ring_wraps(void **state)
{
	struct ring r;
	uint8_t out[64];
	uint64_t off = 0, skipped = 0;
	size_t n;

	(void)state;
	assert_int_equal(ring_init(&r, 0), -EINVAL);
	assert_int_equal(ring_init(&r, 8), 0);
	ring_write(&r, "abcdef", 6);
	assert_int_equal(ring_len(&r), 6);
	assert_int_equal(ring_dropped(&r), 0);
	n = ring_read(&r, &off, out, 4, &skipped);
	assert_int_equal(n, 4);
	assert_memory_equal(out, "abcd", 4);
	assert_int_equal(off, 4);
	/* Wraps: "ghij" overwrites "ab"; offsets stay absolute. */
	ring_write(&r, "ghij", 4);
	assert_int_equal(r.head, 2);
	assert_int_equal(r.tail, 10);
	assert_int_equal(ring_dropped(&r), 2);
	n = ring_read(&r, &off, out, sizeof(out), &skipped);
	assert_int_equal(n, 6);
	assert_memory_equal(out, "efghij", 6);
	assert_int_equal(skipped, 0);
	assert_int_equal(off, 10);
	/* Nothing new: nothing read. */
	assert_int_equal(ring_read(&r, &off, out, sizeof(out), &skipped), 0);
	/* A reader from 0 skips what was dropped, and is told. */
	off = 0;
	n = ring_read(&r, &off, out, sizeof(out), &skipped);
	assert_int_equal(skipped, 2);
	assert_int_equal(n, 8);
	assert_memory_equal(out, "cdefghij", 8);
	/* A write larger than the ring keeps its newest bytes. */
	ring_write(&r, "0123456789ABCDEFGHIJ", 20);
	assert_int_equal(r.tail, 30);
	assert_int_equal(ring_dropped(&r), 22);
	skipped = 0;
	off = 12;
	n = ring_read(&r, &off, out, sizeof(out), &skipped);
	assert_int_equal(skipped, 10);
	assert_int_equal(n, 8);
	assert_memory_equal(out, "CDEFGHIJ", 8);
	/* An offset past the tail reads nothing and is left alone. */
	off = 100;
	assert_int_equal(ring_read(&r, &off, out, sizeof(out), &skipped), 0);
	assert_int_equal(off, 100);
	ring_free(&r);
}

static void ring_many_sizes(void **state)
{
	/* Against a plain copy of the stream, across every wrap position. */
	static uint8_t stream[4096], out[4096];
	struct ring r;
	uint64_t off = 0, skipped = 0, total = 0;
	unsigned i;

	(void)state;
	assert_int_equal(ring_init(&r, 97), 0);
	for (i = 0; i < sizeof(stream); i++)
		stream[i] = (uint8_t)(i * 7 + 3);
	for (i = 1; total + i <= sizeof(stream); i++) {
		ring_write(&r, stream + total, i);
		total += i;
		assert_int_equal(r.tail, total);
		assert_int_equal(r.head, total > 97 ? total - 97 : 0);
		if (i % 3 == 0) {
			size_t n = ring_read(&r, &off, out, 50, &skipped);

			assert_memory_equal(out, stream + off - n, n);
			assert_true(off <= total);
		}
	}
	assert_int_equal(ring_len(&r), 97);
	ring_free(&r);
}

/* ---- watch coalescing --------------------------------------------------------- */

static const char *batch_json(const struct watch_batch *b)
{
	static char buf[1 << 17];
	struct json_writer w;

	jw_init(&w, buf, sizeof(buf));
	watch_batch_json(b, &w);
	assert_non_null(jw_done(&w));
	return buf;
}

static void watch_coalesces(void **state)
{
	static struct watch_batch b;

	(void)state;
	watch_batch_reset(&b);
	/* create + modify + modify of one file: one create */
	assert_int_equal(watch_batch_add(&b, WATCH_CREATE, 0, "/w/a", 0), 0);
	assert_int_equal(watch_batch_add(&b, WATCH_MODIFY, 0, "/w/a", 0), 1);
	assert_int_equal(watch_batch_add(&b, WATCH_MODIFY, 0, "/w/a", 0), 1);
	/* modifies of an existing file: one modify */
	assert_int_equal(watch_batch_add(&b, WATCH_MODIFY, 0, "/w/b", 0), 0);
	assert_int_equal(watch_batch_add(&b, WATCH_MODIFY, 0, "/w/b", 0), 1);
	/* a delete after a create is kept (the file came and went) */
	assert_int_equal(watch_batch_add(&b, WATCH_DELETE, 0, "/w/a", 0), 0);
	assert_int_equal(watch_batch_add(&b, WATCH_DELETE, 0, "/w/a", 0), 1);
	/* ...and a modify after that delete is news again */
	assert_int_equal(watch_batch_add(&b, WATCH_CREATE, 0, "/w/a", 0), 0);
	/* a rename pairs by cookie; a modify of its target merges */
	assert_int_equal(watch_batch_add(&b, WATCH_RENAME, 1, "/w/d1", 7), 0);
	assert_int_equal(watch_batch_moved_to(&b, 1, "/w/d2", 7), 0);
	assert_int_equal(watch_batch_add(&b, WATCH_MODIFY, 1, "/w/d2", 0), 1);
	/* moved out of the tree: a delete; moved in: a create */
	assert_int_equal(watch_batch_add(&b, WATCH_RENAME, 0, "/w/gone", 9), 0);
	assert_int_equal(watch_batch_moved_to(&b, 0, "/w/came", 10), 0);
	/* overflow: explicit, and said once in a row */
	assert_int_equal(watch_batch_add(&b, WATCH_OVERFLOW, 0, NULL, 0), 0);
	assert_int_equal(watch_batch_add(&b, WATCH_OVERFLOW, 0, NULL, 0), 1);
	assert_string_equal(batch_json(&b),
			    "{\"events\":["
			    "{\"type\":\"create\",\"path\":\"/w/a\",\"dir\":false},"
			    "{\"type\":\"modify\",\"path\":\"/w/b\",\"dir\":false},"
			    "{\"type\":\"delete\",\"path\":\"/w/a\",\"dir\":false},"
			    "{\"type\":\"create\",\"path\":\"/w/a\",\"dir\":false},"
			    "{\"type\":\"rename\",\"path\":\"/w/d1\",\"to\":\"/w/d2\",\"dir\":true},"
			    "{\"type\":\"delete\",\"path\":\"/w/gone\",\"dir\":false},"
			    "{\"type\":\"create\",\"path\":\"/w/came\",\"dir\":false},"
			    "{\"type\":\"overflow\"}]}");
}

static void watch_batch_bounded(void **state)
{
	static struct watch_batch b;
	static char path[PATH_MAX];
	unsigned i;
	int r = 0;

	(void)state;
	watch_batch_reset(&b);
	for (i = 0; i < WATCH_BATCH_MAX; i++) {
		snprintf(path, sizeof(path), "/f%u", i);
		assert_int_equal(watch_batch_add(&b, WATCH_CREATE, 0, path, 0), 0);
	}
	assert_int_equal(watch_batch_add(&b, WATCH_CREATE, 0, "/one-more", 0), -ENOSPC);
	/* merging still works in a full batch */
	assert_int_equal(watch_batch_add(&b, WATCH_MODIFY, 0, "/f3", 0), 1);
	/* the path pool is bounded too */
	watch_batch_reset(&b);
	memset(path, 'x', 4000);
	path[0] = '/';
	path[4000] = '\0';
	for (i = 0; i < 100 && r == 0; i++) {
		path[1] = (char)('a' + i % 26);
		path[2] = (char)('a' + i / 26);
		r = watch_batch_add(&b, WATCH_DELETE, 0, path, 0);
	}
	assert_int_equal(r, -ENOSPC);
	assert_true(b.used <= WATCH_POOL);
}

/* ---- version 2 requests ------------------------------------------------------- */

static char arena_buf[1 << 17];

static int parse(const char *text, struct api_request *r, int *eno)
{
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const char *err = NULL;
	int rc = api_parse(text, strlen(text), NULL, &a, r, &err, eno);

	if (rc)
		assert_non_null(err);
	return rc;
}

static void v2_requests(void **state)
{
	struct api_request r;
	int eno;

	(void)state;
	assert_int_equal(parse("{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\"],\"detach\":true,\"tag\":\"web-1\","
			       "\"ring_bytes\":65536}", &r, &eno), 0);
	assert_true(r.detach);
	assert_string_equal(r.tag, "web-1");
	assert_int_equal(r.ring_bytes, 65536);
	assert_int_equal(r.version, 2);
	/* version 1 ignores version 2 members, as it always ignored unknown ones */
	assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"sh\"],\"detach\":true}", &r, &eno), 0);
	assert_false(r.detach);
	assert_int_equal(parse("{\"v\":1,\"op\":\"read\",\"path\":\"/a\",\"offset\":5}", &r, &eno), 0);
	assert_int_equal(r.offset, 0);
	assert_int_equal(r.length, -1);
	assert_int_equal(parse("{\"v\":2,\"op\":\"attach\",\"id\":3,\"offset\":10,\"stderr_offset\":4}", &r, &eno), 0);
	assert_int_equal(r.op, OP_ATTACH);
	assert_int_equal(r.id, 3);
	assert_true(r.follow);
	assert_int_equal(r.stderr_offset, 4);
	assert_int_equal(parse("{\"v\":2,\"op\":\"logs\",\"tag\":\"web\"}", &r, &eno), 0);
	assert_false(r.follow);
	assert_int_equal(parse("{\"v\":2,\"op\":\"signal\",\"tag\":\"web\"}", &r, &eno), 0);
	assert_int_equal(r.sig, SIGTERM);
	assert_int_equal(parse("{\"v\":2,\"op\":\"wait\",\"id\":1,\"timeout_ms\":100}", &r, &eno), 0);
	assert_int_equal(parse("{\"v\":2,\"op\":\"watch\",\"path\":\"/\",\"recursive\":true}", &r, &eno), 0);
	assert_int_equal(r.coalesce_ms, 100);
	assert_int_equal(parse("{\"v\":2,\"op\":\"read\",\"path\":\"/a\",\"offset\":5,\"length\":0}", &r, &eno), 0);
	assert_int_equal(r.offset, 5);
	assert_int_equal(r.length, 0);
	assert_int_equal(parse("{\"v\":2,\"op\":\"write\",\"path\":\"/a\",\"uid\":1000,\"gid\":100}", &r, &eno), 0);
	assert_int_equal(r.uid, 1000);
	assert_int_equal(parse("{\"v\":2,\"op\":\"write\",\"path\":\"/a\",\"user\":\"nobody\"}", &r, &eno), 0);
	assert_string_equal(r.user, "nobody");
	assert_int_equal(parse("{\"v\":2,\"op\":\"stat\",\"paths\":[\"/a\",\"/b\"]}", &r, &eno), 0);
	assert_int_equal(r.nr_paths, 2);
	assert_null(r.path);
	assert_int_equal(parse("{\"v\":2,\"op\":\"stat\",\"path\":\"/a\"}", &r, &eno), 0);
	assert_int_equal(r.nr_paths, 0);
	assert_false(r.follow_links);
	assert_int_equal(parse("{\"v\":2,\"op\":\"stat\",\"path\":\"/a\",\"follow\":true}", &r, &eno), 0);
	assert_true(r.follow_links);
	/* v1 stat never follows (a v2 member) */
	assert_int_equal(parse("{\"v\":1,\"op\":\"stat\",\"path\":\"/a\",\"follow\":true}", &r, &eno), 0);
	assert_false(r.follow_links);
	assert_int_equal(parse("{\"v\":2,\"op\":\"readlink\",\"path\":\"/l\"}", &r, &eno), 0);
	assert_int_equal(r.op, OP_READLINK);
	assert_string_equal(r.path, "/l");
	/* a link's target may be relative */
	assert_int_equal(parse("{\"v\":2,\"op\":\"symlink\",\"path\":\"/l\",\"target\":\"../x\",\"parents\":true}",
			       &r, &eno), 0);
	assert_int_equal(r.op, OP_SYMLINK);
	assert_string_equal(r.target, "../x");
	assert_true(r.parents);
}

static void v2_refused(void **state)
{
	static const char *const t[] = {
		"{\"v\":1,\"op\":\"attach\",\"id\":1}",             /* a v2 op in v1 */
		"{\"v\":1,\"op\":\"watch\",\"path\":\"/\"}",
		"{\"v\":2,\"op\":\"exec\",\"argv\":[\"a\"],\"tag\":\"x\"}",  /* tag without detach */
		"{\"v\":2,\"op\":\"exec\",\"argv\":[\"a\"],\"detach\":1}",
		"{\"v\":2,\"op\":\"exec\",\"argv\":[\"a\"],\"detach\":true,\"tag\":\"9lives\"}",
		"{\"v\":2,\"op\":\"exec\",\"argv\":[\"a\"],\"detach\":true,\"tag\":\"a b\"}",
		"{\"v\":2,\"op\":\"exec\",\"argv\":[\"a\"],\"detach\":true,\"tag\":\"\"}",
		"{\"v\":2,\"op\":\"exec\",\"argv\":[\"a\"],\"detach\":true,\"ring_bytes\":10}",
		"{\"v\":2,\"op\":\"exec\",\"argv\":[\"a\"],\"detach\":true,\"ring_bytes\":1e12}",
		"{\"v\":2,\"op\":\"attach\"}",                      /* neither id nor tag */
		"{\"v\":2,\"op\":\"attach\",\"id\":1,\"tag\":\"x\"}",   /* both */
		"{\"v\":2,\"op\":\"attach\",\"id\":0}",
		"{\"v\":2,\"op\":\"attach\",\"id\":\"1\"}",
		"{\"v\":2,\"op\":\"attach\",\"id\":1,\"offset\":-1}",
		"{\"v\":2,\"op\":\"logs\",\"id\":1,\"follow\":\"yes\"}",
		"{\"v\":2,\"op\":\"signal\",\"id\":1,\"signal\":0}",
		"{\"v\":2,\"op\":\"signal\",\"id\":1,\"signal\":65}",
		"{\"v\":2,\"op\":\"wait\",\"id\":1,\"timeout_ms\":-5}",
		"{\"v\":2,\"op\":\"watch\"}",
		"{\"v\":2,\"op\":\"watch\",\"path\":\"rel\"}",
		"{\"v\":2,\"op\":\"watch\",\"path\":\"/\",\"coalesce_ms\":100000}",
		"{\"v\":2,\"op\":\"read\",\"path\":\"/a\",\"offset\":-1}",
		"{\"v\":2,\"op\":\"read\",\"path\":\"/a\",\"length\":\"all\"}",
		"{\"v\":2,\"op\":\"write\",\"path\":\"/a\",\"uid\":-1}",
		"{\"v\":2,\"op\":\"write\",\"path\":\"/a\",\"uid\":4294967295}",
		"{\"v\":2,\"op\":\"write\",\"path\":\"/a\",\"user\":\"root\",\"uid\":0}",
		"{\"v\":2,\"op\":\"write\",\"path\":\"/a\",\"user\":\"\"}",
		"{\"v\":2,\"op\":\"write\",\"path\":\"/a\",\"user\":\"a:b\"}",
		"{\"v\":2,\"op\":\"stat\",\"paths\":[]}",
		"{\"v\":2,\"op\":\"stat\",\"paths\":[\"rel\"]}",
		"{\"v\":2,\"op\":\"stat\",\"paths\":[\"/a\"],\"path\":\"/b\"}",
		"{\"v\":2,\"op\":\"stat\",\"paths\":\"/a\"}",
		"{\"v\":2,\"op\":\"stat\",\"path\":\"/a\",\"follow\":1}",
		"{\"v\":1,\"op\":\"readlink\",\"path\":\"/l\"}",      /* v2 ops in v1 */
		"{\"v\":1,\"op\":\"symlink\",\"path\":\"/l\",\"target\":\"x\"}",
		"{\"v\":2,\"op\":\"readlink\",\"path\":\"rel\"}",
		"{\"v\":2,\"op\":\"readlink\"}",
		"{\"v\":2,\"op\":\"symlink\",\"path\":\"/l\"}",       /* no target */
		"{\"v\":2,\"op\":\"symlink\",\"path\":\"/l\",\"target\":\"\"}",
		"{\"v\":2,\"op\":\"symlink\",\"path\":\"/l\",\"target\":7}",
		"{\"v\":2,\"op\":\"symlink\",\"path\":\"rel\",\"target\":\"x\"}",
	};
	struct api_request r;
	unsigned i;
	int eno;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		eno = 0;
		if (parse(t[i], &r, &eno) == 0)
			fail_msg("accepted: %s", t[i]);
		if (eno != EINVAL)
			fail_msg("%s: errno %d, want EINVAL", t[i], eno);
	}
}

/* ---- the process manager, over its channel ----------------------------------- */

struct mgr {
	struct api_config cfg;
	int chan;
	pid_t pid;
};

static int call(struct mgr *m, const char *json)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(procs_forward(m->chan, sv[1], json, strlen(json)), 0);
	close(sv[1]);
	return sv[0];
}

/* The next frame (payload NUL-terminated in buf). */
static uint8_t next(int fd, char *buf, size_t size)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t type = 0;
	size_t len = 0;

	assert_int_equal(poll(&p, 1, 10000), 1);
	if (frame_read(fd, &type, buf, size - 1, &len))
		return 0;
	buf[len] = '\0';
	return type;
}

static void one_shot(struct mgr *m, const char *json, uint8_t want, const char *contains)
{
	static char buf[1 << 20];
	int fd = call(m, json);
	uint8_t t;

	t = next(fd, buf, sizeof(buf));

	close(fd);
	if (t != want || (contains && !strstr(buf, contains)))
		fail_msg("%s: frame %u %s (want %u with %s)", json, t, buf, want, contains ? contains : "");
}

static void manager(void **state)
{
	static char buf[1 << 20];
	struct procs_limits lim = { .max_procs = 2, .ring_bytes = 4096 };
	struct mgr m = { .cfg = { .procs_fd = -1 } };
	int fd, status;
	uint8_t t;

	(void)state;
	m.pid = procs_start(&lim, &m.cfg, &m.chan);
	assert_true(m.pid > 0);
	/* More output than the ring holds: the oldest is dropped and counted. */
	one_shot(&m, "{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\",\"-c\",\"head -c 10000 /dev/zero; echo; read x; "
		     "echo got-$x; exit 3\"],\"detach\":true,\"stdin\":true,\"tag\":\"t1\"}",
		 F_RESULT, "\"id\":1");
	one_shot(&m, "{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\",\"-c\",\"exit 5\"],\"detach\":true}", F_RESULT,
		 "\"id\":2");
	/* A tag a running process holds: refused. */
	one_shot(&m, "{\"v\":2,\"op\":\"exec\",\"argv\":[\"true\"],\"detach\":true,\"tag\":\"t1\"}", F_ERROR,
		 "EEXIST");
	one_shot(&m, "{\"v\":2,\"op\":\"wait\",\"id\":2}", F_RESULT, "\"exit_code\":5");
	/* Attach to the running one: the kept output, then stdin reaches it. */
	fd = call(&m, "{\"v\":2,\"op\":\"attach\",\"tag\":\"t1\"}");
	assert_int_equal(next(fd, buf, sizeof(buf)), F_RESULT);
	assert_int_equal(next(fd, buf, sizeof(buf)), F_STDOUT);
	assert_int_equal(frame_write(fd, F_STDIN, "hello\n", 6), 0);
	for (;;) {
		t = next(fd, buf, sizeof(buf));
		if (t == F_EXIT)
			break;
		assert_true(t == F_STDOUT);
	}
	assert_non_null(strstr(buf, "\"exit_code\":3"));
	assert_non_null(strstr(buf, "\"skipped\":"));
	close(fd);
	/* Its ring dropped the oldest bytes: 10000 + 1 + 10 written, 4096 kept. */
	one_shot(&m, "{\"v\":2,\"op\":\"processes\"}", F_RESULT,
		 "\"stdout\":{\"start\":5915,\"end\":10011,\"dropped\":5915}");
	one_shot(&m, "{\"v\":2,\"op\":\"logs\",\"id\":1}", F_RESULT, "\"state\":\"exited\"");
	/* Finished: attach and signal say so; unknown ids are unknown. */
	one_shot(&m, "{\"v\":2,\"op\":\"attach\",\"id\":1}", F_ERROR, "ECHILD");
	one_shot(&m, "{\"v\":2,\"op\":\"signal\",\"id\":1}", F_ERROR, "ECHILD");
	one_shot(&m, "{\"v\":2,\"op\":\"attach\",\"id\":99}", F_ERROR, "ESRCH");
	one_shot(&m, "{\"v\":2,\"op\":\"signal\",\"tag\":\"nope\"}", F_ERROR, "ESRCH");
	/* Full (2 kept): a third evicts the oldest finished one (id 1). */
	one_shot(&m, "{\"v\":2,\"op\":\"exec\",\"argv\":[\"sleep\",\"60\"],\"detach\":true}", F_RESULT, "\"id\":3");
	one_shot(&m, "{\"v\":2,\"op\":\"logs\",\"id\":1}", F_ERROR, "ESRCH");
	one_shot(&m, "{\"v\":2,\"op\":\"exec\",\"argv\":[\"sleep\",\"60\"],\"detach\":true}", F_RESULT, "\"id\":4");
	/* Full of running ones: refused, nothing evicted. */
	one_shot(&m, "{\"v\":2,\"op\":\"exec\",\"argv\":[\"true\"],\"detach\":true}", F_ERROR, "EAGAIN");
	one_shot(&m, "{\"v\":2,\"op\":\"wait\",\"id\":3,\"timeout_ms\":50}", F_ERROR, "ETIMEDOUT");
	/* An oversized frame from an attacher: an error for it alone. */
	fd = call(&m, "{\"v\":2,\"op\":\"attach\",\"id\":3}");
	assert_int_equal(next(fd, buf, sizeof(buf)), F_RESULT);
	{
		uint8_t hdr[FRAME_HDR] = { 0, 0, 0x10, 0, F_STDIN }; /* 1 MiB */

		assert_int_equal(write_full(fd, hdr, sizeof(hdr)), 0);
	}
	assert_int_equal(next(fd, buf, sizeof(buf)), F_ERROR);
	assert_non_null(strstr(buf, "EMSGSIZE"));
	close(fd);
	one_shot(&m, "{\"v\":2,\"op\":\"signal\",\"id\":3,\"signal\":9}", F_RESULT, NULL);
	one_shot(&m, "{\"v\":2,\"op\":\"wait\",\"id\":3}", F_RESULT, "\"signal\":9");
	/* A request the manager does not serve. */
	one_shot(&m, "{\"v\":2,\"op\":\"health\"}", F_ERROR, "EINVAL");
	/* The manager ends with its processes. */
	kill(m.pid, SIGTERM);
	assert_int_equal(waitpid(m.pid, &status, 0), m.pid);
	close(m.chan);
}

/* No descriptor of one detached process reaches another: a pty master
 * leaked into a later command lets it type into the first one's terminal
 * (a root shell's, say) even after that command gave up root. */
static void manager_no_fd_leak(void **state)
{
	static char buf[1 << 16];
	struct procs_limits lim = { .max_procs = 4, .ring_bytes = 4096 };
	struct mgr m = { .cfg = { .procs_fd = -1 } };
	int fd, status;
	uint8_t t;

	(void)state;
	m.pid = procs_start(&lim, &m.cfg, &m.chan);
	assert_true(m.pid > 0);
	one_shot(&m, "{\"v\":2,\"op\":\"exec\",\"argv\":[\"sleep\",\"60\"],\"detach\":true,\"pty\":{\"rows\":24,\"cols\":80}}",
		 F_RESULT, "\"id\":1");
	one_shot(&m, "{\"v\":2,\"op\":\"exec\",\"argv\":[\"sh\",\"-c\",\"for f in /proc/$$/fd/*; do "
		     "echo $f=$(readlink $f); done; echo listed\"],\"detach\":true}",
		 F_RESULT, "\"id\":2");
	one_shot(&m, "{\"v\":2,\"op\":\"wait\",\"id\":2}", F_RESULT, "\"exit_code\":0");
	fd = call(&m, "{\"v\":2,\"op\":\"logs\",\"id\":2}");
	assert_int_equal(next(fd, buf, sizeof(buf)), F_RESULT);
	assert_int_equal(next(fd, buf, sizeof(buf)), F_STDOUT);
	if (!strstr(buf, "listed"))
		fail_msg("no listing: %s", buf);
	if (strstr(buf, "ptmx") || strstr(buf, "/dev/pts/"))
		fail_msg("a descriptor leaked into the second process:\n%s", buf);
	while ((t = next(fd, buf, sizeof(buf))) == F_STDOUT || t == F_STDERR)
		;
	close(fd);
	one_shot(&m, "{\"v\":2,\"op\":\"signal\",\"id\":1,\"signal\":9}", F_RESULT, NULL);
	kill(m.pid, SIGTERM);
	assert_int_equal(waitpid(m.pid, &status, 0), m.pid);
	close(m.chan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ring_wraps),
		cmocka_unit_test(ring_many_sizes),
		cmocka_unit_test(watch_coalesces),
		cmocka_unit_test(watch_batch_bounded),
		cmocka_unit_test(v2_requests),
		cmocka_unit_test(v2_refused),
		cmocka_unit_test(manager),
		cmocka_unit_test(manager_no_fd_leak),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
