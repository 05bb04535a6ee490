/* filesystem.Filesystem (envd/filesystem/filesystem.proto) on the sandbox
 * API's file operations (docs/api.md): Stat, MakeDir, Move, ListDir (with
 * depth), Remove, and WatchDir on its inotify watch. EntryInfo carries
 * what the API's stat gives: type, size, mode, owner (uid 0 is "root",
 * others their number), mtime. */
#include "cli/e2b/e2b_priv.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KEEPALIVE_S 50
#define LIST_MAX_ENTRIES 100000

static const char *file_type(const char *t)
{
	if (!strcmp(t, "file"))
		return "FILE_TYPE_FILE";
	if (!strcmp(t, "dir"))
		return "FILE_TYPE_DIRECTORY";
	if (!strcmp(t, "symlink"))
		return "FILE_TYPE_SYMLINK";
	return "FILE_TYPE_UNSPECIFIED";
}

static void owner(struct json_writer *w, int64_t id)
{
	char buf[24];

	if (id == 0) {
		jw_str(w, "root");
		return;
	}
	snprintf(buf, sizeof(buf), "%lld", (long long)id);
	jw_str(w, buf);
}

/* EntryInfo for path from the API's stat fields st. */
static void entry_json(struct json_writer *w, const char *path, const struct json *st)
{
	const char *t = "unknown", *base = strrchr(path, '/');
	int64_t size = 0, mode = 0, mtime = 0, uid = 0, gid = 0;
	char perm[11], num[24], when[40];
	time_t tt;
	struct tm tm;
	int i;

	json_get_str(st, "type", &t);
	json_get_int(st, "size", &size);
	json_get_int(st, "mode", &mode);
	json_get_int(st, "mtime", &mtime);
	json_get_int(st, "uid", &uid);
	json_get_int(st, "gid", &gid);
	/* permissions as Go's FileMode.String() shows them: "-rwxr-xr-x" */
	perm[0] = !strcmp(t, "dir") ? 'd' : !strcmp(t, "symlink") ? 'L' : '-';
	for (i = 0; i < 9; i++)
		perm[1 + i] = mode & (0400 >> i) ? "rwxrwxrwx"[i] : '-';
	perm[10] = '\0';
	tt = (time_t)mtime;
	gmtime_r(&tt, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jw_obj(w);
	jw_key(w, "name");
	jw_str(w, base && base[1] ? base + 1 : path);
	jw_key(w, "type");
	jw_str(w, file_type(t));
	jw_key(w, "path");
	jw_str(w, path);
	jw_key(w, "size");
	snprintf(num, sizeof(num), "%lld", (long long)size); /* int64: a string in protobuf's JSON */
	jw_str(w, num);
	jw_key(w, "mode");
	jw_int(w, mode & 07777);
	jw_key(w, "permissions");
	jw_str(w, perm);
	jw_key(w, "owner");
	owner(w, uid);
	jw_key(w, "group");
	owner(w, gid);
	jw_key(w, "modifiedTime");
	jw_str(w, when);
	jw_obj_end(w);
}

/* The API's stat of path into out; *st parsed in a. */
static int stat_path(struct e2b_envd *e, const char *path, char *out, size_t len, struct json_arena *a,
		     const struct json **st, char *err, size_t errlen)
{
	char fields[PATH_MAX + 64];
	struct json_writer w;
	const char *jerr;
	int r;

	e2b_op_fields(&w, fields, sizeof(fields), "stat", path);
	if (!jw_done(&w))
		return -ENAMETOOLONG;
	if ((r = e2b_api_call(&e->addr, 1, fields, out, len, err, errlen)))
		return r;
	*st = json_parse(out, strlen(out), a, &jerr);
	return *st ? 0 : -EPROTO;
}

/* {"entry":EntryInfo} of path: Stat's, MakeDir's and Move's answer. */
static int reply_entry(struct e2b_envd *e, const char *path)
{
	char out[2048], arena_buf[8192], body[PATH_MAX * 2 + 1024], err[512];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *st;
	struct json_writer w;
	int r = stat_path(e, path, out, sizeof(out), &a, &st, err, sizeof(err));

	if (r)
		return e2b_rpc_error(e, connect_errno_code(r), "%s: %s", path, err);
	jw_init(&w, body, sizeof(body));
	jw_obj(&w);
	jw_key(&w, "entry");
	entry_json(&w, path, st);
	jw_obj_end(&w);
	return e2b_rpc_reply(e, &w);
}

/* The request's path (key) made absolute. */
static int req_path(struct e2b_envd *e, const struct json *req, const char *key, char *out, size_t len)
{
	const char *p;

	if (json_get_str(req, key, &p) || e2b_abs_path(p, out, len)) {
		e2b_rpc_error(e, "invalid_argument", "%s: a path", key);
		return -EINVAL;
	}
	return 0;
}

/* A one-path operation ("op":op,"path":path plus extra JSON members). */
static int path_op(struct e2b_envd *e, const char *op, const char *path, const char *extra, const char *to, char *err,
		   size_t errlen)
{
	char fields[2 * PATH_MAX + 128], out[1024];
	struct json_writer w;

	e2b_op_fields(&w, fields, sizeof(fields), op, path);
	if (to) {
		jw_key(&w, "to");
		jw_str(&w, to);
	}
	if (!jw_done(&w))
		return -ENAMETOOLONG;
	if (extra && strlen(fields) + strlen(extra) + 2 < sizeof(fields))
		strcat(strcat(fields, ","), extra);
	return e2b_api_call(&e->addr, 1, fields, out, sizeof(out), err, errlen);
}

static int make_dir(struct e2b_envd *e, const struct json *req)
{
	char path[PATH_MAX], out[2048], arena_buf[8192], err[512];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *st;
	int r;

	if (req_path(e, req, "path", path, sizeof(path)))
		return 0;
	/* envd: AlreadyExists when it is there (the SDK's makeDir: false) */
	if (stat_path(e, path, out, sizeof(out), &a, &st, err, sizeof(err)) == 0)
		return e2b_rpc_error(e, "already_exists", "%s: already exists", path);
	if ((r = path_op(e, "mkdir", path, "\"parents\":true,\"mode\":493", NULL, err, sizeof(err))))
		return e2b_rpc_error(e, connect_errno_code(r), "%s: %s", path, err);
	return reply_entry(e, path);
}

static int move(struct e2b_envd *e, const struct json *req)
{
	char from[PATH_MAX], to[PATH_MAX], err[512];
	int r;

	if (req_path(e, req, "source", from, sizeof(from)) || req_path(e, req, "destination", to, sizeof(to)))
		return 0;
	if ((r = path_op(e, "rename", from, NULL, to, err, sizeof(err))))
		return e2b_rpc_error(e, connect_errno_code(r), "%s: %s", from, err);
	return reply_entry(e, to);
}

static int remove_path(struct e2b_envd *e, const struct json *req)
{
	char path[PATH_MAX], err[512];
	int r;

	if (req_path(e, req, "path", path, sizeof(path)))
		return 0;
	if ((r = path_op(e, "remove", path, "\"recursive\":true", NULL, err, sizeof(err))))
		return e2b_rpc_error(e, connect_errno_code(r), "%s: %s", path, err);
	return e2b_rpc_empty(e);
}

/* The entries of dir (the API's list, page by page) into w, and those of
 * its subdirectories down to depth levels. *count bounds the whole. */
static int list_dir(struct e2b_envd *e, struct json_writer *w, const char *dir, unsigned depth, size_t *count,
		    char *err, size_t errlen)
{
	char fields[PATH_MAX + 64], *page = malloc(FRAME_MAX + 1);
	size_t arena_sz = 4u << 20;
	struct json_arena a = { malloc(arena_sz), arena_sz, 0 };
	struct json_writer fw;
	struct api_error ae;
	int fd, r = 0, more = 1;

	e2b_op_fields(&fw, fields, sizeof(fields), "list", dir);
	fd = !page || !a.buf ? -ENOMEM : !jw_done(&fw) ? -ENAMETOOLONG : api_open_v(&e->addr, 1, fields);
	if (fd < 0) {
		snprintf(err, errlen, "%s", strerror(-fd));
		r = fd;
	}
	while (fd >= 0 && more && !r) {
		const struct json *res, *ents, *k;
		const char *jerr, *name;
		int q = api_result(fd, page, FRAME_MAX + 1, &ae);

		if (q) {
			snprintf(err, errlen, "%s: %s", dir, q == -1 ? ae.message : "the sandbox API failed");
			r = q == -1 ? -ae.eno : -EPIPE;
			break;
		}
		a.used = 0;
		res = json_parse(page, strlen(page), &a, &jerr);
		if (!res || json_get_bool(res, "more", &more))
			more = 0;
		ents = res ? json_get(res, "entries") : NULL;
		for (k = ents && ents->type == JSON_ARR ? ents->u.kids.first : NULL; k && !r; k = k->next) {
			char path[PATH_MAX];
			const char *t = "";

			if (json_get_str(k, "name", &name) || !strcmp(name, ".") || !strcmp(name, ".."))
				continue;
			if ((size_t)snprintf(path, sizeof(path), "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name) >=
			    sizeof(path))
				continue;
			if (++*count > LIST_MAX_ENTRIES) {
				snprintf(err, errlen, "more than %u entries", LIST_MAX_ENTRIES);
				r = -E2BIG;
				break;
			}
			entry_json(w, path, k);
			json_get_str(k, "type", &t);
			if (depth > 1 && !strcmp(t, "dir"))
				r = list_dir(e, w, path, depth - 1, count, err, errlen);
		}
	}
	if (fd >= 0)
		close(fd);
	free(page);
	free(a.buf);
	return r;
}

static int list(struct e2b_envd *e, const struct json *req)
{
	char path[PATH_MAX], err[512];
	size_t cap = 64u << 20, count = 0;
	char *out;
	struct json_writer w;
	int64_t depth = 1;
	int r;

	if (req_path(e, req, "path", path, sizeof(path)))
		return 0;
	if (json_get(req, "depth") && (json_get_int(req, "depth", &depth) || depth < 0))
		return e2b_rpc_error(e, "invalid_argument", "depth: a number");
	if (depth == 0)
		depth = 1;
	if (!(out = malloc(cap)))
		return e2b_rpc_error(e, "resource_exhausted", "out of memory");
	jw_init(&w, out, cap);
	jw_obj(&w);
	jw_key(&w, "entries");
	jw_arr(&w);
	r = list_dir(e, &w, path, depth > 64 ? 64 : (unsigned)depth, &count, err, sizeof(err));
	jw_arr_end(&w);
	jw_obj_end(&w);
	r = r ? e2b_rpc_error(e, connect_errno_code(r), "%s", err) : e2b_rpc_reply(e, &w);
	free(out);
	return r;
}

/* A watch event's path relative to the watched directory. */
static const char *rel(const char *root, const char *p)
{
	size_t n = strlen(root);

	if (!strncmp(p, root, n) && p[n] == '/')
		return p + n + 1;
	if (!strcmp(root, "/") && p[0] == '/')
		return p + 1;
	return p;
}

/* A temporary of the API's atomic write (".BASE.vmm-XXXXXX"). */
static int write_temp(const char *p)
{
	const char *b = strrchr(p, '/');

	b = b ? b + 1 : p;
	return b[0] == '.' && strstr(b, ".vmm-");
}

void e2b_fs_event_json(struct json_writer *w, const char *name, const char *type)
{
	jw_obj(w);
	jw_key(w, "name");
	jw_str(w, name);
	jw_key(w, "type");
	jw_str(w, type);
	jw_obj_end(w);
}

/* A WatchDirResponse's filesystem event on the stream. */
static int fs_event(void *ctx, const char *name, const char *type)
{
	char buf[PATH_MAX + 256];
	struct json_writer w;

	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "filesystem");
	e2b_fs_event_json(&w, name, type);
	jw_obj_end(&w);
	return e2b_rpc_stream_msg(ctx, &w);
}

/* One EVENT frame's events as FilesystemEvents. A write lands as the
 * API's temporary renamed over the file: that rename is the file's
 * EVENT_TYPE_WRITE, and the temporary's own events are not shown. */
int e2b_watch_events(const char *root, const char *text, size_t len, int (*emit)(void *, const char *, const char *),
		     void *e)
{
	size_t sz = 1u << 20;
	struct json_arena a = { malloc(sz), sz, 0 };
	const struct json *j, *evs, *k;
	const char *jerr;
	int r = 0;

	j = a.buf ? json_parse(text, len, &a, &jerr) : NULL;
	evs = j ? json_get(j, "events") : NULL;
	for (k = evs && evs->type == JSON_ARR ? evs->u.kids.first : NULL; k && !r; k = k->next) {
		const char *t = "", *p = "", *to = NULL;

		json_get_str(k, "type", &t);
		json_get_str(k, "path", &p);
		json_get_str(k, "to", &to);
		if (!strcmp(t, "rename") && to && write_temp(p))
			r = emit(e, rel(root, to), "EVENT_TYPE_WRITE");
		else if (write_temp(p))
			continue;
		else if (!strcmp(t, "create"))
			r = emit(e, rel(root, p), "EVENT_TYPE_CREATE");
		else if (!strcmp(t, "modify"))
			r = emit(e, rel(root, p), "EVENT_TYPE_WRITE");
		else if (!strcmp(t, "delete"))
			r = emit(e, rel(root, p), "EVENT_TYPE_REMOVE");
		else if (!strcmp(t, "rename")) {
			r = emit(e, rel(root, p), "EVENT_TYPE_RENAME");
			if (!r && to)
				r = emit(e, rel(root, to), "EVENT_TYPE_CREATE");
		}
	}
	free(a.buf);
	return r;
}

int e2b_watch_open(struct e2b_envd *e, const char *path, int recursive)
{
	char fields[PATH_MAX + 128], res[1024];
	struct json_writer w;
	struct api_error ae;
	int fd, r;

	e2b_op_fields(&w, fields, sizeof(fields), "watch", path);
	jw_key(&w, "recursive");
	jw_bool(&w, recursive);
	jw_key(&w, "coalesce_ms");
	jw_int(&w, 20);
	if (!jw_done(&w)) {
		e2b_rpc_error(e, "invalid_argument", "path: too long");
		return -ENAMETOOLONG;
	}
	fd = api_open_v(&e->addr, 2, fields);
	if (fd < 0) {
		e2b_rpc_error(e, "unavailable", "the sandbox API: %s", strerror(-fd));
		return fd;
	}
	if ((r = api_result(fd, res, sizeof(res), &ae))) {
		close(fd);
		e2b_rpc_error(e, r == -1 ? connect_errno_code(ae.eno) : "unavailable", "%s: %s", path,
			      r == -1 ? ae.message : "the sandbox API failed");
		return r == -1 ? -ae.eno : -EPIPE;
	}
	return fd;
}

static int watch_dir(struct e2b_envd *e, const struct json *req)
{
	char path[PATH_MAX], res[1024], *buf = NULL;
	struct json_writer w;
	struct api_error ae;
	int rec = 0, fd, r;

	if (!e->stream)
		return e2b_rpc_error(e, "unimplemented", "WatchDir is a server-streaming call");
	if (req_path(e, req, "path", path, sizeof(path)))
		return 0;
	json_get_bool(req, "recursive", &rec);
	if ((fd = e2b_watch_open(e, path, rec)) < 0)
		return 0;
	jw_init(&w, res, sizeof(res));
	jw_raw(&w, "{\"start\":{}}");
	if (!(buf = malloc(FRAME_MAX + 1)) || e2b_rpc_stream_msg(e, &w)) {
		r = -EPIPE;
		goto out;
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = e->c->fd, .events = POLLRDHUP } };
		int n = poll(p, 2, KEEPALIVE_S * 1000);
		uint8_t type;
		size_t len;

		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			r = -EPIPE; /* the SDK's stop(): the watch ends with the connection */
			break;
		}
		if (n == 0) {
			jw_init(&w, res, sizeof(res));
			jw_raw(&w, "{\"keepalive\":{}}");
			if ((r = e2b_rpc_stream_msg(e, &w)))
				break;
			continue;
		}
		if (frame_read(fd, &type, buf, FRAME_MAX, &len)) {
			r = e2b_rpc_stream_end(e, "unavailable", "the sandbox API closed the watch");
			break;
		}
		if (type == F_EVENT && (r = e2b_watch_events(path, buf, len, fs_event, e)))
			break;
		if (type == F_ERROR) {
			buf[len] = '\0';
			api_parse_error(buf, len, &ae);
			r = e2b_rpc_stream_end(e, connect_errno_code(ae.eno), ae.message);
			break;
		}
	}
out:
	close(fd);
	free(buf);
	return r;
}

int e2b_fs(struct e2b_envd *e, const char *method, const struct json *req)
{
	char path[PATH_MAX];

	if (!strcmp(method, "Stat")) {
		if (req_path(e, req, "path", path, sizeof(path)))
			return 0;
		return reply_entry(e, path);
	}
	if (!strcmp(method, "MakeDir"))
		return make_dir(e, req);
	if (!strcmp(method, "Move"))
		return move(e, req);
	if (!strcmp(method, "ListDir"))
		return list(e, req);
	if (!strcmp(method, "Remove"))
		return remove_path(e, req);
	if (!strcmp(method, "WatchDir"))
		return watch_dir(e, req);
	if (!strcmp(method, "CreateWatcher") || !strcmp(method, "GetWatcherEvents") || !strcmp(method, "RemoveWatcher"))
		return e2b_watcher(e, method, req);
	return e2b_rpc_error(e, "unimplemented", "filesystem.Filesystem/%s is not served by vmm's E2B gateway", method);
}
