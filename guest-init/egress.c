/* The guest side of the egress proxy: see egress.h. */
#define _GNU_SOURCE
#include "egress.h"
#include "proto.h"
#include "vsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

unsigned gegress_port(void)
{
	char buf[16] = "";
	int fd = open(GEGRESS_STATE, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	unsigned long v;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	v = strtoul(buf, NULL, 10);
	return v > 0 && v < 65536 ? (unsigned)v : 0;
}

/* One connection: a byte pipe between the sandbox's client and the host. */
static void carry(int tcp, unsigned port)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = port };
	int v = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[65536];

	if (v < 0 || connect(v, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		static const char down[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n"
					   "Connection: close\r\nX-Vmm-Egress: the host proxy is not there\r\n\r\n";

		if (write_full(tcp, down, sizeof(down) - 1)) {
			/* the client went away */
		}
		return;
	}
	splice_streams(tcp, v, buf, sizeof(buf));
	close(v);
}

static void __attribute__((noreturn)) serve(int lfd, unsigned port)
{
	struct sigaction sa = { .sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT };
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	sigaction(SIGCHLD, &sa, NULL); /* connection processes reap themselves */
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		pid_t p;

		if (c < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				usleep(100000);
			continue;
		}
		p = fork();
		if (p == 0) {
			close(lfd);
			carry(c, port);
			_exit(0);
		}
		close(c);
	}
}

int gegress_start(unsigned port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char text[16];
	int one = 1, lfd, fd, r;
	pid_t p;

	if (port == 0 || port > 65535)
		return -EINVAL;
	if (gegress_port() == port)
		return 0; /* running (a clone of a sandbox that had it) */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -errno;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0) {
		r = -errno;
		goto err_sock;
	}
	/* Twice forked: the forwarder is PID 1's to reap, not this caller's. */
	p = fork();
	if (p < 0) {
		r = -errno;
		goto err_sock;
	}
	if (p == 0) {
		setsid();
		if (fork() == 0)
			serve(lfd, port);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	close(lfd);
	snprintf(text, sizeof(text), "%u\n", port);
	fd = open(GEGRESS_STATE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	r = write_full(fd, text, strlen(text)) ? -EIO : 0;
	close(fd);
	return r;
err_sock:
	close(lfd);
	return r;
}
