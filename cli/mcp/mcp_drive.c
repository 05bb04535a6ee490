/* Drive scopes at the MCP endpoint (cli/mcp/mcp.h; docs/mcp.md, "Access
 * tokens"): a token with "drive:NAME[:ro]" but without files:read or
 * files:write may still use read_file, list_dir (and, read-write,
 * write_file, edit_file) on paths inside the sandbox's mount of drive
 * NAME. Which mount that is comes from the sandbox's record on the host
 * (its "drives": "NAME:GUESTDIR[:ro],...", written by vmm run), never from
 * the guest; the call is then served on the host beneath the drive's
 * folder (cli/drive/drive_files.c), so the guest is not asked anything. */
#include "cli/mcp/mcp.h"
#include "cli/mcp/mcp_tools.h"
#include "cli/drive/drive.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* path made canonical in out ("/a/b": no empty or "." component); a ".."
 * is refused: lexically it could leave a mount whose host side differs. */
static int canonical(const char *path, char *out, size_t len)
{
	size_t k = 0;

	if (path[0] != '/')
		return -EINVAL;
	out[0] = '\0';
	while (*path) {
		size_t n;

		path += strspn(path, "/");
		n = strcspn(path, "/");
		if (!n || (n == 1 && path[0] == '.')) {
			path += n;
			continue;
		}
		if (n == 2 && path[0] == '.' && path[1] == '.')
			return -EINVAL;
		if (k + n + 2 > len)
			return -ENAMETOOLONG;
		out[k++] = '/';
		memcpy(out + k, path, n);
		k += n;
		out[k] = '\0';
		path += n;
	}
	if (!k)
		snprintf(out, len, "/");
	return 0;
}

/* Is canonical path p at or under dir (canonical too)? The rest (no
 * leading '/') in *rest. */
static int under(const char *p, const char *dir, const char **rest)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/') {
		*rest = p + 1;
		return 1;
	}
	if (strncmp(p, dir, n) || (p[n] && p[n] != '/'))
		return 0;
	*rest = p[n] ? p + n + 1 : p + n;
	return 1;
}

/* The mount of mounts ("NAME:DIR[:ro],...") holding path p, the deepest
 * one if they nest. 1 with its name, dir and ro filled, or 0. */
static int find_mount(const char *mounts, const char *p, char *name, size_t nlen, char *dir, size_t dlen, int *ro,
		      const char **rest)
{
	size_t best = 0;
	const char *e;

	for (e = mounts; *e; e += strcspn(e, ","), e += *e == ',') {
		char ent[512], canon[256], *c1, *c2;
		size_t n = strcspn(e, ",");
		const char *r;

		if (n >= sizeof(ent))
			continue;
		memcpy(ent, e, n);
		ent[n] = '\0';
		if (!(c1 = strchr(ent, ':')))
			continue;
		*c1++ = '\0';
		c2 = strchr(c1, ':');
		if (c2)
			*c2++ = '\0';
		if (canonical(c1, canon, sizeof(canon)) || !under(p, canon, &r) || strlen(canon) < best)
			continue;
		best = strlen(canon);
		snprintf(name, nlen, "%s", ent);
		snprintf(dir, dlen, "%s", canon);
		*ro = c2 && !strcmp(c2, "ro");
		*rest = r;
	}
	return best > 0;
}

int mcp_drive_match(const char *mounts, const struct token_drives *td, const char *path, int write, char *name,
		    size_t nlen, char *rel, size_t rlen, char *why, size_t wlen)
{
	char p[PATH_MAX], dir[256];
	const struct token_drive *scope;
	const char *rest = "";
	int mount_ro = 0;

	if (canonical(path, p, sizeof(p))) {
		snprintf(why, wlen, "%s: a drive scope takes an absolute path without \"..\"", path);
		return -EACCES;
	}
	if (!find_mount(mounts, p, name, nlen, dir, sizeof(dir), &mount_ro, &rest)) {
		snprintf(why, wlen, "%s is on no drive this sandbox mounts", path);
		return -EACCES;
	}
	if (!(scope = token_drive_find(td, name))) {
		snprintf(why, wlen, "%s is on drive %s (at %s), which the token's scopes do not name", path, name, dir);
		return -EACCES;
	}
	if (write && (scope->ro || mount_ro)) {
		snprintf(why, wlen, "drive %s is read-only %s", name,
			 scope->ro ? "for this token (drive:NAME:ro)" : "in this sandbox (mounted :ro)");
		return -EACCES;
	}
	if (snprintf(rel, rlen, "%s", rest) >= (int)rlen) {
		snprintf(why, wlen, "%s: too long", path);
		return -EACCES;
	}
	return 0;
}

int mcp_drive_target(const struct mcp_server *s, const struct mcp_tool *t, const struct json *args,
		     struct drive_files *f, char *rel, size_t rlen, char *why, size_t wlen)
{
	struct sandbox_status *st = malloc(sizeof(*st));
	struct drive *d = malloc(sizeof(*d));
	char name[DRIVE_NAME_MAX + 1];
	const char *path = "";
	int r;

	f->root = -1;
	if (!st || !d) {
		r = -ENOMEM;
		goto out;
	}
	json_get_str(args, "path", &path);
	if ((r = sandbox_status(s->name, st))) {
		snprintf(why, wlen, "the sandbox's record cannot be read: %s", strerror(-r));
		goto out;
	}
	r = mcp_drive_match(st->drives, &s->drives, path, t->drive_ok == MCP_DRIVE_WRITE, name, sizeof(name), rel, rlen,
			    why, wlen);
	if (r)
		goto out;
	if ((r = drive_load(name, d)) || (r = drive_files_open(d, f)))
		snprintf(why, wlen, "drive %s: %s", name, r == -ENOENT ? "no such drive (removed?)" : strerror(-r));
out:
	free(st);
	free(d);
	return r;
}
