/* The churn guest: a driver that makes the VMM allocate and free memory
 * in bulk on its device and vCPU threads, under their seccomp filters
 * (`vmm run --kernel churn.elf --vsock cid=3,uds=U --fs tag=T,path=DIR`,
 * a host listener on U_5000 that never reads). glibc's allocator used to
 * open /proc/sys/vm/overcommit_memory on the first shrink of a thread
 * arena's heap, which the device and vCPU lists trap: the VMM died with
 * 159 (docs/security.md). Three rounds:
 * - vsock: connections to host port 5000, each sending 240 KiB (more than
 *   the host socket takes: the device buffers the rest) and then RST,
 *   six at a time, three times (the first round's buffers are mmapped,
 *   later ones come from the heap, whose top then trims);
 * - vsock: 800 open connections, then a device reset (the vCPU thread
 *   frees them all);
 * - virtio-fs: FUSE_INIT, 1000 MKNODs of 200-byte names, then a device
 *   reset (the vCPU thread frees the inodes and their names).
 * Prints "ok   churn: ..." / "FAIL churn: ..." lines, then "churn: all
 * passed" or "churn: N failed", and powers off (status 0). A VMM that
 * dies prints nothing more. */
#include "guest.h"

#define VIRTIO_BASE 0xd0000000  /* slot n at + n * 0x1000 */
#define VIRTIO_SLOTS 16
#define ID_VSOCK 19
#define ID_FS 26

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

#define S_ACK 1
#define S_DRIVER 2
#define S_DRIVER_OK 4
#define S_FEATURES_OK 8
#define S_LIVE (S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK)
#define S_NEEDS_RESET 0x40

#define F_NEXT 1
#define F_WRITE 2

#define QSIZE 8
#define RING_VRX 0x400000   /* desc table; avail +0x1000, used +0x2000 */
#define RING_VTX 0x404000
#define RING_VEV 0x408000
#define RING_FSHI 0x40c000
#define RING_FSREQ 0x410000
#define PKT 0x500000        /* vsock header (44 bytes) + payload, up to 64 KiB */
#define FSREQ 0x520000      /* FUSE request */
#define FSOUT 0x530000      /* FUSE reply */

#define GUEST_CID 3
#define HOST_CID 2
#define HOST_PORT 5000
#define OP_REQUEST 1
#define OP_RST 3
#define OP_RW 5
#define RW_LEN 0xf000       /* 60 KiB: four make 240 KiB, within our 256 KiB credit */
#define ROUNDS 3
#define CONNS 6
#define MANY 800
#define NODES 1000

#define FUSE_MKNOD 8
#define MKNOD_LEN (40 + 16 + 201) /* in-header, fuse_mknod_in, the name and its NUL */
#define FUSE_INIT 26

	.code64
	.section .text.entry, "ax"
	.globl _start
_start:
	xor %r15d, %r15d            /* failures */
	lea banner(%rip), %rsi
	call puts

	/* ---- vsock: big sends, then RST ----------------------------------- */
	mov $ID_VSOCK, %edi
	call find_dev
	test %eax, %eax
	jz no_vsock
	call vs_live
	mov $1, %r14d               /* all served */
	xor %r13d, %r13d            /* round */
1:	xor %ebp, %ebp              /* connection */
2:	lea 0x1000(%rbp), %edi
	mov %r13d, %eax
	shl $4, %eax
	add %eax, %edi              /* guest port 0x1000 + round * 16 + k */
	push %rdi
	mov $OP_REQUEST, %esi
	xor %edx, %edx
	call vs_pkt
	and %eax, %r14d
	mov $4, %ecx
3:	mov (%rsp), %edi
	push %rcx
	mov $OP_RW, %esi
	mov $RW_LEN, %edx
	call vs_pkt
	and %eax, %r14d
	pop %rcx
	dec %ecx
	jnz 3b
	pop %rdi
	inc %ebp
	cmp $CONNS, %ebp
	jb 2b
	xor %ebp, %ebp
4:	lea 0x1000(%rbp), %edi
	mov %r13d, %eax
	shl $4, %eax
	add %eax, %edi
	mov $OP_RST, %esi
	xor %edx, %edx
	call vs_pkt
	and %eax, %r14d
	inc %ebp
	cmp $CONNS, %ebp
	jb 4b
	inc %r13d
	cmp $ROUNDS, %r13d
	jb 1b
	mov %r14d, %eax
	lea t_big(%rip), %rsi
	call result

	/* ---- vsock: hundreds open, then a reset --------------------------- */
	mov $1, %r14d
	xor %ebp, %ebp
5:	lea 0x4000(%rbp), %edi
	mov $OP_REQUEST, %esi
	xor %edx, %edx
	call vs_pkt
	and %eax, %r14d
	inc %ebp
	cmp $MANY, %ebp
	jb 5b
	movl $0, R_STATUS(%rbx)     /* the reset: the vCPU thread frees them */
	call vs_live                /* and the device works again */
	mov $0x9000, %edi
	mov $OP_REQUEST, %esi
	xor %edx, %edx
	call vs_pkt
	and %eax, %r14d
	mov $0x9000, %edi
	mov $OP_RST, %esi
	xor %edx, %edx
	call vs_pkt
	and %eax, %r14d
	movl $0, R_STATUS(%rbx)
	mov %r14d, %eax
	lea t_many(%rip), %rsi
	call result
	jmp fs
no_vsock:
	lea t_novsock(%rip), %rsi
	xor %eax, %eax
	call result

	/* ---- virtio-fs: many nodes, then a reset -------------------------- */
fs:
	mov $ID_FS, %edi
	call find_dev
	test %eax, %eax
	jz no_fs
	call fs_live
	/* FUSE_INIT 7.31 (major, minor, readahead, flags; the rest 0). */
	mov $FSREQ, %rdi
	mov $104, %ecx
	xor %eax, %eax
	rep stosb
	movl $104, FSREQ
	movl $FUSE_INIT, FSREQ + 4
	movl $7, FSREQ + 40
	movl $31, FSREQ + 44
	movl $0x20000, FSREQ + 48
	mov $104, %edi
	mov $80, %esi
	call fs_req
	mov %eax, %r14d
	xor %ebp, %ebp
6:	/* MKNOD in the root: fuse_mknod_in (mode S_IFREG|0600, rdev, umask,
	 * padding), then a 200-byte name, 196 'n's and ebp as four letters
	 * (long: the VMM's copies of short names stay in glibc's fast bins,
	 * long ones merge as they are freed). */
	mov $FSREQ, %rdi
	mov $MKNOD_LEN, %ecx
	xor %eax, %eax
	rep stosb
	mov $FSREQ + 56, %rdi
	mov $196, %ecx
	mov $'n', %al
	rep stosb
	movl $MKNOD_LEN, FSREQ
	movl $FUSE_MKNOD, FSREQ + 4
	movq $1, FSREQ + 16         /* nodeid: the root */
	movl $0100600, FSREQ + 40
	mov %ebp, %eax
	mov $4, %ecx
	mov $FSREQ + 56 + 199, %rdi
7:	mov %eax, %edx
	and $0xf, %edx
	add $'a', %edx              /* letters a..p: a valid name either way */
	movb %dl, (%rdi)
	shr $4, %eax
	dec %rdi
	dec %ecx
	jnz 7b
	mov $MKNOD_LEN, %edi
	mov $(16 + 128), %esi       /* fuse_out_header + fuse_entry_out */
	call fs_req
	and %eax, %r14d
	inc %ebp
	cmp $NODES, %ebp
	jb 6b
	movl $0, R_STATUS(%rbx)     /* the reset: the vCPU thread frees the inodes */
	call fs_live                /* and a new session opens */
	mov $FSREQ, %rdi
	mov $104, %ecx
	xor %eax, %eax
	rep stosb
	movl $104, FSREQ
	movl $FUSE_INIT, FSREQ + 4
	movl $7, FSREQ + 40
	movl $31, FSREQ + 44
	mov $104, %edi
	mov $80, %esi
	call fs_req
	and %eax, %r14d
	movl $0, R_STATUS(%rbx)
	mov %r14d, %eax
	lea t_fs(%rip), %rsi
	call result
	jmp done
no_fs:
	lea t_nofs(%rip), %rsi
	xor %eax, %eax
	call result

done:
	test %r15d, %r15d
	jnz 8f
	lea all_passed(%rip), %rsi
	call puts
	jmp poweroff
8:	lea failed(%rip), %rsi
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

/* find_dev: the virtio-mmio slot whose DeviceID is %edi into %rbx; %eax 1
 * if there is one (4.2.2: magic "virt", then the ID). */
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

/* dev_start: reset, ACK, DRIVER, VERSION_1 only, FEATURES_OK (3.1.1). */
dev_start:
	movl $0, R_STATUS(%rbx)
	movl $S_ACK, R_STATUS(%rbx)
	movl $(S_ACK | S_DRIVER), R_STATUS(%rbx)
	movl $1, R_DRV_FEAT_SEL(%rbx)
	movl $1, R_DRV_FEAT(%rbx)   /* VIRTIO_F_VERSION_1 (bit 32) */
	movl $0, R_DRV_FEAT_SEL(%rbx)
	movl $0, R_DRV_FEAT(%rbx)
	movl $(S_ACK | S_DRIVER | S_FEATURES_OK), R_STATUS(%rbx)
	ret

/* queue_setup: queue %ecx on a zeroed ring at %rdi, made ready. */
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

/* vs_live: virtio-vsock at %rbx live: rx (0, no buffers: what the device
 * has for us waits), tx (1), event (2). */
vs_live:
	call dev_start
	xor %ecx, %ecx
	mov $RING_VRX, %rdi
	call queue_setup
	mov $1, %ecx
	mov $RING_VTX, %rdi
	call queue_setup
	mov $2, %ecx
	mov $RING_VEV, %rdi
	call queue_setup
	movl $S_LIVE, R_STATUS(%rbx)
	ret

/* fs_live: virtio-fs at %rbx live, hiprio (0) and request (1) queues. */
fs_live:
	call dev_start
	xor %ecx, %ecx
	mov $RING_FSHI, %rdi
	call queue_setup
	mov $1, %ecx
	mov $RING_FSREQ, %rdi
	call queue_setup
	movl $S_LIVE, R_STATUS(%rbx)
	ret

/* vs_pkt: one packet on the tx queue, guest port %edi to HOST_PORT, op
 * %esi, %edx bytes of payload (zeros) after the header; waits until it is
 * used. %eax 1 if it was and the device is live. 5.10.6: the header. */
vs_pkt:
	movq $GUEST_CID, PKT
	movq $HOST_CID, PKT + 8
	movl %edi, PKT + 16
	movl $HOST_PORT, PKT + 20
	movl %edx, PKT + 24
	movw $1, PKT + 28           /* VIRTIO_VSOCK_TYPE_STREAM */
	movw %si, PKT + 30
	movl $0, PKT + 32
	movl $0x40000, PKT + 36     /* buf_alloc */
	movl $0, PKT + 40           /* fwd_cnt */
	mov $RING_VTX, %r12
	movq $PKT, 0(%r12)
	add $44, %edx
	movl %edx, 8(%r12)
	movl $0, 12(%r12)           /* flags, next */
	mov $1, %edi
	call post_head0
	jmp served

/* fs_req: the FUSE request at FSREQ (%edi bytes, readable) and a reply
 * buffer at FSOUT (%esi bytes, writable) on the request queue; waits.
 * %eax 1 if it was used, the device is live and the reply's error is 0. */
fs_req:
	movl $-1, FSOUT + 4
	mov $RING_FSREQ, %r12
	movq $FSREQ, 0(%r12)
	movl %edi, 8(%r12)
	movw $F_NEXT, 12(%r12)
	movw $1, 14(%r12)
	movq $FSOUT, 16(%r12)
	movl %esi, 24(%r12)
	movw $F_WRITE, 28(%r12)
	movw $0, 30(%r12)
	mov $1, %edi
	call post_head0
	call served
	test %eax, %eax
	jz 1f
	cmpl $0, FSOUT + 4          /* fuse_out_header.error */
	je 1f
	xor %eax, %eax
1:	ret

/* post_head0: descriptor 0 into the next avail entry of the ring at %r12,
 * the index moved on, queue %edi notified; %edx the new avail index. x86
 * keeps the stores in order; the notify comes after them (2.7.13.3). */
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
3:	mov $1, %eax
	ret

#include "lib.inc"

	.section .rodata
banner:	.asciz "churn: bulk allocations on the device and vCPU threads\n"
ok_pfx:	.asciz "ok   churn: "
fail_pfx: .asciz "FAIL churn: "
all_passed: .asciz "churn: all passed\n"
failed:	.asciz "churn: failed count 0x"
t_big:	.asciz "vsock: 3 rounds of 6 connections sending 240 KiB each, then RST"
t_many:	.asciz "vsock: 800 open connections, then a device reset; it works after"
t_novsock: .asciz "vsock: no virtio-vsock device (the VM needs --vsock)"
t_fs:	.asciz "fs: 1000 MKNODs of long names, then a device reset; FUSE_INIT after it"
t_nofs:	.asciz "fs: no virtio-fs device (the VM needs --fs)"
