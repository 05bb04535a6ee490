/* guest-init: network interfaces from the VMM's description. The kernel
 * command line carries one vmm.net=MAC[,ip=ADDR/PREFIX][,gw=ADDR][,dns=ADDR]
 * per virtio-net interface (docs/networking.md); the interface is found by
 * its MAC, so names and probe order do not matter. */
#ifndef GUEST_INIT_NET_H
#define GUEST_INIT_NET_H

#include <stddef.h>

/* Parses one description and configures that interface: address and
 * netmask, link up, default route through gw (replacing any), resolv.conf
 * for dns. After a snapshot restore the host's sync request may carry
 * "OLDMAC,mac=NEWMAC,ip=...": the interface takes the new MAC too. 0, or -1
 * with err filled. */
int gnet_apply(const char *spec, char *err, size_t errlen);

#endif
