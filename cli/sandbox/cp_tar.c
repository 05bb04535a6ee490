/* vmm cp's directory streams (cli/sandbox/cp_files.h): a directory as one tar
 * archive through the sandbox API's tar_put and tar_get (docs/api.md),
 * built and checked by vmm/wire/tar.c on this side too; and the
 * archive on stdin or stdout for `vmm cp -` (docker cp's form). */
#include "cli/sandbox/cp_files.h"
#include "cli/util/util.h"
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
 * negation (-1000) for an older guest-init, or -errno (why in o->err). */
#define OLD (-1000)
static int tar_open(const struct sandbox_addr *a, const char *fields, const char *path, int fallback,
		    struct cp_opts *o)
{
	char res[4096];
	struct api_error e;
	int fd = api_open_v(a, 2, fields), r;

	if (fd < 0)
		return api_unreachable(o->err, sizeof(o->err), a, fd);
	r = api_result(fd, res, sizeof(res), &e);
	if (r == 0)
		return fd;
	close(fd);
	if (r == -1 && too_old(&e)) {
		if (fallback)
			return OLD;
		return cli_seterr(o->err, sizeof(o->err), -ENOTSUP, "%s: the sandbox's guest-init is too old for tar "
				  "streams (tar_get, tar_put): copy without '-'", path);
	}
	if (r == -1)
		return api_error_msg(o->err, sizeof(o->err), path, &e);
	return cli_seterr(o->err, sizeof(o->err), -EPROTO, "%s: the sandbox closed the connection", path);
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

/* The guest's last answer to tar_put: RESULT, or ERROR (why in o->err). */
static int put_result(int fd, const char *remote, struct cp_opts *o)
{
	char res[4096];
	struct api_error e;
	int r = api_result(fd, res, sizeof(res), &e);

	if (r == 0)
		return 0;
	if (r == -1)
		return api_error_msg(o->err, sizeof(o->err), remote, &e);
	return cli_seterr(o->err, sizeof(o->err), -EPROTO, "%s: the sandbox closed the connection", remote);
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
		return cli_seterr(o->err, sizeof(o->err), -ENAMETOOLONG, "%s: %s", remote, strerror(ENAMETOOLONG));
	fd = tar_open(a, fields, remote, 1, o);
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
		r = put_result(fd, remote, o);
		r = r ? r : -EPIPE;
	} else if (r) {
		cli_seterr(o->err, sizeof(o->err), r, "%s", w.err);
	} else {
		r = put_result(fd, remote, o);
	}
	close(fd);
	return r;
}

/* DATA frames from fd into x (or out_fd) until END (or an ERROR: why in
 * o->err); count: the bytes go to o's progress line. */
static int get_into(int fd, struct tar_x *x, int out_fd, const char *remote, struct cp_opts *o, int count)
{
	uint8_t *buf = malloc(FRAME_MAX + 1), type;
	struct api_error e;
	size_t len;
	int r = 0;

	if (!buf)
		return cli_seterr(o->err, sizeof(o->err), -ENOMEM, "%s: %s", remote, strerror(ENOMEM));
	for (;;) {
		if (frame_read(fd, &type, buf, FRAME_MAX, &len)) {
			r = cli_seterr(o->err, sizeof(o->err), -EPROTO, "%s: the sandbox closed the connection midway",
				       remote);
			break;
		}
		if (type == F_ERROR) {
			api_parse_error((const char *)buf, len, &e);
			r = api_error_msg(o->err, sizeof(o->err), remote, &e);
			break;
		}
		if (type == F_END)
			break;
		if (type != F_DATA)
			continue;
		if (count)
			cp_count(o, len);
		if (x && (r = tar_x_feed(x, buf, len))) {
			cli_seterr(o->err, sizeof(o->err), r, "%s: the archive from the sandbox is refused: %s", remote,
				   x->err);
			break;
		}
		if (out_fd >= 0 && write_full(out_fd, buf, len)) {
			r = cli_seterr(o->err, sizeof(o->err), -errno, "stdout: %s", strerror(errno));
			break;
		}
	}
	if (!r && x && (r = tar_x_finish(x)))
		cli_seterr(o->err, sizeof(o->err), r, "%s: the archive from the sandbox is refused: %s", remote, x->err);
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
		return cli_seterr(o->err, sizeof(o->err), -ENAMETOOLONG, "%s: %s", remote, strerror(ENAMETOOLONG));
	fd = tar_open(a, fields, remote, 1, o);
	if (fd == OLD)
		return CP_TAR_OLD;
	if (fd < 0)
		return fd;
	if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST) {
		r = cli_seterr(o->err, sizeof(o->err), -errno, "%s: %s", name, strerror(errno));
		close(fd);
		return r;
	}
	/* DST/NAME (into a directory) is never followed: an earlier copy
	 * may have made it a link the guest chose */
	dst = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow_top ? 0 : O_NOFOLLOW));
	if (dst < 0) {
		r = cli_seterr(o->err, sizeof(o->err), -errno, "%s: %s", name,
			       errno == ELOOP || errno == ENOTDIR ? "a symbolic link or not a directory: not written through"
								  : strerror(errno));
		close(fd);
		return r;
	}
	tar_x_init(&x, dst, NULL);
	x.mode_mask = mask;
	r = get_into(fd, &x, -1, remote, o, 1);
	tar_x_free(&x);
	close(dst);
	close(fd);
	return r;
}

int cp_tar_stdin(const struct sandbox_addr *a, const char *remote, int in_fd, struct cp_opts *o)
{
	char fields[8192], *buf = malloc(DATA_CHUNK);
	int fd, r = 0;

	if (!buf)
		return cli_seterr(o->err, sizeof(o->err), -ENOMEM, "%s: %s", remote, strerror(ENOMEM));
	if (fields_for(fields, sizeof(fields), "tar_put", remote, NULL, 0, 0)) {
		free(buf);
		return cli_seterr(o->err, sizeof(o->err), -ENAMETOOLONG, "%s: %s", remote, strerror(ENAMETOOLONG));
	}
	fd = tar_open(a, fields, remote, 0, o);
	if (fd < 0) {
		free(buf);
		return fd;
	}
	for (;;) {
		ssize_t n = read(in_fd, buf, DATA_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = cli_seterr(o->err, sizeof(o->err), -errno, "stdin: %s", strerror(errno));
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
		int k = put_result(fd, remote, o);

		r = k ? k : r;
	}
	close(fd);
	free(buf);
	return r;
}

int cp_tar_stdout(const struct sandbox_addr *a, const char *remote, const char *arcname, int follow, int out_fd,
		  struct cp_opts *o)
{
	char fields[8192];
	int fd, r;

	if (isatty(out_fd))
		return cli_seterr(o->err, sizeof(o->err), -EINVAL, "not writing a tar archive to a terminal (pipe it: "
				  "vmm cp %s - | tar -tf -)", remote);
	if (fields_for(fields, sizeof(fields), "tar_get", remote, arcname, follow, 0))
		return cli_seterr(o->err, sizeof(o->err), -ENAMETOOLONG, "%s: %s", remote, strerror(ENAMETOOLONG));
	fd = tar_open(a, fields, remote, 0, o);
	if (fd < 0)
		return fd;
	r = get_into(fd, NULL, out_fd, remote, o, 0);
	close(fd);
	return r;
}
