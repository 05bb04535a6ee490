/* vmm cp's transfers (cli/sandbox/cp_files.h): files, directory trees and
 * symbolic links between the host and a sandbox, over the sandbox API's
 * file operations (docs/api.md). */
#include "cli/sandbox/cp_files.h"
#include "vmm/base/log.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- where things land (docker cp's rules) --------------------------------- */

void cp_base(const char *src, char *base, size_t len, int *content)
{
	char tmp[PATH_MAX];
	size_t n;
	const char *b;

	snprintf(tmp, sizeof(tmp), "%s", src);
	n = strlen(tmp);
	*content = 0;
	for (;;) {
		while (n > 1 && tmp[n - 1] == '/')
			tmp[--n] = '\0';
		if (n >= 2 && tmp[n - 1] == '.' && tmp[n - 2] == '/') {
			*content = 1; /* "SRC/.": the directory's content */
			tmp[--n] = '\0';
			continue;
		}
		break;
	}
	if (!strcmp(tmp, ".") || !strcmp(tmp, "/"))
		*content = 1;
	b = strrchr(tmp, '/');
	snprintf(base, len, "%s", b && b[1] ? b + 1 : tmp);
}

/* src without its trailing "/." markers and slashes ("/" stays "/"). */
void strip_content(const char *src, char *out, size_t len)
{
	size_t n;

	snprintf(out, len, "%s", src);
	n = strlen(out);
	for (;;) {
		while (n > 1 && out[n - 1] == '/')
			out[--n] = '\0';
		if (n >= 2 && out[n - 1] == '.' && out[n - 2] == '/') {
			out[--n] = '\0';
			continue;
		}
		break;
	}
}

int cp_where(const char *src, int src_dir, const char *dst, int dst_exists, int dst_is_dir, int *into)
{
	char base[NAME_MAX + 1];
	int content, slash = dst[0] && dst[strlen(dst) - 1] == '/';

	cp_base(src, base, sizeof(base), &content);
	*into = 0;
	if (dst_exists && dst_is_dir) {
		*into = !(src_dir && content);
		return 0;
	}
	if (dst_exists)
		return src_dir || slash ? -ENOTDIR : 0;
	return slash && !src_dir ? -ENOENT : 0;
}

/* ---- bytes and rate ------------------------------------------------------------- */

/* n more bytes copied: the status line at most 4 times a second, from
 * one second on (a quick copy shows nothing). */
void cp_count(struct cp_opts *o, uint64_t n)
{
	uint64_t now = log_now_ns(), dt = now - o->prog.t0_ns;
	char b[32], r[32], line[96];

	o->bytes += n;
	if (o->prog.fd < 0 || dt < 1000000000ull || now - o->last_ns < 250000000ull)
		return;
	o->last_ns = now;
	progress_bytes(b, sizeof(b), o->bytes);
	progress_bytes(r, sizeof(r), (uint64_t)((double)o->bytes * 1e9 / (double)dt));
	snprintf(line, sizeof(line), "vmm cp: %s copied, %s/s", b, r);
	progress_show(&o->prog, line);
}

/* ---- requests --------------------------------------------------------------- */

static int remote_op_v(const struct sandbox_addr *a, int version, const char *fields, const char *what, char *out,
		       size_t outsize, struct cp_opts *o)
{
	char buf[4096];
	struct api_error e;
	int fd = api_open_v(a, version, fields), r;

	if (fd < 0) {
		api_unreachable(o->err, sizeof(o->err), a, fd);
		return fd;
	}
	r = api_result(fd, out ? out : buf, out ? outsize : sizeof(buf), &e);
	close(fd);
	if (r == -1) {
		api_error_msg(o->err, sizeof(o->err), what, &e);
		return -e.eno;
	}
	return r == 0 ? 0 : -EPROTO;
}

static int remote_op(const struct sandbox_addr *a, const char *fields, const char *what, char *out, size_t outsize,
		     struct cp_opts *o)
{
	return remote_op_v(a, 1, fields, what, out, outsize, o);
}

/* The sandbox's stat of path: its type ("file", "dir", "symlink", ...;
 * "" when it is not there) and mode. follow: what a symlink points to
 * (version 2, asked only for a symlink, so an older guest-init serves
 * everything else). 0 or -errno (printed). */
static int remote_stat(const struct sandbox_addr *a, const char *path, int follow, char *type, size_t tlen,
		       int64_t *mode, struct cp_opts *o)
{
	char arena_buf[8192];
	char fields[PATH_MAX + 96], res[1024];
	struct json_writer w;
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j;
	const char *t, *jerr;
	struct api_error e;
	int fd, r;

	for (int v = 1; v <= 1 + !!follow; v++) {
		jw_init(&w, fields, sizeof(fields));
		jw_key(&w, "op");
		jw_str(&w, "stat");
		jw_key(&w, "path");
		jw_str(&w, path);
		if (v == 2) {
			jw_key(&w, "follow");
			jw_bool(&w, 1);
		}
		fd = api_open_v(a, v, jw_done(&w) ? fields : "");
		if (fd < 0) {
			api_unreachable(o->err, sizeof(o->err), a, fd);
			return fd;
		}
		r = api_result(fd, res, sizeof(res), &e);
		close(fd);
		if (r == -1 && e.eno == ENOENT) {
			type[0] = '\0';
			return 0;
		}
		if (r == -1) {
			api_error_msg(o->err, sizeof(o->err), path, &e);
			return -e.eno;
		}
		ar.used = 0;
		j = r == 0 ? json_parse(res, strlen(res), &ar, &jerr) : NULL;
		if (!j || json_get_str(j, "type", &t)) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: the sandbox sent a malformed answer", path);
			return -EPROTO;
		}
		snprintf(type, tlen, "%s", t);
		*mode = 0644;
		json_get_int(j, "mode", mode);
		if (strcmp(type, "symlink"))
			break;
	}
	return 0;
}

/* ---- into the sandbox ----------------------------------------------------------- */

static int put_file(const struct sandbox_addr *a, const char *local, const char *remote, mode_t mode,
		    struct cp_opts *o)
{
	static uint8_t buf[DATA_CHUNK];
	char fields[PATH_MAX + 128], res[512];
	struct json_writer w;
	struct api_error e;
	int fd, in, r;

	in = open(local, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local, strerror(errno));
		return r;
	}
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "write");
	jw_key(&w, "path");
	jw_str(&w, remote);
	jw_key(&w, "mode");
	jw_int(&w, mode & 07777);
	jw_key(&w, "parents");
	jw_bool(&w, 1);
	fd = api_open(a, jw_done(&w) ? fields : "");
	if (fd < 0) {
		close(in);
		api_unreachable(o->err, sizeof(o->err), a, fd);
		return fd;
	}
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local, strerror(errno));
			close(in);
			close(fd); /* the guest drops the half-written temporary */
			return r;
		}
		if (n == 0)
			break;
		if (frame_write(fd, F_DATA, buf, (size_t)n))
			break;
		cp_count(o, (uint64_t)n);
	}
	close(in);
	frame_write(fd, F_END, NULL, 0);
	r = api_result(fd, res, sizeof(res), &e);
	close(fd);
	if (r == -1) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s (%s)", remote, e.message[0] ? e.message : strerror(e.eno), e.name);
		return -e.eno;
	}
	return r == 0 ? 0 : -EPROTO;
}

/* The host symlink local as a symlink at remote (version 2 "symlink"). */
static int put_link(const struct sandbox_addr *a, const char *local, const char *remote, struct cp_opts *o)
{
	char target[PATH_MAX], fields[2 * PATH_MAX + 128];
	struct json_writer w;
	ssize_t n = readlink(local, target, sizeof(target) - 1);
	int r;

	if (n < 0) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local, strerror(errno));
		return r;
	}
	target[n] = '\0';
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "symlink");
	jw_key(&w, "path");
	jw_str(&w, remote);
	jw_key(&w, "target");
	jw_str(&w, target);
	jw_key(&w, "parents");
	jw_bool(&w, 1);
	return remote_op_v(a, 2, jw_done(&w) ? fields : "", remote, NULL, 0, o);
}

static int join(char *out, size_t size, const char *dir, const char *name)
{
	int n = snprintf(out, size, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* local (a file, symlink or directory tree) as remote. Symlinks are made
 * as symlinks, or with -L copied as what they point to. */
static int copy_in(const struct sandbox_addr *a, const char *local, const char *remote, struct cp_opts *o)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int r = 0;

	if ((o->follow ? stat(local, &st) : lstat(local, &st)) < 0) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local, strerror(errno));
		return r;
	}
	if (S_ISLNK(st.st_mode))
		return put_link(a, local, remote, o);
	if (S_ISREG(st.st_mode))
		return put_file(a, local, remote, st.st_mode, o);
	if (!S_ISDIR(st.st_mode)) {
		log_warn("cp: %s: not a regular file, directory or symlink; skipped", local);
		return 0;
	}
	{
		char fields[PATH_MAX + 128];
		struct json_writer w;

		jw_init(&w, fields, sizeof(fields));
		jw_key(&w, "op");
		jw_str(&w, "mkdir");
		jw_key(&w, "path");
		jw_str(&w, remote);
		jw_key(&w, "parents");
		jw_bool(&w, 1);
		jw_key(&w, "mode");
		jw_int(&w, st.st_mode & 07777);
		r = remote_op(a, jw_done(&w) ? fields : "", remote, NULL, 0, o);
		if (r)
			return r;
	}
	d = opendir(local);
	if (!d) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local, strerror(errno));
		return r;
	}
	while ((de = readdir(d)) && !r) {
		char l[PATH_MAX], rm[PATH_MAX];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (join(l, sizeof(l), local, de->d_name) || join(rm, sizeof(rm), remote, de->d_name)) {
			r = -ENAMETOOLONG;
			cli_seterr(o->err, sizeof(o->err), 0, "%s/%s: %s", local, de->d_name, strerror(ENAMETOOLONG));
			break;
		}
		r = copy_in(a, l, rm, o);
	}
	closedir(d);
	return r;
}

int cp_in(const struct sandbox_addr *a, const char *local, const char *remote, struct cp_opts *o)
{
	char type[16], base[NAME_MAX + 1], dst[PATH_MAX];
	struct stat st;
	int64_t mode;
	int r, content, into;

	if ((o->follow ? stat(local, &st) : lstat(local, &st)) < 0) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local, strerror(errno));
		return r;
	}
	r = remote_stat(a, remote, 1, type, sizeof(type), &mode, o);
	if (r)
		return r;
	r = cp_where(local, S_ISDIR(st.st_mode), remote, type[0] != '\0', !strcmp(type, "dir"), &into);
	if (r) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", remote,
			r == -ENOENT ? "no such directory in the sandbox (a destination ending in '/' must be one)"
			: S_ISDIR(st.st_mode) ? "not a directory: cannot copy a directory onto it"
					       : "not a directory");
		return r;
	}
	cp_base(local, base, sizeof(base), &content);
	snprintf(dst, sizeof(dst), "%s", remote);
	if (into && join(dst, sizeof(dst), remote, base)) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s/%s: %s", remote, base, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	{
		char src[PATH_MAX];

		strip_content(local, src, sizeof(src));
		if (S_ISDIR(st.st_mode)) {
			/* one tar stream (tar_put); file by file for an older guest-init */
			r = cp_tar_in(a, src, dst, o);
			if (r != CP_TAR_OLD)
				return r;
		}
		return copy_in(a, src, dst, o);
	}
}

/* ---- copying out of the sandbox ------------------------------------------- */

/* The guest chooses every name, type and mode below: names are checked
 * (one path component, not "." or ".."), a mode keeps its permission
 * bits only and passes the umask, and the host side is written with
 * openat/mkdirat relative to directory descriptors opened O_NOFOLLOW, so
 * nothing is written outside the destination or through a symlink in it.
 * The walk is iterative (a stack on the heap): a guest tree of any depth
 * is at most an ENAMETOOLONG when its path outgrows PATH_MAX. */

#define COPY_MAX_ENTRIES (1u << 20) /* names in one directory */

struct copy_ent {
	char *name;
	char type[8]; /* "file", "dir", or another type (skipped) */
	mode_t mode;
};

struct copy_dir {
	char *remote;
	int fd;         /* the host directory; -1 while a subdirectory is open */
	dev_t dev;      /* its identity, to check ".." on the way back up */
	ino_t ino;
	mode_t mode;    /* given to it when done, if this copy created it */
	int created;
	struct copy_ent *ents;
	size_t n, next;
};

static int guest_name_ok(const struct json *nm)
{
	return nm && nm->type == JSON_STR && nm->u.str.len && nm->u.str.len <= NAME_MAX &&
	       strlen(nm->u.str.s) == nm->u.str.len && !strchr(nm->u.str.s, '/') && strcmp(nm->u.str.s, ".") &&
	       strcmp(nm->u.str.s, "..");
}

static int ent_cmp(const void *x, const void *y)
{
	return strcmp(((const struct copy_ent *)x)->name, ((const struct copy_ent *)y)->name);
}

static void free_ents(struct copy_ent *e, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(e[i].name);
	free(e);
}

/* The guest's listing of remote, checked: names one component each, no
 * name twice. Sorted by name. */
static int list_remote(const struct sandbox_addr *a, const char *remote, char *res, char *arena, size_t arena_size,
		       struct copy_ent **out, size_t *nout, struct cp_opts *o)
{
	char fields[PATH_MAX + 64];
	struct json_writer w;
	struct copy_ent *ents = NULL;
	size_t n = 0, i;
	int fd, r = 0, more = 1;
	struct api_error e;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "list");
	jw_key(&w, "path");
	jw_str(&w, remote);
	fd = api_open(a, jw_done(&w) ? fields : "");
	if (fd < 0) {
		api_unreachable(o->err, sizeof(o->err), a, fd);
		return fd;
	}
	while (more && r == 0) {
		struct json_arena ar = { arena, arena_size, 0 };
		const struct json *j, *ents_j, *ent, *nm;
		const char *jerr, *type;

		r = api_result(fd, res, FRAME_MAX + 1, &e);
		if (r) {
			if (r == -1)
				api_error_msg(o->err, sizeof(o->err), remote, &e);
			r = r == -1 ? -e.eno : -EPROTO;
			break;
		}
		j = json_parse(res, strlen(res), &ar, &jerr);
		ents_j = j ? json_get(j, "entries") : NULL;
		if (!ents_j || ents_j->type != JSON_ARR || json_get_bool(j, "more", &more)) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: the sandbox sent a malformed listing", remote);
			r = -EPROTO;
			break;
		}
		for (ent = ents_j->u.kids.first; ent && !r; ent = ent->next) {
			struct copy_ent *nn;
			int64_t mode = 0;

			nm = ent->type == JSON_OBJ ? json_get(ent, "name") : NULL;
			if (!guest_name_ok(nm) || json_get_str(ent, "type", &type)) {
				cli_seterr(o->err, sizeof(o->err), 0, "%s: the sandbox listed an invalid name (empty, \".\", \"..\", "
						"or with '/'); nothing is copied under such a name", remote);
				r = -EPROTO;
				break;
			}
			if (n == COPY_MAX_ENTRIES) {
				cli_seterr(o->err, sizeof(o->err), 0, "%s: more than %u entries", remote, COPY_MAX_ENTRIES);
				r = -E2BIG;
				break;
			}
			json_get_int(ent, "mode", &mode);
			nn = realloc(ents, (n + 1) * sizeof(*ents));
			if (!nn) {
				r = -ENOMEM;
				break;
			}
			ents = nn;
			ents[n].name = strdup(nm->u.str.s);
			if (!ents[n].name) {
				r = -ENOMEM;
				break;
			}
			snprintf(ents[n].type, sizeof(ents[n].type), "%s", type);
			ents[n].mode = (mode_t)(mode & 0777);
			n++;
		}
	}
	close(fd);
	if (!r && n) {
		qsort(ents, n, sizeof(*ents), ent_cmp);
		for (i = 1; i < n && !r; i++) {
			if (!strcmp(ents[i - 1].name, ents[i].name)) {
				cli_seterr(o->err, sizeof(o->err), 0, "%s: the sandbox listed %s twice", remote, ents[i].name);
				r = -EPROTO;
			}
		}
	}
	if (r) {
		free_ents(ents, n);
		return r;
	}
	*out = ents;
	*nout = n;
	return 0;
}

/* remote's content into dfd/name, through a temporary beside it renamed
 * over it (atomic on the host too; a symlink at name is replaced, never
 * followed). mode: permission bits only, and the umask applies. */
static int get_file_buf(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, mode_t mode,
			struct cp_opts *o, uint8_t *buf)
{
	char fields[PATH_MAX + 64], tmp[64];
	struct json_writer w;
	struct api_error e;
	int fd, out = -1, r;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "read");
	jw_key(&w, "path");
	jw_str(&w, remote);
	fd = api_open(a, jw_done(&w) ? fields : "");
	if (fd < 0) {
		api_unreachable(o->err, sizeof(o->err), a, fd);
		return fd;
	}
	r = api_result(fd, (char *)buf, FRAME_MAX + 1, &e);
	if (r) {
		close(fd);
		if (r == -1)
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s (%s)", remote, e.message[0] ? e.message : strerror(e.eno), e.name);
		return r == -1 ? -e.eno : -EPROTO;
	}
	snprintf(tmp, sizeof(tmp), ".vmm-partial.%ld", (long)getpid());
	mode &= 0777;
	for (int tries = 0; out < 0 && tries < 2; tries++) {
		out = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode ? mode : 0644);
		if (out < 0 && (errno != EEXIST || unlinkat(dfd, tmp, 0) < 0))
			break; /* a leftover of an earlier cp with this pid is removed once */
	}
	if (out < 0) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", name, strerror(errno));
		close(fd);
		return r;
	}
	for (;;) {
		uint8_t type;
		size_t len;

		if (frame_read(fd, &type, buf, FRAME_MAX, &len)) {
			r = -EPIPE;
			cli_seterr(o->err, sizeof(o->err), 0, "%s: the sandbox closed the connection midway", remote);
			break;
		}
		if (type == F_END)
			break;
		if (type == F_ERROR) {
			buf[len] = '\0';
			api_parse_error((const char *)buf, len, &e);
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", remote, e.message);
			r = -e.eno;
			break;
		}
		if (type == F_DATA && write_full(out, buf, len)) {
			r = -errno;
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", name, strerror(errno));
			break;
		}
		if (type == F_DATA)
			cp_count(o, len);
	}
	close(fd);
	if (r == 0 && (fsync(out) < 0 || close(out) < 0 || renameat(dfd, tmp, dfd, name) < 0)) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", name, strerror(errno));
		unlinkat(dfd, tmp, 0);
		return r;
	}
	if (r) {
		close(out);
		unlinkat(dfd, tmp, 0);
	}
	return r;
}

/* The frame buffer (1 MiB) on the heap, not in every VMM's bss, where a
 * host with transparent huge pages "always" backs a touched 2 MiB stretch
 * with a huge page. */
static int get_file(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, mode_t mode,
		    struct cp_opts *o)
{
	uint8_t *buf = malloc(FRAME_MAX + 1);
	int r;

	if (!buf)
		return -ENOMEM;
	r = get_file_buf(a, remote, dfd, name, mode, o, buf);
	free(buf);
	return r;
}

/* The guest's symlink remote as a symlink dfd/name with the same target
 * (version 2 "readlink"): made beside it and renamed over it, so a file
 * or link there is replaced, never followed. The link is only created:
 * this copy never follows a link below the destination. */
static int get_link(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, struct cp_opts *o)
{
	char arena_buf[2 * PATH_MAX + 1024];
	char fields[PATH_MAX + 64], res[2 * PATH_MAX + 64], tmp[64];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	struct json_writer w;
	const struct json *j;
	const char *target, *jerr;
	int r;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "readlink");
	jw_key(&w, "path");
	jw_str(&w, remote);
	r = remote_op_v(a, 2, jw_done(&w) ? fields : "", remote, res, sizeof(res), o);
	if (r)
		return r;
	j = json_parse(res, strlen(res), &ar, &jerr);
	if (!j || json_get_str(j, "target", &target) || !target[0] || strlen(target) >= PATH_MAX) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: the sandbox sent a malformed link target", remote);
		return -EPROTO;
	}
	snprintf(tmp, sizeof(tmp), ".vmm-partial.%ld", (long)getpid());
	unlinkat(dfd, tmp, 0); /* a leftover of an earlier cp with this pid */
	if (symlinkat(target, dfd, tmp) < 0 || renameat(dfd, tmp, dfd, name) < 0) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", name, strerror(errno));
		unlinkat(dfd, tmp, 0);
		return r;
	}
	return 0;
}

static char *join_remote(const char *dir, const char *name)
{
	char *p;

	if (strlen(dir) + strlen(name) + 2 > PATH_MAX) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if (asprintf(&p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name) < 0) {
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

/* Opens (creating it 0700 if missing) the directory name in dfd, never
 * through a symlink unless follow (the destination the user named); d->fd,
 * identity and created set. */
static int enter_dir(int dfd, const char *name, int follow, struct copy_dir *d)
{
	struct stat st;

	d->created = mkdirat(dfd, name, 0700) == 0;
	if (!d->created && errno != EEXIST)
		return -errno;
	d->fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | (follow ? 0 : O_NOFOLLOW) | O_CLOEXEC);
	if (d->fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno; /* a symlink there is not followed */
	if (fstat(d->fd, &st) < 0)
		return -errno;
	d->dev = st.st_dev;
	d->ino = st.st_ino;
	return 0;
}

static void free_stack(struct copy_dir *stack, size_t depth)
{
	while (depth--) {
		if (stack[depth].fd >= 0)
			close(stack[depth].fd);
		free(stack[depth].remote);
		free_ents(stack[depth].ents, stack[depth].n);
	}
	free(stack);
}

#define TREE_ARENA (FRAME_MAX * 3)

/* Copies the directory remote into the host directory in dfd/name. */
static int tree_out(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, int follow,
		    mode_t mode, mode_t umask_bits, char *res, struct cp_opts *o, char *arena)
{
	struct copy_dir *stack = NULL, *top;
	size_t depth = 0, cap = 0;
	int r = 0;

	stack = calloc(1, sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	cap = depth = 1;
	stack[0].fd = -1;
	stack[0].mode = mode;
	stack[0].remote = strdup(remote);
	r = stack[0].remote ? enter_dir(dfd, name, follow, &stack[0]) : -ENOMEM;
	if (r)
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", name, strerror(-r));
	else
		r = list_remote(a, remote, res, arena, TREE_ARENA, &stack[0].ents, &stack[0].n, o);
	while (r == 0) {
		struct copy_ent *e;
		char *rm;

		top = &stack[depth - 1];
		if (top->next == top->n) {
			/* done with it: its mode (permission bits, umask), then back up */
			if (top->created && fchmod(top->fd, top->mode & 0777 & ~umask_bits) < 0) {
				r = -errno;
				break;
			}
			if (depth == 1)
				break;
			{
				struct copy_dir *up = &stack[depth - 2];
				struct stat st;
				int pfd = openat(top->fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

				if (pfd < 0 || fstat(pfd, &st) < 0 || st.st_dev != up->dev || st.st_ino != up->ino) {
					cli_seterr(o->err, sizeof(o->err), 0, "%s: the destination moved during the copy", top->remote);
					if (pfd >= 0)
						close(pfd);
					r = -ESTALE;
					break;
				}
				up->fd = pfd;
			}
			close(top->fd);
			free(top->remote);
			free_ents(top->ents, top->n);
			depth--;
			continue;
		}
		e = &top->ents[top->next++];
		rm = join_remote(top->remote, e->name);
		if (!rm) {
			r = -errno;
			cli_seterr(o->err, sizeof(o->err), 0, "%s/%s: %s", top->remote, e->name, strerror(errno));
			break;
		}
		if (!strcmp(e->type, "symlink") && o->follow) {
			/* -L: what it points to (a loop ends in ENAMETOOLONG) */
			int64_t m = 0;

			r = remote_stat(a, rm, 1, e->type, sizeof(e->type), &m, o);
			if (r) {
				free(rm);
				break;
			}
			e->mode = (mode_t)(m & 0777);
			if (!e->type[0]) {
				log_warn("cp: %s: a dangling symlink; skipped", rm);
				free(rm);
				continue;
			}
		}
		if (!strcmp(e->type, "symlink")) {
			r = get_link(a, rm, top->fd, e->name, o);
			free(rm);
			continue;
		}
		if (!strcmp(e->type, "file")) {
			r = get_file(a, rm, top->fd, e->name, e->mode, o);
			free(rm);
			continue;
		}
		if (strcmp(e->type, "dir")) {
			log_warn("cp: %s: a %s, not a file, directory or symlink; skipped", rm, e->type);
			free(rm);
			continue;
		}
		if (depth == cap) {
			struct copy_dir *ns = realloc(stack, 2 * cap * sizeof(*stack));

			if (!ns) {
				free(rm);
				r = -ENOMEM;
				break;
			}
			stack = ns;
			cap *= 2;
			top = &stack[depth - 1];
		}
		memset(&stack[depth], 0, sizeof(stack[depth]));
		stack[depth].fd = -1;
		stack[depth].remote = rm;
		stack[depth].mode = e->mode;
		r = enter_dir(top->fd, e->name, 0, &stack[depth]);
		depth++;
		if (r) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", rm, strerror(-r));
			break;
		}
		r = list_remote(a, rm, res, arena, TREE_ARENA, &stack[depth - 1].ents, &stack[depth - 1].n, o);
		if (r)
			break;
		/* one descriptor open at a time: the parent is found again through ".." */
		close(top->fd);
		top->fd = -1;
	}
	free_stack(stack, depth);
	return r;
}

static int copy_tree_out(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, int follow,
			 mode_t mode, mode_t umask_bits, char *res, struct cp_opts *o)
{
	char *arena = malloc(TREE_ARENA); /* not in the bss (get_file) */
	int r;

	if (!arena)
		return -ENOMEM;
	r = tree_out(a, remote, dfd, name, follow, mode, umask_bits, res, o, arena);
	free(arena);
	return r;
}

int cp_out(const struct sandbox_addr *a, const char *remote_arg, const char *local, struct cp_opts *o)
{
	char remote[PATH_MAX], type[16], base[NAME_MAX + 1], *res = NULL, *dir = NULL, *name;
	int64_t mode = 0644;
	mode_t um = umask(0);
	struct stat st;
	int r, dfd = -1, content, into, exists;

	umask(um);
	strip_content(remote_arg, remote, sizeof(remote));
	r = remote_stat(a, remote, o->follow, type, sizeof(type), &mode, o);
	if (r)
		return r;
	if (!type[0]) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: No such file or directory in the sandbox (ENOENT)", remote);
		return -ENOENT;
	}
	if (strcmp(type, "file") && strcmp(type, "dir") && strcmp(type, "symlink")) {
		log_warn("cp: %s: a %s, not a file, directory or symlink; skipped", remote, type);
		return 0;
	}
	/* The destination the user named is followed if it is a link. */
	exists = stat(local, &st) == 0;
	if (!exists && errno != ENOENT) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local, strerror(errno));
		return r;
	}
	r = cp_where(remote_arg, !strcmp(type, "dir"), local, exists, exists && S_ISDIR(st.st_mode), &into);
	if (r) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local,
			r == -ENOENT ? "no such directory (a destination ending in '/' must be one)"
			: !strcmp(type, "dir") ? "not a directory: cannot copy a directory onto it" : "not a directory");
		return r;
	}
	cp_base(remote_arg, base, sizeof(base), &content);
	res = malloc(FRAME_MAX + 1);
	dir = strdup(local);
	if (!res || !dir) {
		r = -ENOMEM;
		goto out;
	}
	if (into) {
		/* DST is a directory: SRC's name in it */
		dfd = open(local, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		name = base;
	} else {
		/* DST itself: its parent directory and its last component,
		 * which is written relative to that */
		for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
			dir[n - 1] = '\0';
		name = strrchr(dir, '/');
		if (name) {
			*name++ = '\0';
			dfd = open(name == dir + 1 ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		} else {
			name = dir;
			dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		}
		if (!*name)
			name = "."; /* "/" */
	}
	if (dfd < 0) {
		r = -errno;
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", local, strerror(errno));
		goto out;
	}
	if (!strcmp(type, "symlink"))
		r = get_link(a, remote, dfd, name, o);
	else if (!strcmp(type, "file"))
		r = get_file(a, remote, dfd, name, (mode_t)(mode & 0777), o);
	else {
		/* DST itself, as the user named it, is followed if it is a
		 * link; DST/NAME is not (an earlier copy may have made it a
		 * link the guest chose). One tar stream (tar_get); file by
		 * file for an older guest-init. */
		r = cp_tar_out(a, remote, dfd, name, !into, 0777 & ~um, o);
		if (r == CP_TAR_OLD)
			r = copy_tree_out(a, remote, dfd, name, !into, (mode_t)(mode & 0777), um, res, o);
	}
out:
	if (dfd >= 0)
		close(dfd);
	free(dir);
	free(res);
	return r;
}
