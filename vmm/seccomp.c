/* seccomp allow-lists, assembled as classic BPF (see seccomp.h). */
#include "vmm/seccomp.h"
#include "vmm/vm.h" /* VM_INTERRUPT_SIGNAL */

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000u
#endif
#define X32_SYSCALL_BIT 0x40000000u

/* System calls every thread makes: I/O on fds it already has, locks,
 * memory for malloc and thread stacks, time, its own exit. */
static const short common_calls[] = {
	__NR_read, __NR_write, __NR_readv, __NR_writev, __NR_close, __NR_futex,
	__NR_exit, __NR_exit_group, __NR_rt_sigreturn, __NR_rt_sigprocmask,
	__NR_mmap, __NR_munmap, __NR_mprotect, __NR_madvise, __NR_mremap, __NR_brk,
	__NR_clock_gettime, __NR_clock_nanosleep, __NR_nanosleep, __NR_gettid,
	__NR_getpid, __NR_sched_yield, __NR_restart_syscall, __NR_tgkill,
	__NR_getrandom, __NR_fstat,
#if defined(__SANITIZE_ADDRESS__)
	/* ASan builds only (test_seccomp's children): the sanitizer's
	 * runtime, signal stacks for its handlers, thread setup. */
	__NR_sigaltstack, __NR_sched_getaffinity, __NR_prlimit64, __NR_openat, __NR_getdents64,
	__NR_ptrace, __NR_wait4, __NR_getppid,
#endif
};

/* vCPU: KVM_RUN and what an exit's dispatch reaches: device registers
 * (eventfd writes, a reset waiting on its loop), the UART's output, an
 * interrupt line, the error report. A driver's reset (Status 0) runs the
 * device's reset op here, its loop paused (virtio_reset): that stops
 * watching backend descriptors, epoll_ctl on the loop's epoll (net's TAP,
 * vsock's connections); without it a guest resetting a live device
 * killed the VMM (the attack guest found it). */
static const short vcpu_calls[] = {
	__NR_ioctl, __NR_epoll_ctl,
};
static const unsigned vcpu_ioctls[] = {
	KVM_RUN, KVM_GET_REGS, KVM_IRQ_LINE,
};

/* Device loops: the queues' eventfds, the backends (disk images, TAP,
 * vsock's Unix sockets) and the rate limiter's timerfd. */
static const short device_calls[] = {
	__NR_epoll_wait, __NR_epoll_pwait, __NR_epoll_ctl, __NR_pread64, __NR_pwrite64,
	__NR_preadv, __NR_pwritev, __NR_preadv2, __NR_pwritev2, __NR_fdatasync, __NR_fsync,
	__NR_fallocate, __NR_lseek, __NR_accept, __NR_accept4, __NR_connect, __NR_socket,
	__NR_sendmsg, __NR_recvmsg, __NR_sendto, __NR_recvfrom, __NR_shutdown,
	__NR_getsockopt, __NR_setsockopt, __NR_fcntl, __NR_timerfd_settime,
	__NR_timerfd_gettime, __NR_ioctl,
};
static const unsigned device_ioctls[] = {
	KVM_IRQ_LINE, FIONREAD, FIONBIO,
	TUNSETOFFLOAD, /* virtio-net: the offloads the driver took, at its first notify */
};

/* virtio-fs loops, on top of the device list: the FUSE server's calls on
 * its shared directory (O_PATH descriptors, *at() calls relative to them,
 * openat2 with RESOLVE_BENEATH, xattrs, the descriptor limit it raises
 * at setup, and its own ids: a guest chown may only give a file to them,
 * devices/fuse/fuse_priv.c). */
static const short fs_calls[] = {
	__NR_openat, __NR_open, __NR_openat2, __NR_newfstatat, __NR_statx, __NR_getdents64,
	__NR_renameat, __NR_renameat2, __NR_linkat, __NR_symlinkat, __NR_unlinkat,
	__NR_mkdirat, __NR_mknodat, __NR_readlinkat, __NR_fchmodat, __NR_fchmod,
	__NR_fchownat, __NR_fchown, __NR_utimensat, __NR_fstatfs, __NR_statfs,
	__NR_getxattr, __NR_setxattr, __NR_listxattr, __NR_removexattr, __NR_lgetxattr,
	__NR_lsetxattr, __NR_llistxattr, __NR_lremovexattr, __NR_fgetxattr, __NR_fsetxattr,
	__NR_flistxattr, __NR_fremovexattr, __NR_ftruncate, __NR_faccessat, __NR_faccessat2,
	__NR_dup, __NR_dup3, __NR_prlimit64, __NR_getrlimit, __NR_setrlimit,
	__NR_copy_file_range, __NR_geteuid, __NR_getegid,
	__NR_flock, /* a guest's flock(): fuse_lock.c (its OFD locks are fcntl) */
	__NR_fadvise64, /* a lock granted on a network file system drops the cache: fuse_lock.c */
};

/* The main thread: the console and signals, the control socket, pause
 * and snapshots (KVM state, files written and renamed in the snapshot's
 * folder, disk copies), the vCPU threads it starts, and the teardown
 * (sandbox folder, helper child). */
static const short main_calls[] = {
	__NR_poll, __NR_ppoll, __NR_epoll_wait, __NR_epoll_pwait, __NR_epoll_ctl,
	__NR_openat, __NR_open, __NR_unlink, __NR_unlinkat, __NR_mkdir, __NR_mkdirat,
	__NR_rmdir, __NR_rename, __NR_renameat, __NR_renameat2, __NR_ftruncate,
	__NR_symlink, __NR_symlinkat, /* PUT /snapshot/create: mem_file_path links to the memory */
	__NR_link, __NR_linkat, /* a clone's standby links the snapshot it came from (vm_standby.c) */
	__NR_fallocate, __NR_fsync, __NR_fdatasync, __NR_lseek, __NR_pread64,
	__NR_pwrite64, __NR_preadv, __NR_pwritev, __NR_newfstatat, __NR_statx,
	__NR_stat, __NR_lstat, __NR_access, __NR_faccessat, __NR_faccessat2,
	__NR_getdents64, __NR_readlink, __NR_readlinkat, __NR_fchmod, __NR_fchmodat,
	__NR_copy_file_range, __NR_sendfile, __NR_fstatfs, __NR_statfs, __NR_utimensat,
	__NR_ioctl, __NR_socket, __NR_accept, __NR_accept4, __NR_connect, __NR_bind,
	__NR_listen, __NR_sendmsg, __NR_recvmsg, __NR_sendto, __NR_recvfrom,
	__NR_shutdown, __NR_getsockopt, __NR_setsockopt, __NR_getsockname,
	__NR_fcntl, __NR_dup, __NR_dup2, __NR_dup3, __NR_pipe2, __NR_eventfd2,
	__NR_signalfd4, __NR_timerfd_create, __NR_timerfd_settime, __NR_wait4,
	__NR_waitid, __NR_kill, __NR_tkill, __NR_clone, __NR_clone3, __NR_set_robust_list,
	__NR_rseq, __NR_rt_sigaction, __NR_sigaltstack, __NR_rt_sigtimedwait,
	__NR_sched_getaffinity, __NR_getuid, __NR_geteuid, __NR_getgid, __NR_getegid,
	__NR_getppid, __NR_umask, __NR_uname, __NR_prlimit64, __NR_getcwd,
	__NR_memfd_create, __NR_flock, __NR_sysinfo, __NR_msync, __NR_prctl, __NR_seccomp,
	__NR_getpgrp, /* the console: is this process group the terminal's foreground? (vmm/base/tty.h) */
};
/* Published ports: accept on the host TCP port, connect to the vsock
 * Unix socket, one thread per connection. */
static const short publish_calls[] = {
	__NR_poll, __NR_ppoll, __NR_socket, __NR_connect, __NR_accept, __NR_accept4,
	__NR_sendmsg, __NR_recvmsg, __NR_sendto, __NR_recvfrom, __NR_shutdown,
	__NR_getsockopt, __NR_setsockopt, __NR_getsockname, __NR_fcntl, __NR_clone, __NR_clone3,
	__NR_set_robust_list, __NR_rseq, __NR_rt_sigaction, __NR_lseek,
};

/* The egress proxy (cli/egress/egress_proxy.c): accept on the vsock-side Unix socket,
 * one thread per connection, getaddrinfo and a TCP connect (with a
 * timeout: non-blocking connect, poll, SO_ERROR) to the upstream, TLS over
 * it, the JSON line appended to egress.log (an fd opened before). The
 * SSL_CTXs and their CA files are loaded before (egress_load). What glibc's
 * resolver and OpenSSL add:
 * - openat (read-only, see egress_rules), newfstatat, lseek, getdents64:
 *   getaddrinfo reads /etc/hosts, /etc/resolv.conf (stat'ed on every call
 *   to notice a change), /etc/nsswitch.conf (likewise), /etc/gai.conf;
 *   OpenSSL's hashed-directory lookup of the default CA paths (a rule
 *   without ca_file) stats and opens CERTDIR/HASH.N lazily, during the
 *   handshake's verification;
 * - socket(AF_UNIX) + connect: glibc asks nscd first (its socket, usually
 *   absent); AF_INET/AF_INET6 UDP (sendmmsg, recvfrom) to the name server;
 *   AF_NETLINK (bind, getsockname, sendto, recvmsg): getaddrinfo reads the
 *   host's addresses (RTM_GETADDR) to sort several answers (RFC 3484) or
 *   for AI_ADDRCONFIG;
 * - ioctl FIONREAD: the resolver sizes a UDP answer before reading it;
 * - uname: the resolver's default search domain is the host name's
 *   (gethostname) when resolv.conf names none; it reloads the file, and
 *   asks again, whenever the file changes. */
static const short egress_calls[] = {
	__NR_poll, __NR_ppoll, __NR_accept, __NR_accept4, __NR_socket, __NR_connect, __NR_bind,
	__NR_getsockname, __NR_getpeername, __NR_sendto, __NR_recvfrom, __NR_sendmsg,
	__NR_recvmsg, __NR_sendmmsg, __NR_shutdown, __NR_getsockopt, __NR_setsockopt,
	__NR_fcntl, __NR_ioctl, __NR_openat, __NR_newfstatat, __NR_lseek, __NR_getdents64,
	__NR_uname, __NR_clone, __NR_clone3, __NR_set_robust_list, __NR_rseq,
	__NR_rt_sigaction, /* glibc's first pthread_create sets its internal handlers */
};

/* The CLI's helper child (cli/run.c start_helper, cli/sandbox/api_client.c): Unix
 * socket connects to the vsock socket (readiness, the sync op, the
 * command), poll over the socket, a signalfd and stdin, the terminal for
 * -t (raw mode, window size), the signals it forwards (signalfd, sigaction
 * to default them), SIGTERM to the VMM (its parent) when the command is
 * over or the guest never got ready, the `synced` marker file. */
static const short helper_calls[] = {
	__NR_poll, __NR_ppoll, __NR_socket, __NR_connect, __NR_sendto, __NR_recvfrom,
	__NR_sendmsg, __NR_recvmsg, __NR_shutdown, __NR_getsockopt, __NR_setsockopt, __NR_fcntl,
	__NR_ioctl, __NR_rt_sigaction, __NR_signalfd4, __NR_kill, __NR_getppid, __NR_openat,
	__NR_newfstatat,
	__NR_lseek, /* dprintf (the CONNECT line) asks its stream's position */
	__NR_getpgrp, /* stdin read only from the terminal's foreground (vmm/base/tty.h) */
};

/* What glibc's allocator does on its own, inside malloc, free or realloc,
 * on whichever thread gets there first (glibc 2.36, malloc/arena.c):
 * - the first shrink of a thread arena's heap (heap_trim -> shrink_heap ->
 *   check_may_shrink_heap) opens /proc/sys/vm/overcommit_memory, once
 *   per process;
 * - creating an arena once more than eight exist (arena_get2, past
 *   M_ARENA_TEST) asks sched_getaffinity how many CPUs there are, once
 *   per process, to size the arena limit.
 * A guest decides which thread frees a big block (a vsock connection's
 * buffers, a reset freeing hundreds of them on the vCPU thread), so a
 * trap here let a guest stop the VMM (159). sc_process_init pins every
 * thread to the main arena, which never takes either path; a class that
 * does not list these calls also answers them with an errno instead of a
 * trap, in case some other glibc path probes the same way: glibc takes
 * the failure (no overcommit check: heaps shrink with madvise; no CPU
 * count: it assumes two), and an errno runs nothing in the kernel. */
struct sc_quiet {
	short nr;
	short err;
};
static const struct sc_quiet quiet_calls[] = {
	{ __NR_openat, EACCES },
	{ __NR_sched_getaffinity, EPERM },
};

/* Calls allowed only with given argument values (the low 32 bits of
 * argument `arg`, masked): ioctl requests, socket families, prctl ops. */
struct sc_argrule {
	short nr;
	unsigned char arg;
	uint32_t mask;
	const unsigned *vals;
	size_t n;
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define EXACT 0xffffffffu
#define IOC_TYPE(t) ((unsigned)(t) << _IOC_TYPESHIFT)

static const unsigned unix_only[] = { AF_UNIX };
/* glibc's fstat(fd) is newfstatat(fd, "", st, AT_EMPTY_PATH): allowed in
 * that form only (a path would let a thread probe the filesystem). */
static const unsigned empty_path[] = { AT_EMPTY_PATH };
static const unsigned main_families[] = { AF_UNIX, AF_INET, AF_NETLINK };
/* The main thread starts the vCPU threads, which inherit its filter and
 * then install their own. */
static const unsigned main_prctls[] = { PR_SET_NO_NEW_PRIVS, PR_SET_NAME, PR_GET_NAME };
/* Main: whole ioctl families, by _IOC_TYPE: KVM, terminals and TUN ('T'),
 * socket ioctls (0x89), FICLONE (0x94). */
static const unsigned main_ioctl_types[] = { IOC_TYPE(KVMIO), IOC_TYPE('T'), IOC_TYPE(0x89),
					     IOC_TYPE(0x94) };
static const unsigned seccomp_ops[] = { SECCOMP_SET_MODE_FILTER };
/* Egress: upstreams (TCP), the name server (UDP), nscd (Unix), the
 * host's addresses (netlink). Never AF_PACKET and the like. */
static const unsigned egress_families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
static const unsigned egress_ioctls[] = { FIONREAD, FIONBIO };
/* openat's flags, masked: read-only, nothing created or truncated. */
#define OPEN_MODE_MASK ((unsigned)(O_ACCMODE | O_CREAT | O_TRUNC))
static const unsigned read_only[] = { O_RDONLY };
/* The helper: the terminal (isatty, tcgetattr, tcsetattr for -t's raw
 * mode and back) and the window size it sends the guest. */
static const unsigned helper_ioctls[] = { TCGETS, TCSETS, TCSETSW, TCSETSF, TIOCGWINSZ, TIOCGPGRP };
/* Its only signals to another process, the VMM: SIGTERM (the command is
 * over, or the guest never got ready), VM_INTERRUPT_SIGNAL (Ctrl-C while
 * the sandbox boots, or a second one while the command runs: cli/run.c). */
static const unsigned helper_signals[] = { SIGTERM, VM_INTERRUPT_SIGNAL };
/* Its only file: the `synced` marker, created write-only. */
static const unsigned marker_open[] = { O_WRONLY | O_CREAT | O_CLOEXEC };

static const struct sc_argrule vcpu_rules[] = {
	{ __NR_ioctl, 1, EXACT, vcpu_ioctls, N(vcpu_ioctls) },
	{ __NR_newfstatat, 3, EXACT, empty_path, N(empty_path) },
};
static const struct sc_argrule device_rules[] = {
	{ __NR_ioctl, 1, EXACT, device_ioctls, N(device_ioctls) },
	{ __NR_socket, 0, EXACT, unix_only, N(unix_only) },
	{ __NR_newfstatat, 3, EXACT, empty_path, N(empty_path) },
};
static const struct sc_argrule main_rules[] = {
	{ __NR_ioctl, 1, _IOC_TYPEMASK << _IOC_TYPESHIFT, main_ioctl_types, N(main_ioctl_types) },
	{ __NR_socket, 0, EXACT, main_families, N(main_families) },
	{ __NR_prctl, 0, EXACT, main_prctls, N(main_prctls) },
	{ __NR_seccomp, 0, EXACT, seccomp_ops, N(seccomp_ops) },
};
static const struct sc_argrule fs_rules[] = {
	{ __NR_ioctl, 1, EXACT, device_ioctls, N(device_ioctls) },
	{ __NR_socket, 0, EXACT, unix_only, N(unix_only) },
};
static const struct sc_argrule publish_rules[] = {
	{ __NR_socket, 0, EXACT, unix_only, N(unix_only) },
	{ __NR_newfstatat, 3, EXACT, empty_path, N(empty_path) },
};

static const struct sc_argrule egress_rules[] = {
	{ __NR_socket, 0, EXACT, egress_families, N(egress_families) },
	{ __NR_ioctl, 1, EXACT, egress_ioctls, N(egress_ioctls) },
	{ __NR_openat, 2, OPEN_MODE_MASK, read_only, N(read_only) },
};
static const struct sc_argrule helper_rules[] = {
	{ __NR_socket, 0, EXACT, unix_only, N(unix_only) },
	{ __NR_ioctl, 1, EXACT, helper_ioctls, N(helper_ioctls) },
	{ __NR_kill, 1, EXACT, helper_signals, N(helper_signals) },
	{ __NR_openat, 2, EXACT, marker_open, N(marker_open) },
	{ __NR_newfstatat, 3, EXACT, empty_path, N(empty_path) },
};

struct sc_list {
	const char *name;
	const short *calls;
	size_t nr_calls;
	const struct sc_argrule *rules;
	size_t nr_rules;
	int threads; /* may start threads: clone with CLONE_THREAD */
	const short *more; /* a second list of calls (SC_FS: the file calls) */
	size_t nr_more;
};

static const struct sc_list lists[SC_NR_CLASSES] = {
	[SC_VCPU] = { "vcpu", vcpu_calls, N(vcpu_calls), vcpu_rules, N(vcpu_rules), 0 },
	[SC_DEVICE] = { "device", device_calls, N(device_calls), device_rules, N(device_rules), 0 },
	[SC_MAIN] = { "main", main_calls, N(main_calls), main_rules, N(main_rules), 1 },
	[SC_PUBLISH] = { "publish", publish_calls, N(publish_calls), publish_rules,
			 N(publish_rules), 1 },
	[SC_FS] = { "virtio-fs", device_calls, N(device_calls), fs_rules, N(fs_rules), 0,
		    fs_calls, N(fs_calls) },
	[SC_EGRESS] = { "egress", egress_calls, N(egress_calls), egress_rules, N(egress_rules), 1 },
	[SC_HELPER] = { "helper", helper_calls, N(helper_calls), helper_rules, N(helper_rules), 0 },
};

const char *sc_class_name(enum sc_class c)
{
	return (unsigned)c < SC_NR_CLASSES ? lists[c].name : "unknown";
}

/* ---- assembling ---------------------------------------------------- */

struct asm_buf {
	struct sock_filter *p;
	size_t n, max;
};

static void emit(struct asm_buf *b, uint16_t code, uint32_t k, uint8_t jt, uint8_t jf)
{
	if (b->n < b->max)
		b->p[b->n] = (struct sock_filter){ code, jt, jf, k };
	b->n++;
}

#define ARG_LO(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8 * (i)))

/* "if nr == call: allow". */
static void allow_call(struct asm_buf *b, int nr)
{
	emit(b, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1);
	emit(b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
}

/* "if nr == call: allow when the low 32 bits of argument `arg`, masked,
 * equal one of vals[]; else trap". The block reloads nothing after it: it
 * always returns, and the accumulator still holds nr when it is skipped. */
static int allow_call_if(struct asm_buf *b, int nr, unsigned arg, uint32_t mask,
			 const unsigned *vals, size_t n, uint32_t trap)
{
	size_t len = 1 + (mask != 0xffffffffu) + 2 * n + 1, i;

	if (len > 255)
		return -E2BIG;
	emit(b, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)len);
	emit(b, BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg), 0, 0);
	if (mask != 0xffffffffu)
		emit(b, BPF_ALU | BPF_AND | BPF_K, mask, 0, 0);
	for (i = 0; i < n; i++) {
		emit(b, BPF_JMP | BPF_JEQ | BPF_K, vals[i], 0, 1);
		emit(b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
	}
	emit(b, BPF_RET | BPF_K, trap, 0, 0);
	return 0;
}

static int in(const short *calls, size_t n, int nr)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (calls[i] == nr)
			return 1;
	return 0;
}

/* Whether class l's program decides call nr before its last line: allowed
 * outright, or by argument (then a mismatch traps). */
static int listed(const struct sc_list *l, int nr)
{
	size_t i;

	for (i = 0; i < l->nr_rules; i++)
		if (l->rules[i].nr == nr)
			return 1;
	return in(common_calls, N(common_calls), nr) || in(l->calls, l->nr_calls, nr) ||
	       in(l->more, l->nr_more, nr);
}

/* One class's program:
 *   not x86-64               -> kill the process (no other ABI's numbers)
 *   an x32 call              -> trap
 *   clone3                   -> ENOSYS (glibc falls back to clone, whose
 *                               flags a filter can read)
 *   clone                    -> allowed for threads (CLONE_THREAD) only
 *   ioctl, socket            -> by request / family
 *   the class's calls        -> allow
 *   glibc's lazy probes      -> an errno (quiet_calls, unless listed)
 *   anything else            -> trap, the class in SECCOMP_RET_DATA */
static int build_one(const struct sc_list *l, uint32_t trap, struct asm_buf *b)
{
	size_t i, j;
	int r;

	emit(b, BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, arch), 0, 0);
	emit(b, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	emit(b, BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS, 0, 0);
	emit(b, BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, nr), 0, 0);
	emit(b, BPF_JMP | BPF_JSET | BPF_K, X32_SYSCALL_BIT, 0, 1);
	emit(b, BPF_RET | BPF_K, trap, 0, 0);

	if (l->threads) {
		emit(b, BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1);
		emit(b, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS, 0, 0);
		emit(b, BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4);
		emit(b, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0), 0, 0);
		emit(b, BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1);
		emit(b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
		emit(b, BPF_RET | BPF_K, trap, 0, 0);
	}
	for (i = 0; i < l->nr_rules; i++) {
		const struct sc_argrule *a = &l->rules[i];

		if ((r = allow_call_if(b, a->nr, a->arg, a->mask, a->vals, a->n, trap)))
			return r;
	}
	for (i = 0; i < N(common_calls); i++)
		allow_call(b, common_calls[i]);
	for (i = 0; i < l->nr_calls; i++) {
		int nr = l->calls[i], ruled = nr == __NR_clone || nr == __NR_clone3;

		for (j = 0; j < l->nr_rules; j++)
			ruled |= l->rules[j].nr == nr;
		if (!ruled) /* handled above, by argument */
			allow_call(b, nr);
	}
	for (i = 0; i < l->nr_more; i++)
		allow_call(b, l->more[i]);
	for (i = 0; i < N(quiet_calls); i++) {
		if (listed(l, quiet_calls[i].nr))
			continue;
		emit(b, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)quiet_calls[i].nr, 0, 1);
		emit(b, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (uint32_t)quiet_calls[i].err, 0, 0);
	}
	emit(b, BPF_RET | BPF_K, trap, 0, 0);
	return 0;
}

int sc_build(enum sc_class c, struct sock_filter *prog, size_t max)
{
	struct asm_buf b = { prog, 0, max };
	int r;

	if ((unsigned)c >= SC_NR_CLASSES)
		return -EINVAL;
	r = build_one(&lists[c], SECCOMP_RET_TRAP | (uint32_t)c, &b);
	if (r)
		return r;
	if (b.n > max || b.n > BPF_MAXINSNS)
		return -E2BIG;
	return (int)b.n;
}

/* ---- the violation report --------------------------------------------- */

/* The names of x86-64 system calls, generated at build time from the
 * C library's <sys/syscall.h> (build/gen/syscall_names.h): read-only. */
struct sc_name {
	short nr;
	const char *name;
};
static const struct sc_name sc_names[] = {
#include "syscall_names.h"
};

const char *sc_syscall_name(long nr)
{
	size_t i;

	for (i = 0; i < N(sc_names); i++)
		if (sc_names[i].nr == nr)
			return sc_names[i].name;
	return NULL;
}

static size_t put_str(char *buf, size_t at, size_t max, const char *s)
{
	while (*s && at + 1 < max)
		buf[at++] = *s++;
	return at;
}

static size_t put_num(char *buf, size_t at, size_t max, unsigned long v)
{
	char tmp[24];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && at + 1 < max)
		buf[at++] = tmp[--n];
	return at;
}

/* Async-signal-safe: builds the line by hand, one write(2), then ends the
 * process. Reads only the const tables above. */
static void sigsys_handler(int sig, siginfo_t *si, void *uc)
{
	char line[200];
	size_t n = 0;
	unsigned cls = (unsigned)si->si_errno; /* SECCOMP_RET_DATA */
	const char *name = sc_syscall_name(si->si_syscall);

	(void)sig;
	(void)uc;
	n = put_str(line, n, sizeof(line), "vmm: error: seccomp: ");
	n = put_str(line, n, sizeof(line), cls < SC_NR_CLASSES ? lists[cls].name : "unknown");
	n = put_str(line, n, sizeof(line), " thread ");
	n = put_num(line, n, sizeof(line), (unsigned long)syscall(__NR_gettid));
	n = put_str(line, n, sizeof(line), " made forbidden system call ");
	n = put_num(line, n, sizeof(line), (unsigned long)si->si_syscall);
	n = put_str(line, n, sizeof(line), " (");
	n = put_str(line, n, sizeof(line), name ? name : "?");
	n = put_str(line, n, sizeof(line), "); stopping the VMM\n");
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nothing left to tell */
	}
	/* The helper is a child process: its parent, the VMM, stops too (it
	 * reports the helper's 159). Not if the VMM is gone already and the
	 * child was handed to init. */
	if (cls == SC_HELPER) {
		long parent = syscall(__NR_getppid);

		if (parent > 1)
			syscall(__NR_kill, parent, SIGTERM);
	}
	_exit(128 + SIGSYS);
}

int sc_process_init(void)
{
#if defined(M_ARENA_MAX) && !defined(__SANITIZE_ADDRESS__)
	/* One arena: every thread allocates from the main arena (brk, and
	 * mmap for big blocks), whose trim is brk and munmap. glibc reads
	 * M_ARENA_MAX whenever a thread without an arena allocates, so this
	 * must come before any thread does. mallopt returns 1 on success. */
	if (mallopt(M_ARENA_MAX, 1) != 1)
		return -EINVAL;
#endif
	return 0;
}

int sc_install(enum sc_class c)
{
	struct sock_filter prog[SC_MAX_INSNS];
	struct sock_fprog fp;
	struct sigaction sa;
	sigset_t sys;
	int n = sc_build(c, prog, SC_MAX_INSNS);

	if (n < 0)
		return n;
	fp.len = (unsigned short)n;
	fp.filter = prog;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* The same handler for every thread and VM: installing it again is
	 * harmless. A blocked SIGSYS would make the kernel kill the process
	 * silently instead of running the handler. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sigsys_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0)
		return -errno;
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) < 0)
		return -errno;
	return 0;
}

void sc_test_violate(enum sc_class c)
{
#ifdef VMM_TEST_HOOKS
	const char *want = getenv("VMM_TEST_SECCOMP_VIOLATE");

	/* personality(2) is on no list. */
	if (want && !strcmp(want, sc_class_name(c)))
		syscall(__NR_personality, 0xffffffffu);
#else
	(void)c;
#endif
}
