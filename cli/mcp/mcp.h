/* The sandbox as an MCP server (Model Context Protocol, revision
 * 2025-06-18; docs/mcp.md): JSON-RPC 2.0 messages in, the sandbox's tools
 * (cli/mcp/mcp_tools.c) out, over stdio (`vmm mcp NAME`) or streamable HTTP
 * (`vmm mcp NAME --listen ADDR:PORT`, cli/mcp/mcp_http.c). */
#ifndef CLI_MCP_H
#define CLI_MCP_H

#include <stddef.h>
#include <stdio.h>

#include "cli/sandbox/sandbox.h"
#include "cli/mcp/mcp_tokens.h"

#define MCP_PROTOCOL_LATEST "2025-06-18"
#define MCP_MESSAGE_MAX (8u << 20) /* one message, either way */

struct mcp_server {
	struct sandbox_addr addr; /* the sandbox API, with its own (boot) token */
	const char *name;         /* the sandbox as named on the command line */
	unsigned scopes;          /* TOKEN_SCOPE_* the caller may use (stdio: all) */
	struct token_drives drives; /* and its drive scopes (cli/mcp/mcp_drive.c) */
	int initialized;          /* initialize answered */
	char protocol[16];        /* the revision agreed on */
};

/* What mcp_handle answers. */
struct mcp_reply {
	char *text;   /* a JSON-RPC response (malloc'd), or NULL: none (a notification) */
	size_t len;
	int forbidden; /* refused for the token's scopes (HTTP: 403) */
	int initialize; /* it answered initialize (HTTP: a new session) */
};

/* Handles one message text. 0, or -ENOMEM (nothing to send). */
int mcp_handle(struct mcp_server *s, const char *text, size_t len, struct mcp_reply *out);
/* Is `v` a revision this server speaks? */
int mcp_protocol_known(const char *v);

/* Newline-delimited JSON-RPC on in/out until in ends. 0 or -errno. */
int mcp_serve_stdio(struct mcp_server *s, int in, int out);

struct mcp_http_opts {
	const char *listen;      /* "127.0.0.1:8080" or "[::1]:8080" */
	const char *sandbox_dir; /* the sandbox's folder: its tokens file */
	int allow_remote;        /* --allow-remote: a non-loopback address is allowed */
	const char *const *origins; /* Origins allowed besides loopback ones (NULL-terminated), or NULL */
	unsigned max_conns;      /* connections served at once (0: MCP_HTTP_MAX_CONNS); past it, 503 */
	FILE *notice;            /* the "serving ... on http://ADDR/mcp" line scripts wait for (the
				    verb's stderr), or NULL */
	unsigned idle_timeout_s; /* a connection with no request started that long is closed (0: default) */
	unsigned request_timeout_s; /* a request (headers and body) not whole that long after its
				       first byte gets 408 and the connection is closed; also the
				       bound on writing one response (0: default) */
};
#define MCP_HTTP_MAX_CONNS 32
#define MCP_HTTP_IDLE_S 30
#define MCP_HTTP_LINGER 16        /* refused connections drained at once (cli/mcp/mcp_http.c) */
#define MCP_HTTP_LINGER_MS 2000  /* and for at most this long each */
#define MCP_HTTP_REQUEST_S 30
/* Serves streamable HTTP until SIGINT/SIGTERM, each connection on a
 * thread of its own. 0 or -errno. */
int mcp_serve_http(struct mcp_server *s, const struct mcp_http_opts *o);

/* ---- mcp_drive.c: drive scopes ---- */
struct mcp_tool;
struct json;
struct drive_files;
/* Which drive a path is on, from the sandbox's mounts ("NAME:DIR[:ro],...",
 * its record) and the token's drive scopes: 0 with the drive's name and
 * the path relative to its folder in rel; -EACCES (why says) when the path
 * is on no drive the token names, has a "..", or (write) the drive is
 * read-only for the token or in the sandbox. Pure. */
int mcp_drive_match(const char *mounts, const struct token_drives *td, const char *path, int write, char *name,
		    size_t nlen, char *rel, size_t rlen, char *why, size_t wlen);
/* For tool t, which the token's scope bits do not allow: args' path on a
 * drive the token names (mcp_drive_match on the sandbox's record), the
 * drive opened for serving it on the host (f; drive_files_close it). 0;
 * -EACCES: out of the token's scope (HTTP 403); another -errno: the drive
 * cannot be served (why says). */
int mcp_drive_target(const struct mcp_server *s, const struct mcp_tool *t, const struct json *args,
		     struct drive_files *f, char *rel, size_t rlen, char *why, size_t wlen);

/* The rest of the subsystem's interface. */
#include "cli/mcp/mcp_tokens.h"

#endif
