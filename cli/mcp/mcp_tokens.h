/* Scoped access tokens for a sandbox's host-side endpoints (the MCP HTTP
 * transport, docs/mcp.md): `vmm token create|ls|rm`. A token is
 * "vmt_" ID "_" SECRET (12 + 64 hex digits); the sandbox's folder keeps
 * only its SHA-256, with its expiry and scopes, in the file `tokens`
 * (0600, replaced whole). These tokens never reach the guest: the
 * endpoint that checks one talks to guest-init with the sandbox's own boot
 * token, which stays private to the VMM, the CLI and guest-init. */
#ifndef CLI_TOKENS_H
#define CLI_TOKENS_H

#include <stddef.h>

enum token_scope {
	TOKEN_SCOPE_EXEC = 1u << 0,        /* exec */
	TOKEN_SCOPE_FILES_READ = 1u << 1,  /* read_file, list_dir, search_files */
	TOKEN_SCOPE_FILES_WRITE = 1u << 2, /* write_file, edit_file */
	TOKEN_SCOPE_PROCESSES = 1u << 3,   /* start_process, process_output, kill_process */
	TOKEN_SCOPE_MCP = 1u << 4,         /* the MCP endpoint at all */
	TOKEN_SCOPE_ALL = (1u << 5) - 1,
};

/* Drive scopes (docs/mcp.md, "Access tokens"): "drive:NAME" (read-write)
 * or "drive:NAME:ro" lets the file tools work on the sandbox's mount of
 * drive NAME only, served on the host beneath the drive's folder. Names,
 * not bits: up to TOKEN_DRIVES_MAX per token, each a drive name
 * (cli/drive/drive.h, at most 35 characters). */
#define TOKEN_DRIVES_MAX 8
#define TOKEN_DRIVE_NAME_MAX 35
struct token_drive {
	char name[TOKEN_DRIVE_NAME_MAX + 1];
	int ro;
};
struct token_drives {
	unsigned n;
	struct token_drive d[TOKEN_DRIVES_MAX];
};
/* The longest scope list a token can have, as text. */
#define TOKEN_SCOPES_TEXT_MAX (64 + TOKEN_DRIVES_MAX * (TOKEN_DRIVE_NAME_MAX + 10))

#define TOKEN_ID_LEN 12
#define TOKEN_SECRET_LEN 64
#define TOKEN_LEN (4 + TOKEN_ID_LEN + 1 + TOKEN_SECRET_LEN) /* "vmt_" ID "_" SECRET */
#define TOKEN_MAX_PER_SANDBOX 256
#define TOKEN_MAX_TTL_S (366LL * 24 * 3600)

struct token_rec {
	char id[TOKEN_ID_LEN + 1];
	unsigned char hash[32]; /* SHA-256 of the whole token text */
	long long created, expires; /* Unix seconds; expires 0: never */
	unsigned scopes;
	struct token_drives drives;
};

/* "exec,files:read,drive:NAME[:ro],..." (or "all": every bit, no drive)
 * into a mask and drive scopes (drives NULL: none accepted). At least one
 * scope; a drive at most once. 0 or -EINVAL (why says which is wrong). */
int token_parse_scopes(const char *s, unsigned *mask, struct token_drives *drives, char *why, size_t whylen);
/* The mask and drives (may be NULL) as "exec,files:read,...,drive:NAME:ro". */
void token_scopes_str(unsigned mask, const struct token_drives *drives, char *buf, size_t len);
/* The drive scope naming NAME, or NULL. */
const struct token_drive *token_drive_find(const struct token_drives *drives, const char *name);
/* The scope a name stands for (one of the above), 0 if none. */
unsigned token_scope_bit(const char *name);

void token_hash(const char *token, unsigned char out[32]);
/* A new random token (tok: at least TOKEN_LEN + 1 bytes) and its record.
 * ttl_s 0: never expires. 0 or -errno. */
int token_generate(char *tok, struct token_rec *rec, long long now, long long ttl_s, unsigned scopes,
		   const struct token_drives *drives);

/* One line of the file, and back. 0 or -EINVAL. */
int token_parse_line(const char *line, size_t len, struct token_rec *rec);
int token_format_line(const struct token_rec *rec, char *buf, size_t len);

enum token_verdict {
	TOKEN_OK,
	TOKEN_UNKNOWN, /* malformed, never issued, or revoked */
	TOKEN_EXPIRED,
	TOKEN_OUT_OF_SCOPE,
};
/* Checks `token` against recs[0..n) at time `now` for every scope in
 * `need` (drive scopes are the caller's: cli/mcp/mcp_drive.c). The hash is compared in constant time. *which (if not NULL) is
 * the matching record whatever the verdict but UNKNOWN. */
enum token_verdict token_check(const struct token_rec *recs, size_t n, const char *token, long long now,
			       unsigned need, const struct token_rec **which);
const char *token_verdict_str(enum token_verdict v);

/* The sandbox folder's `tokens` file. load: *recs malloc'd (free it), a
 * missing file is no tokens. 0 or -errno. */
int token_load(const char *dir, struct token_rec **recs, size_t *n);
/* Replaces the file (a temporary, fsync'd, renamed over it; 0600). */
int token_save(const char *dir, const struct token_rec *recs, size_t n);
/* Holds the folder's lock (flock on it) across a load-modify-save. The
 * fd to pass to token_unlock, or -errno. */
int token_lock(const char *dir);
void token_unlock(int fd);
/* A new token in dir's file, under its lock (the expired ones dropped):
 * token_generate's, appended and saved. 0, -ENOSPC (TOKEN_MAX_PER_SANDBOX
 * live ones) or -errno. */
int token_add(const char *dir, long long now, long long ttl_s, unsigned scopes, const struct token_drives *drives,
	      char *tok, struct token_rec *rec);

#endif
