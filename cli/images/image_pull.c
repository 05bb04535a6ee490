/* vmm image pull, import and export (docs/images.md): container images
 * from a registry (registry.c), a `docker save` tarball, an OCI archive or
 * image layout become image versions (their layers unpacked by
 * oci_unpack.c onto the version's staging tree, then ext4 as any build);
 * export writes a version back as an OCI archive. */
#include "cli/images/images.h"
#include "cli/util/util.h"
#include "cli/images/oci_image.h"
#include "cli/images/rdump.h"
#include "cli/images/oci_unpack.h"
#include "cli/images/registry.h"
#include "cli/images/unpack_cache.h"
#include "vmm/wire/json.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CONFIG_MAX (4u << 20)

/* What to make a version from: the config and the layers, each in the blob
 * cache (dirfd < 0) or at a path inside dirfd (an archive or layout). */
struct plan {
	char *config;
	size_t config_len;
	unsigned nlayers;
	struct {
		char digest[OCI_DIGEST_MAX]; /* "" when unknown (docker save's layer.tar) */
		char path[512];
		int64_t size;
	} layers[OCI_MAX_LAYERS];
	int dirfd;
	char cache[4096];
	char source[512];
};

/* Reads all of fd (at most max bytes) into malloc'd *out (NUL-terminated). */
static int read_fd(int fd, size_t max, char **out, size_t *len)
{
	char *b = malloc(max + 1);
	size_t got = 0;
	ssize_t n;

	*out = NULL;
	if (!b)
		return -ENOMEM;
	while (got < max && (n = read(fd, b + got, max - got)) > 0)
		got += (size_t)n;
	if (got == max && read(fd, &n, 1) > 0) {
		free(b);
		return -EFBIG;
	}
	b[got] = '\0';
	*out = b;
	*len = got;
	return 0;
}

static int write_file_at(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX + 64], tmp[PATH_MAX + 80];
	size_t n = strlen(text);
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n || fsync(fd) < 0)
		r = -EIO;
	close(fd);
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

static int make_image(struct plan *p, const char *name, const struct oci_limits *lim, int quiet, struct image_out *o)
{
	char (*diff)[OCI_DIGEST_MAX] = calloc(OCI_MAX_LAYERS, OCI_DIGEST_MAX);
	char (*chains)[OCI_DIGEST_MAX] = calloc(OCI_MAX_LAYERS, OCI_DIGEST_MAX);
	struct oci_defaults *d = calloc(1, sizeof(*d));
	char err[600], msg[800], *dj = NULL;
	struct image_job *j = NULL;
	struct image_info *im;
	char ucache[4096];
	unsigned ndiff = 0, i, first = 0;
	uint64_t unpacked = 0; /* bytes the layers decompressed to so far (the per-image cap) */
	int stagefd = -1, r;

	if (!diff || !chains || !d || !(dj = malloc(65536))) {
		r = -ENOMEM;
		goto out;
	}
	if ((r = oci_parse_config(p->config, p->config_len, d, diff, OCI_MAX_LAYERS, &ndiff, err, sizeof(err)))) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: image config: %s", p->source, err);
		goto out;
	}
	if (ndiff != p->nlayers) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: the config lists %u layers, the manifest %u", p->source, ndiff,
			p->nlayers);
		r = -EINVAL;
		goto out;
	}
	if ((r = oci_defaults_json(d, dj, 65536))) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: image config too large", p->source);
		goto out;
	}
	if ((r = image_job_begin(&j, name, p->source, p->nlayers, quiet, o)))
		goto out;
	im = image_job_info(j);
	im->mem_mib = d->mem_mib;
	im->cpus = d->cpus;
	if (image_drives_set(im, d->drives, msg, sizeof(msg)))
		goto fail;
	stagefd = open(image_job_stage(j), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (stagefd < 0) {
		snprintf(msg, sizeof(msg), "%s: %s", image_job_stage(j), strerror(errno));
		goto fail;
	}
	/* The deepest stack of these layers already unpacked (unpack_cache.h). */
	{
		int k = 0;

		unpack_chain_ids(diff, p->nlayers, chains);
		if (!unpack_cache_dir(ucache, sizeof(ucache)))
			k = unpack_cache_restore(ucache, chains, p->nlayers, image_job_stage(j));
		else
			ucache[0] = '\0';
		if (k < 0) {
			snprintf(msg, sizeof(msg), "copying cached layers failed");
			goto fail;
		}
		if (k > 0) {
			char what[160];

			snprintf(what, sizeof(what), "layers 1-%d/%u from the unpack cache", k, p->nlayers);
			image_job_step(j, what);
		}
		first = (unsigned)k;
	}
	for (i = first; i < p->nlayers; i++) {
		char what[160], path[4200];
		struct unpack_stats st;
		struct unpack_limits ul;
		int fd;

		snprintf(what, sizeof(what), "layer %u/%u %.19s (%.1f MiB)", i + 1, p->nlayers,
			 p->layers[i].digest[0] ? p->layers[i].digest : diff[i], (double)p->layers[i].size / (1 << 20));
		image_job_step(j, what);
		if (p->dirfd >= 0) {
			fd = oci_root_open(p->dirfd, p->layers[i].path);
		} else {
			oci_blob_path(p->cache, p->layers[i].digest, path, sizeof(path));
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			fd = fd < 0 ? -errno : fd;
		}
		if (fd < 0) {
			snprintf(msg, sizeof(msg), "layer %u/%u %.19s: %s", i + 1, p->nlayers, p->layers[i].digest,
				 strerror(-fd));
			goto fail;
		}
		oci_unpack_limits(lim, unpacked, &ul);
		r = oci_unpack_fd_limited(stagefd, fd, p->layers[i].digest[0] ? p->layers[i].digest : NULL, diff[i], &ul,
					  &st, err, sizeof(err));
		close(fd);
		unpacked += st.tar_bytes;
		if (r) {
			snprintf(msg, sizeof(msg), "layer %u/%u %.19s: %s", i + 1, p->nlayers,
				 p->layers[i].digest[0] ? p->layers[i].digest : diff[i], err);
			goto fail;
		}
		if (st.devices && !quiet && o->progress)
			fprintf(o->progress, "  note: skipped %u device node%s (%s%s): the sandbox's /dev is devtmpfs\n",
				st.devices, st.devices > 1 ? "s" : "", st.first_device, st.devices > 1 ? ", ..." : "");
		if (st.chown_skipped && !quiet && geteuid() != 0 && o->progress)
			fprintf(o->progress, "  note: not root: the files' owners are not kept\n");
		/* Only as root: otherwise the tree lost its owners. */
		if (ucache[0] && geteuid() == 0 && unpack_cache_store(ucache, chains[i], image_job_stage(j)))
			log_warn("could not keep layer %u/%u in the unpack cache %s", i + 1, p->nlayers, ucache);
	}
	close(stagefd);
	stagefd = -1;
	if ((r = write_file_at(im->dir, "config.json", dj)) ||
	    (r = write_file_at(im->dir, "oci-config.json", p->config))) {
		snprintf(msg, sizeof(msg), "writing config.json: %s", strerror(-r));
		goto fail;
	}
	r = image_job_finish(j, NULL);
	j = NULL;
	goto out;
fail:
	if (stagefd >= 0)
		close(stagefd);
	stagefd = -1;
	r = image_job_finish(j, msg);
	j = NULL;
	r = -EIO;
out:
	if (stagefd >= 0)
		close(stagefd);
	free(d);
	free(dj);
	free(diff);
	free(chains);
	return r;
}

static void default_name(const char *from, char *name)
{
	const char *b = strrchr(from, '/') ? strrchr(from, '/') + 1 : from;
	size_t i, n = 0;

	for (i = 0; b[i] && b[i] != ':' && b[i] != '@' && n < IMAGE_NAME_MAX; i++) {
		char c = b[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
			c = '-';
		if (n == 0 && (c == '.' || c == '-'))
			continue;
		name[n++] = c;
	}
	name[n] = '\0';
	if (!image_name_ok(name))
		snprintf(name, IMAGE_NAME_MAX + 1, "imported");
}

/* ---- vmm image pull ------------------------------------------------------------ */

static void pull_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm image pull REF [--name NAME] [--creds-file FILE] [--ca-file FILE]\n"
		"                      [--insecure] [--max-blob SIZE] [--max-image SIZE]\n"
		"                      [--max-layer-unpacked SIZE] [--max-unpacked SIZE]\n"
		"                      [--max-entries N] [-q]\n\n"
		"Pulls a container image (linux/amd64) from an OCI registry into a new\n"
		"version of image NAME (default: the repository's last part). REF is\n"
		"[REGISTRY/]REPOSITORY[:TAG][@DIGEST]; no registry means docker.io.\n"
		"Blobs are checked against their digests and kept in ~/.cache/vmm/blobs\n"
		"($VMM_CACHE/blobs). The image's Env, WorkingDir, Entrypoint/Cmd and labels\n"
		"vmm.mem/vmm.cpus/vmm.drives become the defaults of its sandboxes.\n"
		"  --creds-file FILE    credentials: a docker config.json, or USER:PASSWORD\n"
		"                       (default: ~/.docker/config.json)\n"
		"  --ca-file FILE       trust the registry's CA (default: the system's)\n"
		"  --insecure           allow plain HTTP: only with an http://HOST/... REF\n"
		"Caps (SIZE in MiB, or with M, G or T; docs/security.md), checked against the\n"
		"manifest before anything is fetched and while blobs stream and layers unpack:\n"
		"  --max-blob SIZE      one blob as fetched ($VMM_PULL_MAX_BLOB, 16G)\n"
		"  --max-image SIZE     all of the image's blobs ($VMM_PULL_MAX_IMAGE, 64G)\n"
		"  --max-layer-unpacked SIZE  one layer decompressed ($VMM_UNPACK_MAX_LAYER, 64G)\n"
		"  --max-unpacked SIZE  all layers decompressed ($VMM_UNPACK_MAX_IMAGE, 128G)\n"
		"  --max-entries N      tar entries in one layer ($VMM_UNPACK_MAX_ENTRIES, 1000000)\n");
}

/* What the registry client tells of a pull, shown on out (the verb's
 * stderr): on a terminal a blob's line is rewritten as its bytes come. */
struct pull_view {
	FILE *out;
	int tty;
	int open; /* a progress line without its newline is on the terminal */
};

static void pull_view_end(struct pull_view *v)
{
	if (v->open)
		fputc('\n', v->out);
	v->open = 0;
}

static void pull_note(void *arg, const struct reg_note *n)
{
	struct pull_view *v = arg;
	double mib = (double)n->have / (1 << 20), want = (double)n->want / (1 << 20);
	double rate = n->secs > 0 ? mib / n->secs : 0.0;

	switch (n->ev) {
	case REG_EV_BYTES:
		if (!v->tty)
			return;
		fprintf(v->out, "\r  %s: %.1f/%.1f MiB  %.1f MiB/s   ", n->label, mib, want, rate);
		v->open = 1;
		return;
	case REG_EV_DONE:
		fprintf(v->out, "%s  %s: %.1f/%.1f MiB  %.1f MiB/s\n", v->tty ? "\r" : "", n->label, mib, want, rate);
		v->open = 0;
		return;
	case REG_EV_CACHED:
		pull_view_end(v);
		fprintf(v->out, "  %s: cached (%.1f MiB)\n", n->label, want);
		return;
	case REG_EV_WAITING:
		pull_view_end(v);
		fprintf(v->out, "  %s: another pull is fetching it; waiting\n", n->label);
		return;
	case REG_EV_REFETCH:
		pull_view_end(v);
		fprintf(v->out, "  %s: the cached copy does not match its digest; fetching it again\n", n->label);
		return;
	case REG_EV_RETRY:
		pull_view_end(v);
		fprintf(v->out, "%s: %s; retrying in %ld s\n", n->label, n->why, n->wait_s);
		return;
	}
}

/* A --max-* flag (oci_limits_set): 1 if arg is none, 0 when taken, -1
 * when its value is wrong (the usage error in o->err). */
static int limit_flag(const char *verb, struct oci_limits *lim, const char *arg, const char *val,
		      struct image_out *o)
{
	char err[200];
	int r;

	if (!val || strncmp(arg, "--max-", 6) || (r = oci_limits_set(lim, arg, val, err, sizeof(err))) > 0)
		return 1;
	if (r)
		cli_usage_msg(o->err, sizeof(o->err), verb, "%s", err);
	return r ? -1 : 0;
}

static int fetch_doc(struct registry *reg, const char *cache, const struct oci_desc *d, const char *label,
		     char **out, size_t *len, char *err, size_t errlen)
{
	char path[4200];
	int r;

	if (d->size > CONFIG_MAX) {
		snprintf(err, errlen, "%s is %lld bytes: too large", label, (long long)d->size);
		return -EFBIG;
	}
	if ((r = reg_blob(reg, d, cache, label, err, errlen)))
		return r;
	oci_blob_path(cache, d->digest, path, sizeof(path));
	if ((r = oci_read_file(AT_FDCWD, path, CONFIG_MAX, out, len)))
		snprintf(err, errlen, "reading it from the cache: %s", strerror(-r));
	return r;
}

int image_pull_main(int argc, char **argv, struct image_out *o)
{
	struct reg_opts ro = { 0 };
	struct pull_view view = { o->progress, o->progress && isatty(fileno(o->progress)), 0 };
	struct oci_limits lim;
	const char *refs = NULL;
	char name[IMAGE_NAME_MAX + 1] = "", err[700], ctype[128], mdigest[OCI_DIGEST_MAX];
	struct registry *reg = NULL;
	struct oci_manifest *m = calloc(1, sizeof(*m));
	struct plan *p = calloc(1, sizeof(*p));
	struct oci_ref ref;
	char *body = NULL;
	size_t len;
	int i, r = CLI_EXIT_ERROR, quiet = 0, lf;
	enum oci_doc kind;

	if (!m || !p)
		goto out;
	if (oci_limits_init(&lim, err, sizeof(err))) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s", err);
		r = CLI_EXIT_USAGE;
		goto out;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help")) {
			pull_usage(o->result);
			r = 0;
			goto out;
		} else if ((lf = limit_flag("image pull", &lim, a, val, o)) <= 0) {
			if (lf) {
				r = CLI_EXIT_USAGE;
				goto out;
			}
			i++;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = 1;
		} else if (!strcmp(a, "--insecure")) {
			ro.insecure = 1;
		} else if (val && !strcmp(a, "--name")) {
			if (!image_name_ok(val)) {
				cli_seterr(o->err, sizeof(o->err), 0, "'%s': names are 1-%d of a-z 0-9 . _ -", val, IMAGE_NAME_MAX);
				r = CLI_EXIT_USAGE;
				goto out;
			}
			snprintf(name, sizeof(name), "%s", val);
			i++;
		} else if (val && !strcmp(a, "--creds-file")) {
			ro.creds_file = val;
			i++;
		} else if (val && !strcmp(a, "--ca-file")) {
			ro.ca_file = val;
			i++;
		} else if (a[0] != '-' && !refs) {
			refs = a;
		} else {
			r = cli_bad_arg_msg(o->err, sizeof(o->err), "image pull", argv[i],
					"--name --creds-file --ca-file --max-blob --max-image --max-layer-unpacked "
					"--max-unpacked --max-entries");
			goto out;
		}
	}
	if (!refs || oci_parse_ref(refs, &ref)) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: not an image reference ([REGISTRY/]REPO[:TAG][@sha256:...])",
			refs ? refs : "(none)");
		r = CLI_EXIT_USAGE;
		goto out;
	}
	if (!name[0])
		default_name(ref.repo, name);
	if ((i = oci_cache_dir(p->cache, sizeof(p->cache)))) {
		cli_seterr(o->err, sizeof(o->err), 0, "the blob cache: %s", strerror(-i));
		goto out;
	}
	ro.max_blob = lim.blob;
	ro.note = quiet || !view.out ? NULL : pull_note;
	ro.note_arg = &view;
	if (reg_open(&reg, &ref, &ro, err, sizeof(err))) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", refs, err);
		r = CLI_EXIT_USAGE;
		goto out;
	}
	if (!quiet && view.out)
		fprintf(view.out, "pulling %s/%s%s%s%s%s\n", ref.registry, ref.repo, ref.tag[0] ? ":" : "", ref.tag,
			ref.digest[0] ? "@" : "", ref.digest);
	if (reg_manifest(reg, ref.digest[0] ? ref.digest : ref.tag, &body, &len, ctype, sizeof(ctype), mdigest, err,
			 sizeof(err))) {
		pull_view_end(&view);
		cli_seterr(o->err, sizeof(o->err), 0, "%s: manifest: %s", refs, err);
		goto out;
	}
	kind = oci_doc_kind(body, len, ctype);
	if (kind == OCI_DOC_INDEX) {
		struct oci_desc d;

		if (oci_parse_index(body, len, 0, &d, err, sizeof(err))) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: index %.19s: %s", refs, mdigest, err);
			goto out;
		}
		free(body);
		body = NULL;
		if (reg_manifest(reg, d.digest, &body, &len, ctype, sizeof(ctype), mdigest, err, sizeof(err))) {
			pull_view_end(&view);
			cli_seterr(o->err, sizeof(o->err), 0, "%s: manifest %.19s: %s", refs, d.digest, err);
			goto out;
		}
		kind = oci_doc_kind(body, len, ctype);
	}
	if (kind != OCI_DOC_MANIFEST || oci_parse_manifest(body, len, m, err, sizeof(err))) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: manifest %.19s: %s", refs, mdigest,
			kind != OCI_DOC_MANIFEST ? "not an image manifest or index (malformed, or schema 1)" : err);
		goto out;
	}
	/* Before any blob is fetched: the caps, then the disk. */
	if (oci_limits_check(&lim, m, err, sizeof(err)) || oci_cache_room(p->cache, m, err, sizeof(err))) {
		oci_cache_drop_over(p->cache, m, &lim);
		cli_seterr(o->err, sizeof(o->err), 0, "%s: manifest %.19s: %s", refs, mdigest, err);
		goto out;
	}
	if (fetch_doc(reg, p->cache, &m->config, "config", &p->config, &p->config_len, err, sizeof(err))) {
		pull_view_end(&view);
		cli_seterr(o->err, sizeof(o->err), 0, "%s: config %.19s: %s", refs, m->config.digest, err);
		goto out;
	}
	for (i = 0; i < (int)m->nlayers; i++) {
		char label[64];

		snprintf(label, sizeof(label), "layer %d/%u", i + 1, m->nlayers);
		if (reg_blob(reg, &m->layers[i], p->cache, label, err, sizeof(err))) {
			pull_view_end(&view);
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s %.19s: %s", refs, label, m->layers[i].digest, err);
			goto out;
		}
		snprintf(p->layers[i].digest, sizeof(p->layers[i].digest), "%s", m->layers[i].digest);
		p->layers[i].size = m->layers[i].size;
	}
	p->nlayers = m->nlayers;
	p->dirfd = -1;
	snprintf(p->source, sizeof(p->source), "oci:%.200s/%.200s@%s", ref.registry, ref.repo, mdigest);
	r = make_image(p, name, &lim, quiet, o) ? CLI_EXIT_ERROR : 0;
out:
	reg_close(reg);
	free(body);
	if (p)
		free(p->config);
	free(p);
	free(m);
	return r;
}

/* ---- vmm image import ------------------------------------------------------------ */

/* A blob of an image layout, read whole and checked against its digest. */
static int layout_blob(int dirfd, const char *digest, char **out, size_t *len, char *err, size_t errlen)
{
	char path[128], got[OCI_DIGEST_MAX];
	int fd, r;

	if (!oci_digest_ok(digest)) {
		snprintf(err, errlen, "bad digest");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "blobs/sha256/%s", digest + 7);
	if ((fd = oci_root_open(dirfd, path)) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-fd));
		return fd;
	}
	r = read_fd(fd, CONFIG_MAX, out, len);
	close(fd);
	if (r) {
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	oci_digest_buf(*out, *len, got);
	if (strcmp(got, digest)) {
		snprintf(err, errlen, "blob %.19s: digest mismatch (the data is %.19s...)", digest, got);
		free(*out);
		*out = NULL;
		return -EBADMSG;
	}
	return 0;
}

static int plan_oci_layout(struct plan *p, char *err, size_t errlen)
{
	struct oci_manifest *m = calloc(1, sizeof(*m));
	struct oci_desc d;
	char *doc = NULL;
	size_t len;
	int r, depth;
	int fd = oci_root_open(p->dirfd, "index.json");

	if (!m)
		return -ENOMEM;
	if (fd < 0) {
		free(m);
		snprintf(err, errlen, "index.json: %s", strerror(-fd));
		return fd;
	}
	r = read_fd(fd, CONFIG_MAX, &doc, &len);
	close(fd);
	if (r) {
		free(m);
		snprintf(err, errlen, "index.json: %s", strerror(-r));
		return r;
	}
	r = oci_parse_index(doc, len, 1, &d, err, errlen);
	for (depth = 0; !r && depth < 4; depth++) {
		enum oci_doc k;

		free(doc);
		doc = NULL;
		if ((r = layout_blob(p->dirfd, d.digest, &doc, &len, err, errlen)))
			break;
		k = oci_doc_kind(doc, len, d.media);
		if (k == OCI_DOC_MANIFEST) {
			r = oci_parse_manifest(doc, len, m, err, errlen);
			break;
		}
		if (k != OCI_DOC_INDEX) {
			snprintf(err, errlen, "%.19s: not a manifest or index", d.digest);
			r = -EINVAL;
			break;
		}
		r = oci_parse_index(doc, len, 0, &d, err, errlen);
	}
	free(doc);
	if (!r && !m->config.digest[0])
		r = -EINVAL;
	if (!r)
		r = layout_blob(p->dirfd, m->config.digest, &p->config, &p->config_len, err, errlen);
	for (unsigned i = 0; !r && i < m->nlayers; i++) {
		snprintf(p->layers[i].digest, sizeof(p->layers[i].digest), "%s", m->layers[i].digest);
		snprintf(p->layers[i].path, sizeof(p->layers[i].path), "blobs/sha256/%s", m->layers[i].digest + 7);
		p->layers[i].size = m->layers[i].size;
	}
	p->nlayers = r ? 0 : m->nlayers;
	free(m);
	return r;
}

/* docker save: manifest.json [{"Config":..., "RepoTags":[...], "Layers":[...]}]. */
static int plan_docker(struct plan *p, char *name_hint, size_t hintlen, char *err, size_t errlen)
{
	char *doc = NULL, *ab = NULL, got[OCI_DIGEST_MAX];
	struct json_arena a;
	const struct json *root, *img, *ls, *l, *tags;
	const char *cfg, *e;
	size_t len;
	int fd = oci_root_open(p->dirfd, "manifest.json"), r = -EINVAL;

	if (fd < 0) {
		snprintf(err, errlen, "neither index.json (OCI) nor manifest.json (docker save) in the archive");
		return fd;
	}
	r = read_fd(fd, CONFIG_MAX, &doc, &len);
	close(fd);
	if (r || !(ab = malloc(len * 3 + 65536))) {
		free(doc);
		snprintf(err, errlen, "manifest.json: %s", strerror(r ? -r : ENOMEM));
		return r ? r : -ENOMEM;
	}
	r = -EINVAL;
	a = (struct json_arena){ ab, len * 3 + 65536, 0 };
	if (!(root = json_parse(doc, len, &a, &e)) || root->type != JSON_ARR || !(img = root->u.kids.first) ||
	    img->type != JSON_OBJ || json_get_str(img, "Config", &cfg) || !(ls = json_get(img, "Layers")) ||
	    ls->type != JSON_ARR) {
		snprintf(err, errlen, "manifest.json: malformed (not docker save's format)");
		goto out;
	}
	if ((tags = json_get(img, "RepoTags")) && tags->type == JSON_ARR && tags->u.kids.first &&
	    tags->u.kids.first->type == JSON_STR) {
		const char *t = tags->u.kids.first->u.str.s, *colon = strrchr(t, ':');
		size_t n = colon && !strchr(colon, '/') ? (size_t)(colon - t) : strlen(t);

		snprintf(name_hint, hintlen, "%.*s", (int)n, t);
	}
	if ((fd = oci_root_open(p->dirfd, cfg)) < 0) {
		snprintf(err, errlen, "config %.100s: %s", cfg, strerror(-fd));
		r = fd;
		goto out;
	}
	free(doc);
	doc = NULL;
	r = read_fd(fd, CONFIG_MAX, &p->config, &p->config_len);
	close(fd);
	if (r) {
		snprintf(err, errlen, "config %.100s: %s", cfg, strerror(-r));
		goto out;
	}
	r = -EINVAL;
	/* The config's name is its digest (HEX.json or blobs/sha256/HEX). */
	oci_digest_buf(p->config, p->config_len, got);
	{
		const char *base = strrchr(cfg, '/') ? strrchr(cfg, '/') + 1 : cfg;

		if (strlen(base) >= 64 && strspn(base, "0123456789abcdef") == 64 && strncmp(base, got + 7, 64)) {
			snprintf(err, errlen, "config %.100s: digest mismatch (the data is %.19s...)", cfg, got);
			r = -EBADMSG;
			goto out;
		}
	}
	p->nlayers = 0;
	for (l = ls->u.kids.first; l; l = l->next) {
		struct stat st;

		if (l->type != JSON_STR || p->nlayers == OCI_MAX_LAYERS || l->u.str.len >= sizeof(p->layers[0].path)) {
			snprintf(err, errlen, "manifest.json: a bad Layers entry");
			goto out;
		}
		snprintf(p->layers[p->nlayers].path, sizeof(p->layers[0].path), "%s", l->u.str.s);
		p->layers[p->nlayers].digest[0] = '\0';
		fd = oci_root_open(p->dirfd, l->u.str.s);
		p->layers[p->nlayers].size = fd >= 0 && fstat(fd, &st) == 0 ? st.st_size : 0;
		if (fd >= 0)
			close(fd);
		p->nlayers++;
	}
	r = 0;
out:
	free(doc);
	free(ab);
	return r;
}

static void import_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm image import FILE [--name NAME] [-q] [--max-layer-unpacked SIZE]\n"
		"                        [--max-unpacked SIZE] [--max-entries N]\n"
		"       vmm image import --dir OCI_LAYOUT_DIR [--name NAME] [-q] [...]\n\n"
		"Makes a new image version from a `docker save` tarball, an OCI archive\n"
		"(skopeo's oci-archive:, `vmm image export`) or an OCI image layout\n"
		"directory. NAME defaults to the archive's repository tag or file name.\n"
		"The unpack caps are vmm image pull's (see its --help): a layer past one\n"
		"fails the import.\n");
}

int image_import_main(int argc, char **argv, struct image_out *o)
{
	const char *file = NULL, *dir = NULL;
	char name[IMAGE_NAME_MAX + 1] = "", hint[256] = "", err[600], tmp[PATH_MAX + 64] = "", store[PATH_MAX];
	struct plan *p = calloc(1, sizeof(*p));
	struct oci_limits lim;
	int i, quiet = 0, r = CLI_EXIT_ERROR, fd, lf;

	if (!p)
		return CLI_EXIT_ERROR;
	p->dirfd = -1;
	if (oci_limits_init(&lim, err, sizeof(err))) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s", err);
		free(p);
		return CLI_EXIT_USAGE;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help")) {
			import_usage(o->result);
			free(p);
			return 0;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = 1;
		} else if ((lf = limit_flag("image import", &lim, a, val, o)) <= 0) {
			if (lf) {
				free(p);
				return CLI_EXIT_USAGE;
			}
			i++;
		} else if (val && !strcmp(a, "--dir")) {
			dir = val;
			i++;
		} else if (val && !strcmp(a, "--name")) {
			if (!image_name_ok(val)) {
				cli_seterr(o->err, sizeof(o->err), 0, "'%s': names are 1-%d of a-z 0-9 . _ -", val, IMAGE_NAME_MAX);
				free(p);
				return CLI_EXIT_USAGE;
			}
			snprintf(name, sizeof(name), "%s", val);
			i++;
		} else if (a[0] != '-' && !file) {
			file = a;
		} else {
			free(p);
			return cli_bad_arg_msg(o->err, sizeof(o->err), "image import", argv[i],
					       "--dir --name --max-layer-unpacked --max-unpacked --max-entries");
		}
	}
	if (!file == !dir) {
		free(p);
		return cli_usage_msg(o->err, sizeof(o->err), "image import", "give FILE or --dir OCI_LAYOUT_DIR");
	}
	if (dir) {
		if ((p->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", dir, strerror(errno));
			goto out;
		}
		snprintf(p->source, sizeof(p->source), "oci-layout:%.500s", dir);
	} else {
		struct unpack_stats st;
		struct unpack_limits ul;

		if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", file, strerror(errno));
			goto out;
		}
		if (image_store(store, sizeof(store))) {
			close(fd);
			goto out;
		}
		snprintf(tmp, sizeof(tmp), "%s/.import-%d", store, (int)getpid());
		cli_rm_tree(tmp);
		if (mkdir(tmp, 0700) < 0 || (p->dirfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", tmp, strerror(errno));
			close(fd);
			goto out;
		}
		if (!quiet && o->progress)
			fprintf(o->progress, "reading %s\n", file);
		oci_unpack_limits(&lim, 0, &ul); /* the archive itself: as one layer */
		i = oci_unpack_fd_limited(p->dirfd, fd, NULL, NULL, &ul, &st, err, sizeof(err));
		close(fd);
		if (i) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", file, err);
			goto out;
		}
		snprintf(p->source, sizeof(p->source), "archive:%.500s", file);
	}
	fd = oci_root_open(p->dirfd, "index.json");
	if (fd >= 0) {
		close(fd);
		i = plan_oci_layout(p, err, sizeof(err));
	} else {
		i = plan_docker(p, hint, sizeof(hint), err, sizeof(err));
	}
	if (i) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", file ? file : dir, err);
		goto out;
	}
	if (!name[0])
		default_name(hint[0] ? hint : file ? file : dir, name);
	if (!name[0] || !strcmp(name, "imported")) {
		char base[256], *dot;

		snprintf(base, sizeof(base), "%s", strrchr(file ? file : dir, '/') ? strrchr(file ? file : dir, '/') + 1
										 : file ? file : dir);
		if ((dot = strchr(base, '.')))
			*dot = '\0';
		default_name(base, name);
	}
	r = make_image(p, name, &lim, quiet, o) ? CLI_EXIT_ERROR : 0;
out:
	if (p->dirfd >= 0)
		close(p->dirfd);
	if (tmp[0])
		cli_rm_tree(tmp);
	free(p->config);
	free(p);
	return r;
}

/* ---- vmm image export ------------------------------------------------------------ */

static int run_tool(const char *const *argv, int out_fd)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (nul >= 0) {
			dup2(nul, 0);
			if (out_fd < 0)
				dup2(nul, 1);
		}
		if (out_fd >= 0)
			dup2(out_fd, 1);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* Moves dir/blobs/sha256/tmpname to its digest's name; digest out. */
static int seal_blob(const char *dir, const char *tmpname, char digest[OCI_DIGEST_MAX], int64_t *size)
{
	char from[PATH_MAX + 64], to[PATH_MAX + 128];
	struct stat st;
	int fd, r;

	snprintf(from, sizeof(from), "%s/blobs/sha256/%s", dir, tmpname);
	if ((fd = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	r = oci_digest_fd(fd, digest);
	if (!r && fstat(fd, &st) < 0)
		r = -errno;
	close(fd);
	if (r)
		return r;
	*size = st.st_size;
	snprintf(to, sizeof(to), "%s/blobs/sha256/%s", dir, digest + 7);
	return rename(from, to) < 0 ? -errno : 0;
}

static int put_blob(const char *dir, const char *text, char digest[OCI_DIGEST_MAX], int64_t *size)
{
	char path[PATH_MAX + 128];

	oci_digest_buf(text, strlen(text), digest);
	*size = (int64_t)strlen(text);
	snprintf(path, sizeof(path), "%s/blobs/sha256", dir);
	return write_file_at(path, digest + 7, text);
}

static void export_usage(FILE *out)
{
	fprintf(out, "usage: vmm image export NAME[:VERSION] FILE\n\n"
		     "Writes the version as an OCI archive (one gzip layer of its root\n"
		     "filesystem without " IMAGE_INIT ", its defaults as the image config), for\n"
		     "skopeo copy oci-archive:FILE ... or vmm image import FILE.\n");
}

int image_export_main(int argc, char **argv, struct image_out *o)
{
	struct image_info im;
	struct oci_defaults *d = NULL;
	char work[PATH_MAX + 64], root[PATH_MAX + 80], blobs[PATH_MAX + 96], layer[PATH_MAX + 128], out[PATH_MAX + 16];
	char diff_id[OCI_DIGEST_MAX], ldig[OCI_DIGEST_MAX], cdig[OCI_DIGEST_MAX], mdig[OCI_DIGEST_MAX];
	char *cfg = NULL, *dj = NULL, *man = NULL, idx[1024];
	int64_t lsize = 0, csize = 0, msize = 0;
	int r = CLI_EXIT_ERROR, fd;

	work[0] = '\0';
	if (argc == 2 && !strcmp(argv[1], "--help")) {
		export_usage(o->result);
		return 0;
	}
	if (argc != 3 || argv[1][0] == '-')
		return cli_usage_msg(o->err, sizeof(o->err), "image export", "expected NAME[:VERSION] FILE");
	if (image_resolve(argv[1], &im))
		return CLI_EXIT_ERROR;
	if (!(d = calloc(1, sizeof(*d))) || !(cfg = malloc(1 << 17)) || !(dj = malloc(1 << 16)) || !(man = malloc(8192)))
		goto out;
	if (image_defaults(&im, d)) {
		memset(d, 0, sizeof(*d));
		d->workdir = d->user = d->drives = "";
	}
	if (!d->drives[0])
		d->drives = im.drives;
	if (!d->mem_mib)
		d->mem_mib = im.mem_mib;
	if (!d->cpus)
		d->cpus = im.cpus;
	snprintf(work, sizeof(work), "%s.export-%d", argv[2], (int)getpid());
	snprintf(root, sizeof(root), "%s/root", work);
	snprintf(blobs, sizeof(blobs), "%s/blobs/sha256", work);
	snprintf(out, sizeof(out), "%s.tmp", argv[2]);
	if (mkdir(work, 0700) < 0 || cli_mkdir_p(root, 0755) || cli_mkdir_p(blobs, 0755)) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", work, strerror(errno));
		goto out;
	}
	if (o->progress)
		fprintf(o->progress, "[1/3] reading %s:%u's root filesystem (debugfs rdump)\n", im.name, im.version);
	{
		char why[256];

		/* An image's root filesystem may be a guest's work: confined. */
		if (rdump_can_confine(why, sizeof(why))) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s", why);
			goto out;
		}
		if (rdump_confined(im.rootfs, root, 1)) {
			cli_seterr(o->err, sizeof(o->err), 0, "debugfs rdump of %s failed", im.rootfs);
			goto out;
		}
	}
	if (o->progress)
		fprintf(o->progress, "[2/3] writing the layer\n");
	{
		const char *tar[] = { "tar", "--numeric-owner", "--sort=name", "--format=posix",
				      "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
				      "--exclude=./lost+found", "--exclude=." IMAGE_INIT, "-C", root, "-cf", "-", ".", NULL };
		const char *gz[] = { "gzip", "-n", "-f", NULL, NULL };
		char lt[PATH_MAX + 140];

		snprintf(layer, sizeof(layer), "%s/layer.tar", blobs);
		snprintf(lt, sizeof(lt), "%s", layer);
		if ((fd = open(layer, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0 || run_tool(tar, fd)) {
			cli_seterr(o->err, sizeof(o->err), 0, "tar of the root filesystem failed");
			if (fd >= 0)
				close(fd);
			goto out;
		}
		close(fd);
		fd = open(layer, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || oci_digest_fd(fd, diff_id)) {
			if (fd >= 0)
				close(fd);
			goto out;
		}
		close(fd);
		gz[3] = lt;
		if (run_tool(gz, -1) || seal_blob(work, "layer.tar.gz", ldig, &lsize)) {
			cli_seterr(o->err, sizeof(o->err), 0, "compressing the layer failed");
			goto out;
		}
	}
	if (o->progress)
		fprintf(o->progress, "[3/3] writing %s\n", argv[2]);
	if (oci_defaults_json(d, dj, 1 << 16))
		goto out;
	{
		char created[32];
		time_t t = (time_t)im.created;
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
		snprintf(cfg, 1 << 17,
			 "{\"architecture\":\"amd64\",\"os\":\"linux\",\"created\":\"%s\",\"config\":%s,"
			 "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\"]},"
			 "\"history\":[{\"created\":\"%s\",\"created_by\":\"vmm image export %s:%u\"}]}",
			 created, dj, diff_id, created, im.name, im.version);
	}
	if (put_blob(work, cfg, cdig, &csize))
		goto out;
	snprintf(man, 8192,
		 "{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_MANIFEST "\","
		 "\"config\":{\"mediaType\":\"" MT_OCI_CONFIG "\",\"digest\":\"%s\",\"size\":%lld},"
		 "\"layers\":[{\"mediaType\":\"" MT_OCI_LAYER_GZ "\",\"digest\":\"%s\",\"size\":%lld}]}",
		 cdig, (long long)csize, ldig, (long long)lsize);
	if (put_blob(work, man, mdig, &msize))
		goto out;
	snprintf(idx, sizeof(idx),
		 "{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_INDEX "\",\"manifests\":[{\"mediaType\":\"" MT_OCI_MANIFEST
		 "\",\"digest\":\"%s\",\"size\":%lld,\"annotations\":{\"org.opencontainers.image.ref.name\":\"%u\"}}]}",
		 mdig, (long long)msize, im.version);
	if (write_file_at(work, "index.json", idx) || write_file_at(work, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}"))
		goto out;
	{
		char rootdir[PATH_MAX + 80];
		const char *rm[] = { "rm", "-rf", "--one-file-system", "--", rootdir, NULL };
		const char *tar[] = { "tar", "--numeric-owner", "--sort=name", "-C", work, "-cf", out, "oci-layout",
				      "index.json", "blobs", NULL };

		snprintf(rootdir, sizeof(rootdir), "%s", root);
		if (run_tool(rm, -1) || run_tool(tar, -1) || rename(out, argv[2]) < 0) {
			cli_seterr(o->err, sizeof(o->err), 0, "writing %s failed", argv[2]);
			unlink(out);
			goto out;
		}
	}
	fprintf(o->result, "%s\n", argv[2]);
	r = 0;
out:
	{
		const char *rm[] = { "rm", "-rf", "--one-file-system", "--", work, NULL };

		if (work[0] && access(work, F_OK) == 0)
			run_tool(rm, -1);
	}
	free(d);
	free(cfg);
	free(dj);
	free(man);
	return r;
}

