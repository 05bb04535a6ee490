/* The sandbox API server (docs/api.md): request parsing (pure, fuzzed) and
 * the operations, each run in a process of its own per connection. */
#ifndef GUEST_API_H
#define GUEST_API_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define API_MAX_ARGS 256
#define API_MAX_ENV 256
#define API_MAX_SEED 256 /* bytes of entropy a sync carries */
#define API_MAX_NETS 8   /* interfaces a sync may reconfigure */
#define API_NET_SPEC 160 /* bytes of one interface's description */

enum api_op {
	OP_HEALTH, OP_EXEC, OP_READ, OP_WRITE, OP_LIST, OP_STAT, OP_MKDIR, OP_REMOVE,
	OP_RENAME, OP_PS, OP_KILL, OP_SHUTDOWN, OP_SYNC, OP_CONNECT,
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
};

/* Parses and validates a REQUEST payload. `token` is the sandbox's access
 * token (NULL: none required). Returns 0, or -1 with *err (message) and
 * *eno (errno to report: EINVAL, EACCES, EPROTO). */
int api_parse(const char *text, size_t len, const char *token, struct json_arena *a,
	      struct api_request *r, const char **err, int *eno);

struct api_config {
	const char *token;
	const char *registry;  /* directory of running exec sessions */
	int (*shutdown)(void); /* asks the init to power off */
	/* sync (after a snapshot restore): set the clock, mix in entropy.
	 * NULL where the server must not (the host build in tests). */
	int (*sync)(int64_t time_s, int64_t time_ns, const uint8_t *seed, size_t len);
	/* sync's "net": reconfigures one interface (guest-init/net.h); NULL: none. */
	int (*net)(const char *spec, char *err, size_t errlen);
	uint64_t start_ms;
};

/* Serves one connection (reads the request, runs it, replies). Runs in a
 * process of its own; returns when the connection is done. */
void api_serve(int fd, const struct api_config *cfg);

#endif
