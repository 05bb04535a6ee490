/* The Dockerfile builder (docs/images.md "Building from a Dockerfile"):
 * walks a parsed Dockerfile stage by stage, keeps each stage's state (ENV,
 * ARG, WORKDIR, USER, SHELL, CMD, ...), applies COPY/ADD/WORKDIR to a root
 * tree on the host and hands RUN to an executor, with a per-step cache:
 * every step that changes files is keyed by the parent step's key, the
 * instruction after substitution and the content of what it copies (a RUN
 * also by its environment), and its resulting tree is kept under
 * CACHE/KEY/root, so an unchanged step is reused ("--> cached").
 *
 * What comes from outside (a base image's tree, running a command in a
 * sandbox) goes through dfb_ops: the real ones are image_dockerfile.c's,
 * the unit tests pass fakes. */
#ifndef CLI_DOCKERFILE_BUILD_H
#define CLI_DOCKERFILE_BUILD_H

#include <limits.h>
#include <stdio.h>

#include "cli/dockerfile/dockerfile_parse.h"

struct dfb_run {
	const char *const *argv;
	const char *const *env; /* NAME=VALUE, NULL-terminated */
	const char *cwd;        /* absolute */
	const char *user;       /* "" for root */
	unsigned step, nsteps, line;
};

struct dfb_ops {
	/* What FROM REF (not scratch, not a stage) is: id names its content
	 * for the cache ("vmm:python:3@1700000000"), *config its image config
	 * defaults (config.json's shape; malloc'd, NULL if none): config is
	 * never NULL, and *config is always written. */
	int (*resolve)(void *ctx, const char *ref, char *id, size_t idlen, char **config, char *err, size_t errlen);
	/* Fills the empty directory dir with id's root tree. */
	int (*fill)(void *ctx, const char *id, const char *dir, char *err, size_t errlen);
	/* Runs r->argv in a sandbox booted from the tree at dir, which it
	 * changes in place; the command's output goes to the terminal. */
	int (*run)(void *ctx, const char *dir, const struct dfb_run *r, char *err, size_t errlen);
};

struct dfb_options {
	const char *context;        /* the build context directory */
	const char *const *build_args; /* NAME=VALUE, NULL-terminated */
	const char *target;         /* stage name, or NULL for the last */
	const char *cache;          /* the step cache directory (created) */
	int no_cache;               /* do not reuse steps (still records them) */
	int refresh_bases;          /* make base images' trees again (FROM debootstrap: fetches newer packages) */
	FILE *progress;             /* STEP lines (NULL: none) */
};

struct dfb_result {
	char tree[PATH_MAX];   /* the final stage's tree (a cache entry: copy it, never change it) */
	char *config;          /* config.json of the image (malloc'd) */
	unsigned steps, cached, runs; /* steps taken, reused, RUN steps executed */
	char key[72];          /* the last step's key */
};

/* A stage's ENV, its ARGs and its LABELs (and the ARGs before the first
 * FROM) each add up to at most this many bytes: a Dockerfile's expansion
 * words are bounded (DF_WORD_MAX), this bounds what lines of them keep. */
#define DFB_VARS_MAX (1u << 20)

/* 0, or -errno with err set to one line naming the step and its line. */
int dfb_build(const struct dockerfile *df, const struct dfb_options *o, const struct dfb_ops *ops, void *ctx,
	      struct dfb_result *res, char *err, size_t errlen);
void dfb_result_free(struct dfb_result *res);

/* .dockerignore: 1 if the context-relative path rel is excluded by the
 * patterns (Go filepath.Match per component, ** for any number of them,
 * ! for exceptions, the last match wins, a match on a parent counts). */
int dfb_ignored(const char *const *patterns, unsigned n, const char *rel);
/* One path component glob (*, ?, [...]) as Go's filepath.Match. */
int dfb_match(const char *pattern, const char *path);

#endif
