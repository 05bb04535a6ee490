/* Dockerfile parsing and word expansion (dockerfile.h). */
#include "cli/dockerfile/dockerfile_parse.h"
#include "cli/images/images.h"
#include "vmm/wire/json.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[DF_NR_OPS] = {
	[DF_FROM] = "FROM", [DF_RUN] = "RUN", [DF_COPY] = "COPY", [DF_ADD] = "ADD", [DF_ENV] = "ENV",
	[DF_ARG] = "ARG", [DF_WORKDIR] = "WORKDIR", [DF_USER] = "USER", [DF_CMD] = "CMD",
	[DF_ENTRYPOINT] = "ENTRYPOINT", [DF_EXPOSE] = "EXPOSE", [DF_LABEL] = "LABEL", [DF_SHELL] = "SHELL",
	[DF_VOLUME] = "VOLUME", [DF_STOPSIGNAL] = "STOPSIGNAL", [DF_HEALTHCHECK] = "HEALTHCHECK",
	[DF_MAINTAINER] = "MAINTAINER", [DF_ONBUILD] = "ONBUILD",
};
_Static_assert(sizeof(op_names) / sizeof(op_names[0]) == DF_NR_OPS, "one name per instruction");

const char *df_op_name(enum df_op op)
{
	return (unsigned)op < DF_NR_OPS ? op_names[op] : "?";
}

/* A growing string. */
struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_addn(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (!(p = realloc(b->p, cap))) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_addc(struct sbuf *b, char c)
{
	sb_addn(b, &c, 1);
}

static char *sb_take(struct sbuf *b)
{
	char *p;

	if (b->oom) {
		free(b->p);
		return NULL;
	}
	p = b->p ? b->p : strdup("");
	b->p = NULL;
	b->len = b->cap = 0;
	return p;
}

/* ---- lines ----------------------------------------------------------- */

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* "# key=value" at the top: 1 with key/value filled, 0 if the line is not
 * a directive. */
static int directive(const char *line, size_t n, char *key, size_t klen, char *val, size_t vlen)
{
	size_t i = 0, k = 0, v = 0;

	while (i < n && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (i >= n || line[i++] != '#')
		return 0;
	while (i < n && (line[i] == ' ' || line[i] == '\t'))
		i++;
	while (i < n && (isalnum((unsigned char)line[i]) || line[i] == '_') && k + 1 < klen)
		key[k++] = (char)tolower((unsigned char)line[i++]);
	key[k] = '\0';
	while (i < n && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (!k || i >= n || line[i++] != '=')
		return 0;
	while (i < n && (line[i] == ' ' || line[i] == '\t'))
		i++;
	while (i < n && line[i] != '\r' && v + 1 < vlen)
		val[v++] = line[i++];
	while (v && (val[v - 1] == ' ' || val[v - 1] == '\t'))
		v--;
	val[v] = '\0';
	return 1;
}

static int seterr(char *err, size_t len, unsigned line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int seterr(char *err, size_t len, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (!err || !len)
		return -EINVAL;
	if (line)
		n = snprintf(err, len, "line %u: ", line);
	if (n >= 0 && (size_t)n < len) {
		va_start(ap, fmt);
		vsnprintf(err + n, len - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* The exec form: a JSON array of strings. 1 with argv set, 0 if s is not
 * one (then it is the shell form, as Docker does), -ENOMEM. */
static int json_form(const char *s, char ***argv, unsigned *argc)
{
	size_t len = strlen(s);
	struct json_arena a = { .size = len * 2 + 4096 };
	const struct json *root, *e;
	const char *jerr;
	unsigned i = 0;
	char **v;

	*argv = NULL;
	*argc = 0;
	if (*s != '[')
		return 0;
	if (!(a.buf = malloc(a.size)))
		return -ENOMEM;
	root = json_parse(s, len, &a, &jerr);
	if (!root || root->type != JSON_ARR) {
		free(a.buf);
		return 0;
	}
	for (e = root->u.kids.first; e; e = e->next)
		if (e->type != JSON_STR) {
			free(a.buf);
			return 0;
		}
	if (!(v = calloc(root->u.kids.count + 1, sizeof(*v)))) {
		free(a.buf);
		return -ENOMEM;
	}
	for (e = root->u.kids.first; e; e = e->next)
		if (!(v[i++] = strndup(e->u.str.s, e->u.str.len))) {
			df_words_free(v);
			free(a.buf);
			return -ENOMEM;
		}
	free(a.buf);
	*argv = v;
	*argc = i;
	return 1;
}

/* A heredoc (`<<EOF`, `<<-"EOF"`) in a RUN/COPY/ADD shell form. */
static int has_heredoc(const char *s)
{
	const char *p;

	for (p = s; (p = strstr(p, "<<")); p += 2) {
		const char *q = p + 2;

		if (p > s && p[-1] == '<')
			continue; /* "<<<" is a here-string */
		if (*q == '-')
			q++;
		if (*q == '"' || *q == '\'')
			q++;
		if (isalpha((unsigned char)*q) || *q == '_')
			return 1;
	}
	return 0;
}

static int add_instr(struct dockerfile *df, const char *text, unsigned line, char *err, size_t errlen)
{
	struct df_instr in = { .line = line };
	const char *s = skip_ws(text), *w;
	char kw[16];
	size_t k = 0;
	int r;

	for (w = s; *w && *w != ' ' && *w != '\t'; w++)
		if (k + 1 < sizeof(kw))
			kw[k++] = (char)toupper((unsigned char)*w);
	kw[k] = '\0';
	if (w - s >= (ptrdiff_t)sizeof(kw))
		return seterr(err, errlen, line, "unknown instruction '%.*s'", (int)(w - s > 40 ? 40 : w - s), s);
	for (k = 0; k < DF_NR_OPS; k++)
		if (!strcmp(kw, op_names[k]))
			break;
	if (k == DF_NR_OPS)
		return seterr(err, errlen, line, "unknown instruction '%s'", kw);
	in.op = (enum df_op)k;
	s = skip_ws(w);
	/* --flags (not for the instructions whose arguments may start with
	 * "--": CMD, ENTRYPOINT, SHELL, ENV, LABEL, ARG, ...) */
	if (in.op == DF_FROM || in.op == DF_RUN || in.op == DF_COPY || in.op == DF_ADD || in.op == DF_HEALTHCHECK) {
		while (s[0] == '-' && s[1] == '-' && s[2] && s[2] != ' ' && s[2] != '\t') {
			for (w = s; *w && *w != ' ' && *w != '\t'; w++)
				;
			if (in.nflags == DF_MAX_FLAGS) {
				r = seterr(err, errlen, line, "%s: too many flags", kw);
				goto fail;
			}
			if (!(in.flags[in.nflags++] = strndup(s, (size_t)(w - s)))) {
				r = -ENOMEM;
				goto fail;
			}
			s = skip_ws(w);
		}
	}
	if (!(in.rest = strdup(s))) {
		r = -ENOMEM;
		goto fail;
	}
	k = strlen(in.rest);
	while (k && (in.rest[k - 1] == ' ' || in.rest[k - 1] == '\t' || in.rest[k - 1] == '\r'))
		in.rest[--k] = '\0';
	if (!in.rest[0] && in.op != DF_HEALTHCHECK) {
		r = seterr(err, errlen, line, "%s needs arguments", kw);
		goto fail;
	}
	switch (in.op) {
	case DF_RUN:
	case DF_CMD:
	case DF_ENTRYPOINT:
	case DF_SHELL:
	case DF_VOLUME:
	case DF_COPY:
	case DF_ADD:
		if ((r = json_form(in.rest, &in.argv, &in.argc)) < 0)
			goto fail;
		in.json = r;
		break;
	default:
		break;
	}
	if (in.op == DF_SHELL && (!in.json || !in.argc)) {
		r = seterr(err, errlen, line, "SHELL needs the JSON form: SHELL [\"executable\", \"parameters\"]");
		goto fail;
	}
	if ((in.op == DF_COPY || in.op == DF_ADD) && in.json && in.argc < 2) {
		r = seterr(err, errlen, line, "%s needs a source and a destination", kw);
		goto fail;
	}
	if ((in.op == DF_RUN || in.op == DF_COPY || in.op == DF_ADD) && !in.json && has_heredoc(in.rest)) {
		r = seterr(err, errlen, line, "%s: heredocs (<<EOF) are not supported by vmm image build", kw);
		goto fail;
	}
	{
		struct df_instr *p = realloc(df->ins, (df->n + 1) * sizeof(*p));

		if (!p) {
			r = -ENOMEM;
			goto fail;
		}
		df->ins = p;
		df->ins[df->n++] = in;
	}
	return 0;
fail:
	for (k = 0; k < in.nflags; k++)
		free(in.flags[k]);
	free(in.rest);
	df_words_free(in.argv);
	return r;
}

int df_parse(const char *text, size_t len, struct dockerfile *df, char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	struct sbuf cur = { 0 };
	unsigned line = 0, start = 0;
	int top = 1, r = 0, cont = 0;

	memset(df, 0, sizeof(*df));
	df->escape = '\\';
	if (memchr(text, '\0', len))
		return seterr(err, errlen, 0, "the Dockerfile holds a NUL byte");
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
		size_t n = (size_t)(le - p);
		char key[32], val[128];
		const char *s;

		line++;
		if (line == 1 && n >= 3 && !memcmp(p, "\xef\xbb\xbf", 3)) {
			p += 3; /* a UTF-8 byte order mark */
			n -= 3;
		}
		if (n && p[n - 1] == '\r')
			n--;
		if (top && directive(p, n, key, sizeof(key), val, sizeof(val))) {
			if (!strcmp(key, "escape")) {
				if (strcmp(val, "\\") && strcmp(val, "`")) {
					r = seterr(err, errlen, line, "escape must be \\ or `, not '%s'", val);
					goto out;
				}
				df->escape = val[0];
			} else if (!strcmp(key, "syntax")) {
				snprintf(df->syntax, sizeof(df->syntax), "%s", val);
			} else {
				top = 0; /* an unknown one is a comment, and ends the directives */
			}
			p = nl ? nl + 1 : end;
			continue;
		}
		top = 0;
		s = p;
		while (s < p + n && (*s == ' ' || *s == '\t'))
			s++;
		if (s < p + n && *s == '#') {
			p = nl ? nl + 1 : end; /* a comment, also inside a continued instruction */
			continue;
		}
		if (s == p + n) {
			p = nl ? nl + 1 : end; /* blank, also inside a continued instruction */
			continue;
		}
		if (!cont)
			start = line;
		{
			/* A continuation: the escape character last (trailing blanks
			 * allowed), not itself escaped. */
			size_t m = n;
			int more = 0;

			while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
				m--;
			if (m && p[m - 1] == df->escape) {
				more = 1;
				m--;
			}
			sb_addn(&cur, p, more ? m : n);
			cont = more;
		}
		if (!cont) {
			if (cur.oom) {
				r = -ENOMEM;
				goto out;
			}
			if ((r = add_instr(df, cur.p, start, err, errlen)))
				goto out;
			cur.len = 0;
		}
		p = nl ? nl + 1 : end;
	}
	if (cont && cur.len) {
		if ((r = add_instr(df, cur.p, start, err, errlen)))
			goto out;
	}
	if (!df->n) {
		r = seterr(err, errlen, 0, "the Dockerfile has no instructions");
		goto out;
	}
	{
		unsigned i;

		for (i = 0; i < df->n && df->ins[i].op == DF_ARG; i++)
			;
		if (i == df->n || df->ins[i].op != DF_FROM) {
			r = seterr(err, errlen, df->ins[i == df->n ? 0 : i].line,
				   "the first instruction must be FROM (ARG may come before it)");
			goto out;
		}
	}
out:
	free(cur.p);
	if (r)
		df_free(df);
	return r;
}

void df_free(struct dockerfile *df)
{
	unsigned i, k;

	for (i = 0; i < df->n; i++) {
		for (k = 0; k < df->ins[i].nflags; k++)
			free(df->ins[i].flags[k]);
		free(df->ins[i].rest);
		df_words_free(df->ins[i].argv);
	}
	free(df->ins);
	df->ins = NULL;
	df->n = 0;
}

const char *df_flag(const struct df_instr *in, const char *name)
{
	size_t n = strlen(name);
	unsigned i;

	for (i = in->nflags; i-- > 0;) {
		const char *f = in->flags[i] + 2;

		if (!strncmp(f, name, n) && (f[n] == '=' || !f[n]))
			return f[n] ? f + n + 1 : "";
	}
	return NULL;
}

const char *df_var(const struct df_vars *v, const char *name)
{
	size_t n = strlen(name);
	unsigned i;

	for (i = v ? v->n : 0; i-- > 0;)
		if (!strncmp(v->kv[i], name, n) && v->kv[i][n] == '=')
			return v->kv[i] + n + 1;
	return NULL;
}

/* ---- expansion ------------------------------------------------------- */

struct lexer {
	const char *s;
	char esc;
	const struct df_vars *v;
	char *err;
	size_t errlen;
	unsigned depth; /* ${NAME:-word} nesting, at most DF_EXPAND_DEPTH */
	size_t done;    /* bytes of the words already made */
};

/* The expansion so far (the words made and this one) within DF_WORD_MAX:
 * `ENV A=$A$A` repeated doubles a value each line. */
static int size_ok(struct lexer *lx, const struct sbuf *out)
{
	if (out->oom)
		return -ENOMEM;
	if (out->len + lx->done > DF_WORD_MAX)
		return seterr(lx->err, lx->errlen, 0, "the expansion is longer than %u KiB", DF_WORD_MAX >> 10);
	return 0;
}

static int is_name(char c, int first)
{
	return c == '_' || isalpha((unsigned char)c) || (!first && isdigit((unsigned char)c));
}

static int expand_word(struct lexer *lx, const char *stop, struct sbuf *out);

/* After the '$': appends the value. */
static int variable(struct lexer *lx, struct sbuf *out)
{
	char name[256];
	size_t n = 0;
	const char *val;

	if (*lx->s != '{') {
		if (!is_name(*lx->s, 1)) {
			sb_addc(out, '$'); /* a lone $ stays */
			return 0;
		}
		while (is_name(*lx->s, n == 0) && n + 1 < sizeof(name))
			name[n++] = *lx->s++;
		name[n] = '\0';
		if ((val = df_var(lx->v, name)))
			sb_addn(out, val, strlen(val));
		return size_ok(lx, out);
	}
	lx->s++;
	while (is_name(*lx->s, n == 0) && n + 1 < sizeof(name))
		name[n++] = *lx->s++;
	name[n] = '\0';
	if (!n)
		return seterr(lx->err, lx->errlen, 0, "bad substitution: '${' without a variable name");
	val = df_var(lx->v, name);
	if (*lx->s == '}') {
		lx->s++;
		if (val)
			sb_addn(out, val, strlen(val));
		return size_ok(lx, out);
	}
	{
		int colon = 0, r;
		char mod;
		struct sbuf word = { 0 };

		if (*lx->s == ':') {
			colon = 1;
			lx->s++;
		}
		mod = *lx->s;
		if (mod != '-' && mod != '+' && mod != '?')
			return seterr(lx->err, lx->errlen, 0, "bad substitution in ${%s...}: only :- :+ :? - + ? are known",
				      name);
		lx->s++;
		/* the word may hold expansions of its own: bounded, so that a
		 * line of `${a:-${a:-...` cannot exhaust the stack */
		if (lx->depth >= DF_EXPAND_DEPTH)
			return seterr(lx->err, lx->errlen, 0, "${%s...}: expansions nested more than %u deep", name,
				      DF_EXPAND_DEPTH);
		lx->depth++;
		r = expand_word(lx, "}", &word);
		lx->depth--;
		if (r) {
			free(word.p);
			return r;
		}
		if (*lx->s != '}') {
			free(word.p);
			return seterr(lx->err, lx->errlen, 0, "bad substitution: ${%s has no closing }", name);
		}
		lx->s++;
		{
			int set = val && (!colon || val[0]);
			const char *w = word.p ? word.p : "";

			if (mod == '-')
				sb_addn(out, set ? val : w, strlen(set ? val : w));
			else if (mod == '+')
				sb_addn(out, set ? w : "", set ? strlen(w) : 0);
			else if (!set) {
				seterr(lx->err, lx->errlen, 0, "%s: %s", name, w[0] ? w : "is not set");
				free(word.p);
				return -EINVAL;
			} else
				sb_addn(out, val, strlen(val));
		}
		free(word.p);
		return size_ok(lx, out);
	}
}

/* A word of a ${...} modifier up to one of stop (unquoted): quotes and
 * escapes apply, nested expansions too. */
static int expand_word(struct lexer *lx, const char *stop, struct sbuf *out)
{
	int r;

	while (*lx->s && !strchr(stop, *lx->s)) {
		char c = *lx->s;

		if ((r = size_ok(lx, out)))
			return r;
		if (c == lx->esc && lx->s[1]) {
			sb_addc(out, lx->s[1]);
			lx->s += 2;
		} else if (c == '$') {
			lx->s++;
			if ((r = variable(lx, out)))
				return r;
		} else if (c == '\'') {
			const char *q = strchr(lx->s + 1, '\'');

			if (!q)
				return seterr(lx->err, lx->errlen, 0, "unmatched single quote");
			sb_addn(out, lx->s + 1, (size_t)(q - lx->s - 1));
			lx->s = q + 1;
		} else if (c == '"') {
			lx->s++;
			while (*lx->s && *lx->s != '"') {
				if (*lx->s == lx->esc && lx->s[1]) {
					/* in double quotes the escape keeps $, ", itself */
					if (lx->s[1] == '"' || lx->s[1] == '$' || lx->s[1] == lx->esc) {
						sb_addc(out, lx->s[1]);
						lx->s += 2;
					} else {
						sb_addc(out, *lx->s++);
					}
				} else if (*lx->s == '$') {
					lx->s++;
					if ((r = variable(lx, out)))
						return r;
				} else {
					sb_addc(out, *lx->s++);
				}
			}
			if (*lx->s != '"')
				return seterr(lx->err, lx->errlen, 0, "unmatched double quote");
			lx->s++;
		} else {
			sb_addc(out, c);
			lx->s++;
		}
	}
	return size_ok(lx, out);
}

int df_expand(const char *s, char escape, const struct df_vars *v, int split, char ***words, unsigned *n, char *err,
	      size_t errlen)
{
	struct lexer lx = { .s = s, .esc = escape, .v = v, .err = err, .errlen = errlen };
	char **w = NULL;
	unsigned nw = 0;
	int r = 0;

	*words = NULL;
	*n = 0;
	for (;;) {
		struct sbuf word = { 0 };
		char **p;

		if (split)
			lx.s = skip_ws(lx.s);
		if (!*lx.s && (split || nw))
			break;
		if ((r = expand_word(&lx, split ? " \t" : "", &word))) {
			free(word.p);
			goto fail;
		}
		if (!(p = realloc(w, (nw + 2) * sizeof(*w)))) {
			free(word.p);
			r = -ENOMEM;
			goto fail;
		}
		w = p;
		lx.done += word.len;
		if (!(w[nw] = sb_take(&word))) {
			r = -ENOMEM;
			goto fail;
		}
		w[++nw] = NULL;
		if (!split)
			break;
	}
	if (!w && !(w = calloc(1, sizeof(*w))))
		return -ENOMEM;
	*words = w;
	*n = nw;
	return 0;
fail:
	df_words_free(w);
	return r;
}

void df_words_free(char **words)
{
	char **p;

	for (p = words; p && *p; p++)
		free(*p);
	free(words);
}

char *df_describe(const struct df_instr *in)
{
	struct sbuf b = { 0 };
	unsigned i;

	sb_addn(&b, op_names[in->op], strlen(op_names[in->op]));
	for (i = 0; i < in->nflags; i++) {
		sb_addc(&b, ' ');
		sb_addn(&b, in->flags[i], strlen(in->flags[i]));
	}
	if (in->rest[0]) {
		sb_addc(&b, ' ');
		sb_addn(&b, in->rest, strlen(in->rest));
	}
	return sb_take(&b);
}
