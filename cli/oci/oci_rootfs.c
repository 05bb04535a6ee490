/* Mount targets made in a read-only root before its VM boots (see
 * oci_rootfs.h). */
#include "cli/oci/oci_rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* rel (no leading '/') inside root: its links resolved as if root were
 * "/" (openat2(2) RESOLVE_IN_ROOT), never out of it. An fd or -errno. */
static int in_root(int root, const char *rel, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, root, *rel ? rel : ".", &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

/* Makes dest (absolute in the container) under root: its missing folders,
 * then a folder or, `file`, an empty file. 0 (there already, or made) or
 * -errno. */
static int make_target(int root, const char *dest, int file)
{
	char rel[PATH_MAX];
	size_t n = 0, len;
	int fd, r;

	while (*dest == '/')
		dest++;
	if ((len = strlen(dest)) >= sizeof(rel))
		return -ENAMETOOLONG;
	memcpy(rel, dest, len + 1);
	if ((fd = in_root(root, rel, O_PATH)) >= 0) {
		close(fd);
		return 0;
	}
	if (fd != -ENOENT)
		return fd;
	/* each missing prefix, from the top: made in its parent as resolved */
	for (;;) {
		char *slash = strchr(rel + n, '/'), save = 0, *name;
		int last = !slash, parent;

		if (slash) {
			save = *slash;
			*slash = '\0';
		}
		fd = in_root(root, rel, O_PATH);
		if (fd >= 0) {
			close(fd);
		} else if (fd == -ENOENT) {
			name = strrchr(rel, '/');
			if (name) {
				*name = '\0';
				parent = in_root(root, rel, O_PATH | O_DIRECTORY);
				*name = '/';
				name++;
			} else {
				parent = in_root(root, "", O_PATH | O_DIRECTORY);
				name = rel;
			}
			if (parent < 0)
				return parent;
			if (last && file)
				r = (fd = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0
					    ? -errno
					    : close(fd);
			else
				r = mkdirat(parent, name, 0755) < 0 && errno != EEXIST ? -errno : 0;
			close(parent);
			if (r)
				return r;
		} else {
			return fd;
		}
		if (last)
			return 0;
		*slash = save;
		n = (size_t)(slash - rel) + 1;
	}
}

int oci_rootfs_targets(const struct oci_spec *s, char *why, size_t wl)
{
	unsigned i;
	int root, r = 0;

	if (!s->root_ro)
		return 0;
	root = open(s->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		r = -errno;
		snprintf(why, wl, "root.path %s: %s", s->root, strerror(errno));
		return r;
	}
	for (i = 0; i < s->nmounts && !r; i++) {
		const struct oci_mount *m = &s->mounts[i];
		struct stat st;
		/* a bind of a file needs a file to mount on (oci_mount_script) */
		int file = m->kind == OCI_MNT_BIND && m->source && stat(m->source, &st) == 0 && !S_ISDIR(st.st_mode);

		if ((r = make_target(root, m->dest, file)))
			snprintf(why, wl, "mount %s: cannot make it in the read-only root: %s", m->dest, strerror(-r));
	}
	close(root);
	return r;
}
