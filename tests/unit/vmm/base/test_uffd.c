/* The Uffd memory backend (vmm/base/uffd.h) without KVM: the handshake's JSON
 * and SCM_RIGHTS message, the errors a client sees, and the whole path
 * with the test handler (tests/uffd/uffd_serve.h) in a child process:
 * guest memory mapped and registered here, handed over a Unix socket, and
 * every page the test touches comes from the memory file; a page given
 * back (the balloon's MADV_DONTNEED) reaches the handler as
 * UFFD_EVENT_REMOVE and reads as zeros afterwards. The tests that need a
 * userfaultfd skip, saying why, where neither userfaultfd(2) nor
 * /dev/userfaultfd gives one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/base/uffd.h"
#include "tests/uffd/uffd_serve.h"

#define PAGE 4096u
#define LOW_PAGES 16u
#define HIGH_PAGES 8u
#define HIGH_GPA (1u << 20)

static const struct gm_region layout[2] = {
	{ .gpa = 0, .size = LOW_PAGES * PAGE },
	{ .gpa = HIGH_GPA, .size = HIGH_PAGES * PAGE },
};

static int uffd_usable(void)
{
	int fd = uffd_create();

	if (fd < 0) {
		fprintf(stderr, "[  SKIP    ] no userfaultfd here: userfaultfd(2) and /dev/userfaultfd: %s\n",
			strerror(-fd));
		return 0;
	}
	close(fd);
	return 1;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void json_names_firecracker_fields(void **state)
{
	struct gm gm;
	char want[512], out[512];
	int len;

	(void)state;
	assert_int_equal(gm_create_anon(&gm, layout, 2), 0);
	snprintf(want, sizeof(want),
		 "[{\"base_host_virt_addr\":%llu,\"size\":65536,\"offset\":0,\"page_size\":4096,\"page_size_kib\":4096},"
		 "{\"base_host_virt_addr\":%llu,\"size\":32768,\"offset\":65536,\"page_size\":4096,\"page_size_kib\":4096}]",
		 (unsigned long long)(uintptr_t)gm.map, (unsigned long long)(uintptr_t)gm.map + 65536);
	len = uffd_mappings_json(&gm, out, sizeof(out));
	assert_int_equal(len, (int)strlen(want));
	assert_string_equal(out, want);
	/* The offsets are the memory file's layout (gm_dump): the high
	 * region right after the low one, whatever its guest address. */
	assert_ptr_equal(gm.r[1].host, gm.map + 65536);
	assert_int_equal(uffd_mappings_json(&gm, out, 40), -ENOSPC);
	assert_int_equal(uffd_mappings_json(&gm, out, (size_t)len), -ENOSPC); /* no room for the NUL */
	assert_int_equal(uffd_mappings_json(&gm, out, (size_t)len + 1), len);
	gm_destroy(&gm);
}

static void anon_memory_is_unpopulated_and_private(void **state)
{
	struct gm gm;

	(void)state;
	assert_int_equal(gm_create_anon(&gm, layout, 2), 0);
	assert_int_equal(gm.fd, -1);
	assert_int_equal(gm.private_map, 1);
	assert_int_equal(gm.total, (LOW_PAGES + HIGH_PAGES) * PAGE);
	assert_ptr_equal(gm_ptr(&gm, HIGH_GPA, PAGE), gm.map + LOW_PAGES * PAGE);
	assert_null(gm_ptr(&gm, LOW_PAGES * PAGE, 1)); /* the hole */
	gm_destroy(&gm);
	assert_int_equal(gm_create_anon(&gm, layout, 0), -EINVAL);
}

/* The message and the descriptor arrive together, in one recvmsg. */
static void handshake_carries_the_fd(void **state)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char buf[64];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *c;
	struct stat a, b;
	int sv[2], p[2], fd;
	ssize_t n;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(uffd_send_handshake(sv[0], "[1,2]", 5, p[0]), 0);
	n = recvmsg(sv[1], &mh, 0);
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "[1,2]", 5);
	c = CMSG_FIRSTHDR(&mh);
	assert_non_null(c);
	assert_int_equal(c->cmsg_type, SCM_RIGHTS);
	memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(fstat(p[0], &b), 0);
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

/* A handler that closed its end before the handshake: -EPIPE, and no
 * SIGPIPE kills the VMM. */
static void handshake_to_a_closed_handler(void **state)
{
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(uffd_send_handshake(sv[0], "[]", 2, sv[0]), -EPIPE);
	close(sv[0]);
}

static void tmp_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "/tmp/vmm-uffd-%d-%s", (int)getpid(), name);
	unlink(out);
}

/* No handler at the socket: Firecracker's fault message, nothing left
 * mapped or open (the API serves on, a later load starts clean). */
static void no_handler_is_a_clear_error(void **state)
{
	struct uffd_backend b;
	char path[108], why[512];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fds, s;

	(void)state;
	if (!uffd_usable()) {
		skip();
		return;
	}
	tmp_path(path, sizeof(path), "absent.sock");
	fds = count_fds();
	assert_int_equal(uffd_backend_open(&b, path, layout, 2, why, sizeof(why)), -ENOENT);
	assert_string_equal(why, "Load snapshot error: Failed to restore from snapshot: Failed to load guest memory: "
				 "Error creating guest memory from uffd: Failed to connect to UDS Unix stream: "
				 "No such file or directory (os error 2)");
	assert_null(b.gm.map);
	assert_int_equal(b.conn.uffd, -1);
	assert_int_equal(b.conn.sock, -1);
	assert_int_equal(count_fds(), fds);

	/* A socket its handler left behind (bound, nobody listening). */
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(uffd_backend_open(&b, path, layout, 2, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "Failed to connect to UDS Unix stream: Connection refused (os error 111)"));
	assert_int_equal(count_fds(), fds + 1);
	close(s);
	unlink(path);
}

static uint8_t pattern(unsigned page, unsigned off)
{
	return (uint8_t)(page * 7 + off / 512 + 1);
}

/* The whole path: the handler in a child, faults served from the file. */
static void handler_serves_pages_from_the_file(void **state)
{
	struct uffd_backend b;
	struct uffd_serve_stats st;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char sock[108], mem[108], why[512];
	uint8_t page[PAGE];
	unsigned i, k, touched = 0;
	int ls, fd, p[2], status;
	pid_t child;

	(void)state;
	if (!uffd_usable()) {
		skip();
		return;
	}
	tmp_path(mem, sizeof(mem), "memory");
	tmp_path(sock, sizeof(sock), "handler.sock");
	fd = open(mem, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (i = 0; i < LOW_PAGES + HIGH_PAGES; i++) {
		for (k = 0; k < PAGE; k++)
			page[k] = pattern(i, k);
		assert_int_equal(pwrite(fd, page, PAGE, (off_t)i * PAGE), PAGE);
	}
	close(fd);
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ls, 1), 0);
	assert_int_equal(pipe(p), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		int conn = accept(ls, NULL, NULL), r;

		r = conn < 0 ? -errno : uffd_serve(conn, mem, &st, NULL);
		if (write(p[1], &st, sizeof(st)) != sizeof(st))
			_exit(3);
		_exit(r ? 1 : 0);
	}
	close(ls);
	close(p[1]);

	assert_int_equal(uffd_backend_open(&b, sock, layout, 2, why, sizeof(why)), 0);
	assert_true(b.conn.uffd >= 0 && b.conn.sock >= 0);
	/* Reads in both regions: each page as the file has it, the high
	 * region from the file offset right after the low one. */
	for (i = 0; i < LOW_PAGES + HIGH_PAGES; i += 3, touched++) {
		uint64_t gpa = i < LOW_PAGES ? (uint64_t)i * PAGE : HIGH_GPA + (uint64_t)(i - LOW_PAGES) * PAGE;
		const uint8_t *g = gm_ptr(&b.gm, gpa, PAGE);

		assert_non_null(g);
		for (k = 0; k < PAGE; k += 511)
			if (g[k] != pattern(i, k))
				fail_msg("page %u byte %u: 0x%02x, the file has 0x%02x", i, k, g[k], pattern(i, k));
	}
	/* A first touch that writes: the page is filled first, then written. */
	{
		uint8_t *g = gm_ptr(&b.gm, HIGH_GPA + PAGE, PAGE);

		g[100] = 0xee;
		assert_int_equal(g[100], 0xee);
		assert_int_equal(g[101], pattern(LOW_PAGES + 1, 101));
		assert_int_equal(g[4095], pattern(LOW_PAGES + 1, 4095));
		touched++;
	}
	/* The balloon gives a page back: the handler hears of it and the
	 * guest reads zeros there afterwards, not the file's page. */
	assert_int_equal(gm_discard(&b.gm, 3 * PAGE, PAGE), 0);
	{
		const uint8_t *g = gm_ptr(&b.gm, 3 * PAGE, PAGE);
		static const uint8_t zero[PAGE];

		assert_memory_equal(g, zero, PAGE);
	}
	/* Closing the connection (the VM's end) lets the handler go. */
	uffd_backend_close(&b);
	assert_int_equal(read(p[0], &st, sizeof(st)), (ssize_t)sizeof(st));
	close(p[0]);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(st.regions, 2);
	assert_int_equal(st.bytes, (LOW_PAGES + HIGH_PAGES) * PAGE);
	assert_int_equal(st.pages, touched); /* one fault per page touched */
	assert_int_equal(st.removes, 1);
	assert_int_equal(st.vmm_pid, getpid());
	unlink(mem);
}

/* The handler refuses regions that do not add up to its file. */
static void handler_checks_the_sizes(void **state)
{
	static const char two_pages[] = "[{\"base_host_virt_addr\":4096,\"size\":8192,\"offset\":0,\"page_size\":4096}]";
	struct uffd_serve_stats st;
	char mem[108];
	int sv[2], fd;

	(void)state;
	tmp_path(mem, sizeof(mem), "short");
	fd = open(mem, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4 * PAGE), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* Any descriptor will do: the sizes are refused before it is used. */
	assert_int_equal(uffd_send_handshake(sv[0], two_pages, strlen(two_pages), fd), 0);
	assert_int_equal(uffd_serve(sv[1], mem, &st, NULL), -EINVAL);
	assert_int_equal(uffd_send_handshake(sv[0], "not json", 8, fd), 0);
	assert_int_equal(uffd_serve(sv[1], mem, &st, NULL), -EINVAL);
	close(sv[0]);
	close(sv[1]);
	close(fd);
	unlink(mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_names_firecracker_fields),
		cmocka_unit_test(anon_memory_is_unpopulated_and_private),
		cmocka_unit_test(handshake_carries_the_fd),
		cmocka_unit_test(handshake_to_a_closed_handler),
		cmocka_unit_test(no_handler_is_a_clear_error),
		cmocka_unit_test(handler_serves_pages_from_the_file),
		cmocka_unit_test(handler_checks_the_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
