/* Helpers shared by the verbs. */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_parse_duration(const char *s, long long *secs)
{
	char *end;
	long long v, mul = 1;

	errno = 0;
	if (!*s || *s == '-')
		return -EINVAL;
	v = strtoll(s, &end, 10);
	if (errno || end == s || v <= 0)
		return -EINVAL;
	switch (*end) {
	case 's': mul = 1; end++; break;
	case 'm': mul = 60; end++; break;
	case 'h': mul = 3600; end++; break;
	case 'd': mul = 86400; end++; break;
	case '\0': break;
	default: return -EINVAL;
	}
	if (*end || v > (1ll << 40) / mul)
		return -EINVAL;
	*secs = v * mul;
	return 0;
}

void cli_human_duration(long long secs, char *buf, size_t len)
{
	if (secs < 0)
		secs = 0;
	if (secs < 120)
		snprintf(buf, len, "%llds", secs);
	else if (secs < 7200)
		snprintf(buf, len, "%lldm", secs / 60);
	else if (secs < 172800)
		snprintf(buf, len, "%lldh%02lldm", secs / 3600, secs % 3600 / 60);
	else
		snprintf(buf, len, "%lldd", secs / 86400);
}

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

int cli_mkdir_p(const char *path, unsigned mode)
{
	char tmp[PATH_MAX];
	char *p;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int cli_read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	return 0;
}
