/* Unpacking OCI layers (oci_unpack.h). Whiteouts and opaque directories
 * as image-spec layer.md defines them: ".wh.NAME" removes NAME from the
 * lower layers; ".wh..wh..opq" in a directory removes what the lower layers
 * had in it (entries of this same layer stay, wherever the marker sits in
 * the tar). */
#include "cli/images/oci_unpack.h"
#include "cli/util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <zlib.h>
#include <zstd.h>

#define BUF 65536
#define PAX_MAX (1u << 20)
#define XATTR_BUF 65536


/* ---- tar headers ----------------------------------------------------------- */

/* An octal field, or base-256 (GNU: high bit of the first byte). */
static int num_field(const unsigned char *f, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		if (f[0] != 0x80)
			return -EINVAL; /* negative */
		for (i = 1; i < n; i++) {
			if (v >> 56)
				return -EINVAL;
			v = (v << 8) | f[i];
		}
		*out = v;
		return 0;
	}
	while (i < n && f[i] == ' ')
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -EINVAL;
		v = (v << 3) | (uint64_t)(f[i] - '0');
	}
	if (i < n && f[i] != ' ' && f[i] != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

int tar_header_parse(const unsigned char blk[512], struct tar_hdr *h)
{
	uint64_t sum = 0, want, v;
	int64_t ssum = 0;
	size_t i, n;
	int zero = 1;

	for (i = 0; i < 512; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : blk[i];

		zero &= blk[i] == 0;
		sum += c;
		ssum += (signed char)c;
	}
	if (zero)
		return 1;
	if (num_field(blk + 148, 8, &want) || (want != sum && (int64_t)want != ssum))
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	h->type = (char)blk[156];
	if (num_field(blk + 100, 8, &v))
		return -EINVAL;
	h->mode = (uint32_t)(v & 07777);
	if (num_field(blk + 108, 8, &v) || v > 0xfffffffe)
		return -EINVAL;
	h->uid = (uint32_t)v;
	if (num_field(blk + 116, 8, &v) || v > 0xfffffffe)
		return -EINVAL;
	h->gid = (uint32_t)v;
	if (num_field(blk + 124, 12, &h->size) || h->size > (1ull << 40))
		return -EINVAL;
	if (num_field(blk + 136, 12, &v))
		return -EINVAL;
	h->mtime = (int64_t)(v & 0x7fffffffffffffffull);
	/* ustar: prefix "/" name */
	n = 0;
	if (!memcmp(blk + 257, "ustar", 5) && blk[345]) {
		n = strnlen((const char *)blk + 345, 155);
		memcpy(h->name, blk + 345, n);
		h->name[n++] = '/';
	}
	i = strnlen((const char *)blk, 100);
	memcpy(h->name + n, blk, i);
	h->name[n + i] = '\0';
	i = strnlen((const char *)blk + 157, 100);
	memcpy(h->link, blk + 157, i);
	h->link[i] = '\0';
	return 0;
}

int tar_pax_parse(const char *rec, size_t len, struct tar_hdr *h, char *xbuf, size_t xcap, size_t *xlen)
{
	size_t off = 0;

	while (off < len) {
		const char *p = rec + off, *sp, *eq;
		size_t rl = 0, klen, vlen;
		char key[256], val[4097];

		for (sp = p; sp < rec + len && *sp >= '0' && *sp <= '9'; sp++) {
			rl = rl * 10 + (size_t)(*sp - '0');
			if (rl > len)
				return -EINVAL;
		}
		if (sp == p || sp >= rec + len || *sp != ' ' || rl < (size_t)(sp - p) + 3 || rl > len - off ||
		    p[rl - 1] != '\n')
			return -EINVAL;
		sp++;
		eq = memchr(sp, '=', (size_t)(p + rl - 1 - sp));
		if (!eq || eq == sp)
			return -EINVAL;
		klen = (size_t)(eq - sp);
		vlen = (size_t)(p + rl - 1 - (eq + 1));
		off += rl;
		if (klen >= sizeof(key))
			continue;
		memcpy(key, sp, klen);
		key[klen] = '\0';
		if (!strncmp(key, "SCHILY.xattr.", 13)) {
			size_t nl = klen - 13;

			if (xbuf && *xlen + nl + 1 + 4 + vlen <= xcap && nl > 0) {
				uint32_t vl = (uint32_t)vlen;

				memcpy(xbuf + *xlen, key + 13, nl + 1);
				*xlen += nl + 1;
				memcpy(xbuf + *xlen, &vl, 4);
				*xlen += 4;
				memcpy(xbuf + *xlen, eq + 1, vlen);
				*xlen += vlen;
			}
			continue;
		}
		if (vlen >= sizeof(val))
			return -EINVAL;
		memcpy(val, eq + 1, vlen);
		val[vlen] = '\0';
		if (!strcmp(key, "path")) {
			memcpy(h->name, val, vlen + 1);
		} else if (!strcmp(key, "linkpath")) {
			memcpy(h->link, val, vlen + 1);
		} else if (!strcmp(key, "size") || !strcmp(key, "uid") || !strcmp(key, "gid") || !strcmp(key, "mtime")) {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(val, &end, 10);
			if (errno || end == val || (*end && !(*end == '.' && !strcmp(key, "mtime"))))
				return -EINVAL;
			if (!strcmp(key, "size")) {
				if (v > (1ull << 40))
					return -EINVAL;
				h->size = v;
			} else if (!strcmp(key, "mtime")) {
				h->mtime = (int64_t)(v & 0x7fffffffffffffffull);
			} else {
				if (v > 0xfffffffe)
					return -EINVAL;
				*(!strcmp(key, "uid") ? &h->uid : &h->gid) = (uint32_t)v;
			}
		}
	}
	return 0;
}

/* ---- the byte stream: raw -> (gzip | zstd | plain) -> tar ---------------- */

enum comp { C_PLAIN, C_GZIP, C_ZSTD };

struct src {
	int fd;
	const unsigned char *mem;
	size_t memlen, mempos;
	enum comp comp;
	z_stream z;
	ZSTD_DCtx *zd;
	unsigned char in[BUF], out[BUF];
	size_t inlen, inpos, outlen, outpos;
	int raw_eof, dec_eof;
	struct oci_hash raw_hash, tar_hash;
	int hashing;
	uint64_t tar_total;            /* decompressed bytes so far */
	const struct unpack_limits *lim;
	const char *err;
	char errbuf[256];
};

static ssize_t raw_read(struct src *s, void *buf, size_t n)
{
	ssize_t r;

	if (s->mem) {
		r = (ssize_t)(s->memlen - s->mempos < n ? s->memlen - s->mempos : n);
		memcpy(buf, s->mem + s->mempos, (size_t)r);
		s->mempos += (size_t)r;
	} else {
		do
			r = read(s->fd, buf, n);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			return -errno;
	}
	if (s->hashing)
		oci_hash_update(&s->raw_hash, buf, (size_t)r);
	return r;
}

static int fill_in(struct src *s)
{
	ssize_t r;

	if (s->inpos < s->inlen || s->raw_eof)
		return 0;
	r = raw_read(s, s->in, sizeof(s->in));
	if (r < 0)
		return (int)r;
	s->inlen = (size_t)r;
	s->inpos = 0;
	s->raw_eof = r == 0;
	return 0;
}

/* Refills out[]; 0 (maybe with nothing: the end) or -errno. */
static int fill_out(struct src *s)
{
	int r;

	s->outlen = s->outpos = 0;
	while (!s->outlen && !s->dec_eof) {
		if ((r = fill_in(s)))
			return r;
		if (s->comp == C_PLAIN) {
			if (s->raw_eof) {
				s->dec_eof = 1;
				break;
			}
			memcpy(s->out, s->in + s->inpos, s->inlen - s->inpos);
			s->outlen = s->inlen - s->inpos;
			s->inpos = s->inlen;
		} else if (s->comp == C_GZIP) {
			int zr;

			if (s->raw_eof && s->inpos == s->inlen) {
				s->err = "truncated (gzip stream ends early)";
				return -EPIPE;
			}
			s->z.next_in = s->in + s->inpos;
			s->z.avail_in = (uInt)(s->inlen - s->inpos);
			s->z.next_out = s->out;
			s->z.avail_out = sizeof(s->out);
			zr = inflate(&s->z, Z_NO_FLUSH);
			s->inpos = s->inlen - s->z.avail_in;
			s->outlen = sizeof(s->out) - s->z.avail_out;
			if (zr == Z_STREAM_END) {
				/* Another member may follow (concatenated gzip). */
				if ((r = fill_in(s)))
					return r;
				if (s->inpos == s->inlen && s->raw_eof)
					s->dec_eof = 1;
				else if (inflateReset(&s->z) != Z_OK)
					return -EIO;
			} else if (zr != Z_OK && zr != Z_BUF_ERROR) {
				s->err = "corrupt gzip data";
				return -EBADMSG;
			}
		} else {
			ZSTD_inBuffer in = { s->in + s->inpos, s->inlen - s->inpos, 0 };
			ZSTD_outBuffer out = { s->out, sizeof(s->out), 0 };
			size_t zr;

			if (s->raw_eof && s->inpos == s->inlen) {
				s->dec_eof = 1;
				break;
			}
			zr = ZSTD_decompressStream(s->zd, &out, &in);
			if (ZSTD_isError(zr)) {
				s->err = "corrupt zstd data";
				return -EBADMSG;
			}
			s->inpos += in.pos;
			s->outlen = out.pos;
		}
	}
	s->tar_total += s->outlen;
	if (s->tar_total > s->lim->tar_bytes) {
		/* A gzip bomb stops here, whatever its bytes are (files, padding, a tail). */
		snprintf(s->errbuf, sizeof(s->errbuf), "the layer decompresses to more than %llu MiB, %s",
			 (unsigned long long)(s->lim->tar_bytes >> 20), s->lim->tar_what);
		s->err = s->errbuf;
		return -EFBIG;
	}
	if (s->hashing)
		oci_hash_update(&s->tar_hash, s->out, s->outlen);
	return 0;
}

/* Exactly n bytes of the tar stream (buf NULL: skip them). */
static int src_read(struct src *s, void *buf, size_t n)
{
	unsigned char *d = buf;
	int r;

	while (n) {
		size_t k;

		if (s->outpos == s->outlen) {
			if ((r = fill_out(s)))
				return r;
			if (!s->outlen) {
				s->err = "truncated layer (the tar ends early)";
				return -EPIPE;
			}
		}
		k = s->outlen - s->outpos < n ? s->outlen - s->outpos : n;
		if (d) {
			memcpy(d, s->out + s->outpos, k);
			d += k;
		}
		s->outpos += k;
		n -= k;
	}
	return 0;
}

static int src_open(struct src *s)
{
	int r;

	if ((r = fill_in(s)))
		return r;
	if (s->inlen >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b) {
		s->comp = C_GZIP;
		if (inflateInit2(&s->z, 15 + 16) != Z_OK)
			return -ENOMEM;
	} else if (s->inlen >= 4 && !memcmp(s->in, "\x28\xb5\x2f\xfd", 4)) {
		s->comp = C_ZSTD;
		if (!(s->zd = ZSTD_createDCtx()))
			return -ENOMEM;
	}
	return 0;
}

static void src_close(struct src *s)
{
	if (s->comp == C_GZIP)
		inflateEnd(&s->z);
	ZSTD_freeDCtx(s->zd);
	s->zd = NULL;
	oci_hash_free(&s->raw_hash);
	oci_hash_free(&s->tar_hash);
}

/* ---- paths inside the root ---------------------------------------------- */

/* Opens the directory at path (clean, relative; "" is the root itself)
 * with every component resolved as if rootfd were "/". */
static int open_dir_in_root(int rootfd, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int fd, tries = 0;

	if (!*path)
		return fcntl(rootfd, F_DUPFD_CLOEXEC, 0) < 0 ? -errno : fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	do
		fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN && ++tries < 16);
	if (fd < 0 && errno == ENOSYS) {
		/* No openat2 (Linux < 5.6): walk, following no link at all. */
		char buf[4097], *save = NULL, *c;
		int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);

		snprintf(buf, sizeof(buf), "%s", path);
		for (c = strtok_r(buf, "/", &save); c && cur >= 0; c = strtok_r(NULL, "/", &save)) {
			int next = openat(cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			close(cur);
			cur = next;
		}
		return cur < 0 ? -errno : cur;
	}
	return fd < 0 ? -errno : fd;
}

int oci_root_open(int rootfd, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));

	if (fd < 0 && errno == ENOSYS)
		fd = openat(rootfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

/* dir/target with ".." popping, clamped at the root (as the kernel
 * resolves a link under RESOLVE_IN_ROOT); an absolute target starts at
 * the root. */
static int link_join(const char *dir, const char *target, char *out, size_t len)
{
	char buf[8200], *save = NULL, *c;
	size_t o = 0;

	if (snprintf(buf, sizeof(buf), "%s/%s", target[0] == '/' ? "" : dir, target) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	out[0] = '\0';
	for (c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		size_t n = strlen(c);

		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			while (o && out[o - 1] != '/')
				o--;
			if (o)
				o--;
			out[o] = '\0';
			continue;
		}
		if (o + n + 2 > len)
			return -ENAMETOOLONG;
		if (o)
			out[o++] = '/';
		memcpy(out + o, c, n + 1);
		o += n;
	}
	return 0;
}

static int mkdirs(int rootfd, const char *path, mode_t mode, unsigned depth)
{
	char buf[4097], *slash, tgt[4097], next[4097];
	const char *base;
	int fd, pfd;
	ssize_t n;

	fd = open_dir_in_root(rootfd, path);
	if (fd != -ENOENT)
		return fd;
	if (depth > 40)
		return -ELOOP;
	snprintf(buf, sizeof(buf), "%s", path);
	slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
	base = slash ? slash + 1 : buf;
	pfd = slash ? mkdirs(rootfd, buf, mode, depth + 1) : open_dir_in_root(rootfd, "");
	if (pfd < 0)
		return pfd;
	if (mkdirat(pfd, base, mode) < 0 && errno != EEXIST) {
		close(pfd);
		return -errno;
	}
	/* A dangling link in the image: make its target, inside the root. */
	n = readlinkat(pfd, base, tgt, sizeof(tgt) - 1);
	close(pfd);
	if (n > 0) {
		tgt[n] = '\0';
		if (link_join(slash ? buf : "", tgt, next, sizeof(next)) == 0 && next[0]) {
			fd = mkdirs(rootfd, next, mode, depth + 1);
			if (fd < 0)
				return fd;
			close(fd);
		}
	}
	return open_dir_in_root(rootfd, path);
}

int oci_root_mkdirs(int rootfd, const char *path, mode_t mode)
{
	return mkdirs(rootfd, path, mode, 0);
}

/* "./a//b/" -> "a/b"; -EXDEV if a component is "..". */
static int clean_path(const char *in, char *out, size_t len)
{
	size_t o = 0;
	const char *p = in;

	while (*p) {
		const char *e;
		size_t n;

		while (*p == '/')
			p++;
		e = p + strcspn(p, "/");
		n = (size_t)(e - p);
		if (n == 0)
			break;
		if (n == 2 && !memcmp(p, "..", 2))
			return -EXDEV;
		if (!(n == 1 && *p == '.')) {
			if (o + n + 2 > len)
				return -ENAMETOOLONG;
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p = e;
	}
	out[o] = '\0';
	return 0;
}

/* Removes dirfd/name and, for a directory, all below it. */
static int remove_at(int dir, const char *name, unsigned depth)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int fd, r = 0;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dir, name, 0) < 0 ? -errno : 0;
	if (depth > 256)
		return -ELOOP;
	fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((e = readdir(d)) && !r)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			r = remove_at(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	if (!r && unlinkat(dir, name, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

/* ---- one layer ---------------------------------------------------------------- */

/* The paths this layer has written (opaque directories keep them). */
struct pathset {
	char **v;
	size_t cap, n;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return h;
}

static int set_add(struct pathset *ps, const char *p)
{
	size_t i;

	if ((ps->n + 1) * 2 > ps->cap) {
		struct pathset nw = { calloc(ps->cap ? ps->cap * 2 : 256, sizeof(char *)), ps->cap ? ps->cap * 2 : 256, 0 };

		if (!nw.v)
			return -ENOMEM;
		for (i = 0; i < ps->cap; i++) {
			if (ps->v[i]) {
				size_t j = hash_str(ps->v[i]) & (nw.cap - 1);

				while (nw.v[j])
					j = (j + 1) & (nw.cap - 1);
				nw.v[j] = ps->v[i];
				nw.n++;
			}
		}
		free(ps->v);
		*ps = nw;
	}
	for (i = hash_str(p) & (ps->cap - 1); ps->v[i]; i = (i + 1) & (ps->cap - 1))
		if (!strcmp(ps->v[i], p))
			return 0;
	if (!(ps->v[i] = strdup(p)))
		return -ENOMEM;
	ps->n++;
	return 0;
}

static int set_has(const struct pathset *ps, const char *p)
{
	size_t i;

	if (!ps->cap)
		return 0;
	for (i = hash_str(p) & (ps->cap - 1); ps->v[i]; i = (i + 1) & (ps->cap - 1))
		if (!strcmp(ps->v[i], p))
			return 1;
	return 0;
}

static void set_free(struct pathset *ps)
{
	for (size_t i = 0; i < ps->cap; i++)
		free(ps->v[i]);
	free(ps->v);
	memset(ps, 0, sizeof(*ps));
}

struct layer {
	int rootfd;
	struct src *s;
	struct pathset written;
	struct unpack_stats *st;
	char *err;
	size_t errlen;
	char xattrs[XATTR_BUF];
	size_t xlen;
	int is_root;
};

/* Opaque: removes from dir (path) what lower layers put there. */
static int opaque(struct layer *L, const char *dir)
{
	int fd = open_dir_in_root(L->rootfd, dir), r = 0;
	char child[8200];
	struct dirent *e;
	DIR *d;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return fd < 0 ? fd : -errno;
	}
	while ((e = readdir(d)) && !r) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(child, sizeof(child), "%s%s%s", dir, *dir ? "/" : "", e->d_name);
		if (!set_has(&L->written, child))
			r = remove_at(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	return r;
}

static void set_xattrs(struct layer *L, int fd)
{
	size_t off = 0;

	while (off < L->xlen) {
		const char *name = L->xattrs + off;
		uint32_t vl;

		off += strlen(name) + 1;
		memcpy(&vl, L->xattrs + off, 4);
		off += 4;
		(void)fsetxattr(fd, name, L->xattrs + off, vl, 0);
		off += vl;
	}
}

static void set_owner_mode(struct layer *L, int pfd, const char *base, const struct tar_hdr *h, int link)
{
	struct timespec ts[2] = { { (time_t)h->mtime, 0 }, { (time_t)h->mtime, 0 } };

	if (L->is_root) {
		if (fchownat(pfd, base, h->uid, h->gid, AT_SYMLINK_NOFOLLOW) < 0)
			L->st->chown_skipped = 1;
	} else {
		L->st->chown_skipped = 1;
	}
	if (!link)
		(void)fchmodat(pfd, base, h->mode, 0);
	(void)utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
}

static int copy_data(struct layer *L, int fd, uint64_t size)
{
	char buf[BUF];
	int r;

	while (size) {
		size_t k = size < sizeof(buf) ? (size_t)size : sizeof(buf);

		if ((r = src_read(L->s, buf, k)))
			return r;
		if (fd >= 0 && write(fd, buf, k) != (ssize_t)k)
			return -errno ? -errno : -EIO;
		size -= k;
		L->st->bytes += k;
	}
	return 0;
}

static int apply(struct layer *L, struct tar_hdr *h)
{
	char path[4097], parent[4097], *base, *slash;
	struct stat st;
	int pfd = -1, fd = -1, r;
	uint64_t pad;

	/* Header-only types carry no data whatever their size field says. */
	if (strchr("123456", h->type) && h->type)
		h->size = 0;
	pad = (512 - (h->size & 511)) & 511;
	r = clean_path(h->name, path, sizeof(path));
	if (r == -EXDEV)
		return cli_seterr(L->err, L->errlen, r, "entry '%.200s' escapes the root", h->name);
	if (r)
		return cli_seterr(L->err, L->errlen, r, "entry name too long");
	if (!path[0]) { /* the root itself: only its metadata */
		r = copy_data(L, -1, h->size);
		return r ? r : src_read(L->s, NULL, (size_t)pad);
	}
	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (slash)
		*slash = '\0';
	else
		parent[0] = '\0';
	base = slash ? path + (slash - parent) + 1 : path;
	pfd = oci_root_mkdirs(L->rootfd, parent, 0755);
	if (pfd < 0) {
		r = cli_seterr(L->err, L->errlen, pfd, "entry '%.200s': its directory: %s", h->name, strerror(-pfd));
		goto out;
	}
	/* Whiteouts (image-spec layer.md). */
	if (!strncmp(base, ".wh.", 4)) {
		if (!strcmp(base, ".wh..wh..opq")) {
			r = opaque(L, parent);
		} else if (!strncmp(base, ".wh..wh.", 8) || !strcmp(base, ".wh.") || !strcmp(base, ".wh..")) {
			r = 0; /* other AUFS metadata: nothing to do */
		} else if (!strcmp(base, ".wh...")) {
			/* its victim would be "..": the parent's parent, outside the root at the top */
			r = cli_seterr(L->err, L->errlen, -EXDEV, "whiteout '%.200s' escapes the root", h->name);
			goto out;
		} else {
			char victim[4097];

			snprintf(victim, sizeof(victim), "%s%s%s", parent, *parent ? "/" : "", base + 4);
			r = set_has(&L->written, victim) ? 0 : remove_at(pfd, base + 4, 0);
		}
		L->st->whiteouts++;
		if (r) {
			cli_seterr(L->err, L->errlen, r, "whiteout '%.200s': %s", h->name, strerror(-r));
			goto out;
		}
		r = copy_data(L, -1, h->size);
		goto out;
	}
	if (h->type == '3' || h->type == '4') {
		if (!L->st->devices++)
			snprintf(L->st->first_device, sizeof(L->st->first_device), "/%.120s", path);
		r = copy_data(L, -1, h->size);
		goto out;
	}
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (h->type == '5' && S_ISDIR(st.st_mode))
			goto meta;
		if ((r = remove_at(pfd, base, 0))) {
			cli_seterr(L->err, L->errlen, r, "entry '%.200s': replacing: %s", h->name, strerror(-r));
			goto out;
		}
	}
	switch (h->type) {
	case '0': case '\0': case '7':
		fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = cli_seterr(L->err, L->errlen, -errno, "entry '%.200s': %s", h->name, strerror(errno));
			goto out;
		}
		if ((r = copy_data(L, fd, h->size))) {
			if (r != -EPIPE && !L->s->err)
				cli_seterr(L->err, L->errlen, r, "entry '%.200s': %s", h->name, strerror(-r));
			goto out;
		}
		set_xattrs(L, fd);
		break;
	case '5':
		if (mkdirat(pfd, base, 0755) < 0) {
			r = cli_seterr(L->err, L->errlen, -errno, "entry '%.200s': %s", h->name, strerror(errno));
			goto out;
		}
		break;
	case '2':
		if (symlinkat(h->link, pfd, base) < 0) {
			r = cli_seterr(L->err, L->errlen, -errno, "entry '%.200s': %s", h->name, strerror(errno));
			goto out;
		}
		break;
	case '6':
		if (mknodat(pfd, base, S_IFIFO | 0600, 0) < 0) {
			r = cli_seterr(L->err, L->errlen, -errno, "entry '%.200s': %s", h->name, strerror(errno));
			goto out;
		}
		break;
	case '1': {
		char tpath[4097], tparent[4097], *ts;
		int tfd;

		r = clean_path(h->link, tpath, sizeof(tpath));
		if (r || !tpath[0]) {
			r = cli_seterr(L->err, L->errlen, -EXDEV, "hard link '%.200s' -> '%.200s' escapes the root", h->name,
				   h->link);
			goto out;
		}
		snprintf(tparent, sizeof(tparent), "%s", tpath);
		ts = strrchr(tparent, '/');
		if (ts)
			*ts = '\0';
		tfd = open_dir_in_root(L->rootfd, ts ? tparent : "");
		if (tfd < 0 || linkat(tfd, ts ? ts + 1 : tpath, pfd, base, 0) < 0) {
			r = cli_seterr(L->err, L->errlen, tfd < 0 ? tfd : -errno, "hard link '%.200s' -> '%.200s': %s",
				   h->name, h->link, strerror(tfd < 0 ? -tfd : errno));
			if (tfd >= 0)
				close(tfd);
			goto out;
		}
		close(tfd);
		L->st->entries++;
		r = set_add(&L->written, path);
		goto out;
	}
	default:
		/* Sparse files and the like: the data is skipped, with the entry. */
		r = copy_data(L, -1, h->size);
		goto out;
	}
meta:
	if (h->type == '5' && L->xlen) {
		int dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (dfd >= 0) {
			set_xattrs(L, dfd);
			close(dfd);
		}
	}
	set_owner_mode(L, pfd, base, h, h->type == '2');
	L->st->entries++;
	r = set_add(&L->written, path);
out:
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	if (!r)
		r = src_read(L->s, NULL, (size_t)pad);
	return r;
}

static int read_long(struct layer *L, uint64_t size, char *out, size_t cap)
{
	uint64_t pad = (512 - (size & 511)) & 511;
	int r;

	if (size >= cap)
		return cli_seterr(L->err, L->errlen, -EINVAL, "a long name record of %llu bytes",
			      (unsigned long long)size);
	if ((r = src_read(L->s, out, (size_t)size)) || (r = src_read(L->s, NULL, (size_t)pad)))
		return r;
	out[size] = '\0';
	return 0;
}

static int run_tar(struct layer *L)
{
	unsigned char blk[512];
	char *pax = NULL, longname[4097] = "", longlink[4097] = "";
	size_t paxlen = 0;
	uint64_t nent = 0;
	int r, have_pax = 0;

	for (;;) {
		struct tar_hdr h;

		if ((r = src_read(L->s, blk, sizeof(blk))))
			break;
		r = tar_header_parse(blk, &h);
		if (r == 1) {
			r = 0; /* the end; the rest (a second zero block, padding) is drained by the caller */
			break;
		}
		if (r) {
			cli_seterr(L->err, L->errlen, r, "not a tar stream (bad header after %llu entries)",
			       (unsigned long long)L->st->entries);
			break;
		}
		if (h.type == 'x' || h.type == 'g') {
			uint64_t pad = (512 - (h.size & 511)) & 511;

			if (h.size > PAX_MAX) {
				r = cli_seterr(L->err, L->errlen, -EINVAL, "a pax header of %llu bytes", (unsigned long long)h.size);
				break;
			}
			free(pax);
			if (!(pax = malloc((size_t)h.size + 1))) {
				r = -ENOMEM;
				break;
			}
			if ((r = src_read(L->s, pax, (size_t)h.size)) || (r = src_read(L->s, NULL, (size_t)pad)))
				break;
			paxlen = (size_t)h.size;
			have_pax = h.type == 'x';
			continue;
		}
		if (h.type == 'L' || h.type == 'K') {
			if ((r = read_long(L, h.size, h.type == 'L' ? longname : longlink, sizeof(longname))))
				break;
			continue;
		}
		if (++nent > L->s->lim->entries) {
			r = cli_seterr(L->err, L->errlen, -EFBIG, "the layer has more than %llu entries, %s",
				       (unsigned long long)L->s->lim->entries, L->s->lim->entries_what);
			break;
		}
		if (longname[0])
			memcpy(h.name, longname, strlen(longname) + 1);
		if (longlink[0])
			memcpy(h.link, longlink, strlen(longlink) + 1);
		longname[0] = longlink[0] = '\0';
		L->xlen = 0;
		if (have_pax) {
			if (tar_pax_parse(pax, paxlen, &h, L->xattrs, sizeof(L->xattrs), &L->xlen)) {
				r = cli_seterr(L->err, L->errlen, -EINVAL, "a malformed pax header before '%.200s'", h.name);
				break;
			}
			have_pax = 0;
		}
		if ((r = apply(L, &h)))
			break;
	}
	free(pax);
	return r;
}

static int unpack(int rootfd, struct src *s, const char *digest, const char *diff_id, struct unpack_stats *st,
		  char *err, size_t errlen)
{
	struct layer *L = calloc(1, sizeof(*L));
	char got[OCI_DIGEST_MAX];
	int r;

	if (!L)
		return -ENOMEM;
	memset(st, 0, sizeof(*st));
	L->rootfd = rootfd;
	L->s = s;
	L->st = st;
	L->err = err;
	L->errlen = errlen;
	L->is_root = geteuid() == 0;
	err[0] = '\0';
	s->hashing = digest || diff_id;
	if (s->hashing && (oci_hash_init(&s->raw_hash) || oci_hash_init(&s->tar_hash))) {
		r = -ENOMEM;
		goto out;
	}
	if ((r = src_open(s)))
		goto out;
	r = run_tar(L);
	/* Drain what follows the end marker: all of it counts for the digests. */
	while (!r && !s->dec_eof) {
		s->outpos = s->outlen;
		r = fill_out(s);
	}
	st->tar_bytes = s->tar_total;
	if (r) {
		if (!err[0])
			cli_seterr(err, errlen, r, "%s", s->err ? s->err : strerror(-r));
		goto out;
	}
	if (digest) {
		oci_hash_final(&s->raw_hash, got);
		if (strcmp(got, digest)) {
			r = cli_seterr(err, errlen, -EBADMSG, "digest mismatch: the data is %.19s...", got);
			goto out;
		}
	}
	if (diff_id) {
		oci_hash_final(&s->tar_hash, got);
		if (strcmp(got, diff_id)) {
			r = cli_seterr(err, errlen, -EBADMSG, "the uncompressed layer is %.19s..., the config says %.19s...",
				   got, diff_id);
			goto out;
		}
	}
out:
	src_close(s);
	set_free(&L->written);
	free(L);
	return r;
}

void oci_unpack_limits(const struct oci_limits *l, uint64_t image_used, struct unpack_limits *out)
{
	uint64_t left = image_used < l->image_tar ? l->image_tar - image_used : 0;

	out->tar_bytes = l->layer_tar < left ? l->layer_tar : left;
	out->tar_what = l->layer_tar < left ? "the per-layer cap (--max-layer-unpacked, $VMM_UNPACK_MAX_LAYER)"
					    : "what is left of the per-image cap (--max-unpacked, $VMM_UNPACK_MAX_IMAGE)";
	out->entries = l->entries;
	out->entries_what = "the cap (--max-entries, $VMM_UNPACK_MAX_ENTRIES)";
}

static void default_limits(struct unpack_limits *out)
{
	struct oci_limits l;

	(void)oci_limits_init(&l, NULL, 0); /* a malformed setting keeps its default */
	oci_unpack_limits(&l, 0, out);
}

int oci_unpack_fd_limited(int rootfd, int fd, const char *digest, const char *diff_id, const struct unpack_limits *lim,
			  struct unpack_stats *st, char *err, size_t errlen)
{
	struct src *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->fd = fd;
	s->lim = lim;
	r = unpack(rootfd, s, digest, diff_id, st, err, errlen);
	free(s);
	return r;
}

int oci_unpack_fd(int rootfd, int fd, const char *digest, const char *diff_id, struct unpack_stats *st, char *err,
		  size_t errlen)
{
	struct unpack_limits lim;

	default_limits(&lim);
	return oci_unpack_fd_limited(rootfd, fd, digest, diff_id, &lim, st, err, errlen);
}

int oci_unpack_mem(int rootfd, const void *buf, size_t len, struct unpack_stats *st, char *err, size_t errlen)
{
	struct unpack_limits lim;

	default_limits(&lim);
	return oci_unpack_mem_limited(rootfd, buf, len, &lim, st, err, errlen);
}

int oci_unpack_mem_limited(int rootfd, const void *buf, size_t len, const struct unpack_limits *lim,
			   struct unpack_stats *st, char *err, size_t errlen)
{
	struct src *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->lim = lim;
	s->fd = -1;
	s->mem = buf;
	s->memlen = len;
	if (!buf)
		s->mem = (const unsigned char *)"";
	r = unpack(rootfd, s, NULL, NULL, st, err, errlen);
	free(s);
	return r;
}

int oci_root_put(int rootfd, const char *path, int srcfd, const void *data, size_t len, mode_t mode,
		 int only_if_missing)
{
	char clean[4097], parent[4097], *slash;
	const char *base;
	struct stat st;
	int pfd, fd, r = 0;

	if ((r = clean_path(path, clean, sizeof(clean))) || !clean[0])
		return r ? r : -EINVAL;
	snprintf(parent, sizeof(parent), "%s", clean);
	slash = strrchr(parent, '/');
	if (slash)
		*slash = '\0';
	base = slash ? clean + (slash - parent) + 1 : clean;
	pfd = oci_root_mkdirs(rootfd, slash ? parent : "", 0755);
	if (pfd < 0)
		return pfd;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (only_if_missing)
			goto out;
		if ((r = remove_at(pfd, base, 0)))
			goto out;
	}
	fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	if (srcfd >= 0) {
		char buf[BUF];
		ssize_t n;

		while ((n = read(srcfd, buf, sizeof(buf))) > 0)
			if (write(fd, buf, (size_t)n) != n) {
				r = -EIO;
				break;
			}
		if (n < 0)
			r = -errno;
	} else if (len && write(fd, data, len) != (ssize_t)len) {
		r = -EIO;
	}
	if (!r && fchmod(fd, mode) < 0)
		r = -errno;
	close(fd);
	if (r)
		unlinkat(pfd, base, 0);
out:
	close(pfd);
	return r;
}
