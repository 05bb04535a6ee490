/* The Dockerfile builder's insides, shared by dockerfile_build.c (the
 * stages' graph, the steps, the instructions), dockerfile_stage.c (a
 * stage's state, the image config), dockerfile_cache.c (the step cache)
 * and dockerfile_copy.c (COPY, ADD, .dockerignore). */
#ifndef CLI_DOCKERFILE_PRIV_H
#define CLI_DOCKERFILE_PRIV_H

#include <limits.h>

#include "cli/dockerfile/dockerfile_build.h"
#include "cli/images/images.h"

/* A list of malloc'd strings. */
struct strv {
	char **v;
	unsigned n;
};

struct stage {
	char name[64];
	int needed, built;
	struct strv env, args, cmd, entry, shell, ports, labels, volumes, health;
	int has_cmd, has_entry;
	char *workdir, *user, *stopsignal;
	char key[72];
	char src[PATH_MAX]; /* the current tree */
	int work;           /* src is our work directory (else a cache entry) */
};

struct builder {
	const struct dockerfile *df;
	const struct dfb_options *o;
	const struct dfb_ops *ops;
	void *ctx;
	struct stage *st;
	unsigned nst;
	unsigned *stage_of; /* instruction -> stage index */
	struct strv meta;   /* global ARGs (before the first FROM) */
	struct strv ignore;
	int ignore_neg;
	struct strv used_args;
	unsigned step, nsteps, nwork;
	char *err;
	size_t errlen;
	struct dfb_result *res;
};

/* PATH of a RUN step and of the image, unless ENV sets one. */
#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* dockerfile_stage.c: string lists (0 or -ENOMEM) */
int dfb_sv_push(struct strv *s, const char *str);
void dfb_sv_free(struct strv *s);
/* NAME=VALUE: replaces the entry of that name or appends. */
int dfb_sv_setkv(struct strv *s, const char *kv);
/* The bytes the strings hold (with their NULs). */
size_t dfb_sv_bytes(const struct strv *s);
/* Appends s's strings to d. */
int dfb_sv_copy(struct strv *d, const struct strv *s);
/* d becomes v[0..n). */
int dfb_sv_from(struct strv *d, char *const *v, unsigned n);
/* *p becomes a copy of v. */
int dfb_set_str(char **p, const char *v);
void dfb_stage_free(struct stage *s);
/* A base image's config.json into the stage (Env, Cmd, Entrypoint,
 * WorkingDir, User, ExposedPorts; vmm.mem/vmm.cpus labels); one without
 * usable defaults counts as scratch. 0 or -ENOMEM. */
int dfb_stage_from_config(struct stage *s, const char *json);
/* The variables an instruction sees: the stage's ARGs (those with a
 * value), then its ENV; *mem is the caller's to free. */
int dfb_vars_of(struct builder *b, const struct stage *s, struct df_vars *v, const char ***mem);
/* The image's config.json (malloc'd) from the stage (a PATH added to its
 * ENV if it has none). 0, -ENOMEM or -E2BIG. */
int dfb_config_json(struct stage *s, char **out);
/* Sets b->err to "step N/M (line L) OP: ..." (no prefix without in); r. */
int dfb_berr(struct builder *b, const struct df_instr *in, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void dfb_h_str(struct oci_hash *h, const char *s);
/* openat2(RESOLVE_IN_ROOT) of path below rootfd. */
int dfb_open_in_root(int rootfd, const char *path, int flags);
/* Lexically cleaned absolute path; ".." stops at the root. */
void dfb_clean_path(const char *p, char *out, size_t len);
void dfb_join_workdir(const char *wd, const char *p, char *out, size_t len);
/* A stage by name (or index) among the first `before`; -1 if none. */
int dfb_stage_by_name(struct builder *b, const char *name, unsigned before);

/* dockerfile_cache.c */
int dfb_rm_tree(const char *dir);
/* A step's key (72 bytes: hex) from its parent's, what it is and what it
 * depends on. */
void dfb_key_of(const char *parent, const char *what, const char *extra, char out[72]);
/* A cache entry for key (its tree in KEY/root): 1 and s->src set if it is
 * there and may be used (always: even with --no-cache). */
int dfb_cache_hit(struct builder *b, struct stage *s, const char *key, int always);
/* The stage's tree as a work directory of its own, to change. */
int dfb_materialize(struct builder *b, struct stage *s, const struct df_instr *in);
/* The work tree becomes the cache entry for key. */
int dfb_commit(struct builder *b, struct stage *s, const char *key, const struct df_instr *in);
/* An image's tree in the cache (FROM REF, COPY --from=REF). */
int dfb_base_tree(struct builder *b, const char *ref, const struct df_instr *in, struct stage *into, char **config);

/* dockerfile_copy.c */
int dfb_load_ignore(struct builder *b);
/* COPY/ADD words (sources..., dest): apply 0 hashes what would be copied
 * into h, apply 1 copies into s's tree. */
int dfb_copy_step(struct builder *b, struct stage *s, const struct df_instr *in, char **words, unsigned nw, int apply,
		  struct oci_hash *h);

#endif
