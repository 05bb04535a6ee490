/* The Dockerfile verbs' shared side (cli/dockerfile): a Dockerfile built
 * into a new image version with the real base images and RUN executor
 * (image_dockerfile.c), used by `vmm image build -f` and by the built-in
 * recipes (image_builtin.c, `vmm image build --builtin`); the debootstrap
 * base images a FROM may name (image_debootstrap.c). */
#ifndef CLI_DOCKERFILE_IMAGE_DOCKERFILE_H
#define CLI_DOCKERFILE_IMAGE_DOCKERFILE_H

#include <stddef.h>
#include <stdio.h>

#define DFI_DEFAULT_MIRROR "http://deb.debian.org/debian"

struct dfi_build {
	const char *file;              /* the Dockerfile */
	const char *context;           /* COPY's sources */
	const char *name;              /* the image's name (checked) */
	const char *const *build_args; /* NAME=VALUE, NULL-terminated */
	const char *target;            /* NULL: the last stage */
	const char *mirror;            /* FROM debootstrap:'s Debian mirror */
	const char *source;            /* image.json's source */
	const char *inputs;            /* image.json's inputs, or NULL */
	unsigned run_mem;              /* MiB of a RUN step's sandbox */
	int no_cache, quiet;
	int refresh;                   /* base trees made again (dfb_options) */
};

struct image_out;

/* Builds o->file into a new version of o->name (NAME:VERSION on
 * out->result, steps on out->progress): the exit status, why in
 * out->err. */
int dfi_build_image(const struct dfi_build *o, struct image_out *out);

/* FROM debootstrap:SUITE[+PKG,...] (image_debootstrap.c). */
int dfi_is_debootstrap(const char *ref);
/* How the trees are made ("fill=apt-2"): a built-in recipe's inputs. */
const char *dfi_debootstrap_method(void);
/* Checks ref (names, root, debootstrap there) and writes its cache id
 * (ref and mirror). 0, or -errno with a message in err. */
int dfi_debootstrap_resolve(const char *ref, const char *mirror, char *id, size_t idlen, char *err, size_t errlen);
/* debootstraps id's suite and packages into the empty folder dir and
 * trims it, saying so on progress (NULL: quiet). 0, or -errno with a
 * message in err (naming the log). */
int dfi_debootstrap_fill(const char *id, const char *dir, FILE *progress, char *err, size_t errlen);

#endif
