/* bench/strops's guest: what a string instruction costs in guest ring 0.
 * Freestanding (tests/guests' entry and library): each step fills or copies
 * 4 MiB in one way and then writes its letter to COM1, so the host times
 * the steps by when the letters arrive:
 *   a: start  b: rep stosb  c: rep stosq  d: 4 movq a loop turn
 *   e: rep movsb  f: rep movsq  g: 4 movq loads and stores a turn
 * Then it powers off. On a host whose KVM emulates ring 0 the byte forms
 * cost a step per byte (docs/perf.md, section 15). */
#include "guest.h"
#define BUF_A 0x1000000
#define BUF_B 0x1800000
#define LEN   0x400000
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	cld
	mov $'a', %al
	call putc
	mov $BUF_A, %rdi
	mov $LEN, %rcx
	xor %eax, %eax
	rep stosb
	mov $'b', %al
	call putc
	mov $BUF_A, %rdi
	mov $(LEN / 8), %rcx
	xor %eax, %eax
	rep stosq
	mov $'c', %al
	call putc
	mov $BUF_A, %rdi
	mov $(LEN / 32), %rcx
1:	movq %rax, (%rdi)
	movq %rax, 8(%rdi)
	movq %rax, 16(%rdi)
	movq %rax, 24(%rdi)
	add $32, %rdi
	dec %rcx
	jnz 1b
	mov $'d', %al
	call putc
	mov $BUF_A, %rsi
	mov $BUF_B, %rdi
	mov $LEN, %rcx
	rep movsb
	mov $'e', %al
	call putc
	mov $BUF_A, %rsi
	mov $BUF_B, %rdi
	mov $(LEN / 8), %rcx
	rep movsq
	mov $'f', %al
	call putc
	mov $BUF_A, %rsi
	mov $BUF_B, %rdi
	mov $(LEN / 32), %rcx
2:	movq (%rsi), %r8
	movq 8(%rsi), %r9
	movq 16(%rsi), %r10
	movq 24(%rsi), %r11
	movq %r8, (%rdi)
	movq %r9, 8(%rdi)
	movq %r10, 16(%rdi)
	movq %r11, 24(%rdi)
	add $32, %rsi
	add $32, %rdi
	dec %rcx
	jnz 2b
	mov $'g', %al
	call putc
	mov $'\n', %al
	call putc
	jmp poweroff

#include "lib.inc"
