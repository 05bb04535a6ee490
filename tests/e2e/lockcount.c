/* The guest (and host) side of tests/e2e/fs.sh's lock checks: fcntl
 * record locks on a shared drive's file, static so it runs in any guest
 * and on the host alike.
 *   lockcount count FILE N         N times: lock, read the number in FILE,
 *                                  write it plus one, unlock (F_SETLKW)
 *   lockcount hold FILE SECS       holds a write lock on FILE for SECS s
 *                                  (prints "held" once it has it)
 *   lockcount probe FILE           "locked" if another holder has it
 *                                  (F_GETLK, then F_SETLK refused), "free"
 *   lockcount pingpong FILE P N    takes turns with a partner through the
 *                                  number in FILE: under the lock, adds one
 *                                  when it is even (P 0) or odd (P 1), until
 *                                  it reaches N; prints the mean time of
 *                                  one turn in microseconds
 *   lockcount pair FILE N          N uncontended lock/unlock pairs; prints
 *                                  the mean time of one in microseconds
 *   lockcount flock FILE CMD...    runs CMD under an exclusive flock(2) of
 *                                  FILE, as util-linux flock(1) does (the
 *                                  base image's busybox has no flock)
 *   lockcount flockprobe FILE      "locked" if a flock(LOCK_EX|LOCK_NB) of
 *                                  FILE is refused, "free"
 * Exits 0, or 1 with a message. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int lk(int fd, short type, int wait)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };

	while (fcntl(fd, wait ? F_SETLKW : F_SETLK, &fl) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return 0;
}

static long get(int fd)
{
	char b[32] = { 0 };

	if (pread(fd, b, sizeof(b) - 1, 0) < 0)
		return -1;
	return atol(b);
}

static int put(int fd, long v)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%ld\n", v);

	return pwrite(fd, b, (size_t)n, 0) == n && ftruncate(fd, n) == 0 ? 0 : -1;
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int die(const char *what)
{
	fprintf(stderr, "lockcount: %s: %s\n", what, strerror(errno));
	return 1;
}

static int count(int fd, long n)
{
	long i, v;

	for (i = 0; i < n; i++) {
		if (lk(fd, F_WRLCK, 1))
			return die("F_SETLKW");
		if ((v = get(fd)) < 0 || put(fd, v + 1))
			return die("read/write");
		if (lk(fd, F_UNLCK, 0))
			return die("unlock");
	}
	return 0;
}

static int pingpong(int fd, long parity, long n)
{
	double t0 = now_us();
	long v = 0, turns = 0;

	while (v < n) {
		if (lk(fd, F_WRLCK, 1))
			return die("F_SETLKW");
		if ((v = get(fd)) < 0)
			return die("read");
		if (v < n && v % 2 == parity) {
			if (put(fd, v + 1))
				return die("write");
			turns++;
		}
		if (lk(fd, F_UNLCK, 0))
			return die("unlock");
	}
	printf("%.0f\n", (now_us() - t0) / (double)(turns ? turns : 1) / 2);
	return 0;
}

/* CMD under an exclusive flock of fd; exits with CMD's status. */
static int under_flock(int fd, char **cmd)
{
	int st;
	pid_t pid;

	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return die("flock");
	pid = fork();
	if (pid < 0)
		return die("fork");
	if (pid == 0) {
		execvp(cmd[0], cmd);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return die("waitpid");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	double t0;
	long i;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: lockcount count|hold|probe|pingpong|pair|flock|flockprobe FILE [ARGS]\n");
		return 1;
	}
	fd = open(argv[2], O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		return die(argv[2]);
	if (!strcmp(argv[1], "count") && argc == 4)
		return count(fd, atol(argv[3]));
	if (!strcmp(argv[1], "hold") && argc == 4) {
		if (lk(fd, F_WRLCK, 1))
			return die("F_SETLKW");
		printf("held\n");
		fflush(stdout);
		sleep((unsigned)atoi(argv[3]));
		return 0;
	}
	if (!strcmp(argv[1], "flock") && argc >= 4)
		return under_flock(fd, argv + 3);
	if (!strcmp(argv[1], "flockprobe")) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return printf("free\n"), 0;
		return printf(errno == EWOULDBLOCK ? "locked\n" : "inconsistent\n"), 0;
	}
	if (!strcmp(argv[1], "probe")) {
		if (fcntl(fd, F_GETLK, &fl) < 0)
			return die("F_GETLK");
		if (fl.l_type == F_UNLCK) {
			printf("free\n");
			return 0;
		}
		printf(lk(fd, F_WRLCK, 0) < 0 && (errno == EAGAIN || errno == EACCES) ? "locked\n" : "inconsistent\n");
		return 0;
	}
	if (!strcmp(argv[1], "pingpong") && argc == 5)
		return pingpong(fd, atol(argv[3]), atol(argv[4]));
	if (!strcmp(argv[1], "pair") && argc == 4) {
		long n = atol(argv[3]);

		t0 = now_us();
		for (i = 0; i < n; i++)
			if (lk(fd, F_WRLCK, 1) || lk(fd, F_UNLCK, 0))
				return die("lock");
		printf("%.0f\n", (now_us() - t0) / (double)(n ? n : 1));
		return 0;
	}
	fprintf(stderr, "lockcount: bad arguments\n");
	return 1;
}
