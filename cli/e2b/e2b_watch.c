/* filesystem.Filesystem's polled watchers (CreateWatcher,
 * GetWatcherEvents, RemoveWatcher: the Python SDK's synchronous
 * watch_dir): each holds one sandbox API watch (docs/api.md, "watch") read
 * by a thread of its own into a bounded list of FilesystemEvents, which
 * GetWatcherEvents hands over and empties. They live in the gateway (its
 * table, E2B_WATCHERS at most) and belong to one sandbox: another's ID
 * does not find them. A watcher whose watch ended (the sandbox paused or
 * stopped) answers what it kept, then not_found. */
#include "cli/e2b/e2b_priv.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define WATCHER_EVENTS_MAX (1u << 20) /* bytes of events kept between polls; more are dropped */

struct e2b_watcher {
	struct e2b_server *srv;
	char id[33];
	char sandbox[SANDBOX_NAME_MAX + 1];
	char root[PATH_MAX];
	int fd;
	pthread_t th;
	char *events; /* "{...},{...}" (under srv->lock) */
	size_t len;
	int ended;
};

struct collect {
	struct e2b_watcher *w;
};

/* An event into the list (under the lock), if there is room. */
static int collect(void *ctx, const char *name, const char *type)
{
	struct e2b_watcher *wt = ((struct collect *)ctx)->w;
	char buf[PATH_MAX + 128];
	struct json_writer w;

	jw_init(&w, buf, sizeof(buf));
	e2b_fs_event_json(&w, name, type);
	if (!jw_done(&w))
		return 0;
	pthread_mutex_lock(&wt->srv->lock);
	if (wt->len + w.len + 1 <= WATCHER_EVENTS_MAX) {
		char *nb = realloc(wt->events, wt->len + w.len + 2);

		if (nb) {
			if (wt->len)
				nb[wt->len++] = ',';
			memcpy(nb + wt->len, w.buf, w.len + 1);
			wt->len += w.len;
			wt->events = nb;
		}
	}
	pthread_mutex_unlock(&wt->srv->lock);
	return 0;
}

static void *watcher_main(void *arg)
{
	struct e2b_watcher *wt = arg;
	struct collect c = { wt };
	char *buf = malloc(FRAME_MAX + 1);

	while (buf) {
		uint8_t type;
		size_t len;

		if (frame_read(wt->fd, &type, buf, FRAME_MAX, &len) || type == F_ERROR)
			break;
		if (type == F_EVENT)
			e2b_watch_events(wt->root, buf, len, collect, &c);
	}
	free(buf);
	pthread_mutex_lock(&wt->srv->lock);
	wt->ended = 1;
	pthread_mutex_unlock(&wt->srv->lock);
	return NULL;
}

/* The slot of watcher id of this sandbox (under the lock), or -1. */
static int find(struct e2b_server *srv, const char *sandbox, const char *id)
{
	int i;

	for (i = 0; i < E2B_WATCHERS; i++)
		if (srv->watchers[i] && !strcmp(srv->watchers[i]->id, id) && !strcmp(srv->watchers[i]->sandbox, sandbox))
			return i;
	return -1;
}

static void watcher_free(struct e2b_watcher *wt)
{
	shutdown(wt->fd, SHUT_RDWR);
	pthread_join(wt->th, NULL);
	close(wt->fd);
	free(wt->events);
	free(wt);
}

static int create(struct e2b_envd *e, const struct json *req)
{
	struct e2b_server *srv = e->c->srv;
	struct e2b_watcher *wt = calloc(1, sizeof(*wt));
	unsigned char rnd[16];
	char out[128];
	const char *p;
	struct json_writer w;
	int rec = 0, i, slot = -1;

	if (!wt)
		return e2b_rpc_error(e, "resource_exhausted", "out of memory");
	if (json_get_str(req, "path", &p) || e2b_abs_path(p, wt->root, sizeof(wt->root))) {
		free(wt);
		return e2b_rpc_error(e, "invalid_argument", "path: a path");
	}
	json_get_bool(req, "recursive", &rec);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		free(wt);
		return e2b_rpc_error(e, "internal", "no random ID");
	}
	for (i = 0; i < 16; i++)
		snprintf(wt->id + 2 * i, 3, "%02x", rnd[i]);
	snprintf(wt->sandbox, sizeof(wt->sandbox), "%s", e->sb.name);
	wt->srv = srv;
	if ((wt->fd = e2b_watch_open(e, wt->root, rec)) < 0) {
		free(wt);
		return 0; /* answered */
	}
	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < E2B_WATCHERS && slot < 0; i++)
		if (!srv->watchers[i])
			slot = i;
	if (slot >= 0 && pthread_create(&wt->th, NULL, watcher_main, wt) == 0)
		srv->watchers[slot] = wt;
	else
		slot = -1;
	pthread_mutex_unlock(&srv->lock);
	if (slot < 0) {
		close(wt->fd);
		free(wt);
		return e2b_rpc_error(e, "resource_exhausted", "at most %d watchers at once", E2B_WATCHERS);
	}
	jw_init(&w, out, sizeof(out));
	jw_obj(&w);
	jw_key(&w, "watcherId");
	jw_str(&w, wt->id);
	jw_obj_end(&w);
	return e2b_rpc_reply(e, &w);
}

static int poll_events(struct e2b_envd *e, const char *id)
{
	struct e2b_server *srv = e->c->srv;
	char *events = NULL;
	size_t len = 0;
	int i, ended = 0, k;

	pthread_mutex_lock(&srv->lock);
	i = find(srv, e->sb.name, id);
	if (i >= 0) {
		events = srv->watchers[i]->events;
		len = srv->watchers[i]->len;
		ended = srv->watchers[i]->ended;
		srv->watchers[i]->events = NULL;
		srv->watchers[i]->len = 0;
	}
	pthread_mutex_unlock(&srv->lock);
	if (i < 0 || (ended && !len))
		return e2b_rpc_error(e, "not_found", "watcher %s: %s", id, i < 0 ? "no such watcher" : "its watch ended");
	{
		size_t cap = len + 64;
		char *out = malloc(cap);
		struct json_writer w;

		if (!out) {
			free(events);
			return e2b_rpc_error(e, "resource_exhausted", "out of memory");
		}
		/* the kept events are JSON already: put together as text */
		jw_init(&w, out, cap);
		w.len = (size_t)snprintf(out, cap, "{\"events\":[%s]}", len ? events : "");
		k = e2b_rpc_reply(e, &w);
		free(out);
	}
	free(events);
	return k;
}

static int remove_watcher(struct e2b_envd *e, const char *id)
{
	struct e2b_server *srv = e->c->srv;
	struct e2b_watcher *wt = NULL;
	int i;

	pthread_mutex_lock(&srv->lock);
	i = find(srv, e->sb.name, id);
	if (i >= 0) {
		wt = srv->watchers[i];
		srv->watchers[i] = NULL;
	}
	pthread_mutex_unlock(&srv->lock);
	if (!wt)
		return e2b_rpc_error(e, "not_found", "watcher %s: no such watcher", id);
	watcher_free(wt);
	return e2b_rpc_empty(e);
}

int e2b_watcher(struct e2b_envd *e, const char *method, const struct json *req)
{
	const char *id;

	if (!strcmp(method, "CreateWatcher"))
		return create(e, req);
	if (json_get_str(req, "watcherId", &id) || !id[0])
		return e2b_rpc_error(e, "invalid_argument", "watcherId: a watcher's ID");
	if (!strcmp(method, "GetWatcherEvents"))
		return poll_events(e, id);
	return remove_watcher(e, id);
}

void e2b_watchers_free(struct e2b_server *srv)
{
	int i;

	for (i = 0; i < E2B_WATCHERS; i++)
		if (srv->watchers[i]) {
			watcher_free(srv->watchers[i]);
			srv->watchers[i] = NULL;
		}
}
