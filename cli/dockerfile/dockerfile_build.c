/* The Dockerfile builder (dockerfile_build.h): the stages' graph, the
 * steps in order and each instruction's executor. A stage's state and the
 * image config are dockerfile_stage.c's, the step cache
 * dockerfile_cache.c's, COPY/ADD dockerfile_copy.c's. */
#include "cli/dockerfile/dockerfile_priv.h"
#include "cli/images/images.h"
#include "vmm/wire/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int dfb_berr(struct builder *b, const struct df_instr *in, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int dfb_berr(struct builder *b, const struct df_instr *in, int r, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (in)
		n = snprintf(b->err, b->errlen, "step %u/%u (line %u) %s: ", b->step, b->nsteps, in->line,
			     df_op_name(in->op));
	if (n >= 0 && (size_t)n < b->errlen) {
		va_start(ap, fmt);
		vsnprintf(b->err + n, b->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return r;
}

/* ---- paths ----------------------------------------------------------- */

int dfb_open_in_root(int rootfd, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	long fd;

	while (*path == '/')
		path++;
	fd = syscall(SYS_openat2, rootfd, *path ? path : ".", &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

/* Lexically cleaned absolute path ("/a/../b/./c/" -> "/b/c"): ".." never
 * goes above the root (Go's filepath.Clean of "/" + p). */
void dfb_clean_path(const char *p, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '/';
	out[1] = '\0';
	o = 1;
	while (*p) {
		const char *s;
		size_t n;

		while (*p == '/')
			p++;
		s = p;
		while (*p && *p != '/')
			p++;
		n = (size_t)(p - s);
		if (!n || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 1 && out[o - 1] != '/')
				o--;
			if (o > 1)
				o--;
			out[o] = '\0';
			continue;
		}
		if (o + n + 2 >= len)
			break;
		if (o > 1)
			out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
		out[o] = '\0';
	}
}

void dfb_join_workdir(const char *wd, const char *p, char *out, size_t len)
{
	char tmp[PATH_MAX * 2];

	if (p[0] == '/')
		snprintf(tmp, sizeof(tmp), "%s", p);
	else
		snprintf(tmp, sizeof(tmp), "%s/%s", wd && wd[0] ? wd : "/", p);
	dfb_clean_path(tmp, out, len);
}

/* ---- the instructions -------------------------------------------------- */

static const char *build_arg(struct builder *b, const char *name)
{
	const char *val = NULL;
	size_t n = strlen(name);

	for (const char *const *a = b->o->build_args; a && *a; a++)
		if (!strncmp(*a, name, n) && (*a)[n] == '=')
			val = *a + n + 1;
	if (val && !df_var(&(struct df_vars){ (const char **)b->used_args.v, b->used_args.n }, name)) {
		char kv[300];

		snprintf(kv, sizeof(kv), "%s=", name);
		dfb_sv_push(&b->used_args, kv);
	}
	return val;
}

/* After an ENV, ARG or LABEL: its list within DFB_VARS_MAX. */
static int vars_bound(struct builder *b, const struct strv *list, const struct df_instr *in, int r)
{
	if (!r && dfb_sv_bytes(list) > DFB_VARS_MAX)
		return dfb_berr(b, in, -E2BIG, "the %s values add up to more than %u KiB", df_op_name(in->op),
				DFB_VARS_MAX >> 10);
	return r;
}

/* ARG NAME[=default] into list (the stage's, or the global ones with meta). */
static int do_arg(struct builder *b, struct strv *list, const struct df_vars *v, const struct df_instr *in, int meta)
{
	char **w, e[256];
	unsigned nw;
	int r;

	if ((r = df_expand(in->rest, b->df->escape, v, 1, &w, &nw, e, sizeof(e))))
		return dfb_berr(b, in, r, "%s", e);
	for (unsigned i = 0; i < nw && !r; i++) {
		char *eq = strchr(w[i], '='), kv[4200];
		const char *given, *global;

		if (eq)
			*eq = '\0';
		given = build_arg(b, w[i]);
		global = meta ? NULL : df_var(&(struct df_vars){ (const char **)b->meta.v, b->meta.n }, w[i]);
		if (given)
			snprintf(kv, sizeof(kv), "%s=%s", w[i], given);
		else if (eq)
			snprintf(kv, sizeof(kv), "%s=%s", w[i], eq + 1);
		else if (global)
			snprintf(kv, sizeof(kv), "%s=%s", w[i], global);
		else
			snprintf(kv, sizeof(kv), "%s", w[i]); /* declared, no value */
		r = dfb_sv_setkv(list, kv);
	}
	df_words_free(w);
	return vars_bound(b, list, in, r);
}

/* ENV/LABEL: NAME=VALUE words, or the old `NAME VALUE...`. */
static int do_pairs(struct builder *b, struct strv *list, const struct df_vars *v, const struct df_instr *in)
{
	char **w = NULL, e[256];
	unsigned nw;
	int r;
	const char *sp = in->rest + strcspn(in->rest, " \t");
	size_t first = (size_t)(sp - in->rest);

	if (!memchr(in->rest, '=', first)) {
		char name[256], **val;

		snprintf(name, sizeof(name), "%.*s", (int)first, in->rest);
		while (*sp == ' ' || *sp == '\t')
			sp++;
		if (!*sp)
			return dfb_berr(b, in, -EINVAL, "%s needs NAME=VALUE (or NAME VALUE)", name);
		if ((r = df_expand(sp, b->df->escape, v, 0, &val, &nw, e, sizeof(e))))
			return dfb_berr(b, in, r, "%s", e);
		{
			size_t n = strlen(name) + strlen(val[0]) + 2;
			char *kv = malloc(n);

			r = -ENOMEM;
			if (kv) {
				snprintf(kv, n, "%s=%s", name, val[0]);
				r = dfb_sv_setkv(list, kv);
				free(kv);
			}
		}
		df_words_free(val);
		return vars_bound(b, list, in, r);
	}
	if ((r = df_expand(in->rest, b->df->escape, v, 1, &w, &nw, e, sizeof(e))))
		return dfb_berr(b, in, r, "%s", e);
	for (unsigned i = 0; i < nw && !r; i++) {
		if (!strchr(w[i], '=') || w[i][0] == '=')
			r = dfb_berr(b, in, -EINVAL, "'%s' is not NAME=VALUE", w[i]);
		else
			r = dfb_sv_setkv(list, w[i]);
	}
	df_words_free(w);
	return vars_bound(b, list, in, r);
}

/* CMD/ENTRYPOINT/RUN argv: the exec form, or SHELL + the text. */
static int command_of(const struct stage *s, const struct df_instr *in, struct strv *out)
{
	dfb_sv_free(out);
	if (in->json)
		return dfb_sv_from(out, in->argv, in->argc);
	if (dfb_sv_copy(out, &s->shell))
		return -ENOMEM;
	return dfb_sv_push(out, in->rest);
}

static void progress(struct builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(struct builder *b, const char *fmt, ...)
{
	va_list ap;

	if (!b->o->progress)
		return;
	va_start(ap, fmt);
	vfprintf(b->o->progress, fmt, ap);
	va_end(ap);
	fflush(b->o->progress);
}

static int from_step(struct builder *b, unsigned si, const struct df_instr *in, const struct df_vars *meta)
{
	struct stage *s = &b->st[si];
	const char *plat = df_flag(in, "platform");
	char **w, e[256], *config = NULL;
	unsigned nw;
	int r, k;

	if (plat && strcmp(plat, "linux/amd64") && strcmp(plat, "$BUILDPLATFORM") && strcmp(plat, "$TARGETPLATFORM"))
		return dfb_berr(b, in, -EINVAL, "--platform=%s: vmm builds linux/amd64 only", plat);
	if ((r = df_expand(in->rest, b->df->escape, meta, 1, &w, &nw, e, sizeof(e))))
		return dfb_berr(b, in, r, "%s", e);
	progress(b, "STEP %u/%u: FROM %s%s%s\n", b->step, b->nsteps, w[0], s->name[0] ? " AS " : "", s->name);
	if ((r = dfb_sv_push(&s->shell, "/bin/sh")) || (r = dfb_sv_push(&s->shell, "-c")))
		goto out;
	if (!strcasecmp(w[0], "scratch")) {
		dfb_key_of("", "FROM", "scratch", s->key);
		if (!dfb_cache_hit(b, s, s->key, 1)) {
			s->src[0] = '\0';
			if ((r = dfb_materialize(b, s, in)) || (r = dfb_commit(b, s, s->key, in)))
				goto out;
		}
	} else if ((k = dfb_stage_by_name(b, w[0], si)) >= 0) {
		struct stage *p = &b->st[k];

		if (!p->built) {
			r = dfb_berr(b, in, -EINVAL, "stage %s was not built", w[0]);
			goto out;
		}
		dfb_sv_free(&s->shell);
		if (dfb_sv_copy(&s->env, &p->env) || dfb_sv_copy(&s->cmd, &p->cmd) || dfb_sv_copy(&s->entry, &p->entry) ||
		    dfb_sv_copy(&s->shell, &p->shell) || dfb_sv_copy(&s->ports, &p->ports) || dfb_sv_copy(&s->labels, &p->labels) ||
		    dfb_sv_copy(&s->volumes, &p->volumes) || dfb_sv_copy(&s->health, &p->health) ||
		    (p->workdir && dfb_set_str(&s->workdir, p->workdir)) || (p->user && dfb_set_str(&s->user, p->user)) ||
		    (p->stopsignal && dfb_set_str(&s->stopsignal, p->stopsignal))) {
			r = -ENOMEM;
			goto out;
		}
		s->has_cmd = p->cmd.n ? 2 : 0;
		s->has_entry = p->has_entry;
		snprintf(s->key, sizeof(s->key), "%s", p->key);
		snprintf(s->src, sizeof(s->src), "%s", p->src);
	} else {
		if ((r = dfb_base_tree(b, w[0], in, s, &config)))
			goto out;
		if (config && (r = dfb_stage_from_config(s, config)))
			goto out;
		s->has_cmd = s->cmd.n ? 2 : 0; /* from the base: ENTRYPOINT resets it */
	}
out:
	free(config);
	df_words_free(w);
	return r;
}

/* A step that changes files: key, then the cache, else fn on a work tree. */
static int mutate(struct builder *b, struct stage *s, const struct df_instr *in, const char *what, const char *extra,
		  int (*fn)(struct builder *, struct stage *, const struct df_instr *, void *), void *arg)
{
	char key[72];
	int r;

	dfb_key_of(s->key, what, extra, key);
	snprintf(s->key, sizeof(s->key), "%s", key);
	if (dfb_cache_hit(b, s, key, 0)) {
		progress(b, "--> cached\n");
		b->res->cached++;
		return 0;
	}
	if ((r = dfb_materialize(b, s, in)) || (r = fn(b, s, in, arg)))
		return r;
	return dfb_commit(b, s, key, in);
}

static int mkdir_fn(struct builder *b, struct stage *s, const struct df_instr *in, void *arg)
{
	int rootfd = open(s->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;

	(void)arg;
	if (rootfd < 0)
		return dfb_berr(b, in, -errno, "%s: %s", s->src, strerror(errno));
	fd = oci_root_mkdirs(rootfd, s->workdir, 0755);
	close(rootfd);
	if (fd < 0)
		return dfb_berr(b, in, fd, "%s: %s", s->workdir, strerror(-fd));
	close(fd);
	return 0;
}

static int workdir_missing(struct stage *s)
{
	int rootfd = open(s->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;

	if (rootfd < 0)
		return 1;
	fd = dfb_open_in_root(rootfd, s->workdir, O_RDONLY | O_DIRECTORY);
	close(rootfd);
	if (fd >= 0)
		close(fd);
	return fd < 0;
}

struct run_arg {
	struct dfb_run r;
};

static int run_fn(struct builder *b, struct stage *s, const struct df_instr *in, void *arg)
{
	struct run_arg *ra = arg;
	char e[512] = "";
	int r;

	if (s->workdir && (r = mkdir_fn(b, s, in, NULL)))
		return r;
	if (!b->ops->run)
		return dfb_berr(b, in, -ENOTSUP, "no executor for RUN");
	b->res->runs++;
	if ((r = b->ops->run(b->ctx, s->src, &ra->r, e, sizeof(e))))
		return dfb_berr(b, in, r, "%s", e[0] ? e : "failed");
	return 0;
}

static int run_step(struct builder *b, struct stage *s, const struct df_instr *in, const struct df_vars *v)
{
	struct strv argv = { 0 }, env = { 0 };
	struct run_arg ra;
	char *extra = NULL;
	size_t len = 0;
	FILE *m;
	int r;

	if (in->nflags)
		return dfb_berr(b, in, -EINVAL, "%s is not supported by vmm image build", in->flags[0]);
	if ((r = command_of(s, in, &argv)))
		goto out;
	for (unsigned i = 0; i < v->n && !r; i++)
		r = dfb_sv_setkv(&env, v->kv[i]);
	if (!r && !df_var(v, "PATH"))
		r = dfb_sv_setkv(&env, DEFAULT_PATH);
	if (r)
		goto out;
	if (!(m = open_memstream(&extra, &len))) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < argv.n; i++)
		fprintf(m, "a:%s%c", argv.v[i], 0);
	for (unsigned i = 0; i < env.n; i++)
		fprintf(m, "e:%s%c", env.v[i], 0);
	fprintf(m, "w:%s%cu:%s", s->workdir ? s->workdir : "/", 0, s->user ? s->user : "");
	fclose(m);
	for (size_t i = 0; i < len; i++)
		if (!extra[i])
			extra[i] = '\n';
	ra.r = (struct dfb_run){ .argv = (const char *const *)argv.v, .env = (const char *const *)env.v,
				 .cwd = s->workdir ? s->workdir : "/", .user = s->user ? s->user : "",
				 .step = b->step, .nsteps = b->nsteps, .line = in->line };
	r = mutate(b, s, in, "RUN", extra, run_fn, &ra);
out:
	free(extra);
	dfb_sv_free(&argv);
	dfb_sv_free(&env);
	return r;
}

struct copy_arg {
	char **w;
	unsigned nw;
};

static int copy_fn(struct builder *b, struct stage *s, const struct df_instr *in, void *arg)
{
	struct copy_arg *ca = arg;

	return dfb_copy_step(b, s, in, ca->w, ca->nw, 1, NULL);
}

static int copy_words(struct builder *b, const struct df_instr *in, const struct df_vars *v, char ***w, unsigned *nw)
{
	char e[256];
	int r;

	if (!in->json) {
		if ((r = df_expand(in->rest, b->df->escape, v, 1, w, nw, e, sizeof(e))))
			return dfb_berr(b, in, r, "%s", e);
	} else {
		char **out = calloc(in->argc + 1, sizeof(*out)), **one;
		unsigned n1;

		if (!out)
			return -ENOMEM;
		for (unsigned i = 0; i < in->argc; i++) {
			if ((r = df_expand(in->argv[i], b->df->escape, v, 0, &one, &n1, e, sizeof(e)))) {
				df_words_free(out);
				return dfb_berr(b, in, r, "%s", e);
			}
			out[i] = one[0];
			free(one);
		}
		*w = out;
		*nw = in->argc;
	}
	if (*nw < 2) {
		df_words_free(*w);
		return dfb_berr(b, in, -EINVAL, "needs a source and a destination");
	}
	return 0;
}

static int copy_step_all(struct builder *b, struct stage *s, const struct df_instr *in, const struct df_vars *v)
{
	struct copy_arg ca;
	struct oci_hash h;
	char dg[OCI_DIGEST_MAX], *extra = NULL;
	size_t len = 0;
	FILE *m;
	int r;

	if ((r = copy_words(b, in, v, &ca.w, &ca.nw)))
		return r;
	if ((r = oci_hash_init(&h)))
		goto out;
	r = dfb_copy_step(b, s, in, ca.w, ca.nw, 0, &h);
	oci_hash_final(&h, dg);
	if (r)
		goto out;
	if (!(m = open_memstream(&extra, &len))) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < in->nflags; i++)
		fprintf(m, "%s\n", in->flags[i]);
	for (unsigned i = 0; i < ca.nw; i++)
		fprintf(m, "%s\n", ca.w[i]);
	fprintf(m, "w:%s\n%s", s->workdir ? s->workdir : "/", dg);
	fclose(m);
	r = mutate(b, s, in, df_op_name(in->op), extra, copy_fn, &ca);
out:
	free(extra);
	df_words_free(ca.w);
	return r;
}

static int one_word(struct builder *b, const struct df_instr *in, const struct df_vars *v, char **out)
{
	char **w, e[256];
	unsigned nw;
	int r;

	if ((r = df_expand(in->rest, b->df->escape, v, 0, &w, &nw, e, sizeof(e))))
		return dfb_berr(b, in, r, "%s", e);
	*out = w[0];
	free(w);
	return 0;
}

static int expose(struct builder *b, struct stage *s, const struct df_instr *in, const struct df_vars *v)
{
	char **w, e[256];
	unsigned nw;
	int r;

	if ((r = df_expand(in->rest, b->df->escape, v, 1, &w, &nw, e, sizeof(e))))
		return dfb_berr(b, in, r, "%s", e);
	for (unsigned i = 0; i < nw && !r; i++) {
		char *end, p[32], *proto = strchr(w[i], '/');
		unsigned long port = strtoul(w[i], &end, 10);

		if (proto)
			*proto++ = '\0';
		if (!w[i][0] || *end || port == 0 || port > 65535 ||
		    (proto && strcasecmp(proto, "tcp") && strcasecmp(proto, "udp") && strcasecmp(proto, "sctp"))) {
			r = dfb_berr(b, in, -EINVAL, "'%s': a port, PORT/tcp or PORT/udp (ranges are not supported)", w[i]);
			break;
		}
		snprintf(p, sizeof(p), "%lu/%s", port, proto ? proto : "tcp");
		for (end = p; *end; end++)
			*end = (char)(*end >= 'A' && *end <= 'Z' ? *end - 'A' + 'a' : *end);
		unsigned k;

		for (k = 0; k < s->ports.n && strcmp(s->ports.v[k], p); k++)
			;
		if (k == s->ports.n)
			r = dfb_sv_push(&s->ports, p);
	}
	df_words_free(w);
	return r;
}

static int healthcheck(struct builder *b, struct stage *s, const struct df_instr *in)
{
	const char *t = in->rest;
	char **argv;
	unsigned argc;
	int r;

	dfb_sv_free(&s->health);
	if (!strcasecmp(t, "NONE"))
		return dfb_sv_push(&s->health, "NONE");
	if (strncasecmp(t, "CMD", 3) || (t[3] != ' ' && t[3] != '\t'))
		return dfb_berr(b, in, -EINVAL, "HEALTHCHECK NONE or HEALTHCHECK [OPTIONS] CMD command");
	t += 4;
	while (*t == ' ' || *t == '\t')
		t++;
	{
		/* the exec form, else the shell form */
		struct dockerfile one;
		char line[8192], e[128];

		snprintf(line, sizeof(line), "FROM x\nCMD %s\n", t);
		if (df_parse(line, strlen(line), &one, e, sizeof(e)))
			return dfb_berr(b, in, -EINVAL, "HEALTHCHECK CMD: %s", e);
		argv = one.ins[1].argv;
		argc = one.ins[1].argc;
		if (one.ins[1].json) {
			r = dfb_sv_push(&s->health, "CMD");
			for (unsigned i = 0; i < argc && !r; i++)
				r = dfb_sv_push(&s->health, argv[i]);
		} else if (!(r = dfb_sv_push(&s->health, "CMD-SHELL"))) {
			r = dfb_sv_push(&s->health, one.ins[1].rest);
		}
		df_free(&one);
	}
	return r;
}

static int instr(struct builder *b, unsigned si, const struct df_instr *in)
{
	struct stage *s = &b->st[si];
	struct df_vars v;
	const char **mem = NULL;
	char *word = NULL, *desc;
	int r;

	if ((r = dfb_vars_of(b, s, &v, &mem)))
		return r;
	desc = df_describe(in);
	progress(b, "STEP %u/%u: %s\n", b->step, b->nsteps, desc ? desc : df_op_name(in->op));
	free(desc);
	switch (in->op) {
	case DF_ARG:
		r = do_arg(b, &s->args, &v, in, 0);
		break;
	case DF_ENV:
		r = do_pairs(b, &s->env, &v, in);
		break;
	case DF_LABEL:
		r = do_pairs(b, &s->labels, &v, in);
		break;
	case DF_WORKDIR: {
		char path[PATH_MAX];

		if ((r = one_word(b, in, &v, &word)))
			break;
		dfb_join_workdir(s->workdir, word, path, sizeof(path));
		if ((r = dfb_set_str(&s->workdir, path)))
			break;
		if (workdir_missing(s))
			r = mutate(b, s, in, "WORKDIR", path, mkdir_fn, NULL);
		break;
	}
	case DF_USER:
		if (!(r = one_word(b, in, &v, &word)))
			r = dfb_set_str(&s->user, word);
		break;
	case DF_STOPSIGNAL:
		if (!(r = one_word(b, in, &v, &word)))
			r = dfb_set_str(&s->stopsignal, word);
		break;
	case DF_CMD:
		r = command_of(s, in, &s->cmd);
		s->has_cmd = 1;
		break;
	case DF_ENTRYPOINT:
		r = command_of(s, in, &s->entry);
		if (s->has_cmd == 2) { /* a CMD from the base image is reset; one of this stage stays */
			dfb_sv_free(&s->cmd);
			s->has_cmd = 0;
		}
		s->has_entry = 1;
		break;
	case DF_SHELL:
		r = dfb_sv_from(&s->shell, in->argv, in->argc);
		break;
	case DF_EXPOSE:
		r = expose(b, s, in, &v);
		break;
	case DF_VOLUME:
		if (in->json) {
			for (unsigned i = 0; i < in->argc && !r; i++)
				r = dfb_sv_push(&s->volumes, in->argv[i]);
		} else {
			char **w, e[256];
			unsigned nw;

			if ((r = df_expand(in->rest, b->df->escape, &v, 1, &w, &nw, e, sizeof(e)))) {
				r = dfb_berr(b, in, r, "%s", e);
				break;
			}
			for (unsigned i = 0; i < nw && !r; i++)
				r = dfb_sv_push(&s->volumes, w[i]);
			df_words_free(w);
		}
		break;
	case DF_HEALTHCHECK:
		r = healthcheck(b, s, in);
		break;
	case DF_MAINTAINER:
		progress(b, "note: MAINTAINER is deprecated and not recorded (use LABEL)\n");
		break;
	case DF_ONBUILD:
		r = dfb_berr(b, in, -EINVAL, "ONBUILD triggers are not supported by vmm image build");
		break;
	case DF_RUN:
		r = run_step(b, s, in, &v);
		break;
	case DF_COPY:
	case DF_ADD:
		r = copy_step_all(b, s, in, &v);
		break;
	case DF_FROM:
	case DF_NR_OPS:
		break;
	}
	free(word);
	free(mem);
	return r;
}

/* The stage an instruction of stage si takes from: FROM an earlier stage
 * (as from_step reads it), COPY --from=NAME any stage of that name or
 * number (build_plan refuses all but earlier ones); -1 if none. */
static int stage_ref(struct builder *b, unsigned si, const struct df_instr *in, const struct df_vars *meta)
{
	const char *from = df_flag(in, "from");
	int d = -1;

	if (in->op == DF_FROM) {
		char **w, e[64];
		unsigned nw;

		if (!df_expand(in->rest, b->df->escape, meta, 1, &w, &nw, e, sizeof(e))) {
			d = nw ? dfb_stage_by_name(b, w[0], si) : -1;
			df_words_free(w);
		}
	} else if (in->op == DF_COPY && from) {
		d = dfb_stage_by_name(b, from, b->nst);
	}
	return d;
}

/* Does stage `from` need stage `to`, through its references? (A walk
 * with a list of its own: a Dockerfile may have many stages.) 1, 0, or
 * -ENOMEM. */
static int stage_needs(struct builder *b, unsigned from, unsigned to, const struct df_vars *meta)
{
	unsigned *todo = calloc(b->nst, sizeof(*todo)), n = 0;
	unsigned char *seen = calloc(b->nst, 1);
	int found = 0;

	if (!todo || !seen) {
		free(todo);
		free(seen);
		return -ENOMEM;
	}
	todo[n++] = from;
	seen[from] = 1;
	while (n && !found) {
		unsigned x = todo[--n];

		for (unsigned k = 0; k < b->df->n && !found; k++) {
			int d = b->stage_of[k] == x ? stage_ref(b, x, &b->df->ins[k], meta) : -1;

			if (d < 0 || seen[d])
				continue;
			found = (unsigned)d == to;
			seen[d] = 1;
			todo[n++] = (unsigned)d;
		}
	}
	free(todo);
	free(seen);
	return found;
}

static const char *stage_label(const struct stage *s, char *buf, size_t len, unsigned i)
{
	if (s->name[0])
		return s->name;
	snprintf(buf, len, "%u", i);
	return buf;
}

/* COPY --from=NAME in stage si names an earlier stage, or an image: not
 * this stage, nor a later one (which could only make a cycle). */
static int check_copy_from(struct builder *b, unsigned si, const struct df_instr *in, const struct df_vars *meta)
{
	const char *from = df_flag(in, "from");
	char l1[16], l2[16];
	int d = in->op == DF_COPY && from ? stage_ref(b, si, in, meta) : -1, r;

	if (d < 0 || (unsigned)d < si)
		return 0;
	if ((unsigned)d == si)
		return dfb_berr(b, NULL, -EINVAL, "line %u: COPY --from=%s: that is this stage itself (copy from an "
				"earlier stage or an image)", in->line, from);
	if ((r = stage_needs(b, (unsigned)d, si, meta)) < 0)
		return r;
	if (r)
		return dfb_berr(b, NULL, -EINVAL, "line %u: COPY --from=%s: a cycle of stages: stage %s needs stage %s, "
				"which copies from it", in->line, from, stage_label(&b->st[d], l1, sizeof(l1), (unsigned)d),
				stage_label(&b->st[si], l2, sizeof(l2), si));
	return dfb_berr(b, NULL, -EINVAL, "line %u: COPY --from=%s: stage %s comes later in the Dockerfile (copy "
			"from an earlier stage)", in->line, from, stage_label(&b->st[d], l1, sizeof(l1), (unsigned)d));
}

/* Which stages the target needs (FROM a stage, COPY --from a stage),
 * each reference checked (check_copy_from). */
static int mark_needed(struct builder *b, unsigned t, const struct df_vars *meta)
{
	b->st[t].needed = 1;
	for (unsigned i = t + 1; i-- > 0;) {
		if (!b->st[i].needed)
			continue;
		for (unsigned k = 0; k < b->df->n; k++) {
			const struct df_instr *in = &b->df->ins[k];
			int d, r;

			if (b->stage_of[k] != i)
				continue;
			if ((r = check_copy_from(b, i, in, meta)))
				return r;
			if ((d = stage_ref(b, i, in, meta)) >= 0)
				b->st[d].needed = 1;
		}
	}
	return 0;
}

int dfb_build(const struct dockerfile *df, const struct dfb_options *o, const struct dfb_ops *ops, void *ctx,
	      struct dfb_result *res, char *err, size_t errlen)
{
	struct builder b = { .df = df, .o = o, .ops = ops, .ctx = ctx, .err = err, .errlen = errlen, .res = res };
	struct df_vars meta;
	unsigned i, k, first, t;
	int r = 0;

	memset(res, 0, sizeof(*res));
	err[0] = '\0';
	if (mkdir(o->cache, 0700) < 0 && errno != EEXIST)
		return dfb_berr(&b, NULL, -errno, "%s: %s", o->cache, strerror(errno));
	if ((r = dfb_load_ignore(&b)))
		return r;
	if (!(b.stage_of = calloc(df->n, sizeof(*b.stage_of)))) {
		r = -ENOMEM;
		goto out;
	}
	/* the global ARGs, then the stages */
	for (first = 0; first < df->n && df->ins[first].op == DF_ARG; first++) {
		meta = (struct df_vars){ (const char **)b.meta.v, b.meta.n };
		if ((r = do_arg(&b, &b.meta, &meta, &df->ins[first], 1)))
			goto out;
	}
	meta = (struct df_vars){ (const char **)b.meta.v, b.meta.n };
	for (i = first; i < df->n; i++) {
		if (df->ins[i].op == DF_FROM) {
			struct stage *p = realloc(b.st, (b.nst + 1) * sizeof(*p));
			char **w, e[256];
			unsigned nw;

			if (!p) {
				r = -ENOMEM;
				goto out;
			}
			b.st = p;
			memset(&b.st[b.nst], 0, sizeof(b.st[0]));
			if ((r = df_expand(df->ins[i].rest, df->escape, &meta, 1, &w, &nw, e, sizeof(e)))) {
				b.step = i + 1;
				b.nsteps = df->n;
				r = dfb_berr(&b, &df->ins[i], r, "%s", e);
				goto out;
			}
			if (nw == 3 && !strcasecmp(w[1], "as") && strlen(w[2]) < sizeof(b.st[0].name)) {
				snprintf(b.st[b.nst].name, sizeof(b.st[0].name), "%s", w[2]);
				for (char *c = b.st[b.nst].name; *c; c++)
					*c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
			} else if (nw != 1) {
				df_words_free(w);
				r = dfb_berr(&b, NULL, -EINVAL, "line %u: FROM IMAGE [AS NAME]", df->ins[i].line);
				goto out;
			}
			df_words_free(w);
			b.nst++;
		}
		b.stage_of[i] = b.nst - 1;
	}
	t = b.nst - 1;
	if (o->target) {
		int k2 = -1;

		for (k = 0; k < b.nst; k++)
			if (!strcasecmp(b.st[k].name, o->target))
				k2 = (int)k;
		if (k2 < 0) {
			r = dfb_berr(&b, NULL, -ENOENT, "--target %s: no stage of that name", o->target);
			goto out;
		}
		t = (unsigned)k2;
	}
	if ((r = mark_needed(&b, t, &meta)))
		goto out;
	for (i = first; i < df->n; i++)
		b.nsteps += b.st[b.stage_of[i]].needed;
	for (i = first; i < df->n; i++) {
		unsigned si = b.stage_of[i];

		if (!b.st[si].needed)
			continue;
		b.step++;
		r = df->ins[i].op == DF_FROM ? from_step(&b, si, &df->ins[i], &meta) : instr(&b, si, &df->ins[i]);
		if (r)
			goto out;
		if (i + 1 == df->n || b.stage_of[i + 1] != si)
			b.st[si].built = 1;
	}
	for (const char *const *a = o->build_args; a && *a; a++) {
		size_t n = strcspn(*a, "=");
		char name[256];

		snprintf(name, sizeof(name), "%.*s", (int)n, *a);
		if (!df_var(&(struct df_vars){ (const char **)b.used_args.v, b.used_args.n }, name))
			progress(&b, "note: --build-arg %s was not consumed (no ARG %s)\n", name, name);
	}
	res->steps = b.step;
	snprintf(res->tree, sizeof(res->tree), "%s", b.st[t].src);
	snprintf(res->key, sizeof(res->key), "%s", b.st[t].key);
	r = dfb_config_json(&b.st[t], &res->config);
out:
	for (k = 0; k < b.nst; k++) {
		if (b.st[k].work) {
			char w[PATH_MAX];

			snprintf(w, sizeof(w), "%s", b.st[k].src);
			*strrchr(w, '/') = '\0';
			dfb_rm_tree(w);
		}
		dfb_stage_free(&b.st[k]);
	}
	free(b.st);
	free(b.stage_of);
	dfb_sv_free(&b.meta);
	dfb_sv_free(&b.ignore);
	dfb_sv_free(&b.used_args);
	if (r && !err[0])
		snprintf(err, errlen, "%s", strerror(-r));
	return r;
}

void dfb_result_free(struct dfb_result *res)
{
	free(res->config);
	res->config = NULL;
}
