/* The attack guest: a hostile driver for every virtio device the VMM gives
 * it (`vmm run --kernel attack.elf --disk path=IMG --net tap=T,host_ip=
 * 172.30.213.1/30 --fs tag=T,path=DIR`): virtio-blk in slot 0,
 * virtio-vsock in slot 1, virtio-net and virtio-fs found by their device
 * IDs (1 and 26). It sends looped chains, descriptors outside RAM or
 * straddling its end, avail-index jumps, ring indices out of range, a ring
 * outside RAM, a bad QueueSel, status transitions out of order, config
 * writes in the wrong state, odd-width register accesses and accesses to
 * MMIO nothing is mapped at; to virtio-net transmit chains with hostile
 * headers and a device-readable receive buffer; to virtio-fs malformed
 * FUSE requests on both queues. Each attack must leave the device in
 * NEEDS_RESET (or be dropped and counted, as the device's design says) and
 * the VMM running; after a reset each device works again: the disk reads
 * its first sector ("ATTACK-DISK"), virtio-net gets an ARP reply from the
 * host side of the TAP, virtio-fs answers FUSE_INIT and STATFS.
 * Prints "ok   attack: ..." / "FAIL attack: ..." lines ("skip attack:
 * ..." for a device the VM was not given), then "attack: all passed" or
 * "attack: N failed", and powers off. */
#include "guest.h"

#define BLK 0xd0000000
#define VSOCK 0xd0001000
#define VIRTIO_BASE 0xd0000000  /* slot n at + n * 0x1000 */
#define VIRTIO_SLOTS 16
#define ID_NET 1
#define ID_FS 26
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
#define RING_NETRX 0x430000
#define RING_NETTX 0x434000
#define RING_FSHI 0x438000
#define RING_FSREQ 0x43c000
#define FSREQ 0x440000      /* FUSE request: in-header, body (up to 100 KiB) */
#define FSOUT 0x470000      /* FUSE reply: out-header, payload */
#define TXBUF 0x480000      /* hostile tx chains, up to 128 KiB */
#define ARPBUF 0x4b0000     /* virtio_net_hdr_v1 + an ARP request */
#define RXBUF 0x4c0000      /* QSIZE rx buffers of 2 KiB */

#define NET_HDR 12          /* struct virtio_net_hdr_v1 (5.1.6) */
#define NET_F_CSUM 0x1      /* feature bit 0 */
#define NET_F_HOST_TSO4 0x800 /* feature bit 11 */
#define GUEST_IP 0x02d51eac /* 172.30.213.2; the TAP's host side is .1/30 */
#define HOST_IP 0x01d51eac

	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	xor %r15d, %r15d            /* failures */
	xor %r14d, %r14d            /* driver features, low word (VERSION_1 is always set) */
	xor %ebp, %ebp              /* a prefix for result's names, or 0 */
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

	/* ---- virtio-net ---------------------------------------------------- */
	mov $ID_NET, %edi
	call find_dev
	test %eax, %eax
	jnz 1f
	lea skip_net(%rip), %rsi
	call puts
	jmp net_done
1:	lea p_net(%rip), %rbp
	mov $RING_NETRX, %r12
	call reg_attacks

	/* The queue-level attacks on the transmit queue (1): the receive
	 * queue is only walked when a frame comes from the TAP. */
	lea p_ntx(%rip), %rbp
	mov $RING_NETTX, %r12
	mov $1, %r13d
	call chain_attacks
	lea p_net(%rip), %rbp

	/* Transmit chains with hostile headers (5.1.6.2): the device drops
	 * each, counts it (tx_malformed) and returns the buffer, it does
	 * not fail: a bad frame is the network's business, as on a wire.
	 * CSUM and HOST_TSO4 are negotiated so the checksum and segmentation
	 * fields are checked against the frame, not refused wholesale. */
	mov $(NET_F_CSUM | NET_F_HOST_TSO4), %r14d
	mov $1, %ecx
	call dev_init
	lea net_tx_bad(%rip), %r13
2:	cmpq $0, 16(%r13)
	je 3f
	movq $0, TXBUF
	movl $0, TXBUF + 8
	movb 0(%r13), %al
	movb %al, TXBUF             /* flags */
	movb 1(%r13), %al
	movb %al, TXBUF + 1         /* gso_type */
	movl 2(%r13), %eax
	movl %eax, TXBUF + 2        /* hdr_len, gso_size */
	movl 6(%r13), %eax
	movl %eax, TXBUF + 6        /* csum_start, csum_offset */
	movq $TXBUF, 0(%r12)
	movl 12(%r13), %eax
	movl %eax, 8(%r12)
	movw 10(%r13), %ax
	movw %ax, 12(%r12)
	movw $0, 14(%r12)
	mov $1, %edi
	call post_head0
	call served
	mov 16(%r13), %rsi
	call result
	add $24, %r13
	jmp 2b
3:	xor %r14d, %r14d

	/* A device-readable receive buffer (5.1.6.3.1: rx buffers are
	 * device-writable): NEEDS_RESET when the first frame is placed.
	 * The ARP request on tx makes the host side answer, so one comes. */
	call net_arp_build
	xor %esi, %esi
	call net_arp_live
	call needs_reset
	lea t_nrx_readable(%rip), %rsi
	call result

	/* After a reset: the ARP request goes out through the TAP, and the
	 * host's reply comes back into a receive buffer. */
	mov $F_WRITE, %esi
	call net_arp_live
	call net_arp_reply
	lea t_nafter(%rip), %rsi
	call result
	movl $0, R_STATUS(%rbx)
	xor %ebp, %ebp

	mov $BLK, %rbx
	mov $RING_BLK, %r12
	call blk_read_ok
	lea t_blk_after_net(%rip), %rsi
	call result
net_done:

	/* ---- virtio-fs ----------------------------------------------------- */
	mov $ID_FS, %edi
	call find_dev
	test %eax, %eax
	jnz 1f
	lea skip_fs(%rip), %rsi
	call puts
	jmp fs_done
1:	lea p_fs(%rip), %rbp
	mov $RING_FSHI, %r12
	call reg_attacks

	/* Malformed FUSE requests (5.11.6: readable in-header and arguments,
	 * then writable out-header and reply) on a fresh session: each is
	 * answered with an error, or returned unused when there is no header
	 * to answer or no room for the reply's; the device stays live. */
	call fs_live
	lea fs_bad(%rip), %r13
	call fs_run

	/* The queue-level attacks on the hiprio (0) and request (1) queues. */
	lea p_fshi(%rip), %rbp
	mov $RING_FSHI, %r12
	xor %r13d, %r13d
	call chain_attacks
	lea p_fsreq(%rip), %rbp
	mov $RING_FSREQ, %r12
	mov $1, %r13d
	call chain_attacks

	/* After a reset a new session opens and is served. */
	lea p_fs(%rip), %rbp
	call fs_live
	lea fs_after(%rip), %r13
	call fs_run
	movl $0, R_STATUS(%rbx)
	xor %ebp, %ebp

	mov $BLK, %rbx
	mov $RING_BLK, %r12
	call blk_read_ok
	lea t_blk_after_fs(%rip), %rsi
	call result
fs_done:

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

/* result: %eax 1 = pass; the test's name at %rsi, after the device's
 * prefix at %rbp if that is not 0. */
result:
	push %rsi
	test %eax, %eax
	jz 1f
	lea ok_pfx(%rip), %rsi
	jmp 2f
1:	lea fail_pfx(%rip), %rsi
	inc %r15d
2:	call puts
	test %rbp, %rbp
	jz 3f
	mov %rbp, %rsi
	call puts
3:	pop %rsi
	call puts
	mov $'\n', %al
	call putc
	ret

/* dev_start_features: reset, ACK, DRIVER, VERSION_1 and the low feature
 * word in %r14d, FEATURES_OK. */
dev_start_features:
	movl $0, R_STATUS(%rbx)
	movl $S_ACK, R_STATUS(%rbx)
	movl $(S_ACK | S_DRIVER), R_STATUS(%rbx)
	movl $1, R_DRV_FEAT_SEL(%rbx)
	movl $1, R_DRV_FEAT(%rbx)   /* VIRTIO_F_VERSION_1 (bit 32) */
	movl $0, R_DRV_FEAT_SEL(%rbx)
	movl %r14d, R_DRV_FEAT(%rbx)
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK), R_STATUS(%rbx)
	ret

/* queue_setup: queue %ecx of the device at %rbx on a zeroed ring at %rdi
 * (desc table; avail +0x1000, used +0x2000), made ready. */
queue_setup:
	push %rdi
	push %rcx
	mov $0x3000, %ecx
	xor %eax, %eax
	rep stosb
	pop %rcx
	pop %rdi
	movl %ecx, R_QSEL(%rbx)
	movl $QSIZE, R_QNUM(%rbx)
	movl %edi, R_QDESC(%rbx)
	movl $0, R_QDESC_HI(%rbx)
	lea 0x1000(%rdi), %eax
	movl %eax, R_QAVAIL(%rbx)
	movl $0, R_QAVAIL_HI(%rbx)
	lea 0x2000(%rdi), %eax
	movl %eax, R_QUSED(%rbx)
	movl $0, R_QUSED_HI(%rbx)
	movl $1, R_QREADY(%rbx)
	ret

/* dev_init: the device at %rbx, queue %ecx on a zeroed ring at %r12,
 * live (DRIVER_OK). */
dev_init:
	call dev_start_features
	mov %r12, %rdi
	call queue_setup
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK), R_STATUS(%rbx)
	ret

/* find_dev: the virtio-mmio slot whose DeviceID is %edi into %rbx; %eax 1
 * if there is one (4.2.2: magic "virt", then the ID; 0 is no device). */
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

/* reg_attacks: register-level attacks on the device at %rbx (ring %r12
 * for queue 0): a QueueSel past its queues, config writes before
 * FEATURES_OK and once live (2.5: config fields are driver-writable only
 * where the device type says so; net's MAC and fs's tag are not). */
reg_attacks:
	call dev_start_features
	movl $0x7fffffff, R_QSEL(%rbx)
	movl R_QNUM_MAX(%rbx), %ecx
	movl $QSIZE, R_QNUM(%rbx)
	movl $1, R_QREADY(%rbx)
	orl R_QREADY(%rbx), %ecx
	movl $0x1234, R_QNOTIFY(%rbx)
	xor %eax, %eax
	test %ecx, %ecx
	sete %al
	lea t_g_qsel(%rip), %rsi
	call result

	movl $0, R_STATUS(%rbx)
	movl $S_ACK, R_STATUS(%rbx)
	movl R_CONFIG(%rbx), %r13d
	movl R_CONFIG + 4(%rbx), %r11d
	movl $0xdeadbeef, R_CONFIG(%rbx)
	movb $0x55, R_CONFIG + 1(%rbx)
	xor %ecx, %ecx
	call dev_init
	movl $0x12345678, R_CONFIG(%rbx)
	movw $0xffff, R_CONFIG + 4(%rbx)
	movq $-1, R_CONFIG + 2(%rbx)
	xor %eax, %eax
	cmpl %r13d, R_CONFIG(%rbx)
	jne 1f
	cmpl %r11d, R_CONFIG + 4(%rbx)
	sete %al
1:	lea t_g_config(%rip), %rsi
	call result
	movl $0, R_STATUS(%rbx)
	ret

/* chain_attacks: the ring and descriptor attacks on queue %r13d of the
 * device at %rbx, ring %r12 (2.7.5-2.7.7, 2.7.13): each must end in
 * NEEDS_RESET with the VMM running. */
chain_attacks:
	/* A looped chain: desc 0 -> 1 -> 0. */
	mov %r13d, %ecx
	call dev_init
	movq $REQ, 0(%r12)
	movl $64, 8(%r12)
	movw $F_NEXT, 12(%r12)
	movw $1, 14(%r12)
	movq $DATA, 16(%r12)
	movl $64, 24(%r12)
	movw $F_NEXT, 28(%r12)
	movw $0, 30(%r12)
	mov %r13d, %edi
	call post_head0
	call needs_reset
	lea t_g_loop(%rip), %rsi
	call result

	/* A buffer outside guest RAM. */
	mov %r13d, %ecx
	call dev_init
	movabs $0x7ffffffff000, %rax
	movq %rax, 0(%r12)
	movl $64, 8(%r12)
	mov %r13d, %edi
	call post_head0
	call needs_reset
	lea t_g_outside(%rip), %rsi
	call result

	/* A buffer from the last page of RAM 60 KiB past its end. */
	mov %r13d, %ecx
	call dev_init
	movq $0x3fff000, 0(%r12)
	movl $0x10000, 8(%r12)
	mov %r13d, %edi
	call post_head0
	call needs_reset
	lea t_g_straddle(%rip), %rsi
	call result

	/* The avail index jumps by more than the queue size (2.7.13.3). */
	mov %r13d, %ecx
	call dev_init
	movw $0x8000, 0x1002(%r12)
	movl %r13d, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_g_avail_jump(%rip), %rsi
	call result

	/* An avail ring entry naming a descriptor past the table. */
	mov %r13d, %ecx
	call dev_init
	movw $200, 0x1004(%r12)
	movw $1, 0x1002(%r12)
	movl %r13d, R_QNOTIFY(%rbx)
	call needs_reset
	lea t_g_avail_entry(%rip), %rsi
	call result

	/* A next index past the table. */
	mov %r13d, %ecx
	call dev_init
	movq $REQ, 0(%r12)
	movl $64, 8(%r12)
	movw $F_NEXT, 12(%r12)
	movw $0x4000, 14(%r12)
	mov %r13d, %edi
	call post_head0
	call needs_reset
	lea t_g_next(%rip), %rsi
	call result
	movl $0, R_STATUS(%rbx)
	ret

/* post_head0: descriptor 0 into the next avail entry of the ring at %r12,
 * the index moved on, queue %edi notified; %edx the new avail index (the
 * used index to wait for). x86 keeps the stores in order, and the
 * notifying MMIO write comes after them (2.7.13.3). */
post_head0:
	movzwl 0x1002(%r12), %edx
	mov %edx, %eax
	and $(QSIZE - 1), %eax
	movw $0, 0x1004(%r12,%rax,2)
	inc %edx
	movzwl %dx, %edx
	movw %dx, 0x1002(%r12)
	movl %edi, R_QNOTIFY(%rbx)
	ret

/* served: waits (bounded) for the used index of the ring at %r12 to reach
 * %dx; %eax 1 if it did and the device at %rbx is not in NEEDS_RESET. */
served:
	mov $300000, %ecx
1:	movl R_STATUS(%rbx), %eax   /* an exit per round: the bound is in time */
	test $S_NEEDS_RESET, %eax
	jnz 2f
	cmpw %dx, 0x2002(%r12)
	je 3f
	dec %ecx
	jnz 1b
2:	xor %eax, %eax
	ret
3:	movl R_STATUS(%rbx), %eax
	test $S_NEEDS_RESET, %eax
	jnz 2b
	mov $1, %eax
	ret

/* net_arp_build: at ARPBUF a transmit chain's content: an empty
 * virtio_net_hdr_v1 and an ARP request from the device's MAC (config
 * offset 0, 5.1.4) and GUEST_IP for HOST_IP, which the host side of the
 * TAP answers. */
net_arp_build:
	mov $ARPBUF, %rdi
	mov $64, %ecx
	xor %eax, %eax
	rep stosb
	movl $-1, ARPBUF + NET_HDR       /* destination: broadcast */
	movw $-1, ARPBUF + NET_HDR + 4
	movl R_CONFIG(%rbx), %eax
	movl %eax, ARPBUF + NET_HDR + 6  /* source MAC */
	movl %eax, ARPBUF + NET_HDR + 22 /* sender hardware address */
	movzwl R_CONFIG + 4(%rbx), %eax
	movw %ax, ARPBUF + NET_HDR + 10
	movw %ax, ARPBUF + NET_HDR + 26
	movw $0x0608, ARPBUF + NET_HDR + 12 /* ethertype ARP (big-endian) */
	movw $0x0100, ARPBUF + NET_HDR + 14 /* Ethernet */
	movw $0x0008, ARPBUF + NET_HDR + 16 /* IPv4 */
	movw $0x0406, ARPBUF + NET_HDR + 18 /* hlen 6, plen 4 */
	movw $0x0100, ARPBUF + NET_HDR + 20 /* request */
	movl $GUEST_IP, ARPBUF + NET_HDR + 28
	movl $HOST_IP, ARPBUF + NET_HDR + 38
	ret

/* net_arp_live: virtio-net at %rbx live with QSIZE 2 KiB receive buffers
 * (descriptor flags %si) on queue 0 and the ARP request on queue 1, both
 * notified; %r12 is the receive ring afterwards. */
net_arp_live:
	push %rsi
	call dev_start_features
	xor %ecx, %ecx
	mov $RING_NETRX, %rdi
	call queue_setup
	mov $1, %ecx
	mov $RING_NETTX, %rdi
	call queue_setup
	pop %rsi
	mov $RING_NETRX, %r12
	xor %ecx, %ecx
1:	mov %ecx, %eax
	shl $4, %eax
	mov %ecx, %edx
	shl $11, %edx
	add $RXBUF, %edx
	movq %rdx, (%r12,%rax)
	movl $0x800, 8(%r12,%rax)
	movw %si, 12(%r12,%rax)
	movw %cx, 0x1004(%r12,%rcx,2)
	inc %ecx
	cmp $QSIZE, %ecx
	jb 1b
	movw $QSIZE, 0x1002(%r12)
	movq $ARPBUF, RING_NETTX
	movl $(NET_HDR + 42), RING_NETTX + 8
	movw $1, RING_NETTX + 0x1002
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK), R_STATUS(%rbx)
	movl $0, R_QNOTIFY(%rbx)
	movl $1, R_QNOTIFY(%rbx)
	ret

/* net_arp_reply: waits (bounded) for the host's ARP reply among the
 * receive ring's used entries (other frames, IPv6 neighbour discovery on
 * a fresh TAP, may come first); %eax 1 if it came. */
net_arp_reply:
	xor %r13d, %r13d            /* used entries looked at */
	mov $300000, %ecx
1:	movzwl 0x2002(%r12), %eax
	cmp %r13d, %eax
	je 3f
	mov %r13d, %eax
	and $(QSIZE - 1), %eax
	movl 0x2004(%r12,%rax,8), %edx /* used.ring[i].id: the buffer's descriptor */
	shl $11, %edx
	add $RXBUF, %edx
	cmpw $0x0608, NET_HDR + 12(%rdx) /* ARP */
	jne 2f
	cmpw $0x0200, NET_HDR + 20(%rdx) /* reply */
	jne 2f
	cmpl $HOST_IP, NET_HDR + 28(%rdx) /* sender protocol address */
	jne 2f
	mov $1, %eax
	ret
2:	inc %r13d
	cmp $QSIZE, %r13d
	jb 1b
	jmp 4f
3:	movl R_STATUS(%rbx), %eax
	test $S_NEEDS_RESET, %eax
	jnz 4f
	dec %ecx
	jnz 1b
4:	xor %eax, %eax
	ret

/* fs_live: virtio-fs at %rbx live, hiprio queue 0 on RING_FSHI, request
 * queue 1 on RING_FSREQ (5.11.2). */
fs_live:
	call dev_start_features
	xor %ecx, %ecx
	mov $RING_FSHI, %rdi
	call queue_setup
	mov $1, %ecx
	mov $RING_FSREQ, %rdi
	call queue_setup
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK), R_STATUS(%rbx)
	ret

/* fs_run: the FUSE requests of the table at %r13 (40-byte entries, see
 * fs_bad), one at a time, each checked: the used length, and where there
 * is an out-header its error and unique. */
fs_run:
1:	cmpq $0, 32(%r13)
	je 9f
	movl 8(%r13), %eax
	movl %eax, FSREQ            /* fuse_in_header.len: maybe a lie */
	movl 12(%r13), %eax
	movl %eax, FSREQ + 4        /* opcode */
	movq %r13, FSREQ + 8        /* unique */
	movq $1, FSREQ + 16         /* nodeid: the root */
	movq $0, FSREQ + 24
	movq $0, FSREQ + 32
	/* One body for all: fuse_init_in 7.31 (major, minor, readahead,
	 * flags); as fuse_write_in its size (+16) is 1000; as
	 * fuse_batch_forget_in its count is 7. */
	movl $7, FSREQ + 40
	movl $31, FSREQ + 44
	movl $0x20000, FSREQ + 48
	movl $0, FSREQ + 52
	movl $1000, FSREQ + 56
	movl $0, FSREQ + 60
	movq $-1, FSOUT
	movq $-1, FSOUT + 8
	movl 0(%r13), %edi
	mov $RING_FSHI, %r12
	test %edi, %edi
	jz 2f
	mov $RING_FSREQ, %r12
2:	xor %ecx, %ecx
	movl 4(%r13), %eax
	test %eax, %eax
	jz 3f
	movq $FSREQ, 0(%r12)
	movl %eax, 8(%r12)
	movl $0, 12(%r12)           /* flags, next */
	inc %ecx
3:	movl 16(%r13), %eax
	test %eax, %eax
	jz 4f
	mov %ecx, %edx
	shl $4, %edx
	movq $FSOUT, (%r12,%rdx)
	movl %eax, 8(%r12,%rdx)
	movl $F_WRITE, 12(%r12,%rdx)
	test %ecx, %ecx
	jz 4f
	movw $F_NEXT, 12(%r12)
	movw $1, 14(%r12)
4:	call post_head0
	call served
	test %eax, %eax
	jz 6f
	lea -1(%rdx), %ecx
	and $(QSIZE - 1), %ecx
	movl 0x2008(%r12,%rcx,8), %ecx /* used.ring[i].len */
	xor %eax, %eax
	cmpl 20(%r13), %ecx
	jne 6f
	cmpl $16, %ecx
	jb 5f
	movl FSOUT + 4, %ecx        /* fuse_out_header.error */
	cmpl 24(%r13), %ecx
	jne 6f
	cmpq %r13, FSOUT + 8
	jne 6f
5:	mov $1, %eax
6:	mov 32(%r13), %rsi
	call result
	add $40, %r13
	jmp 1b
9:	ret

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
t_blk_after_net: .asciz "blk: still reads after the attacks on net"
t_blk_after_fs: .asciz "blk: still reads after the attacks on fs"
skip_net: .asciz "skip attack: net: no virtio-net device (the VM has no --net)\n"
skip_fs: .asciz "skip attack: fs: no virtio-fs device (the VM has no --fs)\n"
p_net:	.asciz "net: "
p_ntx:	.asciz "net tx: "
p_fs:	.asciz "fs: "
p_fshi:	.asciz "fs hiprio: "
p_fsreq: .asciz "fs request: "
t_g_qsel: .asciz "a bad QueueSel has no queue to make ready"
t_g_config: .asciz "config writes before FEATURES_OK and once live change nothing"
t_g_loop: .asciz "a looped chain -> NEEDS_RESET"
t_g_outside: .asciz "a buffer outside RAM -> NEEDS_RESET"
t_g_straddle: .asciz "a buffer running past the end of RAM -> NEEDS_RESET"
t_g_avail_jump: .asciz "an avail index jump -> NEEDS_RESET"
t_g_avail_entry: .asciz "an avail entry past the table -> NEEDS_RESET"
t_g_next: .asciz "a next index past the table -> NEEDS_RESET"
t_ntx_csum: .asciz "tx checksum position far beyond the frame: dropped, device live"
t_ntx_csum1: .asciz "tx checksum field one byte past the frame: dropped, device live"
t_ntx_flags: .asciz "tx header with DATA_VALID (a device-only flag): dropped, device live"
t_ntx_gso: .asciz "tx unknown gso_type: dropped, device live"
t_ntx_gso0: .asciz "tx TSO with gso_size 0: dropped, device live"
t_ntx_hdrlen: .asciz "tx TSO with hdr_len beyond the frame: dropped, device live"
t_ntx_nocsum: .asciz "tx TSO without NEEDS_CSUM: dropped, device live"
t_ntx_tso6: .asciz "tx TSO6 not negotiated: dropped, device live"
t_ntx_ecn: .asciz "tx ECN not negotiated: dropped, device live"
t_ntx_huge: .asciz "tx 128 KiB frame: dropped, device live"
t_ntx_nohdr: .asciz "tx chain shorter than a virtio-net header: dropped, device live"
t_ntx_runt: .asciz "tx frame shorter than an Ethernet header: dropped, device live"
t_ntx_empty: .asciz "tx header and no frame: dropped, device live"
t_ntx_write: .asciz "tx chain that is device-writable: dropped, device live"
t_nrx_readable: .asciz "a device-readable rx buffer -> NEEDS_RESET"
t_nafter: .asciz "after a reset an ARP request goes out and the host's reply comes in"
t_fs_noinit: .asciz "GETATTR before FUSE_INIT -> EIO"
t_fs_noinit_unknown: .asciz "an unknown opcode before FUSE_INIT -> EIO"
t_fs_init_small: .asciz "FUSE_INIT with a reply buffer too small -> EINVAL"
t_fs_init_nosess: .asciz "... and that FUSE_INIT opened no session: GETATTR -> EIO"
t_fs_len_big: .asciz "in-header len bigger than the chain -> EINVAL"
t_fs_len_small: .asciz "in-header len smaller than the in-header -> EINVAL"
t_fs_short: .asciz "a chain shorter than an in-header: returned unused"
t_fs_noread: .asciz "a chain with no readable part: returned unused"
t_fs_nowrite: .asciz "FUSE_INIT with no writable part: returned unused"
t_fs_out_small: .asciz "a writable part smaller than an out-header: returned unused"
t_fs_init_short: .asciz "FUSE_INIT with a 4-byte body -> EINVAL"
t_fs_huge: .asciz "a 100 KiB body (more than the server takes) -> E2BIG"
t_fs_init: .asciz "a valid FUSE_INIT is answered"
t_fs_unknown: .asciz "an unknown opcode -> ENOSYS"
t_fs_write_lie: .asciz "FUSE_WRITE whose size field lies -> EINVAL"
t_fs_forget: .asciz "FORGET of the root on hiprio: no reply, nothing forgotten"
t_fs_batch: .asciz "BATCH_FORGET whose count lies: no reply"
t_fs_hi_unknown: .asciz "an unknown opcode on hiprio -> ENOSYS"
t_fs_after_init: .asciz "after a reset FUSE_INIT is answered"
t_fs_after_statfs: .asciz "after a reset STATFS on the root is answered"

	.balign 8
/* net_tx_bad: transmit chains with hostile headers (5.1.6.2), one
 * descriptor each at TXBUF: flags, gso_type (bytes); hdr_len, gso_size,
 * csum_start, csum_offset, descriptor flags (words); the chain's length
 * (header + frame); the test's name. CSUM and HOST_TSO4 are negotiated,
 * TSO6 and ECN are not. The VMM's exit line counts them as malformed
 * (run.sh checks the number: 14). */
#define TX(fl, gso, hl, gs, cs, co, df, len, name) \
	.byte fl, gso; .word hl, gs, cs, co, df; .long len; .quad name
net_tx_bad:
	TX(1, 0, 0, 0, 0xfff0, 0x40, 0, NET_HDR + 60, t_ntx_csum)
	TX(1, 0, 0, 0, 58, 1, 0, NET_HDR + 60, t_ntx_csum1)
	TX(2, 0, 0, 0, 0, 0, 0, NET_HDR + 60, t_ntx_flags)
	TX(0, 0x55, 0, 0, 0, 0, 0, NET_HDR + 60, t_ntx_gso)
	TX(1, 1, 54, 0, 34, 16, 0, NET_HDR + 60, t_ntx_gso0)
	TX(1, 1, 0xffff, 1448, 34, 16, 0, NET_HDR + 60, t_ntx_hdrlen)
	TX(0, 1, 54, 1448, 0, 0, 0, NET_HDR + 60, t_ntx_nocsum)
	TX(1, 4, 54, 1448, 34, 16, 0, NET_HDR + 60, t_ntx_tso6)
	TX(1, 0x81, 54, 1448, 34, 16, 0, NET_HDR + 60, t_ntx_ecn)
	TX(0, 0, 0, 0, 0, 0, 0, NET_HDR + 0x20000, t_ntx_huge)
	TX(0, 0, 0, 0, 0, 0, 0, 6, t_ntx_nohdr)
	TX(0, 0, 0, 0, 0, 0, 0, NET_HDR + 8, t_ntx_runt)
	TX(0, 0, 0, 0, 0, 0, 0, NET_HDR, t_ntx_empty)
	TX(0, 0, 0, 0, 0, 0, F_WRITE, NET_HDR + 60, t_ntx_write)
	.quad 0, 0, 0

/* fs_bad: FUSE requests for fs_run: queue; bytes in the readable
 * descriptor (0: none); the in-header's len (a lie where it differs);
 * opcode; bytes in the writable descriptor (0: none); the used length
 * expected (0: returned unused); the out-header's error expected (when
 * there is one); the test's name. Opcodes: 2 FORGET, 3 GETATTR,
 * 16 WRITE, 17 STATFS, 26 INIT, 42 BATCH_FORGET, 9999 none. */
#define FS(q, inl, hl, op, outl, wl, we, name) \
	.long q, inl, hl, op, outl, wl, we, 0; .quad name
fs_bad:
	FS(1, 56, 56, 3, 120, 16, -5, t_fs_noinit)
	FS(1, 40, 40, 9999, 16, 16, -5, t_fs_noinit_unknown)
	FS(1, 104, 104, 26, 24, 16, -22, t_fs_init_small)
	FS(1, 56, 56, 3, 120, 16, -5, t_fs_init_nosess)
	FS(1, 56, 4096, 3, 120, 16, -22, t_fs_len_big)
	FS(1, 56, 8, 3, 120, 16, -22, t_fs_len_small)
	FS(1, 20, 20, 3, 120, 0, 0, t_fs_short)
	FS(1, 0, 0, 3, 120, 0, 0, t_fs_noread)
	FS(1, 104, 104, 26, 0, 0, 0, t_fs_nowrite)
	FS(1, 104, 104, 26, 8, 0, 0, t_fs_out_small)
	FS(1, 44, 44, 26, 80, 16, -22, t_fs_init_short)
	FS(1, 40 + 0x19000, 40 + 0x19000, 3, 120, 16, -7, t_fs_huge)
	FS(1, 104, 104, 26, 80, 80, 0, t_fs_init)
	FS(1, 40, 40, 9999, 16, 16, -38, t_fs_unknown)
	FS(1, 90, 90, 16, 120, 16, -22, t_fs_write_lie)
	FS(0, 56, 56, 2, 0, 0, 0, t_fs_forget)
	FS(0, 56, 56, 42, 0, 0, 0, t_fs_batch)
	FS(0, 40, 40, 9999, 16, 16, -38, t_fs_hi_unknown)
	.quad 0, 0, 0, 0, 0
fs_after:
	FS(1, 104, 104, 26, 80, 80, 0, t_fs_after_init)
	FS(1, 40, 40, 17, 96, 96, 0, t_fs_after_statfs)
	.quad 0, 0, 0, 0, 0
