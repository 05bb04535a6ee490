/* The guest side of the egress proxy: see egress.h. */
#include "guest-init/guest_egress.h"
#include "vmm/wire/proto.h"
#include "vmm/wire/vsock.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
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

#define CA_BEGIN "# vmm egress CA (begin)\n"
#define CA_END "# vmm egress CA (end)\n"
#define CA_MAX 8192

/* The CA's PEM from the host's proxy: its length, 0 if the proxy has
 * none (404), or -errno. Checked to be one PEM certificate's characters:
 * it goes into files every TLS client in the sandbox reads. */
static long fetch_ca(unsigned port, char *pem, size_t max)
{
	static const char req[] = "GET http://vmm-egress.invalid/ca.pem HTTP/1.1\r\nHost: vmm-egress.invalid\r\n\r\n";
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = port };
	struct timeval tv = { .tv_sec = 10 };
	char buf[CA_MAX + 512], *body;
	size_t got = 0, i, n;
	ssize_t k;
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write_full(fd, req, sizeof(req) - 1)) {
		close(fd);
		return -EHOSTUNREACH;
	}
	while (got < sizeof(buf) - 1 && (k = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)k;
	close(fd);
	buf[got] = '\0';
	if (!strncmp(buf, "HTTP/1.1 404", 12))
		return 0;
	body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.1 200", 12) || !body)
		return -EPROTO;
	body += 4;
	n = strlen(body);
	if (n >= max || strncmp(body, "-----BEGIN CERTIFICATE-----\n", 28) ||
	    !strstr(body, "-----END CERTIFICATE-----\n"))
		return -EPROTO;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)body[i]) && !strchr("+/=-\n ", body[i]))
			return -EPROTO;
	memcpy(pem, body, n + 1);
	return (long)n;
}

static int write_file(const char *path, const char *a, size_t al, const char *b, size_t bl)
{
	char tmp[256];
	int fd, r;

	snprintf(tmp, sizeof(tmp), "%s.vmm-tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	r = write_full(fd, a, al) || write_full(fd, b, bl) ? -EIO : 0;
	close(fd);
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

/* The system bundle without the previous egress CA's block (heap), or NULL. */
static char *bundle_without_ca(size_t *len)
{
	int fd = open(GEGRESS_SYS_BUNDLE, O_RDONLY | O_CLOEXEC);
	size_t cap = 1 << 20, n = 0;
	char *buf, *b, *e;
	ssize_t k;

	*len = 0;
	if (fd < 0)
		return NULL;
	buf = malloc(cap + 1);
	while (buf && n < cap && (k = read(fd, buf + n, cap - n)) > 0)
		n += (size_t)k;
	close(fd);
	if (!buf || n == cap) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	while ((b = strstr(buf, CA_BEGIN)) && (e = strstr(b, CA_END))) {
		e += strlen(CA_END);
		memmove(b, e, strlen(e) + 1);
	}
	*len = strlen(buf);
	return buf;
}

int gegress_install_ca(unsigned port)
{
	char pem[CA_MAX], block[CA_MAX + 64];
	size_t sys_len;
	char *sys;
	long n = fetch_ca(port, pem, sizeof(pem));
	int r = 0, bl;

	if (n < 0)
		return (int)n;
	sys = bundle_without_ca(&sys_len);
	if (n == 0) {
		/* nothing intercepted: no CA of an earlier sandbox stays */
		unlink(GEGRESS_CA);
		unlink(GEGRESS_BUNDLE);
		unlink(GEGRESS_LOCAL_CA);
		if (sys)
			r = write_file(GEGRESS_SYS_BUNDLE, sys, sys_len, "", 0);
		free(sys);
		return r;
	}
	bl = snprintf(block, sizeof(block), "%s%s%s", CA_BEGIN, pem, CA_END);
	r = write_file(GEGRESS_CA, pem, (size_t)n, "", 0);
	if (!r && access("/usr/local/share/ca-certificates", F_OK) == 0)
		r = write_file(GEGRESS_LOCAL_CA, pem, (size_t)n, "", 0);
	/* The bundle update-ca-certificates would build, without running it
	 * (it rehashes every certificate: minutes where guest ring 0 is
	 * emulated, and again after every restore). */
	if (!r && sys)
		r = write_file(GEGRESS_SYS_BUNDLE, sys, sys_len, block, (size_t)bl);
	if (!r)
		r = write_file(GEGRESS_BUNDLE, sys ? sys : "", sys_len, block, (size_t)bl);
	free(sys);
	return r;
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
	if (gegress_port() == port) {
		/* running (a clone of a sandbox that had it): its own sandbox's CA */
		gegress_install_ca(port);
		return 0;
	}
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
	/* The CA before the state file: commands that see the port see the
	 * CA's variables too. A failure leaves HTTPS interception off, not
	 * the proxy (plain HTTP and pass-through tunnels work without it). */
	gegress_install_ca(port);
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
