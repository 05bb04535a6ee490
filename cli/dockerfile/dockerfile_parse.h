/* Dockerfile parsing (docs/images.md "Building from a Dockerfile"): the
 * text into instructions, and the word expansion Docker applies to the
 * instructions that take variables. Pure: no files, no processes; the
 * builder is image_dockerfile.c.
 *
 * What the parser follows (Docker's reference, "Dockerfile reference"):
 * parser directives (`# syntax=`, `# escape=`) only at the very top, before
 * any comment, blank line or instruction; comment lines (`#` first) dropped,
 * also inside a continued instruction; a line ending in the escape
 * character (`\`, or `` ` `` with `# escape=`) continues on the next one;
 * keywords in any case; `--flag[=value]` words after the keyword; the exec
 * (JSON array) form where an instruction's arguments parse as a JSON array
 * of strings, else the shell form; heredocs (`<<EOF`) are refused. */
#ifndef CLI_DOCKERFILE_H
#define CLI_DOCKERFILE_H

#include <stddef.h>

enum df_op {
	DF_FROM, DF_RUN, DF_COPY, DF_ADD, DF_ENV, DF_ARG, DF_WORKDIR, DF_USER, DF_CMD, DF_ENTRYPOINT,
	DF_EXPOSE, DF_LABEL, DF_SHELL, DF_VOLUME, DF_STOPSIGNAL, DF_HEALTHCHECK, DF_MAINTAINER, DF_ONBUILD,
	DF_NR_OPS
};

#define DF_MAX_FLAGS 8

struct df_instr {
	enum df_op op;
	unsigned line;              /* where it starts, from 1 */
	char *flags[DF_MAX_FLAGS];  /* "--name=value" or "--name", as written */
	unsigned nflags;
	char *rest;                 /* the arguments after the flags (shell form: as written) */
	int json;                   /* exec form: argv holds the array */
	char **argv;
	unsigned argc;
};

struct dockerfile {
	struct df_instr *ins;
	unsigned n;
	char escape; /* '\\' or '`' */
	char syntax[128]; /* the `# syntax=` directive, "" if none (not acted on) */
};

/* Parses a Dockerfile. 0, or -EINVAL with err set to "line N: what". */
int df_parse(const char *text, size_t len, struct dockerfile *df, char *err, size_t errlen);
void df_free(struct dockerfile *df);
const char *df_op_name(enum df_op op);

/* A flag's value: "--from=x" -> "x" for name "from"; "" for a bare flag;
 * NULL when the instruction does not have it. */
const char *df_flag(const struct df_instr *in, const char *name);

/* Variables for expansion: "NAME=VALUE" strings; the last one of a name
 * wins. */
struct df_vars {
	const char **kv;
	unsigned n;
};
const char *df_var(const struct df_vars *v, const char *name);

/* Docker's word processing (its shell lexer) for ADD, COPY, ENV, EXPOSE,
 * FROM, LABEL, STOPSIGNAL, USER, VOLUME, WORKDIR, ARG: `$NAME`, `${NAME}`,
 * `${NAME:-word}` (word if NAME is unset or empty), `${NAME-word}` (if
 * unset), `${NAME:+word}` (word if NAME is set and not empty, else empty),
 * `${NAME+word}` (if set), `${NAME:?msg}` / `${NAME?msg}` (an error);
 * single quotes keep everything literal, double quotes keep spaces and
 * allow expansion, the escape character makes the next character literal;
 * quotes are removed. With split, unquoted whitespace separates words (an
 * expansion is not split again); without, the result is one word.
 * 0 with *words (malloc'd array of malloc'd strings, NULL-terminated; free
 * with df_words_free) and *n; -EINVAL with err set. Bounded against a
 * hostile Dockerfile: ${NAME:-word} words nest at most DF_EXPAND_DEPTH
 * deep, and the words made add up to at most DF_WORD_MAX bytes. */
#define DF_EXPAND_DEPTH 32
#define DF_WORD_MAX (1u << 20)
int df_expand(const char *s, char escape, const struct df_vars *v, int split, char ***words, unsigned *n, char *err,
	      size_t errlen);
void df_words_free(char **words);

/* An instruction's text after expansion, for the build cache key and the
 * progress line ("COPY --chown=1:1 a /b"). malloc'd. */
char *df_describe(const struct df_instr *in);

#endif
