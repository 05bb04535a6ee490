/* The first instruction writes one byte to COM1, so "VMM start to first
 * guest instruction" can be timed from outside, the same way for every
 * VMM. Two entries: the ELF entry (64-bit, as vmm enters a vmlinux) and a
 * PVH entry (32-bit, XEN_ELFNOTE_PHYS32_ENTRY, as QEMU enters an ELF).
 * Then it stops: i8042 reset for vmm, isa-debug-exit (port 0xf4) for QEMU. */
#include "guest.h"

/* The same bytes run in either mode: only 8-bit port I/O. */
.macro first_then_stop
	mov $COM1, %dx
	mov $'F', %al
	out %al, %dx
	mov $'\n', %al
	out %al, %dx
	mov $0xf4, %dx
	out %al, %dx
	mov $I8042_CMD, %dx
	mov $0xfe, %al
	out %al, %dx
1:	hlt
	jmp 1b
.endm

	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	first_then_stop

	.code32
entry32:
	first_then_stop

	.section .note.pvh, "a"
	.balign 4
	.long 4          /* name size: "Xen\0" */
	.long 4          /* desc size */
	.long 18         /* XEN_ELFNOTE_PHYS32_ENTRY */
	.asciz "Xen"
	.long entry32
