/* libFuzzer target: the Dockerfile parser and Docker's word expansion
 * (cli/dockerfile/dockerfile.c), what vmm image build -f reads from a file anyone may
 * hand it. Oracles: every instruction has a known op, a first line inside
 * the file, flags that start with "--", and a describe() text; expansion
 * either fails with a message or yields NUL-terminated words, the same
 * ones a second time (it is a pure function of its input). A small
 * Dockerfile is also built (cli/dockerfile/dockerfile_build.c) against a context
 * with a file, a directory, a link, an ignored file and a FIFO, with a
 * fake image source that writes through its config pointer as the real
 * one does: stage references (COPY --from), ENV/ARG growth and the
 * context checks run as vmm image build runs them. Oracle: the build
 * ends (no crash, no hang on the FIFO, no unbounded growth), and with an
 * error message when it fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/dockerfile/dockerfile_parse.h"
#include "cli/dockerfile/dockerfile_build.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static int fake_resolve(void *ctx, const char *ref, char *id, size_t idlen, char **config, char *err, size_t errlen)
{
	(void)ctx;
	*config = NULL; /* as image_dockerfile.c's real_resolve */
	if (strcmp(ref, "base")) {
		snprintf(err, errlen, "%s: no such image", ref);
		return -2;
	}
	snprintf(id, idlen, "fake:base@1");
	*config = strdup("{\"Env\":[\"PATH=/bin\"],\"Cmd\":[\"sh\"]}");
	return 0;
}

static int fake_fill(void *ctx, const char *id, const char *dir, char *err, size_t errlen)
{
	char p[4200];
	int fd;

	(void)ctx, (void)id, (void)err, (void)errlen;
	snprintf(p, sizeof(p), "%s/etc", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/etc/passwd", dir);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0) {
		if (write(fd, "root:x:0:0::/:/bin/sh\n", 22) < 0) {
		}
		close(fd);
	}
	return 0;
}

static int fake_run(void *ctx, const char *dir, const struct dfb_run *r, char *err, size_t errlen)
{
	(void)ctx, (void)dir, (void)r, (void)err, (void)errlen;
	return 0;
}

static const struct dfb_ops fake_ops = { fake_resolve, fake_fill, fake_run };

/* The context and cache, made once per process. */
static const char *work_dir(void)
{
	static char dir[64];
	char p[128];
	int fd;

	if (dir[0])
		return dir;
	snprintf(dir, sizeof(dir), "/tmp/fuzz_dockerfile.XXXXXX");
	if (!mkdtemp(dir))
		abort();
	snprintf(p, sizeof(p), "%s/ctx", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/ctx/d", dir);
	mkdir(p, 0755);
	static const char *const files[] = { "a", "d/x", "secret", ".dockerignore" };
	for (unsigned i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/ctx/%s", dir, files[i]);
		if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
			abort();
		if (write(fd, i == 3 ? "secret\n" : "x\n", i == 3 ? 7 : 2) < 0) {
		}
		close(fd);
	}
	snprintf(p, sizeof(p), "%s/ctx/link", dir);
	if (symlink("secret", p)) {
	}
	snprintf(p, sizeof(p), "%s/ctx/fifo", dir);
	mkfifo(p, 0644);
	return dir;
}

/* A build of a parsed Dockerfile small enough to build per input (each
 * step that changes files copies a tree). */
static void build(const struct dockerfile *df)
{
	char ctx[128], cache[128], err[512] = "", rm[160];
	const char *dir = work_dir();
	struct dfb_options o = { .context = ctx, .cache = cache };
	struct dfb_result res;
	unsigned steps = 0;

	for (unsigned i = 0; i < df->n; i++)
		steps += df->ins[i].op == DF_FROM || df->ins[i].op == DF_COPY || df->ins[i].op == DF_ADD ||
			 df->ins[i].op == DF_RUN || df->ins[i].op == DF_WORKDIR;
	if (steps > 8)
		return;
	snprintf(ctx, sizeof(ctx), "%s/ctx", dir);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	if (dfb_build(df, &o, &fake_ops, NULL, &res, err, sizeof(err)) && !err[0])
		abort(); /* a failure says why */
	dfb_result_free(&res);
	snprintf(rm, sizeof(rm), "rm -rf %s", cache);
	if (system(rm)) {
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static const char *kv[] = { "A=apple", "E=", "B=x y" };
	struct df_vars v = { kv, 3 };
	struct dockerfile df;
	char err[256], *text = malloc(len + 1);
	unsigned i, lines = 1;

	if (!text)
		return 0;
	memcpy(text, data, len);
	text[len] = '\0';
	for (i = 0; i < len; i++)
		lines += data[i] == '\n';
	if (df_parse((const char *)data, len, &df, err, sizeof(err)) == 0) {
		build(&df);
		for (i = 0; i < df.n; i++) {
			char *d = df_describe(&df.ins[i]);

			if ((unsigned)df.ins[i].op >= DF_NR_OPS || !df.ins[i].line || df.ins[i].line > lines || !d)
				abort();
			for (unsigned f = 0; f < df.ins[i].nflags; f++)
				if (strncmp(df.ins[i].flags[f], "--", 2))
					abort();
			free(d);
		}
		df_free(&df);
	}
	/* the text as one instruction's arguments, both escapes, split or not */
	if (!memchr(data, '\0', len)) {
		for (int split = 0; split < 2; split++) {
			char **w1, **w2;
			unsigned n1, n2;
			int r1 = df_expand(text, split ? '`' : '\\', &v, split, &w1, &n1, err, sizeof(err));
			int r2 = df_expand(text, split ? '`' : '\\', &v, split, &w2, &n2, err, sizeof(err));

			if (r1 != r2 || (!r1 && n1 != n2))
				abort();
			if (!r1) {
				for (i = 0; i < n1; i++)
					if (strcmp(w1[i], w2[i]))
						abort();
				if (w1[n1])
					abort();
				df_words_free(w1);
				df_words_free(w2);
			}
		}
	}
	free(text);
	return 0;
}
