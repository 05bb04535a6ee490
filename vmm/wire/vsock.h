/* AF_VSOCK for guest programs built with musl, whose headers do not carry
 * <linux/vm_sockets.h>: the kernel ABI, as that header defines it. */
#ifndef GUEST_VSOCK_H
#define GUEST_VSOCK_H

#include <sys/socket.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define VMADDR_CID_ANY 0xffffffffu
#define VMADDR_CID_HOST 2u

struct sockaddr_vm {
	sa_family_t svm_family;
	unsigned short svm_reserved1;
	unsigned int svm_port;
	unsigned int svm_cid;
	unsigned char svm_flags;
	unsigned char svm_zero[3];
};
_Static_assert(sizeof(struct sockaddr_vm) == 16, "sockaddr_vm is 16 bytes");

#endif
