/* Control socket: see control.h and docs/control-api.md. */
#include "vmm/api/control.h"
#include "vmm/api/fcapi.h"
#include "vmm/base/http.h"
#include "vmm/base/log.h"
#include "vmm/base/unixsock.h"
#include "vmm/vm_snapshot.h"
#include "vmm/vm_standby.h"
#include "vmm/vm.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long a snapshot or suspend of a running VM waits for guest-init's
 * next spare API worker (vm_settle_guest): a fork, which is ~0.1 ms on
 * hardware KVM and tens of ms on a host that emulates guest ring 0. */
#define SNAPSHOT_SETTLE_MS 5000
/* How long a snapshot waits for the guest's free page reports
 * (vm_settle_reports): the first pass comes 2 s after the driver. */
#define SNAPSHOT_REPORTS_MS 4000

static uint64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

#define CONTROL_IN_MAX(c) (HTTP_MAX_HEADER + (c)->max_body)
#define CONTROL_OUT_MAX (FCAPI_REPLY_MAX + 1024)
enum { MODE_NEW, MODE_JSON, MODE_HTTP };

static void conn_close(struct control_conn *k)
{
	if (k->fd >= 0)
		close(k->fd);
	free(k->in);
	free(k->out);
	memset(k, 0, sizeof(*k));
	k->fd = -1;
}

static int control_open_common(struct control *c, int fd, const char *path, const char *name)
{
	unsigned i;
	int r;

	memset(c, 0, sizeof(*c));
	c->inherited_fd = fd;
	for (i = 0; i < CONTROL_MAX_CONNS; i++)
		c->conns[i].fd = -1;
	c->name = name;
	c->max_body = HTTP_MAX_BODY;
	c->api = fcapi_new(name);
	c->body = malloc(FCAPI_REPLY_MAX); /* untouched, so no RSS, until a reply needs it */
	if (!c->api || !c->body) {
		free(c->api);
		free(c->body);
		c->api = NULL;
		c->body = NULL;
		return -ENOMEM;
	}
	c->open = 1;
	if (c->inherited_fd >= 0) {
		c->lfd[0] = c->inherited_fd;
		snprintf(c->lpath[0], sizeof(c->lpath[0]), "%s", path);
		c->nr_listen = 1;
		return 0;
	}
	r = control_listen(c, path);
	if (r) {
		control_free(c);
		return r;
	}
	return 0;
}

int control_open(struct control *c, const char *path, const char *name)
{
	return control_open_common(c, -1, path, name);
}

int control_open_fd(struct control *c, int fd, const char *path, const char *name)
{
	int r;

	r = control_open_common(c, fd, path, name);
	return r;
}

int control_listen(struct control *c, const char *path)
{
	int fd;

	if (c->nr_listen == CONTROL_MAX_LISTEN)
		return -ENOSPC;
	fd = unix_listen(path, 16, 1, "control socket");
	if (fd < 0)
		return fd;
	c->lfd[c->nr_listen] = fd;
	snprintf(c->lpath[c->nr_listen], sizeof(c->lpath[0]), "%s", path);
	c->nr_listen++;
	return 0;
}

void control_close(struct control *c)
{
	unsigned i;

	if (!c->open)
		return;
	for (i = 0; i < CONTROL_MAX_CONNS; i++)
		conn_close(&c->conns[i]);
	for (i = 0; i < c->nr_listen; i++) {
		close(c->lfd[i]);
		if (!c->keep_paths)
			unlink(c->lpath[i]);
	}
	c->nr_listen = 0;
	if (c->api)
		fcapi_close(c->api);
	c->open = 0;
}

void control_free(struct control *c)
{
	control_close(c);
	if (c->api) {
		mmds_destroy(&c->api->mmds);
		free(c->api);
		c->api = NULL;
	}
	free(c->body);
	c->body = NULL;
}

static void reply_error(char *out, size_t outlen, const char *msg)
{
	struct json_writer w;

	jw_init(&w, out, outlen);
	jw_obj(&w);
	jw_key(&w, "ok");
	jw_bool(&w, 0);
	jw_key(&w, "error");
	jw_str(&w, msg);
	jw_obj_end(&w);
	if (!jw_done(&w))
		snprintf(out, outlen, "{\"ok\":false,\"error\":\"reply too long\"}");
}

static void do_suspend(struct vm *vm, char *out, size_t outlen);

static void do_snapshot(struct vm *vm, const struct json *req, char *out, size_t outlen)
{
	const char *dir = NULL, *then = "resume";
	char msg[512];
	struct json_writer w;
	struct snap_opts o = { 0 };
	struct snap_stats st = { 0 };
	uint64_t t0 = mono_ms(), t1, t2, bytes = 0;
	int was_paused = vm->paused, r;
	unsigned settle;
	uint64_t ts;

	if (json_get_str(req, "dir", &dir) || dir[0] != '/') {
		reply_error(out, outlen, "snapshot needs \"dir\": an absolute path that does not exist yet");
		return;
	}
	if (json_get(req, "then") && json_get_str(req, "then", &then)) {
		reply_error(out, outlen, "\"then\" must be \"resume\", \"pause\" or \"stop\"");
		return;
	}
	if (strcmp(then, "resume") && strcmp(then, "pause") && strcmp(then, "stop")) {
		reply_error(out, outlen, "\"then\" must be \"resume\", \"pause\" or \"stop\"");
		return;
	}
	if (json_get(req, "diff") && json_get_bool(req, "diff", &o.diff)) {
		reply_error(out, outlen, "\"diff\" must be true or false");
		return;
	}
	settle = vm_settle_reports(vm, SNAPSHOT_REPORTS_MS);
	settle += vm_settle_guest(vm, SNAPSHOT_SETTLE_MS);
	ts = mono_ms();
	if ((r = vm_pause(vm))) {
		reply_error(out, outlen, r == -ETIMEDOUT ? "a vCPU did not stop within 10 s (a stalled console?)"
							 : "the VM is stopping");
		return;
	}
	t1 = mono_ms();
	r = vm_snapshot_ex(vm, dir, &o, &st);
	bytes = st.mem_alloc;
	t2 = mono_ms();
	if (r) {
		if (!was_paused)
			vm_resume(vm);
		snprintf(msg, sizeof(msg), "snapshot to %s failed: %s (nothing was left behind)", dir,
			 strerror(-r));
		reply_error(out, outlen, msg);
		return;
	}
	if (!strcmp(then, "stop"))
		vm_request_exit(vm, VM_EXIT_STOPPED, "stopped after a snapshot to %s", dir);
	else if (!strcmp(then, "resume"))
		vm_resume(vm);
	log_info("snapshot written to %s (%llu ms paused for it, memory %llu KiB on disk)", dir,
		 (unsigned long long)(t2 - ts), (unsigned long long)(bytes >> 10));
	jw_init(&w, out, outlen);
	jw_obj(&w);
	jw_key(&w, "ok");
	jw_bool(&w, 1);
	jw_key(&w, "dir");
	jw_str(&w, dir);
	jw_key(&w, "settle_ms");
	jw_int(&w, (int64_t)settle);
	jw_key(&w, "pause_ms");
	jw_int(&w, (int64_t)(t1 - ts));
	jw_key(&w, "total_ms");
	jw_int(&w, (int64_t)(t2 - t0)); /* the settle included */
	jw_key(&w, "memory_bytes_on_disk");
	jw_int(&w, (int64_t)bytes);
	jw_key(&w, "memory_bytes_written");
	jw_int(&w, (int64_t)st.mem_written);
	jw_key(&w, "kind");
	jw_str(&w, o.diff ? "diff" : "full");
	jw_key(&w, "then");
	jw_str(&w, then);
	jw_obj_end(&w);
	if (!jw_done(&w))
		reply_error(out, outlen, "reply too long");
}

void control_handle(struct vm *vm, const struct control *c, const char *req, size_t len,
		    char *out, size_t outlen)
{
	char arena_buf[CONTROL_MAX_REQUEST * 2];
	struct json_arena a = { .buf = arena_buf, .size = sizeof(arena_buf) };
	const struct json *j;
	const char *op = NULL, *err = NULL;
	struct json_writer w;

	if (!vm) {
		reply_error(out, outlen, "the VM is not started yet (configure and start it through the HTTP API)");
		return;
	}
	j = json_parse(req, len, &a, &err);
	if (!j || j->type != JSON_OBJ) {
		reply_error(out, outlen, j ? "a request is a JSON object" : err);
		return;
	}
	if (json_get_str(j, "op", &op)) {
		reply_error(out, outlen, "a request needs \"op\"");
		return;
	}
	/* Every request but a look (vmm ls probes with info) is activity. */
	if (strcmp(op, "info"))
		idle_touch(&vm->idle, log_now_ns());
	if (!strcmp(op, "snapshot")) {
		do_snapshot(vm, j, out, outlen);
		return;
	}
	if (!strcmp(op, "suspend")) {
		do_suspend(vm, out, outlen);
		return;
	}
	if (!strcmp(op, "pause")) {
		int r = vm_pause(vm);

		if (r) {
			reply_error(out, outlen, r == -ETIMEDOUT ? "a vCPU did not stop within 10 s (a stalled console?)"
								 : "the VM is stopping");
			return;
		}
	} else if (!strcmp(op, "resume")) {
		vm_resume(vm);
	} else if (!strcmp(op, "stop")) {
		vm_request_exit(vm, VM_EXIT_STOPPED, "stopped through the control socket");
	} else if (!strncmp(op, "egress_", 7)) {
		/* The proxy takes them itself, wherever it runs (the jail's
		 * companion process): a VMM a guest took over cannot relay a
		 * policy change (docs/egress.md, "Changing the policy"). */
		reply_error(out, outlen, "the egress proxy takes egress_set and egress_show on its own socket, "
					 "egress.sock in the sandbox folder (vmm egress set/show)");
		return;
	} else if (strcmp(op, "info")) {
		reply_error(out, outlen, "unknown op (info, pause, resume, snapshot, stop, suspend)");
		return;
	}
	jw_init(&w, out, outlen);
	jw_obj(&w);
	jw_key(&w, "ok");
	jw_bool(&w, 1);
	if (!strcmp(op, "info")) {
		jw_key(&w, "name");
		jw_str(&w, c && c->name ? c->name : "");
		jw_key(&w, "state");
		jw_str(&w, vm->paused ? "paused" : "running");
		jw_key(&w, "pid");
		jw_int(&w, vm->cfg.host_pid ? vm->cfg.host_pid : getpid());
		jw_key(&w, "vcpus");
		jw_int(&w, vm->nr_vcpus);
		jw_key(&w, "mem_mib");
		jw_int(&w, (int64_t)(vm->cfg.mem_bytes >> 20));
	}
	jw_obj_end(&w);
	if (!jw_done(&w))
		reply_error(out, outlen, "reply too long");
}

/* vmm suspend: on standby in the sandbox's folder, then the VMM exits
 * (vmm/vm_standby.h); on failure it runs on and the reply says why. */
static void do_suspend(struct vm *vm, char *out, size_t outlen)
{
	struct standby_stats st;
	struct json_writer w;
	char why[512];

	vm_settle_guest(vm, SNAPSHOT_SETTLE_MS);
	if (standby_suspend(vm, &st, why, sizeof(why))) {
		log_err("suspend: %s", why);
		reply_error(out, outlen, why);
		return;
	}
	if (st.diff)
		log_info("suspended: %llu ms paused, %llu KiB written, diff of %llu pages",
			 (unsigned long long)st.ms, (unsigned long long)(st.bytes >> 10),
			 (unsigned long long)st.pages);
	else
		log_info("suspended: %llu ms paused, %llu KiB written, full (%s)", (unsigned long long)st.ms,
			 (unsigned long long)(st.bytes >> 10), st.full_why ? st.full_why : "first suspend");
	jw_init(&w, out, outlen);
	jw_obj(&w);
	jw_key(&w, "ok");
	jw_bool(&w, 1);
	jw_key(&w, "pause_ms");
	jw_int(&w, (int64_t)st.ms);
	jw_key(&w, "memory_bytes");
	jw_int(&w, (int64_t)st.bytes);
	jw_key(&w, "diff");
	jw_bool(&w, st.diff);
	jw_key(&w, "pages");
	jw_int(&w, (int64_t)st.pages);
	jw_obj_end(&w);
	if (!jw_done(&w))
		reply_error(out, outlen, "reply too long");
}

/* Reads one line (without the newline) within the deadline. */
static ssize_t read_line(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t n = 0;

	while (n < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = mono_ms();
		ssize_t r;

		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
			return -ETIMEDOUT;
		r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (r == 0)
			return n ? -EPROTO : 0;
		while (r-- > 0) {
			if (buf[n] == '\n')
				return (ssize_t)n;
			n++;
		}
	}
	return -E2BIG;
}

static int write_all(int fd, const char *p, size_t n, uint64_t deadline)
{
	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		uint64_t now = mono_ms();
		ssize_t w;

		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			return -ETIMEDOUT;
		w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* ---- connections --------------------------------------------------------- */

static uint64_t conn_deadline(const struct control_conn *k)
{
	if (k->waiting)
		return UINT64_MAX;
	if (k->out_len > k->out_off)
		return k->out_start + CONTROL_TIMEOUT_MS;
	if (k->in_len)
		return k->req_start + CONTROL_TIMEOUT_MS;
	return k->last_active + CONTROL_IDLE_MS;
}

static int conn_idle(const struct control_conn *k)
{
	return k->fd >= 0 && !k->waiting && !k->in_len && k->out_len == k->out_off;
}

unsigned control_pollfds(struct control *c, struct pollfd *p, int *timeout_ms)
{
	uint64_t now = mono_ms(), next = UINT64_MAX;
	unsigned n = 0, i;

	if (!c->open)
		return 0;
	for (i = 0; i < c->nr_listen; i++) {
		p[n].fd = c->lfd[i];
		p[n].events = POLLIN;
		p[n++].revents = 0;
	}
	for (i = 0; i < CONTROL_MAX_CONNS; i++) {
		struct control_conn *k = &c->conns[i];
		uint64_t d;

		if (k->fd < 0)
			continue;
		/* A client that hung up while its reply is being prepared: nothing
		 * to wait for until control_finish (poll would report HUP). */
		p[n].fd = k->waiting && k->eof ? -1 : k->fd;
		p[n].events = k->out_len > k->out_off ? POLLOUT : k->waiting || k->eof ? 0 : POLLIN;
		p[n++].revents = 0;
		d = conn_deadline(k);
		if (d < next)
			next = d;
	}
	/* The periodic metrics line (PUT /metrics). */
	if (c->api && c->api->metrics_fd >= 0 && c->api->metrics_next_ms < next)
		next = c->api->metrics_next_ms;
	if (next != UINT64_MAX) {
		uint64_t ms = next > now ? next - now : 0;

		if (*timeout_ms < 0 || ms < (uint64_t)*timeout_ms)
			*timeout_ms = ms > INT_MAX ? INT_MAX : (int)ms;
	}
	return n;
}

/* Sends what it can of the pending reply; closes when done if told to. */
static void conn_flush(struct control_conn *k)
{
	while (k->out_len > k->out_off) {
		ssize_t w = send(k->fd, k->out + k->out_off, k->out_len - k->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				conn_close(k);
			return;
		}
		k->out_off += (size_t)w;
	}
	k->out_len = k->out_off = 0;
	if (k->close_after)
		conn_close(k);
}

/* len bytes written at k->out + k->out_len join the output; 0 (they did
 * not fit) closes the connection once what is queued is sent. */
static void conn_queued(struct control_conn *k, size_t len)
{
	if (!len) {
		k->close_after = 1; /* cannot happen with our reply sizes; do not send half */
		return;
	}
	if (k->out_len == 0)
		k->out_start = mono_ms();
	k->out_len += len;
}

static void conn_queue(struct control_conn *k, const char *data, size_t len)
{
	if (len > CONTROL_OUT_MAX - k->out_len)
		len = 0;
	else
		memcpy(k->out + k->out_len, data, len);
	conn_queued(k, len);
}

/* The response, head and body, straight into the connection's output
 * (no buffer in between: a thread-local one cost every thread of the VMM
 * its size in RSS, glibc zeroing each thread's TLS block). */
static void http_reply_hdr(struct control_conn *k, int status, const char *body, size_t len, int keep_alive,
			   const char *extra)
{
	size_t n = http_response_hdr(k->out + k->out_len, CONTROL_OUT_MAX - k->out_len, status, body, len,
				     keep_alive, extra);

	if (!keep_alive)
		k->close_after = 1;
	conn_queued(k, n);
}

static void http_reply(struct control_conn *k, int status, const char *body, size_t len, int keep_alive)
{
	http_reply_hdr(k, status, body, len, keep_alive, NULL);
}

static void http_fault_reply(struct control_conn *k, int status, const char *msg)
{
	char body[1024];
	size_t n = http_fault(body, sizeof(body), msg);

	http_reply(k, status, body, n, 0);
}

/* Takes `n` bytes (one request) off the front of the input. */
static void conn_consume(struct control_conn *k, size_t n)
{
	memmove(k->in, k->in + n, k->in_len - n);
	k->in_len -= n;
	k->sent_continue = 0;
	k->req_start = mono_ms();
}

/* Serves the complete requests in k's input, one at a time, while the
 * previous reply has been taken (pipelined requests wait their turn). */
static void conn_process(struct control *c, struct control_conn *k, struct vm *vm)
{
	while (k->fd >= 0 && !k->waiting && !k->close_after && k->out_len == 0 && k->in_len &&
	       c->api->pending == FCAPI_NONE) {
		if (k->mode == MODE_NEW)
			k->mode = k->in[0] == '{' ? MODE_JSON : MODE_HTTP;
		if (k->mode == MODE_JSON) {
			char out[4096];
			char *nl = memchr(k->in, '\n', k->in_len);
			size_t len;

			if (!nl || nl - k->in >= CONTROL_MAX_REQUEST) {
				if (nl || k->in_len >= CONTROL_MAX_REQUEST) {
					reply_error(out, sizeof(out) - 1, "request longer than 8 KiB");
				} else {
					if (k->eof)
						conn_close(k);
					return;
				}
			} else {
				control_handle(vm, c, k->in, (size_t)(nl - k->in), out, sizeof(out) - 1);
			}
			len = strlen(out);
			out[len++] = '\n';
			conn_queue(k, out, len);
			k->close_after = 1; /* one request per connection */
			k->in_len = 0;
		} else {
			struct http_request req;
			char *body = c->body;
			size_t blen = 0;
			int r = http_parse_limit(k->in, k->in_len, &req, c->max_body), status;

			if (r < 0) {
				http_fault_reply(k, req.status, req.why);
				k->in_len = 0;
			} else if (r == 0) {
				if (k->in_len == CONTROL_IN_MAX(c)) {
					http_fault_reply(k, 400, "request too large");
					k->in_len = 0;
				} else if (k->eof) {
					conn_close(k);
					return;
				} else if (req.expect_continue && !k->sent_continue) {
					static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

					conn_queue(k, cont, sizeof(cont) - 1);
					k->sent_continue = 1;
				} else {
					return;
				}
			} else {
				c->api->vm = vm;
				status = fcapi_handle(c->api, &req, body, FCAPI_REPLY_MAX, &blen);
				conn_consume(k, (size_t)r);
				if (status == 0) {
					k->waiting = 1;
					k->keep_alive = req.keep_alive;
				} else {
					/* Firecracker marks replies to deprecated fields. */
					http_reply_hdr(k, status, body, blen, req.keep_alive,
						       c->api->deprecated ? "Deprecation: true\r\n" : NULL);
				}
				/* Half-open: answer what came, then close. */
				if (k->eof && !k->in_len)
					k->close_after = 1;
			}
		}
		conn_flush(k);
	}
}

static void conn_read(struct control *c, struct control_conn *k, struct vm *vm)
{
	ssize_t r;

	if (k->in_len < CONTROL_IN_MAX(c)) {
		r = recv(k->fd, k->in + k->in_len, CONTROL_IN_MAX(c) - k->in_len, MSG_DONTWAIT);
		if (r < 0) {
			if (errno != EAGAIN && errno != EINTR)
				conn_close(k);
			return;
		}
		if (r == 0) {
			k->eof = 1;
			if (!k->in_len && !k->waiting) {
				conn_close(k);
				return;
			}
		} else {
			if (!k->in_len)
				k->req_start = mono_ms();
			k->in_len += (size_t)r;
			k->last_active = mono_ms();
		}
	}
	conn_process(c, k, vm);
}

static void do_accept(struct control *c, int lfd)
{
	struct control_conn *k = NULL, *oldest = NULL;
	unsigned i;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	for (i = 0; i < CONTROL_MAX_CONNS && !k; i++) {
		if (c->conns[i].fd < 0)
			k = &c->conns[i];
		else if (conn_idle(&c->conns[i]) &&
			 (!oldest || c->conns[i].last_active < oldest->last_active))
			oldest = &c->conns[i];
	}
	if (!k && oldest) {
		conn_close(oldest); /* the oldest idle keep-alive makes room */
		k = oldest;
	}
	if (!k) {
		close(fd); /* every slot is busy with a request: the client sees EOF */
		return;
	}
	k->in = malloc(CONTROL_IN_MAX(c));
	k->out = malloc(CONTROL_OUT_MAX);
	if (!k->in || !k->out) {
		k->fd = fd;
		conn_close(k);
		return;
	}
	k->fd = fd;
	k->mode = MODE_NEW;
	k->last_active = k->req_start = mono_ms();
}

void control_events(struct control *c, struct vm *vm, const struct pollfd *p, unsigned n)
{
	uint64_t now;
	unsigned i, j;

	if (!c->open)
		return;
	for (j = 0; j < n; j++) {
		if (!p[j].revents)
			continue;
		for (i = 0; i < c->nr_listen; i++)
			if (p[j].fd == c->lfd[i])
				do_accept(c, c->lfd[i]);
		for (i = 0; i < CONTROL_MAX_CONNS; i++) {
			struct control_conn *k = &c->conns[i];

			if (k->fd != p[j].fd)
				continue;
			if (k->out_len > k->out_off) {
				if (p[j].revents & (POLLOUT | POLLERR | POLLHUP))
					conn_flush(k);
				if (k->fd >= 0 && k->out_len == 0)
					conn_process(c, k, vm);
			} else if (p[j].revents & (POLLIN | POLLHUP | POLLERR)) {
				conn_read(c, k, vm);
			}
		}
	}
	/* Deadlines: a slow or half-open client loses its connection. */
	now = mono_ms();
	c->api->vm = vm;
	(void)fcapi_metrics_tick(c->api, now);
	for (i = 0; i < CONTROL_MAX_CONNS; i++) {
		struct control_conn *k = &c->conns[i];

		if (k->fd < 0 || conn_deadline(k) > now)
			continue;
		if (k->mode == MODE_HTTP && k->in_len && k->out_len == k->out_off) {
			k->in_len = 0;
			http_fault_reply(k, 408, "the request did not arrive within 5 s");
			conn_flush(k);
			if (k->fd < 0)
				continue;
		}
		conn_close(k);
	}
}

void control_finish(struct control *c, struct vm *vm, const char *fault)
{
	char *body = c->body;
	size_t len = 0;
	unsigned i;
	int status;

	if (!body)
		return; /* never opened */
	c->api->vm = vm;
	status = fcapi_finish(c->api, fault, body, FCAPI_REPLY_MAX, &len);

	for (i = 0; i < CONTROL_MAX_CONNS; i++) {
		struct control_conn *k = &c->conns[i];

		if (k->fd < 0 || !k->waiting)
			continue;
		k->waiting = 0;
		k->last_active = mono_ms();
		http_reply(k, status, body, len, k->keep_alive);
		if (k->eof && !k->in_len)
			k->close_after = 1;
		conn_flush(k);
	}
	/* Requests that arrived meanwhile (pipelined behind it, or on other
	 * connections) were held while the action was pending. */
	for (i = 0; i < CONTROL_MAX_CONNS; i++)
		if (c->conns[i].fd >= 0 && c->conns[i].in_len)
			conn_process(c, &c->conns[i], vm);
}

int control_call(const char *path, const char *req, char *out, size_t outlen, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	ssize_t n;
	int fd = unix_connect(path, 0), r;

	if (fd < 0)
		return fd;
	r = write_all(fd, req, strlen(req), deadline);
	if (!r)
		r = write_all(fd, "\n", 1, deadline);
	if (r) {
		close(fd);
		return r;
	}
	n = read_line(fd, out, outlen - 1, deadline);
	close(fd);
	if (n <= 0)
		return n == 0 ? -ECONNRESET : (int)n;
	out[n] = '\0';
	return 0;
}
