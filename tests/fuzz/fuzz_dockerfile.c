/* libFuzzer target: the Dockerfile parser and Docker's word expansion
 * (cli/dockerfile.c), what vmm image build -f reads from a file anyone may
 * hand it. Oracles: every instruction has a known op, a first line inside
 * the file, flags that start with "--", and a describe() text; expansion
 * either fails with a message or yields NUL-terminated words, the same
 * ones a second time (it is a pure function of its input). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

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
