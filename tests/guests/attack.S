/* The attack guest: a hostile driver for every virtio device the VMM gives
 * it (virtio-blk in slot 0, virtio-vsock in slot 1: `vmm run --kernel
 * attack.elf --disk path=IMG`). It sends looped chains, descriptors
 * outside RAM, avail-index jumps, ring indices out of range, a ring outside
 * RAM, a bad QueueSel, status transitions out of order, config writes in
 * the wrong state, odd-width register accesses and accesses to MMIO
 * nothing is mapped at. Each attack must leave the device in NEEDS_RESET
 * (or ignore the access) and the VMM running; after a reset the disk still
 * reads its first sector ("ATTACK-DISK"), after the vsock attacks too.
 * Prints "ok   attack: ..." / "FAIL attack: ..." lines, then
 * "attack: all passed" or "attack: N failed", and powers off. */
#include "guest.h"

#define BLK 0xd0000000
#define VSOCK 0xd0001000
#define UNMAPPED_SLOT 0xd0012000 /* slot 18: no device there */

#define R_MAGIC 0x000
#define R_DEVICE_ID 0x008
#define R_DRV_FEAT 0x020
#define R_DRV_FEAT_SEL 0x024
#define R_QSEL 0x030
#define R_QNUM_MAX 0x034
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

#define F_NEXT 1
#define F_WRITE 2

#define QSIZE 8
#define RING_BLK 0x400000   /* desc table; avail +0x1000, used +0x2000 */
#define RING_VSOCK 0x410000
#define REQ 0x420000        /* virtio-blk request header */
#define DATA 0x421000       /* 512 bytes */
#define STATUSB 0x422000    /* the request's status byte */

	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	xor %r15d, %r15d            /* failures */
	lea banner(%rip), %rsi
	call puts

	/* ---- virtio-blk ---------------------------------------------- */
	mov $BLK, %rbx
	mov $RING_BLK, %r12
	xor %eax, %eax
	cmpl $0x74726976, R_MAGIC(%rbx)
	jne 1f
	cmpl $2, R_DEVICE_ID(%rbx)
	jne 1f
	inc %eax
1:	lea t_magic(%rip), %rsi
	call result

	/* Status out of order: DRIVER_OK from reset, then all bits at once. */
	movl $0, R_STATUS(%rbx)
	movl $S_DRIVER_OK, R_STATUS(%rbx)
	movl R_STATUS(%rbx), %ecx
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK), R_STATUS(%rbx)
	orl R_STATUS(%rbx), %ecx
	xor %eax, %eax
	test %ecx, %ecx
	sete %al
	lea t_status_order(%rip), %rsi
	call result

	/* Config write before FEATURES_OK (and any time: capacity is
	 * read-only): the capacity must not change. */
	movl R_CONFIG(%rbx), %r13d
	movl $0xdeadbeef, R_CONFIG(%rbx)
	movb $0x55, R_CONFIG + 1(%rbx)
	movl $S_ACK, R_STATUS(%rbx)
	movl $0x12345678, R_CONFIG(%rbx)
	xor %eax, %eax
	cmpl %r13d, R_CONFIG(%rbx)
	sete %al
	lea t_config_write(%rip), %rsi
	call result

	/* Odd widths on registers are ignored: an 8-byte read, 1- and
	 * 2-byte writes to Status, a read past the end of config space. */
	movq R_MAGIC(%rbx), %rax
	movb $0xff, R_STATUS(%rbx)
	movw $0xffff, R_STATUS(%rbx)
	movl R_CONFIG + 0xe00(%rbx), %eax
	xor %eax, %eax
	cmpl $S_ACK, R_STATUS(%rbx)
	sete %al
	lea t_widths(%rip), %rsi
	call result

	/* Bad QueueSel: no queue there, nothing to make ready. */
	movl $0, R_STATUS(%rbx)
	movl $S_ACK, R_STATUS(%rbx)
	movl $(S_ACK | S_DRIVER), R_STATUS(%rbx)
	movl $0x7fffffff, R_QSEL(%rbx)
	movl R_QNUM_MAX(%rbx), %ecx
	movl $QSIZE, R_QNUM(%rbx)
	movl $1, R_QREADY(%rbx)
	orl R_QREADY(%rbx), %ecx
	movl $0x1234, R_QNOTIFY(%rbx)  /* a queue index no device has */
	xor %eax, %eax
	test %ecx, %ecx
	sete %al
	lea t_queue_sel(%rip), %rsi
	call result

	/* A ring outside guest RAM: refused at QueueReady, NEEDS_RESET. */
	call dev_start_features
	movl $0, R_QSEL(%rbx)
	movl $QSIZE, R_QNUM(%rbx)
	movl $0xfffff000, R_QDESC(%rbx)
	movl $0x7fff, R_QDESC_HI(%rbx)
	movl $1, R_QREADY(%rbx)
	call needs_reset
	lea t_ring_outside(%rip), %rsi
	call result

	/* A looped chain: desc 0 -> 1 -> 0. */
	xor %ecx, %ecx
	call dev_init
	movq $REQ, 0(%r12)
	movl $16, 8(%r12)
	movw $F_NEXT, 12(%r12)
	movw $1, 14(%r12)
	movq $DATA, 16(%r12)
	movl $512, 24(%r12)
	movw $F_NEXT, 28(%r12)
	movw $0, 30(%r12)
	movw $0, 0x1004(%r12)       /* avail.ring[0] = 0 */
	movw $1, 0x1002(%r12)       /* avail.idx = 1 */
	movl $0, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_loop(%rip), %rsi
	call result

	/* A descriptor whose buffer is outside guest RAM. */
	xor %ecx, %ecx
	call dev_init
	movabs $0x7ffffffff000, %rax
	movq %rax, 0(%r12)
	movl $16, 8(%r12)
	movw $0, 12(%r12)
	movw $0, 0x1004(%r12)
	movw $1, 0x1002(%r12)
	movl $0, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_desc_outside(%rip), %rsi
	call result

	/* A buffer that starts in RAM and runs past its end. */
	xor %ecx, %ecx
	call dev_init
	movq $0x3fff000, 0(%r12)    /* 64 MiB guest: the last page... */
	movl $0x10000, 8(%r12)      /* ...and 60 KiB beyond */
	movw $0, 12(%r12)
	movw $0, 0x1004(%r12)
	movw $1, 0x1002(%r12)
	movl $0, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_desc_straddle(%rip), %rsi
	call result

	/* The avail index jumps by more than the queue size. */
	xor %ecx, %ecx
	call dev_init
	movw $0x8000, 0x1002(%r12)
	movl $0, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_avail_jump(%rip), %rsi
	call result

	/* An avail ring entry naming a descriptor past the table. */
	xor %ecx, %ecx
	call dev_init
	movw $200, 0x1004(%r12)
	movw $1, 0x1002(%r12)
	movl $0, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_avail_entry(%rip), %rsi
	call result

	/* A next index past the table. */
	xor %ecx, %ecx
	call dev_init
	movq $REQ, 0(%r12)
	movl $16, 8(%r12)
	movw $F_NEXT, 12(%r12)
	movw $0x4000, 14(%r12)
	movw $0, 0x1004(%r12)
	movw $1, 0x1002(%r12)
	movl $0, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_next_range(%rip), %rsi
	call result

	/* The disk works again after a reset. */
	call blk_read_ok
	lea t_blk_after(%rip), %rsi
	call result

	/* ---- virtio-vsock ------------------------------------------------ */
	mov $VSOCK, %rbx
	mov $RING_VSOCK, %r12
	xor %eax, %eax
	cmpl $0x74726976, R_MAGIC(%rbx)
	jne 1f
	cmpl $19, R_DEVICE_ID(%rbx)
	jne 1f
	inc %eax
1:	lea t_vmagic(%rip), %rsi
	call result

	call dev_start_features
	movl $0x10000, R_QSEL(%rbx)
	movl R_QNUM_MAX(%rbx), %ecx
	movl $1, R_QREADY(%rbx)
	orl R_QREADY(%rbx), %ecx
	xor %eax, %eax
	test %ecx, %ecx
	sete %al
	lea t_vqueue_sel(%rip), %rsi
	call result

	/* A looped chain on the tx queue (1). */
	mov $1, %ecx
	call dev_init
	movq $REQ, 0(%r12)
	movl $44, 8(%r12)
	movw $F_NEXT, 12(%r12)
	movw $0, 14(%r12)           /* next = itself */
	movw $0, 0x1004(%r12)
	movw $1, 0x1002(%r12)
	movl $1, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_vloop(%rip), %rsi
	call result

	/* The avail index jumps on the tx queue. */
	mov $1, %ecx
	call dev_init
	movw $0xffff, 0x1002(%r12)
	movl $1, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_vavail_jump(%rip), %rsi
	call result

	/* After a reset vsock comes back to DRIVER_OK without NEEDS_RESET. */
	mov $1, %ecx
	call dev_init
	xor %eax, %eax
	cmpl $(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK), R_STATUS(%rbx)
	sete %al
	lea t_vreset(%rip), %rsi
	call result
	movl $0, R_STATUS(%rbx)

	/* ---- nothing mapped there ---------------------------------------- */
	mov $UNMAPPED_SLOT, %rbx
	movl R_MAGIC(%rbx), %eax
	movl $S_ACK, R_STATUS(%rbx)
	movq $-1, 0x10(%rbx)
	mov $0xe0000000, %rbx
	movl (%rbx), %eax
	movl $1, (%rbx)
	mov $0xd0100000, %rbx
	movb (%rbx), %al
	movb $1, (%rbx)
	mov $1, %eax
	lea t_unmapped(%rip), %rsi
	call result

	/* ---- and the disk still works after all of it --------------------- */
	mov $BLK, %rbx
	mov $RING_BLK, %r12
	call blk_read_ok
	lea t_blk_end(%rip), %rsi
	call result

	test %r15d, %r15d
	jnz 2f
	lea all_passed(%rip), %rsi
	call puts
	jmp poweroff
2:	lea failed(%rip), %rsi
	call puts
	mov %r15d, %edi
	call puthex32
	mov $'\n', %al
	call putc
	jmp poweroff

/* result: %eax 1 = pass; the test's name at %rsi. */
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

/* dev_start_features: reset, ACK, DRIVER, VERSION_1, FEATURES_OK. */
dev_start_features:
	movl $0, R_STATUS(%rbx)
	movl $S_ACK, R_STATUS(%rbx)
	movl $(S_ACK | S_DRIVER), R_STATUS(%rbx)
	movl $1, R_DRV_FEAT_SEL(%rbx)
	movl $1, R_DRV_FEAT(%rbx)   /* VIRTIO_F_VERSION_1 (bit 32) */
	movl $0, R_DRV_FEAT_SEL(%rbx)
	movl $0, R_DRV_FEAT(%rbx)
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK), R_STATUS(%rbx)
	ret

/* dev_init: the device at %rbx, queue %ecx on a zeroed ring at %r12,
 * live (DRIVER_OK). */
dev_init:
	push %rcx
	mov %r12, %rdi
	mov $0x3000, %ecx
	xor %eax, %eax
	rep stosb
	pop %rcx
	call dev_start_features
	movl %ecx, R_QSEL(%rbx)
	movl $QSIZE, R_QNUM(%rbx)
	movl %r12d, R_QDESC(%rbx)
	movl $0, R_QDESC_HI(%rbx)
	lea 0x1000(%r12), %eax
	movl %eax, R_QAVAIL(%rbx)
	movl $0, R_QAVAIL_HI(%rbx)
	lea 0x2000(%r12), %eax
	movl %eax, R_QUSED(%rbx)
	movl $0, R_QUSED_HI(%rbx)
	movl $1, R_QREADY(%rbx)
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK), R_STATUS(%rbx)
	ret

/* needs_reset: waits (bounded) for the device at %rbx to set NEEDS_RESET;
 * %eax 1 if it did and the VMM is still here to say so. */
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

/* blk_read_ok: reset virtio-blk at %rbx, read sector 0 through queue 0
 * and check it starts with "ATTACK-DISK"; %eax 1 if so. */
blk_read_ok:
	xor %ecx, %ecx
	call dev_init
	movl $0, REQ                /* VIRTIO_BLK_T_IN */
	movl $0, REQ + 4
	movq $0, REQ + 8            /* sector 0 */
	movq $0, DATA
	movb $0xff, STATUSB
	movq $REQ, 0(%r12)
	movl $16, 8(%r12)
	movw $F_NEXT, 12(%r12)
	movw $1, 14(%r12)
	movq $DATA, 16(%r12)
	movl $512, 24(%r12)
	movw $(F_NEXT | F_WRITE), 28(%r12)
	movw $2, 30(%r12)
	movq $STATUSB, 32(%r12)
	movl $1, 40(%r12)
	movw $F_WRITE, 44(%r12)
	movw $0, 0x1004(%r12)
	movw $1, 0x1002(%r12)
	movl $0, R_QNOTIFY(%rbx)
	mov $300000, %ecx
1:	cmpw $1, 0x2002(%r12)       /* used.idx */
	je 2f
	movl R_STATUS(%rbx), %eax   /* an exit per round: the bound is in time, not spins */
	dec %ecx
	jnz 1b
	xor %eax, %eax
	ret
2:	xor %eax, %eax
	cmpb $0, STATUSB
	jne 3f
	lea disk_magic(%rip), %rsi
	mov $DATA, %rdi
	mov $11, %ecx
	repe cmpsb
	jne 3f
	inc %eax
3:	ret

#include "lib.inc"

	.section .rodata
banner:	.asciz "attack: a hostile driver for every device\n"
ok_pfx:	.asciz "ok   attack: "
fail_pfx: .asciz "FAIL attack: "
all_passed: .asciz "attack: all passed\n"
failed:	.asciz "attack: failed count 0x"
disk_magic: .ascii "ATTACK-DISK"
t_magic: .asciz "blk: magic and device ID"
t_status_order: .asciz "blk: status bits out of order are refused"
t_config_write: .asciz "blk: config writes in the wrong state change nothing"
t_widths: .asciz "blk: odd-width register accesses are ignored"
t_queue_sel: .asciz "blk: a bad QueueSel has no queue to make ready"
t_ring_outside: .asciz "blk: a ring outside RAM -> NEEDS_RESET"
t_loop: .asciz "blk: a looped chain -> NEEDS_RESET"
t_desc_outside: .asciz "blk: a buffer outside RAM -> NEEDS_RESET"
t_desc_straddle: .asciz "blk: a buffer running past the end of RAM -> NEEDS_RESET"
t_avail_jump: .asciz "blk: an avail index jump -> NEEDS_RESET"
t_avail_entry: .asciz "blk: an avail entry past the table -> NEEDS_RESET"
t_next_range: .asciz "blk: a next index past the table -> NEEDS_RESET"
t_blk_after: .asciz "blk: after a reset the disk reads sector 0 again"
t_vmagic: .asciz "vsock: magic and device ID"
t_vqueue_sel: .asciz "vsock: a bad QueueSel has no queue to make ready"
t_vloop: .asciz "vsock: a looped tx chain -> NEEDS_RESET"
t_vavail_jump: .asciz "vsock: a tx avail index jump -> NEEDS_RESET"
t_vreset: .asciz "vsock: after a reset it goes live again"
t_unmapped: .asciz "MMIO where nothing is mapped: the VMM runs on"
t_blk_end: .asciz "blk: still reads after every attack on every device"
