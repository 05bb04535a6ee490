/* process.Process's messages (envd/process/process.proto) in Connect's
 * JSON (the protobuf JSON mapping: lowerCamelCase names, bytes as
 * base64, enums by name or number, 64-bit numbers as strings): the
 * StartRequest and ProcessSelector the gateway reads, the ProcessEvent
 * it writes. Pure (cli/e2b/e2b_priv.h). */
#include "cli/e2b/e2b_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void e2b_start_free(struct e2b_start *s)
{
	unsigned i;

	for (i = 0; i < s->nenvs; i++)
		free(s->envs[i]);
	s->nenvs = 0;
}

/* A uint32 field written as a number or a decimal string. */
static int get_u32(const struct json *o, const char *key, uint32_t *v)
{
	const struct json *j = json_get(o, key);
	char *end;
	unsigned long x;

	if (!j)
		return -ENOENT;
	if (j->type == JSON_NUM && j->num_integral && j->u.num >= 0 && j->u.num <= 4294967295.0) {
		*v = (uint32_t)j->u.num;
		return 0;
	}
	if (j->type != JSON_STR || !j->u.str.len || j->u.str.len > 10)
		return -EINVAL;
	x = strtoul(j->u.str.s, &end, 10);
	if (*end || x > 4294967295ul || j->u.str.s[0] < '0' || j->u.str.s[0] > '9')
		return -EINVAL;
	*v = (uint32_t)x;
	return 0;
}

static int parse_config(const struct json *p, struct e2b_start *s, const char **why)
{
	const struct json *args = json_get(p, "args"), *envs = json_get(p, "envs"), *k;

	if (json_get_str(p, "cmd", &s->cmd) || !s->cmd[0])
		return *why = "process.cmd: a command is required", -EINVAL;
	if (args && args->type != JSON_ARR)
		return *why = "process.args: an array of strings", -EINVAL;
	for (k = args ? args->u.kids.first : NULL; k; k = k->next) {
		if (k->type != JSON_STR)
			return *why = "process.args: an array of strings", -EINVAL;
		if (s->nargs == E2B_ARGS_MAX)
			return *why = "process.args: too many", -EINVAL;
		s->args[s->nargs++] = k->u.str.s;
	}
	if (envs && envs->type != JSON_OBJ)
		return *why = "process.envs: an object of strings", -EINVAL;
	for (k = envs ? envs->u.kids.first : NULL; k; k = k->next) {
		size_t kl = strlen(k->key);

		if (k->type != JSON_STR || !kl || strchr(k->key, '='))
			return *why = "process.envs: names without '=' and string values", -EINVAL;
		if (s->nenvs == E2B_ENVS_MAX)
			return *why = "process.envs: too many", -EINVAL;
		s->envs[s->nenvs] = malloc(kl + k->u.str.len + 2);
		if (!s->envs[s->nenvs])
			return *why = "out of memory", -ENOMEM;
		snprintf(s->envs[s->nenvs++], kl + k->u.str.len + 2, "%s=%s", k->key, k->u.str.s);
	}
	if (json_get(p, "cwd") && json_get_str(p, "cwd", &s->cwd))
		return *why = "process.cwd: a string", -EINVAL;
	return 0;
}

int e2b_pty_size(const struct json *pty, unsigned *rows, unsigned *cols)
{
	const struct json *size = pty ? json_get(pty, "size") : NULL;
	uint32_t v;

	*rows = 24, *cols = 80;
	if (!pty || pty->type != JSON_OBJ)
		return -EINVAL;
	if (size && get_u32(size, "rows", &v) == 0 && v && v < 65536)
		*rows = v;
	if (size && get_u32(size, "cols", &v) == 0 && v && v < 65536)
		*cols = v;
	return 0;
}

int e2b_start_parse(const struct json *root, struct e2b_start *s, const char **why)
{
	const struct json *p = root ? json_get(root, "process") : NULL, *pty;
	int r;

	memset(s, 0, sizeof(*s));
	*why = "";
	if (!root || root->type != JSON_OBJ)
		return *why = "a StartRequest object", -EINVAL;
	if (!p || p->type != JSON_OBJ)
		return *why = "process: a ProcessConfig is required", -EINVAL;
	if ((r = parse_config(p, s, why))) {
		e2b_start_free(s);
		return r;
	}
	if (json_get(root, "tag") && json_get_str(root, "tag", &s->tag))
		r = -EINVAL, *why = "tag: a string";
	if (json_get(root, "stdin") && json_get_bool(root, "stdin", &s->stdin_open))
		r = -EINVAL, *why = "stdin: a boolean";
	pty = json_get(root, "pty");
	if (!r && pty && pty->type != JSON_NULL) {
		s->pty = 1;
		if (e2b_pty_size(pty, &s->rows, &s->cols))
			r = -EINVAL, *why = "pty: a PTY object";
	}
	if (r)
		e2b_start_free(s);
	return r;
}

int e2b_selector(const struct json *root, uint32_t *pid, const char **tag)
{
	const struct json *p = root ? json_get(root, "process") : NULL;

	*pid = 0;
	*tag = NULL;
	if (!p || p->type != JSON_OBJ)
		return -EINVAL;
	if (get_u32(p, "pid", pid) == 0 && *pid)
		return 0;
	if (json_get_str(p, "tag", tag) == 0 && (*tag)[0])
		return 0;
	return -EINVAL;
}

int e2b_signal_parse(const struct json *root)
{
	const struct json *s = root ? json_get(root, "signal") : NULL;

	if (!s)
		return -EINVAL; /* SIGNAL_UNSPECIFIED */
	if (s->type == JSON_STR && !strcmp(s->u.str.s, "SIGNAL_SIGKILL"))
		return 9;
	if (s->type == JSON_STR && !strcmp(s->u.str.s, "SIGNAL_SIGTERM"))
		return 15;
	if (s->type == JSON_NUM && s->num_integral && (s->u.num == 9 || s->u.num == 15))
		return (int)s->u.num;
	return -EINVAL;
}

void e2b_event_start(struct json_writer *w, uint32_t pid)
{
	jw_obj(w);
	jw_key(w, "event");
	jw_obj(w);
	jw_key(w, "start");
	jw_obj(w);
	jw_key(w, "pid");
	jw_int(w, pid);
	jw_obj_end(w);
	jw_obj_end(w);
	jw_obj_end(w);
}

void e2b_event_data(struct json_writer *w, const char *stream, const void *data, size_t len, char *b64, size_t b64cap)
{
	if (4 * ((len + 2) / 3) + 1 > b64cap) {
		w->err = 1;
		return;
	}
	e2b_b64_encode(data, len, b64);
	jw_obj(w);
	jw_key(w, "event");
	jw_obj(w);
	jw_key(w, "data");
	jw_obj(w);
	jw_key(w, stream);
	jw_str(w, b64);
	jw_obj_end(w);
	jw_obj_end(w);
	jw_obj_end(w);
}

void e2b_event_keepalive(struct json_writer *w)
{
	jw_raw(w, "{\"event\":{\"keepalive\":{}}}");
}

/* EndEvent: envd's status is Go's ProcessState.String(): "exit status N",
 * or "signal: killed" with exit code -1. */
void e2b_event_end(struct json_writer *w, int exit_code, int signal)
{
	static const char *const names[] = { [1] = "hangup", [2] = "interrupt", [3] = "quit", [6] = "aborted",
					     [9] = "killed", [13] = "broken pipe", [15] = "terminated" };
	char status[64];

	if (signal > 0)
		snprintf(status, sizeof(status), "signal: %s",
			 signal < (int)(sizeof(names) / sizeof(names[0])) && names[signal] ? names[signal] : "unknown");
	else
		snprintf(status, sizeof(status), "exit status %d", exit_code);
	jw_obj(w);
	jw_key(w, "event");
	jw_obj(w);
	jw_key(w, "end");
	jw_obj(w);
	jw_key(w, "exitCode");
	jw_int(w, signal > 0 ? -1 : exit_code);
	jw_key(w, "exited");
	jw_bool(w, signal <= 0);
	jw_key(w, "status");
	jw_str(w, status);
	if (signal > 0 || exit_code) {
		jw_key(w, "error");
		jw_str(w, status);
	}
	jw_obj_end(w);
	jw_obj_end(w);
	jw_obj_end(w);
}
