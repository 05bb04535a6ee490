/* vmm oci networking; see oci_net.h. */
#include "cli/oci/oci_net.h"
#include "cli/util/util.h"
#include "vmm/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int oci_net_route_gw(const char *text, const char *ifname, char *gw, size_t len)
{
	const char *line = text, *nl;
	char iface[64], dest[16], gate[16], mask[16];
	unsigned flags;

	/* "Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window
	 * IRTT", the addresses as the kernel's raw __be32 in %08X */
	for (; line && *line; line = nl ? nl + 1 : NULL) {
		char buf[512];
		size_t n;
		struct in_addr a;

		nl = strchr(line, '\n');
		n = nl ? (size_t)(nl - line) : strlen(line);
		if (n >= sizeof(buf))
			continue;
		memcpy(buf, line, n);
		buf[n] = '\0';
		if (sscanf(buf, "%63s %15s %15s %x %*s %*s %*s %15s", iface, dest, gate, &flags, mask) != 5)
			continue;
		if (strcmp(iface, ifname) || strcmp(dest, "00000000") || strcmp(mask, "00000000") ||
		    !(flags & 0x2 /* RTF_GATEWAY */))
			continue;
		a.s_addr = (in_addr_t)strtoul(gate, NULL, 16);
		if (!inet_ntop(AF_INET, &a, gw, (socklen_t)len))
			return -ENOSPC;
		return 0;
	}
	return -ENOENT;
}

int oci_net_nameserver(const char *text, char *out, size_t len)
{
	const char *line = text, *nl;

	for (; line && *line; line = nl ? nl + 1 : NULL) {
		char buf[256], addr[64];
		struct in_addr a;
		size_t n;

		nl = strchr(line, '\n');
		n = nl ? (size_t)(nl - line) : strlen(line);
		if (n >= sizeof(buf))
			continue;
		memcpy(buf, line, n);
		buf[n] = '\0';
		if (sscanf(buf, " nameserver %63s", addr) != 1 || inet_pton(AF_INET, addr, &a) != 1)
			continue;
		if (strlen(addr) >= len)
			return -ENOSPC;
		strcpy(out, addr);
		return 0;
	}
	return -ENOENT;
}

int oci_net_option(const struct oci_net *n, char *buf, size_t len)
{
	int k = snprintf(buf, len, "tap=%s,mac=%02x:%02x:%02x:%02x:%02x:%02x,ip=%s/%u%s%s%s%s", OCI_NET_TAP,
			 n->mac[0], n->mac[1], n->mac[2], n->mac[3], n->mac[4], n->mac[5], n->ip, n->prefix,
			 n->gw[0] ? ",gw=" : "", n->gw, n->dns[0] ? ",dns=" : "", n->dns);

	return k < 0 || (size_t)k >= len ? -ENOSPC : 0;
}

static unsigned prefix_of(const struct sockaddr *mask)
{
	uint32_t m = mask ? ntohl(((const struct sockaddr_in *)mask)->sin_addr.s_addr) : 0xffffffffu;
	unsigned p = 0;

	while (p < 32 && (m & (0x80000000u >> p)))
		p++;
	return p;
}

/* The probe proper, inside the namespace. */
static int probe_here(struct oci_net *n, char *why, size_t whylen)
{
	struct ifaddrs *ifa = NULL, *i;
	struct ifreq ifr;
	int found = 0, s, r;
	FILE *f;

	if (getifaddrs(&ifa) < 0)
		return cli_seterr(why, whylen, -errno, "its interfaces: %s", strerror(errno));
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
		    strlen(i->ifa_name) >= sizeof(n->ifname))
			continue;
		snprintf(n->ifname, sizeof(n->ifname), "%s", i->ifa_name);
		inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, n->ip, sizeof(n->ip));
		n->prefix = prefix_of(i->ifa_netmask);
		found = 1;
	}
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_PACKET && !strcmp(i->ifa_name, OCI_NET_TAP))
			n->taken = 1;
	for (i = ifa; i && found; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_PACKET && !strcmp(i->ifa_name, n->ifname) &&
		    ((struct sockaddr_ll *)i->ifa_addr)->sll_halen == 6)
			memcpy(n->mac, ((struct sockaddr_ll *)i->ifa_addr)->sll_addr, 6);
	freeifaddrs(ifa);
	if (!found)
		return -ENOENT;
	n->mtu = 1500;
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) >= 0) {
		memset(&ifr, 0, sizeof(ifr));
		memcpy(ifr.ifr_name, n->ifname, strlen(n->ifname));
		if (ioctl(s, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu >= 68)
			n->mtu = (unsigned)ifr.ifr_mtu;
		close(s);
	}
	/* /proc/self/net follows this task's namespace */
	n->gw[0] = '\0';
	if ((f = fopen("/proc/self/net/route", "re"))) {
		char buf[4096];
		size_t got = fread(buf, 1, sizeof(buf) - 1, f);

		buf[got] = '\0';
		fclose(f);
		r = oci_net_route_gw(buf, n->ifname, n->gw, sizeof(n->gw));
		if (r && r != -ENOENT)
			return cli_seterr(why, whylen, r, "its routes: %s", strerror(-r));
	}
	return 0;
}

int oci_net_probe(const char *nspath, struct oci_net *n, char *why, size_t whylen)
{
	int self, target, r, back;

	memset(n, 0, sizeof(*n));
	if ((self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		return cli_seterr(why, whylen, -errno, "/proc/self/ns/net: %s", strerror(errno));
	if ((target = open(nspath, O_RDONLY | O_CLOEXEC)) < 0) {
		r = cli_seterr(why, whylen, -errno, "network namespace %s: %s", nspath, strerror(errno));
		close(self);
		return r;
	}
	if (setns(target, CLONE_NEWNET) < 0) {
		r = cli_seterr(why, whylen, -errno, "joining network namespace %s: %s", nspath, strerror(errno));
		goto out;
	}
	r = probe_here(n, why, whylen);
	back = setns(self, CLONE_NEWNET);
	if (back < 0) {
		/* we cannot be left in the container's namespace */
		log_err("oci: cannot return to our network namespace: %s", strerror(errno));
		abort();
	}
out:
	close(target);
	close(self);
	return r;
}

/* Runs argv (ip, tc, iptables) inside the namespace; its stderr into why. */
static int run_in(int nsfd, char *const *argv, char *why, size_t whylen)
{
	int p[2], st, nul;
	size_t got = 0;
	ssize_t k;
	pid_t pid;
	char err[512];

	if (pipe2(p, O_CLOEXEC) < 0)
		return cli_seterr(why, whylen, -errno, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return cli_seterr(why, whylen, -errno, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(p[1], 2);
		if (setns(nsfd, CLONE_NEWNET) < 0)
			_exit(126);
		/* the system's own places only, never the caller's PATH: this
		 * runs as root on a runtime's behalf. */
		{
			static const char *const dirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin" };
			char path[64];
			unsigned d;

			for (d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
				snprintf(path, sizeof(path), "%s/%s", dirs[d], argv[0]);
				execv(path, argv);
			}
		}
		fprintf(stderr, "%s: not found in /usr/sbin, /sbin, /usr/bin or /bin\n", argv[0]);
		_exit(127);
	}
	close(p[1]);
	while ((k = read(p[0], err + got, sizeof(err) - 1 - got)) > 0 && got + (size_t)k < sizeof(err) - 1)
		got += (size_t)k;
	if (k > 0)
		got += (size_t)k;
	err[got] = '\0';
	while (got && err[got - 1] == '\n')
		err[--got] = '\0';
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return cli_seterr(why, whylen, -errno, "waitpid: %s", strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return cli_seterr(why, whylen, -EIO, "%s %s %s ...: %s", argv[0], argv[1], argv[2] ? argv[2] : "",
		       err[0] ? err : "failed");
}

int oci_net_forward_local(int nsfd, const char *port, char *why, size_t whylen)
{
	/* iptables-legacy and iptables-nft take the same words; -w waits
	 * for another caller's lock (a CNI plugin's) rather than failing */
	char *const args[] = { "iptables", "-w", "5", "-t", "nat", "-A", "OUTPUT", "-o", "lo", "-p", "tcp",
			       "-d", "127.0.0.0/8", "-j", "REDIRECT", "--to-ports", (char *)port, NULL };

	return run_in(nsfd, args, why, whylen);
}

int oci_net_connect(const char *nspath, const struct oci_net *n, char *why, size_t whylen)
{
	char mtu[16], veth[IF_NAMESIZE];
	char *const up[] = { "ip", "link", "set", "dev", OCI_NET_TAP, "mtu", mtu, "up", NULL };
	char *const q_veth[] = { "tc", "qdisc", "add", "dev", veth, "ingress", NULL };
	char *const q_tap[] = { "tc", "qdisc", "add", "dev", OCI_NET_TAP, "ingress", NULL };
	char *const f_in[] = { "tc",	 "filter", "add",      "dev",	veth,	  "parent", "ffff:",
			       "protocol", "all",    "matchall", "action", "mirred", "egress", "redirect",
			       "dev",	 OCI_NET_TAP, NULL };
	char *const f_out[] = { "tc",	  "filter", "add",	"dev",	  OCI_NET_TAP, "parent", "ffff:",
				"protocol", "all",    "matchall", "action", "mirred",	 "egress", "redirect",
				"dev",	  veth,	    NULL };
	/* a container before this one in the namespace (a restart, or the
	 * next one after its VM went) left the veth's qdisc and its redirect
	 * to a TAP that is gone: drop it first, whether or not it is there */
	char *const d_veth[] = { "tc", "qdisc", "del", "dev", veth, "ingress", NULL };
	char *const *steps[] = { up, q_veth, q_tap, f_in, f_out };
	char ignored[256];
	unsigned i;
	int fd, r = 0;

	snprintf(mtu, sizeof(mtu), "%u", n->mtu);
	snprintf(veth, sizeof(veth), "%s", n->ifname);
	if ((fd = open(nspath, O_RDONLY | O_CLOEXEC)) < 0)
		return cli_seterr(why, whylen, -errno, "network namespace %s: %s", nspath, strerror(errno));
	(void)run_in(fd, d_veth, ignored, sizeof(ignored));
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]) && !r; i++)
		r = run_in(fd, steps[i], why, whylen);
	close(fd);
	return r;
}

int oci_net_disconnect(const char *nspath, const char *ifname, char *why, size_t whylen)
{
	char veth[IF_NAMESIZE];
	char *const show[] = { "ip", "link", "show", "dev", veth, NULL };
	char *const del[] = { "tc", "qdisc", "del", "dev", veth, "ingress", NULL };
	char ignored[256];
	int fd, r;

	snprintf(veth, sizeof(veth), "%s", ifname);
	if ((fd = open(nspath, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : cli_seterr(why, whylen, -errno, "network namespace %s: %s", nspath, strerror(errno));
	r = run_in(fd, del, why, whylen);
	/* no such qdisc, or the veth went with the namespace's teardown */
	if (r && run_in(fd, show, ignored, sizeof(ignored)))
		r = 0;
	close(fd);
	return r;
}
