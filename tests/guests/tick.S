/* Counts in memory and says so on COM1 forever: "tick 00000001",
 * "tick 00000002", ... with a busy wait between. For tests that snapshot
 * a running guest and load it elsewhere: the count goes on from the
 * snapshot's memory (the Uffd memory backend, tests/api/fc_api.py), not
 * from 1, and a guest whose memory came back wrong stops ticking. */
#include "guest.h"
#define DELAY 20000000
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
1:	incl count(%rip)
	lea msg(%rip), %rsi
	call puts
	mov count(%rip), %edi
	call puthex32
	mov $'\n', %al
	call putc
	mov $DELAY, %ecx
2:	dec %ecx
	jnz 2b
	jmp 1b

#include "lib.inc"

	.section .rodata
msg:	.asciz "tick "

	.data
count:	.long 0
