/* vmm image build and vmm image warm (image.h, docs/images.md).
 *
 * A build stages the root filesystem in the new version's folder, installs
 * guest-init as /sbin/vmm-init (sandboxes boot with init=/sbin/vmm-init: the
 * image's own init never serves the API), copies the --file entries in and
 * makes the ext4 image with mkfs.ext4 -d. The version is BUILDING while
 * that runs and becomes BUILT (and NAME:latest) only at the end; any
 * failure leaves it FAILED with the reason and no root filesystem. */
#include "cli/images/images.h"
#include "cli/util/util.h"
#include "cli/sandbox/sandbox.h"
#include "cli/images/oci_unpack.h"
#include "vmm/base/log.h"
#include "vmm/wire/api.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 64

struct build {
	struct image_info im;
	const char *from_dir, *from_tar, *debian, *packages, *mirror, *busybox;
	const char *files[MAX_FILES];
	unsigned nr_files;
	unsigned long long size_mib;
	int quiet, if_changed;
	char stage[PATH_MAX + 16];
	char log[PATH_MAX + 16];
	int logfd;
	double t0;
	unsigned step, steps;
	struct image_out *out;  /* progress, result and error (images.h) */
};

/* Why the build failed, into b->out->err; returns status. */
#define BERR(b, status, ...) cli_seterr((b)->out->err, sizeof((b)->out->err), (status), __VA_ARGS__)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void step(struct build *b, const char *what)
{
	b->step++;
	if (!b->quiet && b->out->progress)
		fprintf(b->out->progress, "[%u/%u] %-44s (%5.1f s)\n", b->step, b->steps, what, now_s() - b->t0);
}

/* Starts argv (exe, or argv[0] on $PATH when NULL) with stdin on
 * /dev/null and stdout/stderr on out/err (-1: ours). */
static pid_t start_proc(const char *exe, const char *const *argv, int out, int err)
{
	pid_t p = fork();

	if (p == 0) {
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (nul >= 0)
			dup2(nul, 0);
		if (out >= 0)
			dup2(out, 1);
		if (err >= 0)
			dup2(err, 2);
		if (exe)
			execv(exe, (char *const *)argv);
		else
			execvp(argv[0], (char *const *)argv);
		dprintf(2, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return p < 0 ? -errno : p;
}

/* Its exit status (128 + N for signal N), or -errno. */
static int wait_proc(pid_t p)
{
	int st;

	if (p < 0)
		return p;
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The staging tree: dir/.staging/rootfs, the image's "/" (0755, as mkfs
 * copies it), in a 0700 folder. Root stages the image's owners and modes,
 * set-uid files included: nobody else may reach them on the host. */
#define STAGING_DIR ".staging"

static int stage_paths(struct build *b, const char *dir)
{
	return snprintf(b->stage, sizeof(b->stage), "%.4000s/" STAGING_DIR "/rootfs", dir) >= (int)sizeof(b->stage) ?
		       -ENAMETOOLONG : 0;
}

static int stage_make(struct build *b)
{
	char *slash = strrchr(b->stage, '/');
	int r = 0;

	*slash = '\0';
	if (mkdir(b->stage, 0700) < 0 || chmod(b->stage, 0700) < 0)
		r = -errno;
	*slash = '/';
	if (!r && mkdir(b->stage, 0755) < 0)
		r = -errno;
	return r;
}

/* Removes dir/.staging with the tree in it. */
static int stage_remove(struct build *b)
{
	char *slash = strrchr(b->stage, '/');
	int r;

	*slash = '\0';
	r = cli_rm_tree(b->stage);
	*slash = '/';
	return r;
}

/* Runs argv with stdout/stderr into the build log; 0 or the exit status. */
static int tool(struct build *b, const char *const *argv)
{
	unsigned i;

	if (b->logfd >= 0) {
		dprintf(b->logfd, "$");
		for (i = 0; argv[i]; i++)
			dprintf(b->logfd, " %s", argv[i]);
		dprintf(b->logfd, "\n");
	}
	return wait_proc(start_proc(NULL, argv, b->logfd, b->logfd));
}

static int fail(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct build *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->im.error, sizeof(b->im.error), fmt, ap);
	va_end(ap);
	return -1;
}

/* The last lines of the build log, for the error message. */
static void log_tail(struct build *b, char *out, size_t len)
{
	char buf[4096];
	ssize_t n;
	int fd = open(b->log, O_RDONLY | O_CLOEXEC);
	off_t end;
	char *p;

	out[0] = '\0';
	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	if (end > (off_t)sizeof(buf) - 1)
		lseek(fd, end - (off_t)sizeof(buf) + 1, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	p = strrchr(buf, '\n');
	snprintf(out, len, "%.*s", (int)len - 1, p ? p + 1 : buf);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *c = p;

	while (n--) {
		h ^= *c++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t fnv_file(uint64_t h, const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return fnv(h, path, strlen(path));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		h = fnv(h, buf, (size_t)n);
	close(fd);
	return h;
}

/* What the build depends on: the source description, the guest-init
 * binary, the busybox binary or tarball, the --file contents, the size. */
static void inputs_hash(struct build *b, const char *guest_init)
{
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned i;

	h = fnv(h, b->im.source, strlen(b->im.source));
	h = fnv_file(h, guest_init);
	if (b->busybox)
		h = fnv_file(h, b->busybox);
	if (b->from_tar)
		h = fnv_file(h, b->from_tar);
	for (i = 0; i < b->nr_files; i++) {
		char src[PATH_MAX];
		const char *colon = strrchr(b->files[i], ':');

		h = fnv(h, b->files[i], strlen(b->files[i]));
		snprintf(src, sizeof(src), "%.*s", (int)(colon - b->files[i]), b->files[i]);
		h = fnv_file(h, src);
	}
	h = fnv(h, &b->size_mib, sizeof(b->size_mib));
	h = fnv(h, &b->im.mem_mib, sizeof(b->im.mem_mib));
	h = fnv(h, &b->im.cpus, sizeof(b->im.cpus));
	if (b->im.disk_mib) /* hashed only when given: older images' inputs stay the same */
		h = fnv(h, &b->im.disk_mib, sizeof(b->im.disk_mib));
	if (b->im.drives[0]) /* the same */
		h = fnv(h, b->im.drives, strlen(b->im.drives));
	snprintf(b->im.inputs, sizeof(b->im.inputs), "%016llx", (unsigned long long)h);
}

static uint64_t staged_bytes;
static uint64_t staged_inodes;
static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)path;
	(void)flag;
	(void)f;
	staged_bytes += (uint64_t)st->st_blocks * 512;
	staged_inodes++;
	return 0;
}

/* `busybox --list` into buf (NUL-terminated): 0, or -1 when it cannot
 * run here (the reason in the build log). */
static int busybox_list(struct build *b, char *buf, size_t len)
{
	const char *argv[] = { "busybox", "--list", NULL };
	size_t got = 0;
	ssize_t n;
	int p[2], st;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = start_proc(b->busybox, argv, p[1], b->logfd);

	close(p[1]);
	while (got + 1 < len && (n = read(p[0], buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(p[0]);
	st = wait_proc(pid);
	return st == 0 && got + 1 < len ? 0 : -1;
}

static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;

	while ((p = strstr(p, name))) {
		if ((p == list || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return 1;
		p += n;
	}
	return 0;
}

/* The tools guest-init carries (GUEST_TOOL_NAMES) that this busybox
 * lacks: /bin/NAME -> IMAGE_INIT. Debian's busybox-static has no nohup,
 * flock or script; a busybox built with them keeps its own. When
 * `busybox --list` cannot run on this host, every tool is linked. */
#define LIST_MAX (64 * 1024) /* busybox --list: about 3 KiB for 400 applets */

static int link_tools(struct build *b)
{
	static const char *const tools[] = { GUEST_TOOL_NAMES };
	char path[PATH_MAX + 32], *list = malloc(LIST_MAX);
	int known = list && busybox_list(b, list, LIST_MAX) == 0, r = 0;
	unsigned i;

	if (!known && b->logfd >= 0)
		dprintf(b->logfd, "busybox --list failed: linking every guest-init tool\n");
	for (i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		if (known && listed(list, tools[i]))
			continue;
		snprintf(path, sizeof(path), "%s/bin/%s", b->stage, tools[i]);
		if (symlink(IMAGE_INIT, path) < 0 && errno != EEXIST) {
			r = fail(b, "symlink %s: %s", path, strerror(errno));
			break;
		}
		if (b->logfd >= 0)
			dprintf(b->logfd, "/bin/%s -> " IMAGE_INIT " (guest-init's own)\n", tools[i]);
	}
	free(list);
	return r;
}

static int populate(struct build *b)
{
	if (b->from_dir) {
		char src[PATH_MAX + 4];
		const char *cp[] = { "cp", "-a", "--", src, b->stage, NULL };

		snprintf(src, sizeof(src), "%s/.", b->from_dir);
		step(b, "copying the directory");
		if (tool(b, cp))
			return fail(b, "copying %s failed", b->from_dir);
	} else if (b->from_tar) {
		const char *tar[] = { "tar", "-x", "--numeric-owner", "-f", b->from_tar, "-C", b->stage, NULL };

		step(b, "unpacking the tarball");
		if (tool(b, tar))
			return fail(b, "unpacking %s failed (not a tar archive?)", b->from_tar);
	} else if (b->debian) {
		char inc[1024];
		const char *ds[] = { "debootstrap", "--variant=minbase", inc, b->debian, b->stage, b->mirror, NULL };
		const char *ds_plain[] = { "debootstrap", "--variant=minbase", b->debian, b->stage, b->mirror, NULL };

		snprintf(inc, sizeof(inc), "--include=%s", b->packages ? b->packages : "");
		step(b, "debootstrap (minutes: downloads and unpacks)");
		if (geteuid() != 0)
			return fail(b, "--debian needs root (debootstrap)");
		if (tool(b, b->packages ? ds : ds_plain))
			return fail(b, "debootstrap %s failed (a package name wrong, or the mirror %s unreachable?)",
				    b->debian, b->mirror);
	} else {
		char bin[PATH_MAX + 32], sh[PATH_MAX + 32];
		const char *cp[] = { "cp", "--", b->busybox, bin, NULL };

		step(b, "installing busybox");
		snprintf(bin, sizeof(bin), "%s/bin", b->stage);
		if (mkdir(bin, 0755) < 0 && errno != EEXIST)
			return fail(b, "mkdir %s: %s", bin, strerror(errno));
		snprintf(bin, sizeof(bin), "%s/bin/busybox", b->stage);
		if (tool(b, cp) || chmod(bin, 0755) < 0)
			return fail(b, "copying %s failed", b->busybox);
		snprintf(sh, sizeof(sh), "%s/bin/sh", b->stage);
		if (symlink("busybox", sh) < 0 && errno != EEXIST)
			return fail(b, "symlink %s: %s", sh, strerror(errno));
		return link_tools(b);
	}
	return 0;
}

static int install(struct build *b, const char *guest_init)
{
	static const char *const dirs[] = { "bin", "sbin", "dev", "proc", "sys", "tmp", "run", "root", "etc", "mnt" };
	char p[PATH_MAX + 64];
	unsigned i;
	int rootfd, srcfd, r;

	step(b, "installing guest-init as " IMAGE_INIT);
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		struct stat st;

		snprintf(p, sizeof(p), "%s/%s", b->stage, dirs[i]);
		if (lstat(p, &st) == 0)
			continue; /* a symlink (usrmerge's /bin -> usr/bin) is fine */
		if (mkdir(p, !strcmp(dirs[i], "tmp") ? 01777 : 0755) < 0)
			return fail(b, "mkdir %s: %s", p, strerror(errno));
	}
	/* Inside the tree, never through its links: a pulled or unpacked
	 * image may have /sbin or /etc as a link to anywhere. */
	if ((rootfd = open(b->stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail(b, "%s: %s", b->stage, strerror(errno));
	if ((srcfd = open(guest_init, O_RDONLY | O_CLOEXEC)) < 0 ||
	    (r = oci_root_put(rootfd, IMAGE_INIT, srcfd, NULL, 0, 0755, 0))) {
		if (srcfd >= 0)
			close(srcfd);
		close(rootfd);
		return fail(b, "installing guest-init (%s) failed: %s", guest_init, srcfd < 0 ? strerror(errno) : strerror(-r));
	}
	close(srcfd);
	if (oci_root_put(rootfd, "etc/hostname", -1, "sandbox\n", 8, 0644, 1))
		log_warn("writing /etc/hostname in the image failed");
	close(rootfd);
	for (i = 0; i < b->nr_files; i++) {
		const char *spec = b->files[i], *colon = strrchr(spec, ':');
		char src[PATH_MAX], dst[PATH_MAX + 64], parent[PATH_MAX + 64];
		const char *cpf[] = { "cp", "-a", "--", src, dst, NULL };
		const char *mk[] = { "mkdir", "-p", "--", parent, NULL };
		char *slash;

		snprintf(src, sizeof(src), "%.*s", (int)(colon - spec), spec);
		snprintf(dst, sizeof(dst), "%s%s", b->stage, colon + 1);
		snprintf(parent, sizeof(parent), "%s", dst);
		if ((slash = strrchr(parent, '/')))
			*slash = '\0';
		if (i == 0)
			step(b, "copying the --file entries");
		if (tool(b, mk) || tool(b, cpf))
			return fail(b, "--file %s: copying failed", spec);
	}
	return 0;
}

static int make_ext4(struct build *b)
{
	char tmp[PATH_MAX + 32], lbl[] = "vmm-root", sz[32], inodes[32];
	/* 4 KiB blocks and an inode per 8 KiB whatever the image's size: a
	 * sandbox's copy is grown to gigabytes (image_disk.c) and keeps what
	 * mkfs chose per block group; mke2fs's "small" type (1 KiB blocks, an
	 * inode per 4 KiB, below 512 MiB) would spend 6% of the grown disk on
	 * inode tables. At least a quarter more inodes than the files need. */
	const char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-L", lbl, "-b", "4096", "-N", inodes, "-E", "root_owner=0:0",
			       "-d", b->stage, tmp, NULL };
	uint64_t size, n;
	char last[400];
	int fd;

	staged_bytes = staged_inodes = 0;
	nftw(b->stage, count_entry, 64, FTW_PHYS);
	/* Room for the files, the inode tables and the journal, and some to
	 * grow into: a quarter more, 16 MiB of journal, 256 bytes per inode. */
	size = staged_bytes + staged_bytes / 4 + staged_inodes * 512 + (48ull << 20);
	size = (size + (1 << 20) - 1) & ~((1ull << 20) - 1);
	if (b->size_mib)
		size = b->size_mib << 20;
	if (b->im.disk_mib && (b->im.disk_mib << 20) < size)
		return fail(b, "--disk-size %lluM is smaller than the image (%llu MiB): a sandbox's disk holds the image",
			    b->im.disk_mib, (unsigned long long)(size >> 20));
	/* per block group (128 MiB of 4 KiB blocks): 16384, as for a whole
	 * group, since growing repeats the first groups' count */
	n = (size + (128ull << 20) - 1) / (128ull << 20) * 16384;
	if (n < staged_inodes + staged_inodes / 4 + 1024)
		n = staged_inodes + staged_inodes / 4 + 1024;
	snprintf(inodes, sizeof(inodes), "%llu", (unsigned long long)n);
	snprintf(sz, sizeof(sz), "%llu MiB", (unsigned long long)(size >> 20));
	{
		char what[80];

		snprintf(what, sizeof(what), "making the ext4 image (%s)", sz);
		step(b, what);
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", b->im.rootfs);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		if (fd >= 0)
			close(fd);
		return fail(b, "%s: %s", tmp, strerror(errno));
	}
	close(fd);
	if (tool(b, mkfs)) {
		unlink(tmp);
		log_tail(b, last, sizeof(last));
		if (b->size_mib)
			return fail(b, "mkfs.ext4 failed: the files (%llu MiB) do not fit in --size %s? (%s)",
				    (unsigned long long)(staged_bytes >> 20), sz, last);
		return fail(b, "mkfs.ext4 failed (%s)", last);
	}
	if (rename(tmp, b->im.rootfs) < 0)
		return fail(b, "rename %s: %s", tmp, strerror(errno));
	b->im.size = size;
	return 0;
}

static void build_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm image build NAME SOURCE [--file SRC:DEST]... [--mem MiB] [--cpus N]\n"
		"                       [--size SIZE] [--disk-size SIZE] [--drive NAME[:DIR][:ro]]...\n"
		"                       [--if-changed] [-q]\n"
		"       vmm image build -f DOCKERFILE -t NAME [CONTEXT]   (vmm image build -f --help)\n"
		"       vmm image build --builtin [RECIPE]   vmm's own python and node images\n"
		"                                            (vmm image build --builtin --help)\n"
		"SOURCE is one of\n"
		"  --from-dir DIR       a root filesystem tree\n"
		"  --from-tar FILE      a root filesystem tarball (e.g. `docker export`)\n"
		"  --debian SUITE       debootstrap a Debian SUITE (root; downloads), with\n"
		"    [--packages a,b,c] [--mirror URL]   extra packages, another mirror\n"
		"  --busybox PATH       busybox alone (the built-in base image)\n"
		"  --file SRC:DEST      copy host file or folder SRC to DEST in the image\n"
		"  --mem, --cpus        defaults for sandboxes started from it\n"
		"  --size SIZE          the image's size (512M, 2G; default: what the files\n"
		"                       need plus room)\n"
		"  --disk-size SIZE     a sandbox's root disk by default (8G; default 4G, or\n"
		"                       the image's size if larger): sparse, grown at start\n"
		"  --drive NAME[:/GUEST/DIR][:ro]\n"
		"                       a drive (vmm drive) its sandboxes mount, as vmm run\n"
		"                       --drive; the run's own --drive NAME wins\n"
		"  --if-changed         do nothing if the newest built version has the same\n"
		"                       inputs (sources, files, options)\n"
		"  -q, --quiet          no progress lines\n"
		"Prints NAME:VERSION of the new version. guest-init becomes " IMAGE_INIT ".\n");
}

/* What the steps of image_build_main return to go on (else the exit
 * status). */
#define BUILD_GO_ON (-1)

/* One option with a value (argv[*i] and the next): BUILD_GO_ON or the
 * exit status. */
static int build_option(struct build *b, const char *a, const char *val, int *nsrc)
{
	if (!strcmp(a, "--from-dir"))
		b->from_dir = val, (*nsrc)++;
	else if (!strcmp(a, "--from-tar"))
		b->from_tar = val, (*nsrc)++;
	else if (!strcmp(a, "--debian"))
		b->debian = val, (*nsrc)++;
	else if (!strcmp(a, "--busybox"))
		b->busybox = val, (*nsrc)++;
	else if (!strcmp(a, "--packages"))
		b->packages = val;
	else if (!strcmp(a, "--mirror"))
		b->mirror = val;
	else if (!strcmp(a, "--file")) {
		const char *colon = strrchr(val, ':');

		if (b->nr_files == MAX_FILES || !colon || colon == val || colon[1] != '/' ||
		    strstr(colon, "/../") || !strcmp(colon + strlen(colon) - 3, "/..")) {
			return BERR(b, CLI_EXIT_USAGE, "--file %s: SRC:DEST with DEST absolute, no '..'", val);
		}
		b->files[b->nr_files++] = val;
	} else if (!strcmp(a, "--mem")) {
		unsigned long long m;

		if (cli_parse_mib(val, &m) || m < 32 || m > (1ull << 20)) {
			return BERR(b, CLI_EXIT_USAGE, "--mem %s: MiB (32 or more)", val);
		}
		b->im.mem_mib = (unsigned)m;
	} else if (!strcmp(a, "--cpus")) {
		char *end;
		unsigned long c = strtoul(val, &end, 10);

		if (*end || c < 1 || c > 64) {
			return BERR(b, CLI_EXIT_USAGE, "--cpus %s: 1..64", val);
		}
		b->im.cpus = (unsigned)c;
	} else if (!strcmp(a, "--size")) {
		if (cli_parse_mib(val, &b->size_mib) || b->size_mib < 8) {
			return BERR(b, CLI_EXIT_USAGE, "--size %s: a size such as 512M or 2G", val);
		}
	} else if (!strcmp(a, "--drive")) {
		int r = image_drive_add(b->im.drives, sizeof(b->im.drives), val);

		if (r) {
			return BERR(b, CLI_EXIT_USAGE, "--drive %s: %s", val,
				r == -EEXIST ? "that drive is named twice"
				: r == -E2BIG ? "at most 8 drives" : "NAME[:/GUEST/DIR][:ro]");
		}
	} else if (!strcmp(a, "--disk-size")) {
		if (cli_parse_mib(val, &b->im.disk_mib) || b->im.disk_mib < 8 || b->im.disk_mib > (1ull << 24)) {
			return BERR(b, CLI_EXIT_USAGE, "--disk-size %s: a size such as 4G or 16G (at most 16T)", val);
		}
	} else
		return cli_bad_arg_msg(b->out->err, sizeof(b->out->err), "image build", a, NULL);
	return BUILD_GO_ON;
}

/* The command line into b: BUILD_GO_ON or the exit status. */
static int build_parse(struct build *b, int argc, char **argv, struct image_out *out)
{
	int i, r, nsrc = 0;

	memset(b, 0, sizeof(*b));
	b->out = out;
	b->logfd = -1;
	b->mirror = "http://deb.debian.org/debian";
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help")) {
			build_usage(b->out->result);
			return 0;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			b->quiet = 1;
			continue;
		} else if (!strcmp(a, "--if-changed")) {
			b->if_changed = 1;
			continue;
		} else if (a[0] != '-' && !b->im.name[0]) {
			if (!image_name_ok(a)) {
				return BERR(b, CLI_EXIT_USAGE, "'%s': names are 1-%d of a-z 0-9 . _ - (not 'latest')",
					a, IMAGE_NAME_MAX);
			}
			snprintf(b->im.name, sizeof(b->im.name), "%s", a);
			continue;
		}
		if (!val)
			return cli_usage_msg(b->out->err, sizeof(b->out->err), "image build",
					     "%s: unknown option, or its value is missing", a);
		i++;
		if ((r = build_option(b, a, val, &nsrc)) != BUILD_GO_ON)
			return r;
	}
	if (!b->im.name[0] || nsrc != 1)
		return BERR(b, CLI_EXIT_USAGE, "give NAME and exactly one of --from-dir, --from-tar, --debian, --busybox "
			    "(vmm image build --help)");
	return BUILD_GO_ON;
}

/* The source and guest-init are there; b->im.source and the inputs'
 * hash set. BUILD_GO_ON or the exit status. */
static int build_check(struct build *b, char *guest_init, size_t len)
{
	char exe[PATH_MAX];

	if (b->debian && geteuid() != 0) {
		return BERR(b, CLI_EXIT_USAGE, "--debian needs root (debootstrap)");
	}
	if (b->debian && access("/usr/sbin/debootstrap", X_OK)) {
		return BERR(b, CLI_EXIT_ERROR, "--debian needs debootstrap (make deps, or apt install debootstrap)");
	}
	if (b->from_dir && access(b->from_dir, R_OK | X_OK)) {
		return BERR(b, CLI_EXIT_USAGE, "--from-dir %s: %s", b->from_dir, strerror(errno));
	}
	if ((b->from_tar && access(b->from_tar, R_OK)) || (b->busybox && access(b->busybox, R_OK))) {
		return BERR(b, CLI_EXIT_USAGE, "%s: %s", b->from_tar ? b->from_tar : b->busybox, strerror(errno));
	}
	if (cli_lib_dir(exe, sizeof(exe), NULL, 0) ||
	    snprintf(guest_init, len, "%s/guest/guest-init", exe) >= (int)len || access(guest_init, R_OK)) {
		return BERR(b, CLI_EXIT_ERROR, "guest-init not found (%s): make install, or run make in vmm's source tree", guest_init);
	}
	if (b->from_dir)
		snprintf(b->im.source, sizeof(b->im.source), "dir:%s", b->from_dir);
	else if (b->from_tar)
		snprintf(b->im.source, sizeof(b->im.source), "tar:%s", b->from_tar);
	else if (b->debian)
		snprintf(b->im.source, sizeof(b->im.source), "debian:%s%s%s", b->debian, b->packages ? "+" : "",
			 b->packages ? b->packages : "");
	else
		snprintf(b->im.source, sizeof(b->im.source), "busybox:%s", b->busybox);
	inputs_hash(b, guest_init);
	return BUILD_GO_ON;
}

/* --if-changed: the newest built version, if its inputs are these (0,
 * printed), else BUILD_GO_ON. */
static int build_up_to_date(const struct build *b, const unsigned *v, int n)
{
	int i;

	for (i = n - 1; i >= 0; i--) {
		struct image_info old;

		if (image_load(b->im.name, v[i], &old) == 0 && old.status == IMG_BUILT) {
			if (!strcmp(old.inputs, b->im.inputs)) {
				if (!b->quiet && b->out->progress)
					fprintf(b->out->progress, "vmm image build: %s:%u is up to date\n", b->im.name, v[i]);
				fprintf(b->out->result, "%s:%u\n", b->im.name, v[i]);
				return 0;
			}
			break;
		}
	}
	return BUILD_GO_ON;
}

/* The next version's folder under the store (mkdir is the lock: two
 * builds never share one), recorded as building. BUILD_GO_ON or the exit
 * status. */
static int build_new_version(struct build *b, const char *store, unsigned next)
{
	char dir[PATH_MAX + 64];
	int r;

	snprintf(dir, sizeof(dir), "%s/%s", store, b->im.name);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return BERR(b, CLI_EXIT_ERROR, "%s: %s", dir, strerror(errno));
	for (;; next++) {
		snprintf(dir, sizeof(dir), "%s/%s/%u", store, b->im.name, next);
		if (mkdir(dir, 0755) == 0)
			break;
		if (errno != EEXIST) {
			return BERR(b, CLI_EXIT_ERROR, "%s: %s", dir, strerror(errno));
		}
	}
	b->im.version = next;
	b->im.status = IMG_BUILDING;
	b->im.created = (long long)time(NULL);
	if (strlen(dir) >= sizeof(b->im.dir) - 16) {
		return BERR(b, CLI_EXIT_ERROR, "%s: path too long", dir);
	}
	snprintf(b->im.dir, sizeof(b->im.dir), "%.4000s", dir);
	snprintf(b->im.rootfs, sizeof(b->im.rootfs), "%.4000s/rootfs.ext4", dir);
	stage_paths(b, dir);
	snprintf(b->log, sizeof(b->log), "%.4000s/build.log", dir);
	if ((r = image_save(&b->im))) {
		return BERR(b, CLI_EXIT_ERROR, "writing %s/image.json: %s", dir, strerror(-r));
	}
	return BUILD_GO_ON;
}

/* The build's steps: staging tree, its files, guest-init, the ext4 image,
 * then the staging tree removed whatever happened. 0 or -errno (b's
 * error says why). */
static int build_steps(struct build *b, const char *guest_init)
{
	char staging[PATH_MAX + 16], *slash;
	const char *rm[] = { "rm", "-rf", "--one-file-system", "--", staging, NULL };
	int r;

	if ((r = stage_make(b)))
		r = fail(b, "mkdir %s: %s", b->stage, strerror(-r));
	else
		r = populate(b);
	if (!r)
		r = install(b, guest_init);
	if (!r)
		r = make_ext4(b);
	snprintf(staging, sizeof(staging), "%s", b->stage);
	if ((slash = strrchr(staging, '/')))
		*slash = '\0';
	step(b, r ? "cleaning up" : "cleaning up the staging tree");
	if (tool(b, rm) && !r)
		log_warn("could not remove %s", staging);
	return r;
}

/* The version recorded as built (or failed, r != 0) and named latest;
 * the exit status. */
static int build_record(struct build *b, int r)
{
	if (r) {
		unlink(b->im.rootfs);
		b->im.status = IMG_FAILED;
		b->im.size = 0;
		image_save(&b->im);
		BERR(b, 0, "%s:%u FAILED: %s (log: %s)", b->im.name, b->im.version, b->im.error, b->log);
		if (b->logfd >= 0)
			close(b->logfd);
		return CLI_EXIT_ERROR;
	}
	if (b->logfd >= 0)
		close(b->logfd);
	b->im.status = IMG_BUILT;
	if ((r = image_save(&b->im))) {
		unlink(b->im.rootfs);
		return BERR(b, CLI_EXIT_ERROR, "recording %s:%u: %s", b->im.name, b->im.version, strerror(-r));
	}
	image_update_latest(b->im.name);
	if (!b->quiet && b->out->progress)
		fprintf(b->out->progress, "built %s:%u (%llu MiB) in %.1f s\n", b->im.name, b->im.version,
			(unsigned long long)(b->im.size >> 20), now_s() - b->t0);
	fprintf(b->out->result, "%s:%u\n", b->im.name, b->im.version);
	return 0;
}

int image_build_main(int argc, char **argv, struct image_out *out)
{
	struct build b;
	char store[PATH_MAX], guest_init[PATH_MAX + 32];
	unsigned *v, next;
	int n, r;

	if ((r = build_parse(&b, argc, argv, out)) != BUILD_GO_ON ||
	    (r = build_check(&b, guest_init, sizeof(guest_init))) != BUILD_GO_ON)
		return r;
	if (image_store(store, sizeof(store)))
		return CLI_EXIT_ERROR; /* it logged why */
	n = image_versions(b.im.name, &v);
	if (n < 0)
		return BERR(&b, CLI_EXIT_ERROR, "%s: %s", b.im.name, strerror(-n));
	if (b.if_changed && (r = build_up_to_date(&b, v, n)) != BUILD_GO_ON) {
		free(v);
		return r;
	}
	next = n > 0 ? v[n - 1] + 1 : 1;
	free(v);
	if ((r = build_new_version(&b, store, next)) != BUILD_GO_ON)
		return r;
	b.logfd = open(b.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	b.t0 = now_s();
	b.steps = 4 + (b.nr_files ? 1 : 0);
	if (!b.quiet && out->progress)
		fprintf(out->progress, "building %s:%u from %s\n", b.im.name, b.im.version, b.im.source);
	return build_record(&b, build_steps(&b, guest_init));
}

/* ---- versions filled by someone else (pull, import: image_oci.c) ------- */

struct image_job {
	struct build b;
	char guest_init[PATH_MAX + 32];
};

int image_job_begin(struct image_job **jp, const char *name, const char *source, unsigned steps, int quiet,
		    struct image_out *out)
{
	struct image_job *j = calloc(1, sizeof(*j));
	char store[PATH_MAX], dir[PATH_MAX + 64], exe[PATH_MAX];
	unsigned *v, next;
	int n, r = 0;

	*jp = NULL;
	if (!j)
		return cli_seterr(out->err, sizeof(out->err), -ENOMEM, "%s", strerror(ENOMEM));
	j->b.out = out;
	j->b.logfd = -1;
	j->b.quiet = quiet;
	snprintf(j->b.im.name, sizeof(j->b.im.name), "%s", name);
	snprintf(j->b.im.source, sizeof(j->b.im.source), "%s", source);
	if (cli_lib_dir(exe, sizeof(exe), NULL, 0) ||
	    snprintf(j->guest_init, sizeof(j->guest_init), "%s/guest/guest-init", exe) >= (int)sizeof(j->guest_init) ||
	    access(j->guest_init, R_OK)) {
		BERR(&j->b, 0, "guest-init not found (%s): make install, or run make in vmm's source tree", j->guest_init);
		free(j);
		return -ENOENT;
	}
	if (image_store(store, sizeof(store)) || (r = n = image_versions(name, &v)) < 0) {
		if (r < 0)
			BERR(&j->b, 0, "%s: %s", name, strerror(-r));
		free(j);
		return -EIO;
	}
	next = n > 0 ? v[n - 1] + 1 : 1;
	free(v);
	snprintf(dir, sizeof(dir), "%s/%s", store, name);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		BERR(&j->b, 0, "%s: %s", dir, strerror(errno));
		free(j);
		return -EIO;
	}
	/* The next number; mkdir is the lock (two builds never share one). */
	for (;; next++) {
		snprintf(dir, sizeof(dir), "%s/%s/%u", store, name, next);
		if (strlen(dir) >= sizeof(j->b.im.dir) - 16) {
			BERR(&j->b, 0, "%s: %s", dir, strerror(ENAMETOOLONG));
			free(j);
			return -ENAMETOOLONG;
		}
		if (mkdir(dir, 0755) == 0)
			break;
		if (errno != EEXIST) {
			BERR(&j->b, 0, "%s: %s", dir, strerror(errno));
			free(j);
			return -EIO;
		}
	}
	j->b.im.version = next;
	j->b.im.status = IMG_BUILDING;
	j->b.im.created = (long long)time(NULL);
	snprintf(j->b.im.dir, sizeof(j->b.im.dir), "%.4000s", dir);
	snprintf(j->b.im.rootfs, sizeof(j->b.im.rootfs), "%.4000s/rootfs.ext4", dir);
	stage_paths(&j->b, dir);
	snprintf(j->b.log, sizeof(j->b.log), "%.4000s/build.log", dir);
	if (image_save(&j->b.im) || stage_make(&j->b)) {
		BERR(&j->b, 0, "%s: cannot start the version", dir);
		free(j);
		return -EIO;
	}
	j->b.logfd = open(j->b.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	j->b.t0 = now_s();
	j->b.steps = steps + 3;
	if (!quiet && out->progress)
		fprintf(out->progress, "making %s:%u from %s\n", name, next, source);
	*jp = j;
	return 0;
}

struct image_info *image_job_info(struct image_job *j)
{
	return &j->b.im;
}

const char *image_job_stage(struct image_job *j)
{
	return j->b.stage;
}

void image_job_step(struct image_job *j, const char *what)
{
	step(&j->b, what);
}

int image_job_finish(struct image_job *j, const char *error)
{
	struct build *b = &j->b;
	int r = 0;

	if (error) {
		snprintf(b->im.error, sizeof(b->im.error), "%s", error);
		r = -1;
	}
	if (!r)
		r = install(b, j->guest_init);
	if (!r)
		r = make_ext4(b);
	{
		step(b, r ? "cleaning up" : "cleaning up the staging tree");
		if (stage_remove(b) && !r)
			log_warn("could not remove %s", b->stage);
	}
	if (b->logfd >= 0)
		close(b->logfd);
	if (r) {
		unlink(b->im.rootfs);
		b->im.status = IMG_FAILED;
		b->im.size = 0;
		image_save(&b->im);
		BERR(b, 0, "%s:%u FAILED: %s", b->im.name, b->im.version, b->im.error);
		free(j);
		return -EIO;
	}
	b->im.status = IMG_BUILT;
	if (image_save(&b->im)) {
		unlink(b->im.rootfs);
		BERR(b, 0, "recording %s:%u failed", b->im.name, b->im.version);
		free(j);
		return -EIO;
	}
	image_update_latest(b->im.name);
	if (!b->quiet && b->out->progress)
		fprintf(b->out->progress, "made %s:%u (%llu MiB) in %.1f s\n", b->im.name, b->im.version,
			(unsigned long long)(b->im.size >> 20), now_s() - b->t0);
	fprintf(b->out->result, "%s:%u\n", b->im.name, b->im.version);
	free(j);
	return 0;
}

/* ---- vmm image warm ------------------------------------------------------ */

/* Runs this vmm binary with argv; its stdout into out (if not NULL). */
static int run_self(const char *const *argv, char *out, size_t outlen)
{
	char exe[PATH_MAX];
	ssize_t n, got = 0;
	int pfd[2];
	pid_t p;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0 || pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	exe[n] = '\0';
	p = start_proc(exe, argv, pfd[1], -1);
	close(pfd[1]);
	while (out && (size_t)got + 1 < outlen && (n = read(pfd[0], out + got, outlen - 1 - (size_t)got)) > 0)
		got += n;
	if (out)
		out[got] = '\0';
	close(pfd[0]);
	return wait_proc(p);
}

int image_warm_main(int argc, char **argv, struct image_out *o)
{
	struct image_info im;
	char kernel[PATH_MAX], key[PATH_MAX + 256], name[64], ref[IMAGE_NAME_MAX + 16];
	char warm[PATH_MAX + 16], snap[PATH_MAX + 64], part[PATH_MAX + 32], keyf[PATH_MAX + 64], out[256];
	char mem[16], cpus[16];
	double t0 = now_s();
	int r, fd;

	if (argc == 2 && !strcmp(argv[1], "--help")) {
		fprintf(o->result, "usage: vmm image warm NAME[:VERSION]\n\n"
			"Boots the image once, snapshots it when its API answers and keeps the\n"
			"snapshot with the image: `vmm run --image` then restores from it instead\n"
			"of booting (while the kernel and snapshot format stay the same).\n");
		return 0;
	}
	if (argc != 2 || argv[1][0] == '-')
		return cli_usage_msg(o->err, sizeof(o->err), "image warm", "expected NAME[:VERSION]");
	if (image_resolve(argv[1], &im))
		return CLI_EXIT_ERROR; /* it logged why */
	if (image_default_kernel(kernel, sizeof(kernel)))
		return cli_seterr(o->err, sizeof(o->err), CLI_EXIT_ERROR,
				  "no kernel next to vmm (build/kernel/vmlinux): run make");
	if ((r = image_warm_key(&im, kernel, key, sizeof(key))))
		return cli_seterr(o->err, sizeof(o->err), CLI_EXIT_ERROR, "%s: %s", argv[1], strerror(-r));
	snprintf(ref, sizeof(ref), "%s:%u", im.name, im.version);
	snprintf(name, sizeof(name), "warm-%.30s-%u-%d", im.name, im.version, (int)getpid());
	snprintf(warm, sizeof(warm), "%s/warm", im.dir);
	snprintf(part, sizeof(part), "%s/warm.partial-%d", im.dir, (int)getpid());
	snprintf(snap, sizeof(snap), "%s/snapshot", part);
	snprintf(mem, sizeof(mem), "%u", im.mem_mib ? im.mem_mib : 512);
	snprintf(cpus, sizeof(cpus), "%u", im.cpus ? im.cpus : 1);
	if (mkdir(part, 0755) < 0)
		return cli_seterr(o->err, sizeof(o->err), CLI_EXIT_ERROR, "%s: %s", part, strerror(errno));
	if (o->progress)
		fprintf(o->progress, "[1/2] booting %s until its API answers\n", ref);
	{
		/* the image's disk size, as a cold `run --image` gives it
		 * (image_run_args): restores of the snapshot get that disk */
		char disk[32];
		const char *run[] = { "vmm", "run", "-d", "-q", "--name", name, "--image-root", im.rootfs,
				      "--image-ref", ref, "--mem", mem, "--cpus", cpus, "--kernel", kernel,
				      im.disk_mib ? "--disk-size" : NULL, disk, NULL };

		snprintf(disk, sizeof(disk), "%lluM", im.disk_mib);
		r = run_self(run, out, sizeof(out));
	}
	if (r) {
		cli_seterr(o->err, sizeof(o->err), 0, "booting %s failed (status %d)", ref, r);
		goto fail;
	}
	if (o->progress)
		fprintf(o->progress, "[2/2] snapshotting it (%5.1f s)\n", now_s() - t0);
	{
		const char *sn[] = { "vmm", "snapshot", "--stop", name, snap, NULL };

		r = run_self(sn, out, sizeof(out));
	}
	{
		const char *rm[] = { "vmm", "rm", "-f", name, NULL };

		run_self(rm, NULL, 0);
	}
	if (r) {
		cli_seterr(o->err, sizeof(o->err), 0, "the snapshot failed (status %d)", r);
		goto fail;
	}
	snprintf(keyf, sizeof(keyf), "%s/key", part);
	fd = open(keyf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || dprintf(fd, "%s\n", key) < 0 || fsync(fd) < 0) {
		cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", keyf, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	close(fd);
	{
		/* Replace an older warm snapshot: move it aside, then drop it. */
		char old[PATH_MAX + 48];
		const char *rmold[] = { "rm", "-rf", "--one-file-system", "--", old, NULL };
		struct build b = { .logfd = -1, .out = o };

		snprintf(old, sizeof(old), "%s/warm.old-%d", im.dir, (int)getpid());
		if (rename(warm, old) == 0)
			tool(&b, rmold);
		if (rename(part, warm) < 0) {
			cli_seterr(o->err, sizeof(o->err), 0, "%s: %s", warm, strerror(errno));
			goto fail;
		}
	}
	if (o->progress)
		fprintf(o->progress, "warm: %s starts from its snapshot now (%.1f s)\n", ref, now_s() - t0);
	fprintf(o->result, "%s\n", ref);
	return 0;
fail:
	{
		const char *rm[] = { "rm", "-rf", "--one-file-system", "--", part, NULL };
		struct build b = { .logfd = -1, .out = o };

		tool(&b, rm);
	}
	return CLI_EXIT_ERROR;
}
