/* A bundle's config.json (the OCI runtime spec, config.md), parsed into
 * checked types for `vmm oci` (docs/oci-runtime.md). Pure: no VM, no
 * files but the one read by oci_spec_load, for unit tests and fuzzing.
 * What vmm does not apply is still parsed where a mistake in it should be
 * refused (a relative mount destination), and ignored otherwise. */
#ifndef CLI_OCI_SPEC_H
#define CLI_OCI_SPEC_H

#include <limits.h>
#include <linux/limits.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/wire/json.h"

#define OCI_SPEC_MAX_BYTES (1u << 20) /* config.json, at most */
#define OCI_MAX_ARGS 256
#define OCI_MAX_ENV 256
#define OCI_MAX_GROUPS 32
#define OCI_MAX_RLIMITS 16
#define OCI_MAX_MOUNTS 64
#define OCI_MAX_MOUNT_OPTS 32
#define OCI_MAX_ANNOTATIONS 64
#define OCI_MAX_HOOKS 16 /* per kind */

struct oci_rlimit {
	int resource; /* RLIMIT_* */
	uint64_t soft, hard;
};

struct oci_process {
	int terminal;
	const char *args[OCI_MAX_ARGS + 1]; /* NULL-terminated, argc >= 1 */
	unsigned argc;
	const char *env[OCI_MAX_ENV + 1];   /* each NAME=value, NULL-terminated */
	unsigned envc;
	const char *cwd;                    /* absolute */
	uint32_t uid, gid;
	uint32_t groups[OCI_MAX_GROUPS];    /* additionalGids */
	unsigned ngroups;
	int no_new_privs;
	struct oci_rlimit rlimits[OCI_MAX_RLIMITS];
	unsigned nrlimits;
	unsigned console_rows, console_cols; /* consoleSize, 0: none */
};

enum oci_mount_kind {
	OCI_MNT_BIND,   /* a host path: a virtio-fs share, bound in the guest */
	OCI_MNT_PROC,
	OCI_MNT_SYSFS,
	OCI_MNT_TMPFS,
	OCI_MNT_DEVPTS,
	OCI_MNT_MQUEUE,
	OCI_MNT_CGROUP,
	OCI_MNT_OTHER,  /* another filesystem type: tried in the guest */
};

struct oci_mount {
	enum oci_mount_kind kind;
	const char *dest;   /* absolute, no ".." component */
	const char *type;   /* as written ("bind" for a bind without a type) */
	const char *source;
	const char *opts[OCI_MAX_MOUNT_OPTS + 1];
	unsigned nopts;
	int ro;             /* "ro" among the options */
};

struct oci_hook {
	const char *path; /* absolute */
	const char *args[OCI_MAX_ARGS + 1];
	unsigned argc;
	const char *env[OCI_MAX_ENV + 1];
	unsigned envc;
	int timeout_s; /* 0: none */
};

enum oci_hook_kind {
	OCI_HOOK_PRESTART,
	OCI_HOOK_CREATE_RUNTIME,
	OCI_HOOK_CREATE_CONTAINER,
	OCI_HOOK_START_CONTAINER,
	OCI_HOOK_POSTSTART,
	OCI_HOOK_POSTSTOP,
	OCI_HOOK_KINDS
};

struct oci_spec {
	const char *version;            /* ociVersion */
	char root[PATH_MAX];            /* root.path, made absolute against the bundle */
	int root_ro;
	const char *hostname;           /* NULL: none */
	int has_process;
	struct oci_process process;
	struct oci_mount mounts[OCI_MAX_MOUNTS];
	unsigned nmounts;
	const char *netns;              /* linux.namespaces network "path", or NULL */
	const char *cgroups_path;       /* linux.cgroupsPath, or NULL (cli/oci/oci_cgroup.h) */
	enum oci_pidns {
		OCI_PIDNS_NONE,         /* no pid entry: the host's (here: the guest's) */
		OCI_PIDNS_NEW,          /* a pid entry without a path: its own */
		OCI_PIDNS_JOIN,         /* one with a path: another's (a pod that shares its processes) */
	} pidns;
	int64_t mem_limit;              /* linux.resources.memory.limit, bytes; 0: none */
	int64_t cpu_quota;              /* linux.resources.cpu.quota (µs); 0: none */
	uint64_t cpu_period;            /* its period (µs) */
	const char *ann_key[OCI_MAX_ANNOTATIONS];
	const char *ann_val[OCI_MAX_ANNOTATIONS];
	unsigned nann;
	struct oci_hook *hooks[OCI_HOOK_KINDS]; /* calloc'd, OCI_MAX_HOOKS each */
	unsigned nhooks[OCI_HOOK_KINDS];
	/* Storage the strings above point into. */
	struct json_arena arena;
};

/* Parses config.json text (len bytes) for a bundle at `bundle` (an
 * absolute directory; relative root.path is taken against it). The spec
 * keeps its strings in its own arena (free it with oci_spec_free, after a
 * failure too). 0, or -EINVAL with `why`
 * (room for a message) saying what is wrong: "process.args: must be a
 * non-empty array of strings". */
int oci_spec_parse(struct oci_spec *s, const char *text, size_t len, const char *bundle, char *why,
		   size_t whylen) __attribute__((warn_unused_result));
/* Reads BUNDLE/config.json (a regular file, at most OCI_SPEC_MAX_BYTES)
 * and parses it. 0, -ENOENT (no config.json), -EINVAL (why says). */
int oci_spec_load(struct oci_spec *s, const char *bundle, char *why, size_t whylen)
	__attribute__((warn_unused_result));
void oci_spec_free(struct oci_spec *s);

/* An annotation's value, or NULL. */
const char *oci_spec_annotation(const struct oci_spec *s, const char *key);

/* RLIMIT_* for "RLIMIT_NOFILE" (the spec's names), or -1. */
int oci_rlimit_from_name(const char *name);

/* A "process" object alone (process.json for `exec --process`) into p,
 * strings pointing into the arena. 0 or -EINVAL (why). */
int oci_process_parse(const struct json *obj, struct oci_process *p, char *why, size_t whylen);

#endif
