/* Helpers shared by the verbs. */
#include "cli/util/util.h"
#include "vmm/base/log.h"
#include "vmm/wire/proto.h"

#include <dirent.h>
#include <getopt.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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
	if (*end == 'T' || *end == 't') {
		if (v > ULLONG_MAX / (1024 * 1024))
			return -EINVAL;
		v *= 1024 * 1024;
		end++;
	} else if (*end == 'G' || *end == 'g') {
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

int cli_host_mem_mib(unsigned long long *total, unsigned long long *avail)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kib;

	*total = *avail = 0;
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemTotal: %llu kB", &kib) == 1)
			*total = kib >> 10;
		else if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			*avail = kib >> 10;
	}
	fclose(f);
	return *total ? 0 : -ENOENT;
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

int cli_lib_dir(char *buf, size_t len, char *looked, size_t looked_len)
{
	const char *env = getenv("VMM_LIB_DIR");
	char exe[PATH_MAX], p[PATH_MAX + 64];
	int r;

	if (looked_len)
		looked[0] = '\0';
	if (env && *env) {
		if (looked_len)
			snprintf(looked, looked_len, "%s ($VMM_LIB_DIR)", env);
		return snprintf(buf, len, "%s", env) >= (int)len ? -ENAMETOOLONG : 0;
	}
	if ((r = cli_exe_dir(exe, sizeof(exe))))
		return r;
	/* The build tree: build/vmm next to build/kernel, build/guest. */
	snprintf(p, sizeof(p), "%s/kernel/vmlinux", exe);
	if (access(p, R_OK) == 0 || (snprintf(p, sizeof(p), "%s/guest/guest-init", exe), access(p, R_OK) == 0))
		return snprintf(buf, len, "%s", exe) >= (int)len ? -ENAMETOOLONG : 0;
	/* Installed: PREFIX/bin/vmm and PREFIX/lib/vmm (make install). */
	snprintf(p, sizeof(p), "%s/../lib/vmm", exe);
	if (looked_len)
		snprintf(looked, looked_len, "%s and %s", exe, p);
	if (access(p, X_OK) == 0) {
		char real[PATH_MAX];

		if (!realpath(p, real))
			return -errno;
		return snprintf(buf, len, "%s", real) >= (int)len ? -ENAMETOOLONG : 0;
	}
	return snprintf(buf, len, "%s", exe) >= (int)len ? -ENAMETOOLONG : 0;
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

int cli_open_regular(int dirfd, const char *name)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* A FIFO would block its reader, a device is not ours to read, a
	 * second link may be someone else's file. */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int cli_read_text(const char *path, char *buf, size_t len)
{
	int fd = cli_open_regular(AT_FDCWD, path);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	return 0;
}

int cli_write_text(const char *path, const char *text, unsigned mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, (mode_t)mode), r = 0;

	if (fd < 0)
		return -errno;
	if (write_full(fd, text, strlen(text)) < 0)
		r = -errno;
	if (close(fd) < 0 && !r)
		r = -errno;
	return r;
}

int cli_dir_check(const char *path, int fd, unsigned forbidden)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		log_err("%s is not a directory: refusing to use it", path);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		log_err("%s belongs to uid %u, not to you (uid %u): refusing to use it (someone else may "
			"have made it; remove it, or set VMM_STATE_DIR to a folder of yours)",
			path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & forbidden) {
		log_err("%s has mode %04o: others may change it; refusing to use it (chmod %04o %s)", path,
			(unsigned)(st.st_mode & 07777), (unsigned)(st.st_mode & 07777 & ~forbidden), path);
		return -EPERM;
	}
	return 0;
}

int cli_open_dir(int dirfd, const char *name, const char *path, unsigned forbidden)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;

	if (fd < 0) {
		r = -errno;
		if (r == -ELOOP || r == -ENOTDIR)
			log_err("%s is a symbolic link or not a directory: refusing to use it", path);
		return r;
	}
	if ((r = cli_dir_check(path, fd, forbidden))) {
		close(fd);
		return r;
	}
	return fd;
}

/* Removes dirfd/name and, if it is a directory, everything under it;
 * never follows a symbolic link (each level is opened O_NOFOLLOW relative
 * to its parent's descriptor). */
static int rm_tree(int dirfd, const char *name, unsigned depth)
{
	struct dirent *e;
	int fd, r = 0;
	DIR *d;

	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (depth > 32)
		return -ELOOP;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((e = readdir(d))) {
		int r2;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((r2 = rm_tree(fd, e->d_name, depth + 1)) && !r)
			r = r2;
	}
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && !r)
		r = -errno;
	return r;
}

int cli_rm_tree(const char *path)
{
	char parent[PATH_MAX], *slash;
	int fd, r;

	if (snprintf(parent, sizeof(parent), "%s", path) >= (int)sizeof(parent))
		return -ENAMETOOLONG;
	slash = strrchr(parent, '/');
	if (!slash || !slash[1])
		return -EINVAL;
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = rm_tree(fd, path + (strrchr(path, '/') - path) + 1, 0);
	close(fd);
	return r;
}

int cli_proc_stat(pid_t pid, char *state, unsigned long long *start)
{
	char p[64], buf[1024], *rp, *tok, *save = NULL;
	ssize_t n;
	int fd, i;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	rp = strrchr(buf, ')'); /* the fields follow the command name */
	if (!rp)
		return -EIO;
	tok = strtok_r(rp + 1, " ", &save);
	for (i = 3; tok && i < 22; i++) {
		if (i == 3)
			*state = tok[0];
		tok = strtok_r(NULL, " ", &save);
	}
	if (!tok)
		return -EIO;
	*start = strtoull(tok, NULL, 10);
	return 0;
}

int cli_seterr(char *err, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

static void usage_vmsg(char *err, size_t errlen, const char *verb, const char *fmt, va_list ap)
{
	int n = vsnprintf(err, errlen, fmt, ap);

	if (n >= 0 && (size_t)n < errlen)
		snprintf(err + n, errlen - (size_t)n, " (see 'vmm %s --help')", verb);
}

int cli_usage_msg(char *err, size_t errlen, const char *verb, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		usage_vmsg(err, errlen, verb, fmt, ap);
		va_end(ap);
	}
	return CLI_EXIT_USAGE;
}

/* The option getopt_long stopped at: "--name" (up to any '=') or "-c". */
static int bad_option(char *err, size_t errlen, const char *verb, char **argv, const char *sopts,
		      const struct option *lopts)
{
	const char *arg = argv[optind - 1], *p;
	size_t n;

	if (!optopt || !strncmp(arg, "--", 2)) {
		n = strcspn(arg + 2, "=");
		for (; lopts && lopts->name; lopts++)
			if (strlen(lopts->name) == n && !strncmp(lopts->name, arg + 2, n))
				return cli_usage_msg(err, errlen, verb, lopts->has_arg == required_argument ?
							     "option '--%.*s' needs a value" :
							     "option '--%.*s' takes no value", (int)n, arg + 2);
		return cli_usage_msg(err, errlen, verb, "unknown option '--%.*s'", (int)n, arg + 2);
	}
	p = strchr(sopts, optopt);
	if (p && optopt != ':' && optopt != '+' && p[1] == ':')
		return cli_usage_msg(err, errlen, verb, "option '-%c' needs a value", optopt);
	return cli_usage_msg(err, errlen, verb, "unknown option '-%c'", optopt);
}

int cli_getopt_msg(int argc, char **argv, const char *sopts, const struct option *lopts, const char *verb, char *err,
		   size_t errlen)
{
	int opt;

	opterr = 0; /* getopt's own message is replaced by ours, one line */
	opt = getopt_long(argc, argv, sopts, lopts, NULL);
	if (opt == '?' || opt == ':') {
		bad_option(err, errlen, verb, argv, sopts, lopts);
		return '?';
	}
	return opt;
}

int cli_bad_arg_msg(char *err, size_t errlen, const char *verb, const char *arg, const char *valued)
{
	size_t n = strlen(arg);
	const char *p;

	for (p = valued; p && arg[0] == '-' && (p = strstr(p, arg)); p += n)
		if ((p == valued || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return cli_usage_msg(err, errlen, verb, "option '%s' needs a value", arg);
	if (arg[0] == '-' && arg[1])
		return cli_usage_msg(err, errlen, verb, "unknown option '%s'", arg);
	return cli_usage_msg(err, errlen, verb, "unexpected argument '%s'", arg);
}

/* (mountinfo's fifth field; no unescaping: the paths we pass have no blanks) */
int cli_mounts_under(const char *dir, int with_self, char (*out)[PATH_MAX], int max)
{
	char line[3 * PATH_MAX], mp[PATH_MAX], tmp[PATH_MAX];
	size_t dl = strlen(dir);
	int n = 0, i, j;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		if (strncmp(mp, dir, dl) || !(mp[dl] == '/' || (with_self && mp[dl] == '\0')))
			continue;
		if (n < max && out)
			snprintf(out[n], PATH_MAX, "%s", mp);
		n++;
	}
	fclose(f);
	if (out)
		for (i = 0; i < n && i < max; i++)
			for (j = i + 1; j < n && j < max; j++)
				if (strlen(out[j]) > strlen(out[i])) {
					memcpy(tmp, out[i], PATH_MAX);
					memcpy(out[i], out[j], PATH_MAX);
					memcpy(out[j], tmp, PATH_MAX);
				}
	return n;
}

int cli_unmount_under(const char *dir, int with_self)
{
	enum { MAXM = 256 };
	char (*m)[PATH_MAX] = malloc(MAXM * sizeof(*m));
	int n, i;

	if (!m)
		return -ENOMEM;
	n = cli_mounts_under(dir, with_self, m, MAXM);
	for (i = 0; i < n && i < MAXM; i++)
		(void)umount2(m[i], MNT_DETACH);
	free(m);
	return cli_mounts_under(dir, with_self, NULL, 0);
}

int cli_cache_root(char *buf, size_t len)
{
	const char *env = getenv("VMM_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (xdg && *xdg)
		n = snprintf(buf, len, "%s/vmm", xdg);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.cache/vmm", home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int cli_cache_file(const char *name, char *buf, size_t len)
{
	size_t n;
	int r;

	if ((r = cli_cache_root(buf, len)))
		return r;
	n = strlen(buf);
	if (n + strlen(name) + 2 > len)
		return -ENAMETOOLONG;
	if ((r = cli_mkdir_p(buf, 0755)))
		return r;
	snprintf(buf + n, len - n, "/%s", name);
	return 0;
}

int cli_run_tool(const char *const *argv, int quiet)
{
	return cli_run_tool_in(argv, quiet, NULL, NULL);
}

int cli_run_tool_in(const char *const *argv, int quiet, int (*child_setup)(void *), void *arg)
{
	pid_t p = fork();
	int st;

	if (p < 0)
		return -errno;
	if (p == 0) {
		if (quiet) {
			int nul = open("/dev/null", O_WRONLY);

			if (nul >= 0) {
				dup2(nul, STDOUT_FILENO);
				if (quiet > 1)
					dup2(nul, STDERR_FILENO);
				close(nul);
			}
		}
		if (child_setup && child_setup(arg))
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int cli_run_tool_ok(const char *const *argv, int quiet)
{
	int r = cli_run_tool(argv, quiet);

	return r < 0 ? r : r ? -EIO : 0;
}

long long cli_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
