/* Prints CPUID as the guest sees it, one line per (leaf, subleaf) in the
 * format of `vmm run --dump-cpuid`, then powers off. */
#include "guest.h"
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	lea leaves(%rip), %rbx
next:
	mov (%rbx), %r8d          /* leaf */
	mov 4(%rbx), %r9d         /* subleaf */
	cmp $0xffffffff, %r8d
	je done
	lea prefix(%rip), %rsi
	call puts
	mov %r8d, %eax
	mov %r9d, %ecx
	push %rbx
	cpuid
	mov %eax, %r10d
	mov %ebx, %r11d
	mov %ecx, %r12d
	mov %edx, %r13d
	pop %rbx
	mov %r8d, %edi
	call puthex32
	call space
	mov %r9d, %edi
	call puthex32
	call space
	mov %r10d, %edi
	call puthex32
	call space
	mov %r11d, %edi
	call puthex32
	call space
	mov %r12d, %edi
	call puthex32
	call space
	mov %r13d, %edi
	call puthex32
	mov $'\n', %al
	call putc
	add $8, %rbx
	jmp next
done:
	jmp poweroff

space:
	mov $' ', %al
	jmp putc

#include "lib.inc"

	.section .rodata
prefix:	.asciz "cpuid "
	.balign 4
leaves:
	.long 0, 0
	.long 1, 0
	.long 7, 0
	.long 7, 1
	.long 0xb, 0
	.long 0xb, 1
	.long 0x80000001, 0
	.long 0x40000000, 0
	.long 0x40000001, 0
	.long 0xffffffff, 0
