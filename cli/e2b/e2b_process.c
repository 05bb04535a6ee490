/* process.Process (envd/process/process.proto) on the sandbox API's
 * detached processes (docs/api.md, "Detached processes"): every Start is
 * a detached process, so it outlives the call that started it (a
 * background command, an SDK that disconnects), is listed, reconnected to
 * and signalled by its E2B pid, which is its process id in the API. Its
 * output streams from the API's `logs` with follow: what the ring kept,
 * then live output, then its exit, each as a ProcessEvent; a quiet
 * command gets a keepalive event every Keepalive-Ping-Interval seconds.
 * The exit code is envd's: the command's, or -1 with "signal: killed"
 * when a signal ended it, so the SDK raises CommandExitError for both. */
#include "cli/e2b/e2b_priv.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEEPALIVE_S 50

/* The sandbox's envVars (its record) and the call's, as "K=V" (the call's
 * win: they come later). Returns the count; env[i] malloc'd. */
static unsigned build_env(const struct e2b_envd *e, const struct e2b_start *s, char **env, unsigned max)
{
	char arena_buf[16384];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const char *err;
	const struct json *m = json_parse(e->rec.envs, strlen(e->rec.envs), &a, &err), *k;
	unsigned n = 0, i;

	for (k = m && m->type == JSON_OBJ ? m->u.kids.first : NULL; k && n < max; k = k->next)
		if (k->type == JSON_STR && asprintf(&env[n], "%s=%s", k->key, k->u.str.s) > 0)
			n++;
	for (i = 0; i < s->nenvs && n < max; i++)
		if ((env[n] = strdup(s->envs[i])))
			n++;
	env[n] = NULL;
	return n;
}

/* The user of "Authorization: Basic base64(USER:)" (the SDKs' `user`). */
static void basic_user(const struct e2b_req *r, char *user, size_t len)
{
	char auth[512], dec[400];
	long n;

	user[0] = '\0';
	if (e2b_req_header(r, "Authorization", auth, sizeof(auth)) || strncmp(auth, "Basic ", 6))
		return;
	n = e2b_b64_decode(auth + 6, strlen(auth + 6), dec, sizeof(dec) - 1);
	if (n <= 0)
		return;
	dec[n] = '\0';
	dec[strcspn(dec, ":")] = '\0';
	if (strlen(dec) < len)
		memcpy(user, dec, strlen(dec) + 1);
}

/* Starts s detached: its API id in *id. 0 or -errno (why in err). */
static int start_detached(struct e2b_envd *e, const struct e2b_start *s, const char *const *argv, const char *user,
			  int64_t *id, char *err, size_t errlen)
{
	char *env[E2B_ENVS_MAX * 2 + 1], cwd[PATH_MAX], fields[65536], out[1024], arena_buf[4096];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	/* a terminal takes input (SendInput's pty bytes) whatever stdin says */
	struct exec_opts o = { .argv = argv, .user = user[0] ? user : NULL, .detach = 1, .tag = s->tag,
			       .stdin_pass = s->stdin_open || s->pty };
	unsigned n = build_env(e, s, env, E2B_ENVS_MAX * 2), i;
	const struct json *res;
	const char *jerr;
	int r;

	o.env = (const char *const *)env;
	if (s->cwd && (r = e2b_abs_path(s->cwd, cwd, sizeof(cwd))) == 0)
		o.cwd = cwd;
	r = api_exec_fields(&o, fields, sizeof(fields));
	if (!r && s->pty) {
		size_t l = strlen(fields);

		if ((size_t)snprintf(fields + l, sizeof(fields) - l, ",\"pty\":{\"rows\":%u,\"cols\":%u}", s->rows,
				     s->cols) >= sizeof(fields) - l)
			r = -E2BIG;
	}
	for (i = 0; i < n; i++)
		free(env[i]);
	if (r) {
		snprintf(err, errlen, "the command is too long");
		return r;
	}
	if ((r = e2b_api_call(&e->addr, 2, fields, out, sizeof(out), err, errlen)))
		return r;
	res = json_parse(out, strlen(out), &a, &jerr);
	if (!res || json_get_int(res, "id", id)) {
		snprintf(err, errlen, "the sandbox API's answer has no id");
		return -EPROTO;
	}
	return 0;
}

/* Streams process id's output from the offsets to its end as events, then
 * the end-stream message. deadline_ms: Connect-Timeout-Ms's (0: none). */
static int follow(struct e2b_envd *e, int64_t id, uint64_t off_out, uint64_t off_err, int pty, long long deadline_ms)
{
	char fields[256], res[2048];
	size_t bcap = FRAME_MAX + 1, b64cap = FRAME_MAX / 3 * 4 + 8, wcap = b64cap + 256;
	char *buf = malloc(bcap), *b64 = malloc(b64cap), *wbuf = malloc(wcap);
	struct api_error err;
	int fd = -1, k = 0;

	snprintf(fields, sizeof(fields), "\"op\":\"logs\",\"id\":%lld,\"offset\":%llu,\"stderr_offset\":%llu,\"follow\":true",
		 (long long)id, (unsigned long long)off_out, (unsigned long long)off_err);
	if (!buf || !b64 || !wbuf) {
		k = e2b_rpc_stream_end(e, "resource_exhausted", "out of memory");
		goto out;
	}
	fd = api_open_v(&e->addr, 2, fields);
	if (fd < 0 || (k = api_result(fd, res, sizeof(res), &err))) {
		k = e2b_rpc_stream_end(e, fd < 0 ? "unavailable" : connect_errno_code(err.eno),
				       fd < 0 ? "the sandbox API is not reachable" : err.message);
		goto out;
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = e->c->fd, .events = POLLRDHUP } };
		struct json_writer w;
		int wait = KEEPALIVE_S * 1000, n;
		uint8_t type;
		size_t len;

		if (deadline_ms) {
			long long now = cli_mono_ms();

			if (now >= deadline_ms) {
				k = e2b_rpc_stream_end(e, "deadline_exceeded", "the call's timeout passed");
				goto out;
			}
			if (deadline_ms - now < wait)
				wait = (int)(deadline_ms - now);
		}
		n = poll(p, 2, wait);
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			k = -EPIPE; /* the client went: the process runs on */
			goto out;
		}
		jw_init(&w, wbuf, wcap);
		if (n == 0) {
			e2b_event_keepalive(&w);
			if ((k = e2b_rpc_stream_msg(e, &w)))
				goto out;
			continue;
		}
		if (frame_read(fd, &type, buf, bcap - 1, &len)) {
			k = e2b_rpc_stream_end(e, "unavailable", "the sandbox API closed the stream");
			goto out;
		}
		buf[len] = '\0';
		if (type == F_STDOUT || type == F_STDERR) {
			/* with a pty, one terminal stream: DataEvent.pty */
			e2b_event_data(&w, type == F_STDERR ? "stderr" : pty ? "pty" : "stdout", buf, len, b64, b64cap);
			if ((k = e2b_rpc_stream_msg(e, &w)))
				goto out;
		} else if (type == F_EXIT) {
			char arena_buf[2048];
			struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
			const char *jerr;
			const struct json *x = json_parse(buf, len, &a, &jerr);
			int64_t code = 0, sig = 0;

			if (x) {
				json_get_int(x, "exit_code", &code);
				json_get_int(x, "signal", &sig);
			}
			e2b_event_end(&w, (int)code, (int)sig);
			if ((k = e2b_rpc_stream_msg(e, &w)) == 0)
				k = e2b_rpc_stream_end(e, NULL, NULL);
			goto out;
		} else if (type == F_ERROR) {
			api_parse_error(buf, len, &err);
			k = e2b_rpc_stream_end(e, connect_errno_code(err.eno), err.message);
			goto out;
		} else if (type == F_END) {
			k = e2b_rpc_stream_end(e, NULL, NULL);
			goto out;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(b64);
	free(wbuf);
	return k;
}

/* Connect-Timeout-Ms as a monotonic deadline (0: none). */
static long long call_deadline(const struct e2b_req *r)
{
	char v[32];
	long long ms;

	if (e2b_req_header(r, "Connect-Timeout-Ms", v, sizeof(v)) || (ms = atoll(v)) <= 0)
		return 0;
	return cli_mono_ms() + ms;
}

static int start(struct e2b_envd *e, const struct json *req)
{
	const char *argv[E2B_ARGS_MAX + 2], *why;
	char user[128], err[512];
	struct e2b_start s;
	struct json_writer w;
	char ev[128];
	int64_t id;
	unsigned i;
	int r;

	if (!e->stream)
		return e2b_rpc_error(e, "unimplemented", "Start is a server-streaming call");
	if (e2b_start_parse(req, &s, &why))
		return e2b_rpc_error(e, "invalid_argument", "%s", why);
	argv[0] = s.cmd;
	for (i = 0; i < s.nargs; i++)
		argv[i + 1] = s.args[i];
	argv[s.nargs + 1] = NULL;
	basic_user(e->r, user, sizeof(user));
	r = start_detached(e, &s, argv, user, &id, err, sizeof(err));
	if (r == -ENOENT && !strcmp(s.cmd, "/bin/bash")) {
		/* The SDKs run every command as /bin/bash -l -c CMD; an image
		 * without bash (vmm's base) runs it with its /bin/sh. */
		argv[0] = "/bin/sh";
		r = start_detached(e, &s, argv, user, &id, err, sizeof(err));
	}
	e2b_start_free(&s);
	if (r)
		return e2b_rpc_error(e, connect_errno_code(r), "%s: %s", argv[0], err);
	jw_init(&w, ev, sizeof(ev));
	e2b_event_start(&w, (uint32_t)id);
	if (e2b_rpc_stream_msg(e, &w))
		return -EPIPE;
	return follow(e, id, 0, 0, s.pty, call_deadline(e->r));
}

/* The API's "processes" list (its RESULT, malloc'd) parsed into *root. */
static int processes(struct e2b_envd *e, char **text, struct json_arena *a, const struct json **root, char *err,
		     size_t errlen)
{
	const char *jerr;
	int r;

	*text = malloc(4u << 20);
	if (!*text)
		return -ENOMEM;
	r = e2b_api_call(&e->addr, 2, "\"op\":\"processes\"", *text, 4u << 20, err, errlen);
	if (r)
		return r;
	*root = json_parse(*text, strlen(*text), a, &jerr);
	return *root ? 0 : -EPROTO;
}

/* The API selector for an E2B ProcessSelector: its process id, a tag's
 * found in the list. */
static int select_id(struct e2b_envd *e, const struct json *req, int64_t *id, char *err, size_t errlen)
{
	const char *tag;
	uint32_t pid;

	if (e2b_selector(req, &pid, &tag)) {
		snprintf(err, errlen, "process: a pid or a tag");
		return -EINVAL;
	}
	if (pid) {
		*id = pid;
		return 0;
	}
	{
		struct json_arena a = { malloc(8u << 20), 8u << 20, 0 };
		const struct json *root, *p, *list;
		char *text = NULL;
		int r = a.buf ? processes(e, &text, &a, &root, err, errlen) : -ENOMEM;

		if (!r) {
			r = -ESRCH;
			snprintf(err, errlen, "no running process is tagged %s", tag);
			list = json_get(root, "processes");
			for (p = list && list->type == JSON_ARR ? list->u.kids.first : NULL; p; p = p->next) {
				const char *t, *st;

				if (json_get_str(p, "tag", &t) == 0 && !strcmp(t, tag) &&
				    json_get_str(p, "state", &st) == 0 && !strcmp(st, "running") &&
				    json_get_int(p, "id", id) == 0)
					r = 0;
			}
		}
		free(text);
		free(a.buf);
		return r;
	}
}

static int list(struct e2b_envd *e)
{
	struct json_arena a = { malloc(8u << 20), 8u << 20, 0 };
	const struct json *root, *p, *l;
	size_t cap = 4u << 20;
	char *text = NULL, *out = malloc(cap), err[512];
	struct json_writer w;
	int r = a.buf && out ? processes(e, &text, &a, &root, err, sizeof(err)) : -ENOMEM;

	if (r) {
		r = e2b_rpc_error(e, connect_errno_code(r), "%s", r == -ENOMEM ? "out of memory" : err);
		goto out;
	}
	jw_init(&w, out, cap);
	jw_obj(&w);
	jw_key(&w, "processes");
	jw_arr(&w);
	l = json_get(root, "processes");
	for (p = l && l->type == JSON_ARR ? l->u.kids.first : NULL; p; p = p->next) {
		const struct json *argv = json_get(p, "argv"), *k;
		const char *st, *tag;
		int64_t id;

		if (json_get_str(p, "state", &st) || strcmp(st, "running") || json_get_int(p, "id", &id) || !argv ||
		    argv->type != JSON_ARR || !argv->u.kids.first || argv->u.kids.first->type != JSON_STR)
			continue;
		jw_obj(&w);
		jw_key(&w, "config");
		jw_obj(&w);
		jw_key(&w, "cmd");
		jw_str(&w, argv->u.kids.first->u.str.s);
		jw_key(&w, "args");
		jw_arr(&w);
		for (k = argv->u.kids.first->next; k; k = k->next)
			if (k->type == JSON_STR)
				jw_str(&w, k->u.str.s);
		jw_arr_end(&w);
		jw_key(&w, "envs");
		jw_raw(&w, "{}");
		jw_obj_end(&w);
		jw_key(&w, "pid");
		jw_int(&w, id);
		if (json_get_str(p, "tag", &tag) == 0) {
			jw_key(&w, "tag");
			jw_str(&w, tag);
		}
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);
	r = e2b_rpc_reply(e, &w);
out:
	free(text);
	free(out);
	free(a.buf);
	return r;
}

static int send_signal(struct e2b_envd *e, const struct json *req)
{
	char fields[128], out[512], err[512];
	int sig = e2b_signal_parse(req), r;
	int64_t id;

	if (sig < 0)
		return e2b_rpc_error(e, "invalid_argument", "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	if ((r = select_id(e, req, &id, err, sizeof(err))))
		return e2b_rpc_error(e, connect_errno_code(r), "%s", err);
	snprintf(fields, sizeof(fields), "\"op\":\"signal\",\"id\":%lld,\"signal\":%d", (long long)id, sig);
	if ((r = e2b_api_call(&e->addr, 2, fields, out, sizeof(out), err, sizeof(err))))
		return e2b_rpc_error(e, connect_errno_code(r), "process %lld: %s", (long long)id, err);
	return e2b_rpc_empty(e);
}

enum input_kind { INPUT_DATA, INPUT_CLOSE, INPUT_RESIZE };

/* After an attacher's frame: our end half-closed, the attach read (its
 * output dropped) until guest-init closes it, which it does once it has
 * read our end's EOF, so only after it handed the input to the process
 * (it reads no further frame while input is pending: guest-init/procs.c).
 * Closing at once could drop input not yet written. At most 2 s. */
static void linger(int fd)
{
	char buf[4096];
	struct pollfd p = { .fd = fd, .events = POLLIN };

	shutdown(fd, SHUT_WR);
	while (poll(&p, 1, 2000) > 0 && read(fd, buf, sizeof(buf)) > 0) {
	}
}

/* SendInput, CloseStdin and Update (a terminal's size): an attach that
 * writes one frame and leaves. */
static int input(struct e2b_envd *e, const struct json *req, enum input_kind kind)
{
	const struct json *in = json_get(req, "input");
	char fields[128], res[2048], err[512], *data = NULL;
	const char *b64 = NULL;
	struct api_error ae;
	uint8_t size[4];
	long n = 0;
	int64_t id;
	int fd, r;

	if ((r = select_id(e, req, &id, err, sizeof(err))))
		return e2b_rpc_error(e, connect_errno_code(r), "%s", err);
	if (kind == INPUT_RESIZE) {
		unsigned rows, cols;

		if (e2b_pty_size(json_get(req, "pty"), &rows, &cols))
			return e2b_rpc_error(e, "invalid_argument", "pty: the new size");
		/* RESIZE: u16 rows, u16 cols, little-endian (docs/api.md) */
		size[0] = (uint8_t)rows, size[1] = (uint8_t)(rows >> 8);
		size[2] = (uint8_t)cols, size[3] = (uint8_t)(cols >> 8);
	} else if (kind == INPUT_DATA) {
		if (!in || (json_get_str(in, "stdin", &b64) && json_get_str(in, "pty", &b64)))
			return e2b_rpc_error(e, "invalid_argument", "input: stdin or pty bytes");
		data = malloc(strlen(b64) / 4 * 3 + 3);
		n = data ? e2b_b64_decode(b64, strlen(b64), data, strlen(b64) / 4 * 3 + 3) : -ENOMEM;
		if (n < 0) {
			free(data);
			return e2b_rpc_error(e, "invalid_argument", "input: not base64");
		}
	}
	snprintf(fields, sizeof(fields), "\"op\":\"attach\",\"id\":%lld", (long long)id);
	fd = api_open_v(&e->addr, 2, fields);
	r = fd < 0 ? -1 : api_result(fd, res, sizeof(res), &ae);
	if (r == 0)
		r = kind == INPUT_CLOSE	   ? frame_write(fd, F_STDIN_EOF, NULL, 0)
		    : kind == INPUT_RESIZE ? frame_write(fd, F_RESIZE, size, sizeof(size))
					   : frame_write(fd, F_STDIN, data, (size_t)n);
	if (r == 0)
		linger(fd);
	if (fd >= 0)
		close(fd);
	free(data);
	if (r == -1 && fd >= 0)
		return e2b_rpc_error(e, connect_errno_code(ae.eno), "process %lld: %s", (long long)id, ae.message);
	if (r)
		return e2b_rpc_error(e, "unavailable", "process %lld: the sandbox API failed", (long long)id);
	return e2b_rpc_empty(e);
}

/* Where process id's streams end now (the API's list), and whether it
 * runs. 0, -ESRCH (not listed) or -errno. */
static int proc_ends(struct e2b_envd *e, int64_t id, uint64_t *out_end, uint64_t *err_end, int *running, char *err,
		     size_t errlen)
{
	struct json_arena a = { malloc(8u << 20), 8u << 20, 0 };
	const struct json *root, *p, *l;
	char *text = NULL;
	int r = a.buf ? processes(e, &text, &a, &root, err, errlen) : -ENOMEM;

	if (!r) {
		r = -ESRCH;
		snprintf(err, errlen, "process %lld: no such process", (long long)id);
		l = json_get(root, "processes");
		for (p = l && l->type == JSON_ARR ? l->u.kids.first : NULL; p && r; p = p->next) {
			const struct json *so = json_get(p, "stdout"), *se = json_get(p, "stderr");
			const char *st = "";
			int64_t pid, o = 0, x = 0;

			if (json_get_int(p, "id", &pid) || pid != id)
				continue;
			json_get_str(p, "state", &st);
			if (so)
				json_get_int(so, "end", &o);
			if (se)
				json_get_int(se, "end", &x);
			*out_end = (uint64_t)o;
			*err_end = (uint64_t)x;
			*running = !strcmp(st, "running");
			r = 0;
		}
	}
	free(text);
	free(a.buf);
	return r;
}

/* Connect: the process's output from now on (envd replays nothing), then
 * its end. */
static int reconnect(struct e2b_envd *e, const struct json *req)
{
	char err[512], ev[128];
	struct json_writer w;
	uint64_t o = 0, x = 0;
	int64_t id;
	int r, running = 0;

	if (!e->stream)
		return e2b_rpc_error(e, "unimplemented", "Connect is a server-streaming call");
	if ((r = select_id(e, req, &id, err, sizeof(err))) ||
	    (r = proc_ends(e, id, &o, &x, &running, err, sizeof(err))))
		return e2b_rpc_error(e, connect_errno_code(r), "%s", err);
	if (!running)
		return e2b_rpc_error(e, "not_found", "process %lld has exited", (long long)id);
	jw_init(&w, ev, sizeof(ev));
	e2b_event_start(&w, (uint32_t)id);
	if (e2b_rpc_stream_msg(e, &w))
		return -EPIPE;
	return follow(e, id, o, x, 0, call_deadline(e->r));
}

int e2b_process(struct e2b_envd *e, const char *method, const struct json *req)
{
	if (!strcmp(method, "Start"))
		return start(e, req);
	if (!strcmp(method, "List"))
		return list(e);
	if (!strcmp(method, "SendSignal"))
		return send_signal(e, req);
	if (!strcmp(method, "SendInput"))
		return input(e, req, INPUT_DATA);
	if (!strcmp(method, "CloseStdin"))
		return input(e, req, INPUT_CLOSE);
	if (!strcmp(method, "Update"))
		return input(e, req, INPUT_RESIZE);
	if (!strcmp(method, "Connect"))
		return reconnect(e, req);
	return e2b_rpc_error(e, "unimplemented", "process.Process/%s is not served by vmm's E2B gateway", method);
}
