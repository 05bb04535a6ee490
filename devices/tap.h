/* TAP backend for virtio-net: opens (or creates) a Linux TAP interface with
 * IFF_TAP | IFF_NO_PI | IFF_VNET_HDR, so frames cross it with the 12-byte
 * virtio-net header (checksum and segmentation offloads pass through), and
 * configures the host side of it. */
#ifndef DEVICES_TAP_H
#define DEVICES_TAP_H

#include <net/if.h>
#include <stdint.h>

/* Offloads the TAP accepts toward the guest (TUN_F_* bits). */
#define TAP_OFF_CSUM 0x01
#define TAP_OFF_TSO4 0x02
#define TAP_OFF_TSO6 0x04

struct tap {
	int fd;
	char name[IFNAMSIZ];
	int created;       /* the interface did not exist: it goes with the fd */
	unsigned offloads; /* TAP_OFF_* the kernel accepts for this TAP */
};

/* Opens TAP `name` (nonblocking, vnet header of 12 bytes). A name that does
 * not exist is created (needs CAP_NET_ADMIN) and disappears when the fd is
 * closed. 0, or -errno with one line logged saying what to do. */
int tap_open(struct tap *t, const char *name) __attribute__((warn_unused_result));
/* Sets which offloads the kernel may hand us (what the guest accepts). */
int tap_set_offloads(struct tap *t, unsigned off);
/* Gives the host side address/prefix and brings the link up. */
int tap_set_host_addr(const struct tap *t, uint32_t addr_be, unsigned prefix)
	__attribute__((warn_unused_result));
/* The host side's MAC address: read, and set (a restored clone's guest
 * still has the snapshot's TAP in its neighbour cache). 0 or -errno. */
int tap_get_mac(const struct tap *t, uint8_t mac[6]);
int tap_set_mac(const struct tap *t, const uint8_t mac[6]);
void tap_close(struct tap *t);

#endif
