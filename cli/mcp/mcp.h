/* The sandbox as an MCP server (Model Context Protocol, revision
 * 2025-06-18; docs/mcp.md): JSON-RPC 2.0 messages in, the sandbox's tools
 * (cli/mcp/mcp_tools.c) out, over stdio (`vmm mcp NAME`) or streamable HTTP
 * (`vmm mcp NAME --listen ADDR:PORT`, cli/mcp/mcp_http.c). */
#ifndef CLI_MCP_H
#define CLI_MCP_H

#include <stddef.h>

#include "cli/sandbox/sandbox.h"

#define MCP_PROTOCOL_LATEST "2025-06-18"
#define MCP_MESSAGE_MAX (8u << 20) /* one message, either way */

struct mcp_server {
	struct sandbox_addr addr; /* the sandbox API, with its own (boot) token */
	const char *name;         /* the sandbox as named on the command line */
	unsigned scopes;          /* TOKEN_SCOPE_* the caller may use (stdio: all) */
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

/* The rest of the subsystem's interface. */
#include "cli/mcp/mcp_tokens.h"

#endif
