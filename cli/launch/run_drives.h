/* Named drives (cli/drive/drive.h) for the ways a sandbox starts besides
 * `vmm run --drive` (run_opts.c): the Firecracker-style API's PUT /fs
 * {"drive": NAME} under vmm serve, and the drives of a snapshot restored
 * as a clone (vmm restore, resume, serve's snapshot load). Each goes
 * through drive_mount_opt, as a run does: the allow list for this
 * sandbox's name (refused before anything boots), the size limit and the
 * byte count shared by every sandbox on the drive. */
#ifndef CLI_RUN_DRIVES_H
#define CLI_RUN_DRIVES_H

#include <stddef.h>

struct fcapi;
struct fcapi_fs;
struct run_opts;
struct snapshot;

/* The API's drive resolver (fcapi_drive_fn; ctx: the struct run_opts,
 * whose name is the sandbox's): fs->drive, fs->at ("" : /drives/NAME)
 * and fs->ro in; path, at, limit and usage out. 0, or -errno with why. */
int run_fc_drive(void *ctx, struct fcapi_fs *fs, char *why, size_t len);
/* The record's "NAME:DIR[:ro],..." of the drives the API configured,
 * into o->drives_text. */
void run_fc_drives_text(const struct fcapi *a, struct run_opts *o);
/* A clone's drives: each of the snapshot's shared folders that is a drive
 * of the store (its tag the drive's name, its folder the drive's) and
 * that no --fs replaces becomes an override of o (o->over_fs: the
 * drive's folder, limit and count) after the allow list let o->name
 * mount it; o->drives_text lists them. 0, or -errno with why (-EACCES:
 * the list refused). */
int restore_drives(const struct snapshot *s, struct run_opts *o, char *why, size_t len);

#endif
