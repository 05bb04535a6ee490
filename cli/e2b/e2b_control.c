/* E2B's control plane (../shared/specs/e2b/openapi.yml; the SDK's
 * /v2/sandboxes and /v2/sandboxes/{id}/connect too) on vmm sandboxes:
 * a template is a vmm image (`base`, or any NAME[:VERSION] of `vmm image
 * ls`), a sandbox one started as `vmm run -d --image TEMPLATE` (from the
 * image's warm snapshot when it has one), its ID its vmm name. What E2B
 * keeps about it (template, times, metadata, envVars, autoPause, its envd
 * access token) is the record E2B_RECORD in its folder; only sandboxes
 * with one are E2B's. Pause is vmm's standby (`vmm suspend`), connect or
 * resume its wake; the timeout is the gateway's (e2b_reap). */
#include "cli/e2b/e2b_priv.h"
#include "cli/util/util.h"
#include "vmm/base/log.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define E2B_TIMEOUT_DEFAULT 15          /* openapi.yml NewSandbox.timeout */
#define E2B_TIMEOUT_MAX (24 * 3600)     /* E2B's longest */

/* ---- vmm's verbs, run as tools ---- */

/* In the child before the exec: the gateway blocks SIGINT and SIGTERM
 * (its signalfd) and ignores SIGPIPE, and a child inherits both; vmm
 * run's VMM and helpers must get them as usual (a helper stopped with a
 * blocked SIGTERM was waited for, then killed: seconds on every create). */
static int default_signals(void *arg)
{
	sigset_t none;

	(void)arg;
	sigemptyset(&none);
	signal(SIGPIPE, SIG_DFL);
	return sigprocmask(SIG_SETMASK, &none, NULL);
}

/* vmm ARGV... (argv[0] is set here); its exit status. */
static int run_vmm(const struct e2b_server *srv, const char **argv)
{
	argv[0] = srv->o->vmm_path;
	return cli_run_tool_in(argv, 1, default_signals, NULL);
}

int e2b_vmm(const struct e2b_server *srv, const char *verb, const char *id)
{
	const char *argv[] = { NULL, verb, id, NULL };

	return run_vmm(srv, argv);
}

/* ---- the record ---- */

/* A JSON object of strings copied as text (metadata, envVars). */
static int copy_strmap(const struct json *o, char *out, size_t len)
{
	struct json_writer w;
	const struct json *k;

	jw_init(&w, out, len);
	jw_obj(&w);
	for (k = o && o->type == JSON_OBJ ? o->u.kids.first : NULL; k; k = k->next) {
		if (k->type != JSON_STR)
			return -EINVAL;
		jw_key(&w, k->key);
		jw_text(&w, k->u.str.s, k->u.str.len);
	}
	jw_obj_end(&w);
	if (o && o->type != JSON_OBJ && o->type != JSON_NULL)
		return -EINVAL;
	return jw_done(&w) ? 0 : -E2BIG;
}

int e2b_rec_read(const char *dir, struct e2b_rec *rec)
{
	char path[PATH_MAX + 16], text[16384], arena_buf[65536];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *root;
	const char *err, *s;
	int64_t v;
	int r, b;

	memset(rec, 0, sizeof(*rec));
	snprintf(path, sizeof(path), "%s/%s", dir, E2B_RECORD);
	if ((r = cli_read_text(path, text, sizeof(text))) < 0)
		return r;
	root = json_parse(text, strlen(text), &a, &err);
	if (!root || root->type != JSON_OBJ)
		return -EINVAL;
	if (json_get_str(root, "templateID", &s) == 0)
		snprintf(rec->template_id, sizeof(rec->template_id), "%s", s);
	if (json_get_str(root, "token", &s) == 0)
		snprintf(rec->token, sizeof(rec->token), "%s", s);
	if (json_get_int(root, "startedAt", &v) == 0)
		rec->started = v;
	if (json_get_int(root, "endAt", &v) == 0)
		rec->end = v;
	if (json_get_bool(root, "autoPause", &b) == 0)
		rec->auto_pause = b;
	if (copy_strmap(json_get(root, "metadata"), rec->metadata, sizeof(rec->metadata)) ||
	    copy_strmap(json_get(root, "envVars"), rec->envs, sizeof(rec->envs)))
		return -EINVAL;
	return 0;
}

int e2b_rec_write(const char *dir, const struct e2b_rec *rec)
{
	char text[16384];
	struct json_writer w;

	jw_init(&w, text, sizeof(text));
	jw_obj(&w);
	jw_key(&w, "templateID");
	jw_str(&w, rec->template_id);
	jw_key(&w, "startedAt");
	jw_int(&w, rec->started);
	jw_key(&w, "endAt");
	jw_int(&w, rec->end);
	jw_key(&w, "autoPause");
	jw_bool(&w, rec->auto_pause);
	jw_key(&w, "token");
	jw_str(&w, rec->token);
	jw_key(&w, "metadata");
	jw_raw(&w, rec->metadata[0] ? rec->metadata : "{}");
	jw_key(&w, "envVars");
	jw_raw(&w, rec->envs[0] ? rec->envs : "{}");
	jw_obj_end(&w);
	if (!jw_done(&w))
		return -E2BIG;
	return sandbox_write_file(dir, E2B_RECORD, text, w.len);
}

/* ---- answers ---- */

static void jw_time(struct json_writer *w, long long t)
{
	char buf[40];
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jw_str(w, buf);
}

/* The members every sandbox answer opens with. */
static void ids_json(struct json_writer *w, const char *id, const struct e2b_rec *rec)
{
	jw_obj(w);
	jw_key(w, "templateID");
	jw_str(w, rec->template_id);
	jw_key(w, "alias");
	jw_str(w, rec->template_id);
	jw_key(w, "sandboxID");
	jw_str(w, id);
	jw_key(w, "clientID");
	jw_str(w, "vmm");
}

/* Sandbox (openapi.yml): what create, connect and resume answer. */
static void sandbox_json(struct json_writer *w, const char *id, const struct e2b_rec *rec)
{
	ids_json(w, id, rec);
	jw_key(w, "envdVersion");
	jw_str(w, E2B_ENVD_VERSION);
	jw_key(w, "envdAccessToken");
	jw_str(w, rec->token);
	jw_key(w, "trafficAccessToken");
	jw_null(w);
	jw_key(w, "domain");
	jw_null(w);
	jw_obj_end(w);
}

/* ListedSandbox, or with detail SandboxDetail. */
static void listed_json(struct json_writer *w, const char *id, const struct e2b_rec *rec,
			const struct sandbox_status *st, int detail)
{
	ids_json(w, id, rec);
	jw_key(w, "startedAt");
	jw_time(w, rec->started);
	jw_key(w, "endAt");
	jw_time(w, rec->end);
	jw_key(w, "cpuCount");
	jw_int(w, st->cpus ? st->cpus : 1);
	jw_key(w, "memoryMB");
	jw_int(w, st->mem_mib >= 128 ? (int64_t)st->mem_mib : 128);
	jw_key(w, "diskSizeMB");
	jw_int(w, 0);
	jw_key(w, "metadata");
	jw_raw(w, rec->metadata[0] ? rec->metadata : "{}");
	jw_key(w, "state");
	jw_str(w, st->state == SB_STANDBY ? "paused" : "running");
	jw_key(w, "envdVersion");
	jw_str(w, E2B_ENVD_VERSION);
	jw_key(w, "volumeMounts");
	jw_raw(w, "[]");
	if (detail) {
		jw_key(w, "envdAccessToken");
		jw_str(w, rec->token);
		jw_key(w, "domain");
		jw_null(w);
		jw_key(w, "lifecycle");
		jw_obj(w);
		jw_key(w, "autoResume");
		jw_bool(w, 0);
		jw_key(w, "onTimeout");
		jw_str(w, rec->auto_pause ? "pause" : "kill");
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

/* An E2B sandbox by ID: its status and record. 0, or -ENOENT (none, not
 * E2B's, or gone: exited or dead). */
static int lookup(const char *id, struct sandbox_status *st, struct e2b_rec *rec)
{
	if (!sandbox_name_ok(id) || sandbox_status(id, st) || e2b_rec_read(st->sb.dir, rec))
		return -ENOENT;
	if (st->state != SB_RUNNING && st->state != SB_PAUSED && st->state != SB_STARTING && st->state != SB_STANDBY)
		return -ENOENT;
	return 0;
}

static int not_found(struct e2b_conn *c, const char *id)
{
	return e2b_send_error(c, 404, "sandbox \"%s\" not found", id);
}

/* A request body as JSON (an empty body: {}). */
static const struct json *body_json(const struct e2b_req *r, struct json_arena *a)
{
	const char *err;

	if (!r->body_len)
		return json_parse("{}", 2, a, &err);
	return json_parse(r->body, r->body_len, a, &err);
}

/* An integer member in [0, max], or def if absent. -EINVAL if mistyped. */
static int get_secs(const struct json *o, const char *key, long long def, long long *out)
{
	const struct json *j = json_get(o, key);
	int64_t v;

	*out = def;
	if (!j || j->type == JSON_NULL)
		return 0;
	if (json_get_int(o, key, &v) || v < 0)
		return -EINVAL;
	*out = v > E2B_TIMEOUT_MAX ? E2B_TIMEOUT_MAX : v;
	return 0;
}

/* ---- the calls ---- */

static int new_id(char *id, size_t len)
{
	static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char rnd[19];
	size_t i;

	if (len < 21 || getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	id[0] = 'i';
	for (i = 0; i < sizeof(rnd); i++)
		id[i + 1] = al[rnd[i] % 36];
	id[20] = '\0';
	return 0;
}

static int template_ok(const char *t)
{
	size_t n = strlen(t);

	return n && n < 100 && strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-:/") == n &&
	       t[0] != '-' && t[0] != '.';
}

/* A new E2B sandbox from what `argv` starts (vmm run -d or restore -d,
 * argv[4] its name): its token and record (a copy of *like's template,
 * metadata and envVars), then *rec filled. 0 or -errno (then nothing of
 * it is left). */
static int start_sandbox(struct e2b_server *srv, const char **argv, const char *id, const struct e2b_rec *like,
			 long long timeout, int auto_pause, struct e2b_rec *rec)
{
	struct sandbox sb;
	int k = run_vmm(srv, argv);

	if (k != 0 || sandbox_lookup(&sb, id)) {
		log_warn("e2b: vmm %s for sandbox %s failed: status %d", argv[1], id, k);
		return -EIO;
	}
	*rec = *like;
	rec->started = (long long)time(NULL);
	rec->end = rec->started + timeout;
	rec->auto_pause = auto_pause;
	if ((k = e2b_token_issue(sb.dir, rec->token, sizeof(rec->token))) || (k = e2b_rec_write(sb.dir, rec))) {
		struct sandbox_status st;

		if (sandbox_status(id, &st) == 0 && sandbox_stop(&st, 0) == 0)
			sandbox_delete(&st.sb);
		return k;
	}
	return 0;
}

static int create(struct e2b_conn *c, const struct e2b_req *r)
{
	char arena_buf[65536], id[32];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *b = body_json(r, &a), *vm;
	struct e2b_rec rec, like = { 0 };
	const char *tmpl;
	long long timeout, t0;
	int k, ap = 0;

	if (!b || b->type != JSON_OBJ)
		return e2b_send_error(c, 400, "the body is not a JSON object");
	if (json_get_str(b, "templateID", &tmpl) || !template_ok(tmpl))
		return e2b_send_error(c, 400, "templateID: the name of a vmm image (base, NAME or NAME:VERSION)");
	if (get_secs(b, "timeout", E2B_TIMEOUT_DEFAULT, &timeout))
		return e2b_send_error(c, 400, "timeout: seconds");
	vm = json_get(b, "autoPause");
	if (vm && vm->type != JSON_NULL && json_get_bool(b, "autoPause", &ap))
		return e2b_send_error(c, 400, "autoPause: a boolean");
	if (copy_strmap(json_get(b, "metadata"), like.metadata, sizeof(like.metadata)))
		return e2b_send_error(c, 400, "metadata: an object of strings");
	if (copy_strmap(json_get(b, "envVars"), like.envs, sizeof(like.envs)))
		return e2b_send_error(c, 400, "envVars: an object of strings");
	vm = json_get(b, "volumeMounts");
	if (vm && vm->type == JSON_ARR && vm->u.kids.count)
		return e2b_send_error(c, 400, "volumeMounts: volumes are not supported by vmm's E2B gateway "
					      "(vmm drives are: docs/e2b.md)");
	if (new_id(id, sizeof(id)))
		return e2b_send_error(c, 500, "no random ID");
	t0 = cli_mono_ms();
	snprintf(like.template_id, sizeof(like.template_id), "%s", tmpl);
	{
		/* only options a warm restore honours (cli/images/image_store.c,
		 * warm_ok): any other makes it a cold boot, 3x slower */
		const char *argv[8 + E2B_RUN_ARGS_MAX] = { NULL, "run", "-d", "--name", id, "--image", tmpl };
		const char *const *ra = c->srv->o->run_args;
		unsigned n = 7;

		/* the operator's --run-arg options (an --egress-policy, --mem) */
		while (ra && *ra && n < 7 + E2B_RUN_ARGS_MAX)
			argv[n++] = *ra++;
		argv[n] = NULL;
		k = start_sandbox(c->srv, argv, id, &like, timeout, ap, &rec);
	}
	if (k == -EIO)
		return e2b_send_error(c, 400, "template \"%s\": the sandbox did not start (is it a vmm image? "
					      "vmm image ls); the gateway's log says why", tmpl);
	if (k)
		return e2b_send_error(c, 500, "sandbox %s: its record: %s", id, strerror(-k));
	{
		char out[4096];
		struct json_writer w;

		jw_init(&w, out, sizeof(out));
		sandbox_json(&w, id, &rec);
		log_debug("e2b: %s: created in %lld ms", id, cli_mono_ms() - t0);
		return e2b_send_json(c, 201, &w);
	}
}

/* Counts a fork in progress (+1) or done (-1): the sweep leaves the
 * snapshots alone meanwhile, as the newest has no clone yet. */
static void fork_hold(struct e2b_server *srv, int d)
{
	pthread_mutex_lock(&srv->lock);
	srv->forking += (unsigned)d;
	if (d > 0)
		srv->forks++;
	pthread_mutex_unlock(&srv->lock);
}

static int fork_clones(struct e2b_conn *c, const char *src, const char *dir, int count, long long timeout,
		       const struct e2b_rec *like);

/* fork: the sandbox snapshotted in place (vmm snapshot: paused a moment,
 * then running on), and count clones restored from it (vmm restore -d),
 * each its own E2B sandbox with the source's template, metadata and
 * envVars. The snapshot stays in the state directory's .e2b/snapshots
 * while a sandbox restored from it lives (clones map its memory; one on
 * standby links it): the reaper removes it after the last
 * (sweep_fork_snapshots), so repeated forks do not fill the disk. */
static int fork_sandbox(struct e2b_conn *c, const struct e2b_req *r, const char *src)
{
	char arena_buf[4096], dir[PATH_MAX + 64];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *b = body_json(r, &a);
	struct sandbox_status st;
	struct e2b_rec like;
	long long timeout, count;
	char snap_id[32];
	int k;

	if (lookup(src, &st, &like))
		return not_found(c, src);
	if (st.state != SB_RUNNING)
		return e2b_send_error(c, 409, "sandbox %s is not running", src);
	if (!b || get_secs(b, "timeout", E2B_TIMEOUT_DEFAULT, &timeout) || get_secs(b, "count", 1, &count) ||
	    count < 1 || count > 16)
		return e2b_send_error(c, 400, "timeout: seconds; count: 1 to 16");
	if (new_id(snap_id, sizeof(snap_id)) || (size_t)snprintf(dir, sizeof(dir), "%s/snapshots", c->srv->keys_dir) >=
							  sizeof(dir) || cli_mkdir_p(dir, 0700))
		return e2b_send_error(c, 500, "no folder for the snapshot");
	snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/%s-%s", src, snap_id);
	fork_hold(c->srv, 1);
	k = fork_clones(c, src, dir, (int)count, timeout, &like);
	fork_hold(c->srv, -1);
	return k;
}

/* fork_sandbox's snapshot and clones, while the sweep waits. */
static int fork_clones(struct e2b_conn *c, const char *src, const char *dir, int count, long long timeout,
		       const struct e2b_rec *like)
{
	size_t cap = 1 << 16;
	struct e2b_rec rec;
	struct json_writer w;
	char *out;
	int i, k;

	{
		const char *argv[] = { NULL, "snapshot", src, dir, NULL };

		if (run_vmm(c->srv, argv))
			return e2b_send_error(c, 500, "sandbox %s: the snapshot failed (the gateway's log says why)", src);
	}
	if (!(out = malloc(cap)))
		return e2b_send_error(c, 500, "out of memory");
	jw_init(&w, out, cap);
	jw_arr(&w);
	for (i = 0; i < count; i++) {
		char id[32];
		const char *argv[] = { NULL, "restore", dir, "-d", "--name", id, NULL };

		jw_obj(&w);
		if (new_id(id, sizeof(id)) || (k = start_sandbox(c->srv, argv, id, like, timeout, like->auto_pause, &rec))) {
			jw_key(&w, "error");
			jw_obj(&w);
			jw_key(&w, "code");
			jw_int(&w, 500);
			jw_key(&w, "message");
			jw_str(&w, "the clone did not start (the gateway's log says why)");
			jw_obj_end(&w);
		} else {
			jw_key(&w, "sandbox");
			sandbox_json(&w, id, &rec);
		}
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	k = e2b_send_json(c, 201, &w);
	free(out);
	return k;
}

/* Does the record's metadata hold every pair of `filter` ("k=v&k2=v2",
 * each percent-encoded)? */
static int metadata_match(const char *metadata, const char *filter)
{
	char arena_buf[16384];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const char *err, *p = filter;
	const struct json *m = json_parse(metadata, strlen(metadata), &a, &err);

	while (*p) {
		size_t n = strcspn(p, "&");
		char pair[1024], key[512], val[512];
		const char *v;

		if (n >= sizeof(pair))
			return 0;
		memcpy(pair, p, n);
		pair[n] = '\0';
		{
			char *eq = strchr(pair, '=');
			char q[1100];

			if (!eq)
				return 0;
			*eq = '\0';
			snprintf(q, sizeof(q), "k=%s&v=%s", pair, eq + 1);
			if (e2b_query_get(q, "k", key, sizeof(key)) || e2b_query_get(q, "v", val, sizeof(val)))
				return 0;
		}
		if (!m || json_get_str(m, key, &v) || strcmp(v, val))
			return 0;
		p += n;
		if (*p == '&')
			p++;
	}
	return 1;
}

static int list(struct e2b_conn *c, const struct e2b_req *r)
{
	char states[64] = "", meta[2048] = "";
	char **names = NULL;
	size_t cap = 1 << 20;
	char *out = malloc(cap);
	struct json_writer w;
	int n, i, k;

	if (!out)
		return e2b_send_error(c, 500, "out of memory");
	e2b_query_get(r->query, "state", states, sizeof(states));
	e2b_query_get(r->query, "metadata", meta, sizeof(meta));
	n = sandbox_list(&names);
	jw_init(&w, out, cap);
	jw_arr(&w);
	for (i = 0; i < n; i++) {
		struct sandbox_status st;
		struct e2b_rec rec;

		if (lookup(names[i], &st, &rec) == 0 &&
		    (!states[0] || strstr(states, st.state == SB_STANDBY ? "paused" : "running")) &&
		    (!meta[0] || metadata_match(rec.metadata, meta)))
			listed_json(&w, names[i], &rec, &st, 0);
		free(names[i]);
	}
	free(names);
	jw_arr_end(&w);
	k = e2b_send_json(c, 200, &w);
	free(out);
	return k;
}

static int kill_sandbox(struct e2b_conn *c, const char *id)
{
	struct sandbox_status st;
	struct e2b_rec rec;

	if (lookup(id, &st, &rec))
		return not_found(c, id);
	if (st.state != SB_STANDBY && sandbox_stop(&st, 0))
		return e2b_send_error(c, 500, "sandbox %s: its VMM did not stop", id);
	sandbox_delete(&st.sb);
	return e2b_send(c, 204, NULL, NULL, 0, NULL);
}

static int pause_sandbox(struct e2b_conn *c, const char *id)
{
	struct sandbox_status st;
	struct e2b_rec rec;
	if (lookup(id, &st, &rec))
		return not_found(c, id);
	if (st.state == SB_STANDBY)
		return e2b_send_error(c, 409, "sandbox %s is already paused", id);
	if (e2b_vmm(c->srv, "suspend", id) != 0)
		return e2b_send_error(c, 500, "sandbox %s: the suspend failed (the gateway's log says why)", id);
	return e2b_send(c, 204, NULL, NULL, 0, NULL);
}

/* connect (200: it ran; 201: it was resumed) and resume (201). */
static int connect_sandbox(struct e2b_conn *c, const struct e2b_req *r, const char *id, int resume)
{
	char arena_buf[4096], out[4096];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *b = body_json(r, &a);
	struct sandbox_status st;
	struct e2b_rec rec;
	struct json_writer w;
	long long timeout, now = (long long)time(NULL);
	int woke = 0;

	if (lookup(id, &st, &rec))
		return not_found(c, id);
	if (!b || get_secs(b, "timeout", E2B_TIMEOUT_DEFAULT, &timeout))
		return e2b_send_error(c, 400, "timeout: seconds");
	if (resume && st.state != SB_STANDBY)
		return e2b_send_error(c, 409, "sandbox %s is not paused", id);
	if (st.state == SB_STANDBY) {
		if (e2b_vmm(c->srv, "resume", id) && (sandbox_status(id, &st) || st.state != SB_RUNNING))
			return e2b_send_error(c, 500, "sandbox %s: the resume failed (the gateway's log says why)", id);
		woke = 1;
	}
	pthread_mutex_lock(&c->srv->lock);
	if (e2b_rec_read(st.sb.dir, &rec) == 0 && (woke || now + timeout > rec.end)) {
		rec.end = now + timeout;
		e2b_rec_write(st.sb.dir, &rec);
	}
	pthread_mutex_unlock(&c->srv->lock);
	jw_init(&w, out, sizeof(out));
	sandbox_json(&w, id, &rec);
	return e2b_send_json(c, woke || resume ? 201 : 200, &w);
}

/* timeout (from now) and refreshes (duration: from now, if later). */
static int set_timeout(struct e2b_conn *c, const struct e2b_req *r, const char *id, int refresh)
{
	char arena_buf[4096];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *b = body_json(r, &a);
	struct sandbox_status st;
	struct e2b_rec rec;
	long long t, now = (long long)time(NULL);
	int k = 0;

	if (lookup(id, &st, &rec))
		return not_found(c, id);
	if (!b || get_secs(b, refresh ? "duration" : "timeout", refresh ? 60 : -1, &t) || t < 0)
		return e2b_send_error(c, 400, "%s: seconds", refresh ? "duration" : "timeout");
	pthread_mutex_lock(&c->srv->lock);
	if (e2b_rec_read(st.sb.dir, &rec) == 0 && (!refresh || now + t > rec.end)) {
		rec.end = now + t;
		k = e2b_rec_write(st.sb.dir, &rec);
	}
	pthread_mutex_unlock(&c->srv->lock);
	if (k)
		return e2b_send_error(c, 500, "sandbox %s: its record: %s", id, strerror(-k));
	return e2b_send(c, 204, NULL, NULL, 0, NULL);
}

static int detail(struct e2b_conn *c, const char *id)
{
	struct sandbox_status st;
	struct e2b_rec rec;
	struct json_writer w;
	char out[16384];

	if (lookup(id, &st, &rec))
		return not_found(c, id);
	jw_init(&w, out, sizeof(out));
	listed_json(&w, id, &rec, &st, 1);
	return e2b_send_json(c, 200, &w);
}

int e2b_control(struct e2b_conn *c, const struct e2b_req *r)
{
	const char *m = r->method, *p = r->path, *rest;
	char id[SANDBOX_NAME_MAX + 1];
	size_t n;

	if (!strcmp(p, "/health"))
		return e2b_send(c, 200, "application/json", "{}", 2, NULL);
	if (e2b_key_check(c, r))
		return 0;
	if (!strcmp(p, "/sandboxes") || !strcmp(p, "/v2/sandboxes")) {
		if (!strcmp(m, "POST"))
			return create(c, r);
		if (!strcmp(m, "GET"))
			return list(c, r);
		return e2b_send_error(c, 405, "%s %s: not a method of this path", m, p);
	}
	if (!strncmp(p, "/v2/sandboxes/", 14))
		p += 3;
	if (strncmp(p, "/sandboxes/", 11))
		return e2b_send_error(c, strncmp(p, "/templates", 10) ? 404 : 501,
				      "%s %s is not served by vmm's E2B gateway (docs/e2b.md)", m, r->path);
	p += 11;
	n = strcspn(p, "/");
	if (!n || n > SANDBOX_NAME_MAX)
		return not_found(c, "");
	memcpy(id, p, n);
	id[n] = '\0';
	rest = p + n;
	if (!*rest && !strcmp(m, "GET"))
		return detail(c, id);
	if (!*rest && !strcmp(m, "DELETE"))
		return kill_sandbox(c, id);
	if (!strcmp(m, "POST") && !strcmp(rest, "/timeout"))
		return set_timeout(c, r, id, 0);
	if (!strcmp(m, "POST") && !strcmp(rest, "/refreshes"))
		return set_timeout(c, r, id, 1);
	if (!strcmp(m, "POST") && !strcmp(rest, "/pause"))
		return pause_sandbox(c, id);
	if (!strcmp(m, "POST") && (!strcmp(rest, "/connect") || !strcmp(rest, "/resume")))
		return connect_sandbox(c, r, id, !strcmp(rest, "/resume"));
	if (!strcmp(m, "POST") && !strcmp(rest, "/fork"))
		return fork_sandbox(c, r, id);
	if (!strcmp(m, "GET") && !strcmp(rest, "/metrics")) {
		struct sandbox_status st;
		struct e2b_rec rec;

		if (lookup(id, &st, &rec))
			return not_found(c, id);
		return e2b_metrics(c, id, &st);
	}
	return e2b_send_error(c, 501, "%s %s is not served by vmm's E2B gateway (docs/e2b.md)", m, r->path);
}

/* Is path one of the n sources (compared as real paths)? */
static int is_source(const char *path, char (*sources)[PATH_MAX], int n)
{
	char real[PATH_MAX];

	if (!realpath(path, real))
		return 1; /* not to be judged: kept */
	for (int i = 0; i < n; i++)
		if (!strcmp(real, sources[i]))
			return 1;
	return 0;
}

/* No fork under way, and none begun since the count `forks` was read
 * (before the sandboxes were listed: a clone started since then may be
 * missing from the list). */
static int forks_quiet(struct e2b_server *srv, unsigned forks)
{
	int quiet;

	pthread_mutex_lock(&srv->lock);
	quiet = !srv->forking && srv->forks == forks;
	pthread_mutex_unlock(&srv->lock);
	return quiet;
}

/* Removes each fork snapshot (.e2b/snapshots/SRC-ID) that none of the n
 * sandboxes listed was restored from, while forks stay quiet. */
static void sweep_fork_snapshots(struct e2b_server *srv, unsigned forks, char (*sources)[PATH_MAX], int n)
{
	char dir[sizeof(srv->keys_dir) + 16], p[sizeof(dir) + 256];
	struct dirent *e;
	DIR *d;

	if ((size_t)snprintf(dir, sizeof(dir), "%s/snapshots", srv->keys_dir) >= sizeof(dir) || !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || (size_t)snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= sizeof(p))
			continue;
		if (!forks_quiet(srv, forks))
			break;
		if (is_source(p, sources, n))
			continue;
		if (cli_rm_tree(p))
			log_warn("e2b: cannot remove the fork snapshot %s", p);
		else
			log_info("e2b: fork snapshot %s removed: no sandbox comes from it now", e->d_name);
	}
	closedir(d);
}

void e2b_reap(struct e2b_server *srv)
{
	long long now = (long long)time(NULL);
	char **names = NULL, (*sources)[PATH_MAX];
	int n, i, nsrc = 0, unknown = 0;
	unsigned forks;

	/* read before the list: the sweep stops if a fork begins */
	pthread_mutex_lock(&srv->lock);
	forks = srv->forks;
	pthread_mutex_unlock(&srv->lock);
	n = sandbox_list(&names);
	sources = n > 0 ? calloc((size_t)n, sizeof(*sources)) : NULL;
	for (i = 0; i < n; i++) {
		struct sandbox_status st;
		struct e2b_rec rec;
		int due, found;

		pthread_mutex_lock(&srv->lock);
		found = lookup(names[i], &st, &rec) == 0;
		due = found && st.state != SB_STANDBY && rec.end && now >= rec.end;
		pthread_mutex_unlock(&srv->lock);
		/* any sandbox's source counts, the gateway's or not; one whose
		 * record cannot be read now (being written) stops the sweep */
		if (!found && sandbox_status(names[i], &st))
			unknown++;
		else if (!st.kind[0])
			unknown++;
		else if (sources && st.source[0] && realpath(st.source, sources[nsrc]))
			nsrc++;
		if (due && rec.auto_pause) {
			log_info("e2b: sandbox %s timed out: paused", names[i]);
			e2b_vmm(srv, "suspend", names[i]);
		} else if (due) {
			log_info("e2b: sandbox %s timed out: killed", names[i]);
			if (sandbox_stop(&st, 0) == 0)
				sandbox_delete(&st.sb);
		}
		free(names[i]);
	}
	free(names);
	/* n < 0: the list failed, and nothing is known to be unused */
	if (n >= 0 && !unknown && (sources || n == 0))
		sweep_fork_snapshots(srv, forks, sources, nsrc);
	free(sources);
}
