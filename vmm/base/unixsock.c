/* Unix sockets at paths of any length: see unixsock.h. */
#include "vmm/base/unixsock.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* A socket's address, and how to name its file for the *at() calls. */
struct uaddr {
	struct sockaddr_un sa;
	int at;          /* AT_FDCWD, or the folder's descriptor */
	const char *rel; /* the path relative to `at` */
	int own_fd;      /* a folder descriptor opened here (closed by uaddr_done), -1 */
};

int unix_path_fits(const char *path)
{
	return strlen(path) < sizeof(((struct sockaddr_un *)0)->sun_path);
}

int unix_dir_open(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int fd;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static void uaddr_done(struct uaddr *a)
{
	if (a->own_fd >= 0)
		close(a->own_fd);
	a->own_fd = -1;
}

/* a's address for path: the path itself when it fits, else
 * "/proc/self/fd/N/NAME" through dir_fd (opened here when -1). 0 or -errno. */
static int uaddr_make(struct uaddr *a, int dir_fd, const char *path)
{
	const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
	int n;

	memset(&a->sa, 0, sizeof(a->sa));
	a->sa.sun_family = AF_UNIX;
	a->at = AT_FDCWD;
	a->rel = path;
	a->own_fd = -1;
	if (!*path || !*name)
		return -EINVAL;
	if (unix_path_fits(path)) {
		memcpy(a->sa.sun_path, path, strlen(path) + 1);
		return 0;
	}
	if (dir_fd < 0) {
		if ((dir_fd = unix_dir_open(path)) < 0)
			return dir_fd;
		a->own_fd = dir_fd;
	}
	n = snprintf(a->sa.sun_path, sizeof(a->sa.sun_path), "/proc/self/fd/%d/%s", dir_fd, name);
	if (n < 0 || (size_t)n >= sizeof(a->sa.sun_path)) {
		uaddr_done(a);
		return -ENAMETOOLONG; /* the basename itself is too long */
	}
	a->at = dir_fd;
	a->rel = name;
	return 0;
}

/* Whether /proc/self/fd/N names the folder N is open on: no /proc (a jail
 * that mounts none) or another one in its place cannot carry a long path. */
static int proc_reaches(int dir_fd)
{
	char p[64];
	struct stat a, b;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", dir_fd);
	return stat(p, &a) == 0 && fstat(dir_fd, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int unix_listen(const char *path, int backlog, int owner_only, const char *what)
{
	struct uaddr a;
	struct stat st;
	int fd, e;

	e = uaddr_make(&a, -1, path);
	if (!e && a.own_fd >= 0 && !proc_reaches(a.own_fd)) {
		uaddr_done(&a);
		log_err("%s %s: the path is %zu bytes, more than a Unix socket address holds (%zu), "
			"and there is no /proc to reach it through its folder: use a shorter state directory",
			what, path, strlen(path), sizeof(a.sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	if (e) {
		log_err("%s %s: %s", what, path, strerror(-e));
		return e;
	}
	if (fstatat(a.at, a.rel, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		int probe;

		if (!S_ISSOCK(st.st_mode)) {
			log_err("%s %s: exists and is not a socket", what, path);
			e = -EEXIST;
			goto out;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&a.sa, sizeof(a.sa)) == 0) {
			close(probe);
			log_err("%s %s: another VMM is listening there", what, path);
			e = -EADDRINUSE;
			goto out;
		}
		if (probe >= 0)
			close(probe);
		unlinkat(a.at, a.rel, 0); /* stale: its VMM is gone */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = -errno;
		goto out;
	}
	/* Owner-only without touching the umask (process-wide: another thread
	 * creating a file, or saving and restoring it, would race). Nothing can
	 * connect to a bound socket before listen(), so the mode set between
	 * the two is the mode of every connection's check. */
	e = bind(fd, (struct sockaddr *)&a.sa, sizeof(a.sa)) < 0 ||
	    (owner_only && fchmodat(a.at, a.rel, 0600, 0) < 0) || listen(fd, backlog) < 0 ? -errno : 0;
	if (e) {
		log_err("%s %s: %s", what, path, strerror(-e));
		close(fd);
		goto out;
	}
	uaddr_done(&a);
	return fd;
out:
	uaddr_done(&a);
	return e;
}

int unix_connect_at(int dir_fd, const char *path, int flags)
{
	struct uaddr a;
	int fd, e = uaddr_make(&a, dir_fd, path);

	if (e)
		return e;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
	if (fd < 0) {
		e = -errno;
		goto out;
	}
	while (connect(fd, (struct sockaddr *)&a.sa, sizeof(a.sa)) < 0) {
		if (errno == EINTR)
			continue;
		e = -errno;
		close(fd);
		/* Through a folder this call opened (so not a filtered thread):
		 * say why a long path cannot be reached without /proc. */
		if (e == -ENOENT && a.own_fd >= 0 && !proc_reaches(a.own_fd))
			e = -ENAMETOOLONG;
		goto out;
	}
	uaddr_done(&a);
	return fd;
out:
	uaddr_done(&a);
	return e;
}

int unix_connect(const char *path, int flags)
{
	return unix_connect_at(-1, path, flags);
}
