/* The sandbox API calls the MCP tools make (cli/mcp/mcp_tools.c), into memory
 * rather than to our stdout: a command's output captured (its head and
 * tail, bounded), a file read into a buffer or written from one, a
 * detached process's kept output. Each returns 0 or -errno with a message
 * for the caller's tool result in `err`. */
#ifndef CLI_MCP_API_H
#define CLI_MCP_API_H

#include <stddef.h>
#include <stdint.h>

#include "cli/sandbox/sandbox.h"

/* A bounded capture: the first head_cap bytes and the last tail_cap bytes
 * of a stream (a ring), and the count of all of them. */
struct capture {
	char *head, *tail;
	size_t head_cap, tail_cap, head_len;
	uint64_t total;
};
int capture_init(struct capture *c, size_t head_cap, size_t tail_cap);
void capture_add(struct capture *c, const void *data, size_t len);
/* The kept bytes in order into out (malloc'd, NUL-terminated), with a
 * line "[... N bytes omitted ...]" where the middle was dropped. */
char *capture_text(const struct capture *c, size_t *len);
void capture_free(struct capture *c);

struct mcp_exec {
	const char *const *argv;
	const char *const *env;  /* NAME=value, NULL-terminated, or NULL */
	const char *cwd;
	const char *stdin_data;  /* or NULL: stdin is /dev/null */
	size_t stdin_len;
	uint64_t timeout_ms;
	/* out: */
	int exit_code, signal, timed_out;
	struct capture out, err;
};

/* Runs e->argv to its end; e->out/err (initialized by the caller) get its
 * output. 0 once it ran (whatever its status), -errno if it could not run. */
int mcp_api_exec(const struct sandbox_addr *a, struct mcp_exec *e, char *err, size_t errlen);

/* Reads at most max bytes of path from offset into *data (malloc'd,
 * NUL-terminated: *len bytes). *size: the file's size; *mode, *uid, *gid
 * from its stat (any may be NULL). */
int mcp_api_read(const struct sandbox_addr *a, const char *path, uint64_t offset, size_t max, char **data,
		 size_t *len, uint64_t *size, int64_t *mode, int64_t *uid, int64_t *gid, char *err, size_t errlen);

/* Writes data[0..len) as path, atomically (the API's write). mode < 0:
 * 0644; uid/gid < 0: not given (the guest's root then owns a new file). */
int mcp_api_write(const struct sandbox_addr *a, const char *path, const void *data, size_t len, int64_t mode,
		  int parents, int64_t uid, int64_t gid, char *err, size_t errlen);

/* A one-shot request (its first RESULT into out). */
int mcp_api_call(const struct sandbox_addr *a, int version, const char *fields, char *out, size_t outlen, char *err,
		 size_t errlen);

struct mcp_logs {
	const char *sel;            /* id (digits) or tag */
	uint64_t offset[2];         /* stdout, stderr: where to start */
	/* out: */
	struct capture out[2];      /* the caller initializes them */
	uint64_t next[2];           /* the offsets to resume from */
	uint64_t skipped;
	int exited, exit_code, signal, timed_out;
	char state[16];
	int64_t id, pid;
};
/* The kept output of a detached process from the offsets (API v2 logs,
 * without follow). */
int mcp_api_logs(const struct sandbox_addr *a, struct mcp_logs *l, char *err, size_t errlen);

#endif
