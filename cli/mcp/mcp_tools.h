/* The sandbox's tools as MCP serves them (docs/mcp.md): each a name, a
 * JSON Schema for its arguments (checked by cli/mcp/jsonschema.c before the
 * tool runs), the token scope it needs, and what it does through the
 * sandbox API (cli/mcp/mcp_api.c). */
#ifndef CLI_MCP_TOOLS_H
#define CLI_MCP_TOOLS_H

#include <stddef.h>

struct json;
struct sandbox_addr;
struct drive_files;

/* Where a tool works: through the sandbox API (drive NULL), or, for a
 * call a drive scope allows (cli/mcp/mcp_drive.c), on the host beneath the
 * drive's folder at rel (the tool's path relative to the drive). */
struct mcp_call {
	const struct sandbox_addr *a;
	struct drive_files *drive;
	const char *rel;
};

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
	int drive_ok;       /* a drive scope allows it on the drive (MCP_DRIVE_*), or 0 */
	int (*run)(const struct mcp_call *c, const struct json *args, struct mcp_result *res);
};

#define MCP_DRIVE_READ 1  /* drive:NAME or drive:NAME:ro */
#define MCP_DRIVE_WRITE 2 /* drive:NAME only */

extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_nr_tools;
const struct mcp_tool *mcp_tool_find(const char *name);

/* Sets res to a failure of the tool (is_error) with a message. Returns 0. */
int mcp_tool_fail(struct mcp_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
