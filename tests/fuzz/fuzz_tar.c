/* libFuzzer target: the tar extractor (vmm/wire/tar.c) against a real
 * temporary directory, the way tar_put and vmm cp out use it. The first
 * input byte picks the size of the pieces the rest is fed in (archives
 * arrive in frames of any size). After each input: nothing was written
 * outside the destination (a sibling directory stays empty) and no
 * temporary ".vmm-tar-ID-SEQ" file is left behind once tar_x_free ran; then the
 * destination is emptied for the next input. Limits are small so the
 * fuzzer reaches them. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/wire/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static int leftover;
static char tmp_prefix[64];

/* 1 if name is one of this extraction's temporaries (".vmm-tar-ID-SEQ",
 * vmm/wire/tar.c x_tmpname, ID random per extraction). An archive may name
 * its own entries ".vmm-tar-..." (the fuzzer made ".vmm-tar-58.630372713"
 * through a pax path, and ".vmm-tar-PID-SEQ" back when ID was the PID):
 * those are not leftovers, and it cannot guess ID. */
static int is_temporary(const char *name)
{
	size_t n = strlen(tmp_prefix);

	if (strncmp(name, tmp_prefix, n) || !name[n])
		return 0;
	return strspn(name + n, "0123456789") == strlen(name + n);
}

static int visit(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	if (f->level > 0 && is_temporary(p + f->base))
		leftover = 1;
	if (f->level > 0) {
		chmod(p, 0700);
		remove(p);
	}
	return 0;
}

static int make_writable(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_D || (S_ISDIR(st->st_mode) && flag != FTW_SL))
		chmod(p, 0700);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static char top[64], dst[96], outside[96];
	struct tar_limits lim = { .max_depth = 16, .max_entries = 64 };
	struct tar_x x;
	size_t chunk, off;
	DIR *d;
	int fd, r = 0, n = 0;

	if (!top[0]) {
		snprintf(top, sizeof(top), "/tmp/fuzz_tar.XXXXXX");
		if (!mkdtemp(top))
			abort();
		snprintf(dst, sizeof(dst), "%s/dst", top);
		snprintf(outside, sizeof(outside), "%s/outside", top);
		if (mkdir(dst, 0700) || mkdir(outside, 0700))
			abort();
	}
	if (!len)
		return 0;
	chunk = (size_t)data[0] * 7 + 1;
	data++;
	len--;
	fd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		abort();
	tar_x_init(&x, fd, &lim);
	snprintf(tmp_prefix, sizeof(tmp_prefix), ".vmm-tar-%s-", x.tmpid);
	for (off = 0; off < len && !r; off += chunk)
		r = tar_x_feed(&x, data + off, len - off < chunk ? len - off : chunk);
	if (!r)
		tar_x_finish(&x);
	tar_x_free(&x);
	close(fd);
	chmod(dst, 0700);
	d = opendir(outside);
	if (!d)
		abort();
	while (readdir(d))
		n++;
	closedir(d);
	if (n != 2)
		abort(); /* something was written outside the destination */
	nftw(dst, make_writable, 16, FTW_PHYS);
	leftover = 0;
	nftw(dst, visit, 16, FTW_DEPTH | FTW_PHYS);
	if (leftover && r == 0)
		abort(); /* a temporary left by a successful extraction */
	if (leftover)
		abort(); /* tar_x_free removes the file it was writing */
	return 0;
}
