/* A drive's files served on the host (drive.h; docs/mcp.md, "Access
 * tokens"): what the MCP endpoint does for a token scoped to a drive,
 * without asking the guest anything. Every path is resolved with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from a directory fd of
 * the drive's folder, so a symbolic link a guest planted in the drive (to
 * "/", to "..", to /proc/self/root) cannot lead out of it: the kernel
 * refuses such a walk with EXDEV or ELOOP. Writes reserve and settle their
 * bytes in the drive's shared count (devices/fuse/fuse.h, the same
 * helpers the FUSE server uses), so the size limit stays exact with
 * sandboxes writing at the same time. */
#include "cli/drive/drive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int drive_open_beneath(int root, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = flags & O_CREAT ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	do
		fd = syscall(SYS_openat2, root, *rel ? rel : ".", &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN); /* a rename raced the walk: again */
	return fd < 0 ? -errno : (int)fd;
}

int drive_files_open(const struct drive *d, struct drive_files *f)
{
	char usage[PATH_MAX + 8];
	int r;

	memset(f, 0, sizeof(*f));
	f->root = open(d->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->root < 0)
		return -errno;
	if (d->size) {
		snprintf(usage, sizeof(usage), "%s/usage", d->dir);
		if ((r = fuse_budget_map(&f->budget, usage, d->size))) {
			close(f->root);
			f->root = -1;
			return r;
		}
	}
	return 0;
}

void drive_files_close(struct drive_files *f)
{
	if (f->root >= 0)
		close(f->root);
	f->root = -1;
	fuse_budget_unmap(&f->budget);
}

/* rel's file opened for reading, beneath the drive: an O_PATH walk first,
 * then (a regular file only) a reopen of that very inode, so no FIFO or
 * device a guest made is ever opened. nofollow: a symbolic link as the
 * last component is refused (-ELOOP). */
static int open_regular(const struct drive_files *f, const char *rel, int nofollow, struct stat *st)
{
	char self[64];
	int p = drive_open_beneath(f->root, rel, O_PATH | (nofollow ? O_NOFOLLOW : 0), 0), fd;

	if (p < 0)
		return p;
	if (fstat(p, st) < 0) {
		fd = -errno;
		close(p);
		return fd;
	}
	if (!S_ISREG(st->st_mode)) {
		fd = S_ISLNK(st->st_mode) ? -ELOOP : S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
		close(p);
		return fd;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", p);
	fd = open(self, O_RDONLY | O_CLOEXEC);
	fd = fd < 0 ? -errno : fd;
	close(p);
	return fd;
}

int drive_file_read(const struct drive_files *f, const char *rel, uint64_t off, size_t max, int nofollow, char **data,
		    size_t *len, uint64_t *size, int64_t *mode)
{
	struct stat st;
	size_t got = 0;
	char *buf;
	int fd = open_regular(f, rel, nofollow, &st);

	*data = NULL;
	if (fd < 0)
		return fd;
	buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < max) {
		ssize_t k = pread(fd, buf + got, max - got, (off_t)(off + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int r = -errno;

			free(buf);
			close(fd);
			return r;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	buf[got] = '\0';
	*data = buf;
	*len = got;
	*size = (uint64_t)st.st_size;
	if (mode)
		*mode = (int64_t)(st.st_mode & 07777);
	return 0;
}

static int ent_type(mode_t m)
{
	return S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : S_ISREG(m) ? 'f' : '?';
}

int drive_file_list(const struct drive_files *f, const char *rel, size_t max, struct drive_dirent *ents, size_t *n,
		    size_t *total)
{
	int fd = drive_open_beneath(f->root, rel, O_RDONLY | O_DIRECTORY, 0);
	struct dirent *e;
	DIR *dir;

	*n = *total = 0;
	if (fd < 0)
		return fd;
	if (!(dir = fdopendir(fd))) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(dir))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		++*total;
		if (*n == max || fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!(ents[*n].name = strdup(e->d_name))) {
			closedir(dir);
			return -ENOMEM;
		}
		ents[*n].type = (char)ent_type(st.st_mode);
		ents[*n].size = (long long)st.st_size;
		++*n;
	}
	closedir(dir);
	return 0;
}

/* The directory of rel (everything before its last '/'), beneath the
 * drive, made component by component if parents. An O_PATH fd or -errno. */
static int parent_dir(const struct drive_files *f, const char *dir, int parents)
{
	char prefix[PATH_MAX];
	size_t at = 0;
	int cur;

	if (!parents || !*dir)
		return drive_open_beneath(f->root, dir, O_PATH | O_DIRECTORY, 0);
	if (strlen(dir) >= sizeof(prefix))
		return -ENAMETOOLONG;
	cur = drive_open_beneath(f->root, "", O_PATH | O_DIRECTORY, 0);
	while (cur >= 0 && dir[at]) {
		size_t n = strcspn(dir + at, "/");
		char comp[NAME_MAX + 1];

		if (n > NAME_MAX) {
			close(cur);
			return -ENAMETOOLONG;
		}
		memcpy(comp, dir + at, n);
		comp[n] = '\0';
		/* made in the directory reached so far (a plain name: no walk);
		 * an existing entry is then followed from the root, beneath */
		if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
			int r = -errno;

			close(cur);
			return r;
		}
		close(cur);
		memcpy(prefix, dir, at + n);
		prefix[at + n] = '\0';
		cur = drive_open_beneath(f->root, prefix, O_PATH | O_DIRECTORY, 0);
		at += n;
		at += dir[at] == '/';
	}
	return cur;
}

/* data into a new file named tmp in dirfd, its bytes reserved first. */
static int write_new(struct drive_files *f, int dirfd, const char *tmp, const void *data, size_t len, mode_t mode)
{
	struct fuse_reservation res;
	size_t done = 0;
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600), r;

	if (fd < 0)
		return -errno;
	if ((r = fuse_budget_take(&f->budget, fd, 0, len, 0, &res))) {
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	while (done < len && !r) {
		ssize_t k = write(fd, (const char *)data + done, len - done);

		if (k < 0 && errno != EINTR)
			r = -errno;
		else if (k > 0)
			done += (size_t)k;
	}
	if (!r && fchmod(fd, mode) < 0)
		r = -errno;
	fuse_budget_settle(&f->budget, fd, &res);
	close(fd);
	if (r) {
		fuse_budget_give_back(&f->budget, fuse_budget_freed(&f->budget, dirfd, tmp));
		unlinkat(dirfd, tmp, 0);
	}
	return r;
}

int drive_file_write(struct drive_files *f, const char *rel, const void *data, size_t len, int64_t mode, int parents)
{
	const char *slash = strrchr(rel, '/'), *base = slash ? slash + 1 : rel;
	char dir[PATH_MAX], tmp[64];
	unsigned long long rnd = 0;
	int64_t freed;
	int dirfd, r;

	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return -EISDIR;
	if ((size_t)(base - rel) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, rel, (size_t)(base - rel));
	dir[slash ? slash - rel : 0] = '\0';
	if ((dirfd = parent_dir(f, dir, parents)) < 0)
		return dirfd;
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		close(dirfd);
		return -EIO;
	}
	snprintf(tmp, sizeof(tmp), ".vmm-write.%016llx", rnd);
	/* no setuid, setgid or sticky bit on the host, as the FUSE server
	 * refuses them to guests (docs/virtio-fs.md, "Ownership"): the file
	 * belongs to whoever runs the endpoint, root perhaps */
	r = write_new(f, dirfd, tmp, data, len, mode < 0 ? 0644 : (mode_t)(mode & 0777));
	if (!r) {
		/* the file replaced gives its blocks back once the new one is in */
		freed = fuse_budget_freed(&f->budget, dirfd, base);
		if (renameat(dirfd, tmp, dirfd, base) < 0) {
			r = -errno;
			fuse_budget_give_back(&f->budget, fuse_budget_freed(&f->budget, dirfd, tmp));
			unlinkat(dirfd, tmp, 0);
		} else {
			fuse_budget_give_back(&f->budget, freed);
		}
	}
	close(dirfd);
	return r;
}
