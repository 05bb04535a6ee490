/* The FUSE server's ownership policy (see fuse_priv.h). */
#include "devices/fuse/fuse_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

mode_t fpriv_mode(uint32_t type, uint32_t mode)
{
	return (mode_t)(mode & (type == S_IFDIR ? (S_ISGID | S_ISVTX | 0777) : (S_ISVTX | 0777)));
}

int fpriv_chown_ok(const struct stat *st, uid_t uid, gid_t gid)
{
	/* geteuid at each call: a jailed VMM changes its ids after the
	 * server is set up (docs/security.md, the jail's step 8). */
	if (uid != (uid_t)-1 && uid != st->st_uid && uid != geteuid())
		return -EPERM;
	if (gid != (gid_t)-1 && gid != st->st_gid && gid != getegid())
		return -EPERM;
	return 0;
}

int fpriv_kill(int proc_fd, int fd)
{
	struct stat st;
	char p[16];

	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || !(st.st_mode & (S_ISUID | S_ISGID)))
		return 0;
	snprintf(p, sizeof(p), "%d", fd);
	if (fchmodat(proc_fd, p, st.st_mode & 01777, 0) < 0 && errno != EPERM)
		return -errno;
	return 0;
}

int fpriv_xattr_ok(const char *name)
{
	return !strncmp(name, "user.", 5);
}

size_t fpriv_xattr_filter(char *list, size_t len)
{
	size_t in = 0, out = 0;

	while (in < len) {
		const char *nul = memchr(list + in, '\0', len - in);
		size_t n = nul ? (size_t)(nul - (list + in)) + 1 : len - in;

		if (nul && fpriv_xattr_ok(list + in)) {
			memmove(list + out, list + in, n);
			out += n;
		}
		in += n;
	}
	return out;
}
