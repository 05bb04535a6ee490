/* unix_listen: owner-only sockets are 0600 whatever the umask and
 * whatever another thread does to it meanwhile, a live listener is not
 * taken over, a stale socket is replaced, a non-socket is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/base/unixsock.h"

struct dir {
	char path[64];
	char sock[96];
};

static int setup(void **state)
{
	struct dir *d = calloc(1, sizeof(*d));

	snprintf(d->path, sizeof(d->path), "/tmp/test_unixsock.XXXXXX");
	assert_non_null(mkdtemp(d->path));
	snprintf(d->sock, sizeof(d->sock), "%s/s", d->path);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dir *d = *state;

	unlink(d->sock);
	rmdir(d->path);
	free(d);
	return 0;
}

static mode_t mode_of(const char *p)
{
	struct stat st;

	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	return st.st_mode & 07777;
}

static void owner_only_despite_umask(void **state)
{
	struct dir *d = *state;
	mode_t old = umask(0);
	int fd = unix_listen(d->sock, 4, 1, "test");

	umask(old);
	assert_true(fd >= 0);
	assert_int_equal(mode_of(d->sock), 0600);
	close(fd);
}

/* The process's umask is shared by its threads: a listener that narrowed
 * it around bind() could see another thread's umask(0) and bind 0777, and
 * made the other thread's files 0600. Hammer it while binding. */
struct flip {
	atomic_int stop;
};

static void *flipper(void *arg)
{
	struct flip *f = arg;

	while (!atomic_load(&f->stop)) {
		mode_t m = umask(0);

		umask(m);
	}
	return NULL;
}

static void owner_only_under_umask_race(void **state)
{
	struct dir *d = *state;
	struct flip f = { 0 };
	pthread_t t;
	mode_t old = umask(0);
	int i, bad = 0;

	assert_int_equal(pthread_create(&t, NULL, flipper, &f), 0);
	for (i = 0; i < 2000; i++) {
		int fd = unix_listen(d->sock, 4, 1, "test");

		assert_true(fd >= 0);
		if (mode_of(d->sock) != 0600)
			bad++;
		close(fd);
		unlink(d->sock);
	}
	atomic_store(&f.stop, 1);
	pthread_join(t, NULL);
	/* and the listener left the umask as it found it */
	assert_int_equal(umask(old), 0);
	assert_int_equal(bad, 0);
}

static void live_listener_kept(void **state)
{
	struct dir *d = *state;
	int a = unix_listen(d->sock, 4, 0, "test");

	assert_true(a >= 0);
	assert_int_equal(unix_listen(d->sock, 4, 0, "test"), -EADDRINUSE);
	close(a);
	/* now stale: replaced */
	a = unix_listen(d->sock, 4, 0, "test");
	assert_true(a >= 0);
	close(a);
}

static void non_socket_refused(void **state)
{
	struct dir *d = *state;
	FILE *f = fopen(d->sock, "w");

	assert_non_null(f);
	fclose(f);
	assert_int_equal(unix_listen(d->sock, 4, 0, "test"), -EEXIST);
	assert_int_equal(access(d->sock, F_OK), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(owner_only_despite_umask, setup, teardown),
		cmocka_unit_test_setup_teardown(owner_only_under_umask_race, setup, teardown),
		cmocka_unit_test_setup_teardown(live_listener_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(non_socket_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
