/* The Dockerfile builder's step cache (dockerfile_build.h): each step's
 * key (the parent's key, the instruction, what it depends on), its tree
 * under CACHE/KEY/root, a work copy of a stage's tree for a step to change
 * and its commit as the step's entry, and a base image's tree. */
#include "cli/util/util.h"
#include "cli/dockerfile/dockerfile_priv.h"
#include "cli/images/images.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void dfb_h_str(struct oci_hash *h, const char *s)
{
	oci_hash_update(h, s ? s : "", (s ? strlen(s) : 0) + 1);
}

void dfb_key_of(const char *parent, const char *what, const char *extra, char out[72])
{
	struct oci_hash h;
	char d[OCI_DIGEST_MAX];

	if (oci_hash_init(&h)) {
		snprintf(out, 72, "x");
		return;
	}
	dfb_h_str(&h, "vmm-dockerfile-step-1");
	dfb_h_str(&h, parent);
	dfb_h_str(&h, what);
	dfb_h_str(&h, extra);
	oci_hash_final(&h, d);
	snprintf(out, 72, "%s", d + 7);
}

int dfb_rm_tree(const char *dir)
{
	const char *rm[] = { "rm", "-rf", "--", dir, NULL };

	return cli_run_tool_ok(rm, 1);
}

static int copy_tree(const char *from, const char *to)
{
	char src[PATH_MAX + 4];
	const char *cp[] = { "cp", "-a", "--reflink=auto", "--", src, to, NULL };

	snprintf(src, sizeof(src), "%s/.", from);
	if (mkdir(to, 0755) < 0 && errno != EEXIST)
		return -errno;
	return cli_run_tool_ok(cp, 1);
}

static void cache_path(struct builder *b, const char *key, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", b->o->cache, key);
}

/* A cache entry for key (its tree in KEY/root): 1 and s->src set if it is
 * there (and may be used). */
int dfb_cache_hit(struct builder *b, struct stage *s, const char *key, int always)
{
	char p[PATH_MAX];
	struct stat st;

	if (b->o->no_cache && !always)
		return 0;
	cache_path(b, key, p, sizeof(p));
	if (strlen(p) + 6 >= sizeof(s->src) || stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	if (s->work)
		dfb_rm_tree(s->src);
	snprintf(s->src, sizeof(s->src), "%s/root", p);
	s->work = 0;
	return 1;
}

/* The stage's tree as a work directory of its own, to change. */
int dfb_materialize(struct builder *b, struct stage *s, const struct df_instr *in)
{
	char w[PATH_MAX];
	int r;

	if (s->work)
		return 0;
	snprintf(w, sizeof(w), "%s/tmp-%d-%u", b->o->cache, (int)getpid(), b->nwork++);
	dfb_rm_tree(w);
	if (mkdir(w, 0700) < 0)
		return dfb_berr(b, in, -errno, "%s: %s", w, strerror(errno));
	snprintf(w + strlen(w), sizeof(w) - strlen(w), "/root");
	if ((r = s->src[0] ? copy_tree(s->src, w) : (mkdir(w, 0755) < 0 ? -errno : 0))) {
		*strrchr(w, '/') = '\0';
		dfb_rm_tree(w);
		return dfb_berr(b, in, r, "copying the tree for this step failed");
	}
	snprintf(s->src, sizeof(s->src), "%s", w);
	s->work = 1;
	return 0;
}

/* The work tree becomes the cache entry for key. */
int dfb_commit(struct builder *b, struct stage *s, const char *key, const struct df_instr *in)
{
	char dst[PATH_MAX], w[PATH_MAX];

	cache_path(b, key, dst, sizeof(dst));
	snprintf(w, sizeof(w), "%s", s->src);
	*strrchr(w, '/') = '\0';
	if (rename(w, dst) < 0) {
		if (errno != EEXIST && errno != ENOTEMPTY)
			return dfb_berr(b, in, -errno, "recording the step in the cache: %s", strerror(errno));
		/* another build made it meanwhile (or --no-cache): take ours */
		dfb_rm_tree(dst);
		if (rename(w, dst) < 0)
			return dfb_berr(b, in, -errno, "recording the step in the cache: %s", strerror(errno));
	}
	snprintf(s->src, sizeof(s->src), "%.4000s/root", dst);
	s->work = 0;
	return 0;
}

/* FROM REF / COPY --from=REF of an image: its tree in the cache. */
int dfb_base_tree(struct builder *b, const char *ref, const struct df_instr *in, struct stage *into,
		     char **config)
{
	char id[512], key[72], p[PATH_MAX], err[400] = "", *cfg = NULL;
	int r;

	if (config)
		*config = NULL;
	if (!b->ops->resolve || !b->ops->fill)
		return dfb_berr(b, in, -ENOTSUP, "%s: no image source", ref);
	/* resolve always writes its config: COPY --from=IMAGE wants none */
	r = b->ops->resolve(b->ctx, ref, id, sizeof(id), &cfg, err, sizeof(err));
	if (config && !r)
		*config = cfg;
	else
		free(cfg);
	if (r)
		return dfb_berr(b, in, r, "%s", err[0] ? err : strerror(-r));
	dfb_key_of("", "FROM", id, key);
	snprintf(into->key, sizeof(into->key), "%s", key);
	if (!b->o->refresh_bases && dfb_cache_hit(b, into, key, 1))
		return 0;
	into->src[0] = '\0';
	if ((r = dfb_materialize(b, into, in)))
		return r;
	if ((r = b->ops->fill(b->ctx, id, into->src, err, sizeof(err)))) {
		snprintf(p, sizeof(p), "%s", into->src);
		*strrchr(p, '/') = '\0';
		dfb_rm_tree(p);
		into->work = 0;
		return dfb_berr(b, in, r, "%s", err[0] ? err : strerror(-r));
	}
	return dfb_commit(b, into, key, in);
}
