/* The egress proxy's control: `vmm egress set`'s request (the policy read
 * and checked here, with the values it names) and the proxy's side of its
 * control socket, EGRESS_CTL_SOCK (docs/egress.md, "Changing the policy"). */
#include "cli/egress/egress_priv.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- vmm egress set: the client side ------------------------------------ */

/* What a policy named, as read here: the values a set request carries. */
struct rec_src {
	struct {
		const char *kind; /* "env", "file", "ca_file" */
		char *key, *val;
	} v[3 * EG_MAX_RULES];
	unsigned n;
};

static char *rec(struct rec_src *r, const char *kind, const char *key, char *val)
{
	if (val && r->n < sizeof(r->v) / sizeof(r->v[0])) {
		r->v[r->n].kind = kind;
		r->v[r->n].key = strdup(key);
		r->v[r->n].val = strdup(val);
		if (!r->v[r->n].key || !r->v[r->n].val) {
			free(r->v[r->n].key);
			free(r->v[r->n].val);
			free(val);
			return NULL;
		}
		r->n++;
	}
	return val;
}

static char *rec_env(const char *name, void *ctx)
{
	return rec(ctx, "env", name, cred_env(name, NULL));
}

static char *rec_file(const char *path, void *ctx)
{
	return rec(ctx, "file", path, cred_file(path, NULL));
}

static char *rec_ca(const char *path, void *ctx)
{
	return rec(ctx, "ca_file", path, ca_read(path, NULL));
}

char *egress_set_request(const char *policy_file)
{
	static const char *const kinds[] = { "env", "file", "ca_file" };
	struct rec_src *rs = calloc(1, sizeof(*rs));
	const struct pol_src src = { .cred = { .env = rec_env, .file = rec_file, .ctx = rs }, .ca = rec_ca };
	char why[320] = "", *text = NULL, *out = NULL;
	struct json_writer w;
	struct eg_live *l = NULL;
	size_t len, cap = 0;
	unsigned i, k;

	if (!rs)
		return NULL;
	text = read_small_file(policy_file, POLICY_MAX, &len);
	if (!text) {
		log_err("%s: cannot read it (%s)", policy_file, errno ? strerror(errno) : "too big");
		goto out;
	}
	/* Checked here as a whole (the proxy checks it again, with these
	 * values): a mistake is an error on this terminal, nothing sent. */
	if (pol_build(text, len, &src, &l, why, sizeof(why))) {
		log_err("%s: %s", policy_file, why);
		goto out;
	}
	cap = 6 * len + 256; /* \u00XX escapes at worst */
	for (i = 0; i < rs->n; i++)
		cap += 6 * (strlen(rs->v[i].key) + strlen(rs->v[i].val)) + 16;
	if (!(out = malloc(cap))) {
		log_err("out of memory");
		goto out;
	}
	jw_init(&w, out, cap - 1);
	jw_obj(&w);
	jw_key(&w, "op");
	jw_str(&w, "egress_set");
	jw_key(&w, "policy");
	jw_strn(&w, text, len);
	for (k = 0; k < 3; k++) {
		jw_key(&w, kinds[k]);
		jw_obj(&w);
		for (i = 0; i < rs->n; i++) {
			if (strcmp(rs->v[i].kind, kinds[k]))
				continue;
			jw_key(&w, rs->v[i].key);
			jw_str(&w, rs->v[i].val);
		}
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	if (!jw_done(&w) || w.len >= EGRESS_CTL_MAX) {
		log_err("%s: too big for the proxy's control socket", policy_file);
		explicit_bzero(out, cap);
		free(out);
		out = NULL;
	}
out:
	eg_live_put(l);
	for (i = 0; i < rs->n; i++) {
		explicit_bzero(rs->v[i].val, strlen(rs->v[i].val));
		free(rs->v[i].key);
		free(rs->v[i].val);
	}
	free(rs);
	free(text);
	return out;
}

/* ---- the control socket (EGRESS_CTL_SOCK) ------------------------------- */

/* A set request's credentials and CA files: {"env":{NAME:VALUE},
 * "file":{PATH:VALUE},"ca_file":{PATH:PEM}}, looked up by name. */
static char *req_value(const struct json *req, const char *kind, const char *key)
{
	const struct json *o = json_get(req, kind), *v = o && o->type == JSON_OBJ ? json_get(o, key) : NULL;

	return v && v->type == JSON_STR ? strndup(v->u.str.s, v->u.str.len) : NULL;
}

static char *req_env(const char *name, void *ctx)
{
	return req_value(ctx, "env", name);
}

static char *req_file(const char *path, void *ctx)
{
	return req_value(ctx, "file", path);
}

static char *req_ca(const char *path, void *ctx)
{
	return req_value(ctx, "ca_file", path);
}

static void ctl_error(struct json_writer *w, const char *msg)
{
	jw_key(w, "ok");
	jw_bool(w, 0);
	jw_key(w, "error");
	jw_str(w, msg);
}

/* {"op":"egress_set","policy":TEXT,...}: the new policy, checked whole,
 * replaces the old one for every request that starts from now on. */
static void ctl_set(struct egress *e, const struct json *req, struct json_writer *w)
{
	const struct pol_src src = { .cred = { .env = req_env, .file = req_file, .ctx = (void *)req }, .ca = req_ca };
	const struct json *text = json_get(req, "policy");
	char why[320] = "";
	struct eg_live *l;
	uint64_t v;
	unsigned i;

	if (!text || text->type != JSON_STR) {
		ctl_error(w, "egress_set needs \"policy\": the policy file's text");
		return;
	}
	if (pol_build(text->u.str.s, text->u.str.len, &src, &l, why, sizeof(why))) {
		ctl_error(w, why);
		return;
	}
	/* What the running proxy was set up with cannot change: where its CA
	 * is, and whether there is one (the guest installed it at boot). */
	for (i = 0; i < l->p.nr_rules && (!l->p.rules[i].intercept || e->ca); i++) {
	}
	if (l->p.ca_shared != e->ca_shared || i < l->p.nr_rules) {
		ctl_error(w, i < l->p.nr_rules ? "allow[] intercepts, but this sandbox's proxy has no CA (it started "
						 "with a policy that intercepts nothing): restart it with this policy"
					       : "\"ca\" cannot change on a running sandbox");
		eg_live_put(l);
		return;
	}
	pthread_mutex_lock(&e->rl_lock);
	/* Changes are made on this thread only: l stays current (alive) here. */
	v = eg_holder_swap(&e->pol, l);
	e->rate = l->p.limits.rate;
	rl_init(&e->rl, 0, 0, l->p.limits.rate, l->p.limits.burst, log_now_ns());
	atomic_store(&e->max_conns, l->p.limits.max_conns);
	i = l->p.nr_rules;
	pthread_mutex_unlock(&e->rl_lock);
	log_info("egress policy of %s changed: version %llu, %u rule%s", e->sandbox, (unsigned long long)v, i,
		 i == 1 ? "" : "s");
	jw_key(w, "ok");
	jw_bool(w, 1);
	jw_key(w, "version");
	jw_int(w, (int64_t)v);
	jw_key(w, "rules");
	jw_int(w, i);
}

/* {"op":"egress_show"}: the policy in force, credentials redacted. */
static void ctl_show(struct egress *e, struct json_writer *w)
{
	struct eg_live *l = eg_holder_get(&e->pol);
	size_t cap = 65536 + (size_t)l->p.nr_rules * 2048;
	char *buf = malloc(cap);

	if (!buf || eg_policy_show(&l->p, l->version, buf, cap) < 0) {
		ctl_error(w, "out of memory");
	} else {
		jw_key(w, "ok");
		jw_bool(w, 1);
		jw_key(w, "policy");
		jw_raw(w, buf);
	}
	free(buf);
	eg_live_put(l);
}

/* Reads until the newline within the deadline: its length, or -errno. */
static long ctl_read_line(int fd, char *buf, size_t cap, uint64_t deadline_ns)
{
	size_t n = 0;

	while (n < cap) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		uint64_t now = log_now_ns();
		char *nl;
		ssize_t k;

		if (now >= deadline_ns || poll(&pf, 1, (int)((deadline_ns - now) / 1000000) + 1) != 1)
			return -ETIMEDOUT;
		k = read(fd, buf + n, cap - n);
		if (k <= 0)
			return k ? -errno : -EPIPE;
		nl = memchr(buf + n, '\n', (size_t)k);
		n += (size_t)k;
		if (nl)
			return nl - buf;
	}
	return -E2BIG;
}

/* One control request and its reply, then the connection closes. On the
 * accept thread: a change is applied between two accepts. */
void egress_serve_ctl(struct egress *e, int fd)
{
	const size_t cap = EGRESS_CTL_MAX;
	char *in = malloc(cap), out_small[512], *out = NULL;
	size_t outcap = 1 << 20;
	struct json_arena a = { .size = 2 * cap };
	struct json_writer w;
	const struct json *req;
	const char *op = NULL, *err = "request too long, or not one line within 5 s";
	long n = -ENOMEM;

	a.buf = malloc(a.size);
	out = malloc(outcap);
	if (!out) {
		out = out_small;
		outcap = sizeof(out_small);
	}
	jw_init(&w, out, outcap - 1);
	jw_obj(&w);
	if (in && a.buf)
		n = ctl_read_line(fd, in, cap, log_now_ns() + 5000000000ull);
	if (n < 0) {
		ctl_error(&w, n == -ENOMEM ? "out of memory" : err);
	} else if (!(req = json_parse(in, (size_t)n, &a, &err)) || req->type != JSON_OBJ ||
		   json_get_str(req, "op", &op)) {
		ctl_error(&w, req ? "a request is a JSON object with \"op\"" : err);
	} else if (!strcmp(op, "egress_set")) {
		ctl_set(e, req, &w);
	} else if (!strcmp(op, "egress_show")) {
		ctl_show(e, &w);
	} else {
		ctl_error(&w, "unknown op (egress_set, egress_show)");
	}
	jw_obj_end(&w);
	if (jw_done(&w)) {
		size_t len = strlen(out);

		out[len++] = '\n';
		if (write_full(fd, out, len))
			log_warn("egress: the control client went away before its answer");
	}
	/* The request held credentials. */
	if (in)
		explicit_bzero(in, n > 0 ? (size_t)n : 0);
	if (a.buf)
		explicit_bzero(a.buf, a.used);
	free(in);
	free(a.buf);
	if (out != out_small)
		free(out);
	close(fd);
}

