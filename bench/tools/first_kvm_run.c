/* bench/tools/first_kvm_run.c: the time from a VMM's execve to the first
 * ioctl(KVM_RUN) of its process tree, stamped without slowing any other
 * system call (bench/first-run; issue 42's "VMM's own start").
 *
 *   first-kvm-run [-t SECONDS] -- COMMAND [ARG...]
 *
 * The child installs a seccomp filter that returns SECCOMP_RET_USER_NOTIF
 * for ioctl(fd, KVM_RUN) and SECCOMP_RET_ALLOW for every other call, hands
 * the filter's listener to this process, reads CLOCK_MONOTONIC and calls
 * execve. The filter is inherited by threads and forks (a CLI that forks its
 * VMM, a VMM's vCPU threads), and a VMM's own filters stack on it: the most
 * restrictive action wins, so the USER_NOTIF outranks their ALLOW
 * (seccomp(2), "return values" precedence). Only KVM_RUN waits for us;
 * strace instead stops every call, which penalises whichever VMM makes more.
 *
 * On the first notification the stamp is taken, every process of the tree
 * is killed (this process is their subreaper, so a daemonising VMM or a
 * helper that left the command's session is still found among its
 * descendants) and the figure is printed: "first_kvm_run_us N". Exit 0 with a figure; 1 (and a line saying
 * why) when the command ended or the time ran out before any KVM_RUN.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ioctl(_, KVM_RUN, _) -> USER_NOTIF; anything else -> ALLOW. The request
 * is compared on its low 32 bits (the kernel's ioctl takes an unsigned int). */
static int install_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, KVM_RUN, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* SPEC_ALLOW: the filter must not switch on the speculative store
	 * bypass mitigation for a VMM that would run without it. */
	int fd = (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
			      SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog);
	return fd < 0 ? -errno : fd;
}

static int send_fd(int sock, int fd)
{
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	memset(ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -errno;
}

static int recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &m, 0) != 1)
		return -EPROTO;
	c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* The child: its own process group, the filter, the listener to the parent,
 * the start stamp, execve. Never returns. */
static void child(int sock, volatile int64_t *t0, char **argv)
{
	int fd;

	setpgid(0, 0);
	fd = install_filter();
	if (fd < 0) {
		fprintf(stderr, "first-kvm-run: seccomp filter with a listener: %s\n", strerror(-fd));
		_exit(127);
	}
	if (send_fd(sock, fd) < 0)
		_exit(127);
	close(fd);
	close(sock);
	*t0 = now_ns();
	execvp(argv[0], argv);
	fprintf(stderr, "first-kvm-run: %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Waits for the first KVM_RUN: its time, or -ETIMEDOUT / -ECHILD (every
 * process that had the filter is gone) / another -errno. *who gets the
 * notifying task's id. */
static int64_t wait_first_run(int listener, int timeout_ms, pid_t *who)
{
	struct seccomp_notif req;
	struct pollfd p = { .fd = listener, .events = POLLIN };
	int r = poll(&p, 1, timeout_ms);

	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	if (!(p.revents & POLLIN))
		return -ECHILD;
	memset(&req, 0, sizeof(req));
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
		return errno == ENOENT ? -ECHILD : -errno;
	*who = (pid_t)req.pid;
	return now_ns();
}

/* The parent of pid, from /proc/PID/stat (after the command's name,
 * which may hold spaces or parentheses), or -1. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	int ppid = -1;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -1;
	return ppid;
}

/* SIGKILL to every descendant (children of this subreaper, theirs, ...),
 * reaping them, until none is left or 5 s have gone. */
static void kill_tree(void)
{
	int64_t until = now_ns() + 5000000000ll;
	pid_t self = getpid();

	while (now_ns() < until) {
		DIR *d = opendir("/proc");
		struct dirent *e;
		int found = 0;

		if (!d)
			return;
		while ((e = readdir(d))) {
			pid_t pid = (pid_t)atoi(e->d_name), up = pid;
			int depth;

			for (depth = 0; up > 1 && depth < 64; depth++) {
				up = parent_of(up);
				if (up == self) {
					kill(pid, SIGKILL);
					found = 1;
					break;
				}
			}
		}
		closedir(d);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (!found)
			return;
		usleep(10000);
	}
}

int main(int argc, char **argv)
{
	int timeout_s = 120, sv[2], listener, status;
	int argi = 1;
	volatile int64_t *t0;
	int64_t t1;
	pid_t pid, who = 0;

	if (argi + 1 < argc && !strcmp(argv[argi], "-t")) {
		timeout_s = atoi(argv[argi + 1]);
		argi += 2;
	}
	if (argi < argc && !strcmp(argv[argi], "--"))
		argi++;
	if (argi >= argc || timeout_s <= 0) {
		fprintf(stderr, "usage: first-kvm-run [-t SECONDS] -- COMMAND [ARG...]\n");
		return 2;
	}
	/* descendants whose parents die come to this process, not to init */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
		perror("first-kvm-run: PR_SET_CHILD_SUBREAPER");
		return 1;
	}
	t0 = mmap(NULL, sizeof(*t0), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t0 == MAP_FAILED || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("first-kvm-run");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("first-kvm-run: fork");
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		child(sv[1], t0, argv + argi);
	}
	close(sv[1]);
	listener = recv_fd(sv[0]);
	close(sv[0]);
	if (listener < 0) {
		fprintf(stderr, "first-kvm-run: the command's filter never came (it could not be installed)\n");
		waitpid(pid, &status, 0);
		return 1;
	}
	t1 = wait_first_run(listener, timeout_s * 1000, &who);
	if (who > 0)
		kill(who, SIGKILL);
	kill(-pid, SIGKILL);
	close(listener);
	kill_tree();
	waitpid(pid, &status, WNOHANG);
	if (t1 < 0) {
		fprintf(stderr, "first-kvm-run: no KVM_RUN: %s\n",
			t1 == -ETIMEDOUT ? "time ran out" : t1 == -ECHILD ? "the command ended first" : strerror((int)-t1));
		return 1;
	}
	printf("first_kvm_run_us %lld\n", (long long)((t1 - *t0) / 1000));
	return 0;
}
