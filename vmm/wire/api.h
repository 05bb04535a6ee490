/* The sandbox API server (docs/api.md): request parsing (pure, fuzzed) and
 * the operations, each run in a process of its own per connection. */
#ifndef GUEST_API_H
#define GUEST_API_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/wire/json.h"

#define API_MAX_ARGS 256
#define API_MAX_ENV 256
#define API_MAX_SEED 256 /* bytes of entropy a sync carries */
#define API_MAX_NETS 8   /* interfaces a sync may reconfigure */
#define API_NET_SPEC 160 /* bytes of one interface's description */
#define API_MAX_PATHS 256 /* paths one v2 stat may ask about */
#define API_TAG_MAX 64    /* bytes of a detached process's tag */
#define API_RING_MIN 4096
#define API_RING_MAX (64u << 20)
#define API_RING_DEFAULT (1u << 20) /* bytes of output kept per stream */
#define API_MAX_GROUPS 32 /* exec: supplementary groups */
#define API_MAX_RLIMITS 16 /* exec: resource limits */
/* The tools guest-init is when a link to it bears their name
 * (guest-init/tools.h); image builds link the ones busybox lacks. */
#define GUEST_TOOL_NAMES "nohup", "flock", "script"

enum api_op {
	OP_HEALTH, OP_EXEC, OP_READ, OP_WRITE, OP_LIST, OP_STAT, OP_MKDIR, OP_REMOVE,
	OP_RENAME, OP_PS, OP_KILL, OP_SHUTDOWN, OP_SYNC, OP_CONNECT,
	/* version 2 */
	OP_PROCESSES, OP_ATTACH, OP_LOGS, OP_SIGNAL, OP_WAIT, OP_WATCH, OP_READLINK, OP_SYMLINK,
	OP_TAR_GET, OP_TAR_PUT,
};

struct api_request {
	enum api_op op;
	const char *argv[API_MAX_ARGS + 1];
	unsigned argc;
	const char *env[API_MAX_ENV + 1];
	unsigned envc;
	const char *cwd;
	int stdin_stream;   /* the client streams stdin (else /dev/null) */
	int pty;
	unsigned rows, cols;
	int64_t timeout_ms; /* 0: none */
	const char *path;
	const char *to;     /* rename */
	int64_t mode;       /* -1: default */
	int parents;        /* write/mkdir: create missing parents */
	int recursive;      /* remove */
	int64_t pid;
	int64_t sig;
	int64_t time_s, time_ns; /* sync: wall-clock time */
	int64_t port;            /* connect: a TCP port in the sandbox */
	uint8_t seed[API_MAX_SEED];
	size_t seed_len;         /* sync: entropy to mix in */
	/* sync: interfaces to reconfigure, "MAC[,mac=NEW][,ip=A/P][,gw=G][,dns=D]" */
	const char *net[API_MAX_NETS];
	unsigned nr_net;
	int64_t egress_port;     /* sync: start the egress proxy's guest side (0: no) */
	/* version 2 (zero/-1 in a version 1 request, which never carries them) */
	int version;             /* the request's "v": 1 or 2 */
	int detach;              /* exec: a detached process (procs.c) */
	const char *tag;         /* exec detach: a name; attach/logs/signal/wait: select by it */
	int64_t id;              /* attach/logs/signal/wait: a detached process's id (0: by tag) */
	int64_t ring_bytes;      /* exec detach: output kept per stream (0: the server's default) */
	int64_t offset;          /* read: first byte; attach/logs: stdout replay offset */
	int64_t length;          /* read: at most this many bytes (-1: to the end) */
	int64_t stderr_offset;   /* attach/logs: stderr replay offset */
	int follow;              /* logs: go on streaming until the process ends */
	int64_t uid, gid;        /* write: owner (-1: unchanged) */
	const char *user;        /* write: owner by name (the guest's /etc/passwd); exec: USER[:GROUP] to run as */
	const char *paths[API_MAX_PATHS];
	unsigned nr_paths;       /* stat of many paths (0: "path") */
	int64_t coalesce_ms;     /* watch: window events are merged in */
	/* exec in a container root (vmm oci, docs/oci-runtime.md); uid/gid
	 * above are the command's user then (-1: root's, unchanged) */
	const char *root;        /* chroot here first (NULL: none) */
	const char *cgroup;      /* a pod's container: join this cgroup v2 directory first (NULL: none) */
	const char *mntns;       /* "new": a mount namespace of its own; a path: setns into it (NULL: none) */
	const char *pidns;       /* "new": a PID namespace of its own (the command is its PID 1, /proc
				  * under root is remounted for it); a path: the command starts in that
				  * one (an exec joining its container's); NULL: the guest's */
	uint32_t groups[API_MAX_GROUPS];
	unsigned ngroups;        /* supplementary groups (set with uid/gid) */
	int no_new_privs;        /* PR_SET_NO_NEW_PRIVS before exec */
	struct { int res; uint64_t soft, hard; } rlimits[API_MAX_RLIMITS];
	unsigned nrlimits;
	const char *target;      /* symlink: what the new link points to */
	int follow_links;        /* stat: stat, not lstat (a symlink's target); tar_get: archive link targets */
	const char *arcname;     /* tar_get: the top entry's name in the archive (NULL: the default) */
	int64_t max_depth;       /* tar_get/tar_put: components in a name (0: TAR_DEPTH_DEFAULT) */
	int64_t max_entries;     /* tar_get/tar_put: entries (0: TAR_ENTRIES_DEFAULT) */
	int owner;               /* tar_put: uid/gid from the archive (root only) */
};

/* Who may use the API: the host (a vsock peer with CID 2,
 * VMADDR_CID_HOST) or, for `--serve-unix`, a Unix-socket peer. A guest
 * process reaches the API's port too, over the guest kernel's vsock
 * loopback (from CID 1 or the guest's own CID): refused, token or not.
 * `addr`/`len` as accept() returned them. 1: allowed, 0: refused. */
int api_peer_allowed(const void *addr, size_t len);

/* The token window (the vmm port, docs/devices.md): the token's bytes,
 * NUL-terminated within `n`, each of A-Z a-z 0-9 _ . -. Copies it to
 * `out` and returns 1; 0 if the window holds no token (the VMM has none);
 * -1 if it is not a token window (no NUL: an older VMM's ports read as all
 * ones; a byte outside the set; longer than `outlen` - 1). */
int api_token_parse(const unsigned char *win, size_t n, char *out, size_t outlen);

#define API_TOKEN_MAX 128 /* bytes of a token, with its NUL */

/* Parses and validates a REQUEST payload. `token` is the sandbox's access
 * token (NULL: none required). Returns 0, or -1 with *err (message) and
 * *eno (errno to report: EINVAL, EACCES, EPROTO). */
int api_parse(const char *text, size_t len, const char *token, struct json_arena *a,
	      struct api_request *r, const char **err, int *eno);

struct api_config {
	const char *token;     /* fixed token (NULL: none), unless token_read */
	/* Reads the token for this connection (the VMM's token window), so
	 * a clone restored from a snapshot takes its own token at once: as
	 * api_token_parse, into buf. NULL: `token` holds. */
	int (*token_read)(char *buf, size_t len);
	const char *registry;  /* directory of running exec sessions */
	int (*shutdown)(void); /* asks the init to power off */
	/* sync (after a snapshot restore): set the clock, mix in entropy.
	 * NULL where the server must not (the host build in tests). */
	int (*sync)(int64_t time_s, int64_t time_ns, const uint8_t *seed, size_t len);
	/* sync's "net": reconfigures one interface (guest-init/net.h); NULL: none. */
	int (*net)(const char *spec, char *err, size_t errlen);
	/* sync's "egress_port": starts the guest side of the egress proxy
	 * (guest-init/guest_egress.h); NULL: none. */
	int (*egress)(unsigned port);
	/* exec: the port commands get HTTP_PROXY for (0: none); NULL: none. */
	unsigned (*egress_port)(void);
	uint64_t start_ms;
	/* The process manager's channel (procs.c): detached processes and
	 * their ops are handed over there with the client's connection. -1:
	 * none (those ops get ENOTSUP). */
	int procs_fd;
	/* This connection's worker was forked ahead of it (guest-init's
	 * spare), not for it: health and sync say which ("worker"). */
	int spare;
};

/* Serves one connection (reads the request, runs it, replies). Runs in a
 * process of its own; returns when the connection is done. */
void api_serve(int fd, const struct api_config *cfg);

#endif
