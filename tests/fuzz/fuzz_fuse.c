/* libFuzzer target: the FUSE server's request path against a scratch
 * directory made in LLVMFuzzerInitialize (files, a subdirectory, symlinks
 * out of it, a FIFO). Input: records of [u8 flags][u16 reply size][request
 * (its header's len, clamped to what is left)]; each input starts a new
 * FUSE session (INIT) and may end with a snapshot save/restore round trip.
 * A record whose flags have bit 7 set is instead 16 bytes from which a
 * SETATTR, CREATE, MKNOD, MKDIR, SETXATTR, WRITE, OPEN, FALLOCATE,
 * REMOVEXATTR, a lock request (GETLK, SETLK, SETLKW with a fuzz-chosen
 * owner, type, range and flags) or a lock release (FLUSH, RELEASE with
 * FLOCK_UNLOCK, INTERRUPT of an earlier request) is built with
 * fuzz-chosen modes, owners, names and xattr names (security.capability
 * and an ACL with valid values, so the host would take them).
 * Checks: a reply never claims more than the buffer, never a positive
 * error, and nothing outside the scratch directory changes; waiting
 * SETLKWs never exceed their bound and each ends once with an errno. After every
 * input the share is walked: no file may be setuid, setgid unless a
 * directory, carry security.capability, trusted.* or system.* xattrs, or
 * belong to another uid/gid than the fuzzer's own (the VMM's); the one
 * exception is "hostsuid", made setuid/setgid with a capability by the
 * host, which keeps them only while its content is what the host wrote. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "devices/fuse/fuse.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static struct fuse_server srv;
static char top[64], dir[96], canary[128];
static uint8_t reqbuf[FUSE_MAX_BODY + 4096], outbuf[FUSE_MAX_REPLY + 4096];
static uid_t my_uid;
static gid_t my_gid;
/* Inodes the host made setuid (at most one per input). */
static uint64_t host_ino[64];
static unsigned nr_host_ino;

#define HOST_SUID_DATA "orig"
/* VFS_CAP_REVISION_2 | effective, cap_setuid permitted. */
static const uint32_t host_cap[5] = { 0x02000001, 1u << 7, 0, 0, 0 };
/* A POSIX ACL the kernel accepts: user::rwx group::rwx other::rwx. */
static const uint8_t acl[28] = { 2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 7, 0,
				 0xff, 0xff, 0xff, 0xff, 0x20, 0, 7, 0, 0xff, 0xff, 0xff, 0xff };

static void put(const char *name, const char *content)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (!f)
		abort();
	fputs(content, f);
	fclose(f);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

/* The scratch directory goes when the fuzzer exits normally. */
static void cleanup(void)
{
	fuse_server_destroy(&srv);
	nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct fuse_params p = { .tag = "fuzz", .max_inodes = 256, .max_handles = 64 };
	char q[256];

	(void)argc, (void)argv;
	log_set_level(LOG_ERROR);
	snprintf(top, sizeof(top), "/tmp/fuzz_fuse.XXXXXX");
	if (!mkdtemp(top))
		abort();
	snprintf(dir, sizeof(dir), "%s/share", top);
	snprintf(canary, sizeof(canary), "%s/canary", top);
	if (mkdir(dir, 0755))
		abort();
	{
		FILE *f = fopen(canary, "w");

		if (!f)
			abort();
		fputs("canary", f);
		fclose(f);
	}
	put("a", "hello");
	put("b", "");
	snprintf(q, sizeof(q), "%s/sub", dir);
	mkdir(q, 0755);
	put("sub/c", "deep");
	snprintf(q, sizeof(q), "%s/up", dir);
	(void)symlink("..", q);
	snprintf(q, sizeof(q), "%s/abs", dir);
	(void)symlink(top, q);
	snprintf(q, sizeof(q), "%s/fifo", dir);
	(void)mkfifo(q, 0644);
	my_uid = geteuid();
	my_gid = getegid();
	p.path = dir;
	if (fuse_server_init(&srv, &p))
		abort();
	atexit(cleanup);
	return 0;
}

static void check_outside(void)
{
	char buf[16];
	struct stat st;
	int fd = open(canary, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	if (fd >= 0)
		close(fd);
	if (n != 6 || memcmp(buf, "canary", 6) || stat(top, &st) || st.st_nlink != 3)
		abort(); /* something outside the shared directory changed */
}

/* "hostsuid" exists, setuid and setgid, with its content and (where the
 * filesystem has them) a capability: what a host user may have put there. */
static void plant_host_suid(void)
{
	char p[256];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "%s/hostsuid", dir);
	if (lstat(p, &st) == 0 && !S_ISREG(st.st_mode))
		return; /* the guest put something else there */
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0755);
	if (fd < 0)
		return;
	if (write(fd, HOST_SUID_DATA, 4) != 4 || fchmod(fd, 06755) || fstat(fd, &st))
		abort();
	(void)fsetxattr(fd, "security.capability", host_cap, sizeof(host_cap), 0);
	close(fd);
	for (unsigned i = 0; i < nr_host_ino; i++)
		if (host_ino[i] == st.st_ino)
			return;
	host_ino[nr_host_ino++ % 64] = st.st_ino;
	if (nr_host_ino > 64)
		nr_host_ino = 64;
}

static int host_made(const char *p, const struct stat *st)
{
	char buf[8];
	unsigned i;
	int fd, ok;

	for (i = 0; i < nr_host_ino && host_ino[i] != st->st_ino; i++)
		;
	if (i == nr_host_ino || !S_ISREG(st->st_mode) || st->st_size != 4)
		return 0;
	fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ok = read(fd, buf, sizeof(buf)) == 4 && !memcmp(buf, HOST_SUID_DATA, 4);
	close(fd);
	return ok;
}

/* Nothing in the share is setuid, setgid but a directory, capable,
 * labelled with trusted.* or system.*, or someone else's. */
static int check_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	char names[4096];
	ssize_t n, k;
	int priv = (st->st_mode & S_ISUID) || (!S_ISDIR(st->st_mode) && (st->st_mode & S_ISGID));

	(void)flag, (void)f;
	if (st->st_uid != my_uid || st->st_gid != my_gid) {
		fprintf(stderr, "fuzz_fuse: %s belongs to %u:%u\n", p, st->st_uid, st->st_gid);
		abort();
	}
	n = llistxattr(p, names, sizeof(names));
	for (k = 0; k < n; k += (ssize_t)strlen(names + k) + 1) {
		const char *x = names + k;

		if (!strncmp(x, "trusted.", 8) || !strncmp(x, "system.", 7) ||
		    (!strcmp(x, "security.capability") && !host_made(p, st))) {
			fprintf(stderr, "fuzz_fuse: %s has xattr %s\n", p, x);
			abort();
		}
	}
	if (priv && !host_made(p, st)) {
		fprintf(stderr, "fuzz_fuse: %s has mode %o\n", p, st->st_mode);
		abort();
	}
	return 0;
}

static void check_share(void)
{
	if (nftw(dir, check_one, 16, FTW_PHYS))
		abort();
}

static void one(const uint8_t *req, size_t len, size_t outsize)
{
	struct iovec in = { (void *)req, len }, out = { outbuf, outsize };
	int64_t r = fuse_handle(&srv, &in, 1, &out, 1);
	struct fuse_out_header oh;
	struct fuse_lk_done d[FUSE_LK_WAITERS_MAX];
	unsigned i, k, before = fuse_lk_waiting(&srv);

	if (fuse_lk_waiting(&srv) > FUSE_LK_WAITERS_MAX)
		abort();
	/* Waiters end with an errno (0: granted), and only waiters end. */
	k = fuse_lk_poll(&srv, d, FUSE_LK_WAITERS_MAX);
	if (k > before || fuse_lk_waiting(&srv) != before - k)
		abort();
	for (i = 0; i < k; i++)
		if (d[i].error > 0 || d[i].error < -4095)
			abort();
	if (r < 0)
		return;
	if ((uint64_t)r > outsize)
		abort();
	if (r >= (int64_t)sizeof(oh)) {
		memcpy(&oh, outbuf, sizeof(oh));
		if (oh.len != r || oh.error > 0 || oh.error < -4095)
			abort();
	}
}

/* 16 bytes -> a request in reqbuf that changes modes, owners or xattrs:
 * [op][nodeid][mode:4][uid sel][gid sel][valid:2][name sel][xattr sel]
 * [fh][raw id:3]. Its length. */
static size_t structured(const uint8_t *b)
{
	static const char *const names[] = { "a", "b", "sub", "n1", "n2", "hostsuid", "fifo", "c" };
	static const char *const xnames[] = {
		"security.capability", "trusted.x", "system.posix_acl_access", "system.posix_acl_default",
		"user.x", "security.selinux", "user.", "trusted.overlay.opaque", "system.x",
		"security.ima", "SECURITY.capability", "user.security.capability",
	};
	uint32_t raw = (uint32_t)b[13] | (uint32_t)b[14] << 8 | (uint32_t)b[15] << 16;
	const uint32_t ids[8] = { 0, 1, 1000, 65534, my_uid, my_gid, (uint32_t)-1, raw };
	struct fuse_in_header *h = (void *)reqbuf;
	uint8_t *a = reqbuf + sizeof(*h);
	const char *name = names[b[10] % 8], *xn = xnames[b[11] % 12];
	uint32_t mode, valid = (uint32_t)b[8] | (uint32_t)b[9] << 8;
	size_t n = 0, k;

	memcpy(&mode, b + 2, 4);
	memset(reqbuf, 0, sizeof(*h) + 512);
	h->nodeid = b[1] % 24;
	h->unique = 1;
	switch (b[0] % 11) {
	case 0: {
		struct fuse_setattr_in *sa = (void *)a;

		h->opcode = FUSE_SETATTR;
		sa->valid = valid & (FATTR_MODE | FATTR_UID | FATTR_GID | FATTR_SIZE | FATTR_FH);
		sa->mode = mode;
		sa->uid = ids[b[6] % 8];
		sa->gid = ids[b[7] % 8];
		sa->size = raw % 64;
		sa->fh = b[12] % 8;
		n = sizeof(*sa);
		break;
	}
	case 1: {
		struct fuse_create_in *c = (void *)a;

		h->opcode = FUSE_CREATE;
		c->flags = (valid & 1 ? O_EXCL : 0) | (valid & 2 ? O_TRUNC : 0) | O_RDWR;
		c->mode = mode;
		n = sizeof(*c);
		break;
	}
	case 2: {
		struct fuse_mknod_in *m = (void *)a;

		h->opcode = FUSE_MKNOD;
		m->mode = mode;
		n = sizeof(*m);
		break;
	}
	case 3: {
		struct fuse_mkdir_in *m = (void *)a;

		h->opcode = FUSE_MKDIR;
		m->mode = mode;
		n = sizeof(*m);
		break;
	}
	case 4: /* SETXATTR: [size, flags] name value */
	case 8: /* REMOVEXATTR: name */
		h->opcode = b[0] % 11 == 4 ? FUSE_SETXATTR : FUSE_REMOVEXATTR;
		if (h->opcode == FUSE_SETXATTR) {
			const void *v = "v";
			uint32_t vl = 1, fl = valid & 3;

			if (!strcmp(xn, "security.capability"))
				v = host_cap, vl = sizeof(host_cap);
			else if (!strncmp(xn, "system.posix_acl", 16))
				v = acl, vl = sizeof(acl);
			k = strlen(xn) + 1;
			memcpy(a, &vl, 4);
			memcpy(a + 4, &fl, 4);
			memcpy(a + 8, xn, k);
			memcpy(a + 8 + k, v, vl);
			n = 8 + k + vl;
		} else {
			k = strlen(xn) + 1;
			memcpy(a, xn, k);
			n = k;
		}
		name = NULL;
		break;
	case 5: {
		struct fuse_write_in *w = (void *)a;

		h->opcode = FUSE_WRITE;
		w->fh = b[12] % 8;
		w->offset = raw % 64;
		w->size = 1 + b[13] % 4;
		memcpy(a + sizeof(*w), "XYZW", w->size);
		n = sizeof(*w) + w->size;
		name = NULL;
		break;
	}
	case 6: {
		struct fuse_open_in *o = (void *)a;

		h->opcode = FUSE_OPEN;
		o->flags = (valid & 3) | (valid & 4 ? O_TRUNC : 0);
		n = sizeof(*o);
		name = NULL;
		break;
	}
	case 7: {
		struct fuse_fallocate_in *f = (void *)a;

		h->opcode = FUSE_FALLOCATE;
		f->fh = b[12] % 8;
		f->length = 1 + raw % 8192;
		n = sizeof(*f);
		name = NULL;
		break;
	}
	case 9: { /* GETLK, SETLK, SETLKW: few owners, small or open ranges */
		static const uint32_t ops[3] = { FUSE_GETLK, FUSE_SETLK, FUSE_SETLKW };
		static const uint32_t types[4] = { F_RDLCK, F_WRLCK, F_UNLCK, 7 };
		struct fuse_lk_in *l = (void *)a;

		h->opcode = ops[valid % 3];
		h->unique = 2 + b[13]; /* an INTERRUPT below can name it */
		l->fh = b[12] % 8;
		l->owner = b[6] % 4;
		l->lk.type = types[b[7] % 4];
		l->lk.start = b[2] % 4 == 3 ? raw : b[3] % 16;
		l->lk.end = b[4] % 4 == 3 ? (uint64_t)INT64_MAX + (b[5] & 1) : l->lk.start + b[5] % 16;
		l->lk_flags = b[9] & 0x80 ? b[9] : (b[9] & 1 ? FUSE_LK_FLOCK : 0);
		n = sizeof(*l);
		name = NULL;
		break;
	}
	case 10: /* what ends a wait or a lock: INTERRUPT, FLUSH, RELEASE */
		if (valid % 3 == 0) {
			struct fuse_interrupt_in *in = (void *)a;

			h->opcode = FUSE_INTERRUPT;
			in->unique = 2 + b[13];
			n = sizeof(*in);
		} else if (valid % 3 == 1) {
			struct fuse_flush_in *f = (void *)a;

			h->opcode = FUSE_FLUSH;
			f->fh = b[12] % 8;
			f->lock_owner = b[6] % 4;
			n = sizeof(*f);
		} else {
			struct fuse_release_in *r = (void *)a;

			h->opcode = FUSE_RELEASE;
			r->fh = b[12] % 8;
			r->release_flags = b[9] & 1 ? FUSE_RELEASE_FLOCK_UNLOCK : 0;
			r->lock_owner = b[6] % 4;
			n = sizeof(*r);
		}
		name = NULL;
		break;
	}
	if (name) {
		k = strlen(name) + 1;
		memcpy(a + n, name, k);
		n += k;
	}
	h->len = (uint32_t)(sizeof(*h) + n);
	return h->len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct {
		struct fuse_in_header h;
		struct fuse_init_in i;
	} init = { { sizeof(init), FUSE_INIT, 1, 0, 0, 0, 0, 0, 0 }, { 7, 38, 1 << 20, ~0u, 0, { 0 } } };
	int roundtrip = len && (data[0] & 1);
	size_t n = 0;

	fuse_server_reset(&srv);
	plant_host_suid();
	one((const uint8_t *)&init, sizeof(init), 256);
	while (len - n >= 3 + 16 && n < len) {
		uint16_t outsize;
		uint32_t hl;
		size_t take;

		memcpy(&outsize, data + n + 1, 2);
		if (data[n] & 0x80) {
			n += 3;
			one(reqbuf, structured(data + n), outsize | 256u);
			n += 16;
			continue;
		}
		n += 3;
		if (len - n < sizeof(struct fuse_in_header))
			break;
		memcpy(&hl, data + n, 4);
		take = hl < sizeof(struct fuse_in_header) ? sizeof(struct fuse_in_header) : hl;
		if (take > len - n)
			take = len - n;
		if (take > sizeof(reqbuf))
			take = sizeof(reqbuf);
		memcpy(reqbuf, data + n, take);
		{
			struct fuse_in_header *h = (void *)reqbuf;

			/* Sizes bounded (the host disk is shared): offsets and
			 * lengths that allocate or grow files stay under 16 MiB. */
			if (h->opcode == FUSE_FALLOCATE && take >= sizeof(*h) + sizeof(struct fuse_fallocate_in)) {
				struct fuse_fallocate_in *f = (void *)(reqbuf + sizeof(*h));

				f->offset %= 1 << 20;
				f->length %= 1 << 20;
			}
			if (h->opcode == FUSE_WRITE && take >= sizeof(*h) + sizeof(struct fuse_write_in))
				((struct fuse_write_in *)(void *)(reqbuf + sizeof(*h)))->offset %= 16 << 20;
			if (h->opcode == FUSE_SETATTR && take >= sizeof(*h) + sizeof(struct fuse_setattr_in))
				((struct fuse_setattr_in *)(void *)(reqbuf + sizeof(*h)))->size %= 16 << 20;
		}
		one(reqbuf, take, outsize);
		n += take;
	}
	if (roundtrip) {
		struct sbuf b;
		struct srd r;

		sb_init(&b);
		fuse_save(&srv, &b);
		if (b.err)
			abort();
		sr_init(&r, b.p, b.len);
		if (fuse_restore(&srv, &r)) {
			fprintf(stderr, "fuzz_fuse: our own record did not load: %s\n", r.why ? r.why : "?");
			abort();
		}
		sb_free(&b);
	}
	check_outside();
	check_share();
	return 0;
}
