/* Counts in memory and says so on COM1 forever: "tick 00000001",
 * "tick 00000002", ... with a busy wait between. For tests that snapshot
 * a running guest and load it elsewhere: the count goes on from the
 * snapshot's memory (the Uffd memory backend, tests/api/fc_api.py), not
 * from 1, and a guest whose memory came back wrong stops ticking.
 * The wait is DELAY time-stamp-counter cycles (about 40 ms at 2.5 GHz),
 * not a count of loop turns: where KVM emulates ring 0 (kvm_pvm, ~1.2 M
 * instructions/s) 20 M turns took 33 s a tick. Across a restore the
 * counter may jump either way: the unsigned difference then ends the
 * wait at once. */
#include "guest.h"
#define DELAY 100000000
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
	rdtsc
	shl $32, %rdx
	or %rax, %rdx
	mov %rdx, %r8           /* start */
2:
	rdtsc
	shl $32, %rdx
	or %rax, %rdx
	sub %r8, %rdx
	cmp $DELAY, %rdx
	jb 2b
	jmp 1b

#include "lib.inc"

	.section .rodata
msg:	.asciz "tick "

	.data
count:	.long 0
