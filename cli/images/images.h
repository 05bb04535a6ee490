/* Sandbox images (docs/images.md): an image store of immutable, numbered
 * versions of ext4 root filesystems with guest-init installed as
 * /sbin/vmm-init, each with its defaults and build inputs recorded, and
 * optionally a warm snapshot to start from.
 *
 *   STORE/NAME/VERSION/image.json   status, size, created, inputs, defaults
 *   STORE/NAME/VERSION/rootfs.ext4  the image (read-only from then on)
 *   STORE/NAME/VERSION/build.log    what the build's tools printed
 *   STORE/NAME/VERSION/warm/        snapshot at API-ready (vmm image warm)
 *   STORE/NAME/latest               symlink to the newest BUILT version */
#ifndef CLI_IMAGE_H
#define CLI_IMAGE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define IMAGE_NAME_MAX 48
#define IMAGE_INIT "/sbin/vmm-init" /* where guest-init goes in every image */

enum image_status { IMG_BUILDING, IMG_BUILT, IMG_FAILED };

struct image_info {
	char name[IMAGE_NAME_MAX + 1];
	unsigned version;
	enum image_status status;
	uint64_t size;            /* bytes of rootfs.ext4 */
	long long created;        /* Unix seconds */
	unsigned mem_mib, cpus;   /* defaults for sandboxes (0: vmm's) */
	unsigned long long disk_mib; /* a sandbox's root disk (0: IMAGE_DISK_DEFAULT_MIB) */
	char drives[512];         /* drives its sandboxes mount: "NAME[:DIR][:ro],..." or "" */
	char source[512];         /* "dir:PATH", "tar:FILE", "debian:SUITE+PKGS", "busybox:PATH" */
	char inputs[32];          /* hash of the build inputs (hex) */
	char error[512];          /* FAILED: why */
	char dir[PATH_MAX];       /* STORE/NAME/VERSION */
	char rootfs[PATH_MAX + 16];
};

/* The drives an image names for its sandboxes (vmm image build --drive):
 * at most a VM's shared folders. */
#define IMAGE_MAX_DRIVES 8
/* Appends the drive spec "NAME[:/GUEST/DIR][:ro]" to list
 * (comma-separated, as image.json's "drives"). 0, -EINVAL (not a drive
 * spec), -EEXIST (the name is there) or -E2BIG. */
int image_drive_add(char *list, size_t len, const char *spec);
/* The label vmm.drives ("NAME[:DIR][:ro],...", of a pulled, imported or
 * Dockerfile-built image) as im's drives, each checked. 0, or -EINVAL
 * with a message in err. */
int image_drives_set(struct image_info *im, const char *label, char *err, size_t len);

/* A sandbox's root disk when neither `vmm run --disk-size` nor the image
 * (`vmm image build --disk-size`) says: room for what agents install,
 * sparse on the host (only what is written costs space). An image larger
 * than this keeps its own size. */
#define IMAGE_DISK_DEFAULT_MIB 4096ull

/* A sandbox's own copy of an image's root (PATH, ext4) grown to BYTES:
 * the file extended sparsely, then its file system (resize2fs, after
 * e2fsck -f -p if resize2fs asks for one). Never the image itself: the
 * caller passes the copy. 0, or -errno with a message in err. */
int image_root_grow(const char *path, uint64_t bytes, char *err, size_t len);

/* The store's root: $VMM_IMAGE_DIR, /var/lib/vmm/images for root, else
 * $XDG_STATE_HOME/vmm/images (~/.local/state/vmm/images); created. */
/* "building", "built", ... as image.json and vmm image ls say it. */
const char *image_status_name(enum image_status s);
int image_store(char *buf, size_t len);
int image_name_ok(const char *name);
/* "NAME", "NAME:latest" or "NAME:N". *version 0 means latest. */
int image_parse_ref(const char *ref, char name[IMAGE_NAME_MAX + 1], unsigned *version);
/* One version's record (any status). 0 or -errno. */
int image_load(const char *name, unsigned version, struct image_info *im);
/* A usable version: NAME:N must be BUILT; NAME / NAME:latest is the newest
 * BUILT one. 0, or -ENOENT after a message saying what exists. */
int image_resolve(const char *ref, struct image_info *im);
/* Writes image.json atomically (temporary file, fsync, rename). */
int image_save(const struct image_info *im);
/* Versions of NAME, ascending (malloc'd); count or -errno. */
int image_versions(const char *name, unsigned **out);
/* Points NAME/latest at the newest BUILT version (or removes it). */
void image_update_latest(const char *name);
/* STORE/NAME/V/warm if it holds a snapshot made with this kernel and this
 * snapshot format ("stale" ones are ignored); 0 or -ENOENT. */
int image_warm_dir(const struct image_info *im, const char *kernel, char *dir, size_t len);
/* The key a warm snapshot is valid for (kernel identity, snapshot format,
 * image version and creation time). */
int image_warm_key(const struct image_info *im, const char *kernel, char *key, size_t len);
/* The default kernel (next to the vmm binary: build/kernel/vmlinux). */
int image_default_kernel(char *buf, size_t len);

/* vmm run --image REF: rewrites the arguments into a `vmm run` with the
 * image's copy-on-write root disk (hidden --image-root) and its defaults,
 * or, when a warm snapshot of it is valid and no option asks for anything
 * a restore cannot give, a `vmm restore` of it. *restore says which.
 * Returns 0 with *out (malloc'd, NULL-terminated; free with free()) or
 * 0 with *out NULL when there is no --image; -errno with why in err ("" when
 * the image store logged it). note: a line for the user (the image's ports
 * no --publish reaches), or "". */
int image_run_args(int argc, char **argv, char ***out, int *out_argc, int *restore, char *note, size_t notelen,
		   char *err, size_t errlen);

/* Is a sandbox (not exited, not dead) using NAME:VERSION? 1 with the first
 * named in who ("NAME:V is used by sandbox S (running)"), else 0. */
int image_in_use(const char *name, unsigned version, char *who, size_t wholen);

/* What the image commands below write, and where: they print nothing
 * themselves (docs/ARCHITECTURE.md, "Errors"); the verb (cli/image.c)
 * passes its stderr for progress and its stdout for the result, and prints
 * err after "vmm image VERB: " when one fails. */
struct image_out {
	FILE *progress;  /* "building NAME:N", "[1/4] ...", a pull's layers (-q: none written) */
	FILE *result;    /* NAME:VERSION of what was made, an exported file's name; --help */
	char err[1200];  /* why it failed: one line, "" if it said nothing */
};

/* image_build.c: vmm image build and warm, argv[0] the subcommand; the
 * exit status (2: a usage mistake). */
int image_build_main(int argc, char **argv, struct image_out *out);
int image_warm_main(int argc, char **argv, struct image_out *out);
/* image_dockerfile.c: vmm image build -f Dockerfile */
int image_dockerfile_main(int argc, char **argv, struct image_out *out);
/* image_builtin.c: vmm image build --builtin [RECIPE] */
int image_builtin_main(int argc, char **argv, struct image_out *out);

/* A new version whose tree someone else fills (pull, import): begin makes
 * NAME:N (BUILDING) with an empty staging tree; finish installs guest-init,
 * makes rootfs.ext4 and records BUILT, or FAILED with `error` when it is not
 * NULL (or when a step fails), removing the tree either way, and frees j.
 * Progress goes to out->progress unless quiet, NAME:N to out->result, and
 * why either failed (-errno) to out->err. */
struct image_job;
int image_job_begin(struct image_job **j, const char *name, const char *source, unsigned steps, int quiet,
		    struct image_out *out);
struct image_info *image_job_info(struct image_job *j);
const char *image_job_stage(struct image_job *j);
void image_job_step(struct image_job *j, const char *what);
int image_job_finish(struct image_job *j, const char *error);

/* image_pull.c: pull, import, export (docs/images.md), as the build ones */
int image_pull_main(int argc, char **argv, struct image_out *out);
int image_import_main(int argc, char **argv, struct image_out *out);
int image_export_main(int argc, char **argv, struct image_out *out);
/* config.json of a version (the image config's defaults), if it has one. */
struct oci_defaults;
int image_defaults(const struct image_info *im, struct oci_defaults *d);

/* The rest of the subsystem's interface. */
#include "cli/images/oci_image.h"
#include "cli/images/oci_unpack.h"
#include "cli/images/rdump.h"

#endif
