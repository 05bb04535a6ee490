/* The Dockerfile builder's stage state (dockerfile_priv.h): string lists,
 * a stage's ENV/ARG/CMD/... from a base image's config and into the
 * built image's config.json, the variables an instruction sees. */
#include "cli/dockerfile/dockerfile_priv.h"
#include "cli/images/images.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int dfb_sv_push(struct strv *s, const char *str)
{
	char **p = realloc(s->v, (s->n + 2) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	s->v = p;
	if (!(s->v[s->n] = strdup(str)))
		return -ENOMEM;
	s->v[++s->n] = NULL;
	return 0;
}

/* NAME=VALUE: replaces the entry of that name or appends. */
int dfb_sv_setkv(struct strv *s, const char *kv)
{
	size_t n = strcspn(kv, "=");
	unsigned i;

	for (i = 0; i < s->n; i++)
		if (!strncmp(s->v[i], kv, n) && s->v[i][n] == '=') {
			char *c = strdup(kv);

			if (!c)
				return -ENOMEM;
			free(s->v[i]);
			s->v[i] = c;
			return 0;
		}
	return dfb_sv_push(s, kv);
}

size_t dfb_sv_bytes(const struct strv *s)
{
	size_t n = 0;

	for (unsigned i = 0; i < s->n; i++)
		n += strlen(s->v[i]) + 1;
	return n;
}

void dfb_sv_free(struct strv *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

int dfb_sv_copy(struct strv *d, const struct strv *s)
{
	for (unsigned i = 0; i < s->n; i++)
		if (dfb_sv_push(d, s->v[i]))
			return -ENOMEM;
	return 0;
}

int dfb_sv_from(struct strv *d, char *const *v, unsigned n)
{
	dfb_sv_free(d);
	for (unsigned i = 0; i < n; i++)
		if (dfb_sv_push(d, v[i]))
			return -ENOMEM;
	return 0;
}

int dfb_stage_by_name(struct builder *b, const char *name, unsigned before)
{
	char *end;
	unsigned long k = strtoul(name, &end, 10);

	if (name[0] && !*end)
		return k < before ? (int)k : -1;
	for (unsigned i = 0; i < before; i++)
		if (!strcasecmp(b->st[i].name, name))
			return (int)i;
	return -1;
}

void dfb_stage_free(struct stage *s)
{
	dfb_sv_free(&s->env);
	dfb_sv_free(&s->args);
	dfb_sv_free(&s->cmd);
	dfb_sv_free(&s->entry);
	dfb_sv_free(&s->shell);
	dfb_sv_free(&s->ports);
	dfb_sv_free(&s->labels);
	dfb_sv_free(&s->volumes);
	dfb_sv_free(&s->health);
	free(s->workdir);
	free(s->user);
	free(s->stopsignal);
	s->workdir = s->user = s->stopsignal = NULL;
}

int dfb_set_str(char **p, const char *v)
{
	char *c = strdup(v);

	if (!c)
		return -ENOMEM;
	free(*p);
	*p = c;
	return 0;
}

/* A base image's config.json into the stage (Env, Cmd, ...). */
int dfb_stage_from_config(struct stage *s, const char *json)
{
	struct oci_defaults *d = calloc(1, sizeof(*d));
	int r = -ENOMEM;
	unsigned i;

	if (!d)
		return -ENOMEM;
	if (oci_defaults_parse(json, strlen(json), d)) {
		free(d);
		return 0; /* no usable defaults: as scratch */
	}
	if (dfb_sv_from(&s->env, (char *const *)d->env, d->nenv) || dfb_sv_from(&s->cmd, (char *const *)d->cmd, d->ncmd) ||
	    dfb_sv_from(&s->entry, (char *const *)d->entrypoint, d->nentry))
		goto out;
	s->has_cmd = d->ncmd > 0;
	s->has_entry = d->nentry > 0;
	if ((d->workdir && d->workdir[0] && dfb_set_str(&s->workdir, d->workdir)) ||
	    (d->user && d->user[0] && dfb_set_str(&s->user, d->user)))
		goto out;
	for (i = 0; i < d->nports; i++) {
		char p[24];

		snprintf(p, sizeof(p), "%u/tcp", d->ports[i]);
		if (dfb_sv_push(&s->ports, p))
			goto out;
	}
	if (d->mem_mib) {
		char l[48];

		snprintf(l, sizeof(l), "vmm.mem=%u", d->mem_mib);
		if (dfb_sv_setkv(&s->labels, l))
			goto out;
	}
	if (d->cpus) {
		char l[48];

		snprintf(l, sizeof(l), "vmm.cpus=%u", d->cpus);
		if (dfb_sv_setkv(&s->labels, l))
			goto out;
	}
	if (d->drives[0]) {
		char l[1100];

		snprintf(l, sizeof(l), "vmm.drives=%s", d->drives);
		if (dfb_sv_setkv(&s->labels, l))
			goto out;
	}
	r = 0;
out:
	free(d);
	return r;
}

/* The variables an instruction sees: the stage's ARGs, then its ENV. */
int dfb_vars_of(struct builder *b, const struct stage *s, struct df_vars *v, const char ***mem)
{
	unsigned n = 0;
	const char **kv;

	(void)b;
	kv = calloc(s->args.n + s->env.n + 1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	for (unsigned i = 0; i < s->args.n; i++)
		if (strchr(s->args.v[i], '='))
			kv[n++] = s->args.v[i];
	for (unsigned i = 0; i < s->env.n; i++)
		kv[n++] = s->env.v[i];
	v->kv = kv;
	v->n = n;
	*mem = kv;
	return 0;
}

static void jw_list(struct json_writer *w, const char *key, const struct strv *s)
{
	jw_key(w, key);
	jw_arr(w);
	for (unsigned i = 0; i < s->n; i++)
		jw_str(w, s->v[i]);
	jw_arr_end(w);
}

int dfb_config_json(struct stage *s, char **out)
{
	size_t cap = 65536;
	struct json_writer w;
	char *buf;
	int has_path = 0;

	for (unsigned i = 0; i < s->env.n; i++)
		has_path |= !strncmp(s->env.v[i], "PATH=", 5);
	if (!has_path && dfb_sv_push(&s->env, DEFAULT_PATH))
		return -ENOMEM;
	for (;; cap *= 4) {
		if (!(buf = malloc(cap)))
			return -ENOMEM;
		jw_init(&w, buf, cap);
		jw_obj(&w);
		jw_list(&w, "Env", &s->env);
		jw_list(&w, "Entrypoint", &s->entry);
		jw_list(&w, "Cmd", &s->cmd);
		jw_key(&w, "WorkingDir");
		jw_str(&w, s->workdir ? s->workdir : "");
		jw_key(&w, "User");
		jw_str(&w, s->user ? s->user : "");
		jw_key(&w, "ExposedPorts");
		jw_obj(&w);
		for (unsigned i = 0; i < s->ports.n; i++) {
			jw_key(&w, s->ports.v[i]);
			jw_obj(&w);
			jw_obj_end(&w);
		}
		jw_obj_end(&w);
		jw_key(&w, "Labels");
		jw_obj(&w);
		for (unsigned i = 0; i < s->labels.n; i++) {
			const char *eq = strchr(s->labels.v[i], '=');
			char *k = strndup(s->labels.v[i], (size_t)(eq - s->labels.v[i]));

			if (!k) {
				free(buf);
				return -ENOMEM;
			}
			jw_key(&w, k);
			jw_str(&w, eq + 1);
			free(k);
		}
		jw_obj_end(&w);
		jw_key(&w, "Volumes");
		jw_obj(&w);
		for (unsigned i = 0; i < s->volumes.n; i++) {
			jw_key(&w, s->volumes.v[i]);
			jw_obj(&w);
			jw_obj_end(&w);
		}
		jw_obj_end(&w);
		jw_key(&w, "StopSignal");
		jw_str(&w, s->stopsignal ? s->stopsignal : "");
		jw_list(&w, "Shell", &s->shell);
		if (s->health.n) {
			jw_key(&w, "Healthcheck");
			jw_obj(&w);
			jw_list(&w, "Test", &s->health);
			jw_obj_end(&w);
		}
		jw_obj_end(&w);
		if (jw_done(&w)) {
			*out = buf;
			return 0;
		}
		free(buf);
		if (cap > (64u << 20))
			return -E2BIG;
	}
}
