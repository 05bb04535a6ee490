/* FROM debootstrap:SUITE[+PKG,PKG...] in a Dockerfile (docs/images.md
 * "Building from a Dockerfile"): a base tree debootstrapped on the host
 * (--variant=minbase), the packages then installed with apt-get in it
 * (chroot), since a RUN step's sandbox has no network and cannot install
 * packages. The tree is the
 * FROM step's entry in the step cache (dockerfile_cache.c: dfb_base_tree),
 * keyed by the suite, the packages and the mirror, so it is fetched once.
 * Trimmed like Debian's slim container images: no .deb archives, no apt
 * lists, no manual pages, info or documentation but the copyright files;
 * /etc/hosts written, the build host's /etc/resolv.conf removed.
 * `debootstrap:` is never a registry reference (a Docker Hub image of that
 * name is docker.io/library/debootstrap:TAG). */
#include "cli/dockerfile/image_dockerfile.h"
#include "cli/util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREFIX "debootstrap:"
#define MIRROR_SEP " mirror="
/* How the tree is made, in the cache's key: a new way, a new tree. */
#define FILL_VERSION " fill=apt-2"

const char *dfi_debootstrap_method(void)
{
	return FILL_VERSION + 1;
}

int dfi_is_debootstrap(const char *ref)
{
	return !strncmp(ref, PREFIX, strlen(PREFIX));
}

/* Debian's names: a suite of [a-z0-9-] (not starting with '-'), package
 * names of [a-z0-9+.-] (Policy 5.6.1), comma-separated, none empty. */
static int suite_ok(const char *s, size_t n)
{
	if (!n || n > 64 || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

static int packages_ok(const char *p)
{
	size_t run = 0;

	for (; *p; p++) {
		if (*p == ',') {
			if (!run)
				return 0;
			run = 0;
		} else if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || (run && strchr("+.-", *p))) {
			run++;
		} else {
			return 0;
		}
	}
	return run > 0;
}

int dfi_debootstrap_resolve(const char *ref, const char *mirror, char *id, size_t idlen, char *err, size_t errlen)
{
	const char *suite = ref + strlen(PREFIX), *plus = strchr(suite, '+');
	size_t n = plus ? (size_t)(plus - suite) : strlen(suite);

	if (!suite_ok(suite, n) || (plus && !packages_ok(plus + 1))) {
		snprintf(err, errlen, "%s: debootstrap:SUITE[+PACKAGE,PACKAGE...] (Debian names: a-z 0-9 and + . -)", ref);
		return -EINVAL;
	}
	if (!mirror[0] || mirror[0] == '-' || strchr(mirror, ' ')) {
		snprintf(err, errlen, "--mirror %s: a URL", mirror);
		return -EINVAL;
	}
	if (geteuid() != 0) {
		snprintf(err, errlen, "%s: debootstrap needs root", ref);
		return -EPERM;
	}
	if (access("/usr/sbin/debootstrap", X_OK)) {
		snprintf(err, errlen, "%s: debootstrap is not installed (make deps, or apt install debootstrap)", ref);
		return -ENOENT;
	}
	if (snprintf(id, idlen, "%s" MIRROR_SEP "%s" FILL_VERSION, ref, mirror) >= (int)idlen) {
		snprintf(err, errlen, "%s: too long", ref);
		return -E2BIG;
	}
	return 0;
}

/* debootstrap's own log in the target (dpkg's errors: the lines that
 * say which package failed and why) appended to ours. */
static void append_inner_log(const char *dir, const char *logp)
{
	char p[PATH_MAX + 32], buf[65536];
	int in, out;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/debootstrap/debootstrap.log", dir);
	if ((in = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return;
	if ((out = open(logp, O_WRONLY | O_APPEND | O_CLOEXEC)) >= 0) {
		dprintf(out, "---- %s\n", p);
		while ((n = read(in, buf, sizeof(buf))) > 0)
			if (write(out, buf, (size_t)n) != n)
				break;
		close(out);
	}
	close(in);
}

static int log_to(void *arg)
{
	int fd = *(int *)arg;

	return dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0 ? -1 : 0;
}

/* The last line of the log at path into out. */
static void last_line(const char *path, char *out, size_t len)
{
	char buf[2048], *p;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t end;
	ssize_t n;

	out[0] = '\0';
	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	lseek(fd, end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	p = strrchr(buf, '\n');
	snprintf(out, len, "%.*s", (int)len - 1, p ? p + 1 : buf);
}

/* What a sandbox never reads: the .deb archives, apt's package lists
 * (apt-get update fetches them again), manual pages, info and the
 * documentation but each package's copyright file. */
static void trim(const char *dir)
{
	char p[PATH_MAX + 64];
	const char *archives[] = { "find", p, "-maxdepth", "1", "-type", "f", "-name", "*.deb", "-delete", NULL };
	const char *lists[] = { "find", p, "-mindepth", "1", "-maxdepth", "1", "-type", "f", "-delete", NULL };
	const char *docs[] = { "find", p, "-mindepth", "1", "!", "-type", "d", "!", "-name", "copyright", "-delete", NULL };
	const char *empty[] = { "find", p, "-mindepth", "1", "-type", "d", "-empty", "-delete", NULL };

	snprintf(p, sizeof(p), "%s/var/cache/apt/archives", dir);
	cli_run_tool(archives, 2);
	snprintf(p, sizeof(p), "%s/var/lib/apt/lists", dir);
	cli_run_tool(lists, 2);
	snprintf(p, sizeof(p), "%s/usr/share/man", dir);
	cli_rm_tree(p);
	snprintf(p, sizeof(p), "%s/usr/share/info", dir);
	cli_rm_tree(p);
	snprintf(p, sizeof(p), "%s/usr/share/doc", dir);
	cli_run_tool(docs, 2);
	cli_run_tool(empty, 2);
}

/* Runs argv with its output into the log fd; its exit status. */
static int logged(const char *const *argv, int fd)
{
	dprintf(fd, "$");
	for (unsigned i = 0; argv[i]; i++)
		dprintf(fd, " %s", argv[i]);
	dprintf(fd, "\n");
	return cli_run_tool_in(argv, 0, log_to, &fd);
}

/* The packages, installed by apt in the tree (chroot): apt resolves what
 * debootstrap --include cannot (a dependency a virtual package Provides:
 * npm's node-cli-table3). /proc mounted and services kept from starting
 * (policy-rc.d) meanwhile. 0, or -EIO with what failed in what. */
static int apt_install(const char *dir, const char *pkgs, int fd, char *what, size_t wlen)
{
	char proc[PATH_MAX + 16], policy[PATH_MAX + 32], *list = strdup(pkgs), *save = NULL, *p;
	const char *update[] = { "chroot", dir, "apt-get", "-q", "update", NULL };
	const char *clean[] = { "chroot", dir, "apt-get", "clean", NULL };
	const char **inst = calloc(strlen(pkgs) / 2 + 16, sizeof(*inst));
	unsigned k = 0;
	int pfd, st = -1;

	snprintf(what, wlen, "apt-get");
	if (!list || !inst)
		goto out;
	snprintf(proc, sizeof(proc), "%s/proc", dir);
	snprintf(policy, sizeof(policy), "%s/usr/sbin/policy-rc.d", dir);
	if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		snprintf(what, wlen, "mounting /proc in the tree: %s", strerror(errno));
		goto out;
	}
	if ((pfd = open(policy, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755)) >= 0) {
		dprintf(pfd, "#!/bin/sh\nexit 101\n");
		close(pfd);
	}
	inst[k++] = "chroot";
	inst[k++] = dir;
	inst[k++] = "/usr/bin/env";
	inst[k++] = "DEBIAN_FRONTEND=noninteractive";
	inst[k++] = "apt-get";
	inst[k++] = "-q";
	inst[k++] = "-y";
	inst[k++] = "--no-install-recommends";
	inst[k++] = "install";
	for (p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save))
		inst[k++] = p;
	if ((st = logged(update, fd)))
		snprintf(what, wlen, "apt-get update");
	else if ((st = logged(inst, fd)))
		snprintf(what, wlen, "apt-get install");
	else if ((st = logged(clean, fd)))
		snprintf(what, wlen, "apt-get clean");
	if (pfd >= 0)
		unlink(policy);
out:
	(void)cli_unmount_under(dir, 0); /* /proc mounted in the tree, here or by a killed apt */
	free(inst);
	free(list);
	return st ? -EIO : 0;
}

/* What Debian's installer writes and debootstrap does not: /etc/hosts
 * (without it "localhost" goes to DNS, and a sandbox without a network
 * has none: every server a test starts on localhost is unreachable by
 * name), with the sandbox's hostname (guest-init's /etc/hostname). The
 * build host's /etc/resolv.conf, which debootstrap copied in, goes:
 * guest-init writes one when the sandbox has a network (--net ...,dns=). */
static int etc_files(const char *dir)
{
	static const char hosts[] = "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n"
				    "::1\tlocalhost ip6-localhost ip6-loopback\n"
				    "ff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n";
	char p[PATH_MAX + 32];
	int fd;

	snprintf(p, sizeof(p), "%s/etc/resolv.conf", dir);
	if (unlink(p) < 0 && errno != ENOENT)
		return -errno;
	snprintf(p, sizeof(p), "%s/etc/hosts", dir);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0)
		return errno == EEXIST ? 0 : -errno;
	if (write(fd, hosts, sizeof(hosts) - 1) != (ssize_t)sizeof(hosts) - 1) {
		close(fd);
		return -EIO;
	}
	return close(fd) < 0 ? -errno : 0;
}

int dfi_debootstrap_fill(const char *id, const char *dir, FILE *progress, char *err, size_t errlen)
{
	char suite[80], pkgs[4096] = "", mirror[1024], logp[PATH_MAX + 32], kept[PATH_MAX + 32], last[200], what[160];
	const char *s = id + strlen(PREFIX), *plus, *sep = strstr(id, MIRROR_SEP), *end = strstr(id, FILL_VERSION);
	const char *argv[] = { "debootstrap", "--variant=minbase", suite, dir, mirror, NULL };
	int fd, st;

	if (!sep || !end || end < sep || !dfi_is_debootstrap(id)) {
		snprintf(err, errlen, "%s: not a debootstrap base", id);
		return -EINVAL;
	}
	plus = memchr(s, '+', (size_t)(sep - s));
	snprintf(suite, sizeof(suite), "%.*s", (int)((plus ? plus : sep) - s), s);
	snprintf(mirror, sizeof(mirror), "%.*s", (int)(end - sep - strlen(MIRROR_SEP)), sep + strlen(MIRROR_SEP));
	if (plus)
		snprintf(pkgs, sizeof(pkgs), "%.*s", (int)(sep - plus - 1), plus + 1);
	/* the log beside the tree: it stays in the step's cache entry */
	snprintf(logp, sizeof(logp), "%s/../debootstrap.log", dir);
	if ((fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		snprintf(err, errlen, "%s: %s", logp, strerror(errno));
		return -errno;
	}
	if (progress)
		fprintf(progress, "debootstrap %s from %s, then apt-get install %s (once: minutes; then cached)\n", suite,
			mirror, pkgs[0] ? pkgs : "nothing");
	snprintf(what, sizeof(what), "debootstrap %s", suite);
	st = logged(argv, fd);
	/* debootstrap mounts /proc and /sys in the target and unmounts them
	 * on exit; a killed one may not: detached before anything removes
	 * the tree */
	(void)cli_unmount_under(dir, 0);
	if (!st && pkgs[0])
		st = apt_install(dir, pkgs, fd, what, sizeof(what));
	close(fd);
	if (st) {
		/* the step's folder goes: keep the log in the cache's root */
		char *slash;

		last_line(logp, last, sizeof(last));
		append_inner_log(dir, logp);
		snprintf(kept, sizeof(kept), "%s", dir); /* CACHE/tmp-PID-N/root */
		for (int up = 0; up < 2 && (slash = strrchr(kept, '/')); up++)
			*slash = '\0';
		snprintf(kept + strlen(kept), sizeof(kept) - strlen(kept), "/debootstrap-failed.log");
		rename(logp, kept);
		snprintf(err, errlen, "%s failed: %s (log: %s)", what, last, kept);
		return -EIO;
	}
	trim(dir);
	if ((st = etc_files(dir))) {
		snprintf(err, errlen, "writing /etc/hosts in the tree: %s", strerror(-st));
		return st;
	}
	return 0;
}
