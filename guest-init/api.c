/* Sandbox API operations. Every connection runs in its own process (forked
 * by the init), so a crash or a slow client affects only that request. */
#define _GNU_SOURCE
#include "api.h"
#include "ops.h"
#include "tar.h"
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

#define send_error api_send_error
#define send_json api_send_json
#define send_ok api_send_ok

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

/* One exec request's state while its command runs (op_exec's steps). */
struct exec_run {
	int fd;                 /* the client's connection */
	const struct api_config *cfg;
	pid_t pid;
	int sfd;                /* SIGCHLD's signalfd */
	struct exec_io io;
	uint8_t *inbuf;         /* FRAME_MAX: a stdin frame being written */
	size_t in_len, in_off;
	int status, exited, timed_out, client_gone;
	uint64_t deadline;      /* ms, 0: none */
};

/* Where each part sits in one turn's p[] (-1: not this turn). */
struct exec_poll {
	struct pollfd p[5];
	int n, i_conn, i_out, i_err, i_sig, i_in, timeout;
};

/* One turn's poll set and timeout. */
static void exec_poll_build(const struct exec_run *x, struct exec_poll *ep)
{
	ep->n = 0;
	ep->i_conn = ep->i_out = ep->i_err = ep->i_sig = ep->i_in = -1;
	ep->timeout = -1;
	if (!x->client_gone && x->in_len == 0) {
		ep->i_conn = ep->n;
		ep->p[ep->n].fd = x->fd;
		ep->p[ep->n++].events = POLLIN;
	}
	if (x->io.out >= 0) {
		ep->i_out = ep->n;
		ep->p[ep->n].fd = x->io.out;
		ep->p[ep->n++].events = POLLIN;
	}
	if (x->io.err >= 0) {
		ep->i_err = ep->n;
		ep->p[ep->n].fd = x->io.err;
		ep->p[ep->n++].events = POLLIN;
	}
	if (x->in_len && x->io.in >= 0) {
		ep->i_in = ep->n;
		ep->p[ep->n].fd = x->io.in;
		ep->p[ep->n++].events = POLLOUT;
	}
	if (!x->exited) {
		ep->i_sig = ep->n;
		ep->p[ep->n].fd = x->sfd;
		ep->p[ep->n++].events = POLLIN;
	}
	if (x->deadline && !x->exited) {
		uint64_t t = now_ms();

		ep->timeout = t >= x->deadline ? 0 : (int)(x->deadline - t);
	}
	if (x->exited) {
		/* The command is gone; give stragglers holding its pipes a
		 * moment, then stop waiting for them. */
		ep->timeout = 200;
	}
}

/* SIGCHLD: the command reaped if it exited (its stdin pipe closed). */
static void exec_reap(struct exec_run *x)
{
	struct signalfd_siginfo si;

	while (read(x->sfd, &si, sizeof(si)) == sizeof(si)) {
	}
	if (waitpid(x->pid, &x->status, WNOHANG) == x->pid) {
		x->exited = 1;
		registry_del(x->cfg, x->pid);
		if (x->io.in >= 0 && !x->io.pty)
			close(x->io.in);
		if (!x->io.pty)
			x->io.in = -1;
	}
}

/* The command's stdout or stderr (*pfd) to the client as frames of type;
 * at its end, closed. */
static void exec_output(struct exec_run *x, int *pfd, uint8_t type, uint8_t *buf)
{
	ssize_t k = read(*pfd, buf, DATA_CHUNK);

	if (k > 0) {
		if (frame_write(x->fd, type, buf, (size_t)k))
			x->client_gone = 1;
	} else if (k == 0 || errno != EINTR) {
		close(*pfd);
		if (pfd == &x->io.out && x->io.in == x->io.out)
			x->io.in = -1;
		*pfd = -1;
	}
}

/* The stdin frame held, written on as the command takes it. */
static void exec_stdin(struct exec_run *x)
{
	ssize_t k = write(x->io.in, x->inbuf + x->in_off, x->in_len);

	if (k > 0) {
		x->in_off += (size_t)k;
		x->in_len -= (size_t)k;
	} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
		x->in_len = 0; /* the command closed its stdin */
	}
}

/* The command killed: its process group, and itself. */
static void exec_kill(const struct exec_run *x)
{
	kill(-x->pid, SIGKILL);
	kill(x->pid, SIGKILL);
}

/* A frame from the client: stdin, its end, a signal, a terminal size. */
static void exec_client_frame(struct exec_run *x)
{
	uint8_t type;
	size_t len;
	const uint8_t *in = x->inbuf;

	if (frame_read(x->fd, &type, x->inbuf, FRAME_MAX, &len)) {
		/* The client left: nobody reads the output any more. */
		x->client_gone = 1;
		if (!x->exited)
			exec_kill(x);
		return;
	}
	switch (type) {
	case F_STDIN:
		if (x->io.in >= 0) {
			x->in_off = 0;
			x->in_len = len;
		}
		break;
	case F_STDIN_EOF:
		if (x->io.pty && x->io.in >= 0) {
			uint8_t eot = 4; /* ^D: EOF for the line discipline */

			write_full(x->io.in, &eot, 1);
		} else if (x->io.in >= 0) {
			close(x->io.in);
			x->io.in = -1;
		}
		break;
	case F_SIGNAL:
		if (len == 4 && !x->exited) {
			uint32_t sig = (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 |
				       (uint32_t)in[3] << 24;

			if (sig >= 1 && sig <= 64 && kill(-x->pid, (int)sig) < 0)
				kill(x->pid, (int)sig);
		}
		break;
	case F_RESIZE:
		if (len == 4 && x->io.pty && x->io.out >= 0) {
			struct winsize ws = { .ws_row = (unsigned short)(in[0] | in[1] << 8),
					      .ws_col = (unsigned short)(in[2] | in[3] << 8) };

			ioctl(x->io.out, TIOCSWINSZ, &ws);
		}
		break;
	default:
		break; /* unknown frames are ignored (forward compatible) */
	}
}

/* The command's run: its output to the client, the client's input to it,
 * until it exited and its pipes are done (or 200 ms quiet after its
 * exit), the deadline killing it. */
static void exec_loop(struct exec_run *x)
{
	static uint8_t buf[FRAME_MAX];
	struct exec_poll ep;

	while (x->io.out >= 0 || x->io.err >= 0 || !x->exited) {
		struct pollfd *p = ep.p;

		exec_poll_build(x, &ep);
		if (poll(p, (nfds_t)ep.n, ep.timeout) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (x->deadline && !x->exited && now_ms() >= x->deadline && !x->timed_out) {
			x->timed_out = 1;
			exec_kill(x);
		}
		if (ep.i_sig >= 0 && (p[ep.i_sig].revents & POLLIN))
			exec_reap(x);
		if (x->exited && ep.timeout == 200 && ep.n > 0) {
			int any = 0, i;

			for (i = 0; i < ep.n; i++)
				any |= p[i].revents;
			if (!any)
				break; /* 200 ms of silence after the exit */
		}
		if (ep.i_out >= 0 && (p[ep.i_out].revents & (POLLIN | POLLHUP | POLLERR)))
			exec_output(x, &x->io.out, F_STDOUT, buf);
		if (ep.i_err >= 0 && (p[ep.i_err].revents & (POLLIN | POLLHUP | POLLERR)))
			exec_output(x, &x->io.err, F_STDERR, buf);
		if (ep.i_in >= 0 && (p[ep.i_in].revents & (POLLOUT | POLLERR | POLLHUP)))
			exec_stdin(x);
		if (ep.i_conn >= 0 && (p[ep.i_conn].revents & (POLLIN | POLLHUP | POLLERR)))
			exec_client_frame(x);
	}
}

/* After the loop: the command killed and reaped if it still runs, its
 * pipes closed, and F_EXIT with its status to a client still there. */
static void exec_finish(struct exec_run *x)
{
	char meta[256];
	struct json_writer w;

	if (!x->exited) {
		kill(-x->pid, SIGKILL);
		waitpid(x->pid, &x->status, 0);
		registry_del(x->cfg, x->pid);
	}
	if (x->io.out >= 0)
		close(x->io.out);
	if (x->io.err >= 0)
		close(x->io.err);
	if (x->io.in >= 0 && x->io.in != x->io.out)
		close(x->io.in);
	close(x->sfd);
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	if (WIFSIGNALED(x->status)) {
		jw_key(&w, "signal");
		jw_int(&w, WTERMSIG(x->status));
		jw_key(&w, "exit_code");
		jw_int(&w, 128 + WTERMSIG(x->status));
	} else {
		jw_key(&w, "exit_code");
		jw_int(&w, WEXITSTATUS(x->status));
	}
	jw_key(&w, "timed_out");
	jw_bool(&w, x->timed_out);
	jw_obj_end(&w);
	if (!x->client_gone)
		send_json(x->fd, F_EXIT, &w);
}

static void op_exec(int fd, const struct api_request *r, const struct api_config *cfg)
{
	static uint8_t inbuf[FRAME_MAX];
	struct exec_run x = {
		.fd = fd,
		.cfg = cfg,
		.inbuf = inbuf,
		.deadline = r->timeout_ms ? now_ms() + (uint64_t)r->timeout_ms : 0,
	};
	char meta[256];
	struct json_writer w;
	sigset_t chld;
	int e = 0;
	char egress_buf[EGRESS_ENV][96];
	const char *extra[EGRESS_ENV + 1] = { NULL };
	unsigned port;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	x.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (cfg->egress_port && (port = cfg->egress_port()))
		spawn_proxy_env(port, egress_buf, extra);
	x.pid = spawn_command(r, extra, &x.io, &e);
	if (x.pid < 0) {
		char why[4200];

		send_error(fd, e, spawn_error_message(r, &x.io, e, why, sizeof(why)));
		close(x.sfd);
		return;
	}
	registry_add(cfg, x.pid, r);
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	jw_key(&w, "pid");
	jw_int(&w, x.pid);
	jw_obj_end(&w);
	send_json(fd, F_STARTED, &w);
	exec_loop(&x);
	exec_finish(&x);
}

/* ---- the connection -------------------------------------------------------- */

/* Detached processes live in the process manager (procs.c), which
 * outlives this connection: it takes the request and the connection. */
static void forward(int fd, const char *req, size_t len, const struct api_config *cfg)
{
	int e;

	if (cfg->procs_fd < 0) {
		send_error(fd, ENOTSUP, "this server keeps no detached processes");
		return;
	}
	e = procs_forward(cfg->procs_fd, fd, req, len);
	if (e < 0)
		send_error(fd, -e, "the process manager is not running");
}

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
		/* A version 1 client reads "api":1 (it checks that). */
		jw_key(&w, "api");
		jw_int(&w, r.version);
		jw_key(&w, "versions");
		jw_arr(&w);
		jw_int(&w, 1);
		jw_int(&w, 2);
		jw_arr_end(&w);
		jw_key(&w, "server");
		jw_str(&w, "vmm guest-init");
		/* What a client must not assume of an older guest-init:
		 * "container", exec's container members (root, uid, gid,
		 * groups, rlimits, no_new_privs) are honoured, not ignored. */
		jw_key(&w, "features");
		jw_arr(&w);
		jw_str(&w, "container");
		jw_arr_end(&w);
		jw_key(&w, "uptime_ms");
		jw_int(&w, (int64_t)(now_ms() - cfg->start_ms));
		jw_key(&w, "worker");
		jw_str(&w, cfg->spare ? "spare" : "forked");
		jw_obj_end(&w);
		send_json(fd, F_RESULT, &w);
		break;
	}
	case OP_EXEC:
		if (r.detach)
			forward(fd, req, len, cfg);
		else
			op_exec(fd, &r, cfg);
		break;
	case OP_PROCESSES:
	case OP_ATTACH:
	case OP_LOGS:
	case OP_SIGNAL:
	case OP_WAIT:
		forward(fd, req, len, cfg);
		break;
	case OP_WATCH: watch_serve(fd, &r); break;
	case OP_READ: files_read(fd, &r); break;
	case OP_WRITE: files_write(fd, &r); break;
	case OP_LIST: files_list(fd, &r); break;
	case OP_STAT: files_stat(fd, &r); break;
	case OP_MKDIR: files_mkdir(fd, &r); break;
	case OP_REMOVE: files_remove(fd, &r); break;
	case OP_RENAME: files_rename(fd, &r); break;
	case OP_READLINK: files_readlink(fd, &r); break;
	case OP_SYMLINK: files_symlink(fd, &r); break;
	case OP_TAR_GET: tar_get(fd, &r); break;
	case OP_TAR_PUT: tar_put(fd, &r); break;
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
		{
			/* Which worker served a clone's sync: "forked" means the
			 * snapshot held no spare (the restore helper says so). */
			static const char spare[] = "{\"worker\":\"spare\"}", forked[] = "{\"worker\":\"forked\"}";

			if (cfg->spare)
				frame_write(fd, F_RESULT, spare, sizeof(spare) - 1);
			else
				frame_write(fd, F_RESULT, forked, sizeof(forked) - 1);
		}
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
