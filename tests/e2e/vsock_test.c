/* vsock_test: the guest side of the vsock end-to-end test (static, musl).
 *   vsock_test serve PORT
 *   vsock_test serve-unix PATH   (the same server on a host Unix socket:
 *                                 bench/vsock's ceiling)
 * Listens on vsock PORT; each connection sends one command line:
 *   SINK <n>          read n bytes, answer "SUM <crc32 hex>\n"
 *   SOURCE <n> <seed> send n pseudo-random bytes, then "SUM <crc32 hex>\n"
 *   ECHO              echo until EOF
 *   DIAL <port> <k>   open k connections to host port <port> at once, on
 *                     each send "hello <i>\n" and read a line back; answer
 *                     "DIALED <ok> <first error>\n"
 *   QUIT              answer "BYE\n" and exit 0 (the init goes on)
 * One thread per connection.
 *
 *   vsock_test api-escape PORT
 * Run as root by the sandbox API (vmm exec): can a process that gave up
 * root (uid/gid 65534) reach the API on vsock PORT from inside the guest?
 * As root it takes the token the way guest root can (the vmm port's token
 * window, else an older vmm's vmm.token= on the command line) and checks
 * that vsock loopback works; then, as 65534, it looks for the token in
 * /proc/cmdline, tries the token window and the vmm port without ioperm
 * (inherited I/O permission bits) and with it, and sends a health request
 * carrying root's token to PORT over loopback (CID 1 and the guest's own
 * CID). One "api-escape: CHECK=RESULT" line each, then
 * "api-escape: verdict=contained" (exit 0) or "verdict=ESCAPED" (exit 1). */
#include <errno.h>
#include "vmm/wire/vsock.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __x86_64__
#include <sys/io.h>
#endif

static uint32_t crc_table[256];

static void crc_init(void)
{
	uint32_t i, j, c;

	for (i = 0; i < 256; i++) {
		for (c = i, j = 0; j < 8; j++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_line(int fd, char *buf, size_t len)
{
	size_t i = 0;

	while (i + 1 < len) {
		ssize_t r = read(fd, buf + i, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (buf[i] == '\n') {
			buf[i] = 0;
			return 0;
		}
		i++;
	}
	return -1;
}

struct dial {
	unsigned port, i;
	int ok, err;
};

static void *dial_one(void *arg)
{
	struct dial *d = arg;
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = d->port };
	char line[64], want[64];
	int fd = socket(AF_VSOCK, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		d->err = errno;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	snprintf(want, sizeof(want), "hello %u", d->i);
	dprintf(fd, "%s\n", want);
	if (read_line(fd, line, sizeof(line)) == 0 && !strcmp(line, want))
		d->ok = 1;
	else
		d->err = EPROTO;
	close(fd);
	return NULL;
}

static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread uint8_t buf[65536];
	char line[128];
	unsigned long long n, seed;
	uint32_t crc = 0;

	if (read_line(fd, line, sizeof(line)))
		goto out;
	if (sscanf(line, "SINK %llu", &n) == 1) {
		while (n) {
			ssize_t r = read(fd, buf, n < sizeof(buf) ? n : sizeof(buf));

			if (r <= 0)
				goto out;
			crc = crc32_update(crc, buf, (size_t)r);
			n -= (unsigned long long)r;
		}
		dprintf(fd, "SUM %08x\n", crc);
	} else if (sscanf(line, "SOURCE %llu %llu", &n, &seed) == 2) {
		uint64_t x = seed | 1;

		while (n) {
			size_t k = n < sizeof(buf) ? n : sizeof(buf), i;

			for (i = 0; i < k; i++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				buf[i] = (uint8_t)x;
			}
			crc = crc32_update(crc, buf, k);
			if (write_all(fd, buf, k))
				goto out;
			n -= k;
		}
		dprintf(fd, "SUM %08x\n", crc);
	} else if (!strcmp(line, "ECHO")) {
		ssize_t r;

		while ((r = read(fd, buf, sizeof(buf))) > 0)
			if (write_all(fd, buf, (size_t)r))
				break;
	} else if (sscanf(line, "DIAL %llu %llu", &n, &seed) == 2 && seed <= 512) {
		struct dial *d = calloc(seed, sizeof(*d));
		pthread_t *t = calloc(seed, sizeof(*t));
		unsigned i, ok = 0;
		int first_err = 0;

		for (i = 0; i < seed; i++) {
			d[i].port = (unsigned)n;
			d[i].i = i;
			pthread_create(&t[i], NULL, dial_one, &d[i]);
		}
		for (i = 0; i < seed; i++) {
			pthread_join(t[i], NULL);
			ok += (unsigned)d[i].ok;
			if (!first_err && d[i].err)
				first_err = d[i].err;
		}
		dprintf(fd, "DIALED %u %s\n", ok, first_err ? strerror(first_err) : "none");
		free(d);
		free(t);
	} else if (!strcmp(line, "QUIT")) {
		dprintf(fd, "BYE\n");
		close(fd);
		exit(0);
	} else {
		dprintf(fd, "ERR unknown command\n");
	}
out:
	close(fd);
	return NULL;
}

/* ---- api-escape ----------------------------------------------------- */

#define TOKEN_BASE 0x0560 /* devices/devices.h: the token window */
#define TOKEN_LEN 128
#define VMM_PORT 0x0550

static int escaped;

static void report(const char *check, const char *result, int bad)
{
	printf("api-escape: %s=%s\n", check, result);
	fflush(stdout);
	escaped |= bad;
}

/* Guest root's ways to the token: the window, else vmm.token=. */
static const char *root_token(char *tok, size_t len)
{
	char buf[4096], *p;
	int fd;
	ssize_t n;

	tok[0] = '\0';
#ifdef __x86_64__
	if (ioperm(TOKEN_BASE, TOKEN_LEN, 1) == 0) {
		unsigned char w[TOKEN_LEN + 1] = { 0 };
		unsigned i;

		for (i = 0; i < TOKEN_LEN; i++)
			w[i] = inb((unsigned short)(TOKEN_BASE + i));
		ioperm(TOKEN_BASE, TOKEN_LEN, 0);
		if (memchr(w, 0, TOKEN_LEN) && w[0] && w[0] != 0xff) {
			snprintf(tok, len, "%s", (char *)w);
			return "window";
		}
	}
#endif
	fd = open("/proc/cmdline", O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return "none";
	buf[n] = '\0';
	p = strstr(buf, "vmm.token=");
	if (!p)
		return "none";
	p += 10;
	snprintf(tok, len, "%.*s", (int)strcspn(p, " \n"), p);
	return "cmdline";
}

static void segv_exit(int sig)
{
	(void)sig;
	_exit(4);
}

/* Does a port access in a child process fault (no permission)? The child
 * catches its SIGSEGV and exits 4: a handled fault is not logged by the
 * guest kernel ("traps: ... general protection fault"), which the e2e
 * console scan counts as a crash. want_ioperm: ask for the permission
 * first (it must be refused). */
static int port_denied(unsigned short port, int want_ioperm)
{
	int st;
	pid_t c = fork();

	if (c == 0) {
#ifdef __x86_64__
		struct sigaction sa = { .sa_handler = segv_exit };

		sigaction(SIGSEGV, &sa, NULL);
		if (want_ioperm && ioperm(port, 1, 1) < 0)
			_exit(3);
		(void)inb(port);
#else
		(void)port;
		(void)want_ioperm;
#endif
		_exit(0);
	}
	if (c < 0 || waitpid(c, &st, 0) != c)
		return 0;
	return (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) ||
	       (WIFEXITED(st) && (WEXITSTATUS(st) == 3 || WEXITSTATUS(st) == 4));
}

/* A health request with `tok` to cid:port. "refused" (no connection, or
 * closed without a frame), "error" (an ERROR frame), "ANSWERED". */
static const char *try_api(unsigned cid, unsigned port, const char *tok)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port };
	struct timeval tv = { .tv_sec = 10 };
	char req[512];
	uint8_t hdr[8];
	int fd = socket(AF_VSOCK, SOCK_STREAM, 0), n;
	size_t got = 0;

	if (fd < 0)
		return "no-vsock";
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return "refused";
	}
	n = snprintf(req + 8, sizeof(req) - 8, "{\"v\":1,\"op\":\"health\",\"token\":\"%s\"}", tok);
	memset(req, 0, 8);
	req[0] = (char)(n & 0xff);
	req[1] = (char)(n >> 8);
	req[4] = 1; /* REQUEST */
	if (write_all(fd, req, 8 + (size_t)n) == 0) {
		while (got < sizeof(hdr)) {
			ssize_t r = read(fd, hdr + got, sizeof(hdr) - got);

			if (r <= 0)
				break;
			got += (size_t)r;
		}
	}
	close(fd);
	if (got < sizeof(hdr))
		return "refused";
	return hdr[4] == 19 ? "ANSWERED" : "error"; /* RESULT, else ERROR */
}

/* Is vsock loopback there at all (else "refused" proves nothing)? */
static int loopback_works(void)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = 47111 };
	int l = socket(AF_VSOCK, SOCK_STREAM, 0), c = socket(AF_VSOCK, SOCK_STREAM, 0), ok;

	ok = l >= 0 && c >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 1) == 0;
	sa.svm_cid = 1; /* VMADDR_CID_LOCAL */
	ok = ok && connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (l >= 0)
		close(l);
	if (c >= 0)
		close(c);
	return ok;
}

static int api_escape(unsigned port)
{
	char tok[TOKEN_LEN + 1], buf[4096], res[64];
	const char *how = root_token(tok, sizeof(tok));
	unsigned cid = 0, cids[2];
	unsigned i;
	int fd;
	ssize_t n;

	/* guest-init closes a loopback connection unread (init.c refuse_peer):
	 * the request's write can race that close, and SIGPIPE would end the
	 * test mid-way instead of it reporting "refused". */
	signal(SIGPIPE, SIG_IGN);
	report("root-token", how, 0);
	fd = open("/dev/vsock", O_RDONLY);
	/* IOCTL_VM_SOCKETS_GET_LOCAL_CID, <linux/vm_sockets.h> */
	if (fd < 0 || ioctl(fd, _IO(7, 0xb9), &cid) < 0)
		cid = 0;
	if (fd >= 0)
		close(fd);
	if (!loopback_works()) {
		report("loopback", "unavailable (the checks below would prove nothing)", 1);
		return 1;
	}
	report("loopback", "works", 0);
	if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0 || getuid() != 65534) {
		report("setuid", strerror(errno), 1);
		return 1;
	}
	report("uid", "65534", 0);

	fd = open("/proc/cmdline", O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (strstr(buf, "vmm.token=") || (tok[0] && strstr(buf, tok)))
		report("cmdline-token", "PRESENT", 1);
	else
		report("cmdline-token", "absent", 0);

	if (port_denied(TOKEN_BASE, 0) && port_denied(TOKEN_BASE, 1))
		report("token-window", "denied", 0);
	else
		report("token-window", "READABLE", 1);
	if (port_denied(VMM_PORT, 0) && port_denied(VMM_PORT, 1))
		report("vmm-port", "denied", 0);
	else
		report("vmm-port", "USABLE", 1);

	cids[0] = 1;
	cids[1] = cid;
	for (i = 0; i < 2; i++) {
		const char *r;

		if (i == 1 && (cid == 0 || cid == 1))
			continue;
		r = try_api(cids[i], port, tok);
		snprintf(res, sizeof(res), "loopback-cid-%u", cids[i]);
		report(res, r, !strcmp(r, "ANSWERED"));
	}
	report("verdict", escaped ? "ESCAPED" : "contained", escaped);
	return escaped ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY };
	struct sockaddr_un su = { .sun_family = AF_UNIX };
	pthread_attr_t attr;
	int lfd, unix_mode;

	if (argc == 3 && !strcmp(argv[1], "api-escape"))
		return api_escape((unsigned)atoi(argv[2]));
	if (argc != 3 || (strcmp(argv[1], "serve") && strcmp(argv[1], "serve-unix"))) {
		fprintf(stderr, "usage: vsock_test serve PORT | serve-unix PATH | api-escape PORT\n");
		return 2;
	}
	crc_init();
	unix_mode = !strcmp(argv[1], "serve-unix");
	if (unix_mode) {
		snprintf(su.sun_path, sizeof(su.sun_path), "%s", argv[2]);
		unlink(su.sun_path);
		lfd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&su, sizeof(su)) < 0 || listen(lfd, 256) < 0) {
			perror("vsock_test: listen");
			return 1;
		}
		printf("vsock_test: listening on %s\n", su.sun_path);
	} else {
		sa.svm_port = (unsigned)atoi(argv[2]);
		lfd = socket(AF_VSOCK, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 256) < 0) {
			perror("vsock_test: listen");
			return 1;
		}
		printf("vsock_test: listening on port %u\n", sa.svm_port);
	}
	fflush(stdout);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		pthread_t t;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == EMFILE)
				continue;
			perror("vsock_test: accept");
			return 1;
		}
		if (pthread_create(&t, &attr, serve_conn, (void *)(intptr_t)fd))
			close(fd);
	}
}
