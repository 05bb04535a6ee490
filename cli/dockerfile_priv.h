/* The Dockerfile builder's insides, shared by dockerfile_build.c (stages,
 * steps, the cache) and dockerfile_copy.c (COPY, ADD, .dockerignore). */
#ifndef CLI_DOCKERFILE_PRIV_H
#define CLI_DOCKERFILE_PRIV_H

#include <limits.h>

#include "dockerfile_build.h"
#include "oci_image.h"

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

int dfb_sv_push(struct strv *s, const char *str);
void dfb_sv_free(struct strv *s);
/* Sets b->err to "step N/M (line L) OP: ..." (no prefix without in); r. */
int dfb_berr(struct builder *b, const struct df_instr *in, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void dfb_h_str(struct oci_hash *h, const char *s);
/* openat2(RESOLVE_IN_ROOT) of path below rootfd. */
int dfb_open_in_root(int rootfd, const char *path, int flags);
/* Lexically cleaned absolute path; ".." stops at the root. */
void dfb_clean_path(const char *p, char *out, size_t len);
void dfb_join_workdir(const char *wd, const char *p, char *out, size_t len);
int dfb_rm_tree(const char *dir);
int dfb_stage_by_name(struct builder *b, const char *name, unsigned before);
/* An image's tree in the cache (FROM REF, COPY --from=REF). */
int dfb_base_tree(struct builder *b, const char *ref, const struct df_instr *in, struct stage *into, char **config);

/* dockerfile_copy.c */
int dfb_load_ignore(struct builder *b);
/* COPY/ADD words (sources..., dest): apply 0 hashes what would be copied
 * into h, apply 1 copies into s's tree. */
int dfb_copy_step(struct builder *b, struct stage *s, const struct df_instr *in, char **words, unsigned nw, int apply,
		  struct oci_hash *h);

#endif
