/* The one tokenizer of `key=value` option lists (kvopt.h). */
#include "vmm/base/kvopt.h"

#include <stddef.h>
#include <string.h>

char *kvopt_next(char **cur, char **val)
{
	char *p = *cur, *end, *eq;

	while (*p == ',')
		p++;
	if (!*p) {
		*cur = p;
		*val = NULL;
		return NULL;
	}
	end = strchr(p, ',');
	if (end) {
		*end = '\0';
		*cur = end + 1;
	} else
		*cur = p + strlen(p);
	eq = strchr(p, '=');
	if (eq)
		*eq++ = '\0';
	*val = eq;
	return p;
}
