/* config.json (OCI runtime spec, config.md) into checked types. Every rule
 * cited here is the runtime spec's; a member vmm does not use is skipped
 * unless its shape matters to one it does. */
#include "cli/oci/oci_spec.h"
#include "cli/util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
	const char *name;
	int res;
} rlimit_names[] = {
	{ "RLIMIT_AS", RLIMIT_AS },		{ "RLIMIT_CORE", RLIMIT_CORE },
	{ "RLIMIT_CPU", RLIMIT_CPU },		{ "RLIMIT_DATA", RLIMIT_DATA },
	{ "RLIMIT_FSIZE", RLIMIT_FSIZE },	{ "RLIMIT_LOCKS", RLIMIT_LOCKS },
	{ "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK },	{ "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE },
	{ "RLIMIT_NICE", RLIMIT_NICE },		{ "RLIMIT_NOFILE", RLIMIT_NOFILE },
	{ "RLIMIT_NPROC", RLIMIT_NPROC },	{ "RLIMIT_RSS", RLIMIT_RSS },
	{ "RLIMIT_RTPRIO", RLIMIT_RTPRIO },	{ "RLIMIT_RTTIME", RLIMIT_RTTIME },
	{ "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING }, { "RLIMIT_STACK", RLIMIT_STACK },
};

int oci_rlimit_from_name(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(rlimit_names) / sizeof(rlimit_names[0]); i++)
		if (!strcmp(name, rlimit_names[i].name))
			return rlimit_names[i].res;
	return -1;
}

/* A non-negative integer; values past 2^63 (Go's uint64 max for
 * "unlimited") read as UINT64_MAX. */
static int num_u64(const struct json *v, uint64_t *out)
{
	if (!v || v->type != JSON_NUM || !(v->u.num >= 0) || v->u.num != v->u.num)
		return -1;
	if (v->u.num >= 9223372036854775808.0) {
		*out = UINT64_MAX;
		return 0;
	}
	if (v->u.num != (double)(uint64_t)v->u.num)
		return -1;
	*out = (uint64_t)v->u.num;
	return 0;
}

static int num_u32(const struct json *v, uint32_t *out)
{
	uint64_t n;

	if (num_u64(v, &n) || n > UINT32_MAX)
		return -1;
	*out = (uint32_t)n;
	return 0;
}

/* An absolute path with no ".." component (mount destinations, cwd). */
static int abs_clean(const char *p)
{
	const char *c;

	if (!p || p[0] != '/')
		return 0;
	for (c = p; (c = strstr(c, "..")); c += 2)
		if ((c == p || c[-1] == '/') && (c[2] == '/' || c[2] == '\0'))
			return 0;
	return 1;
}

/* An array of strings into out[0..max) (NULL-terminated). 0, -1 wrong
 * shape, -2 too many. */
static int str_array(const struct json *v, const char **out, unsigned max, unsigned *n)
{
	const struct json *e;

	*n = 0;
	if (!v || v->type != JSON_ARR)
		return -1;
	for (e = v->u.kids.first; e; e = e->next) {
		if (e->type != JSON_STR)
			return -1;
		if (*n == max)
			return -2;
		out[(*n)++] = e->u.str.s;
	}
	out[*n] = NULL;
	return 0;
}

static int env_array(const struct json *v, const char **out, unsigned *n, const char *what, char *why,
		     size_t whylen)
{
	unsigned i;
	int r;

	if (!v) {
		*n = 0;
		out[0] = NULL;
		return 0;
	}
	r = str_array(v, out, OCI_MAX_ENV, n);
	if (r == -2)
		return cli_seterr(why, whylen, -EINVAL, "%s: more than %d variables", what, OCI_MAX_ENV);
	if (r)
		return cli_seterr(why, whylen, -EINVAL, "%s: must be an array of strings", what);
	for (i = 0; i < *n; i++)
		if (!strchr(out[i], '=') || out[i][0] == '=')
			return cli_seterr(why, whylen, -EINVAL, "%s: \"%s\" is not NAME=VALUE", what, out[i]);
	return 0;
}

int oci_process_parse(const struct json *obj, struct oci_process *p, char *why, size_t whylen)
{
	const struct json *v, *e;
	int r;

	memset(p, 0, sizeof(*p));
	if (!obj || obj->type != JSON_OBJ)
		return cli_seterr(why, whylen, -EINVAL, "process: must be an object");
	if ((v = json_get(obj, "terminal")) && json_get_bool(obj, "terminal", &p->terminal))
		return cli_seterr(why, whylen, -EINVAL, "process.terminal: must be true or false");
	r = str_array(json_get(obj, "args"), p->args, OCI_MAX_ARGS, &p->argc);
	if (r == -2)
		return cli_seterr(why, whylen, -EINVAL, "process.args: more than %d arguments", OCI_MAX_ARGS);
	if (r || p->argc == 0 || !p->args[0][0])
		return cli_seterr(why, whylen, -EINVAL, "process.args: must be a non-empty array of strings");
	if (env_array(json_get(obj, "env"), p->env, &p->envc, "process.env", why, whylen))
		return -EINVAL;
	/* config.md: cwd is REQUIRED and MUST be an absolute path. */
	if (json_get_str(obj, "cwd", &p->cwd) || !abs_clean(p->cwd))
		return cli_seterr(why, whylen, -EINVAL, "process.cwd: must be an absolute path");
	if ((v = json_get(obj, "user"))) {
		if (v->type != JSON_OBJ)
			return cli_seterr(why, whylen, -EINVAL, "process.user: must be an object");
		if ((json_get(v, "uid") && num_u32(json_get(v, "uid"), &p->uid)) ||
		    (json_get(v, "gid") && num_u32(json_get(v, "gid"), &p->gid)))
			return cli_seterr(why, whylen, -EINVAL, "process.user: uid and gid must be integers 0..4294967295");
		if ((e = json_get(v, "additionalGids"))) {
			if (e->type != JSON_ARR)
				return cli_seterr(why, whylen, -EINVAL, "process.user.additionalGids: must be an array");
			for (e = e->u.kids.first; e; e = e->next) {
				if (p->ngroups == OCI_MAX_GROUPS)
					return cli_seterr(why, whylen, -EINVAL, "process.user.additionalGids: more than %d",
						   OCI_MAX_GROUPS);
				if (num_u32(e, &p->groups[p->ngroups++]))
					return cli_seterr(why, whylen, -EINVAL, "process.user.additionalGids: must be integers");
			}
		}
		if (json_get(v, "username"))
			return cli_seterr(why, whylen, -EINVAL, "process.user.username: is for Windows");
	}
	if (json_get(obj, "noNewPrivileges") && json_get_bool(obj, "noNewPrivileges", &p->no_new_privs))
		return cli_seterr(why, whylen, -EINVAL, "process.noNewPrivileges: must be true or false");
	if ((v = json_get(obj, "rlimits"))) {
		if (v->type != JSON_ARR)
			return cli_seterr(why, whylen, -EINVAL, "process.rlimits: must be an array");
		for (e = v->u.kids.first; e; e = e->next) {
			struct oci_rlimit *rl = &p->rlimits[p->nrlimits];
			const char *type;
			unsigned i;

			if (p->nrlimits == OCI_MAX_RLIMITS)
				return cli_seterr(why, whylen, -EINVAL, "process.rlimits: more than %d", OCI_MAX_RLIMITS);
			if (e->type != JSON_OBJ || json_get_str(e, "type", &type))
				return cli_seterr(why, whylen, -EINVAL, "process.rlimits: each needs a \"type\"");
			if ((rl->resource = oci_rlimit_from_name(type)) < 0)
				return cli_seterr(why, whylen, -EINVAL, "process.rlimits: unknown type %s", type);
			if (num_u64(json_get(e, "soft"), &rl->soft) || num_u64(json_get(e, "hard"), &rl->hard))
				return cli_seterr(why, whylen, -EINVAL, "process.rlimits %s: soft and hard must be integers", type);
			if (rl->soft > rl->hard)
				return cli_seterr(why, whylen, -EINVAL, "process.rlimits %s: soft above hard", type);
			/* config.md: a duplicate type MUST generate an error. */
			for (i = 0; i < p->nrlimits; i++)
				if (p->rlimits[i].resource == rl->resource)
					return cli_seterr(why, whylen, -EINVAL, "process.rlimits: %s given twice", type);
			p->nrlimits++;
		}
	}
	if ((v = json_get(obj, "consoleSize"))) {
		uint32_t h, w;

		if (v->type != JSON_OBJ || num_u32(json_get(v, "height"), &h) || num_u32(json_get(v, "width"), &w) ||
		    h > 65535 || w > 65535)
			return cli_seterr(why, whylen, -EINVAL, "process.consoleSize: height and width must be 0..65535");
		p->console_rows = h;
		p->console_cols = w;
	}
	return 0;
}

static enum oci_mount_kind mount_kind(const char *type, const char *const *opts, unsigned nopts)
{
	static const struct {
		const char *type;
		enum oci_mount_kind kind;
	} kinds[] = {
		{ "bind", OCI_MNT_BIND },	{ "proc", OCI_MNT_PROC },     { "sysfs", OCI_MNT_SYSFS },
		{ "tmpfs", OCI_MNT_TMPFS },	{ "devpts", OCI_MNT_DEVPTS }, { "mqueue", OCI_MNT_MQUEUE },
		{ "cgroup", OCI_MNT_CGROUP }, { "cgroup2", OCI_MNT_CGROUP },
	};
	unsigned i;

	/* runc takes any mount with a "bind"/"rbind" option for a bind,
	 * whatever its type says (containerd writes type "bind" or none). */
	for (i = 0; i < nopts; i++)
		if (!strcmp(opts[i], "bind") || !strcmp(opts[i], "rbind"))
			return OCI_MNT_BIND;
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (type && !strcmp(type, kinds[i].type))
			return kinds[i].kind;
	return OCI_MNT_OTHER;
}

static int parse_mounts(struct oci_spec *s, const struct json *v, char *why, size_t whylen)
{
	const struct json *e;
	unsigned i;
	int r;

	if (!v)
		return 0;
	if (v->type != JSON_ARR)
		return cli_seterr(why, whylen, -EINVAL, "mounts: must be an array");
	for (e = v->u.kids.first; e; e = e->next) {
		struct oci_mount *m = &s->mounts[s->nmounts];

		if (s->nmounts == OCI_MAX_MOUNTS)
			return cli_seterr(why, whylen, -EINVAL, "mounts: more than %d", OCI_MAX_MOUNTS);
		if (e->type != JSON_OBJ)
			return cli_seterr(why, whylen, -EINVAL, "mounts: each must be an object");
		/* config.md: destination is REQUIRED; vmm wants it absolute
		 * and without "..", as runc does since 1.1. */
		if (json_get_str(e, "destination", &m->dest) || !abs_clean(m->dest))
			return cli_seterr(why, whylen, -EINVAL, "mounts: destination \"%s\" must be an absolute path without ..",
				   m->dest ? m->dest : "");
		m->type = NULL;
		m->source = NULL;
		if (json_get(e, "type") && json_get_str(e, "type", &m->type))
			return cli_seterr(why, whylen, -EINVAL, "mounts %s: type must be a string", m->dest);
		if (json_get(e, "source") && json_get_str(e, "source", &m->source))
			return cli_seterr(why, whylen, -EINVAL, "mounts %s: source must be a string", m->dest);
		m->nopts = 0;
		m->opts[0] = NULL;
		if (json_get(e, "options")) {
			r = str_array(json_get(e, "options"), m->opts, OCI_MAX_MOUNT_OPTS, &m->nopts);
			if (r)
				return cli_seterr(why, whylen, -EINVAL, "mounts %s: options must be an array of at most %d strings",
					   m->dest, OCI_MAX_MOUNT_OPTS);
		}
		m->kind = mount_kind(m->type, m->opts, m->nopts);
		if (!m->type)
			m->type = m->kind == OCI_MNT_BIND ? "bind" : "none";
		if (m->kind == OCI_MNT_BIND && (!m->source || m->source[0] != '/'))
			return cli_seterr(why, whylen, -EINVAL, "mounts %s: a bind needs an absolute source", m->dest);
		m->ro = 0;
		for (i = 0; i < m->nopts; i++)
			if (!strcmp(m->opts[i], "ro"))
				m->ro = 1;
		s->nmounts++;
	}
	return 0;
}

static int parse_hooks(struct oci_spec *s, const struct json *v, char *why, size_t whylen)
{
	static const char *const names[OCI_HOOK_KINDS] = { "prestart",	    "createRuntime", "createContainer",
								   "startContainer", "poststart",     "poststop" };
	const struct json *arr, *e;
	unsigned k;
	int64_t t;
	int r;

	if (!v)
		return 0;
	if (v->type != JSON_OBJ)
		return cli_seterr(why, whylen, -EINVAL, "hooks: must be an object");
	for (k = 0; k < OCI_HOOK_KINDS; k++) {
		if (!(arr = json_get(v, names[k])))
			continue;
		if (arr->type != JSON_ARR || arr->u.kids.count > OCI_MAX_HOOKS)
			return cli_seterr(why, whylen, -EINVAL, "hooks.%s: must be an array of at most %d hooks", names[k],
				   OCI_MAX_HOOKS);
		if (!(s->hooks[k] = calloc(OCI_MAX_HOOKS, sizeof(*s->hooks[k]))))
			return -ENOMEM;
		for (e = arr->u.kids.first; e; e = e->next) {
			struct oci_hook *h = &s->hooks[k][s->nhooks[k]];

			if (e->type != JSON_OBJ || json_get_str(e, "path", &h->path) || h->path[0] != '/')
				return cli_seterr(why, whylen, -EINVAL, "hooks.%s: each needs an absolute \"path\"", names[k]);
			h->args[0] = NULL;
			if (json_get(e, "args") && (r = str_array(json_get(e, "args"), h->args, OCI_MAX_ARGS, &h->argc)))
				return cli_seterr(why, whylen, -EINVAL, "hooks.%s %s: args must be an array of strings", names[k],
					   h->path);
			if (env_array(json_get(e, "env"), h->env, &h->envc, "hooks env", why, whylen))
				return -EINVAL;
			if (json_get(e, "timeout")) {
				/* config.md: timeout, if set, MUST be greater than zero. */
				if (json_get_int(e, "timeout", &t) || t <= 0 || t > 86400)
					return cli_seterr(why, whylen, -EINVAL, "hooks.%s %s: timeout must be 1..86400 seconds",
						   names[k], h->path);
				h->timeout_s = (int)t;
			}
			s->nhooks[k]++;
		}
	}
	return 0;
}

static int parse_linux(struct oci_spec *s, const struct json *lx, char *why, size_t whylen)
{
	const struct json *v, *e, *res;

	if (!lx)
		return 0;
	if (lx->type != JSON_OBJ)
		return cli_seterr(why, whylen, -EINVAL, "linux: must be an object");
	if ((v = json_get(lx, "namespaces"))) {
		if (v->type != JSON_ARR)
			return cli_seterr(why, whylen, -EINVAL, "linux.namespaces: must be an array");
		for (e = v->u.kids.first; e; e = e->next) {
			const char *type, *path = NULL;

			if (e->type != JSON_OBJ || json_get_str(e, "type", &type))
				return cli_seterr(why, whylen, -EINVAL, "linux.namespaces: each needs a \"type\"");
			if (json_get(e, "path") && (json_get_str(e, "path", &path) || path[0] != '/'))
				return cli_seterr(why, whylen, -EINVAL, "linux.namespaces %s: path must be absolute", type);
			if (!strcmp(type, "network") && path)
				s->netns = path;
			if (!strcmp(type, "pid"))
				s->pidns = path ? OCI_PIDNS_JOIN : OCI_PIDNS_NEW;
		}
	}
	if (json_get(lx, "cgroupsPath") && json_get_str(lx, "cgroupsPath", &s->cgroups_path))
		return cli_seterr(why, whylen, -EINVAL, "linux.cgroupsPath: must be a string");
	if ((res = json_get(lx, "resources")) && res->type == JSON_OBJ) {
		uint64_t n;

		if ((v = json_get(res, "memory")) && v->type == JSON_OBJ && (e = json_get(v, "limit"))) {
			/* -1 (or absent) is "no limit" */
			if (e->type == JSON_NUM && e->u.num == -1)
				s->mem_limit = 0;
			else if (num_u64(e, &n) || n > (1ull << 50))
				return cli_seterr(why, whylen, -EINVAL, "linux.resources.memory.limit: must be bytes");
			else
				s->mem_limit = (int64_t)n;
		}
		if ((v = json_get(res, "cpu")) && v->type == JSON_OBJ) {
			if ((e = json_get(v, "quota")) && !(e->type == JSON_NUM && e->u.num == -1)) {
				if (num_u64(e, &n) || n > (1ull << 40))
					return cli_seterr(why, whylen, -EINVAL, "linux.resources.cpu.quota: must be microseconds");
				s->cpu_quota = (int64_t)n;
			}
			if ((e = json_get(v, "period")) && num_u64(e, &s->cpu_period))
				return cli_seterr(why, whylen, -EINVAL, "linux.resources.cpu.period: must be microseconds");
		}
	}
	return 0;
}

int oci_spec_parse(struct oci_spec *s, const char *text, size_t len, const char *bundle, char *why, size_t whylen)
{
	const struct json *root, *v, *e;
	const char *err = NULL, *path;
	int r;

	memset(s, 0, sizeof(*s));
	snprintf(why, whylen, "invalid");
	if (len > OCI_SPEC_MAX_BYTES)
		return cli_seterr(why, whylen, -EINVAL, "config.json: larger than %u bytes", OCI_SPEC_MAX_BYTES);
	/* Strings are copied into the arena (decoded, at most twice their
	 * length plus one), nodes cost about 64 bytes each. */
	s->arena.size = len * 8 + 65536;
	if (!(s->arena.buf = malloc(s->arena.size)))
		return -ENOMEM;
	root = json_parse(text, len, &s->arena, &err);
	if (!root)
		return cli_seterr(why, whylen, -EINVAL, "config.json: %s", err ? err : "not JSON");
	if (root->type != JSON_OBJ)
		return cli_seterr(why, whylen, -EINVAL, "config.json: must be a JSON object");
	/* config.md: ociVersion is REQUIRED (SemVer). */
	if (json_get_str(root, "ociVersion", &s->version) || !s->version[0] || s->version[0] < '0' ||
	    s->version[0] > '9')
		return cli_seterr(why, whylen, -EINVAL, "ociVersion: must be a version string (1.0.2)");
	if (strncmp(s->version, "1.", 2))
		return cli_seterr(why, whylen, -EINVAL, "ociVersion %s: vmm reads version 1 of the runtime spec", s->version);
	if (!(v = json_get(root, "root")) || v->type != JSON_OBJ || json_get_str(v, "path", &path) || !path[0])
		return cli_seterr(why, whylen, -EINVAL, "root.path: required (the container's root filesystem)");
	if (json_get(v, "readonly") && json_get_bool(v, "readonly", &s->root_ro))
		return cli_seterr(why, whylen, -EINVAL, "root.readonly: must be true or false");
	if (path[0] == '/')
		r = snprintf(s->root, sizeof(s->root), "%s", path);
	else
		r = snprintf(s->root, sizeof(s->root), "%s/%s", bundle, path);
	if (r < 0 || (size_t)r >= sizeof(s->root))
		return cli_seterr(why, whylen, -EINVAL, "root.path: too long");
	if ((v = json_get(root, "process"))) {
		if ((r = oci_process_parse(v, &s->process, why, whylen)))
			return r;
		s->has_process = 1;
	}
	if (json_get(root, "hostname") && json_get_str(root, "hostname", &s->hostname))
		return cli_seterr(why, whylen, -EINVAL, "hostname: must be a string");
	if (s->hostname && (strlen(s->hostname) > 64 || strchr(s->hostname, '/')))
		return cli_seterr(why, whylen, -EINVAL, "hostname: at most 64 characters, no '/'");
	if ((r = parse_mounts(s, json_get(root, "mounts"), why, whylen)))
		return r;
	if ((r = parse_hooks(s, json_get(root, "hooks"), why, whylen)))
		return r;
	if ((r = parse_linux(s, json_get(root, "linux"), why, whylen)))
		return r;
	if ((v = json_get(root, "annotations"))) {
		if (v->type != JSON_OBJ)
			return cli_seterr(why, whylen, -EINVAL, "annotations: must be an object of strings");
		for (e = v->u.kids.first; e; e = e->next) {
			if (e->type != JSON_STR)
				return cli_seterr(why, whylen, -EINVAL, "annotations %s: must be a string", e->key);
			if (s->nann == OCI_MAX_ANNOTATIONS)
				return cli_seterr(why, whylen, -EINVAL, "annotations: more than %d", OCI_MAX_ANNOTATIONS);
			s->ann_key[s->nann] = e->key;
			s->ann_val[s->nann++] = e->u.str.s;
		}
	}
	why[0] = '\0';
	return 0;
}

int oci_spec_load(struct oci_spec *s, const char *bundle, char *why, size_t whylen)
{
	char path[PATH_MAX];
	struct stat st;
	char *text = NULL;
	ssize_t n;
	size_t got = 0;
	int fd, r;

	memset(s, 0, sizeof(*s));
	if (snprintf(path, sizeof(path), "%s/config.json", bundle) >= (int)sizeof(path))
		return cli_seterr(why, whylen, -EINVAL, "bundle path too long");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		snprintf(why, whylen, "open %s: %s", path, strerror(errno));
		return r == -ENOENT ? -ENOENT : -EINVAL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > OCI_SPEC_MAX_BYTES) {
		r = cli_seterr(why, whylen, -EINVAL, "%s: not a regular file of at most %u bytes", path, OCI_SPEC_MAX_BYTES);
		goto out;
	}
	if (!(text = malloc((size_t)st.st_size + 1))) {
		r = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size && (n = read(fd, text + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	r = oci_spec_parse(s, text, got, bundle, why, whylen);
out:
	free(text);
	close(fd);
	return r;
}

void oci_spec_free(struct oci_spec *s)
{
	unsigned k;

	for (k = 0; k < OCI_HOOK_KINDS; k++)
		free(s->hooks[k]);
	free(s->arena.buf);
	memset(s, 0, sizeof(*s));
}

const char *oci_spec_annotation(const struct oci_spec *s, const char *key)
{
	unsigned i;

	for (i = 0; i < s->nann; i++)
		if (!strcmp(s->ann_key[i], key))
			return s->ann_val[i];
	return NULL;
}
