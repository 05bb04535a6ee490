/* The watch op (docs/api.md): inotify on a path (and, recursively, on
 * every directory under it, new ones included), events coalesced over
 * "coalesce_ms" and sent as EVENT frames until the client disconnects.
 * Runs in the connection's own process, so its memory goes with it. */
#include "guest-init/guest_watch.h"
#include "guest-init/ops.h"
#include "vmm/wire/proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define WATCH_MAX_DIRS 8192 /* inotify watches one request may hold */
#define WATCH_MAX_DEPTH 64
#define WATCH_MASK (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
		    IN_MOVE_SELF | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

/* ---- the batch (pure) -------------------------------------------------------- */

void watch_batch_reset(struct watch_batch *b)
{
	b->n = 0;
	b->used = 0;
	b->first_ms = 0;
}

static const char *ev_path(const struct watch_batch *b, uint32_t off)
{
	return off == WATCH_NONE ? NULL : b->pool + off;
}

/* The newest event that names path (as its path, or a rename's arrival). */
static struct watch_event *last_for(struct watch_batch *b, const char *path, int *as_to)
{
	unsigned i = b->n;

	while (i--) {
		struct watch_event *e = &b->ev[i];

		if (e->type == WATCH_OVERFLOW)
			continue;
		if (e->to != WATCH_NONE && !strcmp(b->pool + e->to, path)) {
			*as_to = 1;
			return e;
		}
		if (!strcmp(b->pool + e->path, path)) {
			*as_to = 0;
			return e;
		}
	}
	return NULL;
}

static int pool_put(struct watch_batch *b, const char *s, uint32_t *off)
{
	size_t n = strlen(s) + 1;

	if (n > WATCH_POOL - b->used)
		return -ENOSPC;
	memcpy(b->pool + b->used, s, n);
	*off = (uint32_t)b->used;
	b->used += n;
	return 0;
}

int watch_batch_add(struct watch_batch *b, enum watch_type t, int dir, const char *path, uint32_t cookie)
{
	struct watch_event *e;
	int as_to = 0;

	if (t == WATCH_OVERFLOW) {
		if (b->n && b->ev[b->n - 1].type == WATCH_OVERFLOW)
			return 1;
		path = "";
	} else {
		e = last_for(b, path, &as_to);
		if (e) {
			int created = (e->type == WATCH_CREATE && !as_to) || (e->type == WATCH_RENAME && as_to);

			if (t == WATCH_MODIFY && (created || (e->type == WATCH_MODIFY && !as_to)))
				return 1;
			if ((t == WATCH_CREATE || t == WATCH_DELETE) && e->type == t && !as_to)
				return 1;
		}
	}
	if (b->n == WATCH_BATCH_MAX)
		return -ENOSPC;
	e = &b->ev[b->n];
	if (pool_put(b, path, &e->path))
		return -ENOSPC;
	e->type = (uint8_t)t;
	e->dir = (uint8_t)!!dir;
	e->to = WATCH_NONE;
	e->cookie = cookie;
	b->n++;
	return 0;
}

int watch_batch_moved_to(struct watch_batch *b, int dir, const char *path, uint32_t cookie)
{
	unsigned i = b->n;

	while (cookie && i--) {
		struct watch_event *e = &b->ev[i];

		if (e->type == WATCH_RENAME && e->to == WATCH_NONE && e->cookie == cookie)
			return pool_put(b, path, &e->to);
	}
	return watch_batch_add(b, WATCH_CREATE, dir, path, 0);
}

void watch_batch_json(const struct watch_batch *b, struct json_writer *w)
{
	static const char *const names[] = { "create", "modify", "delete", "rename", "overflow" };
	unsigned i;

	jw_obj(w);
	jw_key(w, "events");
	jw_arr(w);
	for (i = 0; i < b->n; i++) {
		const struct watch_event *e = &b->ev[i];
		int gone = e->type == WATCH_RENAME && e->to == WATCH_NONE;

		jw_obj(w);
		jw_key(w, "type");
		jw_str(w, gone ? "delete" : names[e->type]);
		if (e->type != WATCH_OVERFLOW) {
			jw_key(w, "path");
			jw_str(w, ev_path(b, e->path));
			if (e->type == WATCH_RENAME && !gone) {
				jw_key(w, "to");
				jw_str(w, ev_path(b, e->to));
			}
			jw_key(w, "dir");
			jw_bool(w, e->dir);
		}
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

/* ---- inotify ------------------------------------------------------------------ */

struct watcher {
	int fd, ifd, recursive;
	uint64_t window;
	struct { int wd; char *path; } dirs[WATCH_MAX_DIRS];
	unsigned nr_dirs;
	int limit_said;
	int root_wd;
	int gone;                /* the client left */
	struct watch_batch b;
	char out[WATCH_POOL + WATCH_BATCH_MAX * 64 + 1024];
};

static void flush(struct watcher *w)
{
	struct json_writer jw;

	if (!w->b.n)
		return;
	jw_init(&jw, w->out, sizeof(w->out));
	watch_batch_json(&w->b, &jw);
	if (jw_done(&jw) && frame_write(w->fd, F_EVENT, jw.buf, jw.len))
		w->gone = 1;
	watch_batch_reset(&w->b);
}

static void emit(struct watcher *w, enum watch_type t, int dir, const char *path, uint32_t cookie, int arrival)
{
	int r;

	if (!w->b.n)
		w->b.first_ms = now_ms();
	r = arrival ? watch_batch_moved_to(&w->b, dir, path, cookie) : watch_batch_add(&w->b, t, dir, path, cookie);
	if (r == -ENOSPC) {
		flush(w);
		w->b.first_ms = now_ms();
		/* A lone rename's arrival in a fresh batch is a create. */
		if (arrival)
			watch_batch_moved_to(&w->b, dir, path, cookie);
		else
			watch_batch_add(&w->b, t, dir, path, cookie);
	}
}

static const char *dir_of(struct watcher *w, int wd)
{
	unsigned i;

	for (i = 0; i < w->nr_dirs; i++)
		if (w->dirs[i].wd == wd)
			return w->dirs[i].path;
	return NULL;
}

static void forget(struct watcher *w, int wd)
{
	unsigned i;

	for (i = 0; i < w->nr_dirs; i++)
		if (w->dirs[i].wd == wd) {
			free(w->dirs[i].path);
			w->dirs[i] = w->dirs[--w->nr_dirs];
			return;
		}
}

/* Watches path (and with recursive every directory under it). report:
 * say what is found as created (a directory that just appeared: its
 * entries may predate its watch). 0 or -errno for path itself. */
static int add_tree(struct watcher *w, const char *path, int depth, int report)
{
	struct dirent *de;
	DIR *d;
	int wd;
	unsigned i;

	if (w->nr_dirs == WATCH_MAX_DIRS) {
		if (!w->limit_said)
			emit(w, WATCH_OVERFLOW, 0, "", 0, 0); /* some changes will go unseen */
		w->limit_said = 1;
		return -ENOSPC;
	}
	wd = inotify_add_watch(w->ifd, path, WATCH_MASK);
	if (wd < 0)
		return -errno;
	for (i = 0; i < w->nr_dirs && w->dirs[i].wd != wd; i++)
		;
	if (i == w->nr_dirs) {
		w->dirs[i].path = strdup(path);
		if (!w->dirs[i].path) {
			inotify_rm_watch(w->ifd, wd);
			return -ENOMEM;
		}
		w->dirs[i].wd = wd;
		w->nr_dirs++;
	}
	if (!w->recursive || depth >= WATCH_MAX_DEPTH)
		return 0;
	d = opendir(path);
	if (!d)
		return 0; /* a file */
	while ((de = readdir(d))) {
		char sub[PATH_MAX];
		struct stat st;
		int isdir;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", strcmp(path, "/") ? path : "", de->d_name) >= (int)sizeof(sub))
			continue;
		if (lstat(sub, &st) < 0)
			continue;
		isdir = S_ISDIR(st.st_mode);
		if (report)
			emit(w, WATCH_CREATE, isdir, sub, 0, 0);
		if (isdir)
			add_tree(w, sub, depth + 1, report);
	}
	closedir(d);
	return 0;
}

/* A directory renamed inside the tree: its watches keep their wds, the
 * paths under it change. */
static void rename_dirs(struct watcher *w, const char *from, const char *to)
{
	size_t n = strlen(from);
	unsigned i;

	for (i = 0; i < w->nr_dirs; i++) {
		char *p = w->dirs[i].path, *np;

		if (strncmp(p, from, n) || (p[n] && p[n] != '/'))
			continue;
		if (asprintf(&np, "%s%s", to, p + n) < 0)
			continue;
		free(p);
		w->dirs[i].path = np;
	}
}

static void handle(struct watcher *w, const struct inotify_event *ev, char *moved_from, uint32_t *moved_cookie)
{
	char full[PATH_MAX];
	const char *dir;
	int isdir = !!(ev->mask & IN_ISDIR);

	if (ev->mask & IN_Q_OVERFLOW) {
		emit(w, WATCH_OVERFLOW, 0, "", 0, 0);
		return;
	}
	dir = dir_of(w, ev->wd);
	if (!dir)
		return;
	if (ev->mask & IN_IGNORED) {
		forget(w, ev->wd);
		return;
	}
	if (ev->len && ev->name[0]) {
		if (snprintf(full, sizeof(full), "%s/%s", strcmp(dir, "/") ? dir : "", ev->name) >= (int)sizeof(full))
			return;
	} else {
		snprintf(full, sizeof(full), "%s", dir);
	}
	if (ev->mask & IN_CREATE) {
		emit(w, WATCH_CREATE, isdir, full, 0, 0);
		if (isdir && w->recursive)
			add_tree(w, full, 1, 1);
	} else if (ev->mask & IN_MODIFY) {
		emit(w, WATCH_MODIFY, isdir, full, 0, 0);
	} else if (ev->mask & IN_DELETE) {
		emit(w, WATCH_DELETE, isdir, full, 0, 0);
	} else if (ev->mask & IN_MOVED_FROM) {
		emit(w, WATCH_RENAME, isdir, full, ev->cookie, 0);
		if (isdir) {
			snprintf(moved_from, PATH_MAX, "%s", full);
			*moved_cookie = ev->cookie;
		}
	} else if (ev->mask & IN_MOVED_TO) {
		emit(w, WATCH_RENAME, isdir, full, ev->cookie, 1);
		if (isdir && w->recursive) {
			if (*moved_cookie && *moved_cookie == ev->cookie)
				rename_dirs(w, moved_from, full);
			else
				add_tree(w, full, 1, 1); /* moved in from outside */
		}
	} else if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) && ev->wd == w->root_wd) {
		/* The watched path itself went (only the root reports it: a
		 * subdirectory's removal came from its parent already). */
		emit(w, WATCH_DELETE, isdir, full, 0, 0);
	}
}

void watch_serve(int fd, const struct api_request *r)
{
	static struct watcher w;
	static char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	static char moved_from[PATH_MAX];
	uint32_t moved_cookie = 0;
	char meta[128];
	struct json_writer jw;
	struct stat st;
	int e;

	memset(&w, 0, sizeof(w));
	w.fd = fd;
	w.recursive = r->recursive;
	w.window = (uint64_t)r->coalesce_ms;
	if (stat(r->path, &st) < 0) {
		api_send_error(fd, errno, "cannot watch that path");
		return;
	}
	w.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w.ifd < 0) {
		api_send_error(fd, errno, "inotify is not available");
		return;
	}
	e = add_tree(&w, r->path, 0, 0);
	if (e < 0) {
		api_send_error(fd, -e, "cannot watch that path");
		close(w.ifd);
		return;
	}
	w.root_wd = w.dirs[0].wd;
	jw_init(&jw, meta, sizeof(meta));
	jw_obj(&jw);
	jw_key(&jw, "watching");
	jw_int(&jw, w.nr_dirs);
	jw_key(&jw, "recursive");
	jw_bool(&jw, w.recursive);
	jw_obj_end(&jw);
	api_send_json(fd, F_RESULT, &jw);
	flush(&w); /* a watch limit hit while setting up */
	while (!w.gone) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = w.ifd, .events = POLLIN } };
		int timeout = -1;

		if (w.b.n) {
			uint64_t t = now_ms(), due = w.b.first_ms + w.window;

			timeout = t >= due ? 0 : (int)(due - t);
		}
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			ssize_t n = read(fd, buf, sizeof(buf)); /* frames from the client are ignored */

			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				break;
		}
		if (p[1].revents & POLLIN) {
			ssize_t n = read(w.ifd, buf, sizeof(buf)), off = 0;

			while (n > 0 && off + (ssize_t)sizeof(struct inotify_event) <= n) {
				const struct inotify_event *ev = (const void *)(buf + off);

				handle(&w, ev, moved_from, &moved_cookie);
				off += (ssize_t)(sizeof(*ev) + ev->len);
			}
		}
		if (w.b.n && now_ms() >= w.b.first_ms + w.window)
			flush(&w);
	}
	close(w.ifd);
	while (w.nr_dirs)
		free(w.dirs[--w.nr_dirs].path);
}
