/* vmm image build -f Dockerfile (docs/images.md "Building from a
 * Dockerfile"): the real side of the builder (dockerfile_build.c): base
 * images are vmm images (or registry references pulled with vmm image
 * pull), read out of their ext4 with debugfs rdump; a RUN boots a sandbox
 * from the step's tree (mkfs.ext4 -d, then `vmm run --disk ...,root --
 * CMD`) and reads the changed tree back the same way; the last stage's
 * tree becomes a new image version with its config as the defaults. */
#include "cli/images/images.h"
#include "cli/util/util.h"
#include "cli/dockerfile/dockerfile_parse.h"
#include "cli/dockerfile/dockerfile_build.h"
#include "cli/dockerfile/image_dockerfile.h"
#include "cli/launch/launch.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct real {
	char self[PATH_MAX];
	unsigned mem_mib;
	FILE *progress; /* the verb's stderr, or NULL (-q) */
	const char *mirror; /* FROM debootstrap: */
};

/* A vmm image version by its reference, quietly (NULL: not one). */
static int find_image(const char *ref, struct image_info *im)
{
	char name[IMAGE_NAME_MAX + 1], store[PATH_MAX], p[PATH_MAX + 64];
	unsigned version;
	struct stat st;

	if (image_parse_ref(ref, name, &version) || image_store(store, sizeof(store)))
		return -ENOENT;
	snprintf(p, sizeof(p), "%s/%s", store, name);
	if (stat(p, &st) < 0)
		return -ENOENT;
	return image_resolve(ref, im);
}

/* FROM a registry reference: vmm image pull REF --name from-REF (once). */
static void pulled_name(const char *ref, char *name)
{
	size_t n = 0;

	n = (size_t)snprintf(name, IMAGE_NAME_MAX + 1, "from-");
	for (const char *c = ref; *c && n < IMAGE_NAME_MAX; c++) {
		char ch = *c >= 'A' && *c <= 'Z' ? (char)(*c - 'A' + 'a') : *c;

		name[n++] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ? ch : '-';
	}
	name[n] = '\0';
}

static int real_resolve(void *ctx, const char *ref, char *id, size_t idlen, char **config, char *err, size_t errlen)
{
	struct real *rl = ctx;
	struct image_info im;
	char name[IMAGE_NAME_MAX + 1], p[PATH_MAX + 32];
	size_t len;

	*config = NULL;
	if (dfi_is_debootstrap(ref))
		return dfi_debootstrap_resolve(ref, rl->mirror, id, idlen, err, errlen);
	if (find_image(ref, &im)) {
		pulled_name(ref, name);
		if (find_image(name, &im)) {
			const char *pull[] = { rl->self, "image", "pull", ref, "--name", name, NULL };
			int r;

			if (rl->progress)
				fprintf(rl->progress, "pulling %s as vmm image %s\n", ref, name);
			if ((r = cli_run_tool(pull, 0)) || find_image(name, &im)) {
				snprintf(err, errlen, "%s: not a vmm image, and vmm image pull failed (status %d)", ref, r);
				return -ENOENT;
			}
		}
	}
	snprintf(id, idlen, "%s:%u@%lld", im.name, im.version, im.created);
	snprintf(p, sizeof(p), "%s/config.json", im.dir);
	if (oci_read_file(AT_FDCWD, p, 1 << 20, config, &len))
		*config = NULL;
	return 0;
}

static int real_fill(void *ctx, const char *id, const char *dir, char *err, size_t errlen)
{
	char ref[IMAGE_NAME_MAX + 16], p[PATH_MAX + 32];
	struct image_info im;
	const char *at = strchr(id, '@');
	int r;

	if (dfi_is_debootstrap(id))
		return dfi_debootstrap_fill(id, dir, ((struct real *)ctx)->progress, err, errlen);
	snprintf(ref, sizeof(ref), "%.*s", (int)(at ? at - id : (ptrdiff_t)strlen(id)), id);
	if (image_resolve(ref, &im)) {
		snprintf(err, errlen, "%s: gone", ref);
		return -ENOENT;
	}
	if (rdump_can_confine(err, errlen))
		return -EOPNOTSUPP;
	if ((r = rdump_confined(im.rootfs, dir, 1))) {
		snprintf(err, errlen, "debugfs rdump of %s failed (%d)", im.rootfs, r);
		return -EIO;
	}
	snprintf(p, sizeof(p), "%s" IMAGE_INIT, dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lost+found", dir);
	rmdir(p);
	return 0;
}

static uint64_t tree_bytes(const char *dir)
{
	char out[64] = "";
	char cmd[PATH_MAX + 64];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "du -sxk -- '%s' 2>/dev/null", dir);
	if (!(f = popen(cmd, "r")))
		return 0;
	if (!fgets(out, sizeof(out), f))
		out[0] = '\0';
	pclose(f);
	return strtoull(out, NULL, 10) * 1024;
}

/* RUN: the tree into an ext4, a sandbox booted from it runs the command,
 * its disk back into the tree. */
static int real_run(void *ctx, const char *dir, const struct dfb_run *run, char *err, size_t errlen)
{
	static const char *const dirs[] = { "dev", "proc", "sys", "tmp", "run", "sbin", "etc" };
	struct real *rl = ctx;
	char lib[PATH_MAX], gi[PATH_MAX + 32], disk[PATH_MAX + 16], newdir[PATH_MAX + 16], arg[PATH_MAX + 64];
	char mem[16], p[PATH_MAX + 32];
	const char **argv = NULL;
	unsigned k = 0, n;
	int rootfd = -1, srcfd = -1, fd, r = -EIO, st;
	uint64_t size;

	snprintf(disk, sizeof(disk), "%s.ext4", dir);
	snprintf(newdir, sizeof(newdir), "%s.new", dir);
	if (cli_lib_dir(lib, sizeof(lib), NULL, 0) ||
	    snprintf(gi, sizeof(gi), "%s/guest/guest-init", lib) >= (int)sizeof(gi)) {
		snprintf(err, errlen, "guest-init not found");
		return -ENOENT;
	}
	if ((rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (srcfd = open(gi, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "%s: %s", srcfd < 0 && rootfd >= 0 ? gi : dir, strerror(errno));
		goto out;
	}
	for (unsigned i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if ((fd = oci_root_mkdirs(rootfd, dirs[i], strcmp(dirs[i], "tmp") ? 0755 : 01777)) >= 0)
			close(fd);
	if ((r = oci_root_put(rootfd, IMAGE_INIT, srcfd, NULL, 0, 0755, 0))) {
		snprintf(err, errlen, "installing guest-init: %s", strerror(-r));
		goto out;
	}
	/* room for what the command writes: the tree plus 1 GiB, sparse */
	size = tree_bytes(dir);
	size = ((size + size / 4 + (1ull << 30)) + (1 << 20) - 1) & ~((1ull << 20) - 1);
	if ((fd = open(disk, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0 || ftruncate(fd, (off_t)size) < 0) {
		snprintf(err, errlen, "%s: %s", disk, strerror(errno));
		if (fd >= 0)
			close(fd);
		r = -EIO;
		goto out;
	}
	close(fd);
	{
		const char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0", "-d", dir, disk, NULL };

		if ((r = cli_run_tool(mkfs, 2))) {
			snprintf(err, errlen, "mkfs.ext4 of the step's tree failed (%d)", r);
			r = -EIO;
			goto out;
		}
	}
	for (n = 0; run->env[n]; n++)
		;
	for (unsigned a = 0; run->argv[a]; a++)
		n++;
	if (!(argv = calloc(n * 2 + 24, sizeof(*argv)))) {
		r = -ENOMEM;
		goto out;
	}
	snprintf(arg, sizeof(arg), "path=%s,root", disk);
	snprintf(mem, sizeof(mem), "%u", rl->mem_mib);
	argv[k++] = rl->self;
	argv[k++] = "run";
	argv[k++] = "-q";
	argv[k++] = "--disk";
	argv[k++] = arg;
	argv[k++] = "--cmdline";
	argv[k++] = DEFAULT_CMDLINE " init=" IMAGE_INIT;
	argv[k++] = "--mem";
	argv[k++] = mem;
	argv[k++] = "--image-cwd";
	argv[k++] = run->cwd;
	if (run->user[0]) {
		argv[k++] = "--image-user";
		argv[k++] = run->user;
	}
	for (unsigned e = 0; run->env[e]; e++) {
		argv[k++] = "--image-env";
		argv[k++] = run->env[e];
	}
	argv[k++] = "--";
	for (unsigned a = 0; run->argv[a]; a++)
		argv[k++] = run->argv[a];
	argv[k] = NULL;
	if (rl->progress)
		fflush(rl->progress); /* before the command's own output */
	if ((st = cli_run_tool(argv, 0))) {
		snprintf(err, errlen, "the command exited with status %d", st);
		r = -EIO;
		goto out;
	}
	/* the changed tree back */
	{
		char rmcmd[PATH_MAX + 32];
		const char *rm[] = { "rm", "-rf", "--", rmcmd, NULL };

		snprintf(rmcmd, sizeof(rmcmd), "%s", newdir);
		cli_run_tool(rm, 2);
		if (mkdir(newdir, 0755) < 0) {
			snprintf(err, errlen, "%s: %s", newdir, strerror(errno));
			r = -errno;
			goto out;
		}
		/* The guest wrote this disk: rdump only inside newdir. */
		if (rdump_can_confine(err, errlen)) {
			r = -EOPNOTSUPP;
			goto out;
		}
		if ((r = rdump_confined(disk, newdir, 1))) {
			snprintf(err, errlen, "debugfs rdump of the step's disk failed (%d)", r);
			r = -EIO;
			goto out;
		}
		snprintf(p, sizeof(p), "%s" IMAGE_INIT, newdir);
		unlink(p);
		snprintf(p, sizeof(p), "%s/lost+found", newdir);
		rmdir(p);
		snprintf(rmcmd, sizeof(rmcmd), "%s", dir);
		close(rootfd);
		rootfd = -1;
		if (cli_run_tool(rm, 2) || rename(newdir, dir) < 0) {
			snprintf(err, errlen, "replacing the step's tree failed");
			r = -EIO;
			goto out;
		}
	}
	r = 0;
out:
	free(argv);
	if (rootfd >= 0)
		close(rootfd);
	if (srcfd >= 0)
		close(srcfd);
	unlink(disk);
	return r;
}

static const struct dfb_ops real_ops = { real_resolve, real_fill, real_run };

static void usage(FILE *out)
{
	fprintf(out,
		"usage: vmm image build [NAME] -f DOCKERFILE [-t NAME] [--build-arg NAME=VALUE]...\n"
		"                       [--target STAGE] [--no-cache] [--run-mem MiB] [--mirror URL]\n"
		"                       [--refresh] [-q] [CONTEXT]\n"
		"Builds an image version from a Dockerfile (docs/images.md). CONTEXT (default .)\n"
		"is where COPY and ADD take their files (.dockerignore applies). RUN steps run\n"
		"in a sandbox booted from the step's root filesystem (--run-mem, default 512),\n"
		"without network: packages come from a base `FROM debootstrap:SUITE+PKG,PKG`\n"
		"(Debian SUITE debootstrapped on the host with those packages; root; --mirror,\n"
		"default " DFI_DEFAULT_MIRROR "; cached: --refresh fetches it again).\n"
		"Steps are cached in $VMM_CACHE/build (~/.cache/vmm/build).\n");
}

/* The Dockerfile's options into o (args: room for argc build args):
 * -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct dfi_build *o, const char **args, struct image_out *out)
{
	unsigned nargs = 0;
	int i, ctx_given = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help")) {
			usage(out->result);
			return 0;
		} else if (!strcmp(a, "--no-cache")) {
			o->no_cache = 1;
		} else if (!strcmp(a, "--refresh")) {
			o->refresh = 1;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o->quiet = 1;
		} else if (a[0] != '-') {
			if (i == 1 && image_name_ok(a) && i + 1 < argc)
				o->name = a; /* vmm image build NAME -f F CONTEXT */
			else if (!ctx_given)
				o->context = a, ctx_given = 1;
			else
				return cli_usage_msg(out->err, sizeof(out->err), "image build", "%s: one CONTEXT only", a);
		} else if (!val) {
			return cli_usage_msg(out->err, sizeof(out->err), "image build", "%s: unknown option, or its value is missing", a);
		} else {
			i++;
			if (!strcmp(a, "-f") || !strcmp(a, "--dockerfile"))
				o->file = val;
			else if (!strcmp(a, "-t") || !strcmp(a, "--tag"))
				o->name = val;
			else if (!strcmp(a, "--mirror"))
				o->mirror = val;
			else if (!strcmp(a, "--build-arg")) {
				if (!strchr(val, '=')) {
					const char *env = getenv(val);
					char *kv;

					/* --build-arg NAME: its value from the environment (Docker) */
					if (!env || asprintf(&kv, "%s=%s", val, env) < 0)
						continue;
					args[nargs++] = kv;
				} else {
					args[nargs++] = val;
				}
			} else if (!strcmp(a, "--target"))
				o->target = val;
			else if (!strcmp(a, "--run-mem")) {
				unsigned long long m;

				if (cli_parse_mib(val, &m) || m < 64 || m > (1ull << 20))
					return cli_usage_msg(out->err, sizeof(out->err), "image build", "--run-mem %s: MiB (64 or more)", val);
				o->run_mem = (unsigned)m;
			} else {
				return cli_usage_msg(out->err, sizeof(out->err), "image build", "%s: unknown option", a);
			}
		}
	}
	if (!o->name)
		return cli_usage_msg(out->err, sizeof(out->err), "image build", "-f needs a name for the image: -t NAME");
	if (strchr(o->name, ':'))
		return cli_usage_msg(out->err, sizeof(out->err), "image build", "-t %s: a name only (versions are numbered)", o->name);
	return -1;
}

int image_dockerfile_main(int argc, char **argv, struct image_out *out)
{
	const char **args = calloc((size_t)argc + 1, sizeof(*args));
	struct dfi_build o = { .context = ".", .mirror = DFI_DEFAULT_MIRROR, .run_mem = 512 };
	char path[PATH_MAX + 16], src[600];
	int r;

	if (!args)
		return 1;
	o.build_args = args;
	if ((r = parse_args(argc, argv, &o, args, out)) < 0) {
		if (!o.file) {
			snprintf(path, sizeof(path), "%s/Dockerfile", o.context);
			o.file = path;
		}
		snprintf(src, sizeof(src), "dockerfile:%.500s", o.file);
		o.source = src;
		r = dfi_build_image(&o, out);
	}
	free(args); /* the asprintf'd --build-arg NAME values live until exit */
	return r;
}

/* The built tree into a new version of o->name, with its config's
 * defaults; 0 or 1. */
static int make_version(const struct dfi_build *o, const struct dfb_result *res, struct image_out *out)
{
	struct oci_defaults *d = calloc(1, sizeof(*d));
	struct image_job *j = NULL;
	char from[PATH_MAX + 4], bad[160], cfg[PATH_MAX + 16];
	const char *cp[] = { "cp", "-a", "--reflink=auto", "--", from, NULL, NULL };
	const char *msg = NULL;

	if (image_job_begin(&j, o->name, o->source, 2, o->quiet, out)) {
		free(d);
		return 1;
	}
	cp[5] = image_job_stage(j);
	if (o->inputs)
		snprintf(image_job_info(j)->inputs, sizeof(image_job_info(j)->inputs), "%s", o->inputs);
	if (d && !oci_defaults_parse(res->config, strlen(res->config), d)) {
		image_job_info(j)->mem_mib = d->mem_mib;
		image_job_info(j)->cpus = d->cpus;
		if (image_drives_set(image_job_info(j), d->drives, bad, sizeof(bad)))
			msg = bad;
	}
	free(d);
	image_job_step(j, "copying the built tree");
	snprintf(from, sizeof(from), "%s/.", res->tree);
	/* a bad label: FAILED with it, nothing copied */
	if (!msg && cli_run_tool(cp, 0))
		msg = "copying the built tree failed";
	else if (!msg && (snprintf(cfg, sizeof(cfg), "%s/config.json", image_job_info(j)->dir) >= (int)sizeof(cfg) ||
			  cli_write_text(cfg, res->config, 0644)))
		msg = "writing config.json failed";
	return image_job_finish(j, msg) ? 1 : 0;
}

int dfi_build_image(const struct dfi_build *o, struct image_out *out)
{
	struct real rl = { .mem_mib = o->run_mem, .mirror = o->mirror, .progress = o->quiet ? NULL : out->progress };
	struct dfb_options bo = { 0 };
	struct dfb_result res = { 0 };
	struct dockerfile df = { 0 };
	char cache[PATH_MAX], err[1024] = "", *text = NULL;
	struct stat st;
	size_t len;
	ssize_t n;
	int r = 1, parsed = 0;

	if (!image_name_ok(o->name))
		return cli_usage_msg(out->err, sizeof(out->err), "image build", "'%s': names are 1-%d of a-z 0-9 . _ - (not 'latest')", o->name,
				       IMAGE_NAME_MAX);
	n = readlink("/proc/self/exe", rl.self, sizeof(rl.self) - 1);
	rl.self[n > 0 ? n : 0] = '\0';
	if (oci_read_file(AT_FDCWD, o->file, 4 << 20, &text, &len)) {
		cli_seterr(out->err, sizeof(out->err), 0, "%s: %s", o->file, strerror(errno ? errno : ENOENT));
		goto out;
	}
	if (df_parse(text, len, &df, err, sizeof(err))) {
		cli_seterr(out->err, sizeof(out->err), 0, "%s: %s", o->file, err);
		goto out;
	}
	parsed = 1;
	if (oci_cache_dir(cache, sizeof(cache))) {
		cli_seterr(out->err, sizeof(out->err), 0, "no cache directory ($VMM_CACHE or $HOME)");
		goto out;
	}
	snprintf(cache + strlen(cache) - 5, sizeof(cache) - strlen(cache) + 5, "build");
	bo.context = o->context;
	bo.build_args = o->build_args;
	bo.target = o->target;
	bo.cache = cache;
	bo.no_cache = o->no_cache;
	bo.refresh_bases = o->refresh;
	bo.progress = rl.progress;
	if (stat(o->context, &st) < 0 || !S_ISDIR(st.st_mode)) {
		cli_seterr(out->err, sizeof(out->err), 0, "%s: the build context must be a directory", o->context);
		goto out;
	}
	if (dfb_build(&df, &bo, &real_ops, &rl, &res, err, sizeof(err))) {
		cli_seterr(out->err, sizeof(out->err), 0, "%s: %s", o->file, err);
		goto out;
	}
	if (rl.progress)
		fprintf(rl.progress, "%u steps, %u cached, %u RUN steps run\n", res.steps, res.cached, res.runs);
	r = make_version(o, &res, out);
out:
	if (parsed)
		df_free(&df);
	dfb_result_free(&res);
	free(text);
	return r;
}
