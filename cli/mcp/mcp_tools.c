/* The MCP tools (cli/mcp/mcp_tools.h): schemas and handlers. Arguments reach
 * a handler already checked against its schema (cli/mcp/mcp.c), so the types
 * and bounds below hold; what a schema cannot say is checked here. */
#include "cli/mcp/mcp_tools.h"
#include "cli/mcp/mcp_api.h"
#include "cli/mcp/mcp_tokens.h"
#include "cli/drive/drive.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1u << 20)
#define EDIT_MAX (8u * MiB)      /* edit_file: the largest file it rewrites */
#define SEARCH_OUT_MAX (256u << 10)

void mcp_result_free(struct mcp_result *r)
{
	free(r->text);
	r->text = NULL;
}

int mcp_tool_fail(struct mcp_result *res, const char *fmt, ...)
{
	va_list ap;
	char *t = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&t, fmt, ap);
	va_end(ap);
	free(res->text);
	res->text = n < 0 ? NULL : t;
	res->len = n < 0 ? 0 : (size_t)n;
	res->is_error = 1;
	return 0;
}

static int set_text(struct mcp_result *res, char *text, size_t len)
{
	free(res->text);
	res->text = text;
	res->len = len;
	return 0;
}

/* ---- argument access (types already checked) ------------------------------ */

static const char *arg_str(const struct json *args, const char *key, const char *dflt)
{
	const char *s;

	return json_get_str(args, key, &s) ? dflt : s;
}

static size_t arg_strlen(const struct json *args, const char *key)
{
	const struct json *v = json_get(args, key);

	return v && v->type == JSON_STR ? v->u.str.len : 0;
}

static int64_t arg_int(const struct json *args, const char *key, int64_t dflt)
{
	int64_t v;

	return json_get_int(args, key, &v) ? dflt : v;
}

static int arg_bool(const struct json *args, const char *key, int dflt)
{
	int v;

	return json_get_bool(args, key, &v) ? dflt : v;
}

/* env: an array of "NAME=value" into a NULL-terminated list (in out[0..65)). */
static const char *const *arg_env(const struct json *args, const char **out, struct mcp_result *res, int *bad)
{
	const struct json *e = json_get(args, "env"), *x;
	size_t n = 0;

	*bad = 0;
	if (!e)
		return NULL;
	for (x = e->u.kids.first; x && n < 64; x = x->next) {
		const char *eq = strchr(x->u.str.s, '=');

		if (!eq || eq == x->u.str.s) {
			*bad = 1;
			mcp_tool_fail(res, "env: \"%s\" is not NAME=value", x->u.str.s);
			return NULL;
		}
		out[n++] = x->u.str.s;
	}
	out[n] = NULL;
	return out;
}

/* A process selector (an integer id, or a string: digits or a tag). */
static const char *arg_process(const struct json *args, char *buf, size_t len)
{
	const struct json *v = json_get(args, "process");

	if (v && v->type == JSON_NUM)
		snprintf(buf, len, "%lld", (long long)v->u.num);
	else if (v && v->type == JSON_STR)
		snprintf(buf, len, "%s", v->u.str.s);
	else
		return NULL;
	return buf;
}

static int utf8_ok(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		size_t k;
		unsigned cp;

		if (c < 0x80) {
			if (!c)
				return 0;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, cp = c & 0x07;
		else
			return 0;
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if (((unsigned char)s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | ((unsigned char)s[i + j] & 0x3f);
		}
		if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return 0;
		i += k + 1;
	}
	return 1;
}

/* ---- exec ------------------------------------------------------------------ */

static int exec_common(const struct sandbox_addr *a, const struct json *args, struct mcp_result *res,
		       const char *const *argv, uint64_t timeout_ms, size_t max_out, int for_search)
{
	const char *envv[65];
	struct mcp_exec e = { .argv = argv, .cwd = arg_str(args, "cwd", NULL), .timeout_ms = timeout_ms };
	char err[512], *o = NULL, *x = NULL, *text = NULL;
	size_t ol = 0, xl = 0;
	int bad, r;

	e.env = arg_env(args, envv, res, &bad);
	if (bad)
		return 0;
	if (json_get(args, "stdin")) {
		e.stdin_data = arg_str(args, "stdin", "");
		e.stdin_len = arg_strlen(args, "stdin");
	}
	if (capture_init(&e.out, max_out / 2, max_out / 2) || capture_init(&e.err, max_out / 4, max_out / 4)) {
		capture_free(&e.out);
		return -ENOMEM;
	}
	r = mcp_api_exec(a, &e, err, sizeof(err));
	if (r) {
		mcp_tool_fail(res, "%s", err);
		goto out;
	}
	o = capture_text(&e.out, &ol);
	x = capture_text(&e.err, &xl);
	if (!o || !x) {
		r = -ENOMEM;
		goto out;
	}
	if (for_search) {
		set_text(res, o, ol);
		o = NULL;
		snprintf(res->structured, sizeof(res->structured), "{\"exit_code\":%d,\"timed_out\":%s}", e.exit_code,
			 e.timed_out ? "true" : "false");
		if (e.timed_out)
			snprintf(res->note, sizeof(res->note), "[the search timed out: results are partial]");
		else if (xl && !ol)
			snprintf(res->note, sizeof(res->note), "%.500s", x);
		goto out;
	}
	{
		char head[160];
		int hn;

		if (e.timed_out)
			hn = snprintf(head, sizeof(head), "timed out after %llu s and was killed (exit code %d)\n",
				      (unsigned long long)(timeout_ms / 1000), e.exit_code);
		else if (e.signal)
			hn = snprintf(head, sizeof(head), "killed by signal %d (exit code %d)\n", e.signal, e.exit_code);
		else
			hn = snprintf(head, sizeof(head), "exit code %d\n", e.exit_code);
		if (asprintf(&text, "%s%s%s%s%s%s", head, ol ? "--- stdout ---\n" : "", o,
			     ol && o[ol - 1] != '\n' ? "\n" : "", xl ? "--- stderr ---\n" : "", x) < 0) {
			r = -ENOMEM;
			goto out;
		}
		(void)hn;
		set_text(res, text, strlen(text));
		text = NULL;
	}
	snprintf(res->structured, sizeof(res->structured),
		 "{\"exit_code\":%d,\"signal\":%d,\"timed_out\":%s,\"stdout_bytes\":%llu,\"stderr_bytes\":%llu,"
		 "\"truncated\":%s}",
		 e.exit_code, e.signal, e.timed_out ? "true" : "false", (unsigned long long)e.out.total,
		 (unsigned long long)e.err.total,
		 e.out.total > ol || e.err.total > xl ? "true" : "false");
	if (e.out.total + e.err.total > ol + xl || (e.out.total > e.out.head_cap + e.out.tail_cap) ||
	    (e.err.total > e.err.head_cap + e.err.tail_cap))
		snprintf(res->note, sizeof(res->note),
			 "[output truncated: stdout %llu bytes, stderr %llu bytes in all; the middle was omitted. "
			 "Redirect to a file and read_file it, or raise max_output_bytes]",
			 (unsigned long long)e.out.total, (unsigned long long)e.err.total);
	res->is_error = e.timed_out;
out:
	free(o);
	free(x);
	free(text);
	capture_free(&e.out);
	capture_free(&e.err);
	return r;
}

static int tool_exec(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const struct sandbox_addr *a = c->a;
	const char *argv[] = { "/bin/sh", "-c", arg_str(args, "command", ""), NULL };

	return exec_common(a, args, res, argv, (uint64_t)arg_int(args, "timeout_s", 60) * 1000,
			   (size_t)arg_int(args, "max_output_bytes", 65536), 0);
}

/* ---- detached processes ------------------------------------------------------ */

static int tool_start_process(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const struct sandbox_addr *a = c->a;
	const char *argv[] = { "/bin/sh", "-c", arg_str(args, "command", ""), NULL };
	const char *envv[65];
	struct exec_opts o = { .argv = argv, .cwd = arg_str(args, "cwd", NULL), .detach = 1,
			       .tag = arg_str(args, "tag", NULL) };
	char *fields = NULL, out[512], err[512], arena_buf[2048];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j;
	int64_t id = 0, pid = 0;
	int bad, r;

	o.env = arg_env(args, envv, res, &bad);
	if (bad)
		return 0;
	fields = malloc(REQUEST_MAX);
	if (!fields)
		return -ENOMEM;
	if (api_exec_fields(&o, fields, REQUEST_MAX)) {
		free(fields);
		return mcp_tool_fail(res, "the command is too long for one request (64 KiB)");
	}
	r = mcp_api_call(a, 2, fields, out, sizeof(out), err, sizeof(err));
	free(fields);
	if (r)
		return mcp_tool_fail(res, "%s", err);
	j = json_parse(out, strlen(out), &ar, &(const char *){ NULL });
	json_get_int(j, "id", &id);
	json_get_int(j, "pid", &pid);
	if (asprintf(&fields, "started process %lld (pid %lld%s%s); read its output with process_output "
			      "{\"process\":%lld}, stop it with kill_process",
		     (long long)id, (long long)pid, o.tag ? ", tag " : "", o.tag ? o.tag : "", (long long)id) < 0)
		return -ENOMEM;
	set_text(res, fields, strlen(fields));
	snprintf(res->structured, sizeof(res->structured), "%s", out);
	return 0;
}

static int tool_process_output(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const struct sandbox_addr *a = c->a;
	char sel[96], err[512], status[160], *text = NULL;
	struct mcp_logs l = { .sel = arg_process(args, sel, sizeof(sel)) };
	size_t max = (size_t)arg_int(args, "max_bytes", 65536);
	int r, more;

	l.offset[0] = (uint64_t)arg_int(args, "stdout_offset", 0);
	l.offset[1] = (uint64_t)arg_int(args, "stderr_offset", 0);
	if (capture_init(&l.out[0], max, 0) || capture_init(&l.out[1], max, 0)) {
		capture_free(&l.out[0]);
		return -ENOMEM;
	}
	r = mcp_api_logs(a, &l, err, sizeof(err));
	if (r) {
		mcp_tool_fail(res, "%s", err);
		r = 0;
		goto out;
	}
	if (!l.exited)
		snprintf(status, sizeof(status), "process %lld: running", (long long)l.id);
	else if (l.signal)
		snprintf(status, sizeof(status), "process %lld: exited, killed by signal %d%s", (long long)l.id, l.signal,
			 l.timed_out ? " (timed out)" : "");
	else
		snprintf(status, sizeof(status), "process %lld: exited with code %d", (long long)l.id, l.exit_code);
	more = l.out[0].total > l.out[0].head_len || l.out[1].total > l.out[1].head_len;
	if (asprintf(&text, "%s\n--- stdout ---\n%.*s%s--- stderr ---\n%.*s", status, (int)l.out[0].head_len,
		     l.out[0].head, l.out[0].head_len && l.out[0].head[l.out[0].head_len - 1] != '\n' ? "\n" : "",
		     (int)l.out[1].head_len, l.out[1].head) < 0) {
		r = -ENOMEM;
		goto out;
	}
	set_text(res, text, strlen(text));
	snprintf(res->note, sizeof(res->note),
		 "[next: stdout_offset=%llu stderr_offset=%llu%s%s]", (unsigned long long)l.next[0],
		 (unsigned long long)l.next[1], more ? "; more output is waiting: call again with these offsets" : "",
		 l.skipped ? "; some output was dropped by the ring before it was read" : "");
	snprintf(res->structured, sizeof(res->structured),
		 "{\"id\":%lld,\"state\":\"%s\",\"exited\":%s,\"exit_code\":%d,\"signal\":%d,\"stdout_offset\":%llu,"
		 "\"stderr_offset\":%llu,\"more\":%s,\"skipped\":%llu}",
		 (long long)l.id, l.exited ? "exited" : "running", l.exited ? "true" : "false", l.exited ? l.exit_code : -1,
		 l.signal, (unsigned long long)l.next[0], (unsigned long long)l.next[1], more ? "true" : "false",
		 (unsigned long long)l.skipped);
out:
	capture_free(&l.out[0]);
	capture_free(&l.out[1]);
	return r;
}

static int tool_kill_process(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const struct sandbox_addr *a = c->a;
	static const struct { const char *name; int sig; } sigs[] = {
		{ "TERM", SIGTERM }, { "KILL", SIGKILL }, { "INT", SIGINT }, { "HUP", SIGHUP },
		{ "QUIT", SIGQUIT }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
	};
	const char *name = arg_str(args, "signal", "TERM");
	char sel[96], fields[256], out[256], err[512], *text;
	struct json_writer w;
	int sig = SIGTERM;
	size_t i;

	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcmp(name, sigs[i].name))
			sig = sigs[i].sig;
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "signal");
	if (api_selector(&w, arg_process(args, sel, sizeof(sel))))
		return mcp_tool_fail(res, "process: give an id or a tag");
	jw_key(&w, "signal");
	jw_int(&w, sig);
	if (!jw_done(&w))
		return mcp_tool_fail(res, "process: too long");
	if (mcp_api_call(a, 2, fields, out, sizeof(out), err, sizeof(err)))
		return mcp_tool_fail(res, "process %s: %s", sel, err);
	if (asprintf(&text, "sent SIG%s to process %s; its output and exit status stay readable with process_output",
		     name, sel) < 0)
		return -ENOMEM;
	return set_text(res, text, strlen(text));
}

/* ---- files ---------------------------------------------------------------- */

/* What a drive-side failure says (the guest's come with their own text). */
static const char *drive_strerror(int r)
{
	if (r == -EXDEV)
		return "it leads out of the drive (a symbolic link to outside it); refused";
	if (r == -ELOOP)
		return "a symbolic link, not a regular file";
	if (r == -EINVAL)
		return "not a regular file";
	if (r == -ENOSPC)
		return "the drive's size limit is reached (No space left on device); nothing changed";
	return strerror(-r);
}

/* A file's bytes, through the guest or beneath the drive (c->drive). */
static int file_read(const struct mcp_call *c, const char *path, uint64_t off, size_t max, int nofollow, char **data,
		     size_t *len, uint64_t *size, int64_t *mode, int64_t *uid, int64_t *gid, char *err, size_t errlen)
{
	int r;

	if (!c->drive)
		return mcp_api_read(c->a, path, off, max, data, len, size, mode, uid, gid, err, errlen);
	if (uid)
		*uid = *gid = -1;
	if ((r = drive_file_read(c->drive, c->rel, off, max, nofollow, data, len, size, mode)))
		snprintf(err, errlen, "%s", drive_strerror(r));
	return r;
}

static int file_write(const struct mcp_call *c, const char *path, const void *data, size_t len, int64_t mode,
		      int parents, int64_t uid, int64_t gid, char *err, size_t errlen)
{
	int r;

	if (!c->drive)
		return mcp_api_write(c->a, path, data, len, mode, parents, uid, gid, err, errlen);
	if ((r = drive_file_write(c->drive, c->rel, data, len, mode, parents)))
		snprintf(err, errlen, "%s", drive_strerror(r));
	return r;
}

static int tool_read_file(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const char *path = arg_str(args, "path", "");
	uint64_t off = (uint64_t)arg_int(args, "offset", 0), size = 0;
	size_t max = (size_t)arg_int(args, "length", 256 << 10), len;
	int b64 = !strcmp(arg_str(args, "encoding", "utf-8"), "base64");
	char err[512], *data;
	int64_t mode;

	if (file_read(c, path, off, max, 0, &data, &len, &size, &mode, NULL, NULL, err, sizeof(err)))
		return mcp_tool_fail(res, "%s: %s", path, err);
	if (b64) {
		char *enc = malloc(4 * ((len + 2) / 3) + 1);

		if (!enc) {
			free(data);
			return -ENOMEM;
		}
		EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)data, (int)len);
		free(data);
		set_text(res, enc, strlen(enc));
	} else if (!utf8_ok(data, len)) {
		free(data);
		return mcp_tool_fail(res, "%s: not UTF-8 text (%llu bytes); read it with \"encoding\":\"base64\"", path,
				     (unsigned long long)size);
	} else {
		set_text(res, data, len);
	}
	if (off + len < size)
		snprintf(res->note, sizeof(res->note),
			 "[truncated: bytes %llu..%llu of %llu shown; read on with \"offset\":%llu]",
			 (unsigned long long)off, (unsigned long long)(off + len), (unsigned long long)size,
			 (unsigned long long)(off + len));
	snprintf(res->structured, sizeof(res->structured),
		 "{\"path_size\":%llu,\"offset\":%llu,\"bytes\":%zu,\"truncated\":%s,\"encoding\":\"%s\",\"mode\":%lld}",
		 (unsigned long long)size, (unsigned long long)off, len, off + len < size ? "true" : "false",
		 b64 ? "base64" : "utf-8", (long long)mode);
	return 0;
}

static int tool_write_file(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const char *path = arg_str(args, "path", ""), *content = arg_str(args, "content", "");
	size_t len = arg_strlen(args, "content");
	char err[512], *text, *dec = NULL;
	int r;

	if (!strcmp(arg_str(args, "encoding", "utf-8"), "base64")) {
		int n;

		while (len && (content[len - 1] == '\n' || content[len - 1] == '\r'))
			len--;
		dec = malloc(len / 4 * 3 + 3);
		if (!dec)
			return -ENOMEM;
		n = len % 4 ? -1 : EVP_DecodeBlock((unsigned char *)dec, (const unsigned char *)content, (int)len);
		if (n < 0) {
			free(dec);
			return mcp_tool_fail(res, "content: not valid base64");
		}
		/* EVP_DecodeBlock counts the padding's zero bytes: take them off */
		if (len >= 1 && content[len - 1] == '=')
			n--;
		if (len >= 2 && content[len - 2] == '=')
			n--;
		content = dec;
		len = (size_t)n;
	}
	r = file_write(c, path, content, len, arg_int(args, "mode", -1), arg_bool(args, "create_dirs", 1), -1, -1, err,
		       sizeof(err));
	free(dec);
	if (r)
		return mcp_tool_fail(res, "%s: %s", path, err);
	if (asprintf(&text, "wrote %zu bytes to %s", len, path) < 0)
		return -ENOMEM;
	snprintf(res->structured, sizeof(res->structured), "{\"bytes\":%zu}", len);
	return set_text(res, text, strlen(text));
}

/* edit_file's check through the guest: the write replaces what is at path,
 * so a symbolic link there (which would become a file) is refused. 0 or
 * a failure set in res (1). */
static int edit_target_ok(const struct mcp_call *c, const char *path, struct mcp_result *res)
{
	char fields[8192], st[4096], arena_buf[4096], err[512];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const char *type = "";
	struct json_writer w;

	if (c->drive)
		return 0; /* beneath the drive: the read below refuses a link (nofollow) */
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "stat");
	jw_key(&w, "path");
	jw_str(&w, path);
	if (!jw_done(&w))
		return !mcp_tool_fail(res, "path: too long");
	if (mcp_api_call(c->a, 1, fields, st, sizeof(st), err, sizeof(err)))
		return !mcp_tool_fail(res, "%s: %s", path, err);
	json_get_str(json_parse(st, strlen(st), &ar, &(const char *){ NULL }), "type", &type);
	if (strcmp(type, "file"))
		return !mcp_tool_fail(res, "%s: a %s, not a regular file%s; nothing changed", path, type,
				      !strcmp(type, "symlink") ? " (edit the file it points to)" : "");
	return 0;
}

static int tool_edit_file(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const char *path = arg_str(args, "path", ""), *old = arg_str(args, "old_string", ""),
		   *new = arg_str(args, "new_string", "");
	size_t ol = arg_strlen(args, "old_string"), nl = arg_strlen(args, "new_string"), len, count = 0, outlen;
	int all = arg_bool(args, "replace_all", 0);
	char err[512], *data, *out, *p, *q, *text;
	int64_t mode, uid, gid;
	uint64_t size;
	int r;

	if (ol == nl && !memcmp(old, new, ol))
		return mcp_tool_fail(res, "old_string and new_string are the same: nothing to do");
	if (edit_target_ok(c, path, res))
		return 0;
	if (file_read(c, path, 0, EDIT_MAX, 1, &data, &len, &size, &mode, &uid, &gid, err, sizeof(err)))
		return mcp_tool_fail(res, "%s: %s", path, err);
	if (size > EDIT_MAX || len < size) {
		free(data);
		return mcp_tool_fail(res, "%s: %llu bytes, larger than edit_file takes (%u MiB)", path,
				     (unsigned long long)size, EDIT_MAX / MiB);
	}
	for (p = data; (q = memmem(p, len - (size_t)(p - data), old, ol)); p = q + ol)
		count++;
	if (!count) {
		free(data);
		return mcp_tool_fail(res, "%s: old_string was not found (it must match exactly, whitespace and "
					  "line breaks included); nothing changed", path);
	}
	if (count > 1 && !all) {
		free(data);
		return mcp_tool_fail(res, "%s: old_string occurs %zu times; include more of the surrounding text "
					  "to make it unique, or set replace_all; nothing changed", path, count);
	}
	if (nl > ol && count > (SIZE_MAX - len) / (nl - ol)) {
		free(data);
		return mcp_tool_fail(res, "%s: the result would be too large", path);
	}
	outlen = len - count * ol + count * nl;
	out = malloc(outlen + 1);
	if (!out) {
		free(data);
		return -ENOMEM;
	}
	{
		char *w = out;

		for (p = data; (q = memmem(p, len - (size_t)(p - data), old, ol)); p = q + ol) {
			memcpy(w, p, (size_t)(q - p));
			w += q - p;
			memcpy(w, new, nl);
			w += nl;
		}
		memcpy(w, p, len - (size_t)(p - data));
	}
	free(data);
	/* The same mode and owner as before: the API's write replaces the
	 * file with a new one. */
	r = file_write(c, path, out, outlen, mode >= 0 ? (mode & 07777) : -1, 0, uid, gid, err, sizeof(err));
	free(out);
	if (r)
		return mcp_tool_fail(res, "%s: %s", path, err);
	if (asprintf(&text, "replaced %zu occurrence%s in %s (%zu bytes now)", count, count == 1 ? "" : "s", path,
		     outlen) < 0)
		return -ENOMEM;
	snprintf(res->structured, sizeof(res->structured), "{\"replacements\":%zu,\"bytes\":%zu}", count, outlen);
	return set_text(res, text, strlen(text));
}

static int ent_cmp(const void *x, const void *y)
{
	return strcmp(((const struct drive_dirent *)x)->name, ((const struct drive_dirent *)y)->name);
}

/* The guest's listing of path (API "list", in frames) into ents[0..max):
 * 0 with *n kept and *total seen, -errno, or 1 with a failure set in res. */
static int list_guest(const struct sandbox_addr *a, const char *path, size_t max, struct drive_dirent *ents,
		      size_t *n, size_t *total, struct mcp_result *res)
{
	char fields[8192], *buf = malloc(FRAME_MAX + 1), *arena = malloc(FRAME_MAX * 3);
	struct api_error e;
	struct json_writer w;
	int fd = -1, r = 0, more = 1;

	if (!buf || !arena) {
		r = -ENOMEM;
		goto out;
	}
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "list");
	jw_key(&w, "path");
	jw_str(&w, path);
	fd = api_open(a, jw_done(&w) ? fields : "");
	if (fd < 0) {
		r = !mcp_tool_fail(res, "cannot reach the sandbox API: %s", strerror(-fd));
		goto out;
	}
	while (more) {
		struct json_arena ar = { arena, FRAME_MAX * 3, 0 };
		const struct json *j, *list, *x;
		int k = api_result(fd, buf, FRAME_MAX + 1, &e);

		if (k) {
			if (k == -1)
				mcp_tool_fail(res, "%s: %s (%s)", path, e.message[0] ? e.message : strerror(e.eno), e.name);
			else
				mcp_tool_fail(res, "%s: the sandbox closed the connection", path);
			r = 1;
			goto out;
		}
		j = json_parse(buf, strlen(buf), &ar, &(const char *){ NULL });
		list = j ? json_get(j, "entries") : NULL;
		if (!list || list->type != JSON_ARR || json_get_bool(j, "more", &more)) {
			r = !mcp_tool_fail(res, "%s: a malformed listing", path);
			goto out;
		}
		for (x = list->u.kids.first; x; x = x->next, ++*total) {
			const char *name = NULL, *type = "?";
			int64_t size = 0;

			if (*n == max || json_get_str(x, "name", &name))
				continue;
			json_get_str(x, "type", &type);
			json_get_int(x, "size", &size);
			if (!(ents[*n].name = strdup(name))) {
				r = -ENOMEM;
				goto out;
			}
			ents[*n].type = !strcmp(type, "dir") ? 'd' : !strcmp(type, "symlink") ? 'l' : !strcmp(type, "file") ? 'f' : '?';
			ents[*n].size = size;
			++*n;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(arena);
	return r;
}

/* The listing's text: "name/", "name@", "name<TAB>size", sorted. */
static int list_text(struct drive_dirent *ents, size_t n, size_t total, struct mcp_result *res)
{
	size_t i, tl = 0, cap = 64;
	char *text;

	qsort(ents, n, sizeof(*ents), ent_cmp);
	for (i = 0; i < n; i++)
		cap += strlen(ents[i].name) + 32;
	if (!(text = malloc(cap)))
		return -ENOMEM;
	text[0] = '\0';
	for (i = 0; i < n; i++) {
		if (ents[i].type == 'f')
			tl += (size_t)snprintf(text + tl, cap - tl, "%s\t%lld\n", ents[i].name, ents[i].size);
		else
			tl += (size_t)snprintf(text + tl, cap - tl, "%s%s\n", ents[i].name,
					       ents[i].type == 'd' ? "/" : ents[i].type == 'l' ? "@" : "");
	}
	set_text(res, text, tl);
	if (total > n)
		snprintf(res->note, sizeof(res->note), "[%zu of %zu entries shown; raise max_entries to see more]", n,
			 total);
	else if (!n)
		snprintf(res->note, sizeof(res->note), "[the directory is empty]");
	snprintf(res->structured, sizeof(res->structured), "{\"entries\":%zu,\"total\":%zu}", n, total);
	return 0;
}

static int tool_list_dir(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const char *path = arg_str(args, "path", "");
	size_t max = (size_t)arg_int(args, "max_entries", 1000), n = 0, total = 0, i;
	struct drive_dirent *ents = calloc(max, sizeof(*ents));
	int r;

	if (!ents)
		return -ENOMEM;
	if (c->drive) {
		r = drive_file_list(c->drive, c->rel, max, ents, &n, &total);
		if (r && r != -ENOMEM)
			r = !mcp_tool_fail(res, "%s: %s", path, drive_strerror(r));
	} else {
		r = list_guest(c->a, path, max, ents, &n, &total, res);
	}
	if (!r)
		r = list_text(ents, n, total, res);
	for (i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	return r < 0 ? r : 0;
}

/* search_files runs find (and grep) in the sandbox: the arguments go in
 * as the script's positional parameters, never into its text, so nothing
 * in them is shell syntax. /proc, /sys and /dev are skipped. */
static const char search_script[] =
	"set -f; dir=$1 glob=$2 re=$3 max=$4 ci=$5\n"
	"nameop=-name; [ \"$ci\" = 1 ] && nameop=-iname\n"
	"gi=; [ \"$ci\" = 1 ] && gi=-i\n"
	"if [ -n \"$glob\" ]; then set -- \"$nameop\" \"$glob\"; else set --; fi\n"
	"if [ -z \"$re\" ]; then\n"
	"  find \"$dir\" \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \"$@\" -print 2>/dev/null\n"
	"else\n"
	"  find \"$dir\" \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f \"$@\" -print 2>/dev/null |\n"
	"  while IFS= read -r f; do grep -nH $gi -E -e \"$re\" -- \"$f\" 2>/dev/null; done\n"
	"fi | cut -c1-400 | head -n \"$max\"\n";

static int tool_search_files(const struct mcp_call *c, const struct json *args, struct mcp_result *res)
{
	const struct sandbox_addr *a = c->a;
	int64_t max = arg_int(args, "max_results", 200);
	char maxs[24];
	const char *argv[] = {
		"/bin/sh", "-c", search_script, "vmm-search", arg_str(args, "path", "/"), arg_str(args, "name_glob", ""),
		arg_str(args, "content_regex", ""), maxs, arg_bool(args, "case_insensitive", 0) ? "1" : "0", NULL,
	};
	size_t lines = 0, i;
	int r;

	snprintf(maxs, sizeof(maxs), "%lld", (long long)max + 1); /* one more tells us there are more */
	r = exec_common(a, &(struct json){ .type = JSON_OBJ }, res, argv,
			(uint64_t)arg_int(args, "timeout_s", 30) * 1000, SEARCH_OUT_MAX, 1);
	if (r || res->is_error)
		return r;
	for (i = 0; i < res->len; i++)
		if (res->text[i] == '\n' && ++lines == (size_t)max) {
			res->len = i + 1;
			res->text[res->len] = '\0';
			snprintf(res->note, sizeof(res->note),
				 "[more than %lld results: narrow the search or raise max_results]", (long long)max);
			break;
		}
	if (!res->len && !res->note[0])
		snprintf(res->note, sizeof(res->note), "[no matches]");
	return 0;
}

/* ---- the table ------------------------------------------------------------------ */

#define ENV_SCHEMA                                                                                             \
	"\"env\":{\"type\":\"array\",\"maxItems\":64,\"items\":{\"type\":\"string\",\"minLength\":2,"        \
	"\"maxLength\":32768},\"description\":\"NAME=value strings added to the environment\"}"
#define CWD_SCHEMA                                                                                             \
	"\"cwd\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,\"description\":\"working directory " \
	"(absolute; default /root)\"}"
#define PROCESS_SCHEMA                                                                                         \
	"\"process\":{\"type\":[\"integer\",\"string\"],\"minimum\":1,\"minLength\":1,\"maxLength\":64,"       \
	"\"description\":\"the process id start_process returned, or its tag\"}"
#define PATH_SCHEMA(what)                                                                                      \
	"\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,\"description\":\"" what "\"}"

const struct mcp_tool mcp_tools[] = {
	{
		.name = "exec",
		.title = "Run a command",
		.description = "Runs a shell command (/bin/sh -c) in the sandbox as root and returns its exit code, "
			       "stdout and stderr once it ends. Long output keeps its beginning and end.",
		.schema = "{\"type\":\"object\",\"properties\":{"
			  "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":60000,"
			  "\"description\":\"the shell command line\"}," CWD_SCHEMA "," ENV_SCHEMA ","
			  "\"stdin\":{\"type\":\"string\",\"maxLength\":1048576,\"description\":\"text for its stdin "
			  "(default: none)\"},"
			  "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":600,\"default\":60,"
			  "\"description\":\"kill it after this many seconds\"},"
			  "\"max_output_bytes\":{\"type\":\"integer\",\"minimum\":1024,\"maximum\":1048576,"
			  "\"default\":65536,\"description\":\"output kept from stdout (stderr: half as much)\"}},"
			  "\"required\":[\"command\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_EXEC,
		.destructive = 1,
		.run = tool_exec,
	},
	{
		.name = "start_process",
		.title = "Start a background process",
		.description = "Starts a shell command in the background (a dev server, a watcher, a long build): it "
			       "keeps running after this call, its output is kept (the newest 1 MiB of each stream). "
			       "Returns its id; read its output with process_output, stop it with kill_process.",
		.schema = "{\"type\":\"object\",\"properties\":{"
			  "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":60000}," CWD_SCHEMA
			  "," ENV_SCHEMA ","
			  "\"tag\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,\"description\":\"a name for it "
			  "(letters, digits, _ . -; not starting with a digit)\"}},"
			  "\"required\":[\"command\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_PROCESSES,
		.run = tool_start_process,
	},
	{
		.name = "process_output",
		.title = "Read a background process's output",
		.description = "Returns what a process started with start_process wrote since the given offsets, and "
			       "whether it still runs (or its exit code). Pass back the offsets it returns to read only "
			       "what is new.",
		.schema = "{\"type\":\"object\",\"properties\":{" PROCESS_SCHEMA ","
			  "\"stdout_offset\":{\"type\":\"integer\",\"minimum\":0,\"default\":0},"
			  "\"stderr_offset\":{\"type\":\"integer\",\"minimum\":0,\"default\":0},"
			  "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1024,\"maximum\":1048576,\"default\":65536}},"
			  "\"required\":[\"process\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_PROCESSES,
		.read_only = 1,
		.run = tool_process_output,
	},
	{
		.name = "kill_process",
		.title = "Signal a background process",
		.description = "Sends a signal (default TERM) to a process started with start_process and its children.",
		.schema = "{\"type\":\"object\",\"properties\":{" PROCESS_SCHEMA ","
			  "\"signal\":{\"type\":\"string\",\"enum\":[\"TERM\",\"KILL\",\"INT\",\"HUP\",\"QUIT\",\"USR1\","
			  "\"USR2\"],\"default\":\"TERM\"}},"
			  "\"required\":[\"process\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_PROCESSES,
		.destructive = 1,
		.run = tool_kill_process,
	},
	{
		.name = "read_file",
		.title = "Read a file",
		.description = "Returns a file's content (UTF-8 text, or base64), up to length bytes from offset.",
		.schema = "{\"type\":\"object\",\"properties\":{" PATH_SCHEMA("absolute path") ","
			  "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"default\":0},"
			  "\"length\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,\"default\":262144},"
			  "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],\"default\":\"utf-8\"}},"
			  "\"required\":[\"path\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_FILES_READ,
		.read_only = 1,
		.drive_ok = MCP_DRIVE_READ,
		.run = tool_read_file,
	},
	{
		.name = "write_file",
		.title = "Write a file",
		.description = "Creates or replaces a file with the given content, atomically (a reader never sees "
			       "half of it). Missing parent directories are created.",
		.schema = "{\"type\":\"object\",\"properties\":{" PATH_SCHEMA("absolute path") ","
			  "\"content\":{\"type\":\"string\",\"maxLength\":4194304},"
			  "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],\"default\":\"utf-8\"},"
			  "\"mode\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":4095,\"default\":420,"
			  "\"description\":\"permission bits (420 = 0644)\"},"
			  "\"create_dirs\":{\"type\":\"boolean\",\"default\":true}},"
			  "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_FILES_WRITE,
		.destructive = 1,
		.drive_ok = MCP_DRIVE_WRITE,
		.run = tool_write_file,
	},
	{
		.name = "edit_file",
		.title = "Edit a file",
		.description = "Replaces old_string with new_string in a file. old_string must match exactly and "
			       "occur once (or set replace_all); otherwise nothing changes. Mode and owner are kept.",
		.schema = "{\"type\":\"object\",\"properties\":{" PATH_SCHEMA("absolute path") ","
			  "\"old_string\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1048576},"
			  "\"new_string\":{\"type\":\"string\",\"maxLength\":1048576},"
			  "\"replace_all\":{\"type\":\"boolean\",\"default\":false}},"
			  "\"required\":[\"path\",\"old_string\",\"new_string\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_FILES_WRITE,
		.destructive = 1,
		.drive_ok = MCP_DRIVE_WRITE,
		.run = tool_edit_file,
	},
	{
		.name = "list_dir",
		.title = "List a directory",
		.description = "Lists a directory's entries, sorted: \"name/\" for a directory, \"name@\" for a "
			       "symbolic link, \"name<TAB>size\" for a file.",
		.schema = "{\"type\":\"object\",\"properties\":{" PATH_SCHEMA("absolute path of a directory") ","
			  "\"max_entries\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10000,\"default\":1000}},"
			  "\"required\":[\"path\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_FILES_READ,
		.read_only = 1,
		.drive_ok = MCP_DRIVE_READ,
		.run = tool_list_dir,
	},
	{
		.name = "search_files",
		.title = "Search files",
		.description = "Finds files under path by name (a glob like \"*.py\") and/or content (an extended "
			       "regular expression): \"path\" lines for a name search, \"path:line:text\" for a "
			       "content search. /proc, /sys and /dev are skipped.",
		.schema = "{\"type\":\"object\",\"properties\":{" PATH_SCHEMA("the directory to search (absolute)") ","
			  "\"name_glob\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":256},"
			  "\"content_regex\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1024},"
			  "\"case_insensitive\":{\"type\":\"boolean\",\"default\":false},"
			  "\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,\"default\":200},"
			  "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":120,\"default\":30}},"
			  "\"required\":[\"path\"],\"additionalProperties\":false}",
		.scope = TOKEN_SCOPE_FILES_READ,
		.read_only = 1,
		.run = tool_search_files,
	},
};
const size_t mcp_nr_tools = sizeof(mcp_tools) / sizeof(mcp_tools[0]);

const struct mcp_tool *mcp_tool_find(const char *name)
{
	size_t i;

	for (i = 0; i < mcp_nr_tools; i++)
		if (!strcmp(mcp_tools[i].name, name))
			return &mcp_tools[i];
	return NULL;
}
