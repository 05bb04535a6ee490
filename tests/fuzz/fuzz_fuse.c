/* libFuzzer target: the FUSE server's request path against a scratch
 * directory made in LLVMFuzzerInitialize (files, a subdirectory, symlinks
 * out of it, a FIFO). Input: records of [u8 flags][u16 reply size][request
 * (its header's len, clamped to what is left)]; each input starts a new
 * FUSE session (INIT) and may end with a snapshot save/restore round trip.
 * Checks: a reply never claims more than the buffer, never a positive
 * error, and nothing outside the scratch directory changes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/fuse.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static struct fuse_server srv;
static char top[64], dir[96], canary[128];
static uint8_t reqbuf[FUSE_MAX_BODY + 4096], outbuf[FUSE_MAX_REPLY + 4096];

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
	p.path = dir;
	if (fuse_server_init(&srv, &p))
		abort();
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

static void one(const uint8_t *req, size_t len, size_t outsize)
{
	struct iovec in = { (void *)req, len }, out = { outbuf, outsize };
	int64_t r = fuse_handle(&srv, &in, 1, &out, 1);
	struct fuse_out_header oh;

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct {
		struct fuse_in_header h;
		struct fuse_init_in i;
	} init = { { sizeof(init), FUSE_INIT, 1, 0, 0, 0, 0, 0, 0 }, { 7, 38, 1 << 20, ~0u, 0, { 0 } } };
	int roundtrip = len && (data[0] & 1);
	size_t n = 0;

	fuse_server_reset(&srv);
	one((const uint8_t *)&init, sizeof(init), 256);
	while (len - n >= 3 + sizeof(struct fuse_in_header) && n < len) {
		uint16_t outsize;
		uint32_t hl;
		size_t take;

		memcpy(&outsize, data + n + 1, 2);
		n += 3;
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
	return 0;
}
