/* A validator for the subset of JSON Schema the MCP tools' input schemas
 * use (cli/mcp/mcp_tools.c): "type" (a name or an array of names: object,
 * array, string, integer, number, boolean, null), "properties",
 * "required", "additionalProperties": false, "minimum"/"maximum",
 * "minLength"/"maxLength" (in bytes), "minItems"/"maxItems", "items" and
 * "enum" (of strings or numbers). Any other keyword is ignored, so a schema
 * may carry "description" and "default" for the client to read. Pure: the
 * unit tests and the server use the same code. */
#ifndef CLI_JSONSCHEMA_H
#define CLI_JSONSCHEMA_H

#include <stddef.h>

struct json;

/* 0 if value satisfies schema; -1 with a message naming the first
 * offending member ("timeout_s: must be at most 600") in why. `where` is
 * the name given to the value itself ("" for the top: its members are
 * then named bare). */
int jsonschema_check(const struct json *schema, const struct json *value, const char *where, char *why,
		     size_t whylen);

#endif
