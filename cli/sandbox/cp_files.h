/* vmm cp's transfers (cli/sandbox/cp_files.c): a host path into a sandbox or a
 * sandbox path out to the host, through the sandbox API's file
 * operations (docs/api.md), with docker cp's rules for where things land
 * (docs/cli.md). */
#ifndef CLI_CP_FILES_H
#define CLI_CP_FILES_H

#include <stdint.h>
#include <sys/types.h>

#include "cli/sandbox/api_client.h"
#include "cli/util/util.h"

struct cp_opts {
	int follow;             /* -L: copy what symlinks in SRC point to */
	struct progress prog;   /* bytes and rate (a terminal; fd -1: none) */
	uint64_t bytes;         /* copied so far */
	uint64_t last_ns;       /* the status was last updated then */
	char err[8192];         /* why a copy failed, for the verb to print (cli_seterr): room for a
				   path as long as the guest takes and its reason */
};

/* SRC (a host path) to remote in the sandbox, or remote to local. 0 or
 * -errno, with why in o->err. An entry that is neither file, directory
 * nor symlink is skipped with a warning (log_warn). */
int cp_in(const struct sandbox_addr *a, const char *local, const char *remote, struct cp_opts *o);
int cp_out(const struct sandbox_addr *a, const char *remote, const char *local, struct cp_opts *o);

/* Adds n bytes copied (the progress line). */
void cp_count(struct cp_opts *o, uint64_t n);

/* Directories as one tar stream (cli/sandbox/cp_tar.c; the API's tar_get and
 * tar_put). CP_TAR_OLD: the guest-init does not know them (the caller
 * copies file by file); else 0 or -errno, why in o->err. */
#define CP_TAR_OLD 1
/* The local directory `local` (its content) into the guest directory
 * `remote`, created with its parents if missing. */
int cp_tar_in(const struct sandbox_addr *a, const char *local, const char *remote, struct cp_opts *o);
/* The guest directory `remote` (its content) into directory `name` of
 * dfd, created if missing and, unless follow_top, not followed if it is a
 * symbolic link. Modes through mask (0777 & ~umask). */
int cp_tar_out(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, int follow_top,
	       mode_t mask, struct cp_opts *o);
/* vmm cp - SANDBOX:DIR: a tar archive read from in_fd (the verb's stdin)
 * extracted under DIR. 0 or -errno, why in o->err. */
int cp_tar_stdin(const struct sandbox_addr *a, const char *remote, int in_fd, struct cp_opts *o);
/* vmm cp SANDBOX:PATH -: PATH as a tar archive written to out_fd (the
 * verb's stdout: the product), its top entry named arcname ("." : a
 * directory's content). 0 or -errno, why in o->err. */
int cp_tar_stdout(const struct sandbox_addr *a, const char *remote, const char *arcname, int follow, int out_fd,
		  struct cp_opts *o);

/* Where SRC lands, docker cp's way: DST itself, or DST/BASE when DST is a
 * directory (dst_is_dir) or ends with '/' and SRC is not a directory's
 * content ("SRC/."). src_dir: SRC is a directory. Sets *into (1: inside
 * DST, under base) and returns 0, or -ENOENT for "DST/" that is not there
 * with a file SRC (docker: the directory must exist), -ENOTDIR for a
 * directory SRC onto a file DST. dst_exists, dst_is_dir: what DST is. */
int cp_where(const char *src, int src_dir, const char *dst, int dst_exists, int dst_is_dir, int *into);
/* SRC without trailing slashes and "/." content markers. */
void strip_content(const char *src, char *out, size_t len);
/* SRC's last component, with trailing slashes and a "/." content marker
 * removed; *content set for "SRC/." (a directory's content). */
void cp_base(const char *src, char *base, size_t len, int *content);

#endif
