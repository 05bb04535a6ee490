/* The sandbox API's file operations (docs/api.md): read (v2: a range),
 * write (atomic; v2: owner), list, stat (v2: many paths, follow), mkdir,
 * remove, rename, readlink and symlink (v2). Each runs in the connection's own process. */
#include "guest-init/ops.h"
#include "vmm/wire/proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static const char *type_name(mode_t m)
{
	if (S_ISREG(m)) return "file";
	if (S_ISDIR(m)) return "dir";
	if (S_ISLNK(m)) return "symlink";
	if (S_ISCHR(m)) return "char";
	if (S_ISBLK(m)) return "block";
	if (S_ISFIFO(m)) return "fifo";
	if (S_ISSOCK(m)) return "socket";
	return "unknown";
}

static void stat_fields(struct json_writer *w, const struct stat *st)
{
	jw_key(w, "type");
	jw_str(w, type_name(st->st_mode));
	jw_key(w, "size");
	jw_int(w, (int64_t)st->st_size);
	jw_key(w, "mode");
	jw_int(w, st->st_mode & 07777);
	jw_key(w, "mtime");
	jw_int(w, (int64_t)st->st_mtime);
	jw_key(w, "uid");
	jw_int(w, st->st_uid);
	jw_key(w, "gid");
	jw_int(w, st->st_gid);
}

int files_mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	size_t i, n = strlen(path);

	if (n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (tmp[i] != '/' && tmp[i] != '\0')
			continue;
		tmp[i] = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		tmp[i] = i < n ? '/' : '\0';
	}
	{
		struct stat st;

		if (stat(path, &st) < 0)
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
	return 0;
}

void files_read(int fd, const struct api_request *r)
{
	char buf[DATA_CHUNK], meta[256];
	uint64_t sent = 0;
	struct json_writer w;
	struct stat st;
	int f = open(r->path, O_RDONLY | O_CLOEXEC);

	if (f < 0 || fstat(f, &st) < 0) {
		api_send_error(fd, errno, NULL);
		if (f >= 0)
			close(f);
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		close(f);
		api_send_error(fd, EISDIR, NULL);
		return;
	}
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	stat_fields(&w, &st);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
	if (r->offset > 0 && lseek(f, (off_t)r->offset, SEEK_SET) < 0) {
		api_send_error(fd, errno, "cannot seek to \"offset\"");
		close(f);
		return;
	}
	for (;;) {
		size_t want = sizeof(buf);
		ssize_t n;

		/* v2 "length": at most that many bytes (-1: to the end). */
		if (r->length >= 0 && (uint64_t)r->length - sent < want)
			want = (size_t)((uint64_t)r->length - sent);
		n = want ? read(f, buf, want) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			api_send_error(fd, errno, "read failed midway");
			break;
		}
		if (n == 0) {
			frame_write(fd, F_END, NULL, 0);
			break;
		}
		if (frame_write(fd, F_DATA, buf, (size_t)n))
			break;
		sent += (uint64_t)n;
	}
	close(f);
}

/* Atomic write: a temporary file beside the target, fsync, rename. */
void files_write(int fd, const struct api_request *r)
{
	static char buf[FRAME_MAX];
	char dir[PATH_MAX], tmp[PATH_MAX + 256], meta[128];
	const char *slash = strrchr(r->path, '/'), *base = slash + 1;
	struct json_writer w;
	uint64_t total = 0;
	uid_t uid = r->uid >= 0 ? (uid_t)r->uid : (uid_t)-1;
	gid_t gid = r->gid >= 0 ? (gid_t)r->gid : (gid_t)-1;
	int f, e;

	if (!*base) {
		api_send_error(fd, EISDIR, "path names a directory");
		return;
	}
	if (r->user) {
		/* The guest's own user database (musl reads /etc/passwd). */
		struct passwd *pw = getpwnam(r->user);

		if (!pw) {
			api_send_error(fd, ENOENT, "no such user in the sandbox's /etc/passwd");
			return;
		}
		uid = pw->pw_uid;
		gid = pw->pw_gid;
	}
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - r->path) ? (int)(slash - r->path) : 1, r->path);
	if (r->parents && (e = files_mkdir_p(dir, 0755)) < 0) {
		api_send_error(fd, -e, "cannot create the parent directories");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%.3800s/.%.200s.vmm-XXXXXX", dir, base);
	f = mkostemp(tmp, O_CLOEXEC);
	if (f < 0) {
		api_send_error(fd, errno, NULL);
		return;
	}
	if (uid != (uid_t)-1 || gid != (gid_t)-1) {
		/* Before the content and the rename: nobody sees the file
		 * with the wrong owner. fchown clears set-id bits: chmod after. */
		if (fchown(f, uid, gid) < 0) {
			e = errno;
			unlink(tmp);
			close(f);
			api_send_error(fd, e, "cannot give the file that owner");
			return;
		}
	}
	fchmod(f, r->mode >= 0 ? (mode_t)r->mode : 0644);
	for (;;) {
		uint8_t type;
		size_t len;
		int rr = frame_read(fd, &type, buf, sizeof(buf), &len);

		if (rr || (type != F_DATA && type != F_END)) {
			/* The client went away or broke the protocol: nothing
			 * half-written becomes visible. */
			unlink(tmp);
			close(f);
			if (rr != -1)
				api_send_error(fd, EPROTO, "expected DATA or END frames");
			return;
		}
		if (type == F_END)
			break;
		if (write_full(f, buf, len)) {
			e = errno;
			unlink(tmp);
			close(f);
			api_send_error(fd, e, "write failed (disk full?)");
			return;
		}
		total += len;
	}
	if (fsync(f) < 0 || close(f) < 0 || rename(tmp, r->path) < 0) {
		e = errno;
		unlink(tmp);
		api_send_error(fd, e, NULL);
		return;
	}
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	jw_key(&w, "size");
	jw_int(&w, (int64_t)total);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
}

/* Directory listing in pages of at most ~60 KiB: {"entries":[...],"more":B}. */
void files_list(int fd, const struct api_request *r)
{
	static char buf[DATA_CHUNK + 4096];
	struct json_writer w;
	struct dirent *de;
	DIR *d = opendir(r->path);
	int dfd, count = 0;

	if (!d) {
		api_send_error(fd, errno, NULL);
		return;
	}
	dfd = dirfd(d);
	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "entries");
	jw_arr(&w);
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* raced with a removal */
		if (w.len > DATA_CHUNK) {
			jw_arr_end(&w);
			jw_key(&w, "more");
			jw_bool(&w, 1);
			jw_obj_end(&w);
			api_send_json(fd, F_RESULT, &w);
			jw_init(&w, buf, sizeof(buf));
			jw_obj(&w);
			jw_key(&w, "entries");
			jw_arr(&w);
		}
		jw_obj(&w);
		jw_key(&w, "name");
		jw_str(&w, de->d_name);
		stat_fields(&w, &st);
		jw_obj_end(&w);
		count++;
	}
	closedir(d);
	jw_arr_end(&w);
	jw_key(&w, "more");
	jw_bool(&w, 0);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
}

/* v2: {"results":[{"path":P, stat fields} or {"path":P,"error":...}]}. */
static void stat_many(int fd, const struct api_request *r)
{
	static char buf[API_MAX_PATHS * (PATH_MAX + 256)];
	struct json_writer w;
	unsigned i;

	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "results");
	jw_arr(&w);
	for (i = 0; i < r->nr_paths; i++) {
		struct stat st;

		jw_obj(&w);
		jw_key(&w, "path");
		jw_str(&w, r->paths[i]);
		if ((r->follow_links ? stat(r->paths[i], &st) : lstat(r->paths[i], &st)) < 0) {
			jw_key(&w, "error");
			jw_str(&w, errno_name(errno));
			jw_key(&w, "errno");
			jw_int(&w, errno);
		} else {
			stat_fields(&w, &st);
		}
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);
	if (jw_done(&w) && w.len > FRAME_MAX) {
		api_send_error(fd, E2BIG, "the answer is over 1 MiB: ask about fewer paths");
		return;
	}
	api_send_json(fd, F_RESULT, &w);
}

void files_stat(int fd, const struct api_request *r)
{
	char buf[256];
	struct json_writer w;
	struct stat st;

	if (r->nr_paths) {
		stat_many(fd, r);
		return;
	}
	if ((r->follow_links ? stat(r->path, &st) : lstat(r->path, &st)) < 0) {
		api_send_error(fd, errno, NULL);
		return;
	}
	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	stat_fields(&w, &st);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
}

static int remove_tree(int dfd, const char *name)
{
	struct stat st;
	int sub, e = 0;
	DIR *d;
	struct dirent *de;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 ? -errno : 0;
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return -errno;
	d = fdopendir(sub);
	if (!d) {
		close(sub);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((e = remove_tree(dirfd(d), de->d_name)) < 0)
			break;
	}
	closedir(d);
	if (e < 0)
		return e;
	return unlinkat(dfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

void files_mkdir(int fd, const struct api_request *r)
{
	mode_t mode = r->mode >= 0 ? (mode_t)r->mode : 0755;
	int e = r->parents ? files_mkdir_p(r->path, mode) : (mkdir(r->path, mode) < 0 ? -errno : 0);

	if (e < 0)
		api_send_error(fd, -e, NULL);
	else
		api_send_ok(fd);
}

void files_remove(int fd, const struct api_request *r)
{
	struct stat st;
	int e;

	if (lstat(r->path, &st) < 0) {
		api_send_error(fd, errno, NULL);
		return;
	}
	if (!strcmp(r->path, "/")) {
		api_send_error(fd, EBUSY, "refusing to remove /");
		return;
	}
	if (S_ISDIR(st.st_mode))
		e = r->recursive ? remove_tree(AT_FDCWD, r->path) : (rmdir(r->path) < 0 ? -errno : 0);
	else
		e = unlink(r->path) < 0 ? -errno : 0;
	if (e < 0)
		api_send_error(fd, -e, NULL);
	else
		api_send_ok(fd);
}

void files_rename(int fd, const struct api_request *r)
{
	if (rename(r->path, r->to) < 0)
		api_send_error(fd, errno, NULL);
	else
		api_send_ok(fd);
}

/* v2: {"target":T} for the symbolic link at path (EINVAL: not a link). */
void files_readlink(int fd, const struct api_request *r)
{
	static char target[PATH_MAX], buf[2 * PATH_MAX + 64];
	struct json_writer w;
	ssize_t n = readlink(r->path, target, sizeof(target) - 1);

	if (n < 0) {
		api_send_error(fd, errno, errno == EINVAL ? "not a symbolic link" : NULL);
		return;
	}
	target[n] = '\0';
	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "target");
	jw_str(&w, target);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
}

/* v2: a symbolic link at path to target, replacing a file or link there
 * (atomically: made beside it, then renamed over it), never a directory. */
void files_symlink(int fd, const struct api_request *r)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 256];
	const char *slash = strrchr(r->path, '/'), *base = slash + 1;
	struct stat st;
	unsigned i;
	int e;

	if (!*base) {
		api_send_error(fd, EISDIR, "path names a directory");
		return;
	}
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - r->path) ? (int)(slash - r->path) : 1, r->path);
	if (r->parents && (e = files_mkdir_p(dir, 0755)) < 0) {
		api_send_error(fd, -e, "cannot create the parent directories");
		return;
	}
	if (lstat(r->path, &st) == 0 && S_ISDIR(st.st_mode)) {
		api_send_error(fd, EISDIR, "a directory is there");
		return;
	}
	for (i = 0; i < 100; i++) {
		snprintf(tmp, sizeof(tmp), "%.3800s/.%.200s.vmm-%u-%u", dir, base, (unsigned)getpid(), i);
		if (symlink(r->target, tmp) == 0)
			break;
		if (errno != EEXIST) {
			api_send_error(fd, errno, NULL);
			return;
		}
	}
	if (i == 100 || rename(tmp, r->path) < 0) {
		e = i == 100 ? EEXIST : errno;
		if (i < 100)
			unlink(tmp);
		api_send_error(fd, e, NULL);
		return;
	}
	api_send_ok(fd);
}
