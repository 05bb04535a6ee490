/* The sandbox API into memory, for the MCP tools (cli/mcp/mcp_api.h). */
#include "cli/mcp/mcp_api.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- capture ------------------------------------------------------------- */

int capture_init(struct capture *c, size_t head_cap, size_t tail_cap)
{
	memset(c, 0, sizeof(*c));
	c->head = malloc(head_cap + 1);
	c->tail = malloc(tail_cap + 1);
	if (!c->head || !c->tail) {
		capture_free(c);
		return -ENOMEM;
	}
	c->head_cap = head_cap;
	c->tail_cap = tail_cap;
	return 0;
}

void capture_add(struct capture *c, const void *data, size_t len)
{
	const char *p = data;
	size_t n = c->head_cap - c->head_len < len ? c->head_cap - c->head_len : len;

	memcpy(c->head + c->head_len, p, n);
	c->head_len += n;
	c->total += n;
	p += n;
	len -= n;
	/* What is past the head goes round the tail ring: byte k of the
	 * stream (k >= head_cap) lives at (k - head_cap) % tail_cap. */
	while (len && c->tail_cap) {
		size_t pos = (size_t)((c->total - c->head_cap) % c->tail_cap);
		size_t k = c->tail_cap - pos < len ? c->tail_cap - pos : len;

		memcpy(c->tail + pos, p, k);
		c->total += k;
		p += k;
		len -= k;
	}
	c->total += len; /* no tail: only counted */
}

char *capture_text(const struct capture *c, size_t *len)
{
	uint64_t past = c->total - c->head_len;
	size_t kept = past < c->tail_cap ? (size_t)past : c->tail_cap;
	uint64_t omitted = past - kept;
	char note[96] = "";
	size_t nl = 0;
	char *out;

	if (omitted)
		nl = (size_t)snprintf(note, sizeof(note), "\n[... %llu bytes omitted ...]\n", (unsigned long long)omitted);
	out = malloc(c->head_len + nl + kept + 1);
	if (!out)
		return NULL;
	memcpy(out, c->head, c->head_len);
	memcpy(out + c->head_len, note, nl);
	if (kept) {
		/* the oldest kept tail byte is stream byte total - kept */
		size_t start = (size_t)((c->total - kept - c->head_cap) % c->tail_cap), first = c->tail_cap - start;

		if (first > kept)
			first = kept;
		memcpy(out + c->head_len + nl, c->tail + start, first);
		memcpy(out + c->head_len + nl + first, c->tail, kept - first);
	}
	*len = c->head_len + nl + kept;
	out[*len] = '\0';
	return out;
}

void capture_free(struct capture *c)
{
	free(c->head);
	free(c->tail);
	c->head = c->tail = NULL;
}

/* ---- helpers ----------------------------------------------------------------- */

static int api_err(const char *text, size_t len, char *err, size_t errlen)
{
	char arena_buf[4096];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j = json_parse(text, len, &ar, &(const char *){ NULL });
	const char *name = "EIO", *msg = "";
	int64_t eno = EIO;

	if (j) {
		json_get_str(j, "error", &name);
		json_get_str(j, "message", &msg);
		json_get_int(j, "errno", &eno);
		eno = errno_from_name(name);
	}
	snprintf(err, errlen, "%s (%s)", *msg ? msg : strerror((int)eno), name);
	return eno > 0 ? -(int)eno : -EIO;
}

static int unreachable(const struct sandbox_addr *a, int fd, char *err, size_t errlen)
{
	snprintf(err, errlen, "cannot reach the sandbox API at %s: %s", a->uds, strerror(-fd));
	return fd;
}

int mcp_api_call(const struct sandbox_addr *a, int version, const char *fields, char *out, size_t outlen, char *err,
		 size_t errlen)
{
	int fd = api_open_v(a, version, fields), r;
	uint8_t type;
	size_t len;

	if (fd < 0)
		return unreachable(a, fd, err, errlen);
	r = frame_read(fd, &type, out, outlen - 1, &len);
	close(fd);
	if (r) {
		snprintf(err, errlen, "the sandbox closed the connection");
		return -EPROTO;
	}
	out[len] = '\0';
	if (type == F_ERROR)
		return api_err(out, len, err, errlen);
	if (type != F_RESULT) {
		snprintf(err, errlen, "an unexpected answer (frame type %u)", type);
		return -EPROTO;
	}
	return 0;
}

static void exit_fields(const char *text, size_t len, int *code, int *sig, int *timed_out)
{
	char arena_buf[4096];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j = json_parse(text, len, &ar, &(const char *){ NULL });
	int64_t c = -1, s = 0;

	json_get_int(j, "exit_code", &c);
	json_get_int(j, "signal", &s);
	json_get_bool(j, "timed_out", timed_out);
	*code = (int)c;
	*sig = (int)s;
}

/* ---- exec ------------------------------------------------------------------- */

int mcp_api_exec(const struct sandbox_addr *a, struct mcp_exec *e, char *err, size_t errlen)
{
	uint8_t *buf = NULL; /* the heap, not static: the HTTP transport runs calls in threads */
	struct exec_opts o = {
		.argv = e->argv, .env = e->env, .cwd = e->cwd, .stdin_pass = e->stdin_data != NULL,
		.timeout_ms = e->timeout_ms,
	};
	char *fields = malloc(REQUEST_MAX);
	/* The guest kills the command at timeout_ms; our own limit is only
	 * for a guest that stopped answering. */
	uint64_t deadline = now_ms() + (e->timeout_ms ? e->timeout_ms : 600000) + 10000;
	int fd, r = -EPROTO;

	e->exit_code = -1;
	e->signal = e->timed_out = 0;
	if (!fields || !(buf = malloc(FRAME_MAX + 1))) {
		free(fields);
		return -ENOMEM;
	}
	if (api_exec_fields(&o, fields, REQUEST_MAX)) {
		free(buf);
		free(fields);
		snprintf(err, errlen, "the command is too long for one request (64 KiB)");
		return -E2BIG;
	}
	fd = api_open(a, fields);
	free(fields);
	if (fd < 0) {
		free(buf);
		return unreachable(a, fd, err, errlen);
	}
	if (e->stdin_data) {
		size_t off = 0;

		while (off < e->stdin_len) {
			size_t n = e->stdin_len - off < DATA_CHUNK ? e->stdin_len - off : DATA_CHUNK;

			if (frame_write(fd, F_STDIN, e->stdin_data + off, n))
				break;
			off += n;
		}
		frame_write(fd, F_STDIN_EOF, NULL, 0);
	}
	for (;;) {
		/* a->cancel_fd: the server is shutting down. Closing the
		 * connection ends the command (a version 1 exec dies with it). */
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = a->cancel_fd, .events = POLLIN } };
		uint64_t now = now_ms();
		uint8_t type;
		size_t len;

		if (now >= deadline) {
			snprintf(err, errlen, "the sandbox stopped answering");
			r = -ETIMEDOUT;
			break;
		}
		if (poll(p, a->cancel_fd > 0 ? 2 : 1, (int)(deadline - now)) <= 0)
			continue;
		if (a->cancel_fd > 0 && p[1].revents) {
			snprintf(err, errlen, "the MCP server is shutting down: the command was ended");
			r = -ECANCELED;
			break;
		}
		if (frame_read(fd, &type, buf, FRAME_MAX, &len)) {
			snprintf(err, errlen, "the sandbox closed the connection before the command ended");
			r = -EPIPE;
			break;
		}
		if (type == F_STDOUT || type == F_STDERR) {
			capture_add(type == F_STDOUT ? &e->out : &e->err, buf, len);
		} else if (type == F_EXIT) {
			exit_fields((const char *)buf, len, &e->exit_code, &e->signal, &e->timed_out);
			r = 0;
			break;
		} else if (type == F_ERROR) {
			r = api_err((const char *)buf, len, err, errlen);
			break;
		}
	}
	close(fd);
	free(buf);
	return r;
}

/* ---- files ------------------------------------------------------------------ */

int mcp_api_read(const struct sandbox_addr *a, const char *path, uint64_t offset, size_t max, char **data,
		 size_t *len, uint64_t *size, int64_t *mode, int64_t *uid, int64_t *gid, char *err, size_t errlen)
{
	uint8_t *buf;
	char fields[8192], arena_buf[8192];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j;
	struct json_writer w;
	char *out = NULL;
	size_t have = 0;
	int fd, r = 0, v2 = offset || max != SIZE_MAX;
	uint8_t type;
	size_t n;
	int64_t v;

	*data = NULL;
	*len = 0;
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "read");
	jw_key(&w, "path");
	jw_str(&w, path);
	if (offset) {
		jw_key(&w, "offset");
		jw_int(&w, (int64_t)offset);
	}
	if (max != SIZE_MAX) {
		/* one byte more than we keep tells us there is more */
		jw_key(&w, "length");
		jw_int(&w, (int64_t)max + 1);
	}
	if (!jw_done(&w)) {
		snprintf(err, errlen, "the path is too long");
		return -ENAMETOOLONG;
	}
	if (!(buf = malloc(FRAME_MAX + 1)))
		return -ENOMEM;
	fd = api_open_v(a, v2 ? 2 : 1, fields);
	if (fd < 0) {
		free(buf);
		return unreachable(a, fd, err, errlen);
	}
	if (frame_read(fd, &type, buf, FRAME_MAX, &n)) {
		r = -EPROTO;
		snprintf(err, errlen, "the sandbox closed the connection");
		goto out;
	}
	if (type == F_ERROR) {
		r = api_err((const char *)buf, n, err, errlen);
		goto out;
	}
	j = type == F_RESULT ? json_parse((const char *)buf, n, &ar, &(const char *){ NULL }) : NULL;
	if (!j) {
		r = -EPROTO;
		snprintf(err, errlen, "an unexpected answer to read");
		goto out;
	}
	if (size)
		*size = json_get_int(j, "size", &v) ? 0 : (uint64_t)v;
	if (mode)
		*mode = json_get_int(j, "mode", &v) ? -1 : v;
	if (uid)
		*uid = json_get_int(j, "uid", &v) ? -1 : v;
	if (gid)
		*gid = json_get_int(j, "gid", &v) ? -1 : v;
	out = malloc((max == SIZE_MAX ? 1 << 20 : max) + 1);
	if (!out) {
		r = -ENOMEM;
		goto out;
	}
	for (;;) {
		if (frame_read(fd, &type, buf, FRAME_MAX, &n)) {
			r = -EPROTO;
			snprintf(err, errlen, "the sandbox closed the connection midway");
			break;
		}
		if (type == F_END)
			break;
		if (type == F_ERROR) {
			r = api_err((const char *)buf, n, err, errlen);
			break;
		}
		if (type != F_DATA)
			continue;
		if (max == SIZE_MAX) {
			char *grown = realloc(out, have + n + 1);

			if (!grown) {
				r = -ENOMEM;
				break;
			}
			out = grown;
		} else if (n > max - have) {
			n = max - have; /* more than asked for: the caller says "truncated" */
		}
		memcpy(out + have, buf, n);
		have += n;
	}
	if (!r) {
		out[have] = '\0';
		*data = out;
		*len = have;
		out = NULL;
	}
out:
	free(out);
	free(buf);
	close(fd);
	return r;
}

int mcp_api_write(const struct sandbox_addr *a, const char *path, const void *data, size_t len, int64_t mode,
		  int parents, int64_t uid, int64_t gid, char *err, size_t errlen)
{
	char fields[8192], res[4096];
	struct json_writer w;
	size_t off = 0;
	uint8_t type;
	size_t n;
	int fd, r;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "write");
	jw_key(&w, "path");
	jw_str(&w, path);
	jw_key(&w, "mode");
	jw_int(&w, mode < 0 ? 0644 : mode);
	jw_key(&w, "parents");
	jw_bool(&w, parents);
	if (uid >= 0) {
		jw_key(&w, "uid");
		jw_int(&w, uid);
	}
	if (gid >= 0) {
		jw_key(&w, "gid");
		jw_int(&w, gid);
	}
	if (!jw_done(&w)) {
		snprintf(err, errlen, "the path is too long");
		return -ENAMETOOLONG;
	}
	fd = api_open_v(a, uid >= 0 || gid >= 0 ? 2 : 1, fields);
	if (fd < 0)
		return unreachable(a, fd, err, errlen);
	do {
		size_t k = len - off < DATA_CHUNK ? len - off : DATA_CHUNK;

		if (k && frame_write(fd, F_DATA, (const char *)data + off, k))
			break; /* the guest refused early: its ERROR follows */
		off += k;
	} while (off < len);
	if (off == len)
		frame_write(fd, F_END, NULL, 0);
	r = frame_read(fd, &type, res, sizeof(res) - 1, &n);
	close(fd);
	if (r) {
		snprintf(err, errlen, "the sandbox closed the connection");
		return -EPROTO;
	}
	res[n] = '\0';
	if (type == F_ERROR)
		return api_err(res, n, err, errlen);
	return type == F_RESULT ? 0 : -EPROTO;
}

/* ---- detached processes ------------------------------------------------------- */

static int api_logs_buf(const struct sandbox_addr *a, struct mcp_logs *l, uint8_t *buf, char *err, size_t errlen);

int mcp_api_logs(const struct sandbox_addr *a, struct mcp_logs *l, char *err, size_t errlen)
{
	uint8_t *buf = malloc(FRAME_MAX + 1);
	int r;

	if (!buf)
		return -ENOMEM;
	r = api_logs_buf(a, l, buf, err, errlen);
	free(buf);
	return r;
}

static int api_logs_buf(const struct sandbox_addr *a, struct mcp_logs *l, uint8_t *buf, char *err, size_t errlen)
{
	char fields[512], arena_buf[8192];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j, *s;
	const char *state = "?";
	struct json_writer w;
	int64_t v, start[2] = { 0, 0 };
	uint8_t type;
	size_t n;
	int fd, r = 0, i;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "logs");
	if (api_selector(&w, l->sel)) {
		snprintf(err, errlen, "no process id or tag");
		return -EINVAL;
	}
	jw_key(&w, "offset");
	jw_int(&w, (int64_t)l->offset[0]);
	jw_key(&w, "stderr_offset");
	jw_int(&w, (int64_t)l->offset[1]);
	jw_key(&w, "follow");
	jw_bool(&w, 0);
	if (!jw_done(&w)) {
		snprintf(err, errlen, "the tag is too long");
		return -E2BIG;
	}
	fd = api_open_v(a, 2, fields);
	if (fd < 0)
		return unreachable(a, fd, err, errlen);
	if (frame_read(fd, &type, buf, FRAME_MAX, &n)) {
		close(fd);
		snprintf(err, errlen, "the sandbox closed the connection");
		return -EPROTO;
	}
	if (type == F_ERROR) {
		close(fd);
		return api_err((const char *)buf, n, err, errlen);
	}
	j = type == F_RESULT ? json_parse((const char *)buf, n, &ar, &(const char *){ NULL }) : NULL;
	if (!j) {
		close(fd);
		snprintf(err, errlen, "an unexpected answer to logs");
		return -EPROTO;
	}
	json_get_int(j, "id", &l->id);
	json_get_int(j, "pid", &l->pid);
	json_get_str(j, "state", &state);
	snprintf(l->state, sizeof(l->state), "%s", state);
	for (i = 0; i < 2; i++) {
		s = json_get(j, i ? "stderr" : "stdout");
		if (s && !json_get_int(s, "start", &v))
			start[i] = v;
		/* where this read's bytes begin: the offset, or the oldest kept */
		l->next[i] = l->offset[i] > (uint64_t)start[i] ? l->offset[i] : (uint64_t)start[i];
	}
	for (;;) {
		if (frame_read(fd, &type, buf, FRAME_MAX, &n)) {
			snprintf(err, errlen, "the sandbox closed the connection midway");
			r = -EPROTO;
			break;
		}
		if (type == F_STDOUT || type == F_STDERR) {
			i = type == F_STDERR;
			capture_add(&l->out[i], buf, n);
			/* resume after what the capture's head kept: the rest is
			 * read again next time (the head is a prefix) */
			continue;
		}
		if (type == F_EXIT || type == F_END) {
			ar.used = 0;
			j = json_parse((const char *)buf, n, &ar, &(const char *){ NULL });
			if (json_get_int(j, "skipped", &v) == 0)
				l->skipped = (uint64_t)v;
			if (type == F_EXIT) {
				l->exited = 1;
				exit_fields((const char *)buf, n, &l->exit_code, &l->signal, &l->timed_out);
			}
			break;
		}
		if (type == F_ERROR) {
			r = api_err((const char *)buf, n, err, errlen);
			break;
		}
	}
	for (i = 0; i < 2; i++)
		l->next[i] += l->out[i].head_len; /* the caller's captures keep no tail */
	close(fd);
	return r;
}
