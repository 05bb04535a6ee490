/* vmm image build --builtin [RECIPE] (docs/images.md "Built-in images"):
 * the images products ship as standard (python, node), built by the
 * Dockerfile builder from recipes kept in the repository (boot/images/RECIPE/
 * Dockerfile, installed in vmm's lib folder: cli_lib_dir()/images). Each
 * recipe starts FROM debootstrap:SUITE+PACKAGES (the packages come from
 * Debian on the host: a RUN step has no network) and sets the sandboxes'
 * defaults on top. A build is a new version of the image named after the
 * recipe (or -t NAME), recorded with the hash of its inputs (the recipe's
 * files, guest-init, the mirror): when the newest built version has the
 * same, nothing is built and that version is named (--refresh: built
 * anyway, the Debian packages fetched again). Without RECIPE, lists the
 * recipes. */
#include "cli/dockerfile/image_dockerfile.h"
#include "cli/images/images.h"
#include "cli/util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct builtin_args {
	const char *recipe, *name, *mirror;
	int quiet, refresh;
};

/* argv: "build" and its arguments, --builtin among them. -1 to go on,
 * else the exit status. */
static int builtin_parse(int argc, char **argv, struct builtin_args *a, struct image_out *out)
{
	int i;

	memset(a, 0, sizeof(*a));
	a->mirror = DFI_DEFAULT_MIRROR;
	for (i = 1; i < argc; i++) {
		const char *o = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		/* --help: main.c prints vmm image's usage, which has --builtin's */
		if (!strcmp(o, "--builtin")) {
			continue;
		} else if (!strcmp(o, "-q") || !strcmp(o, "--quiet")) {
			a->quiet = 1;
		} else if (!strcmp(o, "--refresh")) {
			a->refresh = 1;
		} else if (o[0] != '-') {
			if (a->recipe)
				return cli_usage_msg(out->err, sizeof(out->err), "image build", "--builtin %s %s: one recipe at a time", a->recipe, o);
			a->recipe = o;
		} else if (!strcmp(o, "-t") || !strcmp(o, "--tag") || !strcmp(o, "--mirror")) {
			if (!val)
				return cli_usage_msg(out->err, sizeof(out->err), "image build", "%s needs a value", o);
			*(!strcmp(o, "--mirror") ? &a->mirror : &a->name) = val;
			i++;
		} else {
			return cli_usage_msg(out->err, sizeof(out->err), "image build", "%s: not an option of --builtin (a recipe names its own source)",
					       o);
		}
	}
	if (a->recipe && !image_name_ok(a->recipe))
		return cli_usage_msg(out->err, sizeof(out->err), "image build", "--builtin %s: not a recipe name", a->recipe);
	if (a->name && (strchr(a->name, ':') || !image_name_ok(a->name)))
		return cli_usage_msg(out->err, sizeof(out->err), "image build", "-t %s: a name (a-z 0-9 . _ -; versions are numbered)", a->name);
	if (a->name && !a->recipe)
		return cli_usage_msg(out->err, sizeof(out->err), "image build", "-t %s: which recipe? (vmm image build --builtin)", a->name);
	return -1;
}

/* ---- the inputs' hash --------------------------------------------------- */

static int hash_file(struct oci_hash *h, const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		oci_hash_update(h, buf, (size_t)n);
	close(fd);
	return n < 0 ? -EIO : 0;
}

/* Every entry below dir (relative name, type, mode, content or link
 * target), in name order. */
static int hash_tree(struct oci_hash *h, const char *dir, const char *rel, unsigned depth)
{
	struct dirent **ents;
	int n, i, r = 0;

	if (depth > 16)
		return -ELOOP;
	if ((n = scandir(dir, &ents, NULL, alphasort)) < 0)
		return -errno;
	for (i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		char p[PATH_MAX], q[PATH_MAX], link[PATH_MAX];
		struct stat st;
		ssize_t l;

		if (r || !strcmp(nm, ".") || !strcmp(nm, ".."))
			goto next;
		snprintf(p, sizeof(p), "%s/%s", dir, nm);
		snprintf(q, sizeof(q), "%s/%s", rel, nm);
		if (lstat(p, &st) < 0) {
			r = -errno;
			goto next;
		}
		oci_hash_update(h, q, strlen(q) + 1);
		oci_hash_update(h, &st.st_mode, sizeof(st.st_mode));
		if (S_ISDIR(st.st_mode))
			r = hash_tree(h, p, q, depth + 1);
		else if (S_ISREG(st.st_mode))
			r = hash_file(h, p);
		else if (S_ISLNK(st.st_mode) && (l = readlink(p, link, sizeof(link))) >= 0)
			oci_hash_update(h, link, (size_t)l);
next:
		free(ents[i]);
	}
	free(ents);
	return r;
}

/* The recipe folder's files, guest-init, the mirror, how debootstrap:
 * trees are made: 16 hex digits. */
static int recipe_inputs(const char *dir, const char *guest_init, const char *mirror, char out[32])
{
	struct oci_hash h;
	char d[OCI_DIGEST_MAX];
	int r;

	if ((r = oci_hash_init(&h)))
		return r;
	oci_hash_update(&h, "vmm-builtin-1", 14);
	oci_hash_update(&h, dfi_debootstrap_method(), strlen(dfi_debootstrap_method()) + 1);
	if (!(r = hash_tree(&h, dir, "", 0)) && !(r = hash_file(&h, guest_init)))
		oci_hash_update(&h, mirror, strlen(mirror) + 1);
	oci_hash_final(&h, d);
	snprintf(out, 32, "%.16s", d + 7); /* after "sha256:" */
	return r;
}

/* The newest built version of name, and whether its inputs are these
 * (1) or not (0); 0 with *version 0 when none is built. */
static int newest_built(const char *name, const char *inputs, unsigned *version)
{
	unsigned *v;
	int n = image_versions(name, &v), i, same = 0;

	*version = 0;
	for (i = n - 1; i >= 0 && !*version; i--) {
		struct image_info im;

		if (image_load(name, v[i], &im) == 0 && im.status == IMG_BUILT) {
			*version = v[i];
			same = !strcmp(im.inputs, inputs);
		}
	}
	if (n > 0)
		free(v);
	return same;
}

/* ---- listing, building -------------------------------------------------- */

/* The recipes folder and guest-init: 0, or the exit status with why in
 * out->err. */
static int lib_paths(char *recipes, size_t rlen, char *gi, size_t glen, struct image_out *out)
{
	char lib[PATH_MAX], looked[PATH_MAX * 2 + 64];

	if (cli_lib_dir(lib, sizeof(lib), looked, sizeof(looked)) ||
	    snprintf(recipes, rlen, "%s/images", lib) >= (int)rlen || snprintf(gi, glen, "%s/guest/guest-init", lib) >= (int)glen) {
		cli_seterr(out->err, sizeof(out->err), 0, "vmm's lib folder not found (looked in %s)", looked);
		return CLI_EXIT_ERROR;
	}
	if (access(recipes, R_OK | X_OK)) {
		cli_seterr(out->err, sizeof(out->err), 0,
			   "no recipes in %s: make install, or run make in vmm's source tree", recipes);
		return CLI_EXIT_ERROR;
	}
	if (access(gi, R_OK)) {
		cli_seterr(out->err, sizeof(out->err), 0,
			   "guest-init not found (%s): make install, or run make in vmm's source tree", gi);
		return CLI_EXIT_ERROR;
	}
	return 0;
}

/* The recipe's summary: its Dockerfile's first comment line. */
static void summary(const char *dockerfile, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen(dockerfile, "re");

	snprintf(out, len, "-");
	while (f && fgets(line, sizeof(line), f)) {
		if (line[0] != '#')
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(out, len, "%s", line + 1 + (line[1] == ' '));
		break;
	}
	if (f)
		fclose(f);
}

static int list_recipes(const char *recipes, const char *gi, const char *mirror, struct image_out *out)
{
	struct dirent **ents;
	int n = scandir(recipes, &ents, NULL, alphasort), i, shown = 0;

	if (n < 0) {
		cli_seterr(out->err, sizeof(out->err), 0, "%s: %s", recipes, strerror(errno));
		return CLI_EXIT_ERROR;
	}
	fprintf(out->result, "%-10s %-22s %s\n", "RECIPE", "IMAGE", "WHAT");
	for (i = 0; i < n; i++) {
		char dir[PATH_MAX + 256], df[PATH_MAX + 272], what[200], inputs[32], state[IMAGE_NAME_MAX + 32];
		unsigned v;
		int same;

		snprintf(dir, sizeof(dir), "%s/%s", recipes, ents[i]->d_name);
		snprintf(df, sizeof(df), "%s/Dockerfile", dir);
		if (image_name_ok(ents[i]->d_name) && !access(df, R_OK) && !recipe_inputs(dir, gi, mirror, inputs)) {
			summary(df, what, sizeof(what));
			same = newest_built(ents[i]->d_name, inputs, &v);
			if (!v)
				snprintf(state, sizeof(state), "not built");
			else
				snprintf(state, sizeof(state), "%.48s:%u%s", ents[i]->d_name, v, same ? "" : " (old)");
			fprintf(out->result, "%-10s %-22s %s\n", ents[i]->d_name, state, what);
			shown++;
		}
		free(ents[i]);
	}
	free(ents);
	if (!shown)
		fprintf(out->result, "(no recipes in %s)\n", recipes);
	return 0;
}

int image_builtin_main(int argc, char **argv, struct image_out *out)
{
	struct builtin_args a;
	char recipes[PATH_MAX], gi[PATH_MAX + 32], dir[PATH_MAX + 64], df[PATH_MAX + 80], inputs[32], src[80];
	const char *const noargs[] = { NULL };
	struct dfi_build o = { 0 };
	long long t0 = cli_mono_ms();
	unsigned v;
	int r;

	if ((r = builtin_parse(argc, argv, &a, out)) >= 0 || (r = lib_paths(recipes, sizeof(recipes), gi, sizeof(gi), out)))
		return r;
	if (!a.recipe)
		return list_recipes(recipes, gi, a.mirror, out);
	snprintf(dir, sizeof(dir), "%s/%s", recipes, a.recipe);
	snprintf(df, sizeof(df), "%s/Dockerfile", dir);
	if (access(df, R_OK)) {
		cli_seterr(out->err, sizeof(out->err), 0, "--builtin %s: no such recipe (vmm image build --builtin lists them)",
			   a.recipe);
		return CLI_EXIT_USAGE;
	}
	if ((r = recipe_inputs(dir, gi, a.mirror, inputs))) {
		cli_seterr(out->err, sizeof(out->err), 0, "reading the recipe %s: %s", dir, strerror(-r));
		return CLI_EXIT_ERROR;
	}
	if (!a.name)
		a.name = a.recipe;
	if (!a.refresh && newest_built(a.name, inputs, &v)) {
		if (!a.quiet)
			fprintf(out->progress, "vmm image build: %s:%u is up to date (recipe %s, inputs %s)\n", a.name, v,
				a.recipe, inputs);
		fprintf(out->result, "%s:%u\n", a.name, v);
		return 0;
	}
	snprintf(src, sizeof(src), "builtin:%s", a.recipe);
	o.file = df;
	o.context = dir;
	o.name = a.name;
	o.build_args = noargs;
	o.mirror = a.mirror;
	o.source = src;
	o.inputs = inputs;
	o.run_mem = 512;
	o.quiet = a.quiet;
	o.refresh = a.refresh;
	if ((r = dfi_build_image(&o, out)))
		return r;
	if (!a.quiet)
		fprintf(out->progress, "built-in image %s from recipe %s in %.1f s\n", a.name, a.recipe,
			(double)(cli_mono_ms() - t0) / 1000.0);
	return 0;
}
