/* TAP interfaces; see tap.h. */
#include "devices/tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmm/base/log.h"

#define VNET_HDR_LEN 12 /* struct virtio_net_hdr_v1 (virtio 1.2 section 5.1.6) */

static unsigned to_tun(unsigned off)
{
	return ((off & TAP_OFF_CSUM) ? TUN_F_CSUM : 0) | ((off & TAP_OFF_TSO4) ? TUN_F_TSO4 : 0) |
	       ((off & TAP_OFF_TSO6) ? TUN_F_TSO6 : 0);
}

int tap_open(struct tap *t, const char *name)
{
	struct ifreq ifr;
	unsigned feat = 0;
	int hdr = VNET_HDR_LEN, r;

	memset(t, 0, sizeof(*t));
	t->fd = -1;
	if (!name || !*name || strlen(name) >= IFNAMSIZ || strchr(name, '/') || strchr(name, '%')) {
		log_err("--net tap=%s: not a valid interface name (1-%d characters, no '/' or '%%')",
			name ? name : "", IFNAMSIZ - 1);
		return -EINVAL;
	}
	t->created = if_nametoindex(name) == 0;
	t->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (t->fd < 0) {
		r = -errno;
		log_err("--net tap=%s: /dev/net/tun: %s", name, strerror(errno));
		return r;
	}
	if (ioctl(t->fd, TUNGETFEATURES, &feat) < 0 || !(feat & IFF_VNET_HDR)) {
		log_err("--net tap=%s: this kernel's TAP has no virtio-net header support", name);
		r = -ENOTSUP;
		goto err;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	memcpy(ifr.ifr_name, name, strlen(name));
	if (ioctl(t->fd, TUNSETIFF, &ifr) < 0) {
		r = -errno;
		if (errno == EPERM)
			log_err("--net tap=%s: %s: creating a TAP needs CAP_NET_ADMIN; create it once "
				"with `ip tuntap add %s mode tap user $USER vnet_hdr` (docs/networking.md)",
				name, strerror(errno), name);
		else if (errno == EBUSY)
			log_err("--net tap=%s: in use by another process (one VM per TAP)", name);
		else if (errno == EINVAL)
			log_err("--net tap=%s: exists but is not a TAP with a virtio-net header "
				"(recreate it with `ip tuntap add %s mode tap vnet_hdr`)", name, name);
		else
			log_err("--net tap=%s: %s", name, strerror(errno));
		goto err;
	}
	snprintf(t->name, sizeof(t->name), "%s", ifr.ifr_name);
	if (ioctl(t->fd, TUNSETVNETHDRSZ, &hdr) < 0) {
		r = -errno;
		log_err("--net tap=%s: setting the virtio-net header size: %s", name, strerror(errno));
		goto err;
	}
	/* Which offloads does this TAP take? Probe, then start with none: the
	 * guest's negotiated features decide (tap_set_offloads). */
	if (tap_set_offloads(t, TAP_OFF_CSUM | TAP_OFF_TSO4 | TAP_OFF_TSO6) == 0)
		t->offloads = TAP_OFF_CSUM | TAP_OFF_TSO4 | TAP_OFF_TSO6;
	else if (tap_set_offloads(t, TAP_OFF_CSUM) == 0)
		t->offloads = TAP_OFF_CSUM;
	if (tap_set_offloads(t, 0)) {
		r = -errno;
		log_err("--net tap=%s: TUNSETOFFLOAD: %s", name, strerror(errno));
		goto err;
	}
	if (t->created)
		log_info("created TAP %s (removed when this VM exits)", t->name);
	return 0;
err:
	close(t->fd);
	t->fd = -1;
	return r;
}

int tap_set_offloads(struct tap *t, unsigned off)
{
	return ioctl(t->fd, TUNSETOFFLOAD, (unsigned long)to_tun(off)) < 0 ? -errno : 0;
}

int tap_set_host_addr(const struct tap *t, uint32_t addr_be, unsigned prefix)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;
	const char *what = "address";

	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, t->name, strlen(t->name));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = addr_be;
	if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
		goto fail;
	what = "netmask";
	sin->sin_addr.s_addr = htonl(prefix ? 0xffffffffu << (32 - prefix) : 0);
	if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0)
		goto fail;
	what = "link state";
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		goto fail;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		goto fail;
	close(s);
	return 0;
fail:
	r = -errno;
	log_err("--net tap=%s: setting the host side %s: %s%s", t->name, what, strerror(errno),
		errno == EPERM ? " (needs CAP_NET_ADMIN; or configure the TAP beforehand)" : "");
	close(s);
	return r;
}

static int hwaddr(const struct tap *t, uint8_t mac[6], int set)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;

	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, t->name, strlen(t->name));
	ifr.ifr_hwaddr.sa_family = 1; /* ARPHRD_ETHER */
	if (set)
		memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
	if (ioctl(s, set ? SIOCSIFHWADDR : SIOCGIFHWADDR, &ifr) < 0)
		r = -errno;
	else if (!set)
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(s);
	return r;
}

int tap_get_mac(const struct tap *t, uint8_t mac[6])
{
	return hwaddr(t, mac, 0);
}

int tap_set_mac(const struct tap *t, const uint8_t mac[6])
{
	uint8_t m[6];

	memcpy(m, mac, 6);
	return hwaddr(t, m, 1);
}

void tap_close(struct tap *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}
