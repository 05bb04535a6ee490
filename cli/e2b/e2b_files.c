/* envd's /files (envd/envd.yaml) on the sandbox API's read and write
 * (docs/api.md): GET /files?path=P answers the file's bytes
 * (application/octet-stream, its Content-Length the API's stat), POST
 * /files takes multipart/form-data (a part named "file" per file, its
 * path the query's or, for several, each part's filename) or, with
 * Content-Type application/octet-stream, the body as the file at the
 * query's path; each is written atomically (the API's write) with its
 * parent directories, and the answer lists them as EntryInfo. Errors are
 * envd's: 404 for a missing file, 400 for a bad request, JSON
 * {"code","message"}. */
#include "cli/e2b/e2b_priv.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static int status_for(int eno)
{
	switch (eno < 0 ? -eno : eno) {
	case ENOENT:
	case ENOTDIR:
		return 404;
	case EISDIR:
	case EINVAL:
	case ENAMETOOLONG:
		return 400;
	case EACCES:
	case EPERM:
		return 403;
	case ENOSPC:
	case EDQUOT:
		return 507;
	default:
		return 500;
	}
}

/* The user the query names (envd's username), for the API's "user". */
static void user_field(const struct e2b_req *r, struct json_writer *w)
{
	char user[128];

	if (e2b_query_get(r->query, "username", user, sizeof(user)) == 0 && user[0]) {
		jw_key(w, "user");
		jw_str(w, user);
	}
}

static int download(struct e2b_envd *e)
{
	char q[PATH_MAX], path[PATH_MAX], fields[PATH_MAX + 64], res[2048], arena_buf[4096], *buf;
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *st;
	struct json_writer w;
	struct api_error ae;
	const char *jerr, *t = "";
	int64_t size = -1;
	int fd, r;

	if (e2b_query_get(e->r->query, "path", q, sizeof(q)) || e2b_abs_path(q, path, sizeof(path)))
		return e2b_send_error(e->c, 400, "path: the file to read");
	e2b_op_fields(&w, fields, sizeof(fields), "read", path);
	if (!jw_done(&w))
		return e2b_send_error(e->c, 400, "path: too long");
	fd = api_open_v(&e->addr, 1, fields);
	if (fd < 0)
		return e2b_send_error(e->c, 502, "the sandbox API: %s", strerror(-fd));
	r = api_result(fd, res, sizeof(res), &ae);
	if (r) {
		close(fd);
		if (r == -1)
			return e2b_send_error(e->c, status_for(ae.eno), "%s: %s", path, ae.message[0] ? ae.message : strerror(ae.eno));
		return e2b_send_error(e->c, 502, "%s: the sandbox API failed", path);
	}
	st = json_parse(res, strlen(res), &a, &jerr);
	if (st)
		json_get_int(st, "size", &size), json_get_str(st, "type", &t);
	if (strcmp(t, "file") || size < 0) {
		close(fd);
		return e2b_send_error(e->c, 400, "%s: not a regular file", path);
	}
	{
		char head[256];
		int n = snprintf(head, sizeof(head),
				 "HTTP/1.1 200 OK\r\nServer: vmm\r\nContent-Type: application/octet-stream\r\n"
				 "Content-Length: %lld\r\n%s\r\n",
				 (long long)size, e->c->keep_alive ? "" : "Connection: close\r\n");

		r = send(e->c->fd, head, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -EPIPE;
	}
	buf = malloc(FRAME_MAX);
	while (!r && buf) {
		uint8_t type;
		size_t len;

		if (frame_read(fd, &type, buf, FRAME_MAX, &len) || (type != F_DATA && type != F_END)) {
			r = -EPIPE; /* midway: the connection is closed, the client sees it short */
			break;
		}
		if (type == F_END)
			break;
		if ((int64_t)len > size) {
			r = -EPIPE; /* the file grew: more than the Content-Length sent */
			break;
		}
		size -= (int64_t)len;
		for (size_t off = 0; off < len && !r;) {
			ssize_t k = send(e->c->fd, buf + off, len - off, MSG_NOSIGNAL);

			if (k <= 0)
				r = -EPIPE;
			else
				off += (size_t)k;
		}
	}
	if (!r && size != 0)
		r = -EPIPE; /* the file shrank meanwhile */
	free(buf);
	close(fd);
	return buf ? r : -ENOMEM;
}

/* Writes data[0..len) as path. 0 or -errno (err says why). */
static int write_file(struct e2b_envd *e, const char *path, const char *data, size_t len, char *err, size_t errlen)
{
	char fields[PATH_MAX + 256], res[1024];
	struct json_writer w;
	struct api_error ae;
	size_t off = 0;
	int fd, r = 0;

	e2b_op_fields(&w, fields, sizeof(fields), "write", path);
	jw_key(&w, "parents");
	jw_bool(&w, 1);
	user_field(e->r, &w);
	if (!jw_done(&w)) {
		snprintf(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	fd = api_open_v(&e->addr, 2, fields);
	if (fd < 0) {
		snprintf(err, errlen, "the sandbox API: %s", strerror(-fd));
		return fd;
	}
	while (!r && off < len) {
		size_t n = len - off > DATA_CHUNK ? DATA_CHUNK : len - off;

		if (frame_write(fd, F_DATA, data + off, n))
			r = -EPIPE;
		off += n;
	}
	if (!r && frame_write(fd, F_END, NULL, 0))
		r = -EPIPE;
	/* an early ERROR (a directory in the way) is read here too */
	{
		int q = api_result(fd, res, sizeof(res), &ae);

		if (q == -1) {
			snprintf(err, errlen, "%s", ae.message[0] ? ae.message : strerror(ae.eno));
			r = -ae.eno;
		} else if (q) {
			snprintf(err, errlen, "the sandbox API failed");
			r = -EPIPE;
		}
	}
	close(fd);
	return r;
}

static void written(struct json_writer *w, const char *path)
{
	const char *b = strrchr(path, '/');

	jw_obj(w);
	jw_key(w, "name");
	jw_str(w, b ? b + 1 : path);
	jw_key(w, "type");
	jw_str(w, "file");
	jw_key(w, "path");
	jw_str(w, path);
	jw_obj_end(w);
}

static int upload(struct e2b_envd *e)
{
	char q[PATH_MAX] = "", path[PATH_MAX], ct[512] = "", boundary[80], err[512], out[65536];
	const struct e2b_req *r = e->r;
	struct json_writer w;
	struct mp_part part;
	size_t pos = 0;
	int has_q = e2b_query_get(r->query, "path", q, sizeof(q)) == 0 && q[0], k, n = 0;

	e2b_req_header(r, "Content-Type", ct, sizeof(ct));
	jw_init(&w, out, sizeof(out));
	jw_arr(&w);
	if (!strncasecmp(ct, "application/octet-stream", 24)) {
		if (!has_q || e2b_abs_path(q, path, sizeof(path)))
			return e2b_send_error(e->c, 400, "path: where to write the file");
		if ((k = write_file(e, path, r->body ? r->body : "", r->body_len, err, sizeof(err))))
			return e2b_send_error(e->c, status_for(k), "%s: %s", path, err);
		written(&w, path);
		jw_arr_end(&w);
		return e2b_send_json(e->c, 200, &w);
	}
	if (mp_boundary(ct, boundary, sizeof(boundary)))
		return e2b_send_error(e->c, 400, "Content-Type: multipart/form-data with a boundary");
	while ((k = mp_next(r->body ? r->body : "", r->body_len, boundary, &pos, &part)) == 1) {
		if (strcmp(part.name, "file"))
			continue;
		if (e2b_abs_path(has_q ? q : part.filename, path, sizeof(path)) || (!has_q && !part.filename[0]))
			return e2b_send_error(e->c, 400, "each file needs a path (the query's or its filename)");
		if (has_q && n)
			return e2b_send_error(e->c, 400, "several files for one path");
		if ((k = write_file(e, path, part.data, part.len, err, sizeof(err))))
			return e2b_send_error(e->c, status_for(k), "%s: %s", path, err);
		written(&w, path);
		n++;
	}
	if (k < 0)
		return e2b_send_error(e->c, 400, "a malformed multipart body");
	jw_arr_end(&w);
	return e2b_send_json(e->c, 200, &w);
}

int e2b_files(struct e2b_envd *e)
{
	if (!strcmp(e->r->method, "GET"))
		return download(e);
	if (!strcmp(e->r->method, "POST"))
		return upload(e);
	return e2b_send_error(e->c, 405, "%s /files: GET or POST", e->r->method);
}
