/* Scoped access tokens (cli/mcp/mcp_tokens.h). */
#include "cli/mcp/mcp_tokens.h"
#include "cli/util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* One line of the file: id, hash, two times, scopes. */
#define TOKEN_LINE_MAX (TOKEN_ID_LEN + 66 + 2 * 22 + TOKEN_SCOPES_TEXT_MAX + 8)

static const struct {
	const char *name;
	unsigned bit;
} scope_names[] = {
	{ "exec", TOKEN_SCOPE_EXEC },
	{ "files:read", TOKEN_SCOPE_FILES_READ },
	{ "files:write", TOKEN_SCOPE_FILES_WRITE },
	{ "processes", TOKEN_SCOPE_PROCESSES },
	{ "mcp", TOKEN_SCOPE_MCP },
};
#define NR_SCOPES (sizeof(scope_names) / sizeof(scope_names[0]))
_Static_assert((1u << NR_SCOPES) - 1 == TOKEN_SCOPE_ALL, "a name for every scope");

unsigned token_scope_bit(const char *name)
{
	size_t i;

	for (i = 0; i < NR_SCOPES; i++)
		if (!strcmp(name, scope_names[i].name))
			return scope_names[i].bit;
	return 0;
}

const struct token_drive *token_drive_find(const struct token_drives *drives, const char *name)
{
	unsigned i;

	for (i = 0; drives && i < drives->n; i++)
		if (!strcmp(drives->d[i].name, name))
			return &drives->d[i];
	return NULL;
}

/* "drive:NAME" or "drive:NAME:ro" (name: the text after "drive:") into drives. */
static int parse_drive_scope(const char *name, struct token_drives *drives, char *why, size_t whylen)
{
	struct token_drive td = { .ro = 0 };
	size_t n = strlen(name), i;

	if (n > 3 && !strcmp(name + n - 3, ":ro")) {
		td.ro = 1;
		n -= 3;
	}
	/* a drive name (cli/drive/drive.h): 1..35 of [A-Za-z0-9_.-], not
	 * starting with '.' or '-' */
	if (!n || n > TOKEN_DRIVE_NAME_MAX || name[0] == '.' || name[0] == '-') {
		snprintf(why, whylen, "drive scope \"drive:%s\": drive:NAME or drive:NAME:ro", name);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-')) {
			snprintf(why, whylen, "drive scope \"drive:%s\": not a drive name", name);
			return -EINVAL;
		}
	}
	memcpy(td.name, name, n);
	if (token_drive_find(drives, td.name)) {
		snprintf(why, whylen, "drive %s named twice", td.name);
		return -EINVAL;
	}
	if (drives->n == TOKEN_DRIVES_MAX) {
		snprintf(why, whylen, "more than %d drive scopes", TOKEN_DRIVES_MAX);
		return -EINVAL;
	}
	drives->d[drives->n++] = td;
	return 0;
}

int token_parse_scopes(const char *s, unsigned *mask, struct token_drives *drives, char *why, size_t whylen)
{
	struct token_drives dv = { .n = 0 };
	char name[64];
	unsigned m = 0;

	while (*s) {
		size_t n = strcspn(s, ",");
		unsigned bit;

		if (n == 0 || n >= sizeof(name)) {
			snprintf(why, whylen, "an empty or overlong scope name");
			return -EINVAL;
		}
		memcpy(name, s, n);
		name[n] = '\0';
		if (drives && !strncmp(name, "drive:", 6)) {
			if (parse_drive_scope(name + 6, &dv, why, whylen))
				return -EINVAL;
		} else {
			bit = !strcmp(name, "all") ? TOKEN_SCOPE_ALL : token_scope_bit(name);
			if (!bit) {
				snprintf(why, whylen, "unknown scope \"%s\" (exec, files:read, files:write, processes, mcp, "
						      "all%s)", name, drives ? ", drive:NAME[:ro]" : "");
				return -EINVAL;
			}
			m |= bit;
		}
		s += n;
		if (*s == ',' && !*++s) {
			snprintf(why, whylen, "a trailing comma");
			return -EINVAL;
		}
	}
	if (!m && !dv.n) {
		snprintf(why, whylen, "no scope given");
		return -EINVAL;
	}
	*mask = m;
	if (drives)
		*drives = dv;
	return 0;
}

void token_scopes_str(unsigned mask, const struct token_drives *drives, char *buf, size_t len)
{
	size_t i, n = 0;

	if (len)
		buf[0] = '\0';
	for (i = 0; i < NR_SCOPES; i++)
		if (mask & scope_names[i].bit && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", scope_names[i].name);
	for (i = 0; drives && i < drives->n && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%sdrive:%s%s", n ? "," : "", drives->d[i].name,
				      drives->d[i].ro ? ":ro" : "");
}

void token_hash(const char *token, unsigned char out[32])
{
	SHA256((const unsigned char *)token, strlen(token), out);
}

static void hex(const unsigned char *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int unhex(const char *s, size_t n, unsigned char *out)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned v = 0;

		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];

			v <<= 4;
			if (c >= '0' && c <= '9')
				v |= (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				v |= (unsigned)(c - 'a' + 10);
			else
				return -1;
		}
		out[i] = (unsigned char)v;
	}
	return 0;
}

static int all_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int token_generate(char *tok, struct token_rec *rec, long long now, long long ttl_s, unsigned scopes,
		   const struct token_drives *drives)
{
	unsigned char rnd[TOKEN_ID_LEN / 2 + TOKEN_SECRET_LEN / 2];
	char idhex[TOKEN_ID_LEN + 1], sechex[TOKEN_SECRET_LEN + 1];

	if (ttl_s < 0 || ttl_s > TOKEN_MAX_TTL_S || (!scopes && !(drives && drives->n)) ||
	    scopes & ~(unsigned)TOKEN_SCOPE_ALL || (drives && drives->n > TOKEN_DRIVES_MAX))
		return -EINVAL;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	hex(rnd, TOKEN_ID_LEN / 2, idhex);
	hex(rnd + TOKEN_ID_LEN / 2, TOKEN_SECRET_LEN / 2, sechex);
	snprintf(tok, TOKEN_LEN + 1, "vmt_%s_%s", idhex, sechex);
	OPENSSL_cleanse(rnd, sizeof(rnd));
	OPENSSL_cleanse(sechex, sizeof(sechex));
	memset(rec, 0, sizeof(*rec));
	memcpy(rec->id, idhex, sizeof(rec->id));
	token_hash(tok, rec->hash);
	rec->created = now;
	rec->expires = ttl_s ? now + ttl_s : 0;
	rec->scopes = scopes;
	if (drives)
		rec->drives = *drives;
	return 0;
}

int token_format_line(const struct token_rec *rec, char *buf, size_t len)
{
	char h[65], sc[TOKEN_SCOPES_TEXT_MAX];
	int n;

	hex(rec->hash, sizeof(rec->hash), h);
	token_scopes_str(rec->scopes, &rec->drives, sc, sizeof(sc));
	n = snprintf(buf, len, "%s %s %lld %lld %s\n", rec->id, h, rec->created, rec->expires, sc);
	return n < 0 || (size_t)n >= len ? -EINVAL : 0;
}

int token_parse_line(const char *line, size_t len, struct token_rec *rec)
{
	char buf[TOKEN_LINE_MAX], id[TOKEN_ID_LEN + 2], h[66], sc[TOKEN_SCOPES_TEXT_MAX + 2], why[128];

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, line, len);
	buf[len] = '\0';
	memset(rec, 0, sizeof(*rec));
	_Static_assert(TOKEN_SCOPES_TEXT_MAX + 1 == 425, "the width below");
	if (sscanf(buf, "%13s %65s %lld %lld %425s", id, h, &rec->created, &rec->expires, sc) != 5 ||
	    strlen(id) != TOKEN_ID_LEN || !all_hex(id, TOKEN_ID_LEN) || strlen(h) != 64 ||
	    unhex(h, 32, rec->hash) || rec->created < 0 || rec->expires < 0 ||
	    strlen(sc) > TOKEN_SCOPES_TEXT_MAX || token_parse_scopes(sc, &rec->scopes, &rec->drives, why, sizeof(why)))
		return -EINVAL;
	memcpy(rec->id, id, TOKEN_ID_LEN + 1);
	return 0;
}

enum token_verdict token_check(const struct token_rec *recs, size_t n, const char *token, long long now,
			       unsigned need, const struct token_rec **which)
{
	unsigned char h[32];
	const struct token_rec *r = NULL;
	size_t i;

	if (which)
		*which = NULL;
	if (!token || strlen(token) != TOKEN_LEN || strncmp(token, "vmt_", 4) || token[4 + TOKEN_ID_LEN] != '_' ||
	    !all_hex(token + 4, TOKEN_ID_LEN) || !all_hex(token + 5 + TOKEN_ID_LEN, TOKEN_SECRET_LEN))
		return TOKEN_UNKNOWN;
	for (i = 0; i < n && !r; i++)
		if (!memcmp(recs[i].id, token + 4, TOKEN_ID_LEN))
			r = &recs[i];
	token_hash(token, h);
	if (!r || CRYPTO_memcmp(h, r->hash, sizeof(h)))
		return TOKEN_UNKNOWN;
	if (which)
		*which = r;
	if (r->expires && now >= r->expires)
		return TOKEN_EXPIRED;
	if ((r->scopes & need) != need)
		return TOKEN_OUT_OF_SCOPE;
	return TOKEN_OK;
}

const char *token_verdict_str(enum token_verdict v)
{
	switch (v) {
	case TOKEN_OK:
		return "ok";
	case TOKEN_UNKNOWN:
		return "unknown or revoked token";
	case TOKEN_EXPIRED:
		return "the token has expired";
	case TOKEN_OUT_OF_SCOPE:
		return "the token's scopes do not allow this";
	}
	return "?";
}

/* ---- the file ---------------------------------------------------------------- */

#define TOKENS_FILE "tokens"
#define TOKENS_FILE_MAX (TOKEN_MAX_PER_SANDBOX * TOKEN_LINE_MAX + 256)

int token_load(const char *dir, struct token_rec **recs, size_t *n)
{
	char path[4096], *buf = NULL, *p, *end;
	struct token_rec *out = NULL;
	size_t len = 0, cnt = 0;
	int fd, r = 0;

	*recs = NULL;
	*n = 0;
	if (snprintf(path, sizeof(path), "%s/" TOKENS_FILE, dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = cli_open_regular(AT_FDCWD, path);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	buf = malloc(TOKENS_FILE_MAX + 1);
	out = calloc(TOKEN_MAX_PER_SANDBOX, sizeof(*out));
	if (!buf || !out) {
		r = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t k = read(fd, buf + len, TOKENS_FILE_MAX + 1 - len);

		if (k < 0) {
			r = -errno;
			goto out;
		}
		if (k == 0)
			break;
		len += (size_t)k;
		if (len > TOKENS_FILE_MAX) {
			r = -EFBIG;
			goto out;
		}
	}
	for (p = buf, end = buf + len; p < end; p++) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t l = eol ? (size_t)(eol - p) : (size_t)(end - p);

		if (l && p[0] != '#') {
			if (cnt == TOKEN_MAX_PER_SANDBOX || token_parse_line(p, l, &out[cnt])) {
				r = -EINVAL; /* a damaged file is refused whole, never half-read */
				goto out;
			}
			cnt++;
		}
		p += l;
	}
	*recs = out;
	*n = cnt;
	out = NULL;
out:
	close(fd);
	free(buf);
	free(out);
	return r;
}

int token_save(const char *dir, const struct token_rec *recs, size_t n)
{
	char path[4096], tmp[4096], line[TOKEN_LINE_MAX];
	int fd, r = 0;
	size_t i;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/" TOKENS_FILE, dir) >= (int)sizeof(path) ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, TOKENS_FILE, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		r = -errno;
		close(fd);
		unlink(tmp);
		return r;
	}
	fprintf(f, "# vmm access tokens (vmm token): id sha256 created expires scopes\n");
	for (i = 0; i < n && !r; i++) {
		r = token_format_line(&recs[i], line, sizeof(line));
		if (!r)
			fputs(line, f);
	}
	if (fflush(f) || fsync(fd) < 0)
		r = r ? r : -errno;
	if (fclose(f) && !r)
		r = -EIO;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

int token_lock(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

void token_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}

int token_add(const char *dir, long long now, long long ttl_s, unsigned scopes, const struct token_drives *drives,
	      char *tok, struct token_rec *rec)
{
	struct token_rec *recs = NULL, *grown;
	size_t n = 0, k, live = 0;
	int lk = token_lock(dir), r;

	if (lk < 0)
		return lk;
	r = token_load(dir, &recs, &n);
	if (r)
		goto out;
	/* expired tokens are dropped as we go */
	for (k = 0; k < n; k++)
		if (!recs[k].expires || recs[k].expires > now)
			recs[live++] = recs[k];
	n = live;
	r = n >= TOKEN_MAX_PER_SANDBOX ? -ENOSPC : token_generate(tok, rec, now, ttl_s, scopes, drives);
	if (r)
		goto out;
	grown = realloc(recs, (n + 1) * sizeof(*recs));
	if (!grown) {
		r = -ENOMEM;
		goto out;
	}
	recs = grown;
	recs[n++] = *rec;
	r = token_save(dir, recs, n);
out:
	token_unlock(lk);
	free(recs);
	return r;
}
