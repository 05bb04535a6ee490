/* Dockerfile parsing and word expansion (cli/dockerfile/dockerfile.c), and the
 * builder's plan and cache (cli/dockerfile/dockerfile_build.c, dockerfile_stage.c,
 * dockerfile_cache.c) with a fake executor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/dockerfile/dockerfile_parse.h"
#include "cli/dockerfile/dockerfile_build.h"
#include "cli/dockerfile/dockerfile_priv.h"
#include "cli/images/oci_image.h"

static struct dockerfile parse_ok(const char *text)
{
	struct dockerfile df;
	char err[256] = "";
	int r = df_parse(text, strlen(text), &df, err, sizeof(err));

	if (r)
		fail_msg("parse failed: %s", err);
	return df;
}

static void parse_bad(const char *text, const char *want)
{
	struct dockerfile df;
	char err[256] = "";

	assert_int_equal(df_parse(text, strlen(text), &df, err, sizeof(err)), -EINVAL);
	if (!strstr(err, want))
		fail_msg("error '%s' does not say '%s'", err, want);
}

static void test_lines(void **state)
{
	struct dockerfile df;

	(void)state;
	df = parse_ok("# syntax=docker/dockerfile:1\n"
		      "# a comment\n"
		      "from   busybox AS build\n"
		      "RUN echo a \\\n"
		      "# a comment inside\n"
		      "\n"
		      "    && echo b\n"
		      "  run   [\"/bin/sh\", \"-c\", \"echo \\\"x\\\"\"]\r\n"
		      "COPY --chown=1:2 --from=build a b /dst/\n"
		      "CMD [\"not json\"\n"
		      "ENV A=1\\\n");
	assert_string_equal(df.syntax, "docker/dockerfile:1");
	assert_int_equal(df.escape, '\\');
	assert_int_equal(df.n, 6);
	assert_int_equal(df.ins[0].op, DF_FROM);
	assert_int_equal(df.ins[0].line, 3);
	assert_string_equal(df.ins[0].rest, "busybox AS build");
	assert_int_equal(df.ins[1].op, DF_RUN);
	assert_int_equal(df.ins[1].line, 4);
	assert_false(df.ins[1].json);
	assert_string_equal(df.ins[1].rest, "echo a     && echo b");
	assert_true(df.ins[2].json);
	assert_int_equal(df.ins[2].argc, 3);
	assert_string_equal(df.ins[2].argv[2], "echo \"x\"");
	assert_int_equal(df.ins[3].op, DF_COPY);
	assert_int_equal(df.ins[3].nflags, 2);
	assert_string_equal(df_flag(&df.ins[3], "chown"), "1:2");
	assert_string_equal(df_flag(&df.ins[3], "from"), "build");
	assert_null(df_flag(&df.ins[3], "chmod"));
	assert_string_equal(df.ins[3].rest, "a b /dst/");
	/* Not a JSON array: the shell form, as Docker takes it. */
	assert_int_equal(df.ins[4].op, DF_CMD);
	assert_false(df.ins[4].json);
	assert_string_equal(df.ins[4].rest, "[\"not json\"");
	/* A continuation at the end of the file ends the instruction. */
	assert_string_equal(df.ins[5].rest, "A=1");
	df_free(&df);
}

static void test_directives(void **state)
{
	struct dockerfile df;

	(void)state;
	df = parse_ok("# escape=`\n"
		      "FROM scratch\n"
		      "COPY a `\n"
		      "  C:\\dir\\\n");
	assert_int_equal(df.escape, '`');
	assert_int_equal(df.n, 2);
	assert_string_equal(df.ins[1].rest, "a   C:\\dir\\");
	df_free(&df);
	/* After a comment, a directive is a comment. */
	df = parse_ok("# hello\n"
		      "# escape=`\n"
		      "FROM scratch\n"
		      "RUN a \\\n"
		      " b\n");
	assert_int_equal(df.escape, '\\');
	assert_string_equal(df.ins[1].rest, "a  b");
	df_free(&df);
	parse_bad("# escape=x\nFROM scratch\n", "line 1: escape must be");
}

static void test_errors(void **state)
{
	(void)state;
	parse_bad("FROM a\nFROB x\n", "line 2: unknown instruction 'FROB'");
	parse_bad("RUN x\n", "line 1: the first instruction must be FROM");
	parse_bad("ARG A=1\nARG B\n", "the first instruction must be FROM");
	parse_bad("\n\n# c\n", "no instructions");
	parse_bad("FROM a\nRUN <<EOF\necho\nEOF\n", "line 2: RUN: heredocs");
	parse_bad("FROM a\nCOPY <<-\"X\" /f\n", "COPY: heredocs");
	parse_bad("FROM a\nSHELL /bin/bash -c\n", "line 2: SHELL needs the JSON form");
	parse_bad("FROM a\nWORKDIR\n", "line 2: WORKDIR needs arguments");
	parse_bad("FROM a\nCOPY [\"only\"]\n", "COPY needs a source and a destination");
	{
		struct dockerfile df = parse_ok("ARG V=1\nFROM a:$V\nRUN cat <<< x\n");

		assert_int_equal(df.n, 3);
		df_free(&df);
	}
}

static char *expand1(const char *s, const char **kv, unsigned n)
{
	struct df_vars v = { kv, n };
	char **w, err[128];
	unsigned nw;
	char *r;

	assert_int_equal(df_expand(s, '\\', &v, 0, &w, &nw, err, sizeof(err)), 0);
	assert_int_equal(nw, 1);
	r = strdup(w[0]);
	df_words_free(w);
	return r;
}

#define EXPECT(s, want)                                 \
	do {                                            \
		char *got_ = expand1(s, kv, nkv);       \
		assert_string_equal(got_, want);        \
		free(got_);                             \
	} while (0)

static void test_expand(void **state)
{
	const char *kv[] = { "A=apple", "E=", "B=x y", "A=avocado" };
	unsigned nkv = 4;
	struct df_vars v = { kv, nkv };
	char **w, err[128];
	unsigned nw;

	(void)state;
	EXPECT("$A", "avocado"); /* the last one wins */
	EXPECT("${A}s", "avocados");
	EXPECT("$Aa", "");
	EXPECT("${U:-def}", "def");
	EXPECT("${E:-def}", "def");
	EXPECT("${E-def}", "");
	EXPECT("${U-def}", "def");
	EXPECT("${A:-def}", "avocado");
	EXPECT("${A:+alt}", "alt");
	EXPECT("${E:+alt}", "");
	EXPECT("${E+alt}", "alt");
	EXPECT("${U+alt}", "");
	EXPECT("${U:-${A}-x}", "avocado-x");
	EXPECT("'$A'", "$A");
	EXPECT("\"$A b\"", "avocado b");
	EXPECT("\\$A", "$A");
	EXPECT("a\\ b", "a b");
	EXPECT("\"\\$A \\\" \\n\"", "$A \" \\n");
	EXPECT("cost $", "cost $");
	EXPECT("$1", "$1");
	/* Splitting: an expansion is not split again, quotes keep spaces. */
	assert_int_equal(df_expand("  $B 'c d'  e\\ f \"\" ", '\\', &v, 1, &w, &nw, err, sizeof(err)), 0);
	assert_int_equal(nw, 4);
	assert_string_equal(w[0], "x y");
	assert_string_equal(w[1], "c d");
	assert_string_equal(w[2], "e f");
	assert_string_equal(w[3], "");
	df_words_free(w);
	/* The backtick escape. */
	assert_int_equal(df_expand("a`$A `` b", '`', &v, 0, &w, &nw, err, sizeof(err)), 0);
	assert_string_equal(w[0], "a$A ` b");
	df_words_free(w);
	/* Errors. */
	assert_int_equal(df_expand("${U:?needed here}", '\\', &v, 0, &w, &nw, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "U: needed here");
	assert_int_equal(df_expand("${A:?x}", '\\', &v, 0, &w, &nw, err, sizeof(err)), 0);
	assert_string_equal(w[0], "avocado");
	df_words_free(w);
	assert_int_equal(df_expand("${A", '\\', &v, 0, &w, &nw, err, sizeof(err)), -EINVAL);
	assert_int_equal(df_expand("${A%x}", '\\', &v, 0, &w, &nw, err, sizeof(err)), -EINVAL);
	assert_int_equal(df_expand("'open", '\\', &v, 0, &w, &nw, err, sizeof(err)), -EINVAL);
	assert_int_equal(df_expand("\"open", '\\', &v, 0, &w, &nw, err, sizeof(err)), -EINVAL);
	assert_int_equal(df_expand("${}", '\\', &v, 0, &w, &nw, err, sizeof(err)), -EINVAL);
}

/* Expansion is bounded: ${a:-${a:-... nests at most DF_EXPAND_DEPTH deep
 * (200,000 of them overflowed the stack), and what it makes is at most
 * DF_WORD_MAX bytes. */
static void test_expand_bounds(void **state)
{
	const size_t deep = 200000;
	char *s = malloc(deep * 5 + deep + 1), **w, err[128];
	char *big = malloc((DF_WORD_MAX / 2) + 8);
	const char *kv[1];
	struct df_vars v = { kv, 1 };
	unsigned nw;

	(void)state;
	assert_non_null(s);
	assert_non_null(big);
	for (size_t i = 0; i < deep; i++)
		memcpy(s + i * 5, "${a:-", 5);
	memset(s + deep * 5, '}', deep);
	s[deep * 6] = '\0';
	assert_int_equal(df_expand(s, '\\', NULL, 0, &w, &nw, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "nested more than 32 deep"));
	/* 32 deep is fine */
	s[0] = '\0';
	for (unsigned i = 0; i < DF_EXPAND_DEPTH; i++)
		strcat(s, "${a:-");
	strcat(s, "x");
	for (unsigned i = 0; i < DF_EXPAND_DEPTH; i++)
		strcat(s, "}");
	assert_int_equal(df_expand(s, '\\', NULL, 0, &w, &nw, err, sizeof(err)), 0);
	assert_string_equal(w[0], "x");
	df_words_free(w);
	/* A=<half the cap>: $A$A is the cap, $A$A$A over it, also when split */
	memcpy(big, "A=", 2);
	memset(big + 2, 'a', DF_WORD_MAX / 2);
	big[2 + DF_WORD_MAX / 2] = '\0';
	kv[0] = big;
	assert_int_equal(df_expand("$A$A", '\\', &v, 0, &w, &nw, err, sizeof(err)), 0);
	assert_int_equal(strlen(w[0]), DF_WORD_MAX);
	df_words_free(w);
	assert_int_equal(df_expand("$A$A$A", '\\', &v, 0, &w, &nw, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "longer than 1024 KiB"));
	assert_int_equal(df_expand("$A ${A} \"$A\"", '\\', &v, 1, &w, &nw, err, sizeof(err)), -EINVAL);
	assert_int_equal(df_expand("${U:-$A$A$A}", '\\', &v, 1, &w, &nw, err, sizeof(err)), -EINVAL);
	free(big);
	free(s);
}

/* ---- the builder, with a fake executor ------------------------------- */

struct fake {
	unsigned runs;
	char last_env[4096];
	char last_cwd[256];
	char last_user[64];
	int fail_next;
};

static int fake_resolve(void *ctx, const char *ref, char *id, size_t idlen, char **config, char *err, size_t errlen)
{
	(void)ctx;
	*config = NULL; /* as the real one (image_dockerfile.c) does */
	if (strcmp(ref, "base")) {
		snprintf(err, errlen, "%s: no such image", ref);
		return -ENOENT;
	}
	snprintf(id, idlen, "fake:base@1");
	*config = strdup("{\"Env\":[\"PATH=/bin\",\"FROMBASE=1\"],\"Cmd\":[\"sh\"],\"WorkingDir\":\"/\","
			 "\"ExposedPorts\":{\"22/tcp\":{}}}");
	return 0;
}

static int fake_fill(void *ctx, const char *id, const char *dir, char *err, size_t errlen)
{
	char p[4200];
	FILE *f;

	(void)ctx;
	(void)id;
	(void)err;
	(void)errlen;
	snprintf(p, sizeof(p), "%s/etc", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/etc/passwd", dir);
	f = fopen(p, "w");
	fputs("root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/etc/group", dir);
	f = fopen(p, "w");
	fputs("root:x:0:\nstaff:x:50:\n", f);
	fclose(f);
	return 0;
}

/* "Runs" the command: writes its argv's last word into /ran-N. */
static int fake_run(void *ctx, const char *dir, const struct dfb_run *r, char *err, size_t errlen)
{
	struct fake *f = ctx;
	char p[4200];
	FILE *o;
	size_t n = 0;

	if (f->fail_next) {
		f->fail_next = 0;
		snprintf(err, errlen, "exit status 3");
		return -EIO;
	}
	f->runs++;
	snprintf(p, sizeof(p), "%s/ran-%u", dir, f->runs);
	o = fopen(p, "w");
	for (const char *const *a = r->argv; *a; a++)
		fprintf(o, "%s\n", *a);
	fclose(o);
	f->last_env[0] = '\0';
	for (const char *const *e = r->env; *e; e++)
		n += (size_t)snprintf(f->last_env + n, sizeof(f->last_env) - n, "%s;", *e);
	snprintf(f->last_cwd, sizeof(f->last_cwd), "%s", r->cwd);
	snprintf(f->last_user, sizeof(f->last_user), "%s", r->user);
	return 0;
}

static const struct dfb_ops fake_ops = { fake_resolve, fake_fill, fake_run };

static char tmpdir[256];

static void put(const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/ctx/%s", tmpdir, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int build(const char *text, struct fake *f, const char *const *args, const char *target, int no_cache,
		 struct dfb_result *res, char *err)
{
	struct dockerfile df;
	char ctx[300], cache[300];
	struct dfb_options o = { .context = ctx, .build_args = args, .target = target, .cache = cache,
				 .no_cache = no_cache };
	int r;

	snprintf(ctx, sizeof(ctx), "%s/ctx", tmpdir);
	snprintf(cache, sizeof(cache), "%s/cache", tmpdir);
	if ((r = df_parse(text, strlen(text), &df, err, 256)))
		return r;
	r = dfb_build(&df, &o, &fake_ops, f, res, err, 256);
	if (r)
		print_message("build: %s\n", err);
	df_free(&df);
	return r;
}

static int setup_dir(void **state)
{
	char p[300];

	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_dockerfile.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(p, sizeof(p), "%s/ctx", tmpdir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/ctx/sub", tmpdir);
	mkdir(p, 0755);
	return 0;
}

static int teardown_dir(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *tree, const char *rel)
{
	char p[4400], *b = calloc(1, 4096);
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", tree, rel);
	f = fopen(p, "r");
	if (!f) {
		free(b);
		return NULL;
	}
	if (fread(b, 1, 4095, f)) {
	}
	fclose(f);
	return b;
}

static const char *const df_main = "ARG TAG=base\n"
				   "FROM $TAG AS first\n"
				   "ARG GREETING=hi\n"
				   "ENV APP=/app HOME_DIR=\"/home/x y\"\n"
				   "WORKDIR $APP\n"
				   "COPY --chown=app:staff a.txt sub ./\n"
				   "RUN echo $GREETING\n"
				   "USER app\n"
				   "RUN [\"/bin/true\", \"${APP}\"]\n"
				   "EXPOSE 8080 53/udp\n"
				   "LABEL vmm.mem=256 \"other label\"=x\n"
				   "CMD [\"/app/run\"]\n";

static void test_build_cache(void **state)
{
	struct fake f = { 0 };
	struct dfb_result res;
	char err[256], *t;

	(void)state;
	put("a.txt", "A\n");
	put("sub/b.txt", "B\n");
	put(".dockerignore", "# secrets\nsub/*.key\n");
	put("sub/x.key", "secret\n");
	assert_int_equal(build(df_main, &f, NULL, NULL, 0, &res, err), 0);
	assert_int_equal(f.runs, 2);
	assert_int_equal(res.runs, 2);
	assert_int_equal(res.cached, 0);
	assert_int_equal(res.steps, 11); /* the ARG before FROM is no step */
	/* the RUN saw ENV and ARG, the workdir, the user */
	assert_non_null(strstr(f.last_env, "GREETING=hi;"));
	assert_non_null(strstr(f.last_env, "APP=/app;"));
	assert_non_null(strstr(f.last_env, "HOME_DIR=/home/x y;"));
	assert_non_null(strstr(f.last_env, "FROMBASE=1;"));
	assert_string_equal(f.last_cwd, "/app");
	assert_string_equal(f.last_user, "app");
	/* the tree: COPY of a directory copies its contents; .dockerignore */
	t = slurp(res.tree, "app/a.txt");
	assert_string_equal(t, "A\n");
	free(t);
	t = slurp(res.tree, "app/b.txt");
	assert_string_equal(t, "B\n");
	free(t);
	assert_null(slurp(res.tree, "app/x.key"));
	t = slurp(res.tree, "ran-1");
	assert_string_equal(t, "/bin/sh\n-c\necho $GREETING\n");
	free(t);
	t = slurp(res.tree, "ran-2"); /* the second RUN ran on the first one's tree */
	assert_string_equal(t, "/bin/true\n${APP}\n"); /* the exec form is not expanded */
	free(t);
	{
		char p[4400];
		struct stat st;

		snprintf(p, sizeof(p), "%s/app/a.txt", res.tree);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_uid, 1000);
		assert_int_equal(st.st_gid, 50);
	}
	/* the config */
	assert_non_null(strstr(res.config, "\"Cmd\":[\"/app/run\"]"));
	assert_non_null(strstr(res.config, "\"WorkingDir\":\"/app\""));
	assert_non_null(strstr(res.config, "\"User\":\"app\""));
	assert_non_null(strstr(res.config, "\"8080/tcp\":{}"));
	assert_non_null(strstr(res.config, "\"53/udp\":{}"));
	assert_non_null(strstr(res.config, "\"22/tcp\":{}"));
	assert_non_null(strstr(res.config, "\"other label\":\"x\""));
	assert_non_null(strstr(res.config, "\"vmm.mem\":\"256\""));
	dfb_result_free(&res);

	/* Nothing changed: no RUN runs. */
	assert_int_equal(build(df_main, &f, NULL, NULL, 0, &res, err), 0);
	assert_int_equal(f.runs, 2);
	assert_int_equal(res.runs, 0);
	assert_int_equal(res.cached, 4); /* WORKDIR, COPY, RUN, RUN */
	dfb_result_free(&res);

	/* An ignored file changed: still nothing runs. */
	put("sub/x.key", "other secret\n");
	assert_int_equal(build(df_main, &f, NULL, NULL, 0, &res, err), 0);
	assert_int_equal(res.runs, 0);
	dfb_result_free(&res);

	/* A copied file changed: the COPY and both RUNs again. */
	put("sub/b.txt", "B2\n");
	assert_int_equal(build(df_main, &f, NULL, NULL, 0, &res, err), 0);
	assert_int_equal(res.runs, 2);
	assert_int_equal(res.cached, 1); /* WORKDIR */
	dfb_result_free(&res);

	/* A build argument used by the first RUN: both RUNs. */
	{
		const char *args[] = { "GREETING=hello", NULL };

		assert_int_equal(build(df_main, &f, args, NULL, 0, &res, err), 0);
		assert_int_equal(res.runs, 2);
		assert_non_null(strstr(f.last_env, "GREETING=hello;"));
		dfb_result_free(&res);
		assert_int_equal(build(df_main, &f, args, NULL, 0, &res, err), 0);
		assert_int_equal(res.runs, 0);
		dfb_result_free(&res);
	}
	/* --no-cache runs everything. */
	assert_int_equal(build(df_main, &f, NULL, NULL, 1, &res, err), 0);
	assert_int_equal(res.runs, 2);
	assert_int_equal(res.cached, 0);
	dfb_result_free(&res);
}

static void test_build_stages(void **state)
{
	struct fake f = { 0 };
	struct dfb_result res;
	char err[256], *t;
	const char *text = "FROM base AS build\n"
			   "RUN make\n"
			   "FROM base AS unused\n"
			   "RUN never\n"
			   "FROM scratch\n"
			   "COPY --from=build /ran-1 /out/made\n"
			   "COPY --from=0 --chmod=0600 /etc/passwd /p\n"
			   "ENTRYPOINT [\"/out/made\"]\n";

	(void)state;
	assert_int_equal(build(text, &f, NULL, NULL, 0, &res, err), 0);
	assert_int_equal(res.runs, 1); /* the unused stage is skipped */
	assert_int_equal(res.steps, 6);
	t = slurp(res.tree, "out/made");
	assert_string_equal(t, "/bin/sh\n-c\nmake\n");
	free(t);
	{
		char p[4400];
		struct stat st;

		snprintf(p, sizeof(p), "%s/p", res.tree);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0600);
		snprintf(p, sizeof(p), "%s/etc", res.tree);
		assert_int_not_equal(stat(p, &st), 0); /* scratch holds only what was copied */
	}
	assert_non_null(strstr(res.config, "\"Entrypoint\":[\"/out/made\"]"));
	assert_non_null(strstr(res.config, "\"Cmd\":[]"));
	dfb_result_free(&res);
	/* --target builds up to that stage */
	assert_int_equal(build(text, &f, NULL, "unused", 0, &res, err), 0);
	assert_int_equal(res.runs, 1);
	t = slurp(res.tree, "ran-2"); /* the fake's second run */
	assert_non_null(t);
	assert_string_equal(t, "/bin/sh\n-c\nnever\n");
	free(t);
	dfb_result_free(&res);
	assert_int_equal(build(text, &f, NULL, "nope", 0, &res, err), -ENOENT);
	assert_non_null(strstr(err, "--target nope"));
}

static void test_build_errors(void **state)
{
	struct fake f = { 0 };
	struct dfb_result res;
	char err[256];

	(void)state;
	put("a.txt", "A\n");
	assert_int_equal(build("FROM base\nCOPY missing.txt /\n", &f, NULL, NULL, 0, &res, err), -ENOENT);
	assert_string_equal(err, "step 2/2 (line 2) COPY: missing.txt: not found in the build context");
	assert_int_equal(build("FROM base\nCOPY ../../etc/shadow /\n", &f, NULL, NULL, 0, &res, err), -ENOENT);
	assert_non_null(strstr(err, "etc/shadow: not found in the build context"));
	assert_int_equal(build("FROM nothere\n", &f, NULL, NULL, 0, &res, err), -ENOENT);
	assert_string_equal(err, "step 1/1 (line 1) FROM: nothere: no such image");
	assert_int_equal(build("FROM base\nADD http://example.com/x /x\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "ADD of a URL"));
	assert_int_equal(build("FROM base\nRUN --mount=type=cache,target=/x true\n", &f, NULL, NULL, 0, &res, err),
			 -EINVAL);
	assert_non_null(strstr(err, "--mount=type=cache,target=/x is not supported"));
	assert_int_equal(build("FROM base\nCOPY --chown=nobody a.txt /\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "no user 'nobody'"));
	assert_int_equal(build("FROM base\nENV A=${X:?must be set}\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "(line 2) ENV: X: must be set"));
	f.fail_next = 1;
	assert_int_equal(build("FROM base\nRUN false-ish\n", &f, NULL, NULL, 0, &res, err), -EIO);
	assert_string_equal(err, "step 2/2 (line 2) RUN: exit status 3");
	/* a failed RUN leaves no cache entry: the next build runs it */
	assert_int_equal(build("FROM base\nRUN false-ish\n", &f, NULL, NULL, 0, &res, err), 0);
	assert_int_equal(res.runs, 1);
	dfb_result_free(&res);
}

/* ENV A=$A$A doubles A each line: the expansion cap, or the cap on what a
 * stage's ENV keeps, stops it with the line named (it grew to 4 GiB). */
static void test_build_var_bounds(void **state)
{
	struct fake f = { 0 };
	struct dfb_result res;
	char err[256], text[2048];
	int n = snprintf(text, sizeof(text), "FROM scratch\nENV A=0123456789abcdef\n");

	(void)state;
	for (int i = 0; i < 30; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "ENV A=$A$A\n");
	assert_int_equal(build(text, &f, NULL, NULL, 0, &res, err), -EINVAL);
	/* 16 << 16 is 1 MiB: the 17th doubling (line 18) is over the cap */
	assert_non_null(strstr(err, "(line 18) ENV: the expansion is longer than 1024 KiB"));
	/* many names under the word cap: what the stage keeps is bounded */
	n = snprintf(text, sizeof(text), "FROM scratch\nENV A=0123456789abcdef\n");
	for (int i = 0; i < 15; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "ENV A=$A$A\n");
	n += snprintf(text + n, sizeof(text) - (size_t)n, "ENV B=$A\nLABEL x=$A\n");
	assert_int_equal(build(text, &f, NULL, NULL, 0, &res, err), -E2BIG);
	assert_non_null(strstr(err, "(line 18) ENV: the ENV values add up to more than 1024 KiB"));
	assert_int_equal(build("FROM scratch\nARG X=${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-"
			       "${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-${a:-"
			       "${a:-${a:-${a:-${a:-x}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}\n",
			       &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "(line 2) ARG: ${a...}: expansions nested more than 32 deep"));
}

/* COPY --from= an image (the resolver writes through its config pointer,
 * as the real one does: --from passed NULL and crashed), an earlier
 * stage; the stage itself, a later one and a cycle are errors that name
 * the line. */
static void test_build_copy_from(void **state)
{
	struct fake f = { 0 };
	struct dfb_result res;
	char err[256], *t;

	(void)state;
	assert_int_equal(build("FROM scratch\nCOPY --from=base /etc/passwd /p\n", &f, NULL, NULL, 0, &res, err), 0);
	t = slurp(res.tree, "p");
	assert_non_null(t);
	assert_non_null(strstr(t, "app:x:1000"));
	free(t);
	dfb_result_free(&res);
	assert_int_equal(build("FROM base AS one\nFROM scratch\nCOPY --from=one /etc/group /g\n", &f, NULL, NULL, 0,
			       &res, err), 0);
	t = slurp(res.tree, "g");
	assert_non_null(t);
	free(t);
	dfb_result_free(&res);
	assert_int_equal(build("FROM scratch\nCOPY --from=nothere /x /x\n", &f, NULL, NULL, 0, &res, err), -ENOENT);
	assert_string_equal(err, "step 2/2 (line 2) COPY: nothere: no such image");
	assert_int_equal(build("FROM base AS self\nCOPY --from=self /etc /e\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "line 2: COPY --from=self: that is this stage itself"));
	assert_int_equal(build("FROM base\nCOPY --from=0 /etc /e\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "line 2: COPY --from=0: that is this stage itself"));
	assert_int_equal(build("FROM scratch AS a\nCOPY --from=b /y /y\nFROM scratch AS b\nCOPY --from=a /x /x\n", &f,
			       NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "line 2: COPY --from=b: a cycle of stages: stage b needs stage a"));
	assert_int_equal(build("FROM scratch AS a\nCOPY --from=c /y /y\nFROM scratch AS b\nCOPY --from=a /x /x\n"
			       "FROM scratch AS c\nCOPY --from=b /x /x\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "line 2: COPY --from=c: a cycle of stages: stage c needs stage a"));
	assert_int_equal(build("FROM scratch AS a\nCOPY --from=b /y /y\nFROM scratch AS b\n", &f, NULL, "a", 0, &res,
			       err), -EINVAL);
	assert_non_null(strstr(err, "line 2: COPY --from=b: stage b comes later in the Dockerfile"));
}

/* Build-context entries that are neither regular files nor directories
 * are refused before they are opened (a FIFO blocked the build forever);
 * .dockerignore also sees where a link leads; a link cannot leave the
 * context. */
static void test_build_context_entries(void **state)
{
	struct fake f = { 0 };
	struct dfb_result res;
	char err[256], p[4400], *t;

	(void)state;
	snprintf(p, sizeof(p), "%s/ctx/fifo", tmpdir);
	assert_int_equal(mkfifo(p, 0644), 0);
	assert_int_equal(build("FROM base\nCOPY fifo /f\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_string_equal(err, "step 2/2 (line 2) COPY: fifo: a FIFO: COPY and ADD take regular files, directories "
				 "and links");
	assert_int_equal(build("FROM base\nADD fifo /f\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "ADD: fifo: a FIFO"));
	snprintf(p, sizeof(p), "%s/ctx/fifolink", tmpdir);
	assert_int_equal(symlink("fifo", p), 0);
	assert_int_equal(build("FROM base\nCOPY fifolink /f\n", &f, NULL, NULL, 0, &res, err), -EINVAL);
	assert_non_null(strstr(err, "fifolink: a FIFO"));
	/* inside a copied directory a FIFO is left out, as before */
	snprintf(p, sizeof(p), "%s/ctx/sub/pipe", tmpdir);
	assert_int_equal(mkfifo(p, 0644), 0);
	put("sub/b.txt", "B\n");
	assert_int_equal(build("FROM base\nCOPY sub /s/\n", &f, NULL, NULL, 0, &res, err), 0);
	t = slurp(res.tree, "s/b.txt");
	assert_non_null(t);
	free(t);
	snprintf(p, sizeof(p), "%s/s/pipe", res.tree);
	assert_int_not_equal(access(p, F_OK), 0);
	dfb_result_free(&res);

	/* .dockerignore through a link: to a file, to a directory, inside one */
	put(".dockerignore", "secret\nprivate\nsub/*.key\n");
	put("secret", "S\n");
	put("sub/x.key", "K\n");
	snprintf(p, sizeof(p), "%s/ctx/private", tmpdir);
	mkdir(p, 0755);
	put("private/k", "P\n");
	snprintf(p, sizeof(p), "%s/ctx/alias", tmpdir);
	assert_int_equal(symlink("secret", p), 0);
	snprintf(p, sizeof(p), "%s/ctx/pub", tmpdir);
	assert_int_equal(symlink("private", p), 0);
	snprintf(p, sizeof(p), "%s/ctx/sublink", tmpdir);
	assert_int_equal(symlink("sub", p), 0);
	snprintf(p, sizeof(p), "%s/ctx/pw", tmpdir);
	assert_int_equal(symlink("/etc/passwd", p), 0);
	assert_int_equal(build("FROM base\nCOPY alias /s\n", &f, NULL, NULL, 0, &res, err), -ENOENT);
	assert_string_equal(err, "step 2/2 (line 2) COPY: alias: a link to secret, which .dockerignore excludes");
	assert_int_equal(build("FROM base\nCOPY pub/k /k\n", &f, NULL, NULL, 0, &res, err), -ENOENT);
	assert_non_null(strstr(err, "pub/k: a link to private/k, which .dockerignore excludes"));
	assert_int_equal(build("FROM base\nCOPY pub /p/\n", &f, NULL, NULL, 0, &res, err), -ENOENT);
	assert_int_equal(build("FROM base\nCOPY sublink /s/\n", &f, NULL, NULL, 0, &res, err), 0);
	t = slurp(res.tree, "s/b.txt");
	assert_non_null(t);
	free(t);
	assert_null(slurp(res.tree, "s/x.key"));
	dfb_result_free(&res);
	/* a link out of the context resolves inside it: not there */
	assert_int_equal(build("FROM base\nCOPY pw /pw\n", &f, NULL, NULL, 0, &res, err), -ENOENT);
	assert_non_null(strstr(err, "pw: not found in the build context"));
}

static void test_ignore(void **state)
{
	const char *p[] = { "*.md", "!README.md", "docs/**/*.tmp", "build", "/root-only" };

	(void)state;
	assert_true(dfb_ignored(p, 5, "x.md"));
	assert_false(dfb_ignored(p, 5, "README.md"));
	assert_false(dfb_ignored(p, 5, "sub/x.md")); /* * does not cross / */
	assert_true(dfb_ignored(p, 5, "docs/a/b/c.tmp"));
	assert_true(dfb_ignored(p, 5, "docs/c.tmp"));
	assert_true(dfb_ignored(p, 5, "build/out/x.o")); /* a parent matches */
	assert_false(dfb_ignored(p, 5, "builds"));
	assert_false(dfb_ignored(p, 5, "main.c"));
}

/* A stage's state from a base image's config and back into the image's
 * config.json (dockerfile_stage.c): what FROM takes is what the image
 * built on it says, a PATH added only when ENV has none. */
static void test_stage_config(void **state)
{
	static const char base[] =
		"{\"Env\":[\"A=1\",\"PATH=/opt/bin\"],\"Cmd\":[\"sh\",\"-c\",\"echo hi\"],"
		"\"Entrypoint\":[\"/init\"],\"WorkingDir\":\"/srv\",\"User\":\"app\","
		"\"ExposedPorts\":{\"8080/tcp\":{}},\"Labels\":{\"vmm.mem\":\"512\",\"vmm.cpus\":\"2\","
		"\"vmm.drives\":\"work:/w\"}}";
	struct stage s;
	struct oci_defaults *d = calloc(1, sizeof(*d));
	char *json = NULL;

	(void)state;
	assert_non_null(d);
	memset(&s, 0, sizeof(s));
	assert_int_equal(dfb_stage_from_config(&s, base), 0);
	assert_int_equal(s.env.n, 2);
	assert_int_equal(s.has_cmd, 1);
	assert_int_equal(s.has_entry, 1);
	assert_string_equal(s.workdir, "/srv");
	assert_string_equal(s.user, "app");
	assert_int_equal(s.ports.n, 1);
	assert_string_equal(s.ports.v[0], "8080/tcp");
	/* ENV replaces by name */
	assert_int_equal(dfb_sv_setkv(&s.env, "A=2"), 0);
	assert_int_equal(s.env.n, 2);
	assert_string_equal(s.env.v[0], "A=2");
	assert_int_equal(dfb_config_json(&s, &json), 0);
	assert_int_equal(oci_defaults_parse(json, strlen(json), d), 0);
	assert_int_equal(d->nenv, 2); /* PATH was there: none added */
	assert_string_equal(d->env[0], "A=2");
	assert_string_equal(d->env[1], "PATH=/opt/bin");
	assert_int_equal(d->ncmd, 3);
	assert_string_equal(d->cmd[2], "echo hi");
	assert_int_equal(d->nentry, 1);
	assert_string_equal(d->entrypoint[0], "/init");
	assert_string_equal(d->workdir, "/srv");
	assert_string_equal(d->user, "app");
	assert_int_equal(d->nports, 1);
	assert_int_equal(d->ports[0], 8080);
	assert_int_equal(d->mem_mib, 512);
	assert_int_equal(d->cpus, 2);
	assert_string_equal(d->drives, "work:/w"); /* an image built FROM it mounts them too */
	free(json);
	dfb_stage_free(&s);

	/* scratch-like: no usable config, then the image gets a PATH */
	memset(&s, 0, sizeof(s));
	memset(d, 0, sizeof(*d));
	assert_int_equal(dfb_stage_from_config(&s, "not json"), 0);
	assert_int_equal(s.env.n, 0);
	assert_int_equal(dfb_config_json(&s, &json), 0);
	assert_int_equal(oci_defaults_parse(json, strlen(json), d), 0);
	assert_int_equal(d->nenv, 1);
	assert_string_equal(d->env[0], DEFAULT_PATH);
	free(json);
	dfb_stage_free(&s);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_directives),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_expand_bounds),
		cmocka_unit_test(test_ignore),
		cmocka_unit_test(test_stage_config),
		cmocka_unit_test_setup_teardown(test_build_cache, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_build_stages, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_build_errors, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_build_var_bounds, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_build_copy_from, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_build_context_entries, setup_dir, teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
