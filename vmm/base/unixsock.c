/* Listening Unix sockets: see unixsock.h. */
#include "vmm/base/unixsock.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int unix_listen(const char *path, int backlog, int owner_only, const char *what)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_err("%s %s: path too long for a Unix socket", what, path);
		return -ENAMETOOLONG;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (lstat(path, &st) == 0) {
		int probe;

		if (!S_ISSOCK(st.st_mode)) {
			log_err("%s %s: exists and is not a socket", what, path);
			return -EEXIST;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			log_err("%s %s: another VMM is listening there", what, path);
			return -EADDRINUSE;
		}
		if (probe >= 0)
			close(probe);
		unlink(path); /* stale: its VMM is gone */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Owner-only without touching the umask (process-wide: another thread
	 * creating a file, or saving and restoring it, would race). Nothing can
	 * connect to a bound socket before listen(), so the mode set between
	 * the two is the mode of every connection's check. */
	e = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (owner_only && fchmodat(AT_FDCWD, path, 0600, 0) < 0) || listen(fd, backlog) < 0 ? -errno : 0;
	if (e) {
		log_err("%s %s: %s", what, path, strerror(-e));
		close(fd);
		return e;
	}
	return fd;
}
