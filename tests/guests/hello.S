/* Prints a greeting on COM1, writes the boot marker, resets via i8042. */
#include "guest.h"
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	lea msg(%rip), %rsi
	call puts
	mov $VMM_PORT, %dx
	mov $VMM_PORT_BOOT_READY, %al
	out %al, %dx
	jmp reset

#include "lib.inc"

	.section .rodata
msg:	.asciz "hello from the test guest\n"
