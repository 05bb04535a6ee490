/* The guest API's requests and replies (api.h, ops.h): a request's JSON
 * checked and parsed once into struct api_request (api_parse), and the
 * reply frames every operation sends (api_send_*). Below the operations
 * (api.c, procs.c, files.c, watch.c, tar_ops.c), which all call in here
 * and are called by none of it. */
#include "vmm/wire/api.h"
#include "guest-init/ops.h"
#include "vmm/wire/proto.h"
#include "vmm/wire/tar.h"
#include "vmm/wire/vsock.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

/* ---- parsing ------------------------------------------------------------- */

static const struct {
	const char *name;
	enum api_op op;
} ops[] = {
	{ "health", OP_HEALTH }, { "exec", OP_EXEC }, { "read", OP_READ }, { "write", OP_WRITE },
	{ "list", OP_LIST }, { "stat", OP_STAT }, { "mkdir", OP_MKDIR }, { "remove", OP_REMOVE },
	{ "rename", OP_RENAME }, { "ps", OP_PS }, { "kill", OP_KILL }, { "shutdown", OP_SHUTDOWN },
	{ "sync", OP_SYNC }, { "connect", OP_CONNECT },
	{ "processes", OP_PROCESSES }, { "attach", OP_ATTACH }, { "logs", OP_LOGS },
	{ "signal", OP_SIGNAL }, { "wait", OP_WAIT }, { "watch", OP_WATCH },
	{ "readlink", OP_READLINK }, { "symlink", OP_SYMLINK },
	{ "tar_get", OP_TAR_GET }, { "tar_put", OP_TAR_PUT },
};
#define FIRST_V2_OP OP_PROCESSES

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

int api_valid_tag(const char *t)
{
	size_t i, n = t ? strlen(t) : 0;

	/* Not starting with a digit: a tag never reads as an id. */
	if (n == 0 || n > API_TAG_MAX || (t[0] >= '0' && t[0] <= '9'))
		return 0;
	for (i = 0; i < n; i++) {
		char c = t[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

/* An optional integer member in [lo, hi]: 0 (absent or fine) or -1. */
static int opt_int(const struct json *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
	if (!json_get(o, key))
		return 0;
	return json_get_int(o, key, out) || *out < lo || *out > hi ? -1 : 0;
}

static int opt_bool(const struct json *o, const char *key, int *out)
{
	return json_get(o, key) && json_get_bool(o, key, out) ? -1 : 0;
}

/* attach/logs/signal/wait name a detached process by "id" or "tag". */
static int parse_selector(const struct json *root, struct api_request *r, const char **err, int *eno)
{
	int has_id = json_get(root, "id") != NULL, has_tag = json_get(root, "tag") != NULL;

	if (has_id == has_tag)
		return fail(err, eno, "name the process by \"id\" or by \"tag\" (one of them)", EINVAL);
	if (has_id && (json_get_int(root, "id", &r->id) || r->id < 1 || r->id > INT32_MAX))
		return fail(err, eno, "\"id\" must be a process id from exec or processes", EINVAL);
	if (has_tag && (json_get_str(root, "tag", &r->tag) || !api_valid_tag(r->tag)))
		return fail(err, eno, "\"tag\" must be 1-64 of A-Z a-z 0-9 _ . -, not starting with a digit", EINVAL);
	return 0;
}

/* The version 2 members of a request (r->op and the version 1 members
 * are parsed). */
static int parse_v2(const struct json *root, struct api_request *r, const char **err, int *eno)
{
	const struct json *v;

	switch (r->op) {
	case OP_EXEC:
		if (opt_bool(root, "detach", &r->detach))
			return fail(err, eno, "\"detach\" must be a boolean", EINVAL);
		if (!r->detach && (json_get(root, "tag") || json_get(root, "ring_bytes")))
			return fail(err, eno, "\"tag\" and \"ring_bytes\" need \"detach\":true", EINVAL);
		if (json_get(root, "tag") && (json_get_str(root, "tag", &r->tag) || !api_valid_tag(r->tag)))
			return fail(err, eno, "\"tag\" must be 1-64 of A-Z a-z 0-9 _ . -, not starting with a digit", EINVAL);
		if (opt_int(root, "ring_bytes", API_RING_MIN, API_RING_MAX, &r->ring_bytes))
			return fail(err, eno, "\"ring_bytes\" must be 4096..67108864", EINVAL);
		return 0;
	case OP_READ:
		if (opt_int(root, "offset", 0, INT64_MAX, &r->offset) ||
		    opt_int(root, "length", 0, INT64_MAX, &r->length))
			return fail(err, eno, "\"offset\" and \"length\" must be non-negative integers", EINVAL);
		return 0;
	case OP_WRITE:
		if (json_get(root, "user") && (json_get(root, "uid") || json_get(root, "gid")))
			return fail(err, eno, "give \"user\" or \"uid\"/\"gid\", not both", EINVAL);
		if (opt_int(root, "uid", 0, 0xfffffffe, &r->uid) || opt_int(root, "gid", 0, 0xfffffffe, &r->gid))
			return fail(err, eno, "\"uid\" and \"gid\" must be 0..4294967294", EINVAL);
		if (json_get(root, "user") &&
		    (json_get_str(root, "user", &r->user) || !r->user[0] || strlen(r->user) > 32 ||
		     strchr(r->user, ':') || strchr(r->user, '\n')))
			return fail(err, eno, "\"user\" must be a user name", EINVAL);
		return 0;
	case OP_PROCESSES:
		return 0;
	case OP_ATTACH:
	case OP_LOGS:
		if (parse_selector(root, r, err, eno))
			return -1;
		if (opt_int(root, "offset", 0, INT64_MAX, &r->offset) ||
		    opt_int(root, "stderr_offset", 0, INT64_MAX, &r->stderr_offset))
			return fail(err, eno, "\"offset\" and \"stderr_offset\" must be non-negative integers", EINVAL);
		if (r->op == OP_LOGS && opt_bool(root, "follow", &r->follow))
			return fail(err, eno, "\"follow\" must be a boolean", EINVAL);
		r->follow |= r->op == OP_ATTACH;
		return 0;
	case OP_SIGNAL:
		if (parse_selector(root, r, err, eno))
			return -1;
		r->sig = SIGTERM;
		if (opt_int(root, "signal", 1, 64, &r->sig))
			return fail(err, eno, "\"signal\" must be 1..64", EINVAL);
		return 0;
	case OP_WAIT:
		if (parse_selector(root, r, err, eno))
			return -1;
		if (opt_int(root, "timeout_ms", 0, INT32_MAX, &r->timeout_ms))
			return fail(err, eno, "\"timeout_ms\" must be 0..2147483647", EINVAL);
		return 0;
	case OP_WATCH:
		if (json_get_str(root, "path", &r->path) || !valid_path(r->path))
			return fail(err, eno, "\"path\" must be an absolute path", EINVAL);
		if (opt_bool(root, "recursive", &r->recursive))
			return fail(err, eno, "\"recursive\" must be a boolean", EINVAL);
		r->coalesce_ms = 100;
		if (opt_int(root, "coalesce_ms", 0, 10000, &r->coalesce_ms))
			return fail(err, eno, "\"coalesce_ms\" must be 0..10000", EINVAL);
		return 0;
	case OP_READLINK:
		if (json_get_str(root, "path", &r->path) || !valid_path(r->path))
			return fail(err, eno, "\"path\" must be an absolute path", EINVAL);
		return 0;
	case OP_SYMLINK:
		if (json_get_str(root, "path", &r->path) || !valid_path(r->path))
			return fail(err, eno, "\"path\" must be an absolute path", EINVAL);
		/* Any target a symlink may hold: relative ones too. */
		if (json_get_str(root, "target", &r->target) || !r->target[0] || strlen(r->target) >= PATH_MAX)
			return fail(err, eno, "\"target\" must be a non-empty string (what the link points to)", EINVAL);
		if (opt_bool(root, "parents", &r->parents))
			return fail(err, eno, "\"parents\" must be a boolean", EINVAL);
		return 0;
	case OP_TAR_GET:
	case OP_TAR_PUT:
		if (json_get_str(root, "path", &r->path) || !valid_path(r->path))
			return fail(err, eno, "\"path\" must be an absolute path", EINVAL);
		if (opt_int(root, "max_depth", 1, TAR_DEPTH_MAX, &r->max_depth) ||
		    opt_int(root, "max_entries", 1, INT64_MAX, &r->max_entries))
			return fail(err, eno, "\"max_depth\" must be 1..4096 and \"max_entries\" at least 1", EINVAL);
		if (r->op == OP_TAR_PUT)
			return opt_bool(root, "parents", &r->parents) || opt_bool(root, "owner", &r->owner)
				       ? fail(err, eno, "\"parents\" and \"owner\" must be booleans", EINVAL)
				       : 0;
		if (opt_bool(root, "follow", &r->follow_links))
			return fail(err, eno, "\"follow\" must be a boolean", EINVAL);
		if (json_get(root, "name") &&
		    (json_get_str(root, "name", &r->arcname) || !r->arcname[0] || strchr(r->arcname, '/') ||
		     !strcmp(r->arcname, "..") || strlen(r->arcname) > NAME_MAX))
			return fail(err, eno, "\"name\" must be one path component (or \".\": the content)", EINVAL);
		return 0;
	case OP_STAT:
		if (opt_bool(root, "follow", &r->follow_links))
			return fail(err, eno, "\"follow\" must be a boolean", EINVAL);
		v = json_get(root, "paths");
		if (!v)
			return 0;
		if (json_get(root, "path") || str_array(v, r->paths, API_MAX_PATHS - 1, &r->nr_paths) ||
		    r->nr_paths == 0)
			return fail(err, eno, "\"paths\" must be 1..255 absolute paths (and no \"path\")", EINVAL);
		for (unsigned i = 0; i < r->nr_paths; i++)
			if (!valid_path(r->paths[i]))
				return fail(err, eno, "\"paths\" must be 1..255 absolute paths (and no \"path\")", EINVAL);
		return 0;
	default:
		return 0;
	}
}

static int parse_v1(const struct json *root, struct api_request *r, const char **err, int *eno);

int api_parse(const char *text, size_t len, const char *token, struct json_arena *a,
	      struct api_request *r, const char **err, int *eno)
{
	const char *jerr = NULL, *op = NULL, *tok = NULL;
	const struct json *root;
	int64_t ver = 0;
	size_t i;
	int rc;

	memset(r, 0, sizeof(*r));
	r->mode = -1;
	r->length = -1;
	r->uid = r->gid = -1;
	root = json_parse(text, len, a, &jerr);
	if (!root)
		return fail(err, eno, jerr, EPROTO);
	if (root->type != JSON_OBJ)
		return fail(err, eno, "request is not a JSON object", EPROTO);
	if (json_get_int(root, "v", &ver) || ver < 1 || ver > API_VERSION_MAX)
		return fail(err, eno, "unsupported API version (this server speaks v=1 and v=2)", EPROTO);
	r->version = (int)ver;
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
	if (r->op >= FIRST_V2_OP && r->version < 2)
		return fail(err, eno, "this \"op\" is version 2: send \"v\":2", EINVAL);
	rc = parse_v1(root, r, err, eno);
	if (rc || r->version < 2)
		return rc;
	return parse_v2(root, r, err, eno);
}

/* exec's container members (vmm oci): "root", "uid", "gid", "groups",
 * "no_new_privs", "rlimits":[{"type":RLIMIT_N,"soft":N,"hard":N}] (-1:
 * unlimited). */
static int parse_exec_container(const struct json *root, struct api_request *r, const char **err, int *eno)
{
	const struct json *v, *e;
	int64_t n, soft, hard;

	if (json_get(root, "root") && (json_get_str(root, "root", &r->root) || !valid_path(r->root)))
		return fail(err, eno, "\"root\" must be an absolute path", EINVAL);
	if (opt_int(root, "uid", 0, 0xfffffffe, &r->uid) || opt_int(root, "gid", 0, 0xfffffffe, &r->gid))
		return fail(err, eno, "\"uid\" and \"gid\" must be 0..4294967294", EINVAL);
	/* a pod's container (docs/kubernetes.md): its cgroup, its mount namespace */
	if (json_get(root, "cgroup") && (json_get_str(root, "cgroup", &r->cgroup) || !valid_path(r->cgroup) ||
					 strncmp(r->cgroup, "/sys/fs/cgroup/", 15) || strstr(r->cgroup, "/..")))
		return fail(err, eno, "\"cgroup\" must be a path under /sys/fs/cgroup/", EINVAL);
	if (json_get(root, "mntns") && (json_get_str(root, "mntns", &r->mntns) ||
					(strcmp(r->mntns, "new") && !valid_path(r->mntns))))
		return fail(err, eno, "\"mntns\" must be \"new\" or an absolute path", EINVAL);
	if (json_get(root, "pidns") && (json_get_str(root, "pidns", &r->pidns) ||
					(strcmp(r->pidns, "new") && !valid_path(r->pidns))))
		return fail(err, eno, "\"pidns\" must be \"new\" or an absolute path", EINVAL);
	if ((v = json_get(root, "groups"))) {
		if (v->type != JSON_ARR || v->u.kids.count > API_MAX_GROUPS)
			return fail(err, eno, "\"groups\" must be an array of at most 32 gids", EINVAL);
		for (e = v->u.kids.first; e; e = e->next) {
			if (e->type != JSON_NUM || e->u.num < 0 || e->u.num > 4294967294.0 ||
			    e->u.num != (double)(uint32_t)e->u.num)
				return fail(err, eno, "\"groups\" must be an array of at most 32 gids", EINVAL);
			r->groups[r->ngroups++] = (uint32_t)e->u.num;
		}
	}
	if (json_get(root, "no_new_privs") && json_get_bool(root, "no_new_privs", &r->no_new_privs))
		return fail(err, eno, "\"no_new_privs\" must be a boolean", EINVAL);
	if ((v = json_get(root, "rlimits"))) {
		if (v->type != JSON_ARR || v->u.kids.count > API_MAX_RLIMITS)
			return fail(err, eno, "\"rlimits\" must be an array of at most 16 limits", EINVAL);
		for (e = v->u.kids.first; e; e = e->next) {
			if (e->type != JSON_OBJ || json_get_int(e, "type", &n) || n < 0 || n >= 16 ||
			    json_get_int(e, "soft", &soft) || json_get_int(e, "hard", &hard) || soft < -1 ||
			    hard < -1)
				return fail(err, eno, "\"rlimits\": each is {\"type\":N,\"soft\":N,\"hard\":N}",
					    EINVAL);
			r->rlimits[r->nrlimits].res = (int)n;
			r->rlimits[r->nrlimits].soft = soft < 0 ? UINT64_MAX : (uint64_t)soft;
			r->rlimits[r->nrlimits].hard = hard < 0 ? UINT64_MAX : (uint64_t)hard;
			r->nrlimits++;
		}
	}
	return 0;
}

/* The version 1 members (a version 2 request has them too). */
static int parse_v1(const struct json *root, struct api_request *r, const char **err, int *eno)
{
	const struct json *v;
	size_t i;

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
		/* exec: who runs it, as an image's User is written: NAME, UID,
		 * NAME:GROUP or UID:GID (spawn.c resolves names in the guest) */
		if (json_get(root, "user") &&
		    (json_get_str(root, "user", &r->user) || !r->user[0] || strlen(r->user) > 65 ||
		     strchr(r->user, '\n') || r->user[0] == ':' || strchr(r->user, ':') != strrchr(r->user, ':')))
			return fail(err, eno, "\"user\" must be USER, UID, USER:GROUP or UID:GID", EINVAL);
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
		return parse_exec_container(root, r, err, eno);
	case OP_READ:
	case OP_WRITE:
	case OP_LIST:
	case OP_STAT:
	case OP_MKDIR:
	case OP_REMOVE:
	case OP_RENAME:
		if (r->op == OP_STAT && r->version >= 2 && json_get(root, "paths"))
			return 0; /* many paths: parse_v2 */
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
	case OP_WATCH:
	case OP_PROCESSES:
	case OP_ATTACH:
	case OP_LOGS:
	case OP_SIGNAL:
	case OP_WAIT:
	case OP_READLINK:
	case OP_SYMLINK:
	case OP_TAR_GET:
	case OP_TAR_PUT:
		return 0; /* parse_v2 */
	}
	return fail(err, eno, "unknown \"op\"", EINVAL);
}

/* ---- replies ------------------------------------------------------------- */

void api_send_error(int fd, int e, const char *msg)
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

void api_send_json(int fd, uint8_t type, struct json_writer *w)
{
	if (!jw_done(w)) {
		api_send_error(fd, E2BIG, "reply too large");
		return;
	}
	frame_write(fd, type, w->buf, w->len);
}

void api_send_ok(int fd)
{
	frame_write(fd, F_RESULT, "{}", 2);
}
