/* vmm/wire/tar.c: the writer and the extractor round trip (modes,
 * times, links, long names through pax), and the extractor refuses
 * hostile archives ("../x", "/etc/x", a symlink then a file through it, a
 * hard link out, huge sizes, truncated headers, bad checksums, limits)
 * leaving nothing half-written. Against temporary directories. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/wire/tar.h"

struct mem {
	unsigned char *b;
	size_t n, cap;
};

static int mem_out(void *ctx, const void *buf, size_t len)
{
	struct mem *m = ctx;

	if (m->n + len > m->cap) {
		m->cap = (m->n + len) * 2;
		m->b = realloc(m->b, m->cap);
		if (!m->b)
			return -ENOMEM;
	}
	memcpy(m->b + m->n, buf, len);
	m->n += len;
	return 0;
}

static void put(struct mem *m, const void *b, size_t n)
{
	assert_int_equal(mem_out(m, b, n), 0);
}

/* A ustar header (its checksum right unless bad_sum). */
static void hdr(struct mem *m, const char *name, char type, uint64_t size, const char *link, int bad_sum)
{
	unsigned char h[512] = { 0 };
	unsigned s = 0;

	memcpy(h, name, strnlen(name, 100));
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	if (size >> 33) {
		h[124] = 0x80;
		for (int i = 0; i < 8; i++)
			h[135 - i] = (unsigned char)(size >> (8 * i));
	} else {
		snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	}
	snprintf((char *)h + 136, 12, "%011o", 1000000000);
	h[156] = (unsigned char)type;
	if (link)
		memcpy(h + 157, link, strnlen(link, 100));
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		s += h[i];
	snprintf((char *)h + 148, 8, "%06o", bad_sum ? s + 1 : s);
	put(m, h, 512);
}

static void data(struct mem *m, const char *d, size_t n)
{
	static const unsigned char z[512];

	put(m, d, n);
	put(m, z, (512 - n % 512) % 512);
}

static void end(struct mem *m)
{
	static const unsigned char z[1024];

	put(m, z, sizeof(z));
}

/* One pax record "LEN key=value\n" into buf (the length counts its own digits). */
static int pax_rec(char *buf, size_t cap, const char *key, const char *val)
{
	int kv = (int)(strlen(key) + strlen(val) + 3), len = kv + 1;

	while (kv + snprintf(NULL, 0, "%d", len) != len)
		len = kv + snprintf(NULL, 0, "%d", len);
	return snprintf(buf, cap, "%d %s=%s\n", len, key, val);
}

static char *mktmp(void)
{
	char *d = strdup("/tmp/test_tar.XXXXXX");

	assert_non_null(mkdtemp(d));
	return d;
}

static void rmrf(const char *p)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
	assert_int_equal(system(cmd), 0);
}

static size_t count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* Extracts m into dir (fed in chunks of `chunk`): feed's, then finish's result. */
static int extract(const struct mem *m, const char *dir, size_t chunk, char *err, size_t errlen,
		   const struct tar_limits *lim)
{
	struct tar_x x;
	int fd = open(dir, O_RDONLY | O_DIRECTORY), r = 0;
	size_t off;

	assert_true(fd >= 0);
	tar_x_init(&x, fd, lim);
	for (off = 0; off < m->n && !r; off += chunk)
		r = tar_x_feed(&x, m->b + off, m->n - off < chunk ? m->n - off : chunk);
	if (!r)
		r = tar_x_finish(&x);
	snprintf(err, errlen, "%s", x.err);
	tar_x_free(&x);
	close(fd);
	return r;
}

static void writef(const char *path, const char *s, mode_t mode, time_t mtime)
{
	FILE *f = fopen(path, "w");
	struct timespec ts[2] = { { .tv_sec = mtime }, { .tv_sec = mtime } };

	assert_non_null(f);
	fputs(s, f);
	fclose(f);
	chmod(path, mode);
	utimensat(AT_FDCWD, path, ts, 0);
}

static void test_round_trip(void **state)
{
	char *src = mktmp(), *dst = mktmp(), p[PATH_MAX], q[PATH_MAX + 32], longname[300], target[220], err[400];
	struct mem m = { 0 };
	struct tar_w w = { .out = mem_out, .ctx = &m };
	struct stat st;
	ssize_t n;

	(void)state;
	snprintf(p, sizeof(p), "%s/a/b/c", src);
	snprintf(q, sizeof(q), "mkdir -p '%s'", p);
	assert_int_equal(system(q), 0);
	snprintf(p, sizeof(p), "%s/a/f", src);
	writef(p, "hello\n", 0640, 1234567890);
	snprintf(p, sizeof(p), "%s/a/b/c/empty", src);
	writef(p, "", 0600, 1000);
	/* a 250-byte name in one component: no ustar split, a pax path */
	memset(longname, 'n', 250);
	longname[250] = '\0';
	snprintf(p, sizeof(p), "%s/a/%s", src, longname);
	writef(p, "long\n", 0755, 2000);
	memset(target, 't', 200);
	target[200] = '\0';
	snprintf(p, sizeof(p), "%s/a/link", src);
	assert_int_equal(symlink(target, p), 0);
	snprintf(p, sizeof(p), "%s/a/b", src);
	chmod(p, 0750);

	snprintf(p, sizeof(p), "%s/a", src);
	assert_int_equal(tar_w_path(&w, AT_FDCWD, p, "."), 0);
	assert_int_equal(tar_w_finish(&w), 0);
	assert_int_equal(w.st.files, 3);
	assert_int_equal(w.st.links, 1);
	assert_int_equal(w.st.dirs, 3);

	/* fed a byte at a time and whole */
	for (size_t chunk = 1; chunk <= 1u << 20; chunk <<= 20) {
		assert_int_equal(extract(&m, dst, chunk, err, sizeof(err), NULL), 0);
		snprintf(p, sizeof(p), "%s/f", dst);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0640);
		assert_int_equal(st.st_mtime, 1234567890);
		assert_int_equal(st.st_size, 6);
		snprintf(p, sizeof(p), "%s/%s", dst, longname);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0755);
		snprintf(p, sizeof(p), "%s/b/c/empty", dst);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_size, 0);
		assert_int_equal(st.st_mtime, 1000);
		snprintf(p, sizeof(p), "%s/b", dst);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0750);
		snprintf(p, sizeof(p), "%s/link", dst);
		n = readlink(p, q, sizeof(q));
		assert_int_equal(n, 200);
		assert_memory_equal(q, target, 200);
		rmrf(dst);
		assert_int_equal(mkdir(dst, 0700), 0);
	}
	/* a name as the top: everything under "top/" */
	m.n = 0;
	memset(&w.st, 0, sizeof(w.st));
	snprintf(p, sizeof(p), "%s/a", src);
	assert_int_equal(tar_w_path(&w, AT_FDCWD, p, "top"), 0);
	assert_int_equal(tar_w_finish(&w), 0);
	assert_int_equal(extract(&m, dst, 4096, err, sizeof(err), NULL), 0);
	snprintf(p, sizeof(p), "%s/top/b/c/empty", dst);
	assert_int_equal(access(p, F_OK), 0);
	/* the writer's depth bound */
	m.n = 0;
	memset(&w.st, 0, sizeof(w.st));
	w.lim.max_depth = 1;
	snprintf(p, sizeof(p), "%s/a", src);
	assert_int_equal(tar_w_path(&w, AT_FDCWD, p, "."), -ELOOP);
	assert_non_null(strstr(w.err, "deeper than 1"));
	rmrf(src);
	rmrf(dst);
	free(src);
	free(dst);
	free(m.b);
}

static void test_pax_and_gnu_names(void **state)
{
	char *dst = mktmp(), name[400], rec[600], p[PATH_MAX], err[400];
	struct mem m = { 0 };
	int n;

	(void)state;
	/* pax: a path of 3 components past 100 bytes */
	snprintf(name, sizeof(name), "%0120d/%0120d/file", 1, 2);
	n = pax_rec(rec, sizeof(rec), "path", name);
	hdr(&m, "PaxHeader", 'x', (uint64_t)n, NULL, 0);
	data(&m, rec, (size_t)n);
	hdr(&m, "ignored-short-name", '0', 3, NULL, 0);
	data(&m, "pax", 3);
	/* GNU ././@LongLink */
	snprintf(rec, sizeof(rec), "%.*sgnu", (int)strlen(name) - 4, name);
	hdr(&m, "././@LongLink", 'L', strlen(rec) + 1, NULL, 0);
	data(&m, rec, strlen(rec) + 1);
	hdr(&m, "x", '0', 3, NULL, 0);
	data(&m, "gnu", 3);
	end(&m);
	assert_int_equal(extract(&m, dst, 512, err, sizeof(err), NULL), 0);
	snprintf(p, sizeof(p), "%s/%s", dst, name);
	assert_int_equal(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/%.*sgnu", dst, (int)strlen(name) - 4, name);
	assert_int_equal(access(p, F_OK), 0);
	/* a malformed pax record */
	m.n = 0;
	hdr(&m, "PaxHeader", 'x', 12, NULL, 0);
	data(&m, "99 path=abc\n", 12);
	hdr(&m, "f", '0', 0, NULL, 0);
	end(&m);
	assert_int_equal(extract(&m, dst, 512, err, sizeof(err), NULL), -EPROTO);
	assert_non_null(strstr(err, "pax"));
	/* a pax header past its bound */
	m.n = 0;
	hdr(&m, "PaxHeader", 'x', TAR_PAX_MAX + 1, NULL, 0);
	assert_int_equal(extract(&m, dst, 512, err, sizeof(err), NULL), -EPROTO);
	assert_non_null(strstr(err, "extended header"));
	rmrf(dst);
	free(dst);
	free(m.b);
}

/* Each hostile archive is refused with its message and leaves `outside`
 * empty and dst holding only `left` entries. */
static void refused(struct mem *m, const char *why, size_t left)
{
	char *top = mktmp(), dst[PATH_MAX], outside[PATH_MAX], err[400];

	snprintf(dst, sizeof(dst), "%s/dst", top);
	snprintf(outside, sizeof(outside), "%s/outside", top);
	assert_int_equal(mkdir(dst, 0700), 0);
	assert_int_equal(mkdir(outside, 0700), 0);
	assert_int_not_equal(extract(m, dst, 100, err, sizeof(err), NULL), 0);
	if (!strstr(err, why))
		fail_msg("wanted \"%s\" in \"%s\"", why, err);
	assert_int_equal(count_entries(outside), 0);
	assert_int_equal(count_entries(top), 2);
	if (count_entries(dst) != left)
		fail_msg("%zu entries left in dst (%s), wanted %zu", count_entries(dst), why, left);
	rmrf(top);
	free(top);
	m->n = 0;
}

static void test_hostile(void **state)
{
	struct mem m = { 0 };
	char name[PATH_MAX];

	(void)state;
	hdr(&m, "../outside/x", '0', 5, NULL, 0);
	data(&m, "pwned", 5);
	end(&m);
	refused(&m, "'..'", 0);

	hdr(&m, "a/../../outside/x", '0', 5, NULL, 0);
	data(&m, "pwned", 5);
	end(&m);
	refused(&m, "'..'", 0);

	hdr(&m, "/etc/x", '0', 5, NULL, 0);
	data(&m, "pwned", 5);
	end(&m);
	refused(&m, "absolute", 0);

	/* a symlink to outside, then a file through it */
	hdr(&m, "l", '2', 0, "../outside", 0);
	hdr(&m, "l/x", '0', 5, NULL, 0);
	data(&m, "pwned", 5);
	end(&m);
	refused(&m, "symbolic link", 1);

	/* the same with a directory entry through it */
	hdr(&m, "l", '2', 0, "../outside", 0);
	hdr(&m, "l/", '5', 0, NULL, 0);
	end(&m);
	refused(&m, "something else than a directory", 1);

	/* a hard link out of the destination */
	hdr(&m, "h", '1', 0, "../outside/x", 0);
	end(&m);
	refused(&m, "outside the destination", 0);

	/* a huge size, then the stream ends: no file left, not even its temporary */
	hdr(&m, "big", '0', 1ull << 40, NULL, 0);
	data(&m, "some", 4);
	refused(&m, "truncated", 0);

	/* a size past int64 */
	hdr(&m, "big", '0', UINT64_MAX, NULL, 0);
	refused(&m, "", 0);

	/* a truncated header */
	hdr(&m, "f", '0', 0, NULL, 0);
	m.n = 300;
	refused(&m, "inside a header", 0);

	/* a bad checksum */
	hdr(&m, "f", '0', 0, NULL, 1);
	end(&m);
	refused(&m, "checksum", 0);

	/* not an archive at all */
	for (int i = 0; i < 1024; i++)
		put(&m, "x", 1);
	refused(&m, "checksum", 0);

	/* no end blocks */
	hdr(&m, "f", '0', 0, NULL, 0);
	refused(&m, "end-of-archive", 1);

	/* a file onto a directory that is there */
	hdr(&m, "d/", '5', 0, NULL, 0);
	hdr(&m, "d", '0', 1, NULL, 0);
	data(&m, "x", 1);
	end(&m);
	refused(&m, "directory", 1);

	/* depth and entry limits */
	name[0] = '\0';
	for (int i = 0; i < TAR_DEPTH_DEFAULT + 1; i++)
		strcat(name, "d/");
	{
		char rec[PATH_MAX + 32];
		int n = pax_rec(rec, sizeof(rec), "path", name);

		hdr(&m, "PaxHeader", 'x', (uint64_t)n, NULL, 0);
		data(&m, rec, (size_t)n);
		hdr(&m, "x/", '5', 0, NULL, 0);
		end(&m);
		refused(&m, "deeper than", 0);
	}
	{
		char *dst = mktmp(), err[400];
		struct tar_limits lim = { .max_entries = 2 };

		for (int i = 0; i < 3; i++) {
			char n[8];

			snprintf(n, sizeof(n), "f%d", i);
			hdr(&m, n, '0', 0, NULL, 0);
		}
		end(&m);
		assert_int_equal(extract(&m, dst, 512, err, sizeof(err), &lim), -E2BIG);
		assert_non_null(strstr(err, "more than 2 entries"));
		rmrf(dst);
		free(dst);
		m.n = 0;
	}
	free(m.b);
}

static void test_numbers_and_names(void **state)
{
	uint64_t v;
	unsigned d;
	unsigned char f[12];

	(void)state;
	assert_int_equal(tar_number((const unsigned char *)"0000644\0", 8, &v), 0);
	assert_int_equal(v, 0644);
	assert_int_equal(tar_number((const unsigned char *)"  644 \0\0", 8, &v), 0);
	assert_int_equal(v, 0644);
	assert_int_equal(tar_number((const unsigned char *)"0009\0\0\0\0", 8, &v), -EINVAL);
	memset(f, 0, sizeof(f));
	f[0] = 0x80;
	f[11] = 5;
	f[10] = 1;
	assert_int_equal(tar_number(f, 12, &v), 0);
	assert_int_equal(v, 261);
	f[0] = 0xff;
	assert_int_equal(tar_number(f, 12, &v), -EINVAL);
	memset(f, 0xff, sizeof(f));
	f[0] = 0x80;
	assert_int_equal(tar_number(f, 12, &v), -EINVAL);
	assert_int_equal(tar_name_check("a/./b//c/", 8, &d), 0);
	assert_int_equal(d, 3);
	assert_int_equal(tar_name_check("./", 8, &d), 0);
	assert_int_equal(d, 0);
	assert_int_equal(tar_name_check("a/..", 8, &d), -EINVAL);
	assert_int_equal(tar_name_check("/a", 8, &d), -EINVAL);
	assert_int_equal(tar_name_check("a/b/c", 2, &d), -ELOOP);
	assert_int_equal(tar_name_check("a/..b", 8, &d), 0);
}

/* An archive that names the extractor's temporaries as they used to be
 * (".vmm-tar-PID-SEQ", PID guessable) plants a file and a symbolic link at
 * the names the next entries would have used: every entry still lands,
 * as the names it gave, and no temporary is left. */
static void test_planted_temporaries(void **state)
{
	struct mem m = { 0 };
	char *dir = mktmp(), name[64], path[PATH_MAX], err[400], buf[8] = { 0 };
	FILE *f;

	(void)state;
	snprintf(name, sizeof(name), ".vmm-tar-%d-1", (int)getpid());
	hdr(&m, name, '0', 3, NULL, 0);
	data(&m, "one", 3);
	snprintf(name, sizeof(name), ".vmm-tar-%d-2", (int)getpid());
	hdr(&m, name, '2', 0, "/etc/passwd", 0);
	hdr(&m, "a", '0', 3, NULL, 0);
	data(&m, "aaa", 3);
	hdr(&m, "b", '0', 3, NULL, 0);
	data(&m, "bbb", 3);
	end(&m);
	assert_int_equal(extract(&m, dir, 512, err, sizeof(err), NULL), 0);
	assert_int_equal(count_entries(dir), 4);
	snprintf(path, sizeof(path), "%s/b", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, 7, f), 3);
	fclose(f);
	assert_string_equal(buf, "bbb");
	rmrf(dir);
	free(dir);
	free(m.b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_pax_and_gnu_names),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_numbers_and_names),
		cmocka_unit_test(test_planted_temporaries),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
