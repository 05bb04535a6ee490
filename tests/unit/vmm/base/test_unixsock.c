/* unix_listen: owner-only sockets are 0600 whatever the umask and
 * whatever another thread does to it meanwhile, a live listener is not
 * taken over, a stale socket is replaced, a non-socket is left alone.
 * At every path length from 100 to 300 bytes (sun_path holds 107): listen,
 * connect (with and without a folder descriptor), live refused, stale
 * replaced, the socket in its real folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st, (void)type, (void)f;
	return remove(p) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	struct dir *d = *state;

	assert_int_equal(nftw(d->path, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
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

/* A socket path of exactly `len` bytes under d->path ("DIR/PAD/.../s"),
 * its folders made. */
static void long_path(const struct dir *d, size_t len, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "%s", d->path);

	while (n + 2 < len) {
		size_t room = len - n - 2; /* what "/s" leaves */
		size_t k = room > 61 ? 40 : room - 1; /* "/" + k pad, never an empty last one */

		if (room <= 61)
			k = room - 1;
		assert_true(k >= 1);
		out[n++] = '/';
		memset(out + n, 'p', k);
		n += k;
		out[n] = '\0';
		assert_true(mkdir(out, 0700) == 0 || errno == EEXIST);
	}
	assert_int_equal(n + 2, len);
	snprintf(out + n, cap - n, "/s");
	assert_int_equal(strlen(out), len);
}

static void every_length(void **state)
{
	struct dir *d = *state;
	size_t len;

	for (len = 100; len <= 300; len++) {
		char p[512];
		struct stat st;
		int l, c, a, dir;

		long_path(d, len, p, sizeof(p));
		assert_int_equal(unix_path_fits(p), len < 108);
		l = unix_listen(p, 4, 1, "test");
		assert_true(l >= 0);
		/* where it belongs, with its mode */
		assert_int_equal(lstat(p, &st), 0);
		assert_true(S_ISSOCK(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0600);
		c = unix_connect(p, 0);
		assert_true(c >= 0);
		a = accept(l, NULL, NULL);
		assert_true(a >= 0);
		assert_int_equal(write(c, "x", 1), 1);
		close(c);
		close(a);
		/* through a folder descriptor, as the vsock device does */
		dir = unix_dir_open(p);
		assert_true(dir >= 0);
		c = unix_connect_at(dir, p, SOCK_NONBLOCK);
		assert_true(c >= 0);
		assert_true(fcntl(c, F_GETFL) & O_NONBLOCK);
		close(c);
		/* live: refused; stale: replaced */
		assert_int_equal(unix_listen(p, 4, 1, "test"), -EADDRINUSE);
		close(l);
		assert_int_equal(unix_connect_at(dir, p, 0), -ECONNREFUSED);
		l = unix_listen(p, 4, 0, "test");
		assert_true(l >= 0);
		c = unix_connect(p, 0);
		assert_true(c >= 0);
		close(c);
		close(l);
		close(dir);
		assert_int_equal(unlink(p), 0);
		assert_int_equal(unix_connect(p, 0), -ENOENT);
	}
}

/* The basename has to fit after "/proc/self/fd/N/". */
static void long_basename_refused(void **state)
{
	struct dir *d = *state;
	char p[512];
	size_t n = (size_t)snprintf(p, sizeof(p), "%s/", d->path);

	memset(p + n, 'n', 120);
	p[n + 120] = '\0';
	assert_int_equal(unix_listen(p, 4, 0, "test"), -ENAMETOOLONG);
	assert_int_equal(unix_connect(p, 0), -ENAMETOOLONG);
	assert_int_equal(unix_connect("", 0), -EINVAL);
}

/* Without /proc (a jail that mounts none): a long path is refused with
 * -ENAMETOOLONG (and its message), a short one still works. In a child
 * with a mount namespace of its own and a tmpfs over /proc. */
static void no_proc_refuses_long_paths(void **state)
{
	struct dir *d = *state;
	char p[512];
	pid_t pid;
	int st;

	long_path(d, 200, p, sizeof(p));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int l;

		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", "/proc", "tmpfs", 0, NULL) < 0)
			_exit(77); /* not root, or no mount namespaces here */
		if (unix_listen(p, 4, 0, "test") != -ENAMETOOLONG)
			_exit(1);
		if (unix_connect(p, 0) != -ENAMETOOLONG)
			_exit(2);
		l = unix_listen(d->sock, 4, 0, "test");
		if (l < 0)
			_exit(3);
		if (unix_connect(d->sock, 0) < 0)
			_exit(4);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(owner_only_despite_umask, setup, teardown),
		cmocka_unit_test_setup_teardown(owner_only_under_umask_race, setup, teardown),
		cmocka_unit_test_setup_teardown(live_listener_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(non_socket_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(every_length, setup, teardown),
		cmocka_unit_test_setup_teardown(long_basename_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(no_proc_refuses_long_paths, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
