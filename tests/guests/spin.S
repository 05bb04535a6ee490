/* Says "spinning" on COM1 and spins forever: for tests that stop a running
 * VM from the host. The line tells them the VM is up (vm_run has taken the
 * stop signals by then), so a signal sent after it cannot race startup. */
#include "guest.h"
	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	lea msg(%rip), %rsi
	call puts
1:	pause
	jmp 1b

#include "lib.inc"

	.section .rodata
msg:	.asciz "spinning\n"
