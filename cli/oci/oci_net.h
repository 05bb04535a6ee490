/* vmm oci networking (docs/oci-runtime.md, "Networking"): the container's
 * network namespace, as CNI or netavark made it (a veth with an address
 * and a default route), is read, the VMM is started inside it, and a TAP
 * there is joined to the veth with tc mirred redirects both ways (Kata's
 * "tcfilter" model). The guest's interface takes the veth's MAC, address,
 * default gateway and the bundle's nameserver. */
#ifndef CLI_OCI_NET_H
#define CLI_OCI_NET_H

#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define OCI_NET_TAP "vmmtap0" /* the TAP's name inside the namespace */

struct oci_net {
	char ifname[IF_NAMESIZE];   /* the veth (the namespace's interface) */
	uint8_t mac[6];
	char ip[INET_ADDRSTRLEN];
	unsigned prefix;
	char gw[INET_ADDRSTRLEN];   /* "" when there is no default route */
	unsigned mtu;
	char dns[INET_ADDRSTRLEN];  /* "" when the bundle names none */
	int taken;                  /* OCI_NET_TAP is there: another VM has it */
};

/* Pure parsers, for unit tests. */

/* The IPv4 default gateway of ifname in /proc/net/route's text (in
 * gw, dotted): 0, or -ENOENT without a default route through it. */
int oci_net_route_gw(const char *text, const char *ifname, char *gw, size_t len);
/* The first IPv4 "nameserver" of a resolv.conf: 0 or -ENOENT. */
int oci_net_nameserver(const char *text, char *out, size_t len);
/* The --net option the VMM gets for n: "tap=vmmtap0,mac=...,ip=...". */
int oci_net_option(const struct oci_net *n, char *buf, size_t len);

/* Reads the namespace at nspath (a file like /run/netns/NAME or
 * /proc/PID/ns/net): its first interface (not loopback) with an IPv4
 * address, that address, its MAC, MTU and default gateway. Enters the
 * namespace for it and returns to ours. 0; -ENOENT when it has no such
 * interface (podman --network none: only lo), which means no network;
 * other -errno with why. */
int oci_net_probe(const char *nspath, struct oci_net *n, char *why, size_t whylen)
	__attribute__((warn_unused_result));

/* In the namespace: the TAP (made by the VMM) up with the veth's MTU,
 * ingress qdiscs on both, and matchall mirred redirects veth -> TAP and
 * TAP -> veth (with ip(8) and tc(8)). 0 or -errno with why. */
int oci_net_connect(const char *nspath, const struct oci_net *n, char *why, size_t whylen)
	__attribute__((warn_unused_result));

/* Undoes oci_net_connect's side on the veth once the VM (and its TAP,
 * with its own qdisc) is gone: the veth's ingress qdisc and with it the
 * redirect filter to the TAP. 0 or -errno with why (a namespace or veth
 * already gone is no error). */
int oci_net_disconnect(const char *nspath, const char *ifname, char *why, size_t whylen);

/* The CRI's PortForward dials localhost:PORT inside the pod's network
 * namespace (containerd's pkg/cri/server/sandbox_portforward_linux.go),
 * where the pod's processes are not: they are in its VM, which took the
 * namespace's interface. One nat rule in that namespace sends every TCP
 * connection to 127.0.0.0/8 to the VMM's published port (cli/oci/oci_vm.h
 * OCI_POD_FORWARD_PORT: "--publish 127.0.0.1:1:*"), which carries each to
 * 127.0.0.1 at its original port in the guest (SO_ORIGINAL_DST). The rule
 * goes with the namespace. iptables is run from the system's folders,
 * never the caller's PATH. 0, or -errno with iptables' message in why
 * (none on the node: the pod runs, without port-forward). */
int oci_net_forward_local(int nsfd, const char *port, char *why, size_t whylen);

#endif
