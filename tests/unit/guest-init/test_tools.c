/* guest-init/tools.c: nohup, flock and script, the tools guest-init is
 * when called by their names (the base image's busybox lacks them). Each
 * runs in a child here, as it would from a shell. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest-init/tools.h"

struct dir {
	char path[64];
	char file[128];
};

static int setup(void **state)
{
	struct dir *d = calloc(1, sizeof(*d));

	assert_non_null(d);
	snprintf(d->path, sizeof(d->path), "/tmp/test_tools.XXXXXX");
	assert_non_null(mkdtemp(d->path));
	snprintf(d->file, sizeof(d->file), "%s/lock", d->path);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dir *d = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->path);
	assert_int_equal(system(cmd), 0);
	free(d);
	return 0;
}

/* Runs fn(argv) in a child (cwd: dir, stdout: out or /dev/null, stdin:
 * /dev/null); its exit status, 128+N for signal N. */
static int run_in(tool_fn *fn, char **argv, const char *dir, int out)
{
	int argc = 0, st;
	pid_t p;

	while (argv[argc])
		argc++;
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		int nul = open("/dev/null", O_RDWR);

		dup2(nul, 0);
		dup2(out >= 0 ? out : nul, 1);
		if (dir && chdir(dir) < 0)
			_exit(99);
		_exit(fn(argc, argv));
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	buf[0] = '\0';
	if (fd < 0)
		return buf;
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void test_lookup(void **state)
{
	(void)state;
	assert_ptr_equal(tools_lookup("nohup"), tool_nohup);
	assert_ptr_equal(tools_lookup("/bin/flock"), tool_flock);
	assert_ptr_equal(tools_lookup("/usr/bin/script"), tool_script);
	assert_null(tools_lookup("/sbin/vmm-init"));
	assert_null(tools_lookup("guest-init"));
	assert_null(tools_lookup("nohupx"));
	assert_null(tools_lookup(""));
	assert_null(tools_lookup(NULL));
}

/* ---- nohup ---- */

/* The command survives the hang-up that would end it. */
static void test_nohup_ignores_hup(void **state)
{
	struct dir *d = *state;
	char cmd[256], buf[64], out[128];
	char *argv[] = { "nohup", "sh", "-c", cmd, NULL };

	snprintf(out, sizeof(out), "%s/out", d->path);
	snprintf(cmd, sizeof(cmd), "kill -HUP $$; echo alive > %s", out);
	assert_int_equal(run_in(tool_nohup, argv, d->path, -1), 0);
	assert_string_equal(slurp(out, buf, sizeof(buf)), "alive\n");
}

static void test_nohup_status(void **state)
{
	struct dir *d = *state;
	char *exit5[] = { "nohup", "--", "sh", "-c", "exit 5", NULL };
	char *missing[] = { "nohup", "no-such-command-here", NULL };
	char *none[] = { "nohup", NULL };

	assert_int_equal(run_in(tool_nohup, exit5, d->path, -1), 5);
	assert_int_equal(run_in(tool_nohup, missing, d->path, -1), 127);
	assert_int_equal(run_in(tool_nohup, none, d->path, -1), 127);
}

/* Output meant for a terminal goes to nohup.out (mode 0600), stderr too. */
static void test_nohup_out_file(void **state)
{
	struct dir *d = *state;
	char *argv[] = { "nohup", "sh", "-c", "echo to-out; echo to-err >&2", NULL };
	char path[128], buf[64];
	struct stat st;
	int m = posix_openpt(O_RDWR | O_NOCTTY), s;

	assert_true(m >= 0);
	assert_int_equal(grantpt(m), 0);
	assert_int_equal(unlockpt(m), 0);
	s = open(ptsname(m), O_RDWR | O_NOCTTY);
	assert_true(s >= 0);
	/* stderr is a terminal too in the child: it inherits ours only
	 * when ours is, so make it the pty explicitly */
	{
		int saved = dup(2);

		dup2(s, 2);
		assert_int_equal(run_in(tool_nohup, argv, d->path, s), 0);
		dup2(saved, 2);
		close(saved);
	}
	close(s);
	close(m);
	snprintf(path, sizeof(path), "%s/nohup.out", d->path);
	assert_string_equal(slurp(path, buf, sizeof(buf)), "to-out\nto-err\n");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
}

/* ---- flock ---- */

static int parse(struct flock_args *a, char **argv)
{
	char err[256];
	int argc = 0;

	while (argv[argc])
		argc++;
	return flock_parse(argc, argv, a, err, sizeof(err));
}

static void test_flock_parse(void **state)
{
	struct flock_args a;
	char *cmd[] = { "flock", "-sn", "-w", "2.5", "-o", "/tmp/l", "make", "-j2", NULL };
	char *shell[] = { "flock", "--exclusive", "-E", "9", "/tmp/l", "-c", "echo hi", NULL };
	char *fd[] = { "flock", "-u", "9", NULL };
	char *w0[] = { "flock", "-w", "0", "/tmp/l", "true", NULL };
	char *bad[][6] = {
		{ "flock", NULL },                       /* nothing */
		{ "flock", "/tmp/l", NULL },             /* a file needs a command */
		{ "flock", "-w", NULL },                 /* no value */
		{ "flock", "-w", "x", "f", "true", NULL }, /* not a number */
		{ "flock", "-E", "300", "f", "true", NULL },
		{ "flock", "-z", "f", "true", NULL },    /* unknown */
	};
	char *c2[] = { "flock", "f", "-c", "a", "b", NULL };
	unsigned i;

	(void)state;
	assert_int_equal(parse(&a, cmd), 0);
	assert_int_equal(a.op, LOCK_SH);
	assert_true(a.nonblock && a.close_fd);
	assert_true(a.timeout == 2.5);
	assert_string_equal(a.path, "/tmp/l");
	assert_string_equal(a.cmd[0], "make");
	assert_string_equal(a.cmd[1], "-j2");
	assert_null(a.cmd[2]);
	assert_int_equal(a.fd, -1);

	assert_int_equal(parse(&a, shell), 0);
	assert_int_equal(a.op, LOCK_EX);
	assert_int_equal(a.conflict_code, 9);
	assert_string_equal(a.shell_cmd, "echo hi");
	assert_null(a.cmd);

	assert_int_equal(parse(&a, fd), 0);
	assert_int_equal(a.op, LOCK_UN);
	assert_int_equal(a.fd, 9);
	assert_null(a.path);

	assert_int_equal(parse(&a, w0), 0);
	assert_true(a.nonblock);
	{
		char *attached[] = { "flock", "-nw3", "--conflict-exit-code=7", "/tmp/l", "true", NULL };

		assert_int_equal(parse(&a, attached), 0);
		assert_true(a.nonblock && a.timeout == 3);
		assert_int_equal(a.conflict_code, 7);
	}

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse(&a, bad[i]), -1);
	assert_int_equal(parse(&a, c2), -1);
}

/* Busy: -n and -w give 1 (or -E's code); free: the command runs and its
 * status is flock's. */
static void test_flock_file(void **state)
{
	struct dir *d = *state;
	char *nb[] = { "flock", "-n", d->file, "true", NULL };
	char *code[] = { "flock", "-n", "-E", "9", d->file, "true", NULL };
	char *wait[] = { "flock", "-w", "0.2", d->file, "true", NULL };
	char *shared[] = { "flock", "-s", "-n", d->file, "true", NULL };
	char *st7[] = { "flock", d->file, "sh", "-c", "exit 7", NULL };
	char *c[] = { "flock", d->file, "-c", "exit 4", NULL };
	int held = open(d->file, O_RDONLY | O_CREAT, 0644);

	assert_true(held >= 0);
	assert_int_equal(flock(held, LOCK_EX), 0);
	assert_int_equal(run_in(tool_flock, nb, NULL, -1), 1);
	assert_int_equal(run_in(tool_flock, code, NULL, -1), 9);
	assert_int_equal(run_in(tool_flock, wait, NULL, -1), 1);
	assert_int_equal(flock(held, LOCK_SH), 0); /* shared: others may share */
	assert_int_equal(run_in(tool_flock, shared, NULL, -1), 0);
	assert_int_equal(run_in(tool_flock, nb, NULL, -1), 1);
	assert_int_equal(flock(held, LOCK_UN), 0);
	assert_int_equal(run_in(tool_flock, nb, NULL, -1), 0);
	assert_int_equal(run_in(tool_flock, st7, NULL, -1), 7);
	assert_int_equal(run_in(tool_flock, c, NULL, -1), 4);
	close(held);
}

/* The lock is held while the command runs (by flock itself with -o) and
 * free after; a missing file is made, a directory can be locked. */
static void test_flock_held_during_command(void **state)
{
	struct dir *d = *state;
	char cmd[512], started[128], go[128], newfile[128];
	char *argv[] = { "flock", "-o", d->file, "-c", cmd, NULL };
	char *dir[] = { "flock", "-n", d->path, "true", NULL };
	char *made[] = { "flock", newfile, "true", NULL };
	int fd, st, i;
	pid_t p;

	snprintf(started, sizeof(started), "%s/started", d->path);
	snprintf(go, sizeof(go), "%s/go", d->path);
	snprintf(cmd, sizeof(cmd), "touch %s; while [ ! -e %s ]; do sleep 0.02; done", started, go);
	p = fork();
	assert_true(p >= 0);
	if (p == 0)
		_exit(tool_flock(5, argv));
	for (i = 0; i < 5000 && access(started, F_OK) < 0; i++)
		usleep(2000);
	assert_int_equal(access(started, F_OK), 0);
	fd = open(d->file, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	close(open(go, O_WRONLY | O_CREAT, 0644));
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	close(fd);

	assert_int_equal(run_in(tool_flock, dir, NULL, -1), 0);
	snprintf(newfile, sizeof(newfile), "%s/made", d->path);
	assert_int_equal(run_in(tool_flock, made, NULL, -1), 0);
	assert_int_equal(access(newfile, F_OK), 0);
}

static int lock_fd_child(int argc, char **argv)
{
	/* flock's FD form locks the caller's descriptor; it stays locked
	 * after flock returns, for whoever holds the descriptor */
	int fd = open(argv[argc - 1], O_RDONLY);
	char num[16], *fargv[] = { "flock", "-x", num, NULL };
	int other, r;

	(void)argc;
	snprintf(num, sizeof(num), "%d", fd);
	r = tool_flock(3, fargv);
	if (r)
		return 10 + r;
	other = open(argv[argc - 1], O_RDONLY);
	if (flock(other, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
		return 2;
	return 0;
}

static void test_flock_fd(void **state)
{
	struct dir *d = *state;
	char *argv[] = { "lock-fd", d->file, NULL };
	int fd = open(d->file, O_RDONLY | O_CREAT, 0644);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(run_in(lock_fd_child, argv, NULL, -1), 0);
}

/* ---- script ---- */

static void test_script_parse(void **state)
{
	struct script_args a;
	char err[256];
	char *full[] = { "script", "-qe", "-a", "-c", "make test", "log.txt", NULL };
	char *glued[] = { "script", "--quiet", "--return", "-cecho", NULL };
	char *two[] = { "script", "a", "b", NULL };
	char *nocmd[] = { "script", "-c", NULL };
	char *unk[] = { "script", "-z", NULL };

	(void)state;
	assert_int_equal(script_parse(6, full, &a, err, sizeof(err)), 0);
	assert_true(a.quiet && a.ret && a.append);
	assert_string_equal(a.cmd, "make test");
	assert_string_equal(a.file, "log.txt");
	assert_int_equal(script_parse(4, glued, &a, err, sizeof(err)), 0);
	assert_string_equal(a.cmd, "echo");
	assert_string_equal(a.file, "typescript");
	assert_int_equal(script_parse(3, two, &a, err, sizeof(err)), -1);
	assert_int_equal(script_parse(2, nocmd, &a, err, sizeof(err)), -1);
	assert_int_equal(script_parse(2, unk, &a, err, sizeof(err)), -1);
}

/* The command runs on a terminal; its output reaches stdout and the
 * typescript; -e gives its status, a signal as 128+N. */
static void test_script_runs_on_pty(void **state)
{
	struct dir *d = *state;
	char log[128], buf[256], got[256];
	char *tty[] = { "script", "-q", "-c", "tty; test -t 0 && echo stdin-tty", log, NULL };
	char *ret[] = { "script", "-q", "-e", "-c", "exit 3", "/dev/null", NULL };
	char *noret[] = { "script", "-q", "-c", "exit 3", "/dev/null", NULL };
	char *sig[] = { "script", "-qe", "-c", "kill -TERM $$", "/dev/null", NULL };
	int p[2];
	ssize_t n;

	snprintf(log, sizeof(log), "%s/typescript", d->path);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(run_in(tool_script, tty, d->path, p[1]), 0);
	close(p[1]);
	n = read(p[0], got, sizeof(got) - 1);
	close(p[0]);
	assert_true(n > 0);
	got[n] = '\0';
	assert_non_null(strstr(got, "/dev/pts/"));
	assert_non_null(strstr(got, "stdin-tty"));
	assert_null(strstr(got, "Script started")); /* -q */
	assert_non_null(strstr(slurp(log, buf, sizeof(buf)), "/dev/pts/"));
	assert_int_equal(run_in(tool_script, ret, d->path, -1), 3);
	assert_int_equal(run_in(tool_script, noret, d->path, -1), 0);
	assert_int_equal(run_in(tool_script, sig, d->path, -1), 128 + SIGTERM);
}

/* Without -q: the start and end notes, on stdout and in the typescript. */
static void test_script_notes(void **state)
{
	struct dir *d = *state;
	char log[128], buf[512];
	char *argv[] = { "script", "-c", "echo hello", log, NULL };

	snprintf(log, sizeof(log), "%s/ts", d->path);
	assert_int_equal(run_in(tool_script, argv, d->path, -1), 0);
	slurp(log, buf, sizeof(buf));
	assert_non_null(strstr(buf, "Script started on "));
	assert_non_null(strstr(buf, "hello"));
	assert_non_null(strstr(buf, "COMMAND_EXIT_CODE=\"0\""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test_setup_teardown(test_nohup_ignores_hup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nohup_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nohup_out_file, setup, teardown),
		cmocka_unit_test(test_flock_parse),
		cmocka_unit_test_setup_teardown(test_flock_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flock_held_during_command, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flock_fd, setup, teardown),
		cmocka_unit_test(test_script_parse),
		cmocka_unit_test_setup_teardown(test_script_runs_on_pty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_script_notes, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
