/* The tar stream writer and the safe extractor (vmm/wire/tar.h). */
#include "vmm/wire/tar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ustar header fields (POSIX.1-2001 pax, "ustar Interchange Format") */
#define H_NAME 0      /* 100 */
#define H_MODE 100    /* 8 */
#define H_UID 108     /* 8 */
#define H_GID 116     /* 8 */
#define H_SIZE 124    /* 12 */
#define H_MTIME 136   /* 12 */
#define H_CHKSUM 148  /* 8 */
#define H_TYPE 156    /* 1 */
#define H_LINK 157    /* 100 */
#define H_MAGIC 257   /* 6: "ustar\0" (POSIX) or "ustar " (GNU, with version " \0") */
#define H_VERSION 263 /* 2 */
#define H_UNAME 265   /* 32 */
#define H_GNAME 297   /* 32 */
#define H_PREFIX 345  /* 155 */

static void failf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void failf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* ---- pure helpers ----------------------------------------------------- */

static unsigned sum_unsigned(const unsigned char *h, long *ssum)
{
	unsigned u = 0;
	long s = 0;
	size_t i;

	for (i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = i >= H_CHKSUM && i < H_CHKSUM + 8 ? ' ' : h[i];

		u += c;
		s += (signed char)c;
	}
	*ssum = s;
	return u;
}

int tar_number(const unsigned char *f, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		/* base-256 (GNU, star): 0x80 then a big-endian number; 0xff
		 * (negative) is refused */
		if (f[0] != 0x80)
			return -EINVAL;
		for (i = 1; i < n; i++) {
			if (v >> 55)
				return -EINVAL;
			v = v << 8 | f[i];
		}
		if (v > INT64_MAX)
			return -EINVAL;
		*out = v;
		return 0;
	}
	while (i < n && f[i] == ' ')
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++)
		v = v << 3 | (uint64_t)(f[i] - '0');
	if (i < n && f[i] != '\0' && f[i] != ' ')
		return -EINVAL;
	*out = v;
	return 0;
}

int tar_checksum_ok(const unsigned char *h)
{
	uint64_t want;
	long s;
	unsigned u = sum_unsigned(h, &s);

	if (tar_number(h + H_CHKSUM, 8, &want))
		return 0;
	return want == u || (long)want == s;
}

/* name -> out: its components joined by '/', "." and empty ones dropped. */
static int name_norm(const char *name, char *out, size_t outlen, unsigned max_depth, unsigned *depth)
{
	const char *p = name;
	size_t o = 0;
	unsigned d = 0;

	if (*name == '/')
		return -EINVAL;
	if (strlen(name) >= PATH_MAX)
		return -ENAMETOOLONG;
	while (*p) {
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (n && !(n == 1 && p[0] == '.')) {
			if (n > NAME_MAX)
				return -ENAMETOOLONG;
			if (++d > max_depth)
				return -ELOOP;
			if (o + n + 2 > outlen)
				return -ENAMETOOLONG;
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p = *e ? e + 1 : e;
	}
	out[o] = '\0';
	*depth = d;
	return 0;
}

int tar_name_check(const char *name, unsigned max_depth, unsigned *depth)
{
	char buf[PATH_MAX];

	return name_norm(name, buf, sizeof(buf), max_depth, depth);
}

/* ---- writer ------------------------------------------------------------ */

#define W_STAGE 65536

struct wbuf {
	unsigned char b[W_STAGE];
	size_t n;
};

static int w_emit(struct tar_w *w, struct wbuf *s, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len) {
		size_t k = W_STAGE - s->n < len ? W_STAGE - s->n : len;
		int r;

		memcpy(s->b + s->n, p, k);
		s->n += k;
		p += k;
		len -= k;
		if (s->n == W_STAGE) {
			r = w->out(w->ctx, s->b, s->n);
			s->n = 0;
			if (r) {
				failf(w->err, sizeof(w->err), "the archive could not be sent: %s", strerror(-r));
				return r;
			}
		}
	}
	return 0;
}

static int w_flush(struct tar_w *w, struct wbuf *s)
{
	int r = s->n ? w->out(w->ctx, s->b, s->n) : 0;

	s->n = 0;
	if (r)
		failf(w->err, sizeof(w->err), "the archive could not be sent: %s", strerror(-r));
	return r;
}

/* v in an octal field of n bytes (n - 1 digits and a NUL); -1 if it does not fit */
static int octal(unsigned char *f, size_t n, uint64_t v)
{
	size_t i = n - 1;

	if (n - 1 < 22 && v >> (3 * (n - 1)))
		return -1;
	f[i] = '\0';
	while (i--) {
		f[i] = (unsigned char)('0' + (v & 7));
		v >>= 3;
	}
	return 0;
}

static size_t pax_record(char *buf, size_t cap, size_t at, const char *key, const char *val)
{
	size_t kv = strlen(key) + strlen(val) + 3, len = kv + 1, d;

	/* the length counts its own digits */
	for (;;) {
		char tmp[24];

		d = (size_t)snprintf(tmp, sizeof(tmp), "%zu", len);
		if (kv + d == len)
			break;
		len = kv + d;
	}
	if (at + len >= cap)
		return SIZE_MAX;
	snprintf(buf + at, cap - at, "%zu %s=%s\n", len, key, val);
	return at + len;
}

static void header_fill(unsigned char *h, const char *name, size_t nlen, const char *prefix, size_t plen,
			const char *link, char type, mode_t mode, uint64_t uid, uint64_t gid, uint64_t size,
			int64_t mtime)
{
	unsigned s = 0;
	size_t i;

	memset(h, 0, TAR_BLOCK);
	memcpy(h + H_NAME, name, nlen);
	memcpy(h + H_PREFIX, prefix, plen);
	if (link)
		memcpy(h + H_LINK, link, strnlen(link, 100));
	octal(h + H_MODE, 8, mode & 07777);
	if (octal(h + H_UID, 8, uid))
		octal(h + H_UID, 8, 0);
	if (octal(h + H_GID, 8, gid))
		octal(h + H_GID, 8, 0);
	if (octal(h + H_SIZE, 12, size))
		octal(h + H_SIZE, 12, 0); /* in the pax header */
	if (mtime < 0 || octal(h + H_MTIME, 12, (uint64_t)mtime))
		octal(h + H_MTIME, 12, 0);
	h[H_TYPE] = (unsigned char)type;
	memcpy(h + H_MAGIC, "ustar", 6);
	memcpy(h + H_VERSION, "00", 2);
	for (i = 0; i < TAR_BLOCK; i++)
		s += i >= H_CHKSUM && i < H_CHKSUM + 8 ? ' ' : h[i];
	snprintf((char *)h + H_CHKSUM, 8, "%06o", s);
	h[H_CHKSUM + 7] = ' ';
}

/* One entry's header(s): a pax header first when the name, the link
 * target or the size do not fit ustar's fields. */
static int w_header(struct tar_w *w, struct wbuf *s, const char *name, const char *link, char type,
		    const struct stat *st, uint64_t size)
{
	unsigned char h[TAR_BLOCK];
	char pax[2 * PATH_MAX + 256], num[24];
	size_t nl = strlen(name), pl = 0, at = 0;
	const char *base = name;
	int r;

	if (w->st.files + w->st.dirs + w->st.links >= w->lim.max_entries) {
		failf(w->err, sizeof(w->err), "more than %llu entries", (unsigned long long)w->lim.max_entries);
		return -E2BIG;
	}
	if (nl > 100) {
		/* ustar's prefix/name split at a '/', else a pax path */
		const char *slash = NULL;

		for (const char *p = name + nl - 1; p > name; p--)
			if (*p == '/' && (size_t)(p - name) <= 155 && nl - (size_t)(p - name) - 1 <= 100 &&
			    p[1]) {
				slash = p;
				break;
			}
		if (slash) {
			pl = (size_t)(slash - name);
			base = slash + 1;
			nl = strlen(base);
		} else {
			at = pax_record(pax, sizeof(pax), at, "path", name);
			nl = 0;
		}
	}
	if (link && strlen(link) > 100 && at != SIZE_MAX)
		at = pax_record(pax, sizeof(pax), at, "linkpath", link);
	if (size >= (1ull << 33) && at != SIZE_MAX) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)size);
		at = pax_record(pax, sizeof(pax), at, "size", num);
	}
	if (at == SIZE_MAX) {
		failf(w->err, sizeof(w->err), "%s: the name is too long", name);
		return -ENAMETOOLONG;
	}
	if (at) {
		size_t padn = (TAR_BLOCK - at % TAR_BLOCK) % TAR_BLOCK;
		static const unsigned char zero[TAR_BLOCK];

		header_fill(h, "PaxHeader", 9, "", 0, NULL, 'x', 0644, 0, 0, at, 0);
		if ((r = w_emit(w, s, h, TAR_BLOCK)) || (r = w_emit(w, s, pax, at)) || (r = w_emit(w, s, zero, padn)))
			return r;
		if (!nl) {
			/* the ustar name: its last 100 bytes, for a reader without pax */
			size_t full = strlen(name);

			base = name + (full > 100 ? full - 100 : 0);
			nl = strlen(base);
		}
	}
	header_fill(h, base, nl, name, pl, link, type, st->st_mode, (uint64_t)st->st_uid, (uint64_t)st->st_gid, size,
		    (int64_t)st->st_mtime);
	return w_emit(w, s, h, TAR_BLOCK);
}

static int w_file(struct tar_w *w, struct wbuf *s, int fd, const char *name, const struct stat *st)
{
	static const unsigned char zero[TAR_BLOCK];
	uint64_t left = (uint64_t)st->st_size;
	unsigned char buf[16384];
	int r = w_header(w, s, name, NULL, '0', st, left);

	if (r)
		return r;
	while (left) {
		ssize_t k = read(fd, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			failf(w->err, sizeof(w->err), "%s: %s", name, strerror(errno));
			return r;
		}
		if (k == 0) {
			/* it shrank while read: the header said size, send that */
			memset(buf, 0, sizeof(buf));
			k = (ssize_t)(left < sizeof(buf) ? left : sizeof(buf));
		}
		if ((r = w_emit(w, s, buf, (size_t)k)))
			return r;
		left -= (uint64_t)k;
		w->st.bytes += (uint64_t)k;
	}
	w->st.files++;
	return w_emit(w, s, zero, (TAR_BLOCK - (size_t)(st->st_size % TAR_BLOCK)) % TAR_BLOCK);
}

/* A non-directory entry `name` in dirfd, archived as arc. */
static int w_leaf(struct tar_w *w, struct wbuf *s, int dirfd, const char *name, const char *arc,
		  const struct stat *st)
{
	char target[PATH_MAX];
	ssize_t n;
	int fd, r;

	if (S_ISLNK(st->st_mode)) {
		n = readlinkat(dirfd, name, target, sizeof(target) - 1);
		if (n < 0) {
			failf(w->err, sizeof(w->err), "%s: %s", arc, strerror(errno));
			return -errno;
		}
		target[n] = '\0';
		r = w_header(w, s, arc, target, '2', st, 0);
		if (!r)
			w->st.links++;
		return r;
	}
	if (!S_ISREG(st->st_mode)) {
		w->st.skipped++; /* sockets, devices, fifos */
		return 0;
	}
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | (w->follow ? 0 : O_NOFOLLOW));
	if (fd < 0) {
		if (errno == ENOENT)
			return 0; /* gone meanwhile */
		failf(w->err, sizeof(w->err), "%s: %s", arc, strerror(errno));
		return -errno;
	}
	{
		struct stat fst;

		if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode)) {
			close(fd);
			w->st.skipped++;
			return 0;
		}
		r = w_file(w, s, fd, arc, &fst);
	}
	close(fd);
	return r;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory fd (sorted: archives come out the same). */
static int read_names(int fd, char ***names, size_t *n)
{
	int d = dup(fd);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	struct dirent *e;
	size_t cap = 0;

	*names = NULL;
	*n = 0;
	if (!dir) {
		if (d >= 0)
			close(d);
		return -errno;
	}
	rewinddir(dir);
	while ((e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (*n == cap) {
			char **g = realloc(*names, (cap = cap ? cap * 2 : 16) * sizeof(**names));

			if (!g)
				goto nomem;
			*names = g;
		}
		if (!((*names)[*n] = strdup(e->d_name)))
			goto nomem;
		(*n)++;
	}
	closedir(dir);
	qsort(*names, *n, sizeof(**names), cmp_names);
	return 0;
nomem:
	closedir(dir);
	return -ENOMEM;
}

struct wlevel {
	char **names;
	size_t n, i, plen; /* plen: the archive path's length at this level */
	dev_t dev;
	ino_t ino;
};

static void free_names(char **names, size_t n)
{
	while (n--)
		free(names[n]);
	free(names);
}

static int w_push(struct wlevel **stack, size_t *depth, size_t *cap, int fd, const struct stat *st, size_t plen)
{
	struct wlevel *lv;
	int r;

	if (*depth == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct wlevel *g = realloc(*stack, nc * sizeof(**stack));

		if (!g)
			return -ENOMEM;
		*stack = g;
		*cap = nc;
	}
	lv = &(*stack)[*depth];
	memset(lv, 0, sizeof(*lv));
	lv->dev = st->st_dev;
	lv->ino = st->st_ino;
	lv->plen = plen;
	r = read_names(fd, &lv->names, &lv->n);
	if (!r)
		(*depth)++;
	return r;
}

/* The tree under directory fd `top` (archived as arc, "" for "."): one
 * fd at a time; going up is openat(".."), checked against the device and
 * inode it came down from (a directory moved meanwhile stops the walk). */
static int w_tree(struct tar_w *w, struct wbuf *s, int top, const char *arc)
{
	char *path = malloc(PATH_MAX + NAME_MAX + 2), dn[PATH_MAX + NAME_MAX + 3];
	struct wlevel *stack = NULL;
	size_t depth = 0, cap = 0;
	int cur = top, r = 0;
	struct stat st;

	if (!path)
		return -ENOMEM;
	snprintf(path, PATH_MAX, "%s", arc);
	if (fstat(top, &st) < 0) {
		r = -errno;
		goto out;
	}
	snprintf(dn, sizeof(dn), "%s/", *arc ? arc : ".");
	if ((r = w_header(w, s, dn, NULL, '5', &st, 0)))
		goto out;
	w->st.dirs++;
	if ((r = w_push(&stack, &depth, &cap, top, &st, strlen(path)))) {
		failf(w->err, sizeof(w->err), "%s: %s", *arc ? arc : ".", strerror(-r));
		goto out;
	}
	while (depth) {
		struct wlevel *lv = &stack[depth - 1];
		const char *name;
		size_t plen = lv->plen;
		int child;

		if (lv->i == lv->n) {
			free_names(lv->names, lv->n);
			if (--depth == 0)
				break;
			child = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (child < 0 || fstat(child, &st) < 0 || st.st_dev != stack[depth - 1].dev ||
			    st.st_ino != stack[depth - 1].ino) {
				if (child >= 0)
					close(child);
				failf(w->err, sizeof(w->err), "%s: a directory moved while it was archived", path);
				r = -ESTALE;
				goto out;
			}
			if (cur != top)
				close(cur);
			cur = child;
			path[stack[depth - 1].plen] = '\0';
			continue;
		}
		name = lv->names[lv->i++];
		path[plen] = '\0';
		if (plen + strlen(name) + 2 > PATH_MAX) {
			failf(w->err, sizeof(w->err), "%s/%s: the name is too long", path, name);
			r = -ENAMETOOLONG;
			goto out;
		}
		snprintf(path + plen, PATH_MAX + NAME_MAX + 2 - plen, "%s%s", plen ? "/" : "", name);
		if (fstatat(cur, name, &st, w->follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue; /* gone meanwhile */
			r = -errno;
			failf(w->err, sizeof(w->err), "%s: %s", path, strerror(errno));
			goto out;
		}
		if (!S_ISDIR(st.st_mode)) {
			if ((r = w_leaf(w, s, cur, name, path, &st)))
				goto out;
			continue;
		}
		if (depth + 1 > w->lim.max_depth) {
			failf(w->err, sizeof(w->err), "%s: deeper than %u levels", path, w->lim.max_depth);
			r = -ELOOP;
			goto out;
		}
		child = openat(cur, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (w->follow ? 0 : O_NOFOLLOW));
		if (child < 0 || fstat(child, &st) < 0) {
			r = -errno;
			if (child >= 0)
				close(child);
			if (r == -ENOENT) {
				r = 0;
				continue;
			}
			failf(w->err, sizeof(w->err), "%s: %s", path, strerror(-r));
			goto out;
		}
		snprintf(dn, sizeof(dn), "%s/", path);
		if ((r = w_header(w, s, dn, NULL, '5', &st, 0))) {
			close(child);
			goto out;
		}
		w->st.dirs++;
		if (cur != top)
			close(cur);
		cur = child;
		if ((r = w_push(&stack, &depth, &cap, cur, &st, strlen(path)))) {
			failf(w->err, sizeof(w->err), "%s: %s", path, strerror(-r));
			goto out;
		}
	}
out:
	while (depth--)
		free_names(stack[depth].names, stack[depth].n);
	free(stack);
	if (cur != top)
		close(cur);
	free(path);
	return r;
}

int tar_w_path(struct tar_w *w, int dirfd, const char *path, const char *arcname)
{
	struct wbuf *s = malloc(sizeof(*s));
	struct stat st;
	int r, fd;

	if (!s)
		return -ENOMEM;
	s->n = 0;
	if (!w->lim.max_depth)
		w->lim.max_depth = TAR_DEPTH_DEFAULT;
	if (!w->lim.max_entries)
		w->lim.max_entries = TAR_ENTRIES_DEFAULT;
	if (!strcmp(arcname, "."))
		arcname = "";
	if (fstatat(dirfd, path, &st, w->follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0) {
		r = -errno;
		failf(w->err, sizeof(w->err), "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		const char *slash = strrchr(path, '/');
		char dir[PATH_MAX];
		int dfd = dirfd;

		if (!*arcname) {
			failf(w->err, sizeof(w->err), "%s: not a directory (its content cannot be archived)", path);
			r = -ENOTDIR;
			goto out;
		}
		/* the leaf relative to its directory (w_leaf opens it with O_NOFOLLOW) */
		if (slash) {
			snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
			dfd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd < 0) {
				r = -errno;
				goto out;
			}
		}
		r = w_leaf(w, s, dfd, slash ? slash + 1 : path, arcname, &st);
		if (dfd != dirfd)
			close(dfd);
	} else {
		fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (w->follow ? 0 : O_NOFOLLOW));
		if (fd < 0) {
			r = -errno;
			failf(w->err, sizeof(w->err), "%s: %s", path, strerror(errno));
			goto out;
		}
		r = w_tree(w, s, fd, arcname);
		close(fd);
	}
	if (!r)
		r = w_flush(w, s);
out:
	free(s);
	return r;
}

int tar_w_finish(struct tar_w *w)
{
	static const unsigned char zero[2 * TAR_BLOCK];
	int r = w->out(w->ctx, zero, sizeof(zero));

	if (r)
		failf(w->err, sizeof(w->err), "the archive could not be sent: %s", strerror(-r));
	return r;
}

/* ---- extractor ------------------------------------------------------- */

enum { X_HEADER, X_DATA, X_SKIP, X_EXT, X_PAD, X_END, X_FAIL };

struct tar_dirfix {
	char *path; /* normalized; "" for the destination itself */
	mode_t mode;
	int64_t mtime, uid, gid;
};

/* The random part of this extraction's temporary names. GRND_NONBLOCK: the
 * guest's init extracts early in boot, before the pool may be ready; then
 * the PID, the time and an address still differ between extractions. */
static void x_tmpid(struct tar_x *x)
{
	uint64_t r = 0;
	struct timespec ts;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)x;
	}
	snprintf(x->tmpid, sizeof(x->tmpid), "%d-%016llx", (int)getpid(), (unsigned long long)r);
}

void tar_x_init(struct tar_x *x, int dst, const struct tar_limits *lim)
{
	memset(x, 0, sizeof(*x));
	x->root = dst;
	if (lim)
		x->lim = *lim;
	if (!x->lim.max_depth)
		x->lim.max_depth = TAR_DEPTH_DEFAULT;
	if (!x->lim.max_entries)
		x->lim.max_entries = TAR_ENTRIES_DEFAULT;
	x->fd = x->parent = x->cfd = -1;
	x_tmpid(x);
}

static int x_fail(struct tar_x *x, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int x_fail(struct tar_x *x, int e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	x->state = X_FAIL;
	return -e;
}

static void clear_next(struct tar_x *x)
{
	free(x->next_path);
	free(x->next_link);
	x->next_path = x->next_link = NULL;
	x->has_size = x->has_mtime = x->has_uid = x->has_gid = 0;
}

static void cache_set(struct tar_x *x, const char *path, int fd)
{
	if (x->cfd >= 0 && x->cfd != fd)
		close(x->cfd);
	free(x->cpath);
	x->cpath = strdup(path);
	x->cfd = x->cpath ? fd : -1;
	if (!x->cpath && fd >= 0)
		close(fd);
}

/* The directory `dir` (normalized, "" the destination), opened one
 * component at a time with O_NOFOLLOW from the destination (or from the
 * cached directory it is under), missing ones created when `create`.
 * Returns an fd the cache owns (or x->root), or <0 with x failed. */
static int x_walk(struct tar_x *x, const char *dir, int create, const char *entry)
{
	const char *p = dir;
	int cur = x->root;
	char comp[NAME_MAX + 1];

	if (!*dir)
		return x->root;
	if (x->cpath) {
		size_t cl = strlen(x->cpath);

		if (!strcmp(x->cpath, dir))
			return x->cfd;
		if (cl && !strncmp(x->cpath, dir, cl) && dir[cl] == '/') {
			cur = x->cfd;
			p = dir + cl + 1;
		}
	}
	while (*p) {
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		int nfd;

		memcpy(comp, p, n);
		comp[n] = '\0';
		nfd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && create) {
			if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
				goto fail;
			nfd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0)
			goto fail;
		if (cur != x->root && cur != x->cfd)
			close(cur);
		cur = nfd;
		p = *e ? e + 1 : e;
		continue;
fail:
		{
			int e2 = errno;

			if (cur != x->root && cur != x->cfd)
				close(cur);
			if (e2 == ELOOP || e2 == ENOTDIR)
				return x_fail(x, e2, "%s: %.*s is a symbolic link or not a directory: "
						     "not extracting through it", entry, (int)(e - dir), dir);
			return x_fail(x, e2, "%s: %.*s: %s", entry, (int)(e - dir), dir, strerror(e2));
		}
	}
	cache_set(x, dir, cur);
	return x->cfd >= 0 ? x->cfd : x_fail(x, ENOMEM, "out of memory");
}

/* Splits normalized `path` into its directory (in dir) and last name. */
static const char *split_last(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');

	snprintf(dir, len, "%.*s", slash ? (int)(slash - path) : 0, path);
	return slash ? slash + 1 : path;
}

/* A temporary name in parent, created by make(). */
static int x_tmpname(struct tar_x *x)
{
	snprintf(x->tmp, sizeof(x->tmp), ".vmm-tar-%s-%u", x->tmpid, x->seq++);
	return 0;
}

static int x_dirfix_add(struct tar_x *x, const char *path)
{
	if (x->ndirs == x->dirs_cap) {
		size_t cap = x->dirs_cap ? x->dirs_cap * 2 : 64;
		struct tar_dirfix *g = realloc(x->dirs, cap * sizeof(*g));

		if (!g)
			return x_fail(x, ENOMEM, "out of memory");
		x->dirs = g;
		x->dirs_cap = cap;
	}
	x->dirs[x->ndirs] = (struct tar_dirfix){ .path = strdup(path), .mode = x->mode, .mtime = x->mtime,
						  .uid = x->uid, .gid = x->gid };
	if (!x->dirs[x->ndirs].path)
		return x_fail(x, ENOMEM, "out of memory");
	x->ndirs++;
	return 0;
}

static mode_t x_mode(const struct tar_x *x, mode_t m)
{
	return m & 07777 & (x->mode_mask ? x->mode_mask : 07777);
}

/* The whole file is in: owner, mode, time, then renamed into place. */
static int x_file_done(struct tar_x *x)
{
	struct timespec ts[2] = { { .tv_sec = x->mtime }, { .tv_sec = x->mtime } };
	int e = 0;

	if (x->owner && fchown(x->fd, (uid_t)x->uid, (gid_t)x->gid) < 0)
		e = errno;
	if (!e && fchmod(x->fd, x_mode(x, x->mode)) < 0)
		e = errno;
	if (!e)
		futimens(x->fd, ts);
	if (close(x->fd) < 0 && !e)
		e = errno;
	x->fd = -1;
	if (!e && renameat(x->parent, x->tmp, x->parent, x->final) < 0)
		e = errno;
	if (e) {
		unlinkat(x->parent, x->tmp, 0);
		return x_fail(x, e, "%s: %s%s", x->final, strerror(e),
			      e == EISDIR || e == ENOTEMPTY || e == EEXIST ? " (a directory is there)" : "");
	}
	x->st.files++;
	return 0;
}

static int x_parse_pax(struct tar_x *x)
{
	const char *p = x->ext, *end = x->ext + x->ext_len;

	while (p < end) {
		const char *sp, *eq, *val, *rec_end;
		size_t len = 0, klen, vlen;

		for (sp = p; sp < end && *sp >= '0' && *sp <= '9' && sp - p < 8; sp++)
			len = len * 10 + (size_t)(*sp - '0');
		if (sp == p || sp >= end || *sp != ' ' || len > (size_t)(end - p) || len < (size_t)(sp - p) + 3 ||
		    p[len - 1] != '\n')
			return x_fail(x, EPROTO, "a malformed pax extended header");
		rec_end = p + len - 1;
		eq = memchr(sp + 1, '=', (size_t)(rec_end - sp - 1));
		if (!eq)
			return x_fail(x, EPROTO, "a malformed pax extended header (no '=')");
		klen = (size_t)(eq - sp - 1);
		val = eq + 1;
		vlen = (size_t)(rec_end - val);
#define KEY(k) (klen == sizeof(k) - 1 && !memcmp(sp + 1, k, klen))
		if (KEY("path") || KEY("linkpath")) {
			char **dst = KEY("path") ? &x->next_path : &x->next_link;

			if (memchr(val, '\0', vlen) || vlen >= PATH_MAX)
				return x_fail(x, EPROTO, "a pax %s with a NUL byte or longer than PATH_MAX",
					      KEY("path") ? "path" : "linkpath");
			free(*dst);
			if (!(*dst = strndup(val, vlen)))
				return x_fail(x, ENOMEM, "out of memory");
		} else if (KEY("size") || KEY("uid") || KEY("gid") || KEY("mtime")) {
			uint64_t v = 0;
			size_t i = 0;
			int neg = KEY("mtime") && vlen && val[0] == '-';

			for (i = neg; i < vlen && val[i] >= '0' && val[i] <= '9'; i++) {
				if (v > (UINT64_C(1) << 62) / 10)
					return x_fail(x, EPROTO, "a pax number out of range");
				v = v * 10 + (uint64_t)(val[i] - '0');
			}
			/* mtime may have a fraction: whole seconds are kept */
			if (i == (size_t)neg || (i < vlen && !(KEY("mtime") && val[i] == '.')))
				return x_fail(x, EPROTO, "a malformed pax number");
			if (KEY("size")) {
				x->has_size = 1;
				x->next_size = v;
			} else if (KEY("uid")) {
				x->has_uid = 1;
				x->next_uid = (int64_t)v;
			} else if (KEY("gid")) {
				x->has_gid = 1;
				x->next_gid = (int64_t)v;
			} else {
				x->has_mtime = 1;
				x->next_mtime = neg ? -(int64_t)v : (int64_t)v;
			}
		}
#undef KEY
		p += len;
	}
	return 0;
}

static int x_ext_done(struct tar_x *x)
{
	if (x->ext_type == 'x')
		return x_parse_pax(x);
	/* GNU 'L' (the next name) or 'K' (the next link target): NUL-ended */
	{
		char **dst = x->ext_type == 'L' ? &x->next_path : &x->next_link;
		size_t n = strnlen(x->ext, x->ext_len);

		if (n >= PATH_MAX)
			return x_fail(x, EPROTO, "a GNU long name longer than PATH_MAX");
		free(*dst);
		if (!(*dst = strndup(x->ext, n)))
			return x_fail(x, ENOMEM, "out of memory");
	}
	return 0;
}

/* The entry's data: size bytes in state st, then its padding. */
static void x_data(struct tar_x *x, int st, uint64_t size)
{
	x->left = size;
	x->pad_for = (TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK;
	x->state = size ? st : X_HEADER;
}

/* An entry's header is in x->hdr. */
static int x_header(struct tar_x *x)
{
	const unsigned char *h = x->hdr;
	char raw[PATH_MAX + 160], norm[PATH_MAX], dir[PATH_MAX], linkbuf[101];
	const char *name, *last, *link;
	uint64_t size, mode, uid, gid, mtime;
	unsigned depth;
	int type = h[H_TYPE], r, parent;
	size_t i;

	for (i = 0; i < TAR_BLOCK && !h[i]; i++) {
	}
	if (i == TAR_BLOCK) {
		if (++x->zeros == 2)
			x->state = X_END;
		return 0;
	}
	if (x->zeros)
		return x_fail(x, EPROTO, "a zero block inside the archive (a corrupted archive)");
	if (!tar_checksum_ok(h))
		return x_fail(x, EPROTO, "a header with a bad checksum (not a tar archive, or a corrupted one)");
	if (tar_number(h + H_SIZE, 12, &size) || tar_number(h + H_MODE, 8, &mode) ||
	    tar_number(h + H_UID, 8, &uid) || tar_number(h + H_GID, 8, &gid) || tar_number(h + H_MTIME, 12, &mtime))
		return x_fail(x, EPROTO, "a header with a malformed number");
	if (++x->entries > x->lim.max_entries)
		return x_fail(x, E2BIG, "more than %llu entries", (unsigned long long)x->lim.max_entries);
	if (x->has_size)
		size = x->next_size;
	if (size > INT64_MAX)
		return x_fail(x, EPROTO, "an entry size out of range");
	if (type == 'x' || type == 'L' || type == 'K') {
		if (size > TAR_PAX_MAX)
			return x_fail(x, EPROTO, "an extended header of %llu bytes (at most %u)",
				      (unsigned long long)size, TAR_PAX_MAX);
		free(x->ext);
		x->ext = malloc(size + 1);
		if (!x->ext)
			return x_fail(x, ENOMEM, "out of memory");
		x->ext_len = 0;
		x->ext_type = type;
		x_data(x, X_EXT, size);
		return size ? 0 : x_ext_done(x);
	}
	x->mode = (mode_t)mode;
	x->mtime = x->has_mtime ? x->next_mtime : (int64_t)mtime;
	x->uid = x->has_uid ? x->next_uid : (int64_t)uid;
	x->gid = x->has_gid ? x->next_gid : (int64_t)gid;
	if (x->next_path) {
		snprintf(raw, sizeof(raw), "%s", x->next_path);
	} else if (!memcmp(h + H_MAGIC, "ustar\0", 6) && h[H_PREFIX]) {
		snprintf(raw, sizeof(raw), "%.155s/%.100s", (const char *)h + H_PREFIX, (const char *)h + H_NAME);
	} else {
		snprintf(raw, sizeof(raw), "%.100s", (const char *)h + H_NAME);
	}
	if (x->next_link) {
		link = x->next_link;
	} else {
		snprintf(linkbuf, sizeof(linkbuf), "%.100s", (const char *)h + H_LINK);
		link = linkbuf;
	}
	name = raw;
	if (type == 'g' || !(type == '0' || type == '\0' || type == '7' || type == '5' || type == '2' || type == '1')) {
		/* a global header, a device, a fifo, GNU sparse or volume
		 * entries: not extracted, their data skipped */
		if (type != 'g')
			x->st.skipped++;
		clear_next(x);
		x_data(x, X_SKIP, size);
		return 0;
	}
	r = name_norm(name, norm, sizeof(norm), x->lim.max_depth, &depth);
	if (r == -EINVAL)
		return x_fail(x, EPERM, "%.300s: %s", name,
			      *name == '/' ? "an absolute name (refused: names are relative to the destination)"
					   : "a name with '..' (refused: it would leave the destination)");
	if (r == -ELOOP)
		return x_fail(x, ELOOP, "%.300s: deeper than %u levels", name, x->lim.max_depth);
	if (r)
		return x_fail(x, -r, "%.300s: %s", name, strerror(-r));
	if (type == '5') {
		int fd;

		if (!*norm) {
			/* the destination itself ("./"): its mode and time at the end */
			clear_next(x);
			x->st.dirs++;
			x_data(x, X_SKIP, size);
			return x_dirfix_add(x, "");
		}
		last = split_last(norm, dir, sizeof(dir));
		parent = x_walk(x, dir, 1, norm);
		if (parent < 0)
			return parent;
		if (mkdirat(parent, last, 0700) < 0 && errno != EEXIST)
			return x_fail(x, errno, "%s: %s", norm, strerror(errno));
		fd = openat(parent, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return x_fail(x, errno, "%s: %s", norm,
				      errno == ELOOP || errno == ENOTDIR ? "something else than a directory is there"
									 : strerror(errno));
		cache_set(x, norm, fd);
		clear_next(x);
		x->st.dirs++;
		x_data(x, X_SKIP, size);
		return x_dirfix_add(x, norm);
	}
	if (!*norm)
		return x_fail(x, EPROTO, "%.300s: a file, link or symbolic link with no name", name);
	last = split_last(norm, dir, sizeof(dir));
	parent = x_walk(x, dir, 1, norm);
	if (parent < 0)
		return parent;
	snprintf(x->final, sizeof(x->final), "%s", last);
	x->parent = parent;
	x_tmpname(x);
	if (type == '2' || type == '1') {
		struct timespec ts[2] = { { .tv_sec = x->mtime }, { .tv_sec = x->mtime } };
		int e = 0;

		if (!*link || strlen(link) >= PATH_MAX)
			return x_fail(x, EPROTO, "%s: a link with no target", norm);
		if (type == '2') {
			if (symlinkat(link, parent, x->tmp) < 0)
				return x_fail(x, errno, "%s: %s", norm, strerror(errno));
			if (x->owner && fchownat(parent, x->tmp, (uid_t)x->uid, (gid_t)x->gid, AT_SYMLINK_NOFOLLOW) < 0)
				e = errno;
			utimensat(parent, x->tmp, ts, AT_SYMLINK_NOFOLLOW);
		} else {
			/* a hard link: to an entry inside the destination */
			char tnorm[PATH_MAX], tdir[PATH_MAX];
			const char *tlast;
			unsigned td;
			int tp;

			if (name_norm(link, tnorm, sizeof(tnorm), x->lim.max_depth, &td) || !*tnorm)
				return x_fail(x, EPERM, "%s: a hard link to %.300s, outside the destination", norm, link);
			tlast = split_last(tnorm, tdir, sizeof(tdir));
			/* x_walk's cache may move: walk the target last, then come back */
			tp = x_walk(x, tdir, 0, norm);
			if (tp < 0)
				return tp;
			tp = dup(tp);
			parent = x_walk(x, dir, 1, norm);
			if (parent < 0 || tp < 0) {
				if (tp >= 0)
					close(tp);
				return parent < 0 ? parent : x_fail(x, errno, "dup: %s", strerror(errno));
			}
			x->parent = parent;
			if (linkat(tp, tlast, parent, x->tmp, 0) < 0) {
				e = errno;
				close(tp);
				return x_fail(x, e, "%s: a hard link to %s: %s", norm, tnorm, strerror(e));
			}
			close(tp);
		}
		if (!e && renameat(parent, x->tmp, parent, x->final) < 0)
			e = errno;
		if (e) {
			unlinkat(parent, x->tmp, 0);
			return x_fail(x, e, "%s: %s", norm, strerror(e));
		}
		x->st.links++;
		clear_next(x);
		x_data(x, X_SKIP, size); /* a link's data (pax allows it for hard links): not used */
		return 0;
	}
	x->fd = openat(parent, x->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (x->fd < 0)
		return x_fail(x, errno, "%s: %s", norm, strerror(errno));
	clear_next(x);
	x_data(x, X_DATA, size);
	return size ? 0 : x_file_done(x);
}

int tar_x_feed(struct tar_x *x, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len) {
		size_t n;

		switch (x->state) {
		case X_FAIL:
			return -EPROTO;
		case X_END:
			return 0; /* what follows the end blocks (a blocking factor's padding) */
		case X_HEADER:
			n = TAR_BLOCK - x->hdr_have < len ? TAR_BLOCK - x->hdr_have : len;
			memcpy(x->hdr + x->hdr_have, p, n);
			x->hdr_have += n;
			p += n;
			len -= n;
			if (x->hdr_have == TAR_BLOCK) {
				int r;

				x->hdr_have = 0;
				r = x_header(x);
				if (r)
					return r;
			}
			break;
		case X_DATA:
		case X_SKIP:
		case X_EXT:
			n = x->left < len ? (size_t)x->left : len;
			if (x->state == X_DATA) {
				const unsigned char *q = p;
				size_t k = n;

				while (k) {
					ssize_t w = write(x->fd, q, k);

					if (w < 0 && errno == EINTR)
						continue;
					if (w <= 0)
						return x_fail(x, w < 0 ? errno : EIO, "%s: %s", x->final,
							      w < 0 ? strerror(errno) : "a short write");
					q += w;
					k -= (size_t)w;
				}
				x->st.bytes += n;
			} else if (x->state == X_EXT) {
				memcpy(x->ext + x->ext_len, p, n);
				x->ext_len += n;
			}
			p += n;
			len -= n;
			x->left -= n;
			if (!x->left) {
				int r = x->state == X_DATA ? x_file_done(x) : x->state == X_EXT ? x_ext_done(x) : 0;

				if (r)
					return r;
				x->pad = x->pad_for;
				x->state = x->pad ? X_PAD : X_HEADER;
			}
			break;
		case X_PAD:
			n = x->pad < len ? (size_t)x->pad : len;
			p += n;
			len -= n;
			x->pad -= n;
			break;
		}
		if (x->state == X_PAD && !x->pad)
			x->state = X_HEADER;
	}
	if (x->state == X_PAD && !x->pad)
		x->state = X_HEADER;
	return x->state == X_FAIL ? -EPROTO : 0;
}

int tar_x_finish(struct tar_x *x)
{
	size_t i;

	if (x->state == X_FAIL)
		return -EPROTO;
	/* two zero blocks end an archive; one at the very end is taken too
	 * (GNU tar: "A lone zero block") */
	if (x->state != X_END && !(x->state == X_HEADER && !x->hdr_have && x->zeros == 1))
		return x_fail(x, EPROTO, "a truncated archive: it ends %s",
			      x->state == X_HEADER && !x->hdr_have ? "without its end-of-archive blocks"
			      : x->state == X_HEADER ? "inside a header"
			      : x->fd >= 0 ? "inside a file (not written)" : "inside an entry");
	/* the directories' modes, owners and times, deepest first */
	for (i = x->ndirs; i--;) {
		const struct tar_dirfix *d = &x->dirs[i];
		struct timespec ts[2] = { { .tv_sec = d->mtime }, { .tv_sec = d->mtime } };
		int fd = x_walk(x, d->path, 0, *d->path ? d->path : ".");

		if (fd < 0)
			return fd;
		if (x->owner && fchown(fd, (uid_t)d->uid, (gid_t)d->gid) < 0)
			return x_fail(x, errno, "%s: %s", *d->path ? d->path : ".", strerror(errno));
		if (fchmod(fd, x_mode(x, d->mode)) < 0)
			return x_fail(x, errno, "%s: %s", *d->path ? d->path : ".", strerror(errno));
		futimens(fd, ts);
	}
	return 0;
}

void tar_x_free(struct tar_x *x)
{
	size_t i;

	if (x->fd >= 0) {
		close(x->fd);
		unlinkat(x->parent, x->tmp, 0);
		x->fd = -1;
	}
	if (x->cfd >= 0)
		close(x->cfd);
	x->cfd = -1;
	free(x->cpath);
	free(x->ext);
	clear_next(x);
	for (i = 0; i < x->ndirs; i++)
		free(x->dirs[i].path);
	free(x->dirs);
	x->cpath = x->ext = NULL;
	x->dirs = NULL;
	x->ndirs = 0;
}
