/* Control socket: see control.h and docs/control-api.md. */
#define _GNU_SOURCE
#include "control.h"
#include "log.h"
#include "unixsock.h"
#include "snapshot.h"
#include "vm.h"
#include "../guest-init/json.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int control_open(struct control *c, const char *path, const char *name)
{
	c->name = name;
	snprintf(c->path, sizeof(c->path), "%s", path);
	c->fd = unix_listen(path, 16, 1, "control socket");
	return c->fd < 0 ? c->fd : 0;
}

void control_close(struct control *c)
{
	if (c->fd >= 0) {
		close(c->fd);
		unlink(c->path);
	}
	c->fd = -1;
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

static void do_snapshot(struct vm *vm, const struct json *req, char *out, size_t outlen)
{
	const char *dir = NULL, *then = "resume";
	char msg[512];
	struct json_writer w;
	uint64_t t0 = mono_ms(), t1, t2, bytes = 0;
	int was_paused = vm->paused, r;

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
	if ((r = vm_pause(vm))) {
		reply_error(out, outlen, r == -ETIMEDOUT ? "a vCPU did not stop within 10 s (a stalled console?)"
							 : "the VM is stopping");
		return;
	}
	t1 = mono_ms();
	r = vm_snapshot(vm, dir, &bytes);
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
		 (unsigned long long)(t2 - t0), (unsigned long long)(bytes >> 10));
	jw_init(&w, out, outlen);
	jw_obj(&w);
	jw_key(&w, "ok");
	jw_bool(&w, 1);
	jw_key(&w, "dir");
	jw_str(&w, dir);
	jw_key(&w, "pause_ms");
	jw_int(&w, (int64_t)(t1 - t0));
	jw_key(&w, "total_ms");
	jw_int(&w, (int64_t)(t2 - t0));
	jw_key(&w, "memory_bytes_on_disk");
	jw_int(&w, (int64_t)bytes);
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

	j = json_parse(req, len, &a, &err);
	if (!j || j->type != JSON_OBJ) {
		reply_error(out, outlen, j ? "a request is a JSON object" : err);
		return;
	}
	if (json_get_str(j, "op", &op)) {
		reply_error(out, outlen, "a request needs \"op\"");
		return;
	}
	if (!strcmp(op, "snapshot")) {
		do_snapshot(vm, j, out, outlen);
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
	} else if (strcmp(op, "info")) {
		reply_error(out, outlen, "unknown op (info, pause, resume, snapshot, stop)");
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
		jw_int(&w, getpid());
		jw_key(&w, "vcpus");
		jw_int(&w, vm->nr_vcpus);
		jw_key(&w, "mem_mib");
		jw_int(&w, (int64_t)(vm->cfg.mem_bytes >> 20));
	}
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

void control_serve(struct control *c, struct vm *vm)
{
	char req[CONTROL_MAX_REQUEST], out[4096];
	int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	ssize_t n;
	size_t len;

	if (fd < 0)
		return;
	/* One request per connection, so a client cannot hold the loop
	 * between requests. */
	n = read_line(fd, req, sizeof(req), mono_ms() + CONTROL_TIMEOUT_MS);
	if (n > 0)
		control_handle(vm, c, req, (size_t)n, out, sizeof(out) - 1);
	else if (n == -E2BIG)
		reply_error(out, sizeof(out) - 1, "request longer than 8 KiB");
	if (n > 0 || n == -E2BIG) {
		len = strlen(out);
		out[len] = '\n';
		(void)write_all(fd, out, len + 1, mono_ms() + CONTROL_TIMEOUT_MS);
	}
	close(fd);
}

int control_call(const char *path, const char *req, char *out, size_t outlen, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	ssize_t n;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
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
