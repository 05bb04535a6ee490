/* Helpers shared by the verbs. */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_parse_mib(const char *s, unsigned long long *mib)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-')
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end == 'G' || *end == 'g') {
		if (v > ULLONG_MAX / 1024)
			return -EINVAL;
		v *= 1024;
		end++;
	} else if (*end == 'M' || *end == 'm') {
		end++;
	}
	if (*end == 'i' && (end[1] == 'B' || end[1] == 'b'))
		end += 2;
	if (*end)
		return -EINVAL;
	*mib = v;
	return 0;
}

int cli_exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash)
		return -EINVAL;
	*slash = '\0';
	return 0;
}

unsigned cli_api_port(void)
{
	const char *p = getenv("VMM_API_PORT");

	return p ? (unsigned)strtoul(p, NULL, 10) : 1024;
}
