/* COPY, ADD and .dockerignore for the Dockerfile builder
 * (dockerfile_build.h): sources from the context or a stage, resolved
 * inside their root (openat2 RESOLVE_IN_ROOT), copied into the step's tree
 * with *at() calls that never follow a link out of it, hashed for the
 * step's cache key. */
#include "cli/dockerfile/dockerfile_priv.h"
#include "cli/images/images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- .dockerignore ---------------------------------------------------- */

int dfb_match(const char *pattern, const char *path)
{
	return fnmatch(pattern, path, FNM_PATHNAME | FNM_PERIOD * 0) == 0;
}

/* pattern and path as '/'-separated components; "**" takes any number. */
static int match_parts(const char *pat, const char *path)
{
	const char *pe = strchr(pat, '/'), *se;
	char pp[256], sp[256];
	size_t pn = pe ? (size_t)(pe - pat) : strlen(pat);

	if (pn == 2 && pat[0] == '*' && pat[1] == '*') {
		const char *rest = pe ? pe + 1 : "";

		if (!*rest)
			return 1;
		for (const char *s = path;;) {
			if (match_parts(rest, s))
				return 1;
			if (!(s = strchr(s, '/')))
				return 0;
			s++;
		}
	}
	if (!*path)
		return 0;
	se = strchr(path, '/');
	if (pn >= sizeof(pp) || (size_t)(se ? se - path : (ptrdiff_t)strlen(path)) >= sizeof(sp))
		return 0;
	memcpy(pp, pat, pn);
	pp[pn] = '\0';
	snprintf(sp, sizeof(sp), "%.*s", (int)(se ? se - path : (ptrdiff_t)strlen(path)), path);
	if (fnmatch(pp, sp, 0))
		return 0;
	if (!pe)
		return !se;
	if (!se)
		return 0;
	return match_parts(pe + 1, se + 1);
}

int dfb_ignored(const char *const *patterns, unsigned n, const char *rel)
{
	char prefix[PATH_MAX];
	int out = 0;

	for (unsigned i = 0; i < n; i++) {
		const char *p = patterns[i];
		int neg = p[0] == '!';
		size_t k;
		int m = 0;

		p += neg;
		/* rel or one of its parents */
		snprintf(prefix, sizeof(prefix), "%s", rel);
		for (k = strlen(prefix);;) {
			if (match_parts(p, prefix)) {
				m = 1;
				break;
			}
			while (k && prefix[k - 1] != '/')
				k--;
			if (!k)
				break;
			prefix[--k] = '\0';
		}
		if (m)
			out = !neg;
	}
	return out;
}

int dfb_load_ignore(struct builder *b)
{
	char path[PATH_MAX + 32], *text = NULL, *line, *save = NULL;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "%s/.dockerignore", b->o->context);
	r = oci_read_file(AT_FDCWD, path, 1 << 20, &text, &len);
	if (r == -ENOENT)
		return 0;
	if (r)
		return dfb_berr(b, NULL, r, ".dockerignore: %s", strerror(-r));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char clean[PATH_MAX], pat[PATH_MAX + 2];
		size_t n;
		int neg;

		while (*line == ' ' || *line == '\t')
			line++;
		n = strlen(line);
		while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (!n || line[0] == '#')
			continue;
		neg = line[0] == '!';
		dfb_clean_path(line + neg, clean, sizeof(clean));
		if (!strcmp(clean, "/"))
			continue;
		snprintf(pat, sizeof(pat), "%s%s", neg ? "!" : "", clean + 1);
		b->ignore_neg |= neg;
		if (dfb_sv_push(&b->ignore, pat)) {
			free(text);
			return -ENOMEM;
		}
	}
	free(text);
	return 0;
}

/* ---- COPY and ADD ------------------------------------------------------ */

struct copy_opts {
	int chown; /* set owners (else 0:0) */
	uid_t uid;
	gid_t gid;
	int chmod;
	mode_t mode;
	int filter;          /* apply .dockerignore (context sources) */
	struct builder *b;
	struct oci_hash *h;  /* content hash (the cache key), or NULL */
	int apply;           /* copy (else only hash) */
	/* A source directory's context path as the instruction wrote it and
	 * as it resolves (through a link): .dockerignore sees both. */
	const char *written, *resolved;
};

/* An entry of a copied directory (rel: its context path under the
 * resolved source) that .dockerignore excludes, by either name. */
static int walk_excluded(const struct copy_opts *c, const char *rel)
{
	const char *const *ig = (const char *const *)c->b->ignore.v;
	char alias[PATH_MAX * 2];
	size_t n;

	if (!c->filter || !rel[0])
		return 0;
	if (dfb_ignored(ig, c->b->ignore.n, rel))
		return 1;
	if (!c->written || !c->resolved || !strcmp(c->written, c->resolved))
		return 0;
	n = strlen(c->resolved);
	if (strncmp(rel, c->resolved, n))
		return 0;
	if (!n)
		snprintf(alias, sizeof(alias), "%s%s%s", c->written, c->written[0] ? "/" : "", rel);
	else
		snprintf(alias, sizeof(alias), "%s%s", c->written, rel + n);
	return alias[0] && dfb_ignored(ig, c->b->ignore.n, alias);
}

static int set_meta(int dfd, const char *name, const struct stat *s, const struct copy_opts *c)
{
	struct timespec t[2] = { s->st_atim, s->st_mtim };
	uid_t u = c->chown ? c->uid : 0;
	gid_t g = c->chown ? c->gid : 0;

	if (fchownat(dfd, name, u, g, AT_SYMLINK_NOFOLLOW) < 0 && errno != EPERM)
		return -errno;
	if (!S_ISLNK(s->st_mode)) {
		mode_t m = c->chmod ? c->mode : (s->st_mode & 07777);

		if (fchmodat(dfd, name, m, 0) < 0)
			return -errno;
	}
	utimensat(dfd, name, t, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int copy_entry(int sfd, const char *sname, int dfd, const char *dname, const char *rel,
		      const struct copy_opts *c);

/* A regular file's data (hashed, and copied when c->apply). */
static int copy_reg(int in, const struct stat *s, int dfd, const char *dname, const struct copy_opts *c)
{
	struct stat ds;
	char buf[65536];
	int out = -1, r = 0;
	ssize_t n;

	if (c->apply) {
		if (fstatat(dfd, dname, &ds, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(ds.st_mode) &&
		    unlinkat(dfd, dname, S_ISDIR(ds.st_mode) ? AT_REMOVEDIR : 0) < 0)
			return -errno;
		out = openat(dfd, dname, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0)
			return -errno;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (c->h)
			oci_hash_update(c->h, buf, (size_t)n);
		if (out >= 0 && write(out, buf, (size_t)n) != n) {
			r = -EIO;
			break;
		}
	}
	if (n < 0)
		r = -errno;
	if (out >= 0)
		close(out);
	if (!r && c->apply)
		r = set_meta(dfd, dname, s, c);
	return r;
}

static int copy_dir_contents(int sdir, int ddir, const char *rel, const struct copy_opts *c)
{
	int fd = dup(sdir), r = 0;
	struct dirent **names = NULL;
	DIR *d;
	int n, i;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	/* sorted, so the content hash does not depend on the directory order */
	n = scandirat(sdir, ".", &names, NULL, alphasort);
	closedir(d);
	if (n < 0)
		return -errno;
	for (i = 0; i < n; i++) {
		char sub[PATH_MAX];
		const char *e = names[i]->d_name;

		if (!r && strcmp(e, ".") && strcmp(e, "..")) {
			snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", e);
			r = copy_entry(sdir, e, ddir, e, sub, c);
		}
		free(names[i]);
	}
	free(names);
	return r;
}

static int copy_entry(int sfd, const char *sname, int dfd, const char *dname, const char *rel,
		      const struct copy_opts *c)
{
	struct stat s, ds;
	int r = 0;

	if (fstatat(sfd, sname, &s, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (walk_excluded(c, rel)) {
		if (!S_ISDIR(s.st_mode) || !c->b->ignore_neg)
			return 0;
	}
	if (c->h) {
		char hdr[96];

		snprintf(hdr, sizeof(hdr), "%o", (unsigned)s.st_mode);
		dfb_h_str(c->h, rel);
		dfb_h_str(c->h, hdr);
	}
	if (S_ISDIR(s.st_mode)) {
		int sd = openat(sfd, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), dd = -1;

		if (sd < 0)
			return -errno;
		if (c->apply) {
			if (fstatat(dfd, dname, &ds, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(ds.st_mode))
				unlinkat(dfd, dname, 0);
			if (mkdirat(dfd, dname, 0755) < 0 && errno != EEXIST) {
				close(sd);
				return -errno;
			}
			if ((dd = openat(dfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
				close(sd);
				return -errno;
			}
		}
		r = copy_dir_contents(sd, dd, rel, c);
		close(sd);
		if (dd >= 0)
			close(dd);
		if (!r && c->apply)
			r = set_meta(dfd, dname, &s, c);
		return r;
	}
	if (S_ISLNK(s.st_mode)) {
		char t[PATH_MAX];
		ssize_t n = readlinkat(sfd, sname, t, sizeof(t) - 1);

		if (n < 0)
			return -errno;
		t[n] = '\0';
		if (c->h)
			dfb_h_str(c->h, t);
		if (!c->apply)
			return 0;
		if (fstatat(dfd, dname, &ds, AT_SYMLINK_NOFOLLOW) == 0 &&
		    unlinkat(dfd, dname, S_ISDIR(ds.st_mode) ? AT_REMOVEDIR : 0) < 0)
			return -errno;
		if (symlinkat(t, dfd, dname) < 0)
			return -errno;
		return set_meta(dfd, dname, &s, c);
	}
	if (S_ISREG(s.st_mode)) {
		/* non-blocking and checked again: a FIFO put in its place
		 * meanwhile must not block the build */
		int in = openat(sfd, sname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat now;

		if (in < 0)
			return -errno;
		if (fstat(in, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != s.st_ino || now.st_dev != s.st_dev) {
			close(in);
			return -ESTALE;
		}
		r = copy_reg(in, &s, dfd, dname, c);
		close(in);
		return r;
	}
	return 0; /* sockets, devices, FIFOs in a context are left out */
}

/* user[:group] as numbers or names in the tree's /etc/passwd, /etc/group. */
static int lookup_id(int rootfd, const char *file, const char *name, unsigned *id, unsigned *gid)
{
	char *text = NULL, *line, *save = NULL, *end;
	size_t len, n = strlen(name);
	int fd, r = -ENOENT;

	*id = (unsigned)strtoul(name, &end, 10);
	if (name[0] && !*end)
		return 0;
	if ((fd = dfb_open_in_root(rootfd, file, O_RDONLY)) < 0)
		return fd;
	{
		size_t cap = 4 << 20;
		ssize_t k;

		len = 0;
		if (!(text = malloc(cap + 1))) {
			close(fd);
			return -ENOMEM;
		}
		while (len < cap && (k = read(fd, text + len, cap - len)) > 0)
			len += (size_t)k;
		text[len] = '\0';
		close(fd);
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, name, n) || line[n] != ':')
			continue;
		/* name:x:id:gid:... */
		{
			char *f = strchr(line + n + 1, ':');

			if (!f)
				break;
			*id = (unsigned)strtoul(f + 1, &end, 10);
			if (gid && *end == ':')
				*gid = (unsigned)strtoul(end + 1, NULL, 10);
			r = 0;
		}
		break;
	}
	free(text);
	return r;
}

static int parse_chown(struct builder *b, const struct df_instr *in, const char *spec, int rootfd,
		       struct copy_opts *c)
{
	char user[256], *colon;
	unsigned gid = (unsigned)-1, u;

	snprintf(user, sizeof(user), "%s", spec);
	colon = strchr(user, ':');
	if (colon)
		*colon++ = '\0';
	if (lookup_id(rootfd, "/etc/passwd", user, &u, NULL))
		return dfb_berr(b, in, -EINVAL, "--chown=%s: no user '%s' in the image's /etc/passwd", spec, user);
	if (colon && lookup_id(rootfd, "/etc/group", colon, &gid, NULL))
		return dfb_berr(b, in, -EINVAL, "--chown=%s: no group '%s' in the image's /etc/group", spec, colon);
	c->chown = 1;
	c->uid = u;
	c->gid = colon ? gid : u; /* Docker: no group, the same number as the user */
	return 0;
}

static int is_archive(int fd)
{
	unsigned char m[512];
	ssize_t n = pread(fd, m, sizeof(m), 0);

	if (n >= 2 && m[0] == 0x1f && m[1] == 0x8b)
		return 1;
	if (n >= 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd)
		return 1;
	if (n >= 6 && (!memcmp(m, "\xfd" "7zXZ", 5) || !memcmp(m, "BZh", 3)))
		return 2;
	if (n == 512 && !memcmp(m + 257, "ustar", 5))
		return 1;
	return 0;
}

static int has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* The sources of a COPY/ADD that match one pattern (context-relative,
 * cleaned, without the leading '/'). */
static int glob_sources(int rootfd, const char *dir, const char *pat, struct strv *out)
{
	const char *slash = strchr(pat, '/');
	char part[256], sub[PATH_MAX];
	struct dirent **names = NULL;
	int fd, n, i, r = 0;

	snprintf(part, sizeof(part), "%.*s", (int)(slash ? slash - pat : (ptrdiff_t)strlen(pat)), pat);
	if (!has_glob(part)) {
		snprintf(sub, sizeof(sub), "%s%s%s", dir, dir[0] ? "/" : "", part);
		if (!slash)
			return dfb_sv_push(out, sub);
		return glob_sources(rootfd, sub, slash + 1, out);
	}
	if ((fd = dfb_open_in_root(rootfd, dir, O_RDONLY | O_DIRECTORY)) < 0)
		return 0;
	n = scandirat(fd, ".", &names, NULL, alphasort);
	close(fd);
	for (i = 0; i < n; i++) {
		const char *e = names[i]->d_name;

		if (!r && strcmp(e, ".") && strcmp(e, "..") && !fnmatch(part, e, FNM_PERIOD * 0)) {
			snprintf(sub, sizeof(sub), "%s%s%s", dir, dir[0] ? "/" : "", e);
			r = slash ? glob_sources(rootfd, sub, slash + 1, out) : dfb_sv_push(out, sub);
		}
		free(names[i]);
	}
	free(names);
	return r;
}


/* One COPY/ADD while it runs (dfb_copy_step). */
struct copy_step {
	struct builder *b;
	const struct df_instr *in;
	const char *from;        /* --from, or NULL: the build context */
	struct copy_opts c;
	int srcfd;               /* where the sources are */
	int rootfd;              /* the step's tree (apply), else -1 */
	char srcreal[PATH_MAX];  /* srcfd's path: where a source resolves to */
	char dest[PATH_MAX];
	int dest_dir;
};

static int step_err(struct copy_step *cs, int r, const char *what, const char *rel)
{
	return dfb_berr(cs->b, cs->in, r, "%s: %s", rel, what ? what : strerror(-r));
}

/* --from, --chown, --chmod only; --chmod octal. */
static int copy_flags(struct copy_step *cs)
{
	const struct df_instr *in = cs->in;
	const char *chm = df_flag(in, "chmod");

	if (in->op == DF_ADD && cs->from)
		return dfb_berr(cs->b, in, -EINVAL, "ADD has no --from (COPY --from does)");
	for (unsigned i = 0; i < in->nflags; i++) {
		const char *f = in->flags[i] + 2;

		if (strncmp(f, "from=", 5) && strncmp(f, "chown=", 6) && strncmp(f, "chmod=", 6))
			return dfb_berr(cs->b, in, -EINVAL,
					"%s is not supported by vmm image build (only --from, --chown, --chmod)", in->flags[i]);
	}
	if (chm) {
		char *end;
		unsigned long m = strtoul(chm, &end, 8);

		if (!chm[0] || *end || m > 07777)
			return dfb_berr(cs->b, in, -EINVAL, "--chmod=%s: an octal mode (symbolic modes are not supported)",
					chm);
		cs->c.chmod = 1;
		cs->c.mode = (mode_t)m;
	}
	return 0;
}

/* The path an open file descriptor stands for (/proc/self/fd). */
static int fd_path(int fd, char *out, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if ((n = readlink(link, out, len - 1)) < 0)
		return -errno;
	if ((size_t)n >= len - 1)
		return -ENAMETOOLONG;
	out[n] = '\0';
	return 0;
}

/* Where the sources are: an earlier stage's tree (build_plan refused the
 * stage itself and later ones), an image's, or the build context (then
 * .dockerignore applies). */
static int source_root(struct copy_step *cs)
{
	struct builder *b = cs->b;
	char root[PATH_MAX];
	int r;

	if (cs->from) {
		int k = dfb_stage_by_name(b, cs->from, b->stage_of[cs->in - b->df->ins]);

		if (k >= 0) {
			snprintf(root, sizeof(root), "%s", b->st[k].src);
		} else {
			struct stage img;

			memset(&img, 0, sizeof(img));
			if ((r = dfb_base_tree(b, cs->from, cs->in, &img, NULL)))
				return r;
			snprintf(root, sizeof(root), "%s", img.src);
		}
	} else {
		snprintf(root, sizeof(root), "%s", b->o->context);
		cs->c.filter = 1;
	}
	if ((cs->srcfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return dfb_berr(b, cs->in, -errno, "%s: %s", root, strerror(errno));
	if ((r = fd_path(cs->srcfd, cs->srcreal, sizeof(cs->srcreal))))
		return dfb_berr(b, cs->in, r, "%s: %s", root, strerror(-r));
	return 0;
}

/* The sources the words name (globs expanded), context-relative. */
static int list_sources(struct copy_step *cs, char **words, unsigned nw, struct strv *srcs)
{
	int r;

	for (unsigned i = 0; i + 1 < nw; i++)
		if (cs->in->op == DF_ADD && (strstr(words[i], "://") || !strncmp(words[i], "git@", 4)))
			return dfb_berr(cs->b, cs->in, -EINVAL,
					"ADD of a URL (%s) is not supported: download it in a RUN step", words[i]);
	for (unsigned i = 0; i + 1 < nw; i++) {
		char clean[PATH_MAX];
		unsigned before = srcs->n;

		dfb_clean_path(words[i], clean, sizeof(clean));
		if ((r = has_glob(clean) ? glob_sources(cs->srcfd, "", clean + 1, srcs) : dfb_sv_push(srcs, clean + 1)))
			return r;
		if (srcs->n == before)
			return dfb_berr(cs->b, cs->in, -ENOENT, "no source files were specified by '%s'", words[i]);
	}
	return 0;
}

/* The destination, and whether it is a directory: several sources, a
 * trailing '/', "." or (apply) a directory already there. apply: the
 * step's tree opened, --chown read from its /etc/passwd. */
static int destination(struct copy_step *cs, const struct stage *s, const char *last, unsigned nsrcs)
{
	const char *chown = df_flag(cs->in, "chown");
	size_t n = strlen(last);
	int r;

	dfb_join_workdir(s->workdir, last, cs->dest, sizeof(cs->dest));
	/* Docker wants a trailing '/' with several sources, buildah does
	 * not: take it either way */
	cs->dest_dir = nsrcs > 1 || (n && last[n - 1] == '/') || !strcmp(last, ".");
	if (!cs->c.apply) {
		if (chown)
			dfb_h_str(cs->c.h, chown);
		return 0;
	}
	if ((cs->rootfd = open(s->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return dfb_berr(cs->b, cs->in, -errno, "%s: %s", s->src, strerror(errno));
	if (chown && (r = parse_chown(cs->b, cs->in, chown, cs->rootfd, &cs->c)))
		return r;
	if (!cs->dest_dir) {
		int e = dfb_open_in_root(cs->rootfd, cs->dest, O_RDONLY | O_DIRECTORY);

		if (e >= 0) {
			cs->dest_dir = 1;
			close(e);
		}
	}
	return 0;
}

/* A context path .dockerignore excludes. */
static int excluded(const struct copy_step *cs, const char *rel)
{
	const struct strv *ig = &cs->b->ignore;

	return cs->c.filter && rel[0] && dfb_ignored((const char *const *)ig->v, ig->n, rel);
}

/* A source by its name, resolved inside its root (a link in the context
 * cannot lead out of it): *sfd (O_PATH) and *st; resolved its path in the
 * root. Refused before any read: what .dockerignore excludes (by either
 * name) and what is neither a regular file nor a directory (a FIFO would
 * block the build forever, a device would be read). */
static int open_source(struct copy_step *cs, const char *rel, int *sfd, struct stat *st, char *resolved,
		       size_t len)
{
	char path[PATH_MAX];
	size_t n = strlen(cs->srcreal);
	int r;

	if (excluded(cs, rel))
		return dfb_berr(cs->b, cs->in, -ENOENT, "%s: excluded by .dockerignore", rel);
	*sfd = dfb_open_in_root(cs->srcfd, rel, O_PATH);
	if (*sfd < 0 || fstat(*sfd, st) < 0)
		return dfb_berr(cs->b, cs->in, -ENOENT, "%s: not found in the %s", rel,
				cs->from ? "stage" : "build context");
	if ((r = fd_path(*sfd, path, sizeof(path))))
		return step_err(cs, r, NULL, rel);
	if (!strcmp(cs->srcreal, "/") && path[0] == '/')
		snprintf(resolved, len, "%s", path + 1);
	else if (!strncmp(path, cs->srcreal, n) && (path[n] == '/' || !path[n]))
		snprintf(resolved, len, "%s", path + n + (path[n] == '/'));
	else
		return step_err(cs, -EXDEV, cs->from ? "resolves outside the stage" : "resolves outside the build context",
				rel);
	if (excluded(cs, resolved))
		return dfb_berr(cs->b, cs->in, -ENOENT, "%s: a link to %s, which .dockerignore excludes", rel, resolved);
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
		return step_err(cs, -EINVAL,
				S_ISFIFO(st->st_mode)   ? "a FIFO: COPY and ADD take regular files, directories and links"
				: S_ISSOCK(st->st_mode) ? "a socket: COPY and ADD take regular files, directories and links"
							: "a device: COPY and ADD take regular files, directories and links",
				rel);
	return 0;
}

/* The regular file open_source found, opened to read: non-blocking, and
 * the same file (not one put in its place meanwhile). */
static int open_regular(struct copy_step *cs, const char *rel, const struct stat *st)
{
	struct stat now;
	int fd = dfb_open_in_root(cs->srcfd, rel, O_RDONLY | O_NONBLOCK);

	if (fd < 0)
		return fd;
	if (fstat(fd, &now) < 0 || !S_ISREG(now.st_mode) || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* ADD of a local archive (gzip, zstd, tar): its entries go into dest.
 * 1 if it was one (done), 0 if not, <0 on an error. */
static int add_archive(struct copy_step *cs, const char *rel, const struct stat *st)
{
	struct unpack_stats us;
	char uerr[256], dg[OCI_DIGEST_MAX];
	int fd = open_regular(cs, rel, st), kind = fd < 0 ? 0 : is_archive(fd), ddir, r = 0;

	if (kind == 2)
		r = step_err(cs, -EINVAL, "xz and bzip2 archives are not supported (gzip, zstd, tar are)", rel);
	if (kind != 1) {
		if (fd >= 0)
			close(fd);
		return r;
	}
	if (cs->c.h) {
		oci_digest_fd(fd, dg);
		dfb_h_str(cs->c.h, rel);
		dfb_h_str(cs->c.h, dg);
	}
	if (cs->c.apply) {
		ddir = oci_root_mkdirs(cs->rootfd, cs->dest, 0755);
		lseek(fd, 0, SEEK_SET);
		r = ddir < 0 ? ddir : oci_unpack_fd(ddir, fd, NULL, NULL, &us, uerr, sizeof(uerr));
		if (ddir >= 0)
			close(ddir);
		if (r)
			r = step_err(cs, r, ddir < 0 ? strerror(-ddir) : uerr, rel);
	}
	close(fd);
	return r ? r : 1;
}

/* apply: a source into the tree (a directory's contents into target, a
 * file as target); its parent directories made. */
static int put_source(struct copy_step *cs, const char *rel, const char *resolved, const struct stat *st,
		      const char *target)
{
	char parent[PATH_MAX * 2], *slash;
	const char *name;
	int dfd, existed = -1, r;

	snprintf(parent, sizeof(parent), "%s", target);
	slash = strrchr(parent, '/');
	*(slash == parent ? slash + 1 : slash) = '\0';
	if (S_ISDIR(st->st_mode)) {
		snprintf(parent, sizeof(parent), "%s", target);
		existed = dfb_open_in_root(cs->rootfd, parent, O_PATH);
		if (existed >= 0)
			close(existed);
	}
	if ((dfd = oci_root_mkdirs(cs->rootfd, parent, 0755)) < 0)
		return step_err(cs, dfd, NULL, parent);
	if (S_ISDIR(st->st_mode)) {
		int sd = dfb_open_in_root(cs->srcfd, rel, O_RDONLY | O_DIRECTORY);

		r = sd < 0 ? sd : copy_dir_contents(sd, dfd, resolved, &cs->c);
		if (sd >= 0)
			close(sd);
		/* a directory this COPY made takes --chown (as buildah and
		 * BuildKit do), not --chmod */
		if (!r && existed < 0 && cs->c.chown && fchown(dfd, cs->c.uid, cs->c.gid) < 0)
			r = -errno;
	} else {
		int fd = open_regular(cs, rel, st);

		name = strrchr(target, '/') + 1;
		r = fd < 0 ? fd : copy_reg(fd, st, dfd, name, &cs->c);
		if (fd >= 0)
			close(fd);
	}
	close(dfd);
	return r ? step_err(cs, r, NULL, rel) : 0;
}

/* hashing: what put_source would copy, and where. */
static int hash_source(struct copy_step *cs, const char *rel, const char *resolved, const struct stat *st,
		       const char *target)
{
	int r;

	if (S_ISDIR(st->st_mode)) {
		int sd = dfb_open_in_root(cs->srcfd, rel, O_RDONLY | O_DIRECTORY);

		r = sd < 0 ? sd : copy_dir_contents(sd, -1, resolved, &cs->c);
		if (sd >= 0)
			close(sd);
	} else {
		int fd = open_regular(cs, rel, st);
		char mode[16];

		snprintf(mode, sizeof(mode), "%o", (unsigned)st->st_mode);
		dfb_h_str(cs->c.h, rel);
		dfb_h_str(cs->c.h, mode);
		r = fd < 0 ? fd : copy_reg(fd, st, -1, NULL, &cs->c);
		if (fd >= 0)
			close(fd);
	}
	dfb_h_str(cs->c.h, target);
	return r ? step_err(cs, r, NULL, rel) : 0;
}

/* One source: checked, then copied (or hashed). */
static int copy_one(struct copy_step *cs, const char *rel)
{
	const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	char target[PATH_MAX * 2], resolved[PATH_MAX];
	struct stat st;
	int sfd = -1, r;

	r = open_source(cs, rel, &sfd, &st, resolved, sizeof(resolved));
	if (sfd >= 0)
		close(sfd);
	if (r)
		return r;
	if (cs->in->op == DF_ADD && S_ISREG(st.st_mode) && (r = add_archive(cs, rel, &st)))
		return r < 0 ? r : 0;
	if (S_ISDIR(st.st_mode) || !cs->dest_dir)
		snprintf(target, sizeof(target), "%s", cs->dest);
	else
		snprintf(target, sizeof(target), "%s%s%s", cs->dest, strcmp(cs->dest, "/") ? "/" : "", base);
	/* inside a directory reached through a link, .dockerignore sees
	 * both names (copy_entry) */
	cs->c.written = rel;
	cs->c.resolved = resolved;
	r = cs->c.apply ? put_source(cs, rel, resolved, &st, target) : hash_source(cs, rel, resolved, &st, target);
	cs->c.written = cs->c.resolved = NULL;
	return r;
}

/* COPY/ADD words (sources..., dest): one pass hashes (apply 0), the next
 * copies (apply 1). */
int dfb_copy_step(struct builder *b, struct stage *s, const struct df_instr *in, char **words, unsigned nw,
		  int apply, struct oci_hash *h)
{
	struct copy_step cs = { .b = b, .in = in, .from = df_flag(in, "from"), .srcfd = -1, .rootfd = -1 };
	struct strv srcs = { 0 };
	int r;

	cs.c = (struct copy_opts){ .b = b, .h = h, .apply = apply };
	if ((r = copy_flags(&cs)) || (r = source_root(&cs)) || (r = list_sources(&cs, words, nw, &srcs)) ||
	    (r = destination(&cs, s, words[nw - 1], srcs.n)))
		goto out;
	for (unsigned i = 0; i < srcs.n && !r; i++)
		r = copy_one(&cs, srcs.v[i]);
out:
	if (cs.srcfd >= 0)
		close(cs.srcfd);
	if (cs.rootfd >= 0)
		close(cs.rootfd);
	dfb_sv_free(&srcs);
	return r;
}
