/*
 * tlscheck: does a process's user register state survive system calls and
 * context switches? The guest side of bench/crash (issue 26: user processes
 * segfaulted on an emulating host with a TLS read returning 0).
 *
 *   tlscheck pipe N     two processes ping-pong one byte over two pipes,
 *                       N round trips: every read/write is a context switch
 *   tlscheck yield N    two processes pinned to CPU 0, sched_yield() N times
 *   tlscheck signal N   as pipe, and a 1 ms interval timer (SIGALRM, with
 *                       SA_RESTART) interrupts both
 *   tlscheck getpid N   one process, N getpid() calls: no context switch
 *   tlscheck spin N     one process, no system call: reads %fs:0 N million
 *                       times (timer interrupts and host exits only)
 *   tlscheck wMODE N    MODE (pipe, yield, signal, getpid) with the FS base
 *                       set by the process itself with WRFSBASE (where the
 *                       kernel allows it: HWCAP2_FSGSBASE), not arch_prctl:
 *                       the kernel must keep a base it did not write
 *   tlscheck segv       dereferences NULL: bench/crash's check that it sees
 *                       a crash (a "segfault at 0" console line)
 *   tlscheck fMODE N    MODE (pipe, yield, signal, getpid) with every checked
 *                       system call made the way a ring-0-emulating host
 *                       delivers SYSCALL: RCX = return address, R11 = RFLAGS,
 *                       then a user-mode jump to entry_SYSCALL_64 (from
 *                       /proc/kallsyms), whose fetch faults; the emulating
 *                       kernel's fault.patch turns that #PF into the system
 *                       call. On any host (QEMU TCG too) this runs
 *                       fault.patch's path, which otherwise only that host
 *                       reaches.
 *
 * Each process points its FS base at a buffer of its own (arch_prctl
 * ARCH_SET_FS; the two buffers are at different addresses and both hold
 * both magics, so a stale base reads the other process's magic) and after
 * every system call checks that %fs:0 reads its own magic, that
 * ARCH_GET_FS still says its base, and that the registers a system call
 * preserves (rbx rbp rdi rsi rdx r8-r10 r12-r15, xmm0) kept the patterns
 * loaded before it. While FS points at our buffer libc (which keeps its
 * thread pointer in FS) is not called: only raw system calls; the original
 * FS base is put back before printing.
 *
 * One line per process: "tlscheck: MODE ROLE calls=C fs_bad=F
 * getfs_bad=G gpr_bad=R sigs=S first: ...", then "tlscheck: ok" or
 * "tlscheck: BAD". Exit status 0 when both processes saw no error.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARCH_SET_FS 0x1002
#define ARCH_GET_FS 0x1003

#define MAGIC_PARENT 0x7061726e74000001ull
#define MAGIC_CHILD 0x6368696c64000002ull

/* Both FS areas exist in both processes (fork copies them). */
static uint64_t area[2][512] __attribute__((aligned(4096)));

struct stats {
	unsigned long calls, fs_bad, getfs_bad, gpr_bad;
	unsigned long first_call;	/* call number of the first error */
	uint64_t first_fs;		/* %fs:0 seen then */
	uint64_t first_getfs;		/* ARCH_GET_FS seen then */
	int first_reg;			/* index into out[] of a bad register, or -1 */
	uint64_t first_reg_val;
};

static volatile unsigned long sigs;
static volatile unsigned long sig_fs_bad;
static volatile sig_atomic_t checking;	/* our FS base is loaded */
static uint64_t my_magic;

enum { R_RBX, R_RBP, R_R8, R_R9, R_R10, R_R12, R_R13, R_R14, R_R15, R_RDI, R_RSI, R_RDX, R_XMM0, R_N };
static const char *const reg_name[R_N] = {
	"rbx", "rbp", "r8", "r9", "r10", "r12", "r13", "r14", "r15", "rdi", "rsi", "rdx", "xmm0",
};
static const uint64_t pattern[R_N] = {
	0x1b1b1b1b1b1b1b1bull, 0x1e1e1e1e1e1e1e1eull, 0x0808080808080808ull,
	0x0909090909090909ull, 0x0a0a0a0a0a0a0a0aull, 0x0c0c0c0c0c0c0c0cull,
	0x0d0d0d0d0d0d0d0dull, 0x0e0e0e0e0e0e0e0eull, 0x0f0f0f0f0f0f0f0full,
	0, 0, 0, 0x5858585858585858ull,
};

/*
 * long chk_syscall(long nr, long a1, long a2, long a3, uint64_t out[R_N]):
 * a system call with the preserved registers loaded with pattern[] (args
 * in rdi/rsi/rdx), their values after it stored in out[].
 */
__asm__(".text\n"
	".globl chk_syscall\n"
	"chk_syscall:\n"
	"	push %rbp\n	push %rbx\n	push %r12\n	push %r13\n	push %r14\n	push %r15\n"
	"	push %r8\n"
	"	mov %rdi, %rax\n	mov %rsi, %rdi\n	mov %rdx, %rsi\n	mov %rcx, %rdx\n"
	"	movabs $0x1b1b1b1b1b1b1b1b, %rbx\n"
	"	movabs $0x1e1e1e1e1e1e1e1e, %rbp\n"
	"	movabs $0x0808080808080808, %r8\n"
	"	movabs $0x0909090909090909, %r9\n"
	"	movabs $0x0a0a0a0a0a0a0a0a, %r10\n"
	"	movabs $0x0c0c0c0c0c0c0c0c, %r12\n"
	"	movabs $0x0d0d0d0d0d0d0d0d, %r13\n"
	"	movabs $0x0e0e0e0e0e0e0e0e, %r14\n"
	"	movabs $0x0f0f0f0f0f0f0f0f, %r15\n"
	"	movabs $0x5858585858585858, %r11\n"
	"	movq %r11, %xmm0\n"
	"	syscall\n"
	"	mov (%rsp), %r11\n"
	"	mov %rbx, 0(%r11)\n	mov %rbp, 8(%r11)\n	mov %r8, 16(%r11)\n"
	"	mov %r9, 24(%r11)\n	mov %r10, 32(%r11)\n	mov %r12, 40(%r11)\n"
	"	mov %r13, 48(%r11)\n	mov %r14, 56(%r11)\n	mov %r15, 64(%r11)\n"
	"	mov %rdi, 72(%r11)\n	mov %rsi, 80(%r11)\n	mov %rdx, 88(%r11)\n"
	"	movq %xmm0, 96(%r11)\n"
	"	pop %r8\n"
	"	pop %r15\n	pop %r14\n	pop %r13\n	pop %r12\n	pop %rbx\n	pop %rbp\n"
	"	ret\n");
long chk_syscall(long nr, long a1, long a2, long a3, uint64_t out[R_N]);

/* chk_fsyscall: the same, entering through a fetch fault at entry_SYSCALL_64.
 * The two bytes before the return address are a real syscall instruction,
 * so a restarted system call (ip -= 2) is well-formed. */
uint64_t entry_syscall_64;
__asm__(".text\n"
	".globl chk_fsyscall\n"
	"chk_fsyscall:\n"
	"	push %rbp\n	push %rbx\n	push %r12\n	push %r13\n	push %r14\n	push %r15\n"
	"	push %r8\n"
	"	mov %rdi, %rax\n	mov %rsi, %rdi\n	mov %rdx, %rsi\n	mov %rcx, %rdx\n"
	"	movabs $0x1b1b1b1b1b1b1b1b, %rbx\n"
	"	movabs $0x1e1e1e1e1e1e1e1e, %rbp\n"
	"	movabs $0x0808080808080808, %r8\n"
	"	movabs $0x0909090909090909, %r9\n"
	"	movabs $0x0a0a0a0a0a0a0a0a, %r10\n"
	"	movabs $0x0c0c0c0c0c0c0c0c, %r12\n"
	"	movabs $0x0d0d0d0d0d0d0d0d, %r13\n"
	"	movabs $0x0e0e0e0e0e0e0e0e, %r14\n"
	"	movabs $0x0f0f0f0f0f0f0f0f, %r15\n"
	"	movabs $0x5858585858585858, %r11\n"
	"	movq %r11, %xmm0\n"
	"	lea 1f(%rip), %rcx\n"
	"	pushfq\n	pop %r11\n"
	"	jmp *entry_syscall_64(%rip)\n"
	"	syscall\n"
	"1:	mov (%rsp), %r11\n"
	"	mov %rbx, 0(%r11)\n	mov %rbp, 8(%r11)\n	mov %r8, 16(%r11)\n"
	"	mov %r9, 24(%r11)\n	mov %r10, 32(%r11)\n	mov %r12, 40(%r11)\n"
	"	mov %r13, 48(%r11)\n	mov %r14, 56(%r11)\n	mov %r15, 64(%r11)\n"
	"	mov %rdi, 72(%r11)\n	mov %rsi, 80(%r11)\n	mov %rdx, 88(%r11)\n"
	"	movq %xmm0, 96(%r11)\n"
	"	pop %r8\n"
	"	pop %r15\n	pop %r14\n	pop %r13\n	pop %r12\n	pop %rbx\n	pop %rbp\n"
	"	ret\n");
long chk_fsyscall(long nr, long a1, long a2, long a3, uint64_t out[R_N]);
static int use_fault, use_wrfs;

static int find_entry(void)
{
	char line[256];
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char t, name[200];

		if (sscanf(line, "%llx %c %199s", &a, &t, name) == 3 && !strcmp(name, "entry_SYSCALL_64")) {
			entry_syscall_64 = a;
			break;
		}
	}
	fclose(f);
	return entry_syscall_64 ? 0 : -1;
}

static long raw3(long nr, long a1, long a2, long a3)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a1), "S"(a2), "d"(a3) : "rcx", "r11", "memory");
	return ret;
}

static uint64_t fs0(void)
{
	uint64_t v;

	__asm__ volatile("mov %%fs:0, %0" : "=r"(v));
	return v;
}

/* One checked system call: registers, %fs:0, ARCH_GET_FS. */
static long call(struct stats *st, uint64_t base, long nr, long a1, long a2, long a3)
{
	uint64_t out[R_N], v, g = 0;
	long ret = use_fault ? chk_fsyscall(nr, a1, a2, a3, out) : chk_syscall(nr, a1, a2, a3, out);
	int bad_reg = -1;

	st->calls++;
	for (int i = 0; i < R_N; i++) {
		uint64_t want = i == R_RDI ? (uint64_t)a1 : i == R_RSI ? (uint64_t)a2 :
				i == R_RDX ? (uint64_t)a3 : pattern[i];
		if (out[i] != want && bad_reg < 0)
			bad_reg = i;
	}
	v = fs0();
	raw3(SYS_arch_prctl, ARCH_GET_FS, (long)&g, 0);
	if (bad_reg >= 0)
		st->gpr_bad++;
	if (v != my_magic)
		st->fs_bad++;
	if (g != base)
		st->getfs_bad++;
	if ((bad_reg >= 0 || v != my_magic || g != base) && !st->first_call) {
		st->first_call = st->calls;
		st->first_fs = v;
		st->first_getfs = g;
		st->first_reg = bad_reg;
		st->first_reg_val = bad_reg >= 0 ? out[bad_reg] : 0;
	}
	return ret;
}

static void on_alarm(int sig)
{
	(void)sig;
	sigs++;
	if (checking && fs0() != my_magic)
		sig_fs_bad++;
}

static const char *magic_name(uint64_t v)
{
	return v == MAGIC_PARENT ? "(parent's magic)" : v == MAGIC_CHILD ? "(child's magic)" : "";
}

static int run(const char *mode, int child, long n, int rfd, int wfd)
{
	struct stats st = { .first_reg = -1 };
	uint64_t orig = 0, base = (uint64_t)area[child];
	char b = 'x';

	my_magic = child ? MAGIC_CHILD : MAGIC_PARENT;
	if (!strcmp(mode, "signal")) {
		struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
		struct itimerval it = { { 0, 1000 }, { 0, 1000 } };

		sigaction(SIGALRM, &sa, NULL);
		setitimer(ITIMER_REAL, &it, NULL);
	}
	raw3(SYS_arch_prctl, ARCH_GET_FS, (long)&orig, 0);
	if (use_wrfs)
		__asm__ volatile("wrfsbase %0" : : "r"(base) : "memory");
	else
		raw3(SYS_arch_prctl, ARCH_SET_FS, (long)base, 0);
	checking = 1;
	/* From here to the ARCH_SET_FS back: raw system calls only. */
	if (!strcmp(mode, "spin")) {
		for (long i = 0; i < n * 1000000; i++)
			if (fs0() != my_magic && !st.fs_bad++)
				st.first_call = i + 1, st.first_fs = fs0();
		n = 0;
	}
	for (long i = 0; i < n; i++) {
		if (!strcmp(mode, "getpid")) {
			call(&st, base, SYS_getpid, 0, 0, 0);
			continue;
		}
		if (!strcmp(mode, "yield")) {
			call(&st, base, SYS_sched_yield, 0, 0, 0);
			continue;
		}
		if (!child && call(&st, base, SYS_write, wfd, (long)&b, 1) != 1)
			break;
		long r;
		do
			r = call(&st, base, SYS_read, rfd, (long)&b, 1);
		while (r == -4); /* EINTR */
		if (r != 1)
			break;
		if (child && call(&st, base, SYS_write, wfd, (long)&b, 1) != 1)
			break;
	}
	checking = 0;
	raw3(SYS_arch_prctl, ARCH_SET_FS, (long)orig, 0);
	if (!strcmp(mode, "signal")) {
		struct itimerval off = { { 0, 0 }, { 0, 0 } };

		setitimer(ITIMER_REAL, &off, NULL);
	}
	printf("tlscheck: %s%s%s %s calls=%lu fs_bad=%lu getfs_bad=%lu gpr_bad=%lu sigs=%lu sig_fs_bad=%lu",
	       use_wrfs ? "w" : "", use_fault ? "f" : "", mode, child ? "child" : "parent", st.calls, st.fs_bad, st.getfs_bad, st.gpr_bad, sigs, sig_fs_bad);
	if (st.first_call)
		printf(" first: call %lu %%fs:0=%#llx%s getfs=%#llx (own %#llx, other %#llx) reg=%s:%#llx",
		       st.first_call, (unsigned long long)st.first_fs, magic_name(st.first_fs),
		       (unsigned long long)st.first_getfs, (unsigned long long)base,
		       (unsigned long long)(uintptr_t)area[!child],
		       st.first_reg >= 0 ? reg_name[st.first_reg] : "-", (unsigned long long)st.first_reg_val);
	printf("\n");
	fflush(stdout);
	return st.fs_bad || st.getfs_bad || st.gpr_bad || sig_fs_bad;
}

int main(int argc, char **argv)
{
	int p2c[2], c2p[2], st = 0, bad;
	const char *mode = argc > 1 ? argv[1] : "pipe";
	long n = argc > 2 ? atol(argv[2]) : 1000;
	pid_t pid;

	if (!strcmp(mode, "segv")) {
		volatile uintptr_t null = 0;

		return *(volatile int *)null;
	}
	if (mode[0] == 'w' && mode[1]) {
		mode++;
		use_wrfs = 1;
		if (!(getauxval(AT_HWCAP2) & 2)) {	/* HWCAP2_FSGSBASE */
			printf("tlscheck: w%s skipped: no FSGSBASE for user mode\ntlscheck: ok\n", mode);
			return 0;
		}
	}
	if (mode[0] == 'f' && mode[1]) {
		mode++;
		use_fault = 1;
		if (find_entry() < 0) {
			fprintf(stderr, "tlscheck: no entry_SYSCALL_64 in /proc/kallsyms\n");
			return 2;
		}
	}
	if (strcmp(mode, "pipe") && strcmp(mode, "yield") && strcmp(mode, "signal") &&
	    strcmp(mode, "getpid") && strcmp(mode, "spin")) {
		fprintf(stderr, "usage: tlscheck [w][f]pipe|[w][f]yield|[w][f]signal|[w][f]getpid|spin|segv [N]\n");
		return 2;
	}
	area[0][0] = MAGIC_PARENT;
	area[1][0] = MAGIC_CHILD;
	if (!strcmp(mode, "getpid") || !strcmp(mode, "spin")) {
		bad = run(mode, 0, n, -1, -1);
		printf("tlscheck: %s\n", bad ? "BAD" : "ok");
		return bad;
	}
	if (!strcmp(mode, "yield")) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(0, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	if (pipe(p2c) || pipe(c2p)) {
		perror("tlscheck: pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("tlscheck: fork");
		return 1;
	}
	if (pid == 0)
		_exit(run(mode, 1, n, p2c[0], c2p[1]));
	bad = run(mode, 0, n, c2p[0], p2c[1]);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		bad = 1;
	if (WIFSIGNALED(st))
		printf("tlscheck: child killed by signal %d\n", WTERMSIG(st));
	printf("tlscheck: %s\n", bad ? "BAD" : "ok");
	return bad;
}
