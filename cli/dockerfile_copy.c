/* COPY, ADD and .dockerignore for the Dockerfile builder
 * (dockerfile_build.h): sources from the context or a stage, resolved
 * inside their root (openat2 RESOLVE_IN_ROOT), copied into the step's tree
 * with *at() calls that never follow a link out of it, hashed for the
 * step's cache key. */
#define _GNU_SOURCE
#include "dockerfile_priv.h"
#include "oci_unpack.h"

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
};

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
	if (c->filter && rel[0] && dfb_ignored((const char *const *)c->b->ignore.v, c->b->ignore.n, rel)) {
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
		int in = openat(sfd, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

		if (in < 0)
			return -errno;
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


/* COPY/ADD: one pass hashes (apply 0), the next copies (apply 1). */
int dfb_copy_step(struct builder *b, struct stage *s, const struct df_instr *in, char **words, unsigned nw,
		     int apply, struct oci_hash *h)
{
	const char *from = df_flag(in, "from"), *chown = df_flag(in, "chown"), *chm = df_flag(in, "chmod");
	char dest[PATH_MAX], srcroot[PATH_MAX];
	struct copy_opts c = { .b = b, .h = h, .apply = apply };
	int srcfd = -1, rootfd = -1, dfd = -1, r = 0, dest_dir;
	struct strv srcs = { 0 };
	unsigned i;

	if (in->op == DF_ADD && from)
		return dfb_berr(b, in, -EINVAL, "ADD has no --from (COPY --from does)");
	for (i = 0; i < in->nflags; i++) {
		const char *f = in->flags[i] + 2;

		if (strncmp(f, "from=", 5) && strncmp(f, "chown=", 6) && strncmp(f, "chmod=", 6))
			return dfb_berr(b, in, -EINVAL, "%s is not supported by vmm image build (only --from, --chown, --chmod)",
				    in->flags[i]);
	}
	if (chm) {
		char *end;
		unsigned long m = strtoul(chm, &end, 8);

		if (!chm[0] || *end || m > 07777)
			return dfb_berr(b, in, -EINVAL, "--chmod=%s: an octal mode (symbolic modes are not supported)", chm);
		c.chmod = 1;
		c.mode = (mode_t)m;
	}
	if (from) {
		int k = dfb_stage_by_name(b, from, b->stage_of[in - b->df->ins]);

		if (k >= 0) {
			snprintf(srcroot, sizeof(srcroot), "%s", b->st[k].src);
		} else {
			struct stage tmp;

			memset(&tmp, 0, sizeof(tmp));
			if ((r = dfb_base_tree(b, from, in, &tmp, NULL)))
				return r;
			snprintf(srcroot, sizeof(srcroot), "%s", tmp.src);
		}
	} else {
		snprintf(srcroot, sizeof(srcroot), "%s", b->o->context);
		c.filter = 1;
	}
	for (i = 0; i < nw; i++)
		if (in->op == DF_ADD && (strstr(words[i], "://") || !strncmp(words[i], "git@", 4)) && i + 1 < nw)
			return dfb_berr(b, in, -EINVAL, "ADD of a URL (%s) is not supported: download it in a RUN step",
				    words[i]);
	if ((srcfd = open(srcroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return dfb_berr(b, in, -errno, "%s: %s", srcroot, strerror(errno));
	for (i = 0; i + 1 < nw; i++) {
		char clean[PATH_MAX];
		unsigned before = srcs.n;

		dfb_clean_path(words[i], clean, sizeof(clean));
		if ((r = has_glob(clean) ? glob_sources(srcfd, "", clean + 1, &srcs) : dfb_sv_push(&srcs, clean + 1)))
			goto out;
		if (srcs.n == before) {
			r = dfb_berr(b, in, -ENOENT, "no source files were specified by '%s'", words[i]);
			goto out;
		}
	}
	dfb_join_workdir(s->workdir, words[nw - 1], dest, sizeof(dest));
	{
		size_t n = strlen(words[nw - 1]);

		dest_dir = srcs.n > 1 || (n && words[nw - 1][n - 1] == '/') || !strcmp(words[nw - 1], ".");
	}
	if (srcs.n > 1 && !(strlen(words[nw - 1]) && words[nw - 1][strlen(words[nw - 1]) - 1] == '/'))
		dest_dir = 1; /* Docker wants a trailing '/', buildah does not: take it either way */
	if (apply) {
		if ((rootfd = open(s->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			r = dfb_berr(b, in, -errno, "%s: %s", s->src, strerror(errno));
			goto out;
		}
		if (chown && (r = parse_chown(b, in, chown, rootfd, &c)))
			goto out;
		if (!dest_dir) {
			int e = dfb_open_in_root(rootfd, dest, O_RDONLY | O_DIRECTORY);

			if (e >= 0) {
				dest_dir = 1;
				close(e);
			}
		}
	} else if (chown) {
		dfb_h_str(h, chown);
	}
	for (i = 0; i < srcs.n; i++) {
		const char *rel = srcs.v[i], *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
		char target[PATH_MAX * 2], parent[PATH_MAX * 2], *slash;
		struct stat st;
		int sfd;

		if (c.filter && rel[0] && dfb_ignored((const char *const *)b->ignore.v, b->ignore.n, rel)) {
			r = dfb_berr(b, in, -ENOENT, "%s: excluded by .dockerignore", rel);
			goto out;
		}
		sfd = dfb_open_in_root(srcfd, rel, O_PATH);
		if (sfd < 0 || fstat(sfd, &st) < 0) {
			r = dfb_berr(b, in, -ENOENT, "%s: not found in the %s", rel, from ? "stage" : "build context");
			if (sfd >= 0)
				close(sfd);
			goto out;
		}
		if (in->op == DF_ADD && S_ISREG(st.st_mode)) {
			int fd = dfb_open_in_root(srcfd, rel, O_RDONLY), kind = fd < 0 ? 0 : is_archive(fd);

			if (kind == 2) {
				close(fd);
				close(sfd);
				r = dfb_berr(b, in, -EINVAL, "%s: xz and bzip2 archives are not supported (gzip, zstd, tar are)",
					 rel);
				goto out;
			}
			if (kind == 1) {
				/* a local archive: its entries go into dest */
				if (h) {
					char dg[OCI_DIGEST_MAX];

					oci_digest_fd(fd, dg);
					dfb_h_str(h, rel);
					dfb_h_str(h, dg);
				}
				if (apply) {
					struct unpack_stats us;
					char uerr[256];
					int ddir = oci_root_mkdirs(rootfd, dest, 0755);

					lseek(fd, 0, SEEK_SET);
					r = ddir < 0 ? ddir : oci_unpack_fd(ddir, fd, NULL, NULL, &us, uerr, sizeof(uerr));
					if (ddir >= 0)
						close(ddir);
					if (r) {
						close(fd);
						close(sfd);
						r = dfb_berr(b, in, r, "%s: %s", rel, ddir < 0 ? strerror(-ddir) : uerr);
						goto out;
					}
				}
				close(fd);
				close(sfd);
				continue;
			}
			if (fd >= 0)
				close(fd);
		}
		if (S_ISDIR(st.st_mode)) {
			snprintf(target, sizeof(target), "%s", dest);
		} else if (dest_dir) {
			snprintf(target, sizeof(target), "%s%s%s", dest, strcmp(dest, "/") ? "/" : "", base);
		} else {
			snprintf(target, sizeof(target), "%s", dest);
		}
		snprintf(parent, sizeof(parent), "%s", target);
		slash = strrchr(parent, '/');
		if (apply) {
			const char *name = S_ISDIR(st.st_mode) ? "." : strrchr(target, '/') + 1;

			*(slash == parent ? slash + 1 : slash) = '\0';
			if (S_ISDIR(st.st_mode))
				snprintf(parent, sizeof(parent), "%s", target);
			int existed = S_ISDIR(st.st_mode) ? dfb_open_in_root(rootfd, parent, O_PATH) : -1;

			if (existed >= 0)
				close(existed);
			if ((dfd = oci_root_mkdirs(rootfd, parent, 0755)) < 0) {
				close(sfd);
				r = dfb_berr(b, in, dfd, "%s: %s", parent, strerror(-dfd));
				dfd = -1;
				goto out;
			}
			if (S_ISDIR(st.st_mode)) {
				int sd = dfb_open_in_root(srcfd, rel, O_RDONLY | O_DIRECTORY);

				r = sd < 0 ? sd : copy_dir_contents(sd, dfd, rel, &c);
				if (sd >= 0)
					close(sd);
				/* a directory this COPY made takes --chown (as buildah and
				 * BuildKit do), not --chmod */
				if (!r && existed < 0 && c.chown && fchown(dfd, c.uid, c.gid) < 0)
					r = -errno;
			} else {
				int fd = dfb_open_in_root(srcfd, rel, O_RDONLY);

				r = fd < 0 ? fd : copy_reg(fd, &st, dfd, name, &c);
				if (fd >= 0)
					close(fd);
			}
			close(dfd);
			dfd = -1;
		} else {
			if (S_ISDIR(st.st_mode)) {
				int sd = dfb_open_in_root(srcfd, rel, O_RDONLY | O_DIRECTORY);

				r = sd < 0 ? sd : copy_dir_contents(sd, -1, rel, &c);
				if (sd >= 0)
					close(sd);
			} else {
				int fd = dfb_open_in_root(srcfd, rel, O_RDONLY);
				char mode[16];

				snprintf(mode, sizeof(mode), "%o", (unsigned)st.st_mode);
				dfb_h_str(h, rel);
				dfb_h_str(h, mode);
				r = fd < 0 ? fd : copy_reg(fd, &st, -1, NULL, &c);
				if (fd >= 0)
					close(fd);
			}
			dfb_h_str(h, target);
		}
		close(sfd);
		if (r) {
			r = dfb_berr(b, in, r, "%s: %s", rel, strerror(-r));
			goto out;
		}
	}
out:
	if (srcfd >= 0)
		close(srcfd);
	if (rootfd >= 0)
		close(rootfd);
	dfb_sv_free(&srcs);
	return r;
}

