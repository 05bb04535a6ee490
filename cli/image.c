/* vmm image: ls, inspect and rm here; build, warm, pull, import and export
 * in the image subsystem (cli/images/, docs/images.md). */
#include "cli/images/images.h"
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/wire/json.h"
#include "vmm/base/log.h"
#include "vmm/base/snapfmt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- ls, inspect, rm ----------------------------------------------------- */

static void human_size(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ull << 30))
		snprintf(buf, len, "%.1f GiB", (double)b / (1 << 30));
	else if (b >= (1ull << 20))
		snprintf(buf, len, "%.0f MiB", (double)b / (1 << 20));
	else
		snprintf(buf, len, "%llu KiB", (unsigned long long)(b >> 10));
}

static void image_json(struct json_writer *w, const struct image_info *im, int latest, int warm)
{
	jw_obj(w);
	jw_key(w, "name");
	jw_str(w, im->name);
	jw_key(w, "version");
	jw_int(w, im->version);
	jw_key(w, "status");
	jw_str(w, image_status_name(im->status));
	jw_key(w, "latest");
	jw_bool(w, latest);
	jw_key(w, "size");
	jw_int(w, (int64_t)im->size);
	jw_key(w, "created");
	jw_int(w, im->created);
	jw_key(w, "mem_mib");
	jw_int(w, im->mem_mib);
	jw_key(w, "cpus");
	jw_int(w, im->cpus);
	/* a sandbox's root disk: the image's --disk-size, else the default
	 * unless the image is larger (launch.c: grow_root) */
	jw_key(w, "disk_mib");
	if (im->disk_mib)
		jw_int(w, (int64_t)im->disk_mib);
	else
		jw_int(w, (int64_t)(((im->size + (1 << 20) - 1) >> 20) > IMAGE_DISK_DEFAULT_MIB
					    ? (im->size + (1 << 20) - 1) >> 20 : IMAGE_DISK_DEFAULT_MIB));
	jw_key(w, "drives"); /* mounted by its sandboxes (vmm image build --drive) */
	jw_str(w, im->drives);
	jw_key(w, "source");
	jw_str(w, im->source);
	jw_key(w, "inputs");
	jw_str(w, im->inputs);
	jw_key(w, "error");
	jw_str(w, im->error);
	jw_key(w, "rootfs");
	jw_str(w, im->status == IMG_BUILT ? im->rootfs : "");
	jw_key(w, "warm");
	jw_bool(w, warm);
	jw_obj_end(w);
}

static unsigned latest_of(const char *name)
{
	unsigned *v, r = 0;
	int n = image_versions(name, &v), i;
	struct image_info im;

	for (i = n - 1; i >= 0 && !r; i--)
		if (image_load(name, v[i], &im) == 0 && im.status == IMG_BUILT)
			r = v[i];
	free(v);
	return r;
}

static int is_warm(const struct image_info *im)
{
	char kernel[PATH_MAX], dir[PATH_MAX];
	enum log_level lv = log_get_level();
	int r;

	if (image_default_kernel(kernel, sizeof(kernel)))
		return 0;
	log_set_level(LOG_WARN); /* no "stale" notes in listings */
	r = image_warm_dir(im, kernel, dir, sizeof(dir)) == 0;
	log_set_level(lv);
	return r;
}

static int ls_images(int json)
{
	char store[PATH_MAX], **names = NULL;
	struct dirent *e;
	long long now = (long long)time(NULL);
	int nn = 0, i, first = 1;
	DIR *d;

	if (image_store(store, sizeof(store)))
		return CLI_EXIT_ERROR;
	if (!(d = opendir(store)))
		return CLI_EXIT_ERROR;
	while ((e = readdir(d))) {
		char **nv;

		if (!image_name_ok(e->d_name) || !(nv = realloc(names, (size_t)(nn + 1) * sizeof(*names))))
			continue;
		names = nv;
		names[nn++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)nn, sizeof(*names), (int (*)(const void *, const void *))strcmp);
	if (json)
		printf("[");
	else
		printf("%-28s %-9s %9s %8s %5s  %s\n", "IMAGE", "STATUS", "SIZE", "AGE", "WARM", "SOURCE");
	for (i = 0; i < nn; i++) {
		unsigned *v, latest = names[i] ? latest_of(names[i]) : 0;
		int n = names[i] ? image_versions(names[i], &v) : 0, j;

		for (j = 0; j < n; j++) {
			struct image_info im;
			char ref[IMAGE_NAME_MAX + 24], size[16] = "-", age[16] = "-";
			int warm;

			if (image_load(names[i], v[j], &im))
				continue;
			warm = im.status == IMG_BUILT && is_warm(&im);
			if (json) {
				char buf[4096];
				struct json_writer w;

				jw_init(&w, buf, sizeof(buf));
				image_json(&w, &im, v[j] == latest, warm);
				printf("%s%s", first ? "" : ",", jw_done(&w) ? buf : "{}");
				first = 0;
				continue;
			}
			snprintf(ref, sizeof(ref), "%s:%u%s", im.name, im.version, v[j] == latest ? " (latest)" : "");
			if (im.status == IMG_BUILT)
				human_size(im.size, size, sizeof(size));
			if (im.created)
				cli_human_duration(now - im.created, age, sizeof(age));
			printf("%-28s %-9s %9s %8s %5s  %s\n", ref, image_status_name(im.status), size, age,
			       warm ? "yes" : "-", im.status == IMG_FAILED ? im.error : im.source);
		}
		if (n > 0)
			free(v);
		free(names[i]);
	}
	free(names);
	if (json)
		printf("]\n");
	return 0;
}

static int inspect_image(const char *ref)
{
	char name[IMAGE_NAME_MAX + 1], buf[4096];
	struct json_writer w;
	struct image_info im;
	unsigned version;

	if (image_parse_ref(ref, name, &version)) {
		fprintf(stderr, "vmm image inspect: '%s' is not NAME[:VERSION]\n", ref);
		return CLI_EXIT_USAGE;
	}
	if (!version && !(version = latest_of(name))) {
		fprintf(stderr, "vmm image inspect: no built version of %s (vmm image ls)\n", name);
		return CLI_EXIT_ERROR;
	}
	if (image_load(name, version, &im)) {
		fprintf(stderr, "vmm image inspect: no image %s:%u (vmm image ls)\n", name, version);
		return CLI_EXIT_ERROR;
	}
	jw_init(&w, buf, sizeof(buf));
	image_json(&w, &im, version == latest_of(name), im.status == IMG_BUILT && is_warm(&im));
	printf("%s\n", jw_done(&w) ? buf : "{}");
	return 0;
}

/* rm -rf DIR with the tools everyone has (image folders hold a few files). */
static int remove_tree(const char *dir)
{
	pid_t p = fork();
	int st;

	if (p < 0)
		return -errno;
	if (p == 0) {
		execlp("rm", "rm", "-rf", "--one-file-system", "--", dir, (char *)NULL);
		_exit(127);
	}
	if (waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -EIO;
	return 0;
}

static int rm_image(const char *ref, int force)
{
	char name[IMAGE_NAME_MAX + 1], store[PATH_MAX], p[PATH_MAX + 64], who[300];
	unsigned version, *v;
	int n, i, r = 0;

	if (image_parse_ref(ref, name, &version)) {
		fprintf(stderr, "vmm image rm: '%s' is not NAME[:VERSION]\n", ref);
		return CLI_EXIT_USAGE;
	}
	n = image_versions(name, &v);
	if (n <= 0) {
		fprintf(stderr, "vmm image rm: no image %s (vmm image ls)\n", name);
		return CLI_EXIT_ERROR;
	}
	for (i = 0; i < n; i++) {
		if (version && v[i] != version)
			continue;
		if (!force && image_in_use(name, v[i], who, sizeof(who))) {
			fprintf(stderr, "vmm image: %s\n", who);
			fprintf(stderr, "vmm image rm: refused; stop and remove the sandbox first, or use -f\n");
			free(v);
			return CLI_EXIT_ERROR;
		}
	}
	if (image_store(store, sizeof(store))) {
		free(v);
		return CLI_EXIT_ERROR;
	}
	for (i = 0; i < n; i++) {
		if (version && v[i] != version)
			continue;
		snprintf(p, sizeof(p), "%s/%s/%u", store, name, v[i]);
		if (remove_tree(p)) {
			fprintf(stderr, "vmm image rm: cannot remove %s\n", p);
			r = CLI_EXIT_ERROR;
			continue;
		}
		printf("%s:%u\n", name, v[i]);
	}
	if (version && i == n && !r) {
		int found = 0;

		for (i = 0; i < n; i++)
			found |= v[i] == version;
		if (!found) {
			fprintf(stderr, "vmm image rm: no image %s:%u\n", name, version);
			r = CLI_EXIT_ERROR;
		}
	}
	free(v);
	image_update_latest(name);
	n = image_versions(name, &v);
	if (n == 0) {
		snprintf(p, sizeof(p), "%s/%s/latest", store, name);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s", store, name);
		rmdir(p);
	}
	free(v);
	return r;
}

static void image_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm image build NAME [--from-dir DIR | --from-tar FILE |\n"
		"                             --debian SUITE [--packages a,b,c] [--mirror URL] |\n"
		"                             --busybox PATH] [--file SRC:DEST]... [--mem MiB]\n"
		"                             [--cpus N] [--size SIZE] [--if-changed] [-q]\n"
		"       vmm image build --builtin [python|node] [-t NAME] [--mirror URL] [--refresh] [-q]\n"
		"       vmm image ls [--json]\n"
		"       vmm image inspect NAME[:VERSION]\n"
		"       vmm image rm [-f] NAME[:VERSION]...\n"
		"       vmm image warm NAME[:VERSION]\n"
		"       vmm image pull REF [--name NAME] [--creds-file FILE] [--ca-file FILE] [--insecure]\n"
		"                      [--max-blob|--max-image|--max-layer-unpacked|--max-unpacked SIZE]\n"
		"                      [--max-entries N]\n"
		"       vmm image import FILE | --dir OCI_LAYOUT_DIR [--name NAME]\n"
		"       vmm image export NAME[:VERSION] FILE\n\n"
		"Images are ext4 root filesystems with guest-init as " IMAGE_INIT ", built\n"
		"once into numbered, immutable versions (NAME:1, NAME:2, ... NAME:latest).\n"
		"`vmm run --image NAME[:VERSION]` starts a sandbox on a copy-on-write copy\n"
		"of one; after `vmm image warm`, from its snapshot instead of a boot.\n"
		"rm refuses a version a sandbox uses (-f: remove it anyway).\n"
		"build --builtin RECIPE builds one of vmm's own images from its recipe (vmm's\n"
		"lib folder, images/RECIPE/Dockerfile) as image RECIPE (-t: NAME): python (pip,\n"
		"venv, pytest, git, build tools) or node (node, npm, git), Debian packages\n"
		"debootstrapped on the host (root; network the first time: the tree is cached\n"
		"in $VMM_CACHE/build); a new version only when the recipe, guest-init or\n"
		"--mirror changed (else it prints the current one), or with --refresh (the\n"
		"packages fetched again). build --builtin alone lists the recipes. Store:\n"
		"$VMM_IMAGE_DIR, /var/lib/vmm/images as root, else ~/.local/state/vmm/images\n"
		"(docs/images.md).\n");
}

/* build, warm, pull, import, export: the subsystem does the work and says
 * how it went into o (images.h); the verb prints what failed. */
static int image_cmd(int (*cmd)(int, char **, struct image_out *), int argc, char **argv)
{
	struct image_out o = { .progress = stderr, .result = stdout };
	int r;

	r = cmd(argc - 1, argv + 1, &o);
	fflush(stdout);
	if (r && o.err[0])
		fprintf(stderr, "vmm image %s: %s\n", argv[1], o.err);
	return r;
}

static int image_main(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : "";
	int i, r = 0, force = 0, json = 0;

	if (!strcmp(sub, "build")) {
		/* --builtin RECIPE: a recipe of the Dockerfile builder's
		 * (image_builtin.c); -f Dockerfile: the builder's
		 * (image_dockerfile.c) */
		for (i = 2; i < argc; i++)
			if (!strcmp(argv[i], "--builtin"))
				return image_cmd(image_builtin_main, argc, argv);
		for (i = 2; i < argc; i++)
			if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--dockerfile"))
				return image_cmd(image_dockerfile_main, argc, argv);
		return image_cmd(image_build_main, argc, argv);
	}
	if (!strcmp(sub, "warm"))
		return image_cmd(image_warm_main, argc, argv);
	if (!strcmp(sub, "pull"))
		return image_cmd(image_pull_main, argc, argv);
	if (!strcmp(sub, "import"))
		return image_cmd(image_import_main, argc, argv);
	if (!strcmp(sub, "export"))
		return image_cmd(image_export_main, argc, argv);
	if (!strcmp(sub, "ls")) {
		for (i = 2; i < argc; i++) {
			if (strcmp(argv[i], "--json"))
				return cli_bad_arg("image ls", argv[i], NULL);
			json = 1;
		}
		return ls_images(json);
	}
	if (!strcmp(sub, "inspect") && argc == 3)
		return inspect_image(argv[2]);
	if (!strcmp(sub, "rm") && argc >= 3) {
		for (i = 2; i < argc; i++) {
			if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--force"))
				force = 1;
		}
		for (i = 2; i < argc; i++) {
			if (argv[i][0] == '-')
				continue;
			if (rm_image(argv[i], force))
				r = CLI_EXIT_ERROR;
		}
		return r;
	}
	if (!strcmp(sub, "--help") || !strcmp(sub, "help")) {
		image_usage(stdout);
		return 0;
	}
	return cli_usage_error("image", "unknown command '%s'", sub);
}

const struct cli_verb cli_verb_image = {
	.name = "image",
	.summary = "build, pull, import, export, list, inspect, remove and warm sandbox images",
	.run = image_main,
	.usage = image_usage,
};
