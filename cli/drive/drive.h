/* Drives (docs/cli.md, "Drives"; docs/virtio-fs.md): named shared folders
 * kept in a store of their own that outlive every sandbox.
 *   store: $VMM_DRIVE_DIR, else /var/lib/vmm/drives as root, else
 *   $XDG_STATE_HOME/vmm/drives, else ~/.local/state/vmm/drives.
 * One folder per drive: `drive` (its record: path, own, size, allow
 * lines), `usage` (the 8-byte byte count the VMMs serving it map,
 * devices/fuse/fuse_budget.c), `lock` (flock for changes) and `data/`
 * (the shared folder, unless created with --path).
 * Who may mount it: the allow list, sandbox names, labels
 * ("label:KEY=VALUE": any sandbox run with --label KEY=VALUE) or "*" (any
 * sandbox), each read-write or read-only; an empty list allows nobody (the
 * safe default: a new drive is private until `vmm drive allow`). The rule
 * that decides (drive_allowed): the sandbox's own name rule if there is
 * one, else its matching label rules (read-only if any of them is: the
 * narrower grant wins, whatever their order), else "*". */
#ifndef CLI_DRIVE_DRIVE_H
#define CLI_DRIVE_DRIVE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "devices/fuse/fuse.h"

#define DRIVE_NAME_MAX 35  /* it is the virtio-fs tag too */
#define DRIVE_ALLOW_MAX 32

#define DRIVE_RULE_LABEL "label:"
struct drive_rule {
	char who[136];  /* a sandbox name, "label:KEY=VALUE", or "*" */
	int ro;
};

struct drive {
	char name[DRIVE_NAME_MAX + 1];
	char dir[PATH_MAX];    /* its folder in the store */
	char path[PATH_MAX + 8]; /* the shared folder */
	int own;               /* path is dir/data: removed with the drive */
	uint64_t size;         /* limit in bytes, 0: none */
	struct drive_rule allow[DRIVE_ALLOW_MAX];
	unsigned nr_allow;
};

/* 1..35 of [A-Za-z0-9_.-], not starting with '.' or '-'. */
int drive_name_ok(const char *name);
/* The store's root, made (0700) if missing. 0 or -errno. */
int drive_root(char *buf, size_t len);
/* "WHO" or "WHO:ro" / "WHO:rw" (WHO a sandbox name, label:KEY=VALUE or
 * "*"). 0 or -EINVAL. */
int drive_rule_parse(const char *s, struct drive_rule *r);
/* May sandbox `who` (NULL: unnamed) with `labels` ("KEY=VALUE,...", or
 * NULL) mount d (ro: read-only)? 0, or -EACCES with why (naming the rule
 * that decided). */
int drive_allowed(const struct drive *d, const char *who, const char *labels, int ro, char *why, size_t len);
/* Adds (or changes) a rule / removes who's rule in d (memory only). */
int drive_allow(struct drive *d, const struct drive_rule *r);
int drive_deny(struct drive *d, const char *who);

/* Creates drive d->name (d filled by the caller: path "" for one of the
 * store's own, size, allow). Race-free: the folder is made with mkdir, a
 * second create of the name fails with -EEXIST. why on failure. */
int drive_create(struct drive *d, char *why, size_t len);
int drive_load(const char *name, struct drive *d);
/* Rewrites d's record (temporary file renamed over it) under its lock. */
int drive_save(const struct drive *d);
/* Removes the drive: its store folder, and the shared folder if its own. */
int drive_remove(const struct drive *d);
/* Drive names, sorted; *names malloc'd. The count or -errno. */
int drive_list(char ***names);
/* Bytes the shared folder's regular files take (st_blocks * 512). */
int64_t drive_walk_usage(const char *path);
/* The count the VMMs share: read, set. */
int64_t drive_usage_read(const struct drive *d);
int drive_usage_set(const struct drive *d, int64_t bytes);
/* The running sandboxes whose record names this drive, comma-separated. */
void drive_users(const char *name, char *buf, size_t len);

/* `vmm run --drive NAME[:GUESTDIR][:ro]` for sandbox `who` with `labels`: checks the
 * allow list and gives the --fs option text for the VMM
 * ("tag=NAME,path=DIR[,ro],at=GUESTDIR[,limit=N,usage=FILE]"). 0, or
 * -errno with why (naming the drive and the rule). */
int drive_mount_opt(const char *arg, const char *who, const char *labels, char *fs, size_t fslen, char *why, size_t len);

/* ---- drive_files.c: a drive's files served on the host (the MCP
 * endpoint's drive scopes, docs/mcp.md). rel: a path relative to the
 * drive's folder ("" its root), never leaving it: each walk is
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from root, and -EXDEV
 * (or -ELOOP) is what a link out of the drive gets. ---- */
struct drive_files {
	int root;                  /* O_PATH fd of the drive's folder */
	struct fuse_budget budget; /* its shared count mapped (a size limit), or used NULL */
};
struct drive_dirent {
	char *name; /* malloc'd */
	char type;  /* 'f', 'd', 'l' or '?' */
	long long size;
};
int drive_files_open(const struct drive *d, struct drive_files *f);
void drive_files_close(struct drive_files *f);
/* openat2 beneath root. An fd, or -errno. */
int drive_open_beneath(int root, const char *rel, int flags, mode_t mode);
/* At most max bytes of a regular file from off into *data (malloc'd,
 * NUL-terminated); *size, *mode (may be NULL) from its stat. nofollow: a
 * symbolic link as the last component is refused (-ELOOP). */
int drive_file_read(const struct drive_files *f, const char *rel, uint64_t off, size_t max, int nofollow, char **data,
		    size_t *len, uint64_t *size, int64_t *mode);
/* A directory's entries, the first max into ents (the caller's array),
 * *total all of them. */
int drive_file_list(const struct drive_files *f, const char *rel, size_t max, struct drive_dirent *ents, size_t *n,
		    size_t *total);
/* Replaces rel with data, atomically (a new file renamed over it); mode <
 * 0: 0644; parents: missing directories made. -ENOSPC past the size
 * limit, nothing changed. */
int drive_file_write(struct drive_files *f, const char *rel, const void *data, size_t len, int64_t mode, int parents);

#endif
