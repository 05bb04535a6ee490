/* Sandbox API operations. Every connection runs in its own process (forked
 * by the init), so a crash or a slow client affects only that request. */
#define _GNU_SOURCE
#include "api.h"
#include "egress.h"
#include "proto.h"
#include "vsock.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* ---- parsing ------------------------------------------------------------- */

static const struct {
	const char *name;
	enum api_op op;
} ops[] = {
	{ "health", OP_HEALTH }, { "exec", OP_EXEC }, { "read", OP_READ }, { "write", OP_WRITE },
	{ "list", OP_LIST }, { "stat", OP_STAT }, { "mkdir", OP_MKDIR }, { "remove", OP_REMOVE },
	{ "rename", OP_RENAME }, { "ps", OP_PS }, { "kill", OP_KILL }, { "shutdown", OP_SHUTDOWN },
	{ "sync", OP_SYNC }, { "connect", OP_CONNECT },
};

static int fail(const char **err, int *eno, const char *msg, int e)
{
	*err = msg;
	*eno = e;
	return -1;
}

/* Constant-time comparison: the token is a secret. */
static int token_ok(const char *want, const char *got)
{
	size_t a = strlen(want), b = strlen(got), i;
	unsigned char d = (unsigned char)(a != b);

	for (i = 0; i < a; i++)
		d |= (unsigned char)(want[i] ^ (i < b ? got[i] : 0));
	return d == 0;
}

int api_peer_allowed(const void *addr, size_t len)
{
	struct sockaddr_vm vm;
	sa_family_t fam;

	if (!addr || len < sizeof(fam))
		return 0;
	memcpy(&fam, addr, sizeof(fam));
	if (fam == AF_UNIX)
		return 1;
	if (fam != AF_VSOCK || len < sizeof(vm))
		return 0;
	memcpy(&vm, addr, sizeof(vm));
	return vm.svm_cid == VMADDR_CID_HOST;
}

int api_token_parse(const unsigned char *win, size_t n, char *out, size_t outlen)
{
	const unsigned char *end = memchr(win, 0, n);
	size_t len, i;

	if (!end)
		return -1;
	len = (size_t)(end - win);
	if (len >= outlen)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned char c = win[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '.' || c == '-'))
			return -1;
	}
	memcpy(out, win, len);
	out[len] = '\0';
	return len ? 1 : 0;
}

static int str_array(const struct json *v, const char **out, unsigned max, unsigned *n)
{
	const struct json *e;

	*n = 0;
	if (v->type != JSON_ARR)
		return -1;
	for (e = v->u.kids.first; e; e = e->next) {
		if (e->type != JSON_STR || *n >= max)
			return -1;
		out[(*n)++] = e->u.str.s;
	}
	out[*n] = NULL;
	return 0;
}

static int valid_path(const char *p)
{
	return p && p[0] == '/' && strlen(p) < PATH_MAX;
}

int api_parse(const char *text, size_t len, const char *token, struct json_arena *a,
	      struct api_request *r, const char **err, int *eno)
{
	const char *jerr = NULL, *op = NULL, *tok = NULL;
	const struct json *root, *v;
	int64_t ver = 0;
	size_t i;

	memset(r, 0, sizeof(*r));
	r->mode = -1;
	root = json_parse(text, len, a, &jerr);
	if (!root)
		return fail(err, eno, jerr, EPROTO);
	if (root->type != JSON_OBJ)
		return fail(err, eno, "request is not a JSON object", EPROTO);
	if (json_get_int(root, "v", &ver) || ver != API_VERSION)
		return fail(err, eno, "unsupported API version (this server speaks v=1)", EPROTO);
	if (token && *token) {
		if (json_get_str(root, "token", &tok) || !token_ok(token, tok))
			return fail(err, eno, "missing or wrong access token", EACCES);
	}
	if (json_get_str(root, "op", &op))
		return fail(err, eno, "missing \"op\"", EINVAL);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(ops[i].name, op))
			break;
	if (i == sizeof(ops) / sizeof(ops[0]))
		return fail(err, eno, "unknown \"op\"", EINVAL);
	r->op = ops[i].op;

	switch (r->op) {
	case OP_EXEC:
		v = json_get(root, "argv");
		if (!v || str_array(v, r->argv, API_MAX_ARGS, &r->argc) || r->argc == 0 || !r->argv[0][0])
			return fail(err, eno, "\"argv\" must be a non-empty array of strings", EINVAL);
		v = json_get(root, "env");
		if (v) {
			if (str_array(v, r->env, API_MAX_ENV, &r->envc))
				return fail(err, eno, "\"env\" must be an array of \"NAME=value\" strings", EINVAL);
			for (i = 0; i < r->envc; i++)
				if (!strchr(r->env[i], '=') || r->env[i][0] == '=')
					return fail(err, eno, "\"env\" entries must be NAME=value", EINVAL);
		}
		if (json_get(root, "cwd") && (json_get_str(root, "cwd", &r->cwd) || !valid_path(r->cwd)))
			return fail(err, eno, "\"cwd\" must be an absolute path", EINVAL);
		if (json_get(root, "stdin") && json_get_bool(root, "stdin", &r->stdin_stream))
			return fail(err, eno, "\"stdin\" must be a boolean", EINVAL);
		v = json_get(root, "pty");
		if (v && v->type != JSON_NULL) {
			int64_t rows = 24, cols = 80;

			if (v->type != JSON_OBJ ||
			    (json_get(v, "rows") && json_get_int(v, "rows", &rows)) ||
			    (json_get(v, "cols") && json_get_int(v, "cols", &cols)) ||
			    rows < 1 || rows > 1000 || cols < 1 || cols > 1000)
				return fail(err, eno, "\"pty\" must be {\"rows\":N,\"cols\":N}", EINVAL);
			r->pty = 1;
			r->rows = (unsigned)rows;
			r->cols = (unsigned)cols;
		}
		if (json_get(root, "timeout_ms") &&
		    (json_get_int(root, "timeout_ms", &r->timeout_ms) || r->timeout_ms < 0))
			return fail(err, eno, "\"timeout_ms\" must be a non-negative integer", EINVAL);
		return 0;
	case OP_READ:
	case OP_WRITE:
	case OP_LIST:
	case OP_STAT:
	case OP_MKDIR:
	case OP_REMOVE:
	case OP_RENAME:
		if (json_get_str(root, "path", &r->path) || !valid_path(r->path))
			return fail(err, eno, "\"path\" must be an absolute path", EINVAL);
		if (r->op == OP_RENAME && (json_get_str(root, "to", &r->to) || !valid_path(r->to)))
			return fail(err, eno, "\"to\" must be an absolute path", EINVAL);
		if (json_get(root, "mode") &&
		    (json_get_int(root, "mode", &r->mode) || r->mode < 0 || r->mode > 07777))
			return fail(err, eno, "\"mode\" must be 0..4095 (e.g. 420 for 0644)", EINVAL);
		if (json_get(root, "parents") && json_get_bool(root, "parents", &r->parents))
			return fail(err, eno, "\"parents\" must be a boolean", EINVAL);
		if (json_get(root, "recursive") && json_get_bool(root, "recursive", &r->recursive))
			return fail(err, eno, "\"recursive\" must be a boolean", EINVAL);
		return 0;
	case OP_KILL:
		if (json_get_int(root, "pid", &r->pid) || r->pid <= 1 || r->pid > INT32_MAX)
			return fail(err, eno, "\"pid\" must be a process the API started", EINVAL);
		r->sig = SIGTERM;
		if (json_get(root, "signal") && (json_get_int(root, "signal", &r->sig) || r->sig < 1 || r->sig > 64))
			return fail(err, eno, "\"signal\" must be 1..64", EINVAL);
		return 0;
	case OP_SYNC: {
		const char *hex = NULL;

		if (json_get_int(root, "time_s", &r->time_s) || r->time_s < 0 ||
		    json_get_int(root, "time_ns", &r->time_ns) || r->time_ns < 0 || r->time_ns > 999999999)
			return fail(err, eno, "sync needs \"time_s\" and \"time_ns\" (0..999999999)", EINVAL);
		if (json_get_str(root, "seed", &hex) || strlen(hex) % 2 || strlen(hex) / 2 > API_MAX_SEED)
			return fail(err, eno, "sync needs \"seed\": hex, at most 256 bytes", EINVAL);
		for (i = 0; hex[2 * i]; i++) {
			unsigned byte;

			if (!isxdigit((unsigned char)hex[2 * i]) || !isxdigit((unsigned char)hex[2 * i + 1]) ||
			    sscanf(hex + 2 * i, "%2x", &byte) != 1)
				return fail(err, eno, "\"seed\" must be hex", EINVAL);
			r->seed[i] = (uint8_t)byte;
		}
		if (json_get(root, "net")) {
			const struct json *arr = json_get(root, "net"), *e;

			if (arr->type != JSON_ARR || arr->u.kids.count > API_MAX_NETS)
				return fail(err, eno, "\"net\" must be an array of at most 8 strings", EINVAL);
			for (e = arr->u.kids.first; e; e = e->next) {
				if (e->type != JSON_STR || !e->u.str.len || e->u.str.len >= API_NET_SPEC)
					return fail(err, eno, "\"net\" entries are interface descriptions", EINVAL);
				r->net[r->nr_net++] = e->u.str.s;
			}
		}
		if (json_get(root, "egress_port") &&
		    (json_get_int(root, "egress_port", &r->egress_port) || r->egress_port < 1 || r->egress_port > 65535))
			return fail(err, eno, "\"egress_port\" must be 1..65535", EINVAL);
		r->seed_len = i;
		return 0;
	}
	case OP_CONNECT:
		if (json_get_int(root, "port", &r->port) || r->port < 1 || r->port > 65535)
			return fail(err, eno, "connect needs \"port\": 1..65535", EINVAL);
		return 0;
	case OP_HEALTH:
	case OP_PS:
	case OP_SHUTDOWN:
		return 0;
	}
	return fail(err, eno, "unknown \"op\"", EINVAL);
}

/* ---- replies ------------------------------------------------------------- */

static void send_error(int fd, int e, const char *msg)
{
	char buf[1024];
	struct json_writer w;

	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "error");
	jw_str(&w, errno_name(e));
	jw_key(&w, "errno");
	jw_int(&w, e);
	jw_key(&w, "message");
	jw_str(&w, msg ? msg : strerror(e));
	jw_obj_end(&w);
	frame_write(fd, F_ERROR, buf, jw_done(&w) ? w.len : 0);
}

static void send_json(int fd, uint8_t type, struct json_writer *w)
{
	if (!jw_done(w)) {
		send_error(fd, E2BIG, "reply too large");
		return;
	}
	frame_write(fd, type, w->buf, w->len);
}

/* ---- files --------------------------------------------------------------- */

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

static int mkdir_p(const char *path, mode_t mode)
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

static void op_read(int fd, const struct api_request *r)
{
	char buf[DATA_CHUNK], meta[256];
	struct json_writer w;
	struct stat st;
	int f = open(r->path, O_RDONLY | O_CLOEXEC);

	if (f < 0 || fstat(f, &st) < 0) {
		send_error(fd, errno, NULL);
		if (f >= 0)
			close(f);
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		close(f);
		send_error(fd, EISDIR, NULL);
		return;
	}
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	stat_fields(&w, &st);
	jw_obj_end(&w);
	send_json(fd, F_RESULT, &w);
	for (;;) {
		ssize_t n = read(f, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			send_error(fd, errno, "read failed midway");
			break;
		}
		if (n == 0) {
			frame_write(fd, F_END, NULL, 0);
			break;
		}
		if (frame_write(fd, F_DATA, buf, (size_t)n))
			break;
	}
	close(f);
}

/* Atomic write: a temporary file beside the target, fsync, rename. */
static void op_write(int fd, const struct api_request *r)
{
	static char buf[FRAME_MAX];
	char dir[PATH_MAX], tmp[PATH_MAX + 256], meta[128];
	const char *slash = strrchr(r->path, '/'), *base = slash + 1;
	struct json_writer w;
	uint64_t total = 0;
	int f, e;

	if (!*base) {
		send_error(fd, EISDIR, "path names a directory");
		return;
	}
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - r->path) ? (int)(slash - r->path) : 1, r->path);
	if (r->parents && (e = mkdir_p(dir, 0755)) < 0) {
		send_error(fd, -e, "cannot create the parent directories");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%.3800s/.%.200s.vmm-XXXXXX", dir, base);
	f = mkostemp(tmp, O_CLOEXEC);
	if (f < 0) {
		send_error(fd, errno, NULL);
		return;
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
				send_error(fd, EPROTO, "expected DATA or END frames");
			return;
		}
		if (type == F_END)
			break;
		if (write_full(f, buf, len)) {
			e = errno;
			unlink(tmp);
			close(f);
			send_error(fd, e, "write failed (disk full?)");
			return;
		}
		total += len;
	}
	if (fsync(f) < 0 || close(f) < 0 || rename(tmp, r->path) < 0) {
		e = errno;
		unlink(tmp);
		send_error(fd, e, NULL);
		return;
	}
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	jw_key(&w, "size");
	jw_int(&w, (int64_t)total);
	jw_obj_end(&w);
	send_json(fd, F_RESULT, &w);
}

/* Directory listing in pages of at most ~60 KiB: {"entries":[...],"more":B}. */
static void op_list(int fd, const struct api_request *r)
{
	static char buf[DATA_CHUNK + 4096];
	struct json_writer w;
	struct dirent *de;
	DIR *d = opendir(r->path);
	int dfd, count = 0;

	if (!d) {
		send_error(fd, errno, NULL);
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
			send_json(fd, F_RESULT, &w);
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
	send_json(fd, F_RESULT, &w);
}

static void op_stat(int fd, const struct api_request *r)
{
	char buf[256];
	struct json_writer w;
	struct stat st;

	if (lstat(r->path, &st) < 0) {
		send_error(fd, errno, NULL);
		return;
	}
	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	stat_fields(&w, &st);
	jw_obj_end(&w);
	send_json(fd, F_RESULT, &w);
}

static void send_ok(int fd)
{
	frame_write(fd, F_RESULT, "{}", 2);
}

/* Removes what dfd/name is, depth-first, never following symlinks. */
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

static void op_mkdir(int fd, const struct api_request *r)
{
	mode_t mode = r->mode >= 0 ? (mode_t)r->mode : 0755;
	int e = r->parents ? mkdir_p(r->path, mode) : (mkdir(r->path, mode) < 0 ? -errno : 0);

	if (e < 0)
		send_error(fd, -e, NULL);
	else
		send_ok(fd);
}

static void op_remove(int fd, const struct api_request *r)
{
	struct stat st;
	int e;

	if (lstat(r->path, &st) < 0) {
		send_error(fd, errno, NULL);
		return;
	}
	if (!strcmp(r->path, "/")) {
		send_error(fd, EBUSY, "refusing to remove /");
		return;
	}
	if (S_ISDIR(st.st_mode))
		e = r->recursive ? remove_tree(AT_FDCWD, r->path) : (rmdir(r->path) < 0 ? -errno : 0);
	else
		e = unlink(r->path) < 0 ? -errno : 0;
	if (e < 0)
		send_error(fd, -e, NULL);
	else
		send_ok(fd);
}

static void op_rename(int fd, const struct api_request *r)
{
	if (rename(r->path, r->to) < 0)
		send_error(fd, errno, NULL);
	else
		send_ok(fd);
}

/* ---- processes ------------------------------------------------------------ */

static void registry_add(const struct api_config *cfg, pid_t pid, const struct api_request *r)
{
	char path[PATH_MAX], buf[4096];
	struct json_writer w;
	unsigned i;
	int f;

	if (!cfg->registry)
		return;
	snprintf(path, sizeof(path), "%s/%d", cfg->registry, (int)pid);
	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "pid");
	jw_int(&w, pid);
	jw_key(&w, "started_ms");
	jw_int(&w, (int64_t)(now_ms() - cfg->start_ms));
	jw_key(&w, "argv");
	jw_arr(&w);
	for (i = 0; i < r->argc && w.len < 3000; i++)
		jw_str(&w, r->argv[i]);
	jw_arr_end(&w);
	jw_obj_end(&w);
	f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (f >= 0) {
		if (jw_done(&w))
			write_full(f, w.buf, w.len);
		close(f);
	}
}

static void registry_del(const struct api_config *cfg, pid_t pid)
{
	char path[PATH_MAX];

	if (!cfg->registry)
		return;
	snprintf(path, sizeof(path), "%s/%d", cfg->registry, (int)pid);
	unlink(path);
}

static void op_ps(int fd, const struct api_config *cfg)
{
	static char buf[FRAME_MAX / 2];
	struct json_writer w;
	struct dirent *de;
	DIR *d = cfg->registry ? opendir(cfg->registry) : NULL;

	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "processes");
	jw_arr(&w);
	while (d && (de = readdir(d))) {
		char path[PATH_MAX], rec[4096];
		int f;
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", cfg->registry, de->d_name);
		f = open(path, O_RDONLY | O_CLOEXEC);
		if (f < 0)
			continue;
		n = read(f, rec, sizeof(rec) - 1);
		close(f);
		if (n <= 0 || w.len + (size_t)n + 8 > sizeof(buf))
			continue;
		/* Records are JSON we wrote ourselves: splice them in. */
		if (w.need_comma)
			memcpy(w.buf + w.len++, ",", 1);
		memcpy(w.buf + w.len, rec, (size_t)n);
		w.len += (size_t)n;
		w.buf[w.len] = '\0';
		w.need_comma = 1;
	}
	if (d)
		closedir(d);
	jw_arr_end(&w);
	jw_obj_end(&w);
	send_json(fd, F_RESULT, &w);
}

/* connect: a TCP connection to 127.0.0.1:port in the sandbox, then the
 * API connection carries its bytes both ways (published ports). Each side's
 * end of stream is passed on as a half-close. */
static void op_connect(int fd, const struct api_request *r)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char buf[65536];
	int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (tcp < 0 || connect(tcp, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		send_error(fd, errno, "nothing listens on that port in the sandbox");
		if (tcp >= 0)
			close(tcp);
		return;
	}
	send_ok(fd);
	splice_streams(fd, tcp, buf, sizeof(buf));
	close(tcp);
}

static void op_kill(int fd, const struct api_request *r, const struct api_config *cfg)
{
	char path[PATH_MAX];

	/* Only processes the API started (their session leaders). */
	snprintf(path, sizeof(path), "%s/%lld", cfg->registry ? cfg->registry : "/nonexistent",
		 (long long)r->pid);
	if (access(path, F_OK) < 0) {
		send_error(fd, ESRCH, "no process started through the API has that pid");
		return;
	}
	if (kill(-(pid_t)r->pid, (int)r->sig) < 0 && kill((pid_t)r->pid, (int)r->sig) < 0)
		send_error(fd, errno, NULL);
	else
		send_ok(fd);
}

/* extra[]: the egress proxy's variables (NULL-terminated), before the
 * request's own, which override them. */
static void default_env(const struct api_request *r, const char *const *extra, char **env, unsigned max)
{
	static const char *const base[] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LANG=C.UTF-8",
	};
	unsigned n = 0, i, j;

	for (i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		size_t k = strchr(base[i], '=') - base[i] + 1;
		int overridden = 0;

		for (j = 0; j < r->envc; j++)
			if (!strncmp(r->env[j], base[i], k))
				overridden = 1;
		if (!overridden)
			env[n++] = (char *)base[i];
	}
	if (r->pty)
		env[n++] = "TERM=xterm-256color";
	for (i = 0; extra && extra[i]; i++) {
		size_t k = strchr(extra[i], '=') - extra[i] + 1;
		int overridden = 0;

		for (j = 0; j < r->envc; j++)
			if (!strncmp(r->env[j], extra[i], k))
				overridden = 1;
		if (!overridden)
			env[n++] = (char *)extra[i];
	}
	for (j = 0; j < r->envc && n + 1 < max; j++)
		env[n++] = (char *)r->env[j];
	env[n] = NULL;
}

struct exec_io {
	int out, err;        /* read ends (err = -1 with a pty) */
	int in;              /* write end of stdin (or the pty master), -1 if none */
	int pty;
};

static pid_t spawn(const struct api_request *r, const char *const *extra, struct exec_io *io, int *err)
{
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, inp[2] = { -1, -1 }, ep[2];
	char *env[API_MAX_ENV + 24];
	int master = -1, slave = -1;
	pid_t pid;
	ssize_t n;
	int e = 0;

	default_env(r, extra, env, sizeof(env) / sizeof(env[0]));
	if (pipe2(ep, O_CLOEXEC) < 0) {
		*err = errno;
		return -1;
	}
	if (r->pty) {
		struct winsize ws = { .ws_row = (unsigned short)r->rows, .ws_col = (unsigned short)r->cols };

		master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (master < 0 || grantpt(master) || unlockpt(master) ||
		    (slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
			*err = errno;
			goto fail;
		}
		ioctl(master, TIOCSWINSZ, &ws);
	} else if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
		   (r->stdin_stream && pipe2(inp, O_CLOEXEC) < 0)) {
		*err = errno;
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		*err = errno;
		goto fail;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* A clean slate: dispositions ignored anywhere up the chain
		 * would stick across exec (and a shell cannot trap them). */
		for (int sig = 1; sig < 65; sig++)
			signal(sig, SIG_DFL);
		setsid();
		if (r->pty) {
			ioctl(slave, TIOCSCTTY, 0);
			dup2(slave, 0);
			dup2(slave, 1);
			dup2(slave, 2);
		} else {
			int nul = open("/dev/null", O_RDONLY);

			dup2(r->stdin_stream ? inp[0] : nul, 0);
			dup2(outp[1], 1);
			dup2(errp[1], 2);
		}
		if (r->cwd && chdir(r->cwd) < 0)
			goto child_fail;
		if (!r->cwd && chdir("/root") < 0 && chdir("/") < 0)
			goto child_fail;
		execvpe(r->argv[0], (char *const *)r->argv, env);
child_fail:
		e = errno;
		n = write(ep[1], &e, sizeof(e));
		(void)n;
		_exit(127);
	}
	close(ep[1]);
	/* The exec succeeded iff the CLOEXEC pipe closes without a word. */
	n = read(ep[0], &e, sizeof(e));
	close(ep[0]);
	if (n == sizeof(e)) {
		waitpid(pid, NULL, 0);
		*err = e;
		ep[0] = ep[1] = -1;
		goto fail_noep;
	}
	if (r->pty) {
		close(slave);
		io->out = master;
		io->err = -1;
		io->in = master;
		io->pty = 1;
	} else {
		close(outp[1]);
		close(errp[1]);
		io->out = outp[0];
		io->err = errp[0];
		io->pty = 0;
		io->in = -1;
		if (r->stdin_stream) {
			close(inp[0]);
			io->in = inp[1];
			fcntl(io->in, F_SETFL, O_NONBLOCK);
		}
	}
	return pid;
fail:
	close(ep[0]);
	close(ep[1]);
fail_noep:
	if (master >= 0)
		close(master);
	if (slave >= 0)
		close(slave);
	if (outp[0] >= 0) {
		close(outp[0]);
		close(outp[1]);
	}
	if (errp[0] >= 0) {
		close(errp[0]);
		close(errp[1]);
	}
	if (inp[0] >= 0) {
		close(inp[0]);
		close(inp[1]);
	}
	return -1;
}

#define EGRESS_ENV 10 /* proxy_env: 5 proxy variables, 5 for the CA */

/* The egress proxy's guest side (guest-init/egress.h) listens on
 * 127.0.0.1:port: commands get the variables HTTP clients look for, and,
 * when the proxy intercepts HTTPS, where the bundle with its CA is
 * (OpenSSL, Python requests, curl, git; Node adds NODE_EXTRA_CA_CERTS to
 * its own). */
static void proxy_env(unsigned port, char buf[EGRESS_ENV][96], const char *vars[EGRESS_ENV + 1])
{
	static const char *const names[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" };
	static const char *const bundle[] = { "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
					      "GIT_SSL_CAINFO" };
	unsigned i, n = 0;

	for (i = 0; i < 4; i++) {
		snprintf(buf[n], 96, "%s=http://127.0.0.1:%u", names[i], port);
		vars[n] = buf[n];
		n++;
	}
	snprintf(buf[n], 96, "NO_PROXY=localhost,127.0.0.1");
	vars[n] = buf[n];
	n++;
	if (access(GEGRESS_BUNDLE, R_OK) == 0) {
		for (i = 0; i < 4; i++) {
			snprintf(buf[n], 96, "%s=%s", bundle[i], GEGRESS_BUNDLE);
			vars[n] = buf[n];
			n++;
		}
		snprintf(buf[n], 96, "NODE_EXTRA_CA_CERTS=%s", GEGRESS_CA);
		vars[n] = buf[n];
		n++;
	}
	vars[n] = NULL;
}

static void op_exec(int fd, const struct api_request *r, const struct api_config *cfg)
{
	static uint8_t buf[FRAME_MAX], inbuf[FRAME_MAX];
	size_t in_len = 0, in_off = 0;
	struct exec_io io;
	char meta[256];
	struct json_writer w;
	sigset_t chld;
	int sfd, status = 0, exited = 0, timed_out = 0, client_gone = 0, e = 0;
	uint64_t deadline = r->timeout_ms ? now_ms() + (uint64_t)r->timeout_ms : 0;
	char egress_buf[EGRESS_ENV][96];
	const char *extra[EGRESS_ENV + 1] = { NULL };
	unsigned port;
	pid_t pid;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (cfg->egress_port && (port = cfg->egress_port()))
		proxy_env(port, egress_buf, extra);
	pid = spawn(r, extra, &io, &e);
	if (pid < 0) {
		send_error(fd, e, e == ENOENT ? "command not found" : NULL);
		close(sfd);
		return;
	}
	registry_add(cfg, pid, r);
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	jw_key(&w, "pid");
	jw_int(&w, pid);
	jw_obj_end(&w);
	send_json(fd, F_STARTED, &w);

	while (io.out >= 0 || io.err >= 0 || !exited) {
		struct pollfd p[5];
		int n = 0, i_conn = -1, i_out = -1, i_err = -1, i_sig = -1, i_in = -1, timeout = -1;

		if (!client_gone && in_len == 0) {
			i_conn = n;
			p[n].fd = fd;
			p[n++].events = POLLIN;
		}
		if (io.out >= 0) {
			i_out = n;
			p[n].fd = io.out;
			p[n++].events = POLLIN;
		}
		if (io.err >= 0) {
			i_err = n;
			p[n].fd = io.err;
			p[n++].events = POLLIN;
		}
		if (in_len && io.in >= 0) {
			i_in = n;
			p[n].fd = io.in;
			p[n++].events = POLLOUT;
		}
		if (!exited) {
			i_sig = n;
			p[n].fd = sfd;
			p[n++].events = POLLIN;
		}
		if (deadline && !exited) {
			uint64_t t = now_ms();

			timeout = t >= deadline ? 0 : (int)(deadline - t);
		}
		if (exited) {
			/* The command is gone; give stragglers holding its
			 * pipes a moment, then stop waiting for them. */
			timeout = 200;
		}
		if (poll(p, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (deadline && !exited && now_ms() >= deadline && !timed_out) {
			timed_out = 1;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
		}
		if (i_sig >= 0 && (p[i_sig].revents & POLLIN)) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
			}
			if (waitpid(pid, &status, WNOHANG) == pid) {
				exited = 1;
				registry_del(cfg, pid);
				if (io.in >= 0 && !io.pty)
					close(io.in);
				if (!io.pty)
					io.in = -1;
			}
		}
		if (exited && timeout == 200 && n > 0) {
			int any = 0, i;

			for (i = 0; i < n; i++)
				any |= p[i].revents;
			if (!any)
				break; /* 200 ms of silence after the exit */
		}
		if (i_out >= 0 && (p[i_out].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t k = read(io.out, buf, DATA_CHUNK);

			if (k > 0) {
				if (frame_write(fd, F_STDOUT, buf, (size_t)k))
					client_gone = 1;
			} else if (k == 0 || errno != EINTR) {
				close(io.out);
				if (io.in == io.out)
					io.in = -1;
				io.out = -1;
			}
		}
		if (i_err >= 0 && (p[i_err].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t k = read(io.err, buf, DATA_CHUNK);

			if (k > 0) {
				if (frame_write(fd, F_STDERR, buf, (size_t)k))
					client_gone = 1;
			} else if (k == 0 || errno != EINTR) {
				close(io.err);
				io.err = -1;
			}
		}
		if (i_in >= 0 && (p[i_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t k = write(io.in, inbuf + in_off, in_len);

			if (k > 0) {
				in_off += (size_t)k;
				in_len -= (size_t)k;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				in_len = 0; /* the command closed its stdin */
			}
		}
		if (i_conn >= 0 && (p[i_conn].revents & (POLLIN | POLLHUP | POLLERR))) {
			uint8_t type;
			size_t len;
			int rr = frame_read(fd, &type, inbuf, sizeof(inbuf), &len);

			if (rr) {
				/* The client left: nobody reads the output any more. */
				client_gone = 1;
				if (!exited) {
					kill(-pid, SIGKILL);
					kill(pid, SIGKILL);
				}
				continue;
			}
			switch (type) {
			case F_STDIN:
				if (io.in >= 0) {
					in_off = 0;
					in_len = len;
				}
				break;
			case F_STDIN_EOF:
				if (io.pty && io.in >= 0) {
					uint8_t eot = 4; /* ^D: EOF for the line discipline */

					write_full(io.in, &eot, 1);
				} else if (io.in >= 0) {
					close(io.in);
					io.in = -1;
				}
				break;
			case F_SIGNAL:
				if (len == 4 && !exited) {
					uint32_t sig = (uint32_t)inbuf[0] | (uint32_t)inbuf[1] << 8 |
						       (uint32_t)inbuf[2] << 16 | (uint32_t)inbuf[3] << 24;

					if (sig >= 1 && sig <= 64 && kill(-pid, (int)sig) < 0)
						kill(pid, (int)sig);
				}
				break;
			case F_RESIZE:
				if (len == 4 && io.pty && io.out >= 0) {
					struct winsize ws = { .ws_row = (unsigned short)(inbuf[0] | inbuf[1] << 8),
							      .ws_col = (unsigned short)(inbuf[2] | inbuf[3] << 8) };

					ioctl(io.out, TIOCSWINSZ, &ws);
				}
				break;
			default:
				break; /* unknown frames are ignored (forward compatible) */
			}
		}
	}
	if (!exited) {
		kill(-pid, SIGKILL);
		waitpid(pid, &status, 0);
		registry_del(cfg, pid);
	}
	if (io.out >= 0)
		close(io.out);
	if (io.err >= 0)
		close(io.err);
	if (io.in >= 0 && io.in != io.out)
		close(io.in);
	close(sfd);
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	if (WIFSIGNALED(status)) {
		jw_key(&w, "signal");
		jw_int(&w, WTERMSIG(status));
		jw_key(&w, "exit_code");
		jw_int(&w, 128 + WTERMSIG(status));
	} else {
		jw_key(&w, "exit_code");
		jw_int(&w, WEXITSTATUS(status));
	}
	jw_key(&w, "timed_out");
	jw_bool(&w, timed_out);
	jw_obj_end(&w);
	if (!client_gone)
		send_json(fd, F_EXIT, &w);
}

/* ---- the connection -------------------------------------------------------- */

void api_serve(int fd, const struct api_config *cfg)
{
	static char req[REQUEST_MAX];
	static char arena_buf[REQUEST_MAX * 2];
	struct json_arena arena = { arena_buf, sizeof(arena_buf), 0 };
	struct api_request r;
	char token[API_TOKEN_MAX] = "";
	const char *err = NULL, *tok = cfg->token;
	uint8_t type;
	size_t len;
	unsigned i;
	int eno = 0, rr;

	signal(SIGPIPE, SIG_IGN);
	rr = frame_read(fd, &type, req, sizeof(req), &len);
	if (rr == -2) {
		send_error(fd, EMSGSIZE, "request larger than 64 KiB");
		return;
	}
	if (rr)
		return;
	if (type != F_REQUEST) {
		send_error(fd, EPROTO, "the first frame must be a REQUEST");
		return;
	}
	if (cfg->token_read) {
		/* The VMM's current token: a restored clone's own, not its
		 * snapshot's. Unreadable: nobody gets in. */
		rr = cfg->token_read(token, sizeof(token));
		if (rr < 0) {
			send_error(fd, EACCES, "the sandbox's access token cannot be read");
			return;
		}
		tok = rr ? token : NULL;
	}
	rr = api_parse(req, len, tok, &arena, &r, &err, &eno);
	explicit_bzero(token, sizeof(token));
	if (rr) {
		send_error(fd, eno, err);
		return;
	}
	switch (r.op) {
	case OP_HEALTH: {
		char buf[256];
		struct json_writer w;

		jw_init(&w, buf, sizeof(buf));
		jw_obj(&w);
		jw_key(&w, "api");
		jw_int(&w, API_VERSION);
		jw_key(&w, "server");
		jw_str(&w, "vmm guest-init");
		jw_key(&w, "uptime_ms");
		jw_int(&w, (int64_t)(now_ms() - cfg->start_ms));
		jw_obj_end(&w);
		send_json(fd, F_RESULT, &w);
		break;
	}
	case OP_EXEC: op_exec(fd, &r, cfg); break;
	case OP_READ: op_read(fd, &r); break;
	case OP_WRITE: op_write(fd, &r); break;
	case OP_LIST: op_list(fd, &r); break;
	case OP_STAT: op_stat(fd, &r); break;
	case OP_MKDIR: op_mkdir(fd, &r); break;
	case OP_REMOVE: op_remove(fd, &r); break;
	case OP_RENAME: op_rename(fd, &r); break;
	case OP_PS: op_ps(fd, cfg); break;
	case OP_KILL: op_kill(fd, &r, cfg); break;
	case OP_CONNECT: op_connect(fd, &r); break;
	case OP_SYNC:
		if (!cfg->sync) {
			send_error(fd, ENOTSUP, "this server does not set the clock or the entropy pool");
			break;
		}
		if (cfg->sync(r.time_s, r.time_ns, r.seed, r.seed_len) < 0) {
			send_error(fd, errno, "setting the clock or adding entropy failed");
			break;
		}
		if (r.nr_net && !cfg->net) {
			send_error(fd, ENOTSUP, "this server does not configure network interfaces");
			break;
		}
		for (i = 0; i < r.nr_net; i++) {
			char why[200];

			if (cfg->net(r.net[i], why, sizeof(why)) < 0) {
				send_error(fd, EINVAL, why);
				break;
			}
		}
		if (i < r.nr_net)
			break;
		if (r.egress_port && !cfg->egress) {
			send_error(fd, ENOTSUP, "this server has no egress proxy side");
			break;
		}
		if (r.egress_port && (eno = cfg->egress((unsigned)r.egress_port)) < 0) {
			send_error(fd, -eno, "starting the egress proxy's guest side failed");
			break;
		}
		send_ok(fd);
		break;
	case OP_SHUTDOWN:
		/* Reply first: the power-off stops this process too. */
		if (!cfg->shutdown) {
			send_error(fd, ENOTSUP, "this server cannot power the sandbox off");
			break;
		}
		send_ok(fd);
		cfg->shutdown();
		break;
	}
}
