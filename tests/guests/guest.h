/* Shared macros for the freestanding test guests (GNU as, AT&T syntax).
 * The VMM enters them like a vmlinux: 64-bit mode, paging on with an
 * identity map of the first 4 GiB, a stack below 0x9000. */
#define COM1 0x3f8
#define COM1_LSR (COM1 + 5)
#define VMM_PORT 0x550
#define VMM_PORT_BOOT_READY 0x7b
#define VMM_PORT_POWEROFF 0x01
#define I8042_CMD 0x64
