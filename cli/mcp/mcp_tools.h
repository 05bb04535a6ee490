/* The sandbox's tools as MCP serves them (docs/mcp.md): each a name, a
 * JSON Schema for its arguments (checked by cli/mcp/jsonschema.c before the
 * tool runs), the token scope it needs, and what it does through the
 * sandbox API (cli/mcp/mcp_api.c). */
#ifndef CLI_MCP_TOOLS_H
#define CLI_MCP_TOOLS_H

#include <stddef.h>

struct json;
struct sandbox_addr;

/* What a tool answers: content text blocks (the first is the main one:
 * output, a file's text; the second a note on truncation), and a small
 * structuredContent object (JSON text, or ""). is_error: the tool ran and
 * failed (MCP: reported in the result, for the model to read, not as a
 * protocol error). */
struct mcp_result {
	char *text;            /* malloc'd, or NULL */
	size_t len;
	char note[512];
	char structured[1024];
	int is_error;
};
void mcp_result_free(struct mcp_result *r);

struct mcp_tool {
	const char *name, *title, *description;
	const char *schema; /* the inputSchema, JSON text */
	unsigned scope;     /* TOKEN_SCOPE_* it needs */
	int read_only, destructive;
	int (*run)(const struct sandbox_addr *a, const struct json *args, struct mcp_result *res);
};

extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_nr_tools;
const struct mcp_tool *mcp_tool_find(const char *name);

/* Sets res to a failure of the tool (is_error) with a message. Returns 0. */
int mcp_tool_fail(struct mcp_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
