/* Sandbox labels (cli/sandbox/sandbox.h; docs/cli.md "Labels"): the
 * KEY=VALUE check and the "KEY=VALUE,..." list a sandbox's record keeps,
 * which `vmm ls --filter` and drive allow rules (label:KEY=VALUE) match. */
#include "cli/sandbox/sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int label_char(char c, int key)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
	       c == '-' || (key && c == '/');
}

int sandbox_label_ok(const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t i, k = eq ? (size_t)(eq - kv) : 0, v = eq ? strlen(eq + 1) : 0;

	if (!k || k > SANDBOX_LABEL_KEY_MAX || v > SANDBOX_LABEL_VALUE_MAX || !label_char(kv[0], 0) || kv[0] == '_' ||
	    kv[0] == '.' || kv[0] == '-')
		return 0;
	for (i = 0; i < k; i++)
		if (!label_char(kv[i], 1))
			return 0;
	for (i = 0; i < v; i++)
		if (!label_char(eq[1 + i], 0))
			return 0;
	return 1;
}

/* The entry of KEY (kv's part before '=') in the list, or NULL; *n its length. */
static const char *label_find(const char *labels, const char *kv, size_t *n)
{
	size_t k = strcspn(kv, "=");
	const char *p;

	for (p = labels; *p; p += *n, p += *p == ',') {
		*n = strcspn(p, ",");
		if (*n > k && p[k] == '=' && !strncmp(p, kv, k))
			return p;
	}
	return NULL;
}

int sandbox_labels_add(char *text, size_t len, const char *kv)
{
	size_t n = 0, count = 0, tl;
	const char *old, *p;

	if (!sandbox_label_ok(kv))
		return -EINVAL;
	if ((old = label_find(text, kv, &n))) {
		/* drop the old entry (and its comma), then append */
		size_t at = (size_t)(old - text), skip = n + (old[n] == ',');

		memmove(text + at, text + at + skip, strlen(text + at + skip) + 1);
		tl = strlen(text);
		if (tl && text[tl - 1] == ',')
			text[tl - 1] = '\0';
	}
	for (p = text; *p; p += strcspn(p, ","), p += *p == ',')
		count++;
	tl = strlen(text);
	if (count == SANDBOX_LABELS_MAX || tl + strlen(kv) + 2 > len)
		return -E2BIG;
	snprintf(text + tl, len - tl, "%s%s", tl ? "," : "", kv);
	return 0;
}

int sandbox_has_label(const char *labels, const char *kv)
{
	size_t n = 0;
	const char *p = labels ? label_find(labels, kv, &n) : NULL;

	return p && n == strlen(kv) && !strncmp(p, kv, n);
}
