/* vmm cp's directory streams (cli/sandbox/cp_files.h): a directory as one tar
 * archive through the sandbox API's tar_put and tar_get (docs/api.md),
 * built and checked by vmm/wire/tar.c on this side too; and the
 * archive on stdin or stdout for `vmm cp -` (docker cp's form). */
#include "cli/sandbox/cp_files.h"
#include "vmm/wire/proto.h"
#include "vmm/wire/tar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An older guest-init: it does not know the op (or version 2 at all). */
static int too_old(const struct api_error *e)
{
	return strstr(e->message, "unknown \"op\"") || strstr(e->message, "unsupported API version");
}

/* Opens op on path and reads its first answer. The fd, CP_TAR_OLD's
 * negation (-1000) for an older guest-init, or -errno (printed). */
#define OLD (-1000)
static int tar_open(const struct sandbox_addr *a, const char *fields, const char *path, int fallback)
{
	char res[4096];
	struct api_error e;
	int fd = api_open_v(a, 2, fields), r;

	if (fd < 0) {
		fprintf(stderr, "vmm: cannot reach the sandbox API at %s: %s\n", a->uds, strerror(-fd));
		return fd;
	}
	r = api_result(fd, res, sizeof(res), &e);
	if (r == 0)
		return fd;
	close(fd);
	if (r == -1 && too_old(&e)) {
		if (fallback)
			return OLD;
		fprintf(stderr, "vmm: cp: %s: the sandbox's guest-init is too old for tar streams (tar_get, "
				"tar_put): copy without '-'\n", path);
		return -ENOTSUP;
	}
	if (r == -1) {
		api_report(path, &e);
		return -e.eno;
	}
	fprintf(stderr, "vmm: cp: %s: the sandbox closed the connection\n", path);
	return -EPROTO;
}

static int fields_for(char *buf, size_t len, const char *op, const char *path, const char *arcname, int follow,
		      int parents)
{
	struct json_writer w;

	jw_init(&w, buf, len);
	jw_key(&w, "op");
	jw_str(&w, op);
	jw_key(&w, "path");
	jw_str(&w, path);
	if (arcname) {
		jw_key(&w, "name");
		jw_str(&w, arcname);
	}
	if (follow) {
		jw_key(&w, "follow");
		jw_bool(&w, 1);
	}
	if (parents) {
		jw_key(&w, "parents");
		jw_bool(&w, 1);
	}
	return jw_done(&w) ? 0 : -ENAMETOOLONG;
}

/* The guest's last answer to tar_put: RESULT, or ERROR (printed). */
static int put_result(int fd, const char *remote)
{
	char res[4096];
	struct api_error e;
	int r = api_result(fd, res, sizeof(res), &e);

	if (r == 0)
		return 0;
	if (r == -1) {
		api_report(remote, &e);
		return -e.eno;
	}
	fprintf(stderr, "vmm: cp: %s: the sandbox closed the connection\n", remote);
	return -EPROTO;
}

struct put_ctx {
	int fd;
	struct cp_opts *o;
};

static int put_out(void *ctx, const void *buf, size_t len)
{
	struct put_ctx *p = ctx;

	if (frame_write(p->fd, F_DATA, buf, len))
		return -EPIPE;
	if (p->o)
		cp_count(p->o, len);
	return 0;
}

int cp_tar_in(const struct sandbox_addr *a, const char *local, const char *remote, struct cp_opts *o)
{
	char fields[8192];
	struct put_ctx pc = { .o = o };
	struct tar_w w = { .out = put_out, .ctx = &pc, .follow = o->follow };
	int fd, r;

	if (fields_for(fields, sizeof(fields), "tar_put", remote, NULL, 0, 1))
		return -ENAMETOOLONG;
	fd = tar_open(a, fields, remote, 1);
	if (fd == OLD)
		return CP_TAR_OLD;
	if (fd < 0)
		return fd;
	pc.fd = fd;
	r = tar_w_path(&w, AT_FDCWD, local, ".");
	if (!r)
		r = tar_w_finish(&w);
	if (!r && frame_write(fd, F_END, NULL, 0))
		r = -EPIPE;
	if (r == -EPIPE) {
		/* the guest refused the archive midway: its ERROR says why */
		r = put_result(fd, remote);
		r = r ? r : -EPIPE;
	} else if (r) {
		fprintf(stderr, "vmm: cp: %s\n", w.err);
	} else {
		r = put_result(fd, remote);
	}
	close(fd);
	return r;
}

/* DATA frames from fd into x until END (or an ERROR, printed). */
static int get_into(int fd, struct tar_x *x, int out_fd, const char *remote, struct cp_opts *o)
{
	uint8_t *buf = malloc(FRAME_MAX + 1), type;
	struct api_error e;
	size_t len;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (frame_read(fd, &type, buf, FRAME_MAX, &len)) {
			fprintf(stderr, "vmm: cp: %s: the sandbox closed the connection midway\n", remote);
			r = -EPROTO;
			break;
		}
		if (type == F_ERROR) {
			api_parse_error((const char *)buf, len, &e);
			api_report(remote, &e);
			r = -e.eno;
			break;
		}
		if (type == F_END)
			break;
		if (type != F_DATA)
			continue;
		if (o)
			cp_count(o, len);
		if (x && (r = tar_x_feed(x, buf, len))) {
			fprintf(stderr, "vmm: cp: %s: the archive from the sandbox is refused: %s\n", remote, x->err);
			break;
		}
		if (out_fd >= 0 && write_full(out_fd, buf, len)) {
			r = -errno;
			fprintf(stderr, "vmm: cp: stdout: %s\n", strerror(errno));
			break;
		}
	}
	if (!r && x && (r = tar_x_finish(x)))
		fprintf(stderr, "vmm: cp: %s: the archive from the sandbox is refused: %s\n", remote, x->err);
	free(buf);
	return r;
}

int cp_tar_out(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, int follow_top,
	       mode_t mask, struct cp_opts *o)
{
	char fields[8192];
	struct tar_x x;
	int fd, dst, r;

	if (fields_for(fields, sizeof(fields), "tar_get", remote, ".", o->follow, 0))
		return -ENAMETOOLONG;
	fd = tar_open(a, fields, remote, 1);
	if (fd == OLD)
		return CP_TAR_OLD;
	if (fd < 0)
		return fd;
	if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", name, strerror(errno));
		close(fd);
		return r;
	}
	/* DST/NAME (into a directory) is never followed: an earlier copy
	 * may have made it a link the guest chose */
	dst = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow_top ? 0 : O_NOFOLLOW));
	if (dst < 0) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", name,
			errno == ELOOP || errno == ENOTDIR ? "a symbolic link or not a directory: not written through"
							   : strerror(errno));
		close(fd);
		return r;
	}
	tar_x_init(&x, dst, NULL);
	x.mode_mask = mask;
	r = get_into(fd, &x, -1, remote, o);
	tar_x_free(&x);
	close(dst);
	close(fd);
	return r;
}

int cp_tar_stdin(const struct sandbox_addr *a, const char *remote)
{
	char fields[8192], *buf = malloc(DATA_CHUNK);
	int fd, r = 0;

	if (!buf)
		return -ENOMEM;
	if (fields_for(fields, sizeof(fields), "tar_put", remote, NULL, 0, 0)) {
		free(buf);
		return -ENAMETOOLONG;
	}
	fd = tar_open(a, fields, remote, 0);
	if (fd < 0) {
		free(buf);
		return fd;
	}
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, DATA_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			fprintf(stderr, "vmm: cp: stdin: %s\n", strerror(errno));
			break;
		}
		if (n == 0) {
			if (frame_write(fd, F_END, NULL, 0))
				r = -EPIPE;
			break;
		}
		if (frame_write(fd, F_DATA, buf, (size_t)n)) {
			r = -EPIPE;
			break;
		}
	}
	if (r == 0 || r == -EPIPE) {
		int k = put_result(fd, remote);

		r = k ? k : r;
	}
	close(fd);
	free(buf);
	return r;
}

int cp_tar_stdout(const struct sandbox_addr *a, const char *remote, const char *arcname, int follow)
{
	char fields[8192];
	int fd, r;

	if (isatty(STDOUT_FILENO)) {
		fprintf(stderr, "vmm: cp: not writing a tar archive to a terminal (pipe it: vmm cp %s - | tar -tf -)\n",
			remote);
		return -EINVAL;
	}
	if (fields_for(fields, sizeof(fields), "tar_get", remote, arcname, follow, 0))
		return -ENAMETOOLONG;
	fd = tar_open(a, fields, remote, 0);
	if (fd < 0)
		return fd;
	r = get_into(fd, NULL, STDOUT_FILENO, remote, NULL);
	close(fd);
	return r;
}
