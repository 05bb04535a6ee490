/* mkcpio: write an uncompressed initramfs (cpio "newc") from a list file,
 * without root (device nodes are described, not copied). An uncompressed
 * initramfs matters where guest ring 0 is emulated: unpacking gzip there
 * costs over a minute.
 *
 *   mkcpio LIST OUT
 *
 * LIST lines (paths in the archive are absolute; $NAME is taken from the
 * environment):
 *   dir   PATH MODE
 *   file  PATH SOURCE MODE
 *   slink PATH TARGET
 *   nod   PATH MODE c|b MAJOR MINOR
 * Owners are root, times are 0: the archive is reproducible. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct out {
	FILE *f;
	unsigned long ino;
	unsigned long long off;
};

static int pad4(struct out *o)
{
	while (o->off % 4) {
		if (fputc(0, o->f) == EOF)
			return -1;
		o->off++;
	}
	return 0;
}

static int put(struct out *o, const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, o->f) != n)
		return -1;
	o->off += n;
	return 0;
}

static int entry(struct out *o, const char *name, unsigned mode, unsigned long size,
		 unsigned rmaj, unsigned rmin, const void *data)
{
	char hdr[160];
	size_t nlen = strlen(name) + 1;

	if (size > 0xffffffffUL || nlen > 0xffffffffUL)
		return -1; /* newc fields are 32 bits */
	snprintf(hdr, sizeof(hdr),
		 "070701%08lX%08X%08X%08X%08X%08X%08lX%08X%08X%08X%08X%08zX%08X",
		 o->ino++ & 0xffffffffUL, mode, 0u, 0u, (mode & S_IFMT) == S_IFDIR ? 2u : 1u, 0u,
		 size, 0u, 0u, rmaj, rmin, nlen, 0u);
	if (put(o, hdr, 110) || put(o, name, nlen) || pad4(o) || put(o, data, size) || pad4(o))
		return -1;
	return 0;
}

static const char *expand(const char *s, int line)
{
	const char *v;

	if (s[0] != '$')
		return s;
	v = getenv(s + 1);
	if (!v || !*v) {
		fprintf(stderr, "mkcpio: line %d: %s is not set\n", line, s);
		exit(1);
	}
	return v;
}

static char *slurp(const char *path, unsigned long *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (unsigned long)n;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	struct out o = { NULL, 1, 0 };
	char line[4096], tmp[4200];
	FILE *list;
	int ln = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: mkcpio LIST OUT\n");
		return 2;
	}
	list = fopen(argv[1], "r");
	if (!list) {
		perror(argv[1]);
		return 1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]);
	o.f = fopen(tmp, "wb");
	if (!o.f) {
		perror(tmp);
		return 1;
	}
	while (fgets(line, sizeof(line), list)) {
		char kind[16], path[1024], a[1024], b[64], c[64], d[64];
		int n;

		ln++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		n = sscanf(line, "%15s %1023s %1023s %63s %63s %63s", kind, path, a, b, c, d);
		if (n < 2 || path[0] != '/')
			goto bad;
		if (!strcmp(kind, "dir") && n == 3) {
			if (entry(&o, path + 1, S_IFDIR | (unsigned)strtoul(a, NULL, 8), 0, 0, 0, NULL))
				goto io;
		} else if (!strcmp(kind, "slink") && n == 3) {
			if (entry(&o, path + 1, S_IFLNK | 0777, strlen(a), 0, 0, a))
				goto io;
		} else if (!strcmp(kind, "nod") && n == 6) {
			unsigned type = !strcmp(b, "c") ? S_IFCHR : !strcmp(b, "b") ? S_IFBLK : 0;

			if (!type)
				goto bad;
			if (entry(&o, path + 1, type | (unsigned)strtoul(a, NULL, 8), 0,
				  (unsigned)strtoul(c, NULL, 10), (unsigned)strtoul(d, NULL, 10), NULL))
				goto io;
		} else if (!strcmp(kind, "file") && n == 4) {
			const char *src = expand(a, ln);
			unsigned long len = 0;
			char *data = slurp(src, &len);

			if (!data) {
				fprintf(stderr, "mkcpio: line %d: cannot read %s: %s\n", ln, src,
					strerror(errno));
				return 1;
			}
			if (entry(&o, path + 1, S_IFREG | (unsigned)strtoul(b, NULL, 8), len, 0, 0, data))
				goto io;
			free(data);
		} else {
			goto bad;
		}
	}
	if (entry(&o, "TRAILER!!!", 0, 0, 0, 0, NULL) || fclose(o.f))
		goto io;
	fclose(list);
	if (rename(tmp, argv[2])) {
		perror(argv[2]);
		return 1;
	}
	return 0;
bad:
	fprintf(stderr, "mkcpio: %s:%d: malformed line\n", argv[1], ln);
	return 1;
io:
	fprintf(stderr, "mkcpio: writing %s: %s\n", tmp, strerror(errno));
	return 1;
}
