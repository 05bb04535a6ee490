/* The sandbox API's directory streams (docs/api.md, version 2): tar_get
 * archives a guest path into DATA frames, tar_put extracts the DATA
 * frames it is sent under a guest directory (vmm/wire/tar.h does the
 * format and the checks). Each runs in the connection's own process. */
#include "guest-init/ops.h"
#include "vmm/wire/proto.h"
#include "vmm/wire/tar.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int frame_out(void *ctx, const void *buf, size_t len)
{
	return frame_write(*(int *)ctx, F_DATA, buf, len) ? -EPIPE : 0;
}

void tar_get(int fd, const struct api_request *r)
{
	struct tar_w w = { .out = frame_out, .ctx = &fd, .follow = r->follow_links,
			   .lim = { .max_depth = (unsigned)r->max_depth, .max_entries = (uint64_t)r->max_entries } };
	const char *name = r->arcname, *base = strrchr(r->path, '/') + 1;
	char meta[NAME_MAX + 64];
	struct json_writer jw;
	struct stat st;
	int e;

	if (stat(r->path, &st) < 0 && lstat(r->path, &st) < 0) {
		api_send_error(fd, errno, NULL);
		return;
	}
	if (!name)
		name = S_ISDIR(st.st_mode) || !*base ? "." : base;
	jw_init(&jw, meta, sizeof(meta));
	jw_obj(&jw);
	jw_key(&jw, "name");
	jw_str(&jw, name);
	jw_obj_end(&jw);
	/* the path as named is followed (a link to a directory archives the
	 * directory), what is under it as follow says */
	if (S_ISDIR(st.st_mode)) {
		int dfd = open(r->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd < 0) {
			api_send_error(fd, errno, NULL);
			return;
		}
		api_send_json(fd, F_RESULT, &jw);
		e = tar_w_path(&w, dfd, ".", name);
		close(dfd);
	} else {
		api_send_json(fd, F_RESULT, &jw);
		e = tar_w_path(&w, AT_FDCWD, r->path, name);
	}
	if (!e)
		e = tar_w_finish(&w);
	if (e) {
		if (e != -EPIPE)
			api_send_error(fd, -e, w.err);
		return;
	}
	frame_write(fd, F_END, NULL, 0);
}

void tar_put(int fd, const struct api_request *r)
{
	static char buf[FRAME_MAX];
	struct tar_limits lim = { .max_depth = (unsigned)r->max_depth, .max_entries = (uint64_t)r->max_entries };
	char meta[256];
	struct json_writer jw;
	struct tar_x x;
	int dfd, e;

	if (r->owner && geteuid() != 0) {
		api_send_error(fd, EPERM, "\"owner\" needs the API to run as root");
		return;
	}
	if (r->parents && (e = files_mkdir_p(r->path, 0755)) < 0) {
		api_send_error(fd, -e, "cannot create the destination directory");
		return;
	}
	dfd = open(r->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		api_send_error(fd, errno, errno == ENOTDIR ? "the destination is not a directory" : NULL);
		return;
	}
	tar_x_init(&x, dfd, &lim);
	x.owner = r->owner;
	jw_init(&jw, meta, sizeof(meta));
	jw_obj(&jw);
	jw_key(&jw, "ready");
	jw_bool(&jw, 1);
	jw_obj_end(&jw);
	api_send_json(fd, F_RESULT, &jw);
	for (;;) {
		uint8_t type;
		size_t len;
		int rr = frame_read(fd, &type, buf, sizeof(buf), &len);

		if (rr || (type != F_DATA && type != F_END)) {
			/* the client went away or broke the protocol: the file
			 * being written is removed (tar_x_free) */
			if (rr != -1)
				api_send_error(fd, EPROTO, "expected DATA or END frames");
			goto out;
		}
		if (type == F_END)
			break;
		if ((e = tar_x_feed(&x, buf, len))) {
			api_send_error(fd, -e == EPROTO ? EPROTO : -e, x.err);
			goto out;
		}
	}
	if ((e = tar_x_finish(&x))) {
		api_send_error(fd, -e, x.err);
		goto out;
	}
	jw_init(&jw, meta, sizeof(meta));
	jw_obj(&jw);
	jw_key(&jw, "files");
	jw_int(&jw, (int64_t)x.st.files);
	jw_key(&jw, "dirs");
	jw_int(&jw, (int64_t)x.st.dirs);
	jw_key(&jw, "links");
	jw_int(&jw, (int64_t)x.st.links);
	jw_key(&jw, "skipped");
	jw_int(&jw, (int64_t)x.st.skipped);
	jw_key(&jw, "bytes");
	jw_int(&jw, (int64_t)x.st.bytes);
	jw_obj_end(&jw);
	api_send_json(fd, F_RESULT, &jw);
out:
	tar_x_free(&x);
	close(dfd);
}
