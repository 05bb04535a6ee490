/* cli/images/rdump.c: debugfs rdump of a hostile ext4 stays in its folder.
 *
 * The image is the one a guest can write: mkfs.ext4 without metadata
 * checksums (a guest may switch them off), a file "y", a symbolic link
 * "x" to a host file outside the destination, then a second directory
 * entry for "y"'s inode renamed to "x" in the raw directory block. Plain
 * rdump creates the link, then opens "x" again for the file and writes
 * through the link into the host file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/images/rdump.h"

static int sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int have_tools(void)
{
	char why[256];

	return sh("command -v debugfs >/dev/null 2>&1 && command -v mkfs.ext4 >/dev/null 2>&1") == 0 &&
	       rdump_can_confine(why, sizeof(why)) == 0;
}

/* The second entry: the first dirent of inode `ino` named "q" becomes "x". */
static int rename_q_to_x(const char *img, uint32_t ino)
{
	int fd = open(img, O_RDWR);
	struct stat st;
	uint8_t *d;
	off_t i;
	int done = -1;

	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	d = malloc((size_t)st.st_size);
	if (!d || pread(fd, d, (size_t)st.st_size, 0) != st.st_size)
		goto out;
	for (i = 0; i + 9 < st.st_size; i++) {
		uint32_t v = (uint32_t)d[i] | (uint32_t)d[i + 1] << 8 | (uint32_t)d[i + 2] << 16 | (uint32_t)d[i + 3] << 24;

		if (v == ino && d[i + 6] == 1 && d[i + 7] == 1 && d[i + 8] == 'q' && (d[i + 4] | d[i + 5] << 8) >= 12) {
			d[i + 8] = 'x';
			done = pwrite(fd, d + i + 8, 1, i + 8) == 1 ? 0 : -1;
			break;
		}
	}
out:
	free(d);
	close(fd);
	return done;
}

static void link_then_file(void **state)
{
	char dir[] = "/tmp/vmm-test-rdump-XXXXXX", cmd[1024], victim[256], dest[256], got[32] = "";
	int fd;

	(void)state;
	if (!have_tools()) {
		skip();
		return;
	}
	assert_non_null(mkdtemp(dir));
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(dest, sizeof(dest), "%s/out", dir);
	fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "host\n", 5), 5);
	close(fd);
	assert_int_equal(mkdir(dest, 0755), 0);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && echo guest > payload && truncate -s 8M img && "
		 "mkfs.ext4 -q -F -O ^metadata_csum,^dir_index img && "
		 "printf 'write payload y\\nsymlink x %s\\nln y q\\n' | debugfs -w -f - img >/dev/null 2>&1",
		 dir, victim);
	assert_int_equal(sh(cmd), 0);
	assert_int_equal(rename_q_to_x(strcat(strcpy(cmd, dir), "/img"), 12), 0);
	(void)rdump_confined(cmd, dest, 1);
	/* the host file is untouched; the link itself may be there */
	fd = open(victim, O_RDONLY);
	assert_true(fd >= 0);
	assert_true(read(fd, got, sizeof(got) - 1) > 0);
	close(fd);
	assert_string_equal(got, "host\n");
	/* and what is not hostile came out */
	snprintf(cmd, sizeof(cmd), "%s/y", dest);
	fd = open(cmd, O_RDONLY);
	assert_true(fd >= 0);
	memset(got, 0, sizeof(got));
	assert_true(read(fd, got, sizeof(got) - 1) > 0);
	close(fd);
	assert_string_equal(got, "guest\n");
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	assert_int_equal(sh(cmd), 0);
}

/* Confined, a process writes beneath its folder and nowhere else. */
static void confine_blocks_outside(void **state)
{
	char dir[] = "/tmp/vmm-test-confine-XXXXXX", in[256], out[256], cmd[300];
	pid_t p;
	int st;

	(void)state;
	if (!have_tools()) {
		skip();
		return;
	}
	assert_non_null(mkdtemp(dir));
	snprintf(in, sizeof(in), "%s/in", dir);
	snprintf(out, sizeof(out), "%s/outside", dir);
	assert_int_equal(mkdir(in, 0700), 0);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		char f[300], l[300];
		int fd, ok;

		if (confine_writes_below(in))
			_exit(10);
		snprintf(f, sizeof(f), "%s/file", in);
		snprintf(l, sizeof(l), "%s/link", in);
		fd = open(f, O_WRONLY | O_CREAT, 0600);
		ok = fd >= 0;
		if (fd >= 0)
			close(fd);
		if (!ok)
			_exit(11);
		if (symlink(out, l) < 0)
			_exit(12);
		fd = open(l, O_WRONLY | O_CREAT, 0600); /* through the link: refused */
		if (fd >= 0 || errno != EACCES)
			_exit(13);
		fd = open(out, O_WRONLY | O_CREAT, 0600);
		if (fd >= 0 || errno != EACCES)
			_exit(14);
		_exit(0);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(access(out, F_OK), -1);
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	assert_int_equal(sh(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(link_then_file),
		cmocka_unit_test(confine_blocks_outside),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
