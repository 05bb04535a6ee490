/* The devices guest (`vmm run --kernel devices.elf --mem 64 --entropy on
 * --balloon 4,stats=1`): drives the i8042 the way Linux's i8042 driver
 * probes it, reads random bytes through the virtio-rng queue, and gives
 * the balloon a page and a PFN outside RAM. One "ok"/"FAIL" line per
 * check on COM1, then power off (status 0). Written for KVM hosts; it
 * needs no Linux. */
#include "guest.h"

#define VIRTIO_BASE 0xd0000000  /* slot n at + n * 0x1000 */
#define VIRTIO_SLOTS 16
#define ID_RNG 4
#define ID_BALLOON 5

#define R_MAGIC 0x000
#define R_DEVICE_ID 0x008
#define R_DRV_FEAT 0x020
#define R_DRV_FEAT_SEL 0x024
#define R_QSEL 0x030
#define R_QNUM 0x038
#define R_QREADY 0x044
#define R_QNOTIFY 0x050
#define R_STATUS 0x070
#define R_QDESC 0x080
#define R_QDESC_HI 0x084
#define R_QAVAIL 0x090
#define R_QAVAIL_HI 0x094
#define R_QUSED 0x0a0
#define R_QUSED_HI 0x0a4
#define R_CONFIG 0x100

#define S_ACK 1
#define S_DRIVER 2
#define S_DRIVER_OK 4
#define S_FEATURES_OK 8
#define S_NEEDS_RESET 0x40

#define F_WRITE 2
#define QSIZE 8
#define RING 0x400000       /* desc table; avail +0x1000, used +0x2000 */
#define DATA 0x420000       /* 64 bytes of randomness, or PFNs */
#define PAGE 0x430000       /* the page given to the balloon */

#define KBD_DATA 0x60
#define KBD_STATUS 0x64

	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	xor %r15d, %r15d            /* failures */
	lea banner(%rip), %rsi
	call puts

	/* ---- i8042: Linux's probe ------------------------------------- */
	/* A controller is there (the status is not 0xff). */
	mov $KBD_STATUS, %dx
	in %dx, %al
	xor %ecx, %ecx
	cmp $0xff, %al
	setne %cl
	mov %ecx, %eax
	lea t_kbd_present(%rip), %rsi
	call result
	/* Self test: 0x55. */
	mov $0xaa, %al
	call kbd_cmd
	call kbd_read
	xor %ecx, %ecx
	cmp $0x55, %al
	sete %cl
	mov %ecx, %eax
	lea t_kbd_selftest(%rip), %rsi
	call result
	/* Read the control register: keyboard interrupt on, no translation. */
	mov $0x20, %al
	call kbd_cmd
	call kbd_read
	mov %eax, %r13d
	and $0x41, %eax
	xor %ecx, %ecx
	cmp $0x01, %eax
	sete %cl
	mov %ecx, %eax
	lea t_kbd_ctr(%rip), %rsi
	call result
	/* Write it back with interrupts off, read it again. */
	mov $0x60, %al
	call kbd_cmd
	mov %r13d, %eax
	and $0xfe, %al
	call kbd_data
	mov $0x20, %al
	call kbd_cmd
	call kbd_read
	mov %r13d, %ecx
	and $0xfe, %ecx
	xor %edx, %edx
	cmp %cl, %al
	sete %dl
	mov %edx, %eax
	lea t_kbd_ctr_write(%rip), %rsi
	call result
	/* A keyboard command (GETID) is acknowledged with 0xFA. */
	mov $0xf2, %al
	call kbd_data
	call kbd_read
	xor %ecx, %ecx
	cmp $0xfa, %al
	sete %cl
	mov %ecx, %eax
	lea t_kbd_ack(%rip), %rsi
	call result
	/* Output port round trip. */
	mov $0xd1, %al
	call kbd_cmd
	mov $0x03, %al
	call kbd_data
	mov $0xd0, %al
	call kbd_cmd
	call kbd_read
	xor %ecx, %ecx
	cmp $0x03, %al
	sete %cl
	mov %ecx, %eax
	lea t_kbd_outp(%rip), %rsi
	call result

	/* ---- virtio-rng ------------------------------------------------- */
	mov $ID_RNG, %edi
	call find_dev
	lea t_rng_found(%rip), %rsi
	call result
	test %eax, %eax
	jz 9f
	/* One 64-byte device-writable buffer, zeroed. */
	xor %ecx, %ecx
	call dev_init
	mov $DATA, %rdi
	mov $64, %ecx
	xor %eax, %eax
	rep stosb
	movq $DATA, RING + 0
	movl $64, RING + 8
	movw $F_WRITE, RING + 12
	movw $0, RING + 14
	call post_head0
	call served
	/* ... used with 64 bytes, not all of them zero. */
	test %eax, %eax
	jz 1f
	xor %eax, %eax
	cmpl $64, RING + 0x2008     /* used.ring[0].len */
	jne 1f
	mov $DATA, %rsi
	mov $8, %ecx
	xor %edx, %edx
2:	or (%rsi), %rdx
	add $8, %rsi
	dec %ecx
	jnz 2b
	test %rdx, %rdx
	setnz %al
1:	lea t_rng_read(%rip), %rsi
	call result
	/* A driver-readable buffer breaks 5.4.6.2: NEEDS_RESET. */
	xor %ecx, %ecx
	call dev_init
	movq $DATA, RING + 0
	movl $64, RING + 8
	movw $0, RING + 12
	call post_head0
	call needs_reset
	lea t_rng_readable(%rip), %rsi
	call result
	/* After a reset it serves again. */
	xor %ecx, %ecx
	call dev_init
	movq $DATA, RING + 0
	movl $16, RING + 8
	movw $F_WRITE, RING + 12
	call post_head0
	call served
	lea t_rng_after_reset(%rip), %rsi
	call result
	movl $0, R_STATUS(%rbx)
9:
	/* ---- virtio-balloon -------------------------------------------- */
	mov $ID_BALLOON, %edi
	call find_dev
	lea t_bal_found(%rip), %rsi
	call result
	test %eax, %eax
	jz 9f
	/* The target: 4 MiB = 1024 pages. */
	xor %eax, %eax
	cmpl $1024, R_CONFIG(%rbx)
	sete %al
	lea t_bal_target(%rip), %rsi
	call result
	/* Inflate one page with data in it: served, the page reads as zeros. */
	xor %ecx, %ecx
	call dev_init
	movq $0x1122334455667788, %rax
	movq %rax, PAGE
	movl $(PAGE >> 12), DATA
	movq $DATA, RING + 0
	movl $4, RING + 8
	movw $0, RING + 12
	call post_head0
	call served
	test %eax, %eax
	jz 1f
	xor %eax, %eax
	cmpq $0, PAGE
	sete %al
1:	lea t_bal_inflate(%rip), %rsi
	call result
	/* A PFN past the 64 MiB of RAM: NEEDS_RESET. */
	xor %ecx, %ecx
	call dev_init
	movl $0x100000, DATA        /* 4 GiB */
	movq $DATA, RING + 0
	movl $4, RING + 8
	movw $0, RING + 12
	call post_head0
	call needs_reset
	lea t_bal_outside(%rip), %rsi
	call result
	movl $0, R_STATUS(%rbx)
9:
	mov %r15d, %edi
	lea done_msg(%rip), %rsi
	call puts
	call puthex32
	mov $'\n', %al
	call putc
	test %r15d, %r15d
	jnz reset                   /* failures: status 3 */
	jmp poweroff

/* kbd_cmd: %al to port 0x64 once the input buffer is empty. */
kbd_cmd:
	push %rax
	call kbd_wait_write
	pop %rax
	mov $KBD_STATUS, %dx
	out %al, %dx
	ret

/* kbd_data: %al to port 0x60 once the input buffer is empty. */
kbd_data:
	push %rax
	call kbd_wait_write
	pop %rax
	mov $KBD_DATA, %dx
	out %al, %dx
	ret

kbd_wait_write:
	mov $100000, %ecx
1:	mov $KBD_STATUS, %dx
	in %dx, %al
	test $0x02, %al
	jz 2f
	dec %ecx
	jnz 1b
2:	ret

/* kbd_read: waits (bounded) for the output buffer, reads port 0x60 into
 * %eax (0xffff: nothing came). */
kbd_read:
	mov $100000, %ecx
1:	mov $KBD_STATUS, %dx
	in %dx, %al
	test $0x01, %al
	jnz 2f
	dec %ecx
	jnz 1b
	mov $0xffff, %eax
	ret
2:	mov $KBD_DATA, %dx
	xor %eax, %eax
	in %dx, %al
	ret

result:
	push %rsi
	test %eax, %eax
	jz 1f
	lea ok_pfx(%rip), %rsi
	jmp 2f
1:	lea fail_pfx(%rip), %rsi
	inc %r15d
2:	call puts
	pop %rsi
	call puts
	mov $'\n', %al
	call putc
	ret

/* dev_init: reset the device at %rbx, VERSION_1 only, queue %ecx on the
 * zeroed ring at RING, DRIVER_OK. */
dev_init:
	movl $0, R_STATUS(%rbx)
	movl $S_ACK, R_STATUS(%rbx)
	movl $(S_ACK | S_DRIVER), R_STATUS(%rbx)
	movl $1, R_DRV_FEAT_SEL(%rbx)
	movl $1, R_DRV_FEAT(%rbx)   /* VIRTIO_F_VERSION_1 (bit 32) */
	movl $0, R_DRV_FEAT_SEL(%rbx)
	movl $0, R_DRV_FEAT(%rbx)
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK), R_STATUS(%rbx)
	push %rcx
	mov $RING, %rdi
	mov $0x3000, %ecx
	xor %eax, %eax
	rep stosb
	pop %rcx
	movl %ecx, R_QSEL(%rbx)
	movl $QSIZE, R_QNUM(%rbx)
	movl $RING, R_QDESC(%rbx)
	movl $0, R_QDESC_HI(%rbx)
	movl $(RING + 0x1000), R_QAVAIL(%rbx)
	movl $0, R_QAVAIL_HI(%rbx)
	movl $(RING + 0x2000), R_QUSED(%rbx)
	movl $0, R_QUSED_HI(%rbx)
	movl $1, R_QREADY(%rbx)
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK), R_STATUS(%rbx)
	ret

/* find_dev: the virtio-mmio slot whose DeviceID is %edi into %rbx; %eax 1
 * if there is one. */
find_dev:
	mov $VIRTIO_BASE, %rbx
	mov $VIRTIO_SLOTS, %ecx
1:	cmpl $0x74726976, R_MAGIC(%rbx)
	jne 2f
	cmpl %edi, R_DEVICE_ID(%rbx)
	je 3f
2:	add $0x1000, %rbx
	dec %ecx
	jnz 1b
	xor %eax, %eax
	ret
3:	mov $1, %eax
	ret

/* post_head0: descriptor 0 into avail entry 0 of RING, avail.idx 1, queue
 * 0 notified (x86 keeps the stores in order before the MMIO write). */
post_head0:
	movw $0, RING + 0x1004
	movw $1, RING + 0x1002
	movl $0, R_QNOTIFY(%rbx)
	ret

/* served: waits (bounded) for used.idx 1; %eax 1 if it came and the device
 * is not in NEEDS_RESET. */
served:
	mov $300000, %ecx
1:	movl R_STATUS(%rbx), %eax   /* an exit per round: the bound is in time */
	test $S_NEEDS_RESET, %eax
	jnz 2f
	cmpw $1, RING + 0x2002
	je 3f
	dec %ecx
	jnz 1b
2:	xor %eax, %eax
	ret
3:	mov $1, %eax
	ret

needs_reset:
	mov $300000, %ecx
1:	movl R_STATUS(%rbx), %eax
	test $S_NEEDS_RESET, %eax
	jnz 2f
	pause
	dec %ecx
	jnz 1b
	xor %eax, %eax
	ret
2:	mov $1, %eax
	ret

#include "lib.inc"

	.section .rodata
banner:	.asciz "devices: the i8042, virtio-rng and virtio-balloon\n"
ok_pfx:	.asciz "ok   devices: "
fail_pfx: .asciz "FAIL devices: "
done_msg: .asciz "devices: failures "
t_kbd_present: .asciz "i8042: a controller answers on 0x64"
t_kbd_selftest: .asciz "i8042: self test answers 0x55"
t_kbd_ctr: .asciz "i8042: control register has the keyboard interrupt on, no translation"
t_kbd_ctr_write: .asciz "i8042: control register write reads back"
t_kbd_ack: .asciz "i8042: a keyboard command is acknowledged (0xfa)"
t_kbd_outp: .asciz "i8042: output port round trip"
t_rng_found: .asciz "virtio-rng: found (device ID 4)"
t_rng_read: .asciz "virtio-rng: 64 random bytes through the request queue"
t_rng_readable: .asciz "virtio-rng: a driver-readable buffer puts it in NEEDS_RESET"
t_rng_after_reset: .asciz "virtio-rng: serves again after a reset"
t_bal_found: .asciz "virtio-balloon: found (device ID 5)"
t_bal_target: .asciz "virtio-balloon: num_pages is the 4 MiB target"
t_bal_inflate: .asciz "virtio-balloon: an inflated page is given back (reads as zeros)"
t_bal_outside: .asciz "virtio-balloon: a PFN outside RAM puts it in NEEDS_RESET"
