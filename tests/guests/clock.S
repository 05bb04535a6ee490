/* Says "tsc XXXXXXXXXXXXXXXX" (its TSC, hex) on COM1 each time the TSC has
 * gone PERIOD cycles past the last line, forever. For the test that the
 * guest's clock goes on from the pause across a snapshot and restore:
 * consecutive lines are PERIOD apart (about 0.1 s at 2.5 GHz) however long
 * the output takes; if the restored TSC had moved on by the time the VM
 * sat paused, the first line after the restore would be that far from the
 * last one before it. */
#include "guest.h"
#define PERIOD_SHIFT 28
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	rdtsc
	shl $32, %rdx
	or %rax, %rdx
	mov %rdx, %rbx            /* the last line's TSC */
1:	lea msg(%rip), %rsi
	call puts
	mov %rbx, %rdi
	shr $32, %rdi
	call puthex32
	mov %ebx, %edi
	call puthex32
	mov $'\n', %al
	call putc
	mov $1, %rcx
	shl $PERIOD_SHIFT, %rcx
	add %rcx, %rbx            /* the next line's TSC */
2:	pause
	rdtsc
	shl $32, %rdx
	or %rax, %rdx
	cmp %rbx, %rdx
	jb 2b
	mov %rdx, %rbx
	jmp 1b

#include "lib.inc"

	.section .rodata
msg:	.asciz "tsc "
