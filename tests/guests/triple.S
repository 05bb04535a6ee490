/* Loads an empty IDT and raises #UD: no handler, no #DF handler: the CPU
 * shuts down (triple fault). */
#include "guest.h"
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	lea msg(%rip), %rsi
	call puts
	lidt idt_empty(%rip)
	ud2
1:	hlt
	jmp 1b

#include "lib.inc"

	.section .rodata
msg:	.asciz "about to triple fault\n"
idt_empty:
	.word 0
	.quad 0
