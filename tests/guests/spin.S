/* Spins forever: for tests that stop a running VM from the host. */
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	pause
	jmp _start
