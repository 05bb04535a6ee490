/* Listening sockets for vmm's HTTP endpoints (cli/util/util.h): the MCP
 * transport (cli/mcp/mcp_http.c) and the E2B gateway (cli/e2b/). */
#include "cli/util/util.h"
#include "vmm/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

int cli_sockaddr_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

int cli_listen_tcp(const char *who, const char *spec, int allow_remote)
{
	char host[256];
	const char *port = NULL, *colon = strrchr(spec, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }, *ai;
	int fd, one = 1, r;

	if (!colon && *spec && strspn(spec, "0123456789") == strlen(spec)) {
		/* a port alone: loopback */
		snprintf(host, sizeof(host), "127.0.0.1");
		port = spec;
		goto resolve;
	}
	if (!colon || (size_t)(colon - spec) >= sizeof(host)) {
		log_err("%s: --listen wants ADDRESS:PORT (127.0.0.1:8080, [::1]:8080)", who);
		return -EINVAL;
	}
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	port = colon + 1;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
resolve:
	r = getaddrinfo(host, port, &hints, &ai);
	if (r) {
		log_err("%s: --listen %s: %s (a numeric address and port)", who, spec, gai_strerror(r));
		return -EINVAL;
	}
	if (!cli_sockaddr_loopback(ai->ai_addr) && !allow_remote) {
		log_err("%s: %s is not a loopback address: add --allow-remote to serve it (tokens travel in "
			"clear over plain HTTP: put TLS in front)", who, host);
		freeaddrinfo(ai);
		return -EPERM;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0) {
		r = -errno;
		log_err("%s: --listen %s: %s", who, spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return r;
	}
	freeaddrinfo(ai);
	return fd;
}

int cli_listen_addr(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char a[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return -errno;
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, a, sizeof(a));
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, a, sizeof(a));
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	snprintf(buf, len, "%s%s%s:%u", ss.ss_family == AF_INET6 ? "[" : "", a, ss.ss_family == AF_INET6 ? "]" : "",
		 port);
	return 0;
}

int cli_stop_signals(void)
{
	sigset_t sigs;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	fd = signalfd(-1, &sigs, SFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}
