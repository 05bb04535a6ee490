/* Jumps into the MMIO gap, where there is no RAM: KVM cannot fetch the
 * instruction and reports an emulation failure (KVM_EXIT_INTERNAL_ERROR). */
#include "guest.h"
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	lea msg(%rip), %rsi
	call puts
	mov $0xd0000000, %eax
	jmp *%rax

#include "lib.inc"

	.section .rodata
msg:	.asciz "jumping into the MMIO gap\n"
