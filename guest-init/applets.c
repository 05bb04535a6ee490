/* Busybox applet links from a build-time list (applets.h). */
#include "guest-init/applets.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int name_ok(const char *s, size_t n)
{
	if (n == 0 || n > NAME_MAX)
		return 0;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return 0;
	return memchr(s, '/', n) == NULL && memchr(s, '\0', n) == NULL;
}

int applets_link(int dirfd, const char *list, size_t len, const char *target, unsigned *made)
{
	char name[NAME_MAX + 1];
	size_t i = 0;
	int err = 0;

	if (made)
		*made = 0;
	while (i < len) {
		const char *nl = memchr(list + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - list) : len;
		size_t n = end - i;

		if (n && list[i + n - 1] == '\r')
			n--;
		if (name_ok(list + i, n)) {
			memcpy(name, list + i, n);
			name[n] = '\0';
			if (symlinkat(target, dirfd, name) == 0) {
				if (made)
					(*made)++;
			} else if (errno != EEXIST && !err) {
				err = -errno;
			}
		}
		i = end + 1;
	}
	return err;
}

int applets_install(const char *list_path, const char *dir, const char *target, unsigned *made)
{
	char *buf = NULL;
	size_t len;
	struct stat st;
	int fd, dfd = -1, r;

	fd = open(list_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > APPLETS_LIST_MAX) {
		r = -EINVAL;
		goto out;
	}
	len = (size_t)st.st_size;
	buf = malloc(len + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	if (read_full(fd, buf, len) < 0) {
		r = errno ? -errno : -EIO; /* errno 0: the file ended early */
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		r = -errno;
		goto out;
	}
	r = applets_link(dfd, buf, len, target, made);
out:
	if (dfd >= 0)
		close(dfd);
	free(buf);
	close(fd);
	return r;
}
