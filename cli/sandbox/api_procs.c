/* Host side of the sandbox API's version 2 (docs/api.md): detached
 * processes (start, attach, logs, the one-shot ops) and file watching. */
#include "cli/sandbox/api_client.h"
#include "cli/util/util.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* A version 2 request refused: what the guest said, and why an older
 * guest-init says so. */
static int failed(char *err, size_t errlen, const char *what, const struct api_error *e)
{
	if (!strcmp(e->name, "EPROTO") && strstr(e->message, "version"))
		return cli_seterr(err, errlen, -e->eno, "%s: %s (%s); the sandbox's guest-init predates API version 2: "
				  "rebuild its image", what, e->message, e->name);
	return api_error_msg(err, errlen, what, e);
}

int api_call2(const struct sandbox_addr *a, const char *fields, const char *what, char *out, size_t outlen,
	      char *err, size_t errlen)
{
	struct api_error e;
	int fd = api_open_v(a, 2, fields), r;

	if (fd < 0)
		return api_unreachable(err, errlen, a, fd);
	r = api_result(fd, out, outlen, &e);
	close(fd);
	if (r == -1)
		return failed(err, errlen, what, &e);
	if (r)
		return cli_seterr(err, errlen, -EPROTO, "%s: the sandbox closed the connection", what);
	return 0;
}

int api_selector(struct json_writer *w, const char *sel)
{
	char *end;
	long long id;

	if (!sel || !*sel)
		return -EINVAL;
	id = strtoll(sel, &end, 10);
	if (!*end && id > 0) {
		jw_key(w, "id");
		jw_int(w, id);
	} else {
		jw_key(w, "tag");
		jw_str(w, sel);
	}
	return 0;
}

int api_start_id(const struct sandbox_addr *a, const struct exec_opts *o, int64_t *idp, char *err, size_t errlen)
{
	char fields[REQUEST_MAX], out[512], arena_buf[2048];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j;
	const char *jerr;
	int64_t id = 0;
	int r;

	if (api_exec_fields(o, fields, sizeof(fields)))
		return cli_seterr(err, errlen, -E2BIG, "command line too long for one request (64 KiB)");
	r = api_call2(a, fields, o->argv[0], out, sizeof(out), err, errlen);
	if (r)
		return r;
	j = json_parse(out, strlen(out), &ar, &jerr);
	if (!j || json_get_int(j, "id", &id))
		return cli_seterr(err, errlen, -EPROTO, "exec -d: an answer without an id: %s", out);
	*idp = id;
	return 0;
}

/* attach/logs: the request, then the same stream as exec. */
static int stream(const struct sandbox_addr *a, const char *op, const char *sel, int follow, int stdin_pass,
		  int tty, int forward, char *err, size_t errlen)
{
	char fields[512], what[96];
	struct exec_opts o = { .stdin_pass = stdin_pass, .tty = tty, .leave_on_signal = !forward,
			       .forward_usr = forward };
	struct json_writer w;
	int fd;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, op);
	if (api_selector(&w, sel))
		return cli_seterr(err, errlen, -EINVAL, "%s: no process named", op);
	if (!strcmp(op, "logs")) {
		jw_key(&w, "follow");
		jw_bool(&w, follow);
	}
	if (!jw_done(&w))
		return cli_seterr(err, errlen, -E2BIG, "%s %.64s: the selector is too long", op, sel);
	fd = api_open_v(a, 2, fields);
	if (fd < 0)
		return api_unreachable(err, errlen, a, fd);
	snprintf(what, sizeof(what), "%s %s", op, sel);
	return api_session(fd, &o, what, err, errlen);
}

int api_attach(const struct sandbox_addr *a, const char *sel, int stdin_pass, int tty, char *err, size_t errlen)
{
	return stream(a, "attach", sel, 1, stdin_pass, tty, 0, err, errlen);
}

int api_attach_forward(const struct sandbox_addr *a, const char *sel, int tty, char *err, size_t errlen)
{
	return stream(a, "attach", sel, 1, 1, tty, 1, err, errlen);
}

int api_logs(const struct sandbox_addr *a, const char *sel, int follow, char *err, size_t errlen)
{
	return stream(a, "logs", sel, follow, 0, 0, 0, err, errlen);
}

/* ---- watch ------------------------------------------------------------------- */

/* A watch's frame and its parse, on the heap, not in the bss (cli/top.c). */
struct watch_bufs {
	uint8_t frame[FRAME_MAX + 1];
	char arena[1 << 20];
};

static void print_events(FILE *out, const char *text, size_t len, int json, struct watch_bufs *b)
{
	struct json_arena ar = { b->arena, sizeof(b->arena), 0 };
	const struct json *j, *evs, *e;
	const char *jerr;

	j = json_parse(text, len, &ar, &jerr);
	evs = j ? json_get(j, "events") : NULL;
	if (!evs || evs->type != JSON_ARR)
		return;
	for (e = evs->u.kids.first; e; e = e->next) {
		const char *type = "?", *path = "", *to = NULL;
		int dir = 0;

		json_get_str(e, "type", &type);
		json_get_str(e, "path", &path);
		json_get_str(e, "to", &to);
		json_get_bool(e, "dir", &dir);
		if (json) {
			char line[3 * 4096 + 256];
			struct json_writer w;

			jw_init(&w, line, sizeof(line));
			jw_obj(&w);
			jw_key(&w, "type");
			jw_str(&w, type);
			if (strcmp(type, "overflow")) {
				jw_key(&w, "path");
				jw_str(&w, path);
				if (to) {
					jw_key(&w, "to");
					jw_str(&w, to);
				}
				jw_key(&w, "dir");
				jw_bool(&w, dir);
			}
			jw_obj_end(&w);
			if (jw_done(&w))
				fprintf(out, "%s\n", line);
		} else if (!strcmp(type, "overflow")) {
			fprintf(out, "overflow (events were lost: rescan what you watch)\n");
		} else {
			fprintf(out, "%-7s %s%s%s%s\n", type, path, dir ? "/" : "", to ? " -> " : "", to ? to : "");
		}
	}
	fflush(out);
}

int api_watch(const struct sandbox_addr *a, const char *path, int recursive, int json, FILE *out, char *err,
	      size_t errlen)
{
	char fields[4300], res[512];
	struct watch_bufs *b;
	struct api_error e;
	struct json_writer w;
	int fd, r;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "watch");
	jw_key(&w, "path");
	jw_str(&w, path);
	jw_key(&w, "recursive");
	jw_bool(&w, recursive);
	if (!jw_done(&w))
		return cli_seterr(err, errlen, -ENAMETOOLONG, "watch: %.64s...: %s", path, strerror(ENAMETOOLONG));
	fd = api_open_v(a, 2, fields);
	if (fd < 0)
		return api_unreachable(err, errlen, a, fd);
	r = api_result(fd, res, sizeof(res), &e);
	if (r) {
		close(fd);
		if (r == -1)
			return failed(err, errlen, path, &e);
		return cli_seterr(err, errlen, -EPROTO, "watch: the sandbox closed the connection");
	}
	b = malloc(sizeof(*b));
	if (!b) {
		close(fd);
		return cli_seterr(err, errlen, -ENOMEM, "watch: %s", strerror(ENOMEM));
	}
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		uint8_t type;
		size_t len;

		if (frame_read(fd, &type, b->frame, FRAME_MAX, &len)) {
			r = cli_seterr(err, errlen, -EPIPE, "watch: the sandbox closed the connection");
			break;
		}
		if (type == F_EVENT) {
			print_events(out, (const char *)b->frame, len, json, b);
			if (ferror(out))
				break; /* our reader left */
		}
	}
	free(b);
	close(fd);
	return r;
}
