/* The image store (cli/images/images.h, docs/images.md): names, versions,
 * image.json, the warm snapshots and the arguments `run --image` adds;
 * the verb is cli/image.c, build and warm live in image_build.c. */
#include "cli/images/images.h"
#include "cli/util/util.h"
#include "cli/sandbox/sandbox.h"
#include "cli/images/oci_image.h"
#include "vmm/wire/json.h"
#include "vmm/base/log.h"
#include "vmm/base/snapfmt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int image_store(char *buf, size_t len)
{
	const char *env = getenv("VMM_IMAGE_DIR"), *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n, r;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/var/lib/vmm/images");
	else if (xdg && *xdg)
		n = snprintf(buf, len, "%s/vmm/images", xdg);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.local/state/vmm/images", home);
	else
		n = snprintf(buf, len, "/tmp/vmm-images-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if ((r = cli_mkdir_p(buf, 0755))) {
		log_err("cannot create the image store %s: %s", buf, strerror(-r));
		return r;
	}
	/* Ours, a real directory nobody else can write (/tmp/vmm-images-UID
	 * could be anyone's). */
	if ((r = cli_open_dir(AT_FDCWD, buf, buf, 022)) < 0)
		return r;
	close(r);
	return 0;
}

int image_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > IMAGE_NAME_MAX || name[0] == '.' || name[0] == '-')
		return 0;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
			return 0;
	}
	return strcmp(name, "latest") != 0;
}

int image_parse_ref(const char *ref, char name[IMAGE_NAME_MAX + 1], unsigned *version)
{
	const char *colon = strchr(ref, ':');
	size_t n = colon ? (size_t)(colon - ref) : strlen(ref);

	*version = 0;
	if (n > IMAGE_NAME_MAX)
		return -EINVAL;
	memcpy(name, ref, n);
	name[n] = '\0';
	if (!image_name_ok(name))
		return -EINVAL;
	if (colon && strcmp(colon + 1, "latest")) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(colon + 1, &end, 10);
		if (errno || end == colon + 1 || *end || v == 0 || v > 1000000)
			return -EINVAL;
		*version = (unsigned)v;
	}
	return 0;
}

const char *image_status_name(enum image_status s)
{
	return s == IMG_BUILT ? "BUILT" : s == IMG_FAILED ? "FAILED" : "BUILDING";
}

int image_load(const char *name, unsigned version, struct image_info *im)
{
	char store[PATH_MAX], path[PATH_MAX + 64], buf[8192], arena_buf[16384];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j;
	const char *err, *s;
	int64_t v;
	int r;

	memset(im, 0, sizeof(*im));
	if ((r = image_store(store, sizeof(store))))
		return r;
	snprintf(im->name, sizeof(im->name), "%s", name);
	im->version = version;
	if (snprintf(im->dir, sizeof(im->dir), "%s/%s/%u", store, name, version) >= (int)sizeof(im->dir))
		return -ENAMETOOLONG;
	snprintf(im->rootfs, sizeof(im->rootfs), "%s/rootfs.ext4", im->dir);
	snprintf(path, sizeof(path), "%s/image.json", im->dir);
	if ((r = cli_read_text(path, buf, sizeof(buf))))
		return r;
	if (!(j = json_parse(buf, strlen(buf), &a, &err)))
		return -EINVAL;
	im->status = IMG_BUILDING;
	if (!json_get_str(j, "status", &s))
		im->status = !strcmp(s, "BUILT") ? IMG_BUILT : !strcmp(s, "FAILED") ? IMG_FAILED : IMG_BUILDING;
	if (!json_get_int(j, "size", &v))
		im->size = (uint64_t)v;
	if (!json_get_int(j, "created", &v))
		im->created = v;
	if (!json_get_int(j, "mem_mib", &v))
		im->mem_mib = (unsigned)v;
	if (!json_get_int(j, "cpus", &v))
		im->cpus = (unsigned)v;
	if (!json_get_int(j, "disk_mib", &v) && v > 0)
		im->disk_mib = (unsigned long long)v;
	if (!json_get_str(j, "drives", &s))
		snprintf(im->drives, sizeof(im->drives), "%s", s);
	if (!json_get_str(j, "source", &s))
		snprintf(im->source, sizeof(im->source), "%s", s);
	if (!json_get_str(j, "inputs", &s))
		snprintf(im->inputs, sizeof(im->inputs), "%s", s);
	if (!json_get_str(j, "error", &s))
		snprintf(im->error, sizeof(im->error), "%s", s);
	/* A build whose builder is gone without a word was interrupted. */
	if (im->status == IMG_BUILDING && !json_get_int(j, "pid", &v) &&
	    (v <= 0 || (kill((pid_t)v, 0) < 0 && errno == ESRCH))) {
		im->status = IMG_FAILED;
		snprintf(im->error, sizeof(im->error), "the build was interrupted");
	}
	return 0;
}

int image_save(const struct image_info *im)
{
	char buf[4096], path[PATH_MAX + 64], tmp[PATH_MAX + 80];
	struct json_writer w;
	int fd, r = 0;
	size_t n;

	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "name");
	jw_str(&w, im->name);
	jw_key(&w, "version");
	jw_int(&w, im->version);
	jw_key(&w, "status");
	jw_str(&w, image_status_name(im->status));
	jw_key(&w, "size");
	jw_int(&w, (int64_t)im->size);
	jw_key(&w, "created");
	jw_int(&w, im->created);
	jw_key(&w, "mem_mib");
	jw_int(&w, im->mem_mib);
	jw_key(&w, "cpus");
	jw_int(&w, im->cpus);
	if (im->disk_mib) {
		jw_key(&w, "disk_mib");
		jw_int(&w, (int64_t)im->disk_mib);
	}
	if (im->drives[0]) {
		jw_key(&w, "drives");
		jw_str(&w, im->drives);
	}
	jw_key(&w, "source");
	jw_str(&w, im->source);
	jw_key(&w, "inputs");
	jw_str(&w, im->inputs);
	jw_key(&w, "error");
	jw_str(&w, im->error);
	jw_key(&w, "pid");
	jw_int(&w, im->status == IMG_BUILDING ? getpid() : 0);
	jw_obj_end(&w);
	if (!jw_done(&w))
		return -E2BIG;
	n = strlen(buf);
	buf[n++] = '\n';
	snprintf(path, sizeof(path), "%s/image.json", im->dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, n) != (ssize_t)n || fsync(fd) < 0)
		r = -EIO;
	if (close(fd) < 0 && !r)
		r = -EIO;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

static int cmp_u(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

int image_versions(const char *name, unsigned **out)
{
	char store[PATH_MAX], p[PATH_MAX + 64];
	unsigned *v = NULL;
	struct dirent *e;
	int n = 0, r;
	DIR *d;

	*out = NULL;
	if ((r = image_store(store, sizeof(store))))
		return r;
	snprintf(p, sizeof(p), "%s/%s", store, name);
	if (!(d = opendir(p)))
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char *end;
		unsigned long x = strtoul(e->d_name, &end, 10);
		unsigned *nv;

		if (e->d_name[0] < '1' || e->d_name[0] > '9' || *end || x > 1000000)
			continue;
		if (!(nv = realloc(v, (size_t)(n + 1) * sizeof(*v)))) {
			free(v);
			closedir(d);
			return -ENOMEM;
		}
		v = nv;
		v[n++] = (unsigned)x;
	}
	closedir(d);
	if (n)
		qsort(v, (size_t)n, sizeof(*v), cmp_u);
	*out = v;
	return n;
}

void image_update_latest(const char *name)
{
	char store[PATH_MAX], link[PATH_MAX + 64], tmp[PATH_MAX + 80], target[16];
	unsigned *v;
	int n = image_versions(name, &v), i;
	struct image_info im;

	if (n < 0 || image_store(store, sizeof(store)))
		return;
	snprintf(link, sizeof(link), "%s/%s/latest", store, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", link);
	for (i = n - 1; i >= 0; i--)
		if (image_load(name, v[i], &im) == 0 && im.status == IMG_BUILT)
			break;
	if (i < 0) {
		unlink(link);
	} else {
		snprintf(target, sizeof(target), "%u", v[i]);
		unlink(tmp);
		if (symlink(target, tmp) == 0 && rename(tmp, link) < 0)
			unlink(tmp);
	}
	free(v);
}

int image_resolve(const char *ref, struct image_info *im)
{
	char name[IMAGE_NAME_MAX + 1];
	unsigned version, *v;
	int n, i;

	if (image_parse_ref(ref, name, &version)) {
		log_err("'%s' is not an image (NAME, NAME:latest or NAME:VERSION; names are a-z 0-9 . _ -)", ref);
		return -EINVAL;
	}
	if (version) {
		if (image_load(name, version, im)) {
			log_err("no image %s:%u (vmm image ls)", name, version);
			return -ENOENT;
		}
		if (im->status != IMG_BUILT) {
			log_err("image %s:%u is %s%s%s; it cannot be used", name, version, image_status_name(im->status),
				im->error[0] ? ": " : "", im->error);
			return -ENOENT;
		}
		return 0;
	}
	n = image_versions(name, &v);
	for (i = n - 1; i >= 0; i--) {
		if (image_load(name, v[i], im) == 0 && im->status == IMG_BUILT) {
			free(v);
			return 0;
		}
	}
	free(v);
	{
		char lib[PATH_MAX], bb[PATH_MAX + 16];

		/* The base image is each user's to build, from the busybox
		 * make install put next to the kernel (or the build's). */
		if (!strcmp(name, "base") && cli_lib_dir(lib, sizeof(lib), NULL, 0) == 0 &&
		    snprintf(bb, sizeof(bb), "%s/busybox", lib) < (int)sizeof(bb) && access(bb, X_OK) == 0) {
			log_err("no built version of image base: vmm image build base --busybox %s", bb);
			return -ENOENT;
		}
	}
	log_err("no built version of image %s (vmm image ls; vmm image build %s ...)", name, name);
	return -ENOENT;
}

int image_default_kernel(char *buf, size_t len)
{
	char dir[PATH_MAX];

	if (cli_lib_dir(dir, sizeof(dir), NULL, 0) || snprintf(buf, len, "%s/kernel/vmlinux", dir) >= (int)len)
		return -ENOENT;
	return access(buf, R_OK) ? -ENOENT : 0;
}

int image_warm_key(const struct image_info *im, const char *kernel, char *key, size_t len)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(kernel, real) || stat(real, &st) < 0)
		return -errno;
	if (snprintf(key, len, "format=%u image=%s:%u created=%lld kernel=%s size=%lld mtime=%lld.%09ld",
		     SNAP_VERSION, im->name, im->version, im->created, real, (long long)st.st_size,
		     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

int image_warm_dir(const struct image_info *im, const char *kernel, char *dir, size_t len)
{
	char key[PATH_MAX + 256], have[PATH_MAX + 256], p[PATH_MAX + 32];

	if (image_warm_key(im, kernel, key, sizeof(key)))
		return -ENOENT;
	snprintf(p, sizeof(p), "%s/warm/key", im->dir);
	if (cli_read_text(p, have, sizeof(have)))
		return -ENOENT;
	have[strcspn(have, "\n")] = '\0';
	if (strcmp(have, key)) {
		log_info("image %s:%u: its warm snapshot is stale (kernel or snapshot format changed); booting",
			 im->name, im->version);
		return -ENOENT;
	}
	if (snprintf(dir, len, "%s/warm/snapshot", im->dir) >= (int)len || access(dir, R_OK))
		return -ENOENT;
	return 0;
}

int image_in_use(const char *name, unsigned version, char *who, size_t wholen)
{
	char **names, want[IMAGE_NAME_MAX + 16];
	int n = sandbox_list(&names), i, used = 0;

	if (n < 0)
		return 0;
	snprintf(want, sizeof(want), "%s:%u", name, version);
	for (i = 0; i < n; i++) {
		struct sandbox_status st;

		if (!used && sandbox_status(names[i], &st) == 0 && !strcmp(st.image, want) &&
		    st.state != SB_EXITED && st.state != SB_DEAD) {
			cli_seterr(who, wholen, 0, "%s is used by sandbox %s (%s)", want, st.sb.name,
				   sandbox_state_name(st.state));
			used = 1;
		}
		free(names[i]);
	}
	free(names);
	return used;
}

int image_drive_add(char *list, size_t len, const char *spec)
{
	char name[64], at[128], have[64], hat[128], tmp[512], *p, *save = NULL;
	size_t n = strlen(list);
	int ro, hro, count = 0;

	if (sandbox_drive_arg(spec, name, sizeof(name), at, sizeof(at), &ro))
		return -EINVAL;
	snprintf(tmp, sizeof(tmp), "%s", list);
	for (p = strtok_r(tmp, ",", &save); p; p = strtok_r(NULL, ",", &save), count++)
		if (!sandbox_drive_arg(p, have, sizeof(have), hat, sizeof(hat), &hro) && !strcmp(have, name))
			return -EEXIST;
	if (count >= IMAGE_MAX_DRIVES)
		return -E2BIG;
	if (snprintf(list + n, len - n, "%s%s", n ? "," : "", spec) >= (int)(len - n)) {
		list[n] = '\0';
		return -E2BIG;
	}
	return 0;
}

int image_drives_set(struct image_info *im, const char *label, char *err, size_t len)
{
	char tmp[1024], *p, *save = NULL;
	int r;

	im->drives[0] = '\0';
	if (!label || !label[0])
		return 0;
	if (snprintf(tmp, sizeof(tmp), "%s", label) >= (int)sizeof(tmp)) {
		snprintf(err, len, "label vmm.drives is too long");
		return -EINVAL;
	}
	for (p = strtok_r(tmp, ",", &save); p; p = strtok_r(NULL, ",", &save))
		if ((r = image_drive_add(im->drives, sizeof(im->drives), p))) {
			snprintf(err, len, "label vmm.drives: '%.60s': %s", p,
				 r == -EEXIST ? "that drive is named twice"
				 : r == -E2BIG ? "at most 8 drives" : "not NAME[:/GUEST/DIR][:ro]");
			im->drives[0] = '\0';
			return -EINVAL;
		}
	return 0;
}

/* ---- vmm run --image ----------------------------------------------------- */

/* Options a restore of a warm snapshot can honour; anything else means a
 * cold boot from the image. (has argument?) --adopt: vmm start's run of
 * what vmm create recorded (without it, create --image X said it would
 * start from the warm snapshot and start cold-booted). */
static const struct { const char *opt; int arg; } warm_ok[] = {
	{ "--name", 1 }, { "-d", 0 }, { "--detach", 0 }, { "--adopt", 0 }, { "--ttl", 1 }, { "--publish", 1 },
	{ "--console", 1 }, { "-t", 0 }, { "--tty", 0 }, { "--ready-timeout", 1 }, { "-q", 0 },
	{ "--quiet", 0 }, { "-v", 0 }, { "--verbose", 0 }, { "--label", 1 },
};

static int opt_is(const char *a, const char *opt, int *inline_arg)
{
	size_t n = strlen(opt);

	*inline_arg = 0;
	if (!strcmp(a, opt))
		return 1;
	if (!strncmp(a, opt, n) && a[n] == '=' && opt[1] == '-') {
		*inline_arg = 1;
		return 1;
	}
	return 0;
}

/* The image's drives as --drive options into v[*k...], but for one the
 * run names itself (its own --drive NAME wins, whatever its DIR or :ro).
 * Each is checked as the run's own are: the allow list, before boot. */
static void image_drive_args(const struct image_info *im, int dashdash, char **argv, char **v, int *k)
{
	char list[sizeof(im->drives)], *p, *save = NULL;
	int i, inl;

	snprintf(list, sizeof(list), "%s", im->drives);
	for (p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		char name[64], at[128], own[64];
		int ro, mine = 0;

		if (sandbox_drive_arg(p, name, sizeof(name), at, sizeof(at), &ro))
			continue; /* image.json edited by hand: run's check says so */
		for (i = 1; i < dashdash && !mine; i++) {
			const char *a = NULL;

			if (opt_is(argv[i], "--drive", &inl))
				a = inl ? argv[i] + 8 : i + 1 < dashdash ? argv[i + 1] : NULL;
			mine = a && !sandbox_drive_arg(a, own, sizeof(own), at, sizeof(at), &ro) && !strcmp(own, name);
		}
		if (!mine) {
			v[(*k)++] = "--drive";
			v[(*k)++] = strdup(p);
		}
	}
}

int image_run_args(int argc, char **argv, char ***out, int *out_argc, int *restore, char *note, size_t notelen,
		   char *err, size_t errlen)
{
	const char *ref = NULL;
	int i, k = 0, dashdash = argc, warm = 1, mem_given = 0, cpus_given = 0, disk_given = 0, inl;
	struct image_info im;
	char kernel[PATH_MAX], wdir[PATH_MAX], num[3][24], refbuf[IMAGE_NAME_MAX + 16];
	char **v;

	*out = NULL;
	*restore = 0;
	cli_seterr(note, notelen, 0, "%s", "");
	cli_seterr(err, errlen, 0, "%s", "");
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			dashdash = i;
			break;
		}
		if (opt_is(argv[i], "--image", &inl)) {
			if (!inl && i + 1 >= argc)
				return cli_seterr(err, errlen, -EINVAL, "--image needs NAME[:VERSION]");
			ref = inl ? argv[i] + 8 : argv[i + 1];
			i += !inl;
			continue;
		}
		if (opt_is(argv[i], "--mem", &inl))
			mem_given = 1;
		if (opt_is(argv[i], "--cpus", &inl))
			cpus_given = 1;
		if (opt_is(argv[i], "--disk-size", &inl))
			disk_given = 1;
		{
			size_t j;
			int ok = 0;

			for (j = 0; j < sizeof(warm_ok) / sizeof(warm_ok[0]); j++) {
				if (opt_is(argv[i], warm_ok[j].opt, &inl)) {
					ok = 1;
					i += warm_ok[j].arg && !inl;
					break;
				}
			}
			if (!ok)
				warm = 0;
		}
	}
	if (!ref)
		return 0;
	if (image_resolve(ref, &im))
		return -ENOENT;
	snprintf(refbuf, sizeof(refbuf), "%s:%u", im.name, im.version);
	/* a warm snapshot has none of the image's drives: a cold boot */
	if (image_default_kernel(kernel, sizeof(kernel)) || im.drives[0])
		warm = 0;
	if (warm && image_warm_dir(&im, kernel, wdir, sizeof(wdir)))
		warm = 0;
	/* The image config's defaults (pulled and imported images): Env and
	 * WorkingDir for the command, Entrypoint + Cmd when none is given. */
	struct oci_defaults *d = calloc(1, sizeof(*d));
	struct oci_exec_plan *plan = calloc(1, sizeof(*plan));
	int detach = 0, have_cmd = dashdash < argc - 1;

	if (!d || !plan) {
		free(d);
		free(plan);
		return -ENOMEM;
	}
	for (i = 1; i < dashdash; i++)
		detach |= !strcmp(argv[i], "-d") || !strcmp(argv[i], "--detach");
	if (image_defaults(&im, d) == 0) {
		int published = 0, quiet = 0;

		oci_plan_exec(d, NULL, NULL, have_cmd ? (const char *const *)&argv[dashdash + 1] : NULL, plan);
		for (i = 1; i < dashdash; i++) {
			published |= opt_is(argv[i], "--publish", &inl);
			quiet |= !strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet");
		}
		/* ExposedPorts are not published on their own (a host port is the
		 * user's to give, and two sandboxes of one image would collide):
		 * say how, once, when nothing is published. */
		if (d->nports && !published && !quiet) {
			char pub[256];
			size_t n = 0;

			for (unsigned p = 0; p < d->nports && n < sizeof(pub) - 40; p++)
				n += (size_t)snprintf(pub + n, sizeof(pub) - n, " --publish %u:%u", d->ports[p], d->ports[p]);
			cli_seterr(note, notelen, 0, "image %s exposes %u TCP port%s; to reach %s from the host:%s", refbuf,
				   d->nports, d->nports > 1 ? "s" : "", d->nports > 1 ? "them" : "it", pub);
		}
	} else
		oci_plan_exec(NULL, NULL, NULL, NULL, plan);
	v = calloc((size_t)argc + 24 + 2 * IMAGE_MAX_DRIVES + 2 * plan->nenv + plan->argc, sizeof(*v));
	if (!v) {
		free(d);
		free(plan);
		return -ENOMEM;
	}
	v[k++] = warm ? "restore" : "run";
	if (warm) {
		v[k++] = strdup(wdir);
		log_info("image %s: starting from its warm snapshot", refbuf);
	} else {
		v[k++] = "--image-root";
		v[k++] = strdup(im.rootfs);
		if (!mem_given && im.mem_mib) {
			snprintf(num[0], sizeof(num[0]), "%u", im.mem_mib);
			v[k++] = "--mem";
			v[k++] = strdup(num[0]);
		}
		if (!cpus_given && im.cpus) {
			snprintf(num[1], sizeof(num[1]), "%u", im.cpus);
			v[k++] = "--cpus";
			v[k++] = strdup(num[1]);
		}
		if (!disk_given && im.disk_mib) {
			snprintf(num[2], sizeof(num[2]), "%lluM", im.disk_mib);
			v[k++] = "--disk-size";
			v[k++] = strdup(num[2]);
		}
		image_drive_args(&im, dashdash, argv, v, &k);
	}
	v[k++] = "--image-ref";
	v[k++] = strdup(refbuf);
	for (unsigned e = 0; e < plan->nenv; e++) {
		v[k++] = "--image-env";
		v[k++] = strdup(plan->env[e]);
	}
	if (plan->cwd) {
		v[k++] = "--image-cwd";
		v[k++] = strdup(plan->cwd);
	}
	if (plan->user) {
		v[k++] = "--image-user";
		v[k++] = strdup(plan->user);
	}
	for (i = 1; i < argc; i++) {
		if (i < dashdash && opt_is(argv[i], "--image", &inl)) {
			i += !inl;
			continue;
		}
		v[k++] = argv[i];
	}
	/* No command: the image's own (not with -d: nothing would wait for it). */
	if (!have_cmd && !detach && plan->argc) {
		if (dashdash == argc)
			v[k++] = "--";
		for (unsigned a = 0; a < plan->argc; a++)
			v[k++] = strdup(plan->argv[a]);
	}
	v[k] = NULL;
	free(d);
	free(plan);
	*out = v;
	*out_argc = k;
	*restore = warm;
	return 0;
}

/* Here, not in image_oci.c, for the lean binary (docs/perf.md): `vmm exec`
 * and `run --image` read an image's defaults without libcrypto. */
int image_defaults(const struct image_info *im, struct oci_defaults *d)
{
	char path[PATH_MAX + 32], *text;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "%s/config.json", im->dir);
	if ((r = oci_read_file(AT_FDCWD, path, 1 << 20, &text, &len)))
		return r;
	r = oci_defaults_parse(text, len, d);
	free(text);
	return r;
}
