/* The FUSE server against a scratch directory: request parsing and reply
 * building, lying lengths, bad names, escapes, read-only refusals, FORGET
 * accounting, the inode limit, READDIR chunking, snapshots, locks (POSIX
 * and BSD, against each other and against a host process, waits,
 * interrupts, releases, bounds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "devices/fuse/fuse.h"

struct t {
	struct fuse_server s;
	char dir[64];
	uint8_t in[FUSE_MAX_BODY + 4096];
	uint8_t out[FUSE_MAX_REPLY + 4096];
	uint64_t unique;
	size_t out_size;   /* writable bytes offered (default: all) */
	int64_t ret;       /* fuse_handle's return */
	struct fuse_out_header oh;
};

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static struct t *setup_opts(int ro, uint32_t max_inodes)
{
	struct t *t = calloc(1, sizeof(*t));
	struct fuse_params p = { .tag = "test", .ro = ro, .max_inodes = max_inodes };

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/test_fuse.XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	p.path = t->dir;
	assert_int_equal(fuse_server_init(&t->s, &p), 0);
	t->out_size = sizeof(t->out);
	return t;
}

static void teardown_t(struct t *t)
{
	fuse_server_destroy(&t->s);
	nftw(t->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
}

/* Sends op with args a1 (n1 bytes) and a2 (n2); returns the reply's error
 * (0 or -errno); the payload is at t->out + 16. */
static int call2(struct t *t, uint32_t op, uint64_t nodeid, const void *a1, size_t n1, const void *a2,
		 size_t n2)
{
	struct fuse_in_header h = { .len = (uint32_t)(sizeof(h) + n1 + n2), .opcode = op,
				    .unique = ++t->unique, .nodeid = nodeid };
	struct iovec in = { t->in, sizeof(h) + n1 + n2 }, out = { t->out, t->out_size };

	memcpy(t->in, &h, sizeof(h));
	if (n1)
		memcpy(t->in + sizeof(h), a1, n1);
	if (n2)
		memcpy(t->in + sizeof(h) + n1, a2, n2);
	memset(t->out, 0xee, sizeof(t->out));
	t->ret = fuse_handle(&t->s, &in, 1, &out, 1);
	if (t->ret < (int64_t)sizeof(t->oh))
		return (int)(t->ret < 0 ? t->ret : 0);
	memcpy(&t->oh, t->out, sizeof(t->oh));
	assert_int_equal(t->oh.unique, h.unique);
	assert_int_equal(t->oh.len, t->ret);
	return t->oh.error;
}

static int call(struct t *t, uint32_t op, uint64_t nodeid, const void *a, size_t n)
{
	return call2(t, op, nodeid, a, n, NULL, 0);
}

static void *payload(struct t *t) { return t->out + sizeof(struct fuse_out_header); }

static void do_init(struct t *t)
{
	struct fuse_init_in in = { .major = 7, .minor = 38, .max_readahead = 1 << 20,
				   .flags = 0xffffffffu };
	struct fuse_init_out *o;

	assert_int_equal(call(t, FUSE_INIT, 0, &in, sizeof(in)), 0);
	o = payload(t);
	assert_int_equal(o->major, 7);
	assert_int_equal(o->minor, FUSE_OUR_MINOR);
	assert_true(o->max_write <= FUSE_MAX_WRITE_BYTES);
	assert_true(o->max_readahead <= FUSE_MAX_READAHEAD);
	/* Locks are served on the host; nothing unimplemented is offered. */
	assert_int_equal(o->flags & (FUSE_POSIX_LOCKS | FUSE_FLOCK_LOCKS), FUSE_POSIX_LOCKS | FUSE_FLOCK_LOCKS);
	assert_int_equal(o->flags & (FUSE_WRITEBACK_CACHE |
				     FUSE_EXPORT_SUPPORT | FUSE_POSIX_ACL | FUSE_MAP_ALIGNMENT |
				     FUSE_SETXATTR_EXT | FUSE_INIT_EXT | FUSE_HANDLE_KILLPRIV), 0);
}

static struct t *setup_init(int ro, uint32_t max)
{
	struct t *t = setup_opts(ro, max);

	do_init(t);
	return t;
}

/* LOOKUP: nodeid (> 0) or -errno; *st gets the attributes. */
static int64_t lookup(struct t *t, uint64_t parent, const char *name, struct fuse_attr *a)
{
	int e = call(t, FUSE_LOOKUP, parent, name, strlen(name) + 1);
	struct fuse_entry_out *eo = payload(t);

	if (e)
		return e;
	if (a)
		*a = eo->attr;
	return (int64_t)eo->nodeid;
}

static void host_file(struct t *t, const char *name, const char *content)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", t->dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static int64_t do_open(struct t *t, uint64_t nodeid, uint32_t flags)
{
	struct fuse_open_in o = { .flags = flags };
	int e = call(t, FUSE_OPEN, nodeid, &o, sizeof(o));

	return e ? e : (int64_t)((struct fuse_open_out *)payload(t))->fh;
}

static void init_rules(void **state)
{
	struct t *t = setup_opts(0, 0);
	struct fuse_init_in old = { .major = 7, .minor = 27 };
	struct fuse_init_in newer = { .major = 8, .minor = 0 };

	(void)state;
	/* Before INIT everything is EIO. */
	assert_int_equal(lookup(t, 1, "x", NULL), -EIO);
	assert_int_equal(call(t, FUSE_INIT, 0, &old, sizeof(old)), -EPROTO);
	/* A newer major gets ours back, 8 bytes. */
	assert_int_equal(call(t, FUSE_INIT, 0, &newer, sizeof(newer)), 0);
	assert_int_equal(t->oh.len, 16 + 8);
	/* INIT shorter than its four fields. */
	assert_int_equal(call(t, FUSE_INIT, 0, &newer, 12), -EINVAL);
	/* An INIT whose reply does not fit fails and opens no session (the
	 * attack guest found it left the server initialized). */
	{
		struct fuse_init_in in = { .major = 7, .minor = 31 };

		t->out_size = sizeof(struct fuse_out_header) + 8;
		assert_int_equal(call(t, FUSE_INIT, 0, &in, sizeof(in)), -EINVAL);
		t->out_size = sizeof(t->out);
		assert_int_equal(lookup(t, 1, "x", NULL), -EIO);
	}
	do_init(t);
	assert_int_equal(lookup(t, 1, "x", NULL), -ENOENT);
	teardown_t(t);
}

static void malformed(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_in_header h = { .len = 40, .opcode = FUSE_GETATTR, .unique = 7, .nodeid = 1 };
	struct fuse_getattr_in g = { 0 };
	struct iovec in = { t->in, 0 }, out = { t->out, sizeof(t->out) };

	(void)state;
	/* No header at all: nothing to answer. */
	in.iov_len = 39;
	assert_int_equal(fuse_handle(&t->s, &in, 1, &out, 1), -EINVAL);
	/* No room for a reply header. */
	memcpy(t->in, &h, sizeof(h));
	memcpy(t->in + 40, &g, sizeof(g));
	h.len = 56;
	memcpy(t->in, &h, sizeof(h));
	in.iov_len = 56;
	out.iov_len = 15;
	assert_int_equal(fuse_handle(&t->s, &in, 1, &out, 1), -EINVAL);
	/* Lengths that lie, both ways. */
	out.iov_len = sizeof(t->out);
	h.len = 57;
	memcpy(t->in, &h, sizeof(h));
	assert_int_equal(fuse_handle(&t->s, &in, 1, &out, 1), 16);
	assert_int_equal(((struct fuse_out_header *)t->out)->error, -EINVAL);
	h.len = 0xffffffffu;
	memcpy(t->in, &h, sizeof(h));
	assert_int_equal(fuse_handle(&t->s, &in, 1, &out, 1), 16);
	assert_int_equal(((struct fuse_out_header *)t->out)->error, -EINVAL);
	h.len = 39;
	memcpy(t->in, &h, sizeof(h));
	assert_int_equal(fuse_handle(&t->s, &in, 1, &out, 1), 16);
	assert_int_equal(((struct fuse_out_header *)t->out)->error, -EINVAL);
	/* An argument shorter than the operation's struct. */
	assert_int_equal(call(t, FUSE_GETATTR, 1, &g, 8), -EINVAL);
	assert_int_equal(call(t, FUSE_GETATTR, 1, &g, sizeof(g)), 0);
	/* Unknown and unimplemented operations. */
	assert_int_equal(call(t, 9999, 1, NULL, 0), -ENOSYS);
	assert_int_equal(call(t, FUSE_GETLK, 1, &g, sizeof(g)), -EINVAL); /* served now: too short */
	assert_int_equal(call(t, FUSE_IOCTL, 1, &g, sizeof(g)), -ENOSYS);
	/* Unknown nodeids. */
	assert_int_equal(call(t, FUSE_GETATTR, 0, &g, sizeof(g)), -ESTALE);
	assert_int_equal(call(t, FUSE_GETATTR, 12345678, &g, sizeof(g)), -ESTALE);
	/* A body bigger than any request but WRITE. */
	{
		static uint8_t big[FUSE_MAX_BODY + 1];

		assert_int_equal(call(t, FUSE_SETXATTR, 1, big, sizeof(big)), -E2BIG);
	}
	/* Scattered buffers: header split across two iovecs. */
	{
		struct iovec parts[3];

		h.len = 56;
		h.unique = 99;
		memcpy(t->in, &h, sizeof(h));
		memcpy(t->in + 40, &g, sizeof(g));
		parts[0] = (struct iovec){ t->in, 7 };
		parts[1] = (struct iovec){ t->in + 7, 0 };
		parts[2] = (struct iovec){ t->in + 7, 49 };
		assert_true(fuse_handle(&t->s, parts, 3, &out, 1) == 16 + (int64_t)sizeof(struct fuse_attr_out));
		assert_int_equal(((struct fuse_out_header *)t->out)->error, 0);
	}
	teardown_t(t);
}

static void names(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_mkdir_in m = { .mode = 0755 };
	struct fuse_attr a;

	(void)state;
	host_file(t, "f", "x");
	assert_int_equal(call(t, FUSE_LOOKUP, 1, "f", 1), -EINVAL);      /* no NUL */
	assert_int_equal(call(t, FUSE_LOOKUP, 1, "", 1), -EINVAL);       /* empty */
	assert_int_equal(call(t, FUSE_LOOKUP, 1, "a/f", 4), -EINVAL);    /* '/' */
	assert_int_equal(call(t, FUSE_LOOKUP, 1, "/etc", 5), -EINVAL);
	assert_int_equal(call(t, FUSE_LOOKUP, 1, "../etc", 7), -EINVAL);
	{
		char longname[300];

		memset(longname, 'a', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = 0;
		assert_int_equal(call(t, FUSE_LOOKUP, 1, longname, sizeof(longname)), -ENAMETOOLONG);
	}
	/* ".." at the root stays at the root, "." is the directory. */
	assert_int_equal(lookup(t, 1, "..", &a), 1);
	assert_int_equal(lookup(t, 1, ".", &a), 1);
	/* New entries never are "." or "..". */
	assert_int_equal(call2(t, FUSE_MKDIR, 1, &m, sizeof(m), "..", 3), -EINVAL);
	assert_int_equal(call2(t, FUSE_MKDIR, 1, &m, sizeof(m), "a/b", 4), -EINVAL);
	assert_int_equal(call2(t, FUSE_MKDIR, 1, &m, sizeof(m), "d", 1), -EINVAL);
	assert_int_equal(call2(t, FUSE_MKDIR, 1, &m, sizeof(m), "d", 2), 0);
	{
		int64_t d = lookup(t, 1, "d", NULL);

		assert_true(d > 1);
		assert_int_equal(lookup(t, (uint64_t)d, "..", NULL), 1);
		assert_int_equal(lookup(t, (uint64_t)d, ".", NULL), d);
	}
	assert_true(lookup(t, 1, "f", &a) > 1);
	assert_true(S_ISREG(a.mode));
	teardown_t(t);
}

static void symlinks(void **state)
{
	struct t *t = setup_init(0, 0);
	char p[256];
	struct fuse_attr a;
	int64_t l, d;

	(void)state;
	snprintf(p, sizeof(p), "%s/esc", t->dir);
	assert_int_equal(symlink("/etc", p), 0);
	snprintf(p, sizeof(p), "%s/up", t->dir);
	assert_int_equal(symlink("..", p), 0);
	l = lookup(t, 1, "esc", &a);
	assert_true(l > 1);
	assert_true(S_ISLNK(a.mode)); /* the link itself, not /etc */
	/* Nothing resolves through it. */
	assert_int_equal(lookup(t, (uint64_t)l, "passwd", NULL), -ENOTDIR);
	assert_int_equal(do_open(t, (uint64_t)l, O_RDONLY), -ELOOP);
	assert_int_equal(call(t, FUSE_OPENDIR, (uint64_t)l, &(struct fuse_open_in){ 0 },
			      sizeof(struct fuse_open_in)), -ENOTDIR);
	/* READLINK returns the target as written. */
	assert_int_equal(call(t, FUSE_READLINK, (uint64_t)l, NULL, 0), 0);
	assert_int_equal(t->oh.len, 16 + 4);
	assert_memory_equal(payload(t), "/etc", 4);
	d = lookup(t, 1, "up", &a);
	assert_true(S_ISLNK(a.mode));
	assert_int_equal(lookup(t, (uint64_t)d, "etc", NULL), -ENOTDIR);
	/* SYMLINK stores any target; xattrs and chmod refuse symlinks. */
	assert_int_equal(call2(t, FUSE_SYMLINK, 1, "abs", 4, "/etc/shadow", 12), 0);
	assert_true(S_ISLNK(((struct fuse_entry_out *)payload(t))->attr.mode));
	snprintf(p, sizeof(p), "%s/abs", t->dir);
	{
		char buf[64];
		ssize_t n = readlink(p, buf, sizeof(buf));

		assert_int_equal(n, 11);
		assert_memory_equal(buf, "/etc/shadow", 11);
	}
	{
		struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = 0777 };

		assert_int_equal(call(t, FUSE_SETATTR, (uint64_t)l, &sa, sizeof(sa)), -EOPNOTSUPP);
	}
	/* LINK of a symlink links the symlink. */
	assert_int_equal(call2(t, FUSE_LINK, 1, &(struct fuse_link_in){ .oldnodeid = (uint64_t)l },
			       sizeof(struct fuse_link_in), "esc2", 5), 0);
	snprintf(p, sizeof(p), "%s/esc2", t->dir);
	{
		struct stat st;

		assert_int_equal(lstat(p, &st), 0);
		assert_true(S_ISLNK(st.st_mode));
	}
	teardown_t(t);
}

static void rw_and_ops(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_create_in c = { .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0640 };
	struct fuse_entry_out *e;
	struct fuse_open_out *o;
	struct fuse_write_in w = { 0 };
	struct fuse_read_in r = { 0 };
	struct fuse_release_in rel = { 0 };
	uint64_t node, fh;
	char p[256];
	struct stat st;

	(void)state;
	assert_int_equal(call2(t, FUSE_CREATE, 1, &c, sizeof(c), "new", 4), 0);
	e = payload(t);
	o = (void *)((uint8_t *)payload(t) + sizeof(*e));
	node = e->nodeid;
	fh = o->fh;
	assert_true(o->open_flags & FOPEN_DIRECT_IO); /* cache=none */
	assert_int_equal(e->attr.mode & 07777, 0640);
	/* CREATE O_EXCL on an existing name. */
	assert_int_equal(call2(t, FUSE_CREATE, 1, &c, sizeof(c), "new", 4), -EEXIST);
	/* Without O_EXCL an existing file is opened (and O_TRUNC applies). */
	{
		struct fuse_create_in c2 = { .flags = O_RDWR | O_CREAT, .mode = 0600 };

		assert_int_equal(call2(t, FUSE_CREATE, 1, &c2, sizeof(c2), "new", 4), 0);
		assert_int_equal(((struct fuse_entry_out *)payload(t))->nodeid, node);
		assert_int_equal(((struct fuse_entry_out *)payload(t))->attr.mode & 07777, 0640);
	}
	w.fh = fh;
	w.size = 5;
	assert_int_equal(call2(t, FUSE_WRITE, node, &w, sizeof(w), "hello", 5), 0);
	assert_int_equal(((struct fuse_write_out *)payload(t))->size, 5);
	/* A WRITE whose size lies. */
	w.size = 6;
	assert_int_equal(call2(t, FUSE_WRITE, node, &w, sizeof(w), "hello", 5), -EINVAL);
	w.size = 4;
	assert_int_equal(call2(t, FUSE_WRITE, node, &w, sizeof(w), "hello", 5), -EINVAL);
	w.size = 0;
	w.fh = 999;
	assert_int_equal(call2(t, FUSE_WRITE, node, &w, sizeof(w), NULL, 0), -EBADF);
	/* READ, chunked to the guest's buffer. */
	r.fh = fh;
	r.size = 4096;
	assert_int_equal(call(t, FUSE_READ, node, &r, sizeof(r)), 0);
	assert_int_equal(t->oh.len, 16 + 5);
	assert_memory_equal(payload(t), "hello", 5);
	t->out_size = 16 + 3;
	assert_int_equal(call(t, FUSE_READ, node, &r, sizeof(r)), 0);
	assert_int_equal(t->oh.len, 16 + 3);
	t->out_size = sizeof(t->out);
	/* A reply scattered over more buffers than any request spans. */
	{
		struct fuse_in_header h = { .len = sizeof(h) + sizeof(r), .opcode = FUSE_READ, .unique = 77,
					    .nodeid = node };
		struct iovec in = { t->in, sizeof(h) + sizeof(r) }, out[400];
		int i;

		memcpy(t->in, &h, sizeof(h));
		memcpy(t->in + sizeof(h), &r, sizeof(r));
		out[0] = (struct iovec){ t->out, 16 };
		for (i = 1; i < 400; i++)
			out[i] = (struct iovec){ t->out + 16 + i, 1 };
		assert_int_equal(fuse_handle(&t->s, &in, 1, out, 400), 16);
		assert_int_equal(((struct fuse_out_header *)(void *)t->out)->error, -EINVAL);
		for (i = 1; i < 3; i++)
			out[i] = (struct iovec){ t->out + 16 + i * 2, 2 };
		assert_int_equal(fuse_handle(&t->s, &in, 1, out, 3), 16 + 4);
	}
	/* SETATTR size and mode. */
	{
		struct fuse_setattr_in sa = { .valid = FATTR_SIZE | FATTR_MODE, .size = 2, .mode = 0600 };
		struct fuse_attr_out *ao;

		assert_int_equal(call(t, FUSE_SETATTR, node, &sa, sizeof(sa)), 0);
		ao = payload(t);
		assert_int_equal(ao->attr.size, 2);
		assert_int_equal(ao->attr.mode & 07777, 0600);
		sa.valid = FATTR_MTIME;
		sa.mtime = 1000000;
		assert_int_equal(call(t, FUSE_SETATTR, node, &sa, sizeof(sa)), 0);
		assert_int_equal(((struct fuse_attr_out *)payload(t))->attr.mtime, 1000000);
	}
	/* LSEEK, FSYNC, FLUSH, FALLOCATE. */
	{
		struct fuse_lseek_in ls = { .fh = fh, .offset = 0, .whence = SEEK_END };
		struct fuse_fsync_in fs = { .fh = fh };
		struct fuse_flush_in fl = { .fh = fh };
		struct fuse_fallocate_in fa = { .fh = fh, .offset = 0, .length = 8192 };

		assert_int_equal(call(t, FUSE_LSEEK, node, &ls, sizeof(ls)), 0);
		assert_int_equal(((struct fuse_lseek_out *)payload(t))->offset, 2);
		ls.whence = 77;
		assert_int_equal(call(t, FUSE_LSEEK, node, &ls, sizeof(ls)), -EINVAL);
		assert_int_equal(call(t, FUSE_FSYNC, node, &fs, sizeof(fs)), 0);
		assert_int_equal(call(t, FUSE_FLUSH, node, &fl, sizeof(fl)), 0);
		assert_int_equal(call(t, FUSE_FALLOCATE, node, &fa, sizeof(fa)), 0);
	}
	rel.fh = fh;
	assert_int_equal(call(t, FUSE_RELEASE, node, &rel, sizeof(rel)), 0);
	assert_int_equal(call(t, FUSE_RELEASE, node, &rel, sizeof(rel)), -EBADF);
	/* RENAME, RENAME2 NOREPLACE and EXCHANGE, LINK, UNLINK, RMDIR. */
	host_file(t, "other", "o");
	{
		struct fuse_rename2_in r2 = { .newdir = 1, .flags = RENAME_NOREPLACE };
		char names2[32];

		memcpy(names2, "new\0other", 10);
		assert_int_equal(call2(t, FUSE_RENAME2, 1, &r2, sizeof(r2), names2, 10), -EEXIST);
		r2.flags = RENAME_EXCHANGE;
		assert_int_equal(call2(t, FUSE_RENAME2, 1, &r2, sizeof(r2), names2, 10), 0);
		snprintf(p, sizeof(p), "%s/other", t->dir);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_size, 8192); /* the created file is "other" now */
		r2.flags = 4; /* RENAME_WHITEOUT */
		assert_int_equal(call2(t, FUSE_RENAME2, 1, &r2, sizeof(r2), names2, 10), -EINVAL);
		memcpy(names2, "other\0moved", 12);
		assert_int_equal(call2(t, FUSE_RENAME, 1, &(struct fuse_rename_in){ .newdir = 1 },
				       sizeof(struct fuse_rename_in), names2, 12), 0);
		/* Only one name: no NUL-terminated second one. */
		assert_int_equal(call2(t, FUSE_RENAME, 1, &(struct fuse_rename_in){ .newdir = 1 },
				       sizeof(struct fuse_rename_in), "moved", 6), -EINVAL);
	}
	assert_int_equal(call2(t, FUSE_LINK, 1, &(struct fuse_link_in){ .oldnodeid = node },
			       sizeof(struct fuse_link_in), "hard", 5), 0);
	assert_int_equal(((struct fuse_entry_out *)payload(t))->nodeid, node); /* same inode */
	assert_int_equal(((struct fuse_entry_out *)payload(t))->attr.nlink, 2);
	assert_int_equal(call(t, FUSE_UNLINK, 1, "hard", 5), 0);
	assert_int_equal(call(t, FUSE_UNLINK, 1, "hard", 5), -ENOENT);
	{
		struct fuse_mknod_in mk = { .mode = S_IFIFO | 0644 };

		assert_int_equal(call2(t, FUSE_MKNOD, 1, &mk, sizeof(mk), "fifo", 5), 0);
		assert_true(S_ISFIFO(((struct fuse_entry_out *)payload(t))->attr.mode));
		/* A FIFO is never opened by the server (it would block). */
		assert_int_equal(do_open(t, ((struct fuse_entry_out *)payload(t))->nodeid, O_RDONLY), -EACCES);
		/* Nor through CREATE of its name (no O_EXCL: "open it if it
		 * exists"), which blocked the device forever (fuzz_fuse). */
		{
			struct fuse_create_in cf = { .flags = O_WRONLY | O_CREAT, .mode = 0644 };

			assert_int_equal(call2(t, FUSE_CREATE, 1, &cf, sizeof(cf), "fifo", 5), -EACCES);
			cf.flags = O_RDONLY | O_CREAT;
			assert_int_equal(call2(t, FUSE_CREATE, 1, &cf, sizeof(cf), "fifo", 5), -EACCES);
		}
		mk.mode = S_IFCHR | 0644;
		assert_int_equal(call2(t, FUSE_MKNOD, 1, &mk, sizeof(mk), "dev", 4), -EPERM);
		mk.mode = S_IFREG | 0644;
		assert_int_equal(call2(t, FUSE_MKNOD, 1, &mk, sizeof(mk), "reg", 4), 0);
	}
	{
		struct fuse_mkdir_in m = { .mode = 0777 };

		assert_int_equal(call2(t, FUSE_MKDIR, 1, &m, sizeof(m), "dd", 3), 0);
		assert_int_equal(((struct fuse_entry_out *)payload(t))->attr.mode & 0777, 0777);
		assert_int_equal(call(t, FUSE_RMDIR, 1, "dd", 3), 0);
	}
	/* STATFS and ACCESS. */
	assert_int_equal(call(t, FUSE_STATFS, 1, NULL, 0), 0);
	assert_true(((struct fuse_statfs_out *)payload(t))->st.bsize > 0);
	assert_int_equal(call(t, FUSE_ACCESS, 1, &(struct fuse_access_in){ .mask = R_OK | X_OK },
			      sizeof(struct fuse_access_in)), 0);
	/* xattrs (user.* where the host filesystem has them). */
	{
		char sx[64];
		struct { uint32_t size, flags; } sa = { 3, 0 };
		struct fuse_getxattr_in g = { .size = 0 };
		int er;

		memcpy(sx, &sa, 8);
		memcpy(sx + 8, "user.k\0abc", 10);
		er = call(t, FUSE_SETXATTR, node, sx, 18);
		if (er == 0) {
			assert_int_equal(call2(t, FUSE_GETXATTR, node, &g, sizeof(g), "user.k", 7), 0);
			assert_int_equal(((struct fuse_getxattr_out *)payload(t))->size, 3);
			g.size = 64;
			assert_int_equal(call2(t, FUSE_GETXATTR, node, &g, sizeof(g), "user.k", 7), 0);
			assert_memory_equal(payload(t), "abc", 3);
			g.size = 1;
			assert_int_equal(call2(t, FUSE_GETXATTR, node, &g, sizeof(g), "user.k", 7), -ERANGE);
			g.size = 0;
			assert_int_equal(call(t, FUSE_LISTXATTR, node, &g, sizeof(g)), 0);
			assert_int_equal(call(t, FUSE_REMOVEXATTR, node, "user.k", 7), 0);
		} else {
			assert_true(er == -EOPNOTSUPP || er == -EPERM);
		}
		/* The value length lies. */
		sa.size = 9;
		memcpy(sx, &sa, 8);
		assert_int_equal(call(t, FUSE_SETXATTR, node, sx, 18), -EINVAL);
	}
	teardown_t(t);
}

static void readonly(void **state)
{
	struct t *t = setup_init(1, 0);
	struct fuse_mkdir_in m = { .mode = 0755 };
	struct fuse_create_in c = { .flags = O_RDWR, .mode = 0644 };
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE };
	int64_t f, fh;

	(void)state;
	host_file(t, "f", "data");
	f = lookup(t, 1, "f", NULL);
	assert_true(f > 1);
	assert_int_equal(call2(t, FUSE_MKDIR, 1, &m, sizeof(m), "d", 2), -EROFS);
	assert_int_equal(call2(t, FUSE_CREATE, 1, &c, sizeof(c), "n", 2), -EROFS);
	assert_int_equal(call(t, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), -EROFS);
	assert_int_equal(call(t, FUSE_UNLINK, 1, "f", 2), -EROFS);
	assert_int_equal(call2(t, FUSE_SYMLINK, 1, "s", 2, "f", 2), -EROFS);
	assert_int_equal(do_open(t, (uint64_t)f, O_WRONLY), -EROFS);
	assert_int_equal(do_open(t, (uint64_t)f, O_RDWR), -EROFS);
	assert_int_equal(do_open(t, (uint64_t)f, O_RDONLY | O_TRUNC), -EROFS);
	assert_int_equal(call(t, FUSE_ACCESS, (uint64_t)f, &(struct fuse_access_in){ .mask = W_OK },
			      sizeof(struct fuse_access_in)), -EROFS);
	fh = do_open(t, (uint64_t)f, O_RDONLY);
	assert_true(fh >= 0);
	{
		struct fuse_write_in w = { .fh = (uint64_t)fh, .size = 1 };

		assert_int_equal(call2(t, FUSE_WRITE, (uint64_t)f, &w, sizeof(w), "x", 1), -EROFS);
	}
	{
		struct fuse_read_in r = { .fh = (uint64_t)fh, .size = 100 };

		assert_int_equal(call(t, FUSE_READ, (uint64_t)f, &r, sizeof(r)), 0);
		assert_int_equal(t->oh.len, 16 + 4);
	}
	teardown_t(t);
}

static void forget_and_limit(void **state)
{
	struct t *t = setup_init(0, 4);
	struct fuse_forget_in fg = { .nlookup = 1 };
	int64_t a, b;

	(void)state;
	host_file(t, "a", "");
	host_file(t, "b", "");
	host_file(t, "c", "");
	host_file(t, "d", "");
	a = lookup(t, 1, "a", NULL);
	assert_int_equal(lookup(t, 1, "a", NULL), a); /* same inode, same nodeid */
	assert_int_equal(t->s.nr_ino, 2);
	assert_int_equal(t->s.ino[a - 1].nlookup, 2);
	/* FORGET has no reply. */
	assert_int_equal(call(t, FUSE_FORGET, (uint64_t)a, &fg, sizeof(fg)), 0);
	assert_int_equal(t->ret, 0);
	assert_int_equal(t->s.nr_ino, 2);
	assert_int_equal(call(t, FUSE_FORGET, (uint64_t)a, &fg, sizeof(fg)), 0);
	assert_int_equal(t->s.nr_ino, 1);
	assert_int_equal(call(t, FUSE_GETATTR, (uint64_t)a, &(struct fuse_getattr_in){ 0 },
			      sizeof(struct fuse_getattr_in)), -ESTALE);
	/* The root is never forgotten. */
	fg.nlookup = 1000;
	assert_int_equal(call(t, FUSE_FORGET, 1, &fg, sizeof(fg)), 0);
	assert_int_equal(lookup(t, 1, ".", NULL), 1);
	/* Limit: root + 3. */
	a = lookup(t, 1, "a", NULL);
	b = lookup(t, 1, "b", NULL);
	assert_true(lookup(t, 1, "c", NULL) > 1);
	assert_int_equal(lookup(t, 1, "d", NULL), -ENFILE);
	/* BATCH_FORGET frees room; a count that lies is refused whole. */
	{
		uint8_t buf[8 + 32];
		struct fuse_batch_forget_in bf = { .count = 3 };
		struct fuse_forget_one one[2] = { { (uint64_t)a, 1 }, { (uint64_t)b, 1 } };

		memcpy(buf, &bf, 8);
		memcpy(buf + 8, one, 32);
		assert_int_equal(call(t, FUSE_BATCH_FORGET, 0, buf, sizeof(buf)), 0);
		assert_int_equal(t->s.nr_ino, 4);
		bf.count = 2;
		memcpy(buf, &bf, 8);
		assert_int_equal(call(t, FUSE_BATCH_FORGET, 0, buf, sizeof(buf)), 0);
		assert_int_equal(t->s.nr_ino, 2);
	}
	assert_true(lookup(t, 1, "d", NULL) > 1);
	/* A freed nodeid comes back with another generation. */
	teardown_t(t);
}

static int count_dir(struct t *t, uint32_t op, uint32_t bufsize, int *max_per_call)
{
	struct fuse_open_in oi = { 0 };
	struct fuse_read_in r = { 0 };
	uint64_t fh, off = 0;
	int n = 0, calls = 0;

	assert_int_equal(call(t, FUSE_OPENDIR, 1, &oi, sizeof(oi)), 0);
	fh = ((struct fuse_open_out *)payload(t))->fh;
	*max_per_call = 0;
	for (;;) {
		size_t pos = 0, len;
		int here = 0;

		r.fh = fh;
		r.offset = off;
		r.size = bufsize;
		assert_int_equal(call(t, op, 1, &r, sizeof(r)), 0);
		len = t->oh.len - 16;
		assert_true(len <= bufsize);
		if (!len)
			break;
		while (pos < len) {
			struct fuse_dirent *d;
			size_t sz;

			if (op == FUSE_READDIRPLUS) {
				struct fuse_direntplus *dp = (void *)((uint8_t *)payload(t) + pos);

				d = &dp->dirent;
				sz = FUSE_DIRENTPLUS_SIZE(dp);
			} else {
				d = (void *)((uint8_t *)payload(t) + pos);
				sz = FUSE_DIRENT_SIZE(d);
			}
			off = d->off;
			pos += sz;
			n++;
			here++;
		}
		assert_int_equal(pos, len);
		if (here > *max_per_call)
			*max_per_call = here;
		assert_true(++calls < 10000);
	}
	assert_int_equal(call(t, FUSE_RELEASEDIR, 1, &(struct fuse_release_in){ .fh = fh },
			      sizeof(struct fuse_release_in)), 0);
	return n;
}

static void readdir_chunks(void **state)
{
	struct t *t = setup_init(0, 0);
	char name[32];
	int i, most;

	(void)state;
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "file-%04d", i);
		host_file(t, name, "");
	}
	assert_int_equal(count_dir(t, FUSE_READDIR, 256, &most), 302);
	assert_true(most <= 256 / 32);
	assert_int_equal(count_dir(t, FUSE_READDIR, 1 << 20, &most), 302);
	assert_int_equal(count_dir(t, FUSE_READDIRPLUS, 1024, &most), 302);
	/* Every entry but . and .. took one reference; nothing leaked for
	 * entries that did not fit. */
	assert_int_equal(t->s.nr_ino, 301);
	for (i = 2; i <= 301; i++)
		assert_int_equal(t->s.ino[i - 1].nlookup, 1);
	/* A buffer too small for one entry. */
	{
		struct fuse_open_in oi = { 0 };
		struct fuse_read_in r = { .size = 8 };

		assert_int_equal(call(t, FUSE_OPENDIR, 1, &oi, sizeof(oi)), 0);
		r.fh = ((struct fuse_open_out *)payload(t))->fh;
		assert_int_equal(call(t, FUSE_READDIR, 1, &r, sizeof(r)), -EINVAL);
		/* A directory handle is not a file handle. */
		assert_int_equal(call(t, FUSE_READ, 1, &r, sizeof(r)), -EBADF);
	}
	teardown_t(t);
}

static void snapshot_roundtrip(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_mkdir_in m = { .mode = 0755 };
	struct sbuf b;
	struct srd r;
	int64_t d, f, g, fh;
	char p[256];

	(void)state;
	assert_int_equal(call2(t, FUSE_MKDIR, 1, &m, sizeof(m), "sub", 4), 0);
	d = (int64_t)((struct fuse_entry_out *)payload(t))->nodeid;
	snprintf(p, sizeof(p), "%s/sub/file", t->dir);
	{
		FILE *fp = fopen(p, "w");

		fputs("kept", fp);
		fclose(fp);
	}
	host_file(t, "gone", "x");
	f = lookup(t, (uint64_t)d, "file", NULL);
	g = lookup(t, 1, "gone", NULL);
	fh = do_open(t, (uint64_t)f, O_RDWR);
	assert_true(fh >= 0);
	/* A handle from CREATE too (its flags must load back: the fuzzer
	 * once found they did not). */
	{
		struct fuse_create_in c = { .flags = O_WRONLY | O_CREAT | O_APPEND, .mode = 0644 };

		assert_int_equal(call2(t, FUSE_CREATE, (uint64_t)d, &c, sizeof(c), "created", 8), 0);
	}
	sb_init(&b);
	fuse_save(&t->s, &b);
	assert_int_equal(b.err, 0);

	/* Restore into a fresh server on the same directory, after "gone"
	 * was removed on the host. */
	snprintf(p, sizeof(p), "%s/gone", t->dir);
	unlink(p);
	fuse_server_destroy(&t->s);
	{
		struct fuse_params pp = { .path = t->dir, .tag = "test" };

		assert_int_equal(fuse_server_init(&t->s, &pp), 0);
	}
	sr_init(&r, b.p, b.len);
	assert_int_equal(fuse_restore(&t->s, &r), 0);
	assert_int_equal(r.off, r.len);
	{
		struct fuse_read_in rd = { .fh = (uint64_t)fh, .size = 64 };

		assert_int_equal(call(t, FUSE_READ, (uint64_t)f, &rd, sizeof(rd)), 0);
		assert_int_equal(t->oh.len, 16 + 4);
		assert_memory_equal(payload(t), "kept", 4);
	}
	assert_int_equal(call(t, FUSE_GETATTR, (uint64_t)g, &(struct fuse_getattr_in){ 0 },
			      sizeof(struct fuse_getattr_in)), -ESTALE);
	assert_int_equal(lookup(t, (uint64_t)d, "file", NULL), f); /* same nodeid again */
	/* A truncated record is refused and leaves a clean server. */
	sr_init(&r, b.p, b.len - 3);
	assert_int_not_equal(fuse_restore(&t->s, &r), 0);
	assert_int_equal(t->s.nr_ino, 1);
	sb_free(&b);
	teardown_t(t);
}

/* A restore grows the inode table as far as the highest nodeid it brings
 * back, not to its limit: every clone of a sandbox with a shared folder
 * held the whole table (1.2 MiB at 16 K inodes) resident. */
static void snapshot_restore_grows_as_needed(void **state)
{
	struct t *t = setup_init(0, 0);
	struct sbuf b;
	struct srd r;
	int64_t last = 0;
	char name[32];
	unsigned i;

	(void)state;
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		host_file(t, name, "x");
		last = lookup(t, 1, name, NULL);
		assert_true(last > 0);
	}
	assert_true(last > 256); /* past the table's first 256 slots */
	sb_init(&b);
	fuse_save(&t->s, &b);
	assert_int_equal(b.err, 0);
	fuse_server_destroy(&t->s);
	{
		struct fuse_params pp = { .path = t->dir, .tag = "test" };

		assert_int_equal(fuse_server_init(&t->s, &pp), 0);
	}
	sr_init(&r, b.p, b.len);
	assert_int_equal(fuse_restore(&t->s, &r), 0);
	assert_true(t->s.ino_cap >= (uint64_t)last);
	assert_true(t->s.ino_cap < 4 * (uint64_t)last);
	assert_true(t->s.ino_max > 4 * (uint64_t)last); /* so the line above says something */
	assert_int_equal(lookup(t, 1, "f299", NULL), last); /* same nodeid again */
	/* A new inode after the restore gets a free slot, not a used one. */
	host_file(t, "new", "y");
	{
		int64_t n = lookup(t, 1, "new", NULL);

		assert_true(n > 0);
		for (i = 0; i < 300; i++) {
			snprintf(name, sizeof(name), "f%u", i);
			assert_true(lookup(t, 1, name, NULL) != n);
		}
	}
	sb_free(&b);
	teardown_t(t);
}

/* ---- what the guest may not put on the host (docs/virtio-fs.md, Ownership) ---- */

static void host_path(struct t *t, char *p, size_t n, const char *name)
{
	snprintf(p, n, "%s/%s", t->dir, name);
}

static mode_t host_mode(struct t *t, const char *name)
{
	char p[256];
	struct stat st;

	host_path(t, p, sizeof(p), name);
	assert_int_equal(lstat(p, &st), 0);
	return st.st_mode;
}

static int setattr_mode(struct t *t, uint64_t node, uint32_t mode)
{
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = mode };

	return call(t, FUSE_SETATTR, node, &sa, sizeof(sa));
}

static void no_setuid_by_chmod(void **state)
{
	struct t *t = setup_init(0, 0);
	char p[256];
	int64_t f, d;

	(void)state;
	host_file(t, "bin", "#!/bin/sh\n");
	host_path(t, p, sizeof(p), "dir");
	assert_int_equal(mkdir(p, 0755), 0);
	f = lookup(t, 1, "bin", NULL);
	d = lookup(t, 1, "dir", NULL);
	/* The reproduced attack: chmod 4755 (and 2755, 6777) on a file. */
	assert_int_equal(setattr_mode(t, (uint64_t)f, 04755), 0);
	assert_int_equal(host_mode(t, "bin") & 07777, 0755);
	assert_int_equal(((struct fuse_attr_out *)payload(t))->attr.mode & 07777, 0755);
	assert_int_equal(setattr_mode(t, (uint64_t)f, 02755), 0);
	assert_int_equal(host_mode(t, "bin") & 07777, 0755);
	assert_int_equal(setattr_mode(t, (uint64_t)f, 07777), 0);
	assert_int_equal(host_mode(t, "bin") & 07777, 01777); /* sticky is harmless */
	/* A directory keeps setgid (group inheritance), never setuid. */
	assert_int_equal(setattr_mode(t, (uint64_t)d, 06775), 0);
	assert_int_equal(host_mode(t, "dir") & 07777, 02775);
	teardown_t(t);
}

/* Serves one call as if the VMM ran as uid/gid `id` while keeping its
 * capabilities (SECBIT_NO_SETUID_FIXUP): a drive that maps to `id`. */
static int call_as(struct t *t, uid_t id, uint32_t op, uint64_t node, const void *a, size_t n)
{
	int e;

	assert_int_equal(prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0), 0);
	assert_int_equal(setresgid((gid_t)-1, (gid_t)id, (gid_t)-1), 0);
	assert_int_equal(setresuid((uid_t)-1, id, (uid_t)-1), 0);
	e = call(t, op, node, a, n);
	assert_int_equal(setresuid((uid_t)-1, 0, (uid_t)-1), 0);
	assert_int_equal(setresgid((gid_t)-1, 0, (gid_t)-1), 0);
	assert_int_equal(prctl(PR_SET_SECUREBITS, 0, 0, 0, 0), 0);
	return e;
}

static void chown_only_to_own_ids(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_setattr_in sa = { .valid = FATTR_UID | FATTR_GID };
	char p[256];
	struct stat st;
	int64_t f;

	(void)state;
	if (geteuid() != 0) {
		print_message("chown_only_to_own_ids: skipped (needs root, as CI runs it)\n");
		teardown_t(t);
		return;
	}
	/* A host user's file, setuid (as a host user may make it). */
	host_file(t, "bin", "x");
	host_path(t, p, sizeof(p), "bin");
	assert_int_equal(chown(p, 1000, 1000), 0);
	assert_int_equal(chmod(p, 0755), 0);
	f = lookup(t, 1, "bin", NULL);
	/* The drive maps to 1000: giving the file to root is refused, and
	 * so is a mode change in the same request. */
	sa.uid = 0;
	sa.gid = 0;
	assert_int_equal(call_as(t, 1000, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), -EPERM);
	sa.valid = FATTR_UID;
	assert_int_equal(call_as(t, 1000, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), -EPERM);
	sa.valid = FATTR_GID | FATTR_MODE;
	sa.mode = 0700;
	assert_int_equal(call_as(t, 1000, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), -EPERM);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(st.st_gid, 1000);
	assert_int_equal(st.st_mode & 07777, 0755);
	/* To a third user: refused whatever the VMM runs as. */
	sa.valid = FATTR_UID | FATTR_GID;
	sa.uid = sa.gid = 4242;
	assert_int_equal(call(t, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), -EPERM);
	sa.valid = FATTR_GID;
	assert_int_equal(call(t, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), -EPERM);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(st.st_gid, 1000);
	/* The ids it has (cp -p, tar) and the VMM's own are fine. */
	sa.valid = FATTR_UID | FATTR_GID;
	sa.uid = sa.gid = 1000;
	assert_int_equal(call(t, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), 0);
	sa.uid = geteuid();
	sa.gid = getegid();
	assert_int_equal(call(t, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, geteuid());
	/* A chown leaves no setuid/setgid (not even setgid without group
	 * execute, which the kernel keeps). */
	assert_int_equal(chmod(p, 02745), 0);
	assert_int_equal(call(t, FUSE_SETATTR, (uint64_t)f, &sa, sizeof(sa)), 0);
	assert_int_equal(host_mode(t, "bin") & 07777, 0745);
	teardown_t(t);
}

static void no_setuid_by_create(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_create_in c = { .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 06777 };
	struct fuse_mknod_in mk = { .mode = S_IFREG | 06777 };
	struct fuse_mkdir_in md = { .mode = 06777 };

	(void)state;
	assert_int_equal(call2(t, FUSE_CREATE, 1, &c, sizeof(c), "c", 2), 0);
	assert_int_equal(host_mode(t, "c") & (S_ISUID | S_ISGID), 0);
	c.flags = O_RDWR | O_CREAT;
	assert_int_equal(call2(t, FUSE_CREATE, 1, &c, sizeof(c), "c2", 3), 0);
	assert_int_equal(host_mode(t, "c2") & (S_ISUID | S_ISGID), 0);
	assert_int_equal(call2(t, FUSE_MKNOD, 1, &mk, sizeof(mk), "m", 2), 0);
	assert_int_equal(host_mode(t, "m") & (S_ISUID | S_ISGID), 0);
	mk.mode = S_IFIFO | 06777;
	assert_int_equal(call2(t, FUSE_MKNOD, 1, &mk, sizeof(mk), "p", 2), 0);
	assert_int_equal(host_mode(t, "p") & (S_ISUID | S_ISGID), 0);
	assert_int_equal(call2(t, FUSE_MKDIR, 1, &md, sizeof(md), "d", 2), 0);
	assert_int_equal(host_mode(t, "d") & S_ISUID, 0);
	/* In a setgid directory a file takes its group, never S_ISGID; a
	 * directory keeps the S_ISGID mkdir passed on. */
	{
		char p[256];
		int64_t d;

		host_path(t, p, sizeof(p), "d");
		assert_int_equal(chmod(p, 02777), 0);
		d = lookup(t, 1, "d", NULL);
		c.mode = 02755;
		assert_int_equal(call2(t, FUSE_CREATE, (uint64_t)d, &c, sizeof(c), "f", 2), 0);
		assert_int_equal(host_mode(t, "d/f") & (S_ISUID | S_ISGID), 0);
		md.mode = 0755;
		assert_int_equal(call2(t, FUSE_MKDIR, (uint64_t)d, &md, sizeof(md), "sub", 4), 0);
		assert_int_equal(host_mode(t, "d/sub") & 07777, 02755);
	}
	teardown_t(t);
}

static void write_clears_setuid(void **state)
{
	struct t *t = setup_init(0, 0);
	static const char *const names[] = { "w", "t", "a", "o" };
	struct fuse_write_in w = { .size = 1 };
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };
	struct fuse_fallocate_in fa = { .offset = 0, .length = 4096 };
	int64_t node[4], fh;
	char p[256];
	int i;

	(void)state;
	/* Setuid and setgid made on the host, by the host. */
	for (i = 0; i < 4; i++) {
		host_file(t, names[i], "#!/bin/sh\n");
		host_path(t, p, sizeof(p), names[i]);
		assert_int_equal(chmod(p, 06755), 0);
		node[i] = lookup(t, 1, names[i], NULL);
		assert_true(node[i] > 1);
	}
	/* WRITE. */
	fh = do_open(t, (uint64_t)node[0], O_WRONLY);
	assert_true(fh >= 0);
	w.fh = (uint64_t)fh;
	assert_int_equal(call2(t, FUSE_WRITE, (uint64_t)node[0], &w, sizeof(w), "X", 1), 0);
	assert_int_equal(host_mode(t, "w") & 07777, 0755);
	/* SETATTR size (truncate). */
	assert_int_equal(call(t, FUSE_SETATTR, (uint64_t)node[1], &sa, sizeof(sa)), 0);
	assert_int_equal(host_mode(t, "t") & 07777, 0755);
	/* FALLOCATE. */
	fh = do_open(t, (uint64_t)node[2], O_WRONLY);
	assert_true(fh >= 0);
	fa.fh = (uint64_t)fh;
	assert_int_equal(call(t, FUSE_FALLOCATE, (uint64_t)node[2], &fa, sizeof(fa)), 0);
	assert_int_equal(host_mode(t, "a") & 07777, 0755);
	/* OPEN with O_TRUNC. */
	assert_true(do_open(t, (uint64_t)node[3], O_WRONLY | O_TRUNC) >= 0);
	assert_int_equal(host_mode(t, "o") & 07777, 0755);
	/* A read leaves them alone. */
	host_path(t, p, sizeof(p), "w");
	assert_int_equal(chmod(p, 04755), 0);
	assert_true(do_open(t, (uint64_t)node[0], O_RDONLY) >= 0);
	assert_int_equal(host_mode(t, "w") & 07777, 04755);
	teardown_t(t);
}

static int setxattr_req(struct t *t, uint64_t node, const char *name, const void *v, uint32_t n)
{
	uint8_t b[256];
	struct { uint32_t size, flags; } a = { n, 0 };
	size_t k = strlen(name) + 1;

	memcpy(b, &a, 8);
	memcpy(b + 8, name, k);
	memcpy(b + 8 + k, v, n);
	return call(t, FUSE_SETXATTR, node, b, 8 + k + n);
}

static void xattr_namespaces(void **state)
{
	struct t *t = setup_init(0, 0);
	/* A valid file capability: VFS_CAP_REVISION_2 | effective,
	 * cap_setuid permitted. */
	static const uint32_t cap[5] = { 0x02000001, 1u << 7, 0, 0, 0 };
	/* A valid POSIX ACL: user::rwx, group::rwx, other::rwx. */
	static const uint8_t acl[4 + 3 * 8] = { 2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
						4, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 7, 0,
						0xff, 0xff, 0xff, 0xff };
	struct fuse_getxattr_in g = { .size = 0 };
	char p[256], buf[256];
	int64_t f;

	(void)state;
	host_file(t, "bin", "x");
	host_path(t, p, sizeof(p), "bin");
	assert_int_equal(chmod(p, 0644), 0);
	f = lookup(t, 1, "bin", NULL);
	assert_int_equal(setxattr_req(t, (uint64_t)f, "security.capability", cap, sizeof(cap)), -EOPNOTSUPP);
	assert_int_equal(setxattr_req(t, (uint64_t)f, "trusted.x", "v", 1), -EOPNOTSUPP);
	assert_int_equal(setxattr_req(t, (uint64_t)f, "system.posix_acl_access", acl, sizeof(acl)),
			 -EOPNOTSUPP);
	assert_int_equal(setxattr_req(t, (uint64_t)f, "security.selinux", "x", 1), -EOPNOTSUPP);
	assert_true(getxattr(p, "security.capability", buf, sizeof(buf)) < 0);
	assert_true(getxattr(p, "trusted.x", buf, sizeof(buf)) < 0);
	assert_int_equal(host_mode(t, "bin") & 07777, 0644); /* the ACL did not land either */
	/* user.* is the guest's. */
	if (setxattr_req(t, (uint64_t)f, "user.x", "v", 1) == 0) {
		assert_int_equal(getxattr(p, "user.x", buf, sizeof(buf)), 1);
	}
	/* What the host put there is neither seen nor removed. */
	if (setxattr(p, "security.capability", cap, sizeof(cap), 0) == 0) {
		assert_int_equal(call2(t, FUSE_GETXATTR, (uint64_t)f, &g, sizeof(g), "security.capability", 20),
				 -ENODATA);
		assert_int_equal(call(t, FUSE_REMOVEXATTR, (uint64_t)f, "security.capability", 20), -EOPNOTSUPP);
		assert_true(getxattr(p, "security.capability", buf, sizeof(buf)) > 0);
	}
	if (setxattr(p, "trusted.host", "h", 1, 0) == 0) {
		assert_int_equal(call2(t, FUSE_GETXATTR, (uint64_t)f, &g, sizeof(g), "trusted.host", 13), -ENODATA);
		assert_int_equal(call(t, FUSE_REMOVEXATTR, (uint64_t)f, "trusted.host", 13), -EOPNOTSUPP);
	}
	/* LISTXATTR names only user.*, and its size query agrees. */
	{
		ssize_t n = getxattr(p, "user.x", buf, sizeof(buf));
		uint32_t want = n == 1 ? 7 : 0;

		assert_int_equal(call(t, FUSE_LISTXATTR, (uint64_t)f, &g, sizeof(g)), 0);
		assert_int_equal(((struct fuse_getxattr_out *)payload(t))->size, want);
		g.size = 200;
		assert_int_equal(call(t, FUSE_LISTXATTR, (uint64_t)f, &g, sizeof(g)), 0);
		assert_int_equal(t->oh.len, 16 + want);
		if (want)
			assert_memory_equal(payload(t), "user.x", 7);
	}
	teardown_t(t);
}


/* ---- locks ---- */

#define OWNER_A 0xa0a0u
#define OWNER_B 0xb0b0u
#define OWNER_C 0xc0c0u
#define TO_EOF ((uint64_t)INT64_MAX) /* the kernel's OFFSET_MAX: to the end of the file */

/* SETLK(W)/GETLK on (node, fh) for owner: the reply's error, FUSE_WAIT for
 * a parked SETLKW. */
static int lk(struct t *t, uint32_t op, uint64_t node, uint64_t fh, uint64_t owner, uint32_t type,
	      uint64_t start, uint64_t end, uint32_t flags)
{
	struct fuse_lk_in in = { .fh = fh, .owner = owner,
				 .lk = { .start = start, .end = end, .type = type },
				 .lk_flags = flags };

	return call(t, op, node, &in, sizeof(in));
}

/* Owners holding a host descriptor. */
static unsigned lock_owners(struct t *t)
{
	unsigned i, n = 0;

	for (i = 0; i < FUSE_LOCKS_MAX; i++)
		n += t->s.locks[i].used;
	return n;
}

/* A file opened twice: *node, two handles. */
static void lk_file(struct t *t, int64_t *node, int64_t *fh1, int64_t *fh2)
{
	host_file(t, "f", "0123456789");
	*node = lookup(t, 1, "f", NULL);
	assert_true(*node > 1);
	*fh1 = do_open(t, (uint64_t)*node, O_RDWR);
	*fh2 = do_open(t, (uint64_t)*node, O_RDWR);
	assert_true(*fh1 >= 0 && *fh2 >= 0);
}

/* A host process's view: an OFD descriptor of the file. */
static int host_fd(struct t *t)
{
	char p[256];
	int fd;

	host_path(t, p, sizeof(p), "f");
	fd = open(p, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* The lock a host process would meet on [start, start+len): its type. */
static short host_getlk(int fd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };

	assert_int_equal(fcntl(fd, F_OFD_GETLK, &fl), 0);
	return fl.l_type;
}

/* Which file systems get their cache dropped at a grant: the network ones
 * by statfs type (CIFS's magic arrives sign-extended in a long on some
 * libcs), never a local one; a lock on this test's local folder is not
 * marked remote. */
static void lock_remote_fs(void **state)
{
	struct t *t = setup_init(0, 0);
	int64_t n, f1, f2;
	unsigned i;

	(void)state;
	assert_int_equal(fuse_fs_remote(0x6969), 1);                     /* NFS */
	assert_int_equal(fuse_fs_remote(0xFF534D42ul), 1);               /* CIFS */
	assert_int_equal(fuse_fs_remote((unsigned long)(long)(int)0xFE534D42u), 1); /* SMB2 */
	assert_int_equal(fuse_fs_remote(0x517B), 1);                     /* SMB */
	assert_int_equal(fuse_fs_remote(0x00C36400), 1);                 /* Ceph */
	assert_int_equal(fuse_fs_remote(0xEF53), 0);                     /* ext2/3/4 */
	assert_int_equal(fuse_fs_remote(0x01021994), 0);                 /* tmpfs */
	assert_int_equal(fuse_fs_remote(0x9123683E), 0);                 /* btrfs */
	assert_int_equal(fuse_fs_remote(0x58465342), 0);                 /* xfs */
	lk_file(t, &n, &f1, &f2);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, 99, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_RDLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	for (i = 0; i < FUSE_LOCKS_MAX; i++)
		if (t->s.locks[i].used)
			assert_int_equal(t->s.locks[i].remote, 0);
	assert_int_equal(lock_owners(t), 2);
	teardown_t(t);
}

static void lock_grant_and_conflict(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_lk_out *o;
	int64_t n, f1, f2;

	(void)state;
	lk_file(t, &n, &f1, &f2);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, 99, 0), 0);
	/* Another owner meets it, on either handle (two guest processes
	 * sharing an open file are still two owners). */
	assert_int_equal(lk(t, FUSE_GETLK, n, f1, OWNER_B, F_WRLCK, 50, 60, 0), 0);
	o = payload(t);
	assert_int_equal(o->lk.type, F_WRLCK);
	assert_int_equal(o->lk.start, 0);
	assert_int_equal(o->lk.end, 99);
	assert_int_equal(o->lk.pid, 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_RDLCK, 50, 60, 0), -EAGAIN);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_B, F_WRLCK, 99, TO_EOF, 0), -EAGAIN);
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_WRLCK, 100, TO_EOF, 0), 0);
	/* The owner itself never conflicts, through any of its files. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_A, F_WRLCK, 10, 20, 0), 0);
	assert_int_equal(lk(t, FUSE_GETLK, n, f1, OWNER_A, F_WRLCK, 0, 99, 0), 0);
	assert_int_equal(((struct fuse_lk_out *)payload(t))->lk.type, F_UNLCK);
	/* Read locks share. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_RDLCK, 0, 99, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_C, F_RDLCK, 0, 99, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_B, F_WRLCK, 0, 0, 0), -EAGAIN);
	/* An owner keeps its descriptor while it holds a range, not after it
	 * let go of the whole file (the guest kernel's unlock at close). */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_C, F_UNLCK, 0, 9, 0), 0);
	assert_int_equal(lock_owners(t), 3); /* A, B and C */
	/* Unlocked, the range is free; unlocking what one never held is fine. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_UNLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_C, F_UNLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, 0x99, F_UNLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(lock_owners(t), 1); /* B's */
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_WRLCK, 0, 99, 0), 0);
	teardown_t(t);
}

static void lock_host_process(void **state)
{
	struct t *t = setup_init(0, 0);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 5 };
	int64_t n, f1, f2;
	int h;

	(void)state;
	lk_file(t, &n, &f1, &f2);
	h = host_fd(t);
	/* The host holds [0, 5): the guest meets it, and sees no pid. */
	assert_int_equal(fcntl(h, F_OFD_SETLK, &fl), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_RDLCK, 4, 4, 0), -EAGAIN);
	assert_int_equal(lk(t, FUSE_GETLK, n, f1, OWNER_A, F_RDLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(((struct fuse_lk_out *)payload(t))->lk.type, F_WRLCK);
	assert_int_equal(((struct fuse_lk_out *)payload(t))->lk.end, 4);
	assert_int_equal(((struct fuse_lk_out *)payload(t))->lk.pid, 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 5, TO_EOF, 0), 0);
	/* The guest's lock is the host's to meet too. */
	assert_int_equal(host_getlk(h, F_RDLCK, 100, 1), F_WRLCK);
	fl.l_type = F_UNLCK;
	assert_int_equal(fcntl(h, F_OFD_SETLK, &fl), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_UNLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(host_getlk(h, F_WRLCK, 0, 0), F_UNLCK);
	/* A guest flock() is a host flock(). */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(flock(h, LOCK_SH | LOCK_NB), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_UNLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(flock(h, LOCK_EX | LOCK_NB), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_RDLCK, 0, TO_EOF, FUSE_LK_FLOCK), -EAGAIN);
	close(h);
	teardown_t(t);
}

static void lock_flock_vs_posix(void **state)
{
	struct t *t = setup_init(0, 0);
	int64_t n, f1, f2;

	(void)state;
	lk_file(t, &n, &f1, &f2);
	/* As in one Linux kernel: BSD and POSIX locks do not meet. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_WRLCK, 0, TO_EOF, 0), 0);
	/* BSD locks meet each other: exclusive against shared, shared together. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_RDLCK, 0, TO_EOF, FUSE_LK_FLOCK), -EAGAIN);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_RDLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_RDLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_C, F_WRLCK, 0, TO_EOF, FUSE_LK_FLOCK), -EAGAIN);
	teardown_t(t);
}

static void lock_wait_then_grant(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_lk_done d[4];
	uint64_t waiter;
	int64_t n, f1, f2;

	(void)state;
	lk_file(t, &n, &f1, &f2);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, TO_EOF, 0), 0);
	/* SETLKW on a held range waits: no reply is written. */
	assert_int_equal(lk(t, FUSE_SETLKW, n, f2, OWNER_B, F_WRLCK, 0, 9, 0), FUSE_WAIT);
	waiter = t->unique;
	assert_int_equal(t->s.wait_unique, waiter);
	assert_int_equal(fuse_lk_waiting(&t->s), 1);
	assert_int_equal(fuse_lk_poll(&t->s, d, 4), 0);
	/* Other requests go on meanwhile. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_C, F_WRLCK, 0, 0, 0), -EAGAIN);
	/* Granted on the unlock, and then held. A free range is granted at once. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_UNLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(fuse_lk_poll(&t->s, d, 4), 1);
	assert_int_equal(d[0].unique, waiter);
	assert_int_equal(d[0].error, 0);
	assert_int_equal(fuse_lk_waiting(&t->s), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_RDLCK, 5, 5, 0), -EAGAIN);
	assert_int_equal(lk(t, FUSE_SETLKW, n, f1, OWNER_A, F_RDLCK, 10, 20, 0), 0);
	/* flock waits the same way. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(lk(t, FUSE_SETLKW, n, f2, OWNER_B, F_WRLCK, 0, TO_EOF, FUSE_LK_FLOCK), FUSE_WAIT);
	waiter = t->unique;
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_UNLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(fuse_lk_poll(&t->s, d, 4), 1);
	assert_int_equal(d[0].unique, waiter);
	assert_int_equal(d[0].error, 0);
	teardown_t(t);
}

static void lock_interrupt(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_interrupt_in in = { 0 };
	struct fuse_lk_done d[4];
	int64_t n, f1, f2;

	(void)state;
	lk_file(t, &n, &f1, &f2);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLKW, n, f2, OWNER_B, F_WRLCK, 0, 9, 0), FUSE_WAIT);
	in.unique = t->unique;
	/* An INTERRUPT for something else changes nothing; it has no reply. */
	in.unique += 1000;
	assert_int_equal(call(t, FUSE_INTERRUPT, 0, &in, sizeof(in)), 0);
	assert_int_equal(t->ret, 0);
	assert_int_equal(fuse_lk_poll(&t->s, d, 4), 0);
	in.unique -= 1000;
	assert_int_equal(call(t, FUSE_INTERRUPT, 0, &in, sizeof(in)), 0);
	assert_int_equal(t->ret, 0);
	assert_int_equal(fuse_lk_poll(&t->s, d, 4), 1);
	assert_int_equal(d[0].unique, in.unique);
	assert_int_equal(d[0].error, -EINTR);
	assert_int_equal(fuse_lk_waiting(&t->s), 0);
	/* The interrupted owner holds nothing. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_UNLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_C, F_WRLCK, 0, TO_EOF, 0), 0);
	/* All at once (a snapshot): every waiter ends EINTR. */
	assert_int_equal(lk(t, FUSE_SETLKW, n, f2, OWNER_B, F_WRLCK, 0, 9, 0), FUSE_WAIT);
	assert_int_equal(lk(t, FUSE_SETLKW, n, f2, OWNER_A, F_RDLCK, 0, 9, 0), FUSE_WAIT);
	fuse_lk_interrupt_all(&t->s);
	assert_int_equal(fuse_lk_poll(&t->s, d, 4), 2);
	assert_int_equal(d[0].error, -EINTR);
	assert_int_equal(d[1].error, -EINTR);
	teardown_t(t);
}

static void lock_release(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_flush_in fl = { .lock_owner = OWNER_A };
	struct fuse_release_in rl = { .release_flags = FUSE_RELEASE_FLOCK_UNLOCK, .lock_owner = OWNER_B };
	struct fuse_forget_in fg = { .nlookup = 1 };
	struct fuse_lk_done d[4];
	int64_t n, f1, f2, f3;
	int h;

	(void)state;
	lk_file(t, &n, &f1, &f2);
	h = host_fd(t);
	/* FLUSH (a close by owner A) drops A's POSIX locks, not its flock
	 * nor another owner's. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, 9, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_C, F_WRLCK, 20, 29, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	fl.fh = (uint64_t)f1;
	assert_int_equal(call(t, FUSE_FLUSH, n, &fl, sizeof(fl)), 0);
	assert_int_equal(host_getlk(h, F_WRLCK, 0, 10), F_UNLCK);
	assert_int_equal(host_getlk(h, F_WRLCK, 20, 10), F_WRLCK);
	assert_int_equal(flock(h, LOCK_SH | LOCK_NB), -1);
	/* RELEASE with FLOCK_UNLOCK drops that owner's flock. */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_UNLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f2, OWNER_B, F_WRLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	assert_int_equal(flock(h, LOCK_SH | LOCK_NB), -1);
	rl.fh = (uint64_t)f2;
	assert_int_equal(call(t, FUSE_RELEASE, n, &rl, sizeof(rl)), 0);
	assert_int_equal(flock(h, LOCK_SH | LOCK_NB), 0);
	assert_int_equal(flock(h, LOCK_UN), 0);
	/* The last FORGET of the inode drops every lock on it. */
	assert_int_equal(host_getlk(h, F_WRLCK, 20, 10), F_WRLCK);
	rl = (struct fuse_release_in){ .fh = (uint64_t)f1 };
	assert_int_equal(call(t, FUSE_RELEASE, n, &rl, sizeof(rl)), 0);
	assert_int_equal(host_getlk(h, F_WRLCK, 20, 10), F_WRLCK);
	assert_int_equal(call(t, FUSE_FORGET, n, &fg, sizeof(fg)), 0);
	assert_int_equal(host_getlk(h, F_WRLCK, 20, 10), F_UNLCK);
	/* DESTROY (and a device reset) drop locks and waiters. */
	n = lookup(t, 1, "f", NULL);
	f3 = do_open(t, (uint64_t)n, O_RDWR);
	assert_int_equal(lk(t, FUSE_SETLK, n, f3, OWNER_A, F_WRLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLKW, n, f3, OWNER_B, F_WRLCK, 0, TO_EOF, 0), FUSE_WAIT);
	assert_int_equal(call(t, FUSE_DESTROY, 0, NULL, 0), 0);
	assert_int_equal(fuse_lk_waiting(&t->s), 0);
	assert_int_equal(fuse_lk_poll(&t->s, d, 4), 0);
	assert_int_equal(host_getlk(h, F_WRLCK, 0, 0), F_UNLCK);
	close(h);
	teardown_t(t);
}

static void lock_snapshot_and_destroy(void **state)
{
	struct t *t = setup_init(0, 0);
	struct sbuf b;
	struct srd r;
	int64_t n, f1, f2;
	int h;

	(void)state;
	lk_file(t, &n, &f1, &f2);
	h = host_fd(t);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_B, F_WRLCK, 0, TO_EOF, FUSE_LK_FLOCK), 0);
	/* A restored server (a clone) claims none of the locks. */
	sb_init(&b);
	fuse_save(&t->s, &b);
	assert_int_equal(b.err, 0);
	sr_init(&r, b.p, b.len);
	assert_int_equal(fuse_restore(&t->s, &r), 0);
	sb_free(&b);
	assert_int_equal(host_getlk(h, F_WRLCK, 0, 0), F_UNLCK);
	assert_int_equal(flock(h, LOCK_EX | LOCK_NB), 0);
	assert_int_equal(flock(h, LOCK_UN), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_C, F_WRLCK, 0, TO_EOF, 0), 0);
	/* The VMM stopping (destroy) lets go of everything. */
	fuse_server_destroy(&t->s);
	assert_int_equal(host_getlk(h, F_WRLCK, 0, 0), F_UNLCK);
	assert_int_equal(fuse_server_init(&t->s, &(struct fuse_params){ .path = t->dir, .tag = "t" }), 0);
	close(h);
	teardown_t(t);
}

static void lock_bounds(void **state)
{
	struct t *t = setup_init(0, 0);
	struct fuse_lk_done d[FUSE_LK_WAITERS_MAX];
	int64_t n, f1, f2, dfh;
	uint32_t i;

	(void)state;
	lk_file(t, &n, &f1, &f2);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_WRLCK, 0, TO_EOF, 0), 0);
	/* Waiters: FUSE_LK_WAITERS_MAX, then ENOLCK, never more memory. */
	for (i = 0; i < FUSE_LK_WAITERS_MAX; i++)
		assert_int_equal(lk(t, FUSE_SETLKW, n, f2, 0x1000 + i, F_RDLCK, 0, 0, 0), FUSE_WAIT);
	assert_int_equal(lk(t, FUSE_SETLKW, n, f2, 0x2000, F_RDLCK, 0, 0, 0), -ENOLCK);
	assert_int_equal(fuse_lk_waiting(&t->s), FUSE_LK_WAITERS_MAX);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_UNLCK, 0, TO_EOF, 0), 0);
	assert_int_equal(fuse_lk_poll(&t->s, d, FUSE_LK_WAITERS_MAX), FUSE_LK_WAITERS_MAX);
	/* Lock descriptors: FUSE_LOCKS_MAX owners, then ENOLCK; a FLUSH
	 * gives one back. */
	for (i = 0; i < FUSE_LOCKS_MAX; i++)
		if (lk(t, FUSE_SETLK, n, f1, 0x10000 + i, F_RDLCK, i, i, 0))
			break;
	/* The waiters' owners still hold theirs; A let go of the whole file:
	 * its descriptor went with it. */
	assert_int_equal(i, FUSE_LOCKS_MAX - FUSE_LK_WAITERS_MAX);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, 0x30000, F_RDLCK, 0, 0, 0), -ENOLCK);
	assert_int_equal(call(t, FUSE_FLUSH, n, &(struct fuse_flush_in){ .fh = (uint64_t)f1, .lock_owner = 0x10000 },
			      sizeof(struct fuse_flush_in)), 0);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, 0x30000, F_RDLCK, 0, 0, 0), 0);
	/* Guest mistakes: errno replies. */
	assert_int_equal(lk(t, FUSE_SETLK, n, 999, OWNER_A, F_RDLCK, 0, 0, 0), -EBADF);
	assert_int_equal(lk(t, FUSE_SETLK, 1, f1, OWNER_A, F_RDLCK, 0, 0, 0), -EBADF); /* fh of another inode */
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, 77, 0, 0, 0), -EINVAL);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_RDLCK, 9, 3, 0), -EINVAL);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_RDLCK, 0, TO_EOF + 1, 0), -EINVAL);
	assert_int_equal(lk(t, FUSE_SETLK, n, f1, OWNER_A, F_RDLCK, 0, 0, 0x80), -EINVAL);
	assert_int_equal(lk(t, FUSE_GETLK, n, f1, OWNER_A, F_UNLCK, 0, 0, 0), -EINVAL);
	assert_int_equal(lk(t, FUSE_GETLK, n, f1, OWNER_A, F_RDLCK, 0, TO_EOF, FUSE_LK_FLOCK), -EINVAL);
	assert_int_equal(call(t, FUSE_SETLKW, n, "short", 6), -EINVAL);
	assert_int_equal(call(t, FUSE_INTERRUPT, 0, "x", 2), 0); /* no reply, whatever it holds */
	dfh = call(t, FUSE_OPENDIR, 1, &(struct fuse_open_in){ 0 }, sizeof(struct fuse_open_in));
	assert_int_equal(dfh, 0);
	dfh = (int64_t)((struct fuse_open_out *)payload(t))->fh;
	assert_int_equal(lk(t, FUSE_SETLK, 1, dfh, OWNER_A, F_RDLCK, 0, 0, 0), -EBADF);
	teardown_t(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(init_rules),
		cmocka_unit_test(malformed),
		cmocka_unit_test(names),
		cmocka_unit_test(symlinks),
		cmocka_unit_test(rw_and_ops),
		cmocka_unit_test(readonly),
		cmocka_unit_test(forget_and_limit),
		cmocka_unit_test(readdir_chunks),
		cmocka_unit_test(snapshot_roundtrip),
		cmocka_unit_test(snapshot_restore_grows_as_needed),
		cmocka_unit_test(no_setuid_by_chmod),
		cmocka_unit_test(chown_only_to_own_ids),
		cmocka_unit_test(no_setuid_by_create),
		cmocka_unit_test(write_clears_setuid),
		cmocka_unit_test(xattr_namespaces),
		cmocka_unit_test(lock_grant_and_conflict),
		cmocka_unit_test(lock_remote_fs),
		cmocka_unit_test(lock_host_process),
		cmocka_unit_test(lock_flock_vs_posix),
		cmocka_unit_test(lock_wait_then_grant),
		cmocka_unit_test(lock_interrupt),
		cmocka_unit_test(lock_release),
		cmocka_unit_test(lock_snapshot_and_destroy),
		cmocka_unit_test(lock_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
