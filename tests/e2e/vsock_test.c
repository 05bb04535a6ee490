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
 * One thread per connection. */
#define _GNU_SOURCE
#include <errno.h>
#include "../../guest-init/vsock.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY };
	struct sockaddr_un su = { .sun_family = AF_UNIX };
	pthread_attr_t attr;
	int lfd, unix_mode;

	if (argc != 3 || (strcmp(argv[1], "serve") && strcmp(argv[1], "serve-unix"))) {
		fprintf(stderr, "usage: vsock_test serve PORT | serve-unix PATH\n");
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
