/* vmmctl: talk to the VMM's port from inside the guest.
 *   vmmctl ready      write the boot-time marker (the sandbox is up)
 *   vmmctl poweroff   sync filesystems and ask the VMM to power off
 * Static (musl), no runtime dependency. The port is documented in
 * docs/devices.md; guest-init will take this over. */
#include <stdio.h>
#include <string.h>
#include <sys/io.h>
#include <unistd.h>

#define VMM_PORT 0x0550
#define VMM_PORT_BOOT_READY 0x7b
#define VMM_PORT_POWEROFF 0x01

int main(int argc, char **argv)
{
	unsigned char cmd;

	if (argc != 2) {
		fprintf(stderr, "usage: vmmctl ready|poweroff\n");
		return 2;
	}
	if (!strcmp(argv[1], "ready")) {
		cmd = VMM_PORT_BOOT_READY;
	} else if (!strcmp(argv[1], "poweroff")) {
		cmd = VMM_PORT_POWEROFF;
		sync();
	} else {
		fprintf(stderr, "vmmctl: unknown command '%s'\n", argv[1]);
		return 2;
	}
	if (ioperm(VMM_PORT, 1, 1) < 0) {
		perror("vmmctl: ioperm");
		return 1;
	}
	outb(cmd, VMM_PORT);
	return 0;
}
