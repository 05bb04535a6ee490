/* cli/util/progress.c: the one-line status (vmm cp's bytes) on a terminal and
 * elsewhere, written into a pipe and read back; vmm run's boot status
 * (cli/launch/boot_status.c) over it; and where vmm cp puts things
 * (cli/sandbox/cp_files.c's docker cp rules). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "cli/launch/boot_status.h"
#include "cli/sandbox/cp_files.h"
#include "cli/util/progress.h"

#include <errno.h>

/* What was written to the pipe so far (NUL-terminated). */
static const char *drain(int rd)
{
	static char buf[4096];
	ssize_t n = read(rd, buf, sizeof(buf) - 1);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void on_a_terminal(void **state)
{
	struct progress p;
	int fds[2];

	(void)state;
	assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
	progress_init(&p, fds[1], 1, 0);
	progress_show(&p, "booting");
	progress_show(&p, "kernel up");
	/* each status replaces the line: carriage return, erase, text */
	assert_string_equal(drain(fds[0]), "\r\033[Kbooting\r\033[Kkernel up");
	assert_true(p.shown);
	progress_clear(&p);
	assert_string_equal(drain(fds[0]), "\r\033[K");
	assert_false(p.shown);
	/* cleared once: a second clear writes nothing */
	progress_clear(&p);
	assert_string_equal(drain(fds[0]), "");
	close(fds[0]);
	close(fds[1]);
}

static void elsewhere(void **state)
{
	struct progress p;
	int fds[2];

	(void)state;
	assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
	progress_init(&p, fds[1], 0, 0);
	progress_show(&p, "booting");
	progress_show(&p, "booting"); /* no repeats */
	progress_show(&p, "ready");
	progress_clear(&p);           /* nothing to take back */
	assert_string_equal(drain(fds[0]), "booting\nready\n");
	close(fds[0]);
	close(fds[1]);
}

static void silenced(void **state)
{
	struct progress p;

	(void)state;
	progress_init(&p, -1, 1, 0);
	progress_show(&p, "booting");
	assert_false(p.shown);
	progress_clear(&p);
}

static void units(void **state)
{
	char b[32];

	(void)state;
	progress_bytes(b, sizeof(b), 0);
	assert_string_equal(b, "0 B");
	progress_bytes(b, sizeof(b), 1023);
	assert_string_equal(b, "1023 B");
	progress_bytes(b, sizeof(b), 1536);
	assert_string_equal(b, "1.5 KiB");
	progress_bytes(b, sizeof(b), 5ull << 30);
	assert_string_equal(b, "5.0 GiB");
	progress_bytes(b, sizeof(b), 3ull << 50);
	assert_string_equal(b, "3072.0 TiB");
	progress_elapsed(b, sizeof(b), 400000000ull);
	assert_string_equal(b, "0.4 s");
	progress_elapsed(b, sizeof(b), 12000000000ull);
	assert_string_equal(b, "12 s");
	progress_elapsed(b, sizeof(b), 125000000000ull);
	assert_string_equal(b, "2m05s");
}

static void cp_rules(void **state)
{
	static const struct {
		const char *src;
		int src_dir;
		const char *dst;
		int exists, is_dir;
		int rc, into;
	} t[] = {
		{ "f", 0, "/d", 1, 1, 0, 1 },        /* into an existing directory */
		{ "f", 0, "/d/", 1, 1, 0, 1 },
		{ "f", 0, "/new", 0, 0, 0, 0 },      /* a new file */
		{ "f", 0, "/new/", 0, 0, -ENOENT, 0 }, /* "DST/" must be there */
		{ "f", 0, "/file", 1, 0, 0, 0 },     /* replaced */
		{ "f", 0, "/file/", 1, 0, -ENOTDIR, 0 },
		{ "dir", 1, "/d", 1, 1, 0, 1 },      /* DST/dir */
		{ "dir/", 1, "/d", 1, 1, 0, 1 },
		{ "dir/.", 1, "/d", 1, 1, 0, 0 },    /* the content, merged */
		{ "dir/./", 1, "/d", 1, 1, 0, 0 },
		{ "/", 1, "/d", 1, 1, 0, 0 },        /* "/": its content */
		{ "dir", 1, "/new", 0, 0, 0, 0 },    /* DST becomes the copy */
		{ "dir", 1, "/new/", 0, 0, 0, 0 },   /* created */
		{ "dir", 1, "/file", 1, 0, -ENOTDIR, 0 },
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int into = -1, rc = cp_where(t[i].src, t[i].src_dir, t[i].dst, t[i].exists, t[i].is_dir, &into);

		if (rc != t[i].rc || (rc == 0 && into != t[i].into))
			fail_msg("%s -> %s: rc %d into %d, want %d %d", t[i].src, t[i].dst, rc, into, t[i].rc, t[i].into);
	}
}

static void cp_names(void **state)
{
	char b[256];
	int content;

	(void)state;
	cp_base("/a/b/", b, sizeof(b), &content);
	assert_string_equal(b, "b");
	assert_false(content);
	cp_base("/a/b/.", b, sizeof(b), &content);
	assert_string_equal(b, "b");
	assert_true(content);
	cp_base("name", b, sizeof(b), &content);
	assert_string_equal(b, "name");
	assert_false(content);
	cp_base(".", b, sizeof(b), &content);
	assert_true(content);
	cp_base("/", b, sizeof(b), &content);
	assert_true(content);
}

/* boot_status writes to stderr: point it at a pipe for the test. */
static int stderr_to_pipe(int fds[2], int *saved)
{
	if (pipe2(fds, O_NONBLOCK) < 0)
		return -1;
	*saved = dup(STDERR_FILENO);
	return dup2(fds[1], STDERR_FILENO) < 0 ? -1 : 0;
}

static void stderr_back(int fds[2], int saved)
{
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fds[0]);
	close(fds[1]);
}

static void boot_lines_elsewhere(void **state)
{
	struct boot_status b;
	int fds[2], saved = -1, m[2];

	(void)state;
	assert_int_equal(stderr_to_pipe(fds, &saved), 0);
	boot_status_init(&b, "sb1", 1, 0, 1000000000ull);
	boot_status_show(&b, BOOT_BOOTING, 1000000000ull);
	boot_status_show(&b, BOOT_BOOTING, 1500000000ull); /* the same stage: no line */
	/* the VMM's marker bytes: K, then R */
	assert_int_equal(pipe2(m, O_NONBLOCK), 0);
	assert_int_equal(boot_status_read(&b, m[0]), BOOT_BOOTING); /* nothing yet */
	assert_int_equal(write(m[1], "K", 1), 1);
	assert_int_equal(boot_status_read(&b, m[0]), BOOT_KERNEL_UP);
	boot_status_show(&b, BOOT_KERNEL_UP, 1900000000ull);
	assert_int_equal(write(m[1], "R", 1), 1);
	assert_int_equal(boot_status_read(&b, m[0]), BOOT_GUEST_READY);
	close(m[1]);
	assert_int_equal(boot_status_read(&b, m[0]), -1); /* EOF */
	close(m[0]);
	boot_status_show(&b, BOOT_API_READY, 3200000000ull);
	boot_status_show(&b, BOOT_BOOTING, 3300000000ull); /* never backwards */
	boot_status_done(&b);
	assert_string_equal(drain(fds[0]), "vmm: sandbox sb1: booting (0.0 s)\n"
					    "vmm: sandbox sb1: kernel up (0.9 s)\n"
					    "vmm: sandbox sb1: API ready (2.2 s)\n");
	stderr_back(fds, saved);
}

static void boot_line_on_a_terminal(void **state)
{
	struct boot_status b;
	int fds[2], saved = -1;

	(void)state;
	assert_int_equal(stderr_to_pipe(fds, &saved), 0);
	boot_status_init(&b, "sb1", 1, 1, 0);
	boot_status_show(&b, BOOT_BOOTING, 100000000ull);
	boot_status_show(&b, BOOT_BOOTING, 400000000ull); /* ticks */
	boot_status_show(&b, BOOT_API_READY, 2000000000ull);
	boot_status_done(&b); /* gone before the command's output */
	assert_string_equal(drain(fds[0]), "\r\033[Kvmm: sandbox sb1: booting (0.1 s)"
					    "\r\033[Kvmm: sandbox sb1: booting (0.4 s)"
					    "\r\033[Kvmm: sandbox sb1: API ready (2.0 s)\r\033[K");
	/* -q: nothing */
	boot_status_init(&b, "sb1", 0, 1, 0);
	boot_status_show(&b, BOOT_BOOTING, 1);
	boot_status_done(&b);
	assert_string_equal(drain(fds[0]), "");
	stderr_back(fds, saved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(on_a_terminal),
		cmocka_unit_test(elsewhere),
		cmocka_unit_test(silenced),
		cmocka_unit_test(units),
		cmocka_unit_test(cp_rules),
		cmocka_unit_test(cp_names),
		cmocka_unit_test(boot_lines_elsewhere),
		cmocka_unit_test(boot_line_on_a_terminal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
