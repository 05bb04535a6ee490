/* read_upto: what a pipe holds up to its end, never more than asked, a
 * stream that comes in pieces, and a bad descriptor's errno. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/wire/proto.h"

static void up_to_the_end_or_the_count(void **state)
{
	char buf[100];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "0123456789", 10), 10);
	close(p[1]);
	assert_int_equal(read_upto(p[0], buf, 4), 4);
	assert_memory_equal(buf, "0123", 4);
	assert_int_equal(read_upto(p[0], buf, sizeof(buf)), 6);
	assert_memory_equal(buf, "456789", 6);
	assert_int_equal(read_upto(p[0], buf, sizeof(buf)), 0);
	close(p[0]);
	assert_int_equal(read_upto(p[0], buf, sizeof(buf)), -EBADF);
}

/* A writer that sends 300 KiB in 1000-byte writes: all of it is read. */
static void a_stream_in_pieces(void **state)
{
	static char in[300 << 10], out[(300 << 10) + 16];
	size_t i;
	int p[2], st;
	pid_t w;

	(void)state;
	for (i = 0; i < sizeof(in); i++)
		in[i] = (char)(i * 7);
	assert_int_equal(pipe(p), 0);
	w = fork();
	assert_true(w >= 0);
	if (w == 0) {
		close(p[0]);
		for (i = 0; i < sizeof(in); i += 1000)
			if (write(p[1], in + i, sizeof(in) - i < 1000 ? sizeof(in) - i : 1000) < 0)
				_exit(1);
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read_upto(p[0], out, sizeof(out)), sizeof(in));
	assert_memory_equal(in, out, sizeof(in));
	close(p[0]);
	assert_int_equal(waitpid(w, &st, 0), w);
	assert_int_equal(st, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(up_to_the_end_or_the_count),
		cmocka_unit_test(a_stream_in_pieces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
