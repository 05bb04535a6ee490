/* OCI references, documents, defaults and the blob cache (oci_image.h).
 * Rules from the OCI image-spec (image-index.md, manifest.md, config.md,
 * descriptor.md) and distribution-spec (the reference grammar). */
#include "cli/images/oci_image.h"
#include "cli/util/util.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>


#define DOC_MAX (4u << 20) /* manifests and configs bigger than this are refused */

/* ---- references and digests ---------------------------------------------- */

int oci_digest_ok(const char *d)
{
	size_t i;

	if (strncmp(d, "sha256:", 7) || strlen(d) != 7 + 64)
		return 0;
	for (i = 7; i < 71; i++)
		if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
			return 0;
	return 1;
}

/* distribution-spec: path components [a-z0-9]+ joined by . _ __ or -+. */
static int repo_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= 256 || s[0] == '/' || s[n - 1] == '/' || strstr(s, "//"))
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '/'))
			return 0;
		if ((c == '.' || c == '_' || c == '-') && (i == 0 || s[i - 1] == '/' || i + 1 == n || s[i + 1] == '/'))
			return 0;
		/* one separator: ".", "_", "__" or "-"s (so never "..") */
		if (i + 1 < n && ((c == '.' && strchr("._-", s[i + 1])) || (strchr("_-", c) && s[i + 1] == '.') ||
				  (c == '_' && s[i + 1] == '_' && i + 2 < n && s[i + 2] == '_')))
			return 0;
	}
	return 1;
}

static int tag_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-')
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static int host_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= 256)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '-' || c == ':' || c == '[' || c == ']'))
			return 0;
	}
	return 1;
}

int oci_parse_ref(const char *s, struct oci_ref *r)
{
	char buf[768], *p = buf, *slash, *at, *colon;

	memset(r, 0, sizeof(*r));
	if (strlen(s) >= 500)
		return -EINVAL;
	if (!strncmp(s, "http://", 7)) {
		r->http = 1;
		s += 7;
	} else if (!strncmp(s, "https://", 8)) {
		s += 8;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	if ((at = strchr(p, '@'))) {
		*at = '\0';
		if (!oci_digest_ok(at + 1))
			return -EINVAL;
		snprintf(r->digest, sizeof(r->digest), "%s", at + 1);
	}
	slash = strchr(p, '/');
	if (slash && (memchr(p, '.', (size_t)(slash - p)) || memchr(p, ':', (size_t)(slash - p)) ||
		      ((size_t)(slash - p) == 9 && !strncmp(p, "localhost", 9)))) {
		*slash = '\0';
		if (strlen(p) >= sizeof(r->registry))
			return -EINVAL;
		memcpy(r->registry, p, strlen(p) + 1);
		p = slash + 1;
	} else {
		if (r->http)
			return -EINVAL; /* http:// wants a registry */
		snprintf(r->registry, sizeof(r->registry), "docker.io");
	}
	if (!host_ok(r->registry))
		return -EINVAL;
	colon = strrchr(p, ':');
	if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		if (!tag_ok(colon + 1))
			return -EINVAL;
		snprintf(r->tag, sizeof(r->tag), "%s", colon + 1);
	} else if (!r->digest[0]) {
		snprintf(r->tag, sizeof(r->tag), "latest");
	}
	if (!strcmp(r->registry, "docker.io") || !strcmp(r->registry, "index.docker.io")) {
		snprintf(r->registry, sizeof(r->registry), "docker.io");
		snprintf(r->api_host, sizeof(r->api_host), "registry-1.docker.io");
		if (!strchr(p, '/')) {
			if (snprintf(r->repo, sizeof(r->repo), "library/%s", p) >= (int)sizeof(r->repo))
				return -EINVAL;
		} else if (snprintf(r->repo, sizeof(r->repo), "%.255s", p) >= (int)sizeof(r->repo)) {
			return -EINVAL;
		}
	} else {
		snprintf(r->api_host, sizeof(r->api_host), "%s", r->registry);
		if (strlen(p) >= sizeof(r->repo))
			return -EINVAL;
		memcpy(r->repo, p, strlen(p) + 1);
	}
	return repo_ok(r->repo) ? 0 : -EINVAL;
}

/* ---- documents ------------------------------------------------------------ */

struct doc {
	struct json_arena a;
	const struct json *root;
};

static int doc_parse(struct doc *d, const char *json, size_t len, char *err, size_t errlen)
{
	const char *e = NULL;

	memset(d, 0, sizeof(*d));
	if (len > DOC_MAX)
		return cli_seterr(err, errlen, -EFBIG, "document too large (%zu bytes)", len);
	d->a.size = len * 3 + 65536;
	if (!(d->a.buf = malloc(d->a.size)))
		return -ENOMEM;
	d->root = json_parse(json, len, &d->a, &e);
	if (!d->root || d->root->type != JSON_OBJ) {
		free(d->a.buf);
		d->a.buf = NULL;
		return cli_seterr(err, errlen, -EINVAL, "malformed JSON (%s)", d->root ? "not an object" : e);
	}
	return 0;
}

static void doc_free(struct doc *d)
{
	free(d->a.buf);
}

static int str_of(const struct json *o, const char *key, char *out, size_t len)
{
	const char *s;

	if (json_get_str(o, key, &s) || strlen(s) >= len)
		return -1;
	snprintf(out, len, "%s", s);
	return 0;
}

static int desc_parse(const struct json *o, struct oci_desc *d, char *err, size_t errlen)
{
	int64_t size;

	memset(d, 0, sizeof(*d));
	if (!o || o->type != JSON_OBJ)
		return cli_seterr(err, errlen, -EINVAL, "a descriptor is not an object");
	if (str_of(o, "digest", d->digest, sizeof(d->digest)) || !oci_digest_ok(d->digest))
		return cli_seterr(err, errlen, -EINVAL, "a descriptor has no sha256 digest");
	if (json_get_int(o, "size", &size) || size < 0)
		return cli_seterr(err, errlen, -EINVAL, "descriptor %.19s has no size", d->digest);
	if ((uint64_t)size > OCI_SIZE_ABSURD)
		return cli_seterr(err, errlen, -EINVAL, "descriptor %.19s claims %lld bytes", d->digest, (long long)size);
	d->size = size;
	if (str_of(o, "mediaType", d->media, sizeof(d->media)))
		d->media[0] = '\0';
	return 0;
}

enum oci_doc oci_doc_kind(const char *json, size_t len, const char *content_type)
{
	struct doc d;
	char mt[OCI_MEDIA_MAX] = "";
	enum oci_doc k = OCI_DOC_BAD;

	if (doc_parse(&d, json, len, NULL, 0))
		return OCI_DOC_BAD;
	if (str_of(d.root, "mediaType", mt, sizeof(mt)) && content_type)
		snprintf(mt, sizeof(mt), "%.*s", (int)strcspn(content_type, "; "), content_type);
	if (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST))
		k = OCI_DOC_INDEX;
	else if (!strcmp(mt, MT_OCI_MANIFEST) || !strcmp(mt, MT_DOCKER_MANIFEST))
		k = OCI_DOC_MANIFEST;
	else if (!mt[0] && json_get(d.root, "manifests"))
		k = OCI_DOC_INDEX; /* an OCI index may omit mediaType */
	else if (!mt[0] && json_get(d.root, "layers"))
		k = OCI_DOC_MANIFEST;
	doc_free(&d);
	return k;
}

int oci_parse_index(const char *json, size_t len, int layout, struct oci_desc *out, char *err, size_t errlen)
{
	const struct json *ms, *m;
	struct doc d;
	int r, found = 0;

	if ((r = doc_parse(&d, json, len, err, errlen)))
		return r;
	ms = json_get(d.root, "manifests");
	if (!ms || ms->type != JSON_ARR) {
		doc_free(&d);
		return cli_seterr(err, errlen, -EINVAL, "index without a manifests array");
	}
	for (m = ms->u.kids.first; m && !found; m = m->next) {
		const struct json *pl = m->type == JSON_OBJ ? json_get(m, "platform") : NULL;
		const char *os, *arch;

		if (m->type != JSON_OBJ)
			continue;
		if (!pl && layout) {
			os = "linux"; /* an image layout's index.json names images, not platforms */
			arch = "amd64";
		} else if (!pl || pl->type != JSON_OBJ || json_get_str(pl, "os", &os) ||
			   json_get_str(pl, "architecture", &arch)) {
			continue;
		}
		if (strcmp(os, "linux") || strcmp(arch, "amd64"))
			continue;
		if ((r = desc_parse(m, out, err, errlen))) {
			doc_free(&d);
			return r;
		}
		found = 1;
	}
	doc_free(&d);
	return found ? 0 : cli_seterr(err, errlen, -ENOENT, "no linux/amd64 image in the index");
}

static int layer_media_ok(const char *mt)
{
	static const char *const ok[] = {
		MT_OCI_LAYER, MT_OCI_LAYER_GZ, MT_OCI_LAYER_ZSTD, MT_DOCKER_LAYER,
		"application/vnd.oci.image.layer.nondistributable.v1.tar",
		"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
		"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
		"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
	};
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(mt, ok[i]))
			return 1;
	return 0;
}

int oci_parse_manifest(const char *json, size_t len, struct oci_manifest *m, char *err, size_t errlen)
{
	const struct json *c, *ls, *l;
	struct doc d;
	int64_t sv;
	int r;

	memset(m, 0, sizeof(*m));
	if ((r = doc_parse(&d, json, len, err, errlen)))
		return r;
	if (json_get_int(d.root, "schemaVersion", &sv) || sv != 2) {
		r = cli_seterr(err, errlen, -EINVAL, "not a schema version 2 manifest");
		goto out;
	}
	c = json_get(d.root, "config");
	if ((r = desc_parse(c, &m->config, err, errlen)))
		goto out;
	if (m->config.media[0] && strcmp(m->config.media, MT_OCI_CONFIG) && strcmp(m->config.media, MT_DOCKER_CONFIG)) {
		r = cli_seterr(err, errlen, -EINVAL, "config media type %s is not an image config", m->config.media);
		goto out;
	}
	ls = json_get(d.root, "layers");
	if (!ls || ls->type != JSON_ARR) {
		r = cli_seterr(err, errlen, -EINVAL, "manifest without a layers array");
		goto out;
	}
	for (l = ls->u.kids.first; l; l = l->next) {
		struct oci_desc *ld = &m->layers[m->nlayers];

		if (m->nlayers == OCI_MAX_LAYERS) {
			r = cli_seterr(err, errlen, -E2BIG, "more than %d layers", OCI_MAX_LAYERS);
			goto out;
		}
		if ((r = desc_parse(l, ld, err, errlen)))
			goto out;
		if (!layer_media_ok(ld->media)) {
			r = cli_seterr(err, errlen, -EINVAL, "layer %u (%.19s): media type '%s' is not a tar layer",
				   m->nlayers + 1, ld->digest, ld->media);
			goto out;
		}
		m->nlayers++;
	}
	r = 0;
out:
	doc_free(&d);
	return r;
}

/* ---- size caps ---------------------------------------------------------------- */

static const struct limit_setting {
	const char *flag, *env;
	size_t off;
	uint64_t def;
	int count; /* a number of entries, not a size */
} limit_settings[] = {
	{ "--max-blob", "VMM_PULL_MAX_BLOB", offsetof(struct oci_limits, blob), 16ull << 30, 0 },
	{ "--max-image", "VMM_PULL_MAX_IMAGE", offsetof(struct oci_limits, image), 64ull << 30, 0 },
	{ "--max-layer-unpacked", "VMM_UNPACK_MAX_LAYER", offsetof(struct oci_limits, layer_tar), 64ull << 30, 0 },
	{ "--max-unpacked", "VMM_UNPACK_MAX_IMAGE", offsetof(struct oci_limits, image_tar), 128ull << 30, 0 },
	{ "--max-entries", "VMM_UNPACK_MAX_ENTRIES", offsetof(struct oci_limits, entries), 1000000, 1 },
};
#define NSETTINGS (sizeof(limit_settings) / sizeof(limit_settings[0]))

static uint64_t *limit_field(struct oci_limits *l, const struct limit_setting *s)
{
	return (uint64_t *)((char *)l + s->off);
}

static int limit_parse(const struct limit_setting *s, const char *value, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (s->count) {
		errno = 0;
		v = strtoull(value, &end, 10);
		if (errno || end == value || *end || value[0] == '-' || v == 0 || v > (1ull << 40))
			return -EINVAL;
		*out = v;
		return 0;
	}
	if (cli_parse_mib(value, &v) || v == 0 || v > (OCI_SIZE_ABSURD >> 20))
		return -EINVAL;
	*out = v << 20;
	return 0;
}

int oci_limits_set(struct oci_limits *l, const char *name, const char *value, char *err, size_t errlen)
{
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct limit_setting *s = &limit_settings[i];

		if (strcmp(name, s->flag) && strcmp(name, s->env))
			continue;
		if (limit_parse(s, value, limit_field(l, s)))
			return cli_seterr(err, errlen, -EINVAL, "%s '%.40s': %s", name, value,
					  s->count ? "not a count (1 or more)" : "not a size (MiB, or with M, G or T)");
		return 0;
	}
	return 1;
}

int oci_limits_init(struct oci_limits *l, char *err, size_t errlen)
{
	int r;

	for (size_t i = 0; i < NSETTINGS; i++) {
		const char *v = getenv(limit_settings[i].env);

		*limit_field(l, &limit_settings[i]) = limit_settings[i].def;
		if (v && *v && (r = oci_limits_set(l, limit_settings[i].env, v, err, errlen)))
			return r;
	}
	return 0;
}

int oci_limits_check(const struct oci_limits *l, const struct oci_manifest *m, char *err, size_t errlen)
{
	uint64_t total = (uint64_t)m->config.size;

	if ((uint64_t)m->config.size > l->blob)
		return cli_seterr(err, errlen, -EFBIG, "config %.19s claims %lld bytes, over the blob cap of %llu MiB "
				  "(--max-blob, $VMM_PULL_MAX_BLOB)", m->config.digest, (long long)m->config.size,
				  (unsigned long long)(l->blob >> 20));
	for (unsigned i = 0; i < m->nlayers; i++) {
		uint64_t sz = (uint64_t)m->layers[i].size;

		if (sz > l->blob)
			return cli_seterr(err, errlen, -EFBIG, "layer %u/%u %.19s claims %llu bytes, over the blob cap of "
					  "%llu MiB (--max-blob, $VMM_PULL_MAX_BLOB)", i + 1, m->nlayers,
					  m->layers[i].digest, (unsigned long long)sz, (unsigned long long)(l->blob >> 20));
		total += sz; /* each is under 2^50: no overflow in 128 of them */
	}
	if (total > l->image)
		return cli_seterr(err, errlen, -EFBIG, "the image's blobs claim %llu bytes, over the image cap of %llu MiB "
				  "(--max-image, $VMM_PULL_MAX_IMAGE)", (unsigned long long)total,
				  (unsigned long long)(l->image >> 20));
	return 0;
}

/* ---- defaults --------------------------------------------------------------- */

static const char *pool_add(struct oci_defaults *d, const char *s, size_t n)
{
	char *p;

	if (d->used + n + 1 > sizeof(d->pool))
		return NULL;
	p = d->pool + d->used;
	memcpy(p, s, n);
	p[n] = '\0';
	d->used += n + 1;
	return p;
}

static int strv_of(struct oci_defaults *d, const struct json *a, const char **v, unsigned *n, unsigned max,
		   const char *what, char *err, size_t errlen)
{
	const struct json *e;

	*n = 0;
	if (!a || a->type == JSON_NULL)
		return 0;
	if (a->type != JSON_ARR)
		return cli_seterr(err, errlen, -EINVAL, "config %s is not an array", what);
	for (e = a->u.kids.first; e; e = e->next) {
		if (e->type != JSON_STR || *n == max || !(v[*n] = pool_add(d, e->u.str.s, e->u.str.len)))
			return cli_seterr(err, errlen, -EINVAL, "config %s: a non-string or too many", what);
		(*n)++;
	}
	v[*n] = NULL;
	return 0;
}

static const char *str_or_empty(struct oci_defaults *d, const struct json *o, const char *key)
{
	const char *s;

	if (json_get_str(o, key, &s))
		return "";
	return pool_add(d, s, strlen(s));
}

static int defaults_from(struct oci_defaults *d, const struct json *c, char *err, size_t errlen)
{
	const struct json *ports, *labels, *e;
	int r;

	d->workdir = d->user = d->drives = "";
	if (!c || c->type == JSON_NULL)
		return 0;
	if (c->type != JSON_OBJ)
		return cli_seterr(err, errlen, -EINVAL, "config is not an object");
	if ((r = strv_of(d, json_get(c, "Env"), d->env, &d->nenv, OCI_MAX_ENV, "Env", err, errlen)) ||
	    (r = strv_of(d, json_get(c, "Entrypoint"), d->entrypoint, &d->nentry, OCI_MAX_ARGS, "Entrypoint", err,
			 errlen)) ||
	    (r = strv_of(d, json_get(c, "Cmd"), d->cmd, &d->ncmd, OCI_MAX_ARGS, "Cmd", err, errlen)))
		return r;
	for (unsigned i = 0; i < d->nenv; i++)
		if (!strchr(d->env[i], '=') || d->env[i][0] == '=')
			return cli_seterr(err, errlen, -EINVAL, "config Env entry '%.40s' is not NAME=VALUE", d->env[i]);
	if (!(d->workdir = str_or_empty(d, c, "WorkingDir")) || !(d->user = str_or_empty(d, c, "User")))
		return cli_seterr(err, errlen, -EINVAL, "config too large");
	if (d->workdir[0] && d->workdir[0] != '/')
		return cli_seterr(err, errlen, -EINVAL, "config WorkingDir '%.40s' is not absolute", d->workdir);
	ports = json_get(c, "ExposedPorts");
	if (ports && ports->type == JSON_OBJ) {
		for (e = ports->u.kids.first; e; e = e->next) {
			char *end;
			unsigned long p = strtoul(e->key, &end, 10);

			if (end == e->key || p == 0 || p > 65535 || (*end && strcmp(end, "/tcp") && strcmp(end, "/udp")))
				return cli_seterr(err, errlen, -EINVAL, "config ExposedPorts '%.20s' is not PORT[/tcp|/udp]",
					      e->key);
			if (!strcmp(end, "/udp") || d->nports == OCI_MAX_PORTS)
				continue;
			d->ports[d->nports++] = (unsigned)p;
		}
	}
	labels = json_get(c, "Labels");
	if (labels && labels->type == JSON_OBJ) {
		const char *s;
		unsigned long long v;
		long long t;

		if (!json_get_str(labels, "vmm.mem", &s)) {
			if (cli_parse_mib(s, &v) || v < 32 || v > (1ull << 20))
				return cli_seterr(err, errlen, -EINVAL, "label vmm.mem '%.20s' is not a size (MiB, 32 or more)", s);
			d->mem_mib = (unsigned)v;
		}
		if (!json_get_str(labels, "vmm.cpus", &s)) {
			char *end;
			unsigned long c2 = strtoul(s, &end, 10);

			if (*end || c2 < 1 || c2 > 64)
				return cli_seterr(err, errlen, -EINVAL, "label vmm.cpus '%.20s' is not 1..64", s);
			d->cpus = (unsigned)c2;
		}
		if (!(d->drives = str_or_empty(d, labels, "vmm.drives")))
			return cli_seterr(err, errlen, -EINVAL, "label vmm.drives is too long");
		if (!json_get_str(labels, "vmm.idle-timeout", &s)) {
			if (cli_parse_duration(s, &t) || t <= 0)
				return cli_seterr(err, errlen, -EINVAL, "label vmm.idle-timeout '%.20s' is not a duration", s);
			d->idle_timeout_s = t;
		}
	}
	return 0;
}

int oci_parse_config(const char *json, size_t len, struct oci_defaults *d, char (*diff_ids)[OCI_DIGEST_MAX],
		     unsigned max, unsigned *ndiff, char *err, size_t errlen)
{
	const struct json *rootfs, *ids, *e;
	struct doc doc;
	const char *s;
	int r;

	memset(d, 0, sizeof(*d));
	if (ndiff)
		*ndiff = 0;
	if ((r = doc_parse(&doc, json, len, err, errlen)))
		return r;
	if (!json_get_str(doc.root, "os", &s) && strcmp(s, "linux")) {
		r = cli_seterr(err, errlen, -EINVAL, "the image is for %.20s, not linux", s);
		goto out;
	}
	if (!json_get_str(doc.root, "architecture", &s) && strcmp(s, "amd64")) {
		r = cli_seterr(err, errlen, -EINVAL, "the image is for %.20s, not amd64", s);
		goto out;
	}
	if ((r = defaults_from(d, json_get(doc.root, "config"), err, errlen)))
		goto out;
	rootfs = json_get(doc.root, "rootfs");
	ids = rootfs && rootfs->type == JSON_OBJ ? json_get(rootfs, "diff_ids") : NULL;
	if (!ids || ids->type != JSON_ARR) {
		r = cli_seterr(err, errlen, -EINVAL, "config without rootfs.diff_ids");
		goto out;
	}
	for (e = ids->u.kids.first; e && diff_ids; e = e->next) {
		if (*ndiff == max) {
			r = cli_seterr(err, errlen, -E2BIG, "too many diff_ids");
			goto out;
		}
		if (e->type != JSON_STR || e->u.str.len >= OCI_DIGEST_MAX || !oci_digest_ok(e->u.str.s)) {
			r = cli_seterr(err, errlen, -EINVAL, "config diff_ids entry %u is not a sha256 digest", *ndiff + 1);
			goto out;
		}
		snprintf(diff_ids[(*ndiff)++], OCI_DIGEST_MAX, "%s", e->u.str.s);
	}
	r = 0;
out:
	doc_free(&doc);
	return r;
}

int oci_defaults_parse(const char *json, size_t len, struct oci_defaults *d)
{
	struct doc doc;
	int r;

	memset(d, 0, sizeof(*d));
	d->workdir = d->user = d->drives = "";
	if ((r = doc_parse(&doc, json, len, NULL, 0)))
		return r;
	r = defaults_from(d, doc.root, NULL, 0);
	doc_free(&doc);
	return r;
}

static void jw_strv(struct json_writer *w, const char *key, const char *const *v, unsigned n)
{
	jw_key(w, key);
	jw_arr(w);
	for (unsigned i = 0; i < n; i++)
		jw_str(w, v[i]);
	jw_arr_end(w);
}

int oci_defaults_json(const struct oci_defaults *d, char *buf, size_t len)
{
	struct json_writer w;
	char num[32];

	jw_init(&w, buf, len);
	jw_obj(&w);
	jw_strv(&w, "Env", d->env, d->nenv);
	jw_strv(&w, "Entrypoint", d->entrypoint, d->nentry);
	jw_strv(&w, "Cmd", d->cmd, d->ncmd);
	jw_key(&w, "WorkingDir");
	jw_str(&w, d->workdir ? d->workdir : "");
	jw_key(&w, "User");
	jw_str(&w, d->user ? d->user : "");
	jw_key(&w, "ExposedPorts");
	jw_obj(&w);
	for (unsigned i = 0; i < d->nports; i++) {
		snprintf(num, sizeof(num), "%u/tcp", d->ports[i]);
		jw_key(&w, num);
		jw_obj(&w);
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	jw_key(&w, "Labels");
	jw_obj(&w);
	if (d->mem_mib) {
		snprintf(num, sizeof(num), "%u", d->mem_mib);
		jw_key(&w, "vmm.mem");
		jw_str(&w, num);
	}
	if (d->cpus) {
		snprintf(num, sizeof(num), "%u", d->cpus);
		jw_key(&w, "vmm.cpus");
		jw_str(&w, num);
	}
	if (d->drives && d->drives[0]) {
		jw_key(&w, "vmm.drives");
		jw_str(&w, d->drives);
	}
	if (d->idle_timeout_s) {
		snprintf(num, sizeof(num), "%llds", d->idle_timeout_s);
		jw_key(&w, "vmm.idle-timeout");
		jw_str(&w, num);
	}
	jw_obj_end(&w);
	jw_obj_end(&w);
	return jw_done(&w) ? 0 : -E2BIG;
}

void oci_plan_exec(const struct oci_defaults *d, const char *const *user_env, const char *user_cwd,
		   const char *const *user_argv, struct oci_exec_plan *p)
{
	unsigned i, j;
	void *keep = p->defaults;

	memset(p, 0, sizeof(*p));
	p->defaults = keep;
	for (i = 0; d && i < d->nenv; i++) {
		size_t n = strcspn(d->env[i], "=");
		int overridden = 0;

		for (j = 0; user_env && user_env[j] && !overridden; j++)
			overridden = !strncmp(user_env[j], d->env[i], n) && user_env[j][n] == '=';
		if (!overridden)
			p->env[p->nenv++] = d->env[i];
	}
	for (j = 0; user_env && user_env[j] && j < 256; j++)
		p->env[p->nenv++] = user_env[j];
	p->env[p->nenv] = NULL;
	p->cwd = user_cwd ? user_cwd : d && d->workdir && d->workdir[0] ? d->workdir : NULL;
	p->user = d && d->user && d->user[0] ? d->user : NULL;
	if (user_argv && user_argv[0]) {
		for (i = 0; user_argv[i] && p->argc < 2 * OCI_MAX_ARGS; i++)
			p->argv[p->argc++] = user_argv[i];
	} else if (d) {
		for (i = 0; i < d->nentry; i++)
			p->argv[p->argc++] = d->entrypoint[i];
		for (i = 0; i < d->ncmd; i++)
			p->argv[p->argc++] = d->cmd[i];
	}
	p->argv[p->argc] = NULL;
}

/* ---- the blob cache and hashing -------------------------------------------- */

/* The blob cache is the user's alone: only they can put a file there for a
 * pull to use (a cache made by an older vmm, 0755, is narrowed). */
static int owner_only_dir(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	if ((st.st_mode & 077) && chmod(path, 0700) < 0)
		return -errno;
	return 0;
}

int oci_cache_dir(char *buf, size_t len)
{
	int n, r;

	if ((r = cli_cache_root(buf, len)))
		return r;
	n = (int)strlen(buf);
	if ((size_t)n + strlen("/blobs") + 80 >= len)
		return -ENAMETOOLONG;
	snprintf(buf + n, len - (size_t)n, "/blobs");
	if ((r = cli_mkdir_p(buf, 0700)) || (r = owner_only_dir(buf)))
		return r;
	n = (int)strlen(buf);
	snprintf(buf + n, len - (size_t)n, "/sha256");
	r = mkdir(buf, 0700) < 0 && errno != EEXIST ? -errno : owner_only_dir(buf);
	buf[n] = '\0';
	return r;
}

int oci_blob_path(const char *cache, const char *digest, char *buf, size_t len)
{
	if (!oci_digest_ok(digest))
		return -EINVAL;
	return snprintf(buf, len, "%s/sha256/%s", cache, digest + 7) >= (int)len ? -ENAMETOOLONG : 0;
}

/* Bytes a blob still needs in the cache: 0 when it is there. */
static uint64_t blob_missing(const char *cache, const struct oci_desc *d)
{
	char path[4200], part[4220];
	struct stat st;

	if (oci_blob_path(cache, d->digest, path, sizeof(path)))
		return 0;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == d->size)
		return 0;
	snprintf(part, sizeof(part), "%s.partial", path);
	if (stat(part, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 && st.st_size <= d->size)
		return (uint64_t)(d->size - st.st_size);
	return (uint64_t)d->size;
}

int oci_cache_room(const char *cache, const struct oci_manifest *m, char *err, size_t errlen)
{
	uint64_t need = blob_missing(cache, &m->config), avail;
	struct statvfs vfs;

	for (unsigned i = 0; i < m->nlayers; i++)
		need += blob_missing(cache, &m->layers[i]);
	if (statvfs(cache, &vfs) < 0)
		return cli_seterr(err, errlen, -errno, "the blob cache %s: %s", cache, strerror(errno));
	avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
	if (need > avail)
		return cli_seterr(err, errlen, -ENOSPC, "the image's blobs need %llu MiB in the blob cache %s, "
				  "its filesystem has %llu MiB free", (unsigned long long)((need + (1 << 20) - 1) >> 20),
				  cache, (unsigned long long)(avail >> 20));
	return 0;
}

void oci_cache_drop_over(const char *cache, const struct oci_manifest *m, const struct oci_limits *l)
{
	char path[4200], part[4220];

	for (unsigned i = 0; i <= m->nlayers; i++) {
		const struct oci_desc *d = i < m->nlayers ? &m->layers[i] : &m->config;

		if ((uint64_t)d->size <= l->blob || oci_blob_path(cache, d->digest, path, sizeof(path)))
			continue;
		snprintf(part, sizeof(part), "%s.partial", path);
		unlink(part);
	}
}

int oci_read_file(int dirfd, const char *path, size_t max, char **out, size_t *len)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	char *buf;
	size_t got = 0;
	ssize_t n;

	*out = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size && (n = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}
