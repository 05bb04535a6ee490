/* guest-init: network interface setup; see net.h. Plain ioctls (no
 * netlink), enough for one IPv4 address and a default route. */
#include "guest-init/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct gnet {
	unsigned char mac[6];
	unsigned char new_mac[6];
	int has_new_mac;
	struct in_addr ip, gw, dns;
	unsigned prefix;
};

static int parse_mac(const char *s, unsigned char mac[6])
{
	unsigned v[6];
	int i, n = 0;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &n) != 6 ||
	    n != 17 || s[n])
		return -1;
	for (i = 0; i < 6; i++)
		mac[i] = (unsigned char)v[i];
	return 0;
}

static int parse(const char *spec, struct gnet *g)
{
	char buf[256], *tok, *save = NULL;

	memset(g, 0, sizeof(*g));
	if (strlen(spec) >= sizeof(buf))
		return -1;
	strcpy(buf, spec);
	tok = strtok_r(buf, ",", &save);
	if (!tok || parse_mac(tok, g->mac))
		return -1;
	while ((tok = strtok_r(NULL, ",", &save))) {
		if (!strncmp(tok, "ip=", 3)) {
			char *slash = strchr(tok + 3, '/');

			g->prefix = 24;
			if (slash) {
				*slash = '\0';
				g->prefix = (unsigned)strtoul(slash + 1, NULL, 10);
			}
			if (inet_pton(AF_INET, tok + 3, &g->ip) != 1 || g->prefix < 1 || g->prefix > 32)
				return -1;
		} else if (!strncmp(tok, "gw=", 3)) {
			if (inet_pton(AF_INET, tok + 3, &g->gw) != 1)
				return -1;
		} else if (!strncmp(tok, "mac=", 4)) {
			if (parse_mac(tok + 4, g->new_mac) || (g->new_mac[0] & 1))
				return -1;
			g->has_new_mac = 1;
		} else if (!strncmp(tok, "dns=", 4)) {
			if (inet_pton(AF_INET, tok + 4, &g->dns) != 1)
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

/* The interface whose hardware address is mac, into name. */
static int find_by_mac(int s, const unsigned char mac[6], char name[IFNAMSIZ])
{
	struct if_nameindex *all = if_nameindex(), *i;
	int r = -1;

	if (!all)
		return -1;
	for (i = all; i->if_index; i++) {
		struct ifreq ifr;

		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", i->if_name);
		if (ioctl(s, SIOCGIFHWADDR, &ifr) == 0 && !memcmp(ifr.ifr_hwaddr.sa_data, mac, 6)) {
			snprintf(name, IFNAMSIZ, "%s", i->if_name);
			r = 0;
			break;
		}
	}
	if_freenameindex(all);
	return r;
}

static void set_sin(struct sockaddr *sa, struct in_addr a)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr = a;
	memcpy(sa, &sin, sizeof(sin));
}

int gnet_apply(const char *spec, char *err, size_t errlen)
{
	struct gnet g;
	struct ifreq ifr;
	char name[IFNAMSIZ];
	const char *what;
	int s;

	if (parse(spec, &g)) {
		snprintf(err, errlen, "vmm.net=%s: not MAC[,ip=ADDR/PREFIX][,gw=ADDR][,dns=ADDR]", spec);
		return -1;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (find_by_mac(s, g.mac, name)) {
		snprintf(err, errlen, "no interface with MAC %.17s", spec);
		close(s);
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (g.has_new_mac) {
		/* A clone of a snapshot takes its own address: the link goes
		 * down for the change (virtio-net without CTRL_MAC_ADDR takes
		 * it in the driver; the TAP does not filter on it). */
		what = "link";
		if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
			goto fail;
		ifr.ifr_flags &= ~IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			goto fail;
		what = "MAC address";
		ifr.ifr_hwaddr.sa_family = 1; /* ARPHRD_ETHER */
		memcpy(ifr.ifr_hwaddr.sa_data, g.new_mac, 6);
		if (ioctl(s, SIOCSIFHWADDR, &ifr) < 0)
			goto fail;
	}
	if (g.ip.s_addr) {
		struct in_addr mask = { htonl(0xffffffffu << (32 - g.prefix)) };

		if (g.prefix == 32)
			mask.s_addr = 0xffffffffu;
		what = "address";
		set_sin(&ifr.ifr_addr, g.ip);
		if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
			goto fail;
		what = "netmask";
		set_sin(&ifr.ifr_netmask, mask);
		if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0)
			goto fail;
	}
	what = "link";
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		goto fail;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		goto fail;
	if (g.gw.s_addr) {
		struct rtentry rt;
		struct in_addr any = { 0 };

		memset(&rt, 0, sizeof(rt));
		set_sin(&rt.rt_dst, any);
		set_sin(&rt.rt_genmask, any);
		set_sin(&rt.rt_gateway, g.gw);
		rt.rt_flags = RTF_UP | RTF_GATEWAY;
		rt.rt_dev = name;
		what = "default route";
		{
			/* Replace any default route (a restored clone's old one). */
			struct rtentry del;
			int k;

			memset(&del, 0, sizeof(del));
			set_sin(&del.rt_dst, any);
			set_sin(&del.rt_genmask, any);
			for (k = 0; k < 8 && ioctl(s, SIOCDELRT, &del) == 0; k++)
				;
		}
		if (ioctl(s, SIOCADDRT, &rt) < 0 && errno != EEXIST)
			goto fail;
	}
	close(s);
	if (g.dns.s_addr) {
		char line[64], a[INET_ADDRSTRLEN];
		int fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int n;

		inet_ntop(AF_INET, &g.dns, a, sizeof(a));
		n = snprintf(line, sizeof(line), "nameserver %s\n", a);
		if (fd < 0 || write(fd, line, (size_t)n) != n) {
			snprintf(err, errlen, "/etc/resolv.conf: %s", strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
fail:
	snprintf(err, errlen, "%s: setting the %s: %s", name, what, strerror(errno));
	close(s);
	return -1;
}
