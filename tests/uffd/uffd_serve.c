/* The test page-fault handler's server side (tests/uffd/uffd_serve.h). */
#include "tests/uffd/uffd_serve.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096ull
#define MAX_REGIONS 8
#define MAX_QUEUE 256

struct region {
	uint64_t base, size, offset;
};

struct server {
	int uffd;
	const uint8_t *file;     /* the memory file, mapped read-only */
	uint64_t file_size;
	unsigned nr;
	struct region r[MAX_REGIONS];
	uint64_t queue[MAX_QUEUE]; /* fault addresses not served yet */
	unsigned queued;
	struct uffd_serve_stats *st;
};

static int fail(int e, const char *what)
{
	fprintf(stderr, "uffd_handler: %s%s%s\n", what, e ? ": " : "", e ? strerror(e) : "");
	return -(e ? e : EINVAL);
}

/* The one message: up to 4 KiB of JSON and one descriptor. */
static int recv_handshake(int conn, char *buf, size_t cap, size_t *len, int *fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = cap - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *c;
	ssize_t n;

	*fd = -1;
	do
		n = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return fail(errno, "recvmsg");
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	if (n == 0)
		return fail(0, "the VMM closed the connection before its handshake");
	if (*fd < 0)
		return fail(0, "the handshake carried no userfaultfd");
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return fail(0, "the handshake was truncated");
	buf[n] = '\0';
	*len = (size_t)n;
	return 0;
}

static int get_u64(const struct json *o, const char *key, uint64_t *out)
{
	int64_t v;

	if (json_get_int(o, key, &v) || v < 0)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

/* [{"base_host_virt_addr","size","offset","page_size"[,"page_size_kib"]}...] */
static int parse_mappings(struct server *s, const char *text, size_t len)
{
	struct json_arena arena = { .buf = malloc(64 << 10), .size = 64 << 10 };
	const char *err = NULL;
	const struct json *root = arena.buf ? json_parse(text, len, &arena, &err) : NULL, *e;
	uint64_t total = 0;
	int r = 0;

	if (!root || root->type != JSON_ARR || !root->u.kids.count) {
		r = fail(0, "the handshake is not a non-empty JSON array");
		goto out;
	}
	for (e = root->u.kids.first; e; e = e->next) {
		struct region *g = &s->r[s->nr];
		uint64_t ps, kib;

		r = -EINVAL;
		if (s->nr == MAX_REGIONS) {
			fail(0, "too many regions");
			goto out;
		}
		if (get_u64(e, "base_host_virt_addr", &g->base) || get_u64(e, "size", &g->size) ||
		    get_u64(e, "offset", &g->offset) || get_u64(e, "page_size", &ps)) {
			fail(0, "a mapping lacks base_host_virt_addr, size, offset or page_size");
			goto out;
		}
		/* Firecracker's deprecated duplicate, in bytes despite its name */
		if (!get_u64(e, "page_size_kib", &kib) && kib != ps) {
			fail(0, "page_size_kib differs from page_size");
			goto out;
		}
		if (ps != PAGE || g->base % PAGE || g->size % PAGE || !g->size || g->offset % PAGE) {
			fail(0, "a mapping is not in whole 4 KiB pages");
			goto out;
		}
		if (g->offset > s->file_size || g->size > s->file_size - g->offset) {
			fail(0, "a mapping reaches past the end of the memory file");
			goto out;
		}
		total += g->size;
		s->nr++;
		r = 0;
	}
	/* As Firecracker's example: the regions are the whole file. */
	if (total != s->file_size) {
		fprintf(stderr, "uffd_handler: the regions hold %llu bytes, the memory file %llu\n",
			(unsigned long long)total, (unsigned long long)s->file_size);
		r = -EINVAL;
		goto out;
	}
	s->st->regions = s->nr;
	s->st->bytes = total;
out:
	free(arena.buf);
	return r;
}

static void wake(struct server *s, uint64_t page)
{
	struct uffdio_range rg = { .start = page, .len = PAGE };

	ioctl(s->uffd, UFFDIO_WAKE, &rg); /* nobody waits: nothing to do */
}

/* 0: done with it; -EAGAIN: a REMOVE is pending, try again after reading
 * it; other -errno: a fault this handler cannot serve. */
static int serve_page(struct server *s, uint64_t addr)
{
	uint64_t page = addr & ~(PAGE - 1);
	unsigned i;

	for (i = 0; i < s->nr; i++) {
		const struct region *r = &s->r[i];
		struct uffdio_copy cp = { .dst = page, .len = PAGE, .mode = 0 };

		if (page < r->base || page - r->base >= r->size)
			continue;
		cp.src = (uintptr_t)(s->file + r->offset + (page - r->base));
		if (ioctl(s->uffd, UFFDIO_COPY, &cp) == 0) {
			s->st->pages++;
			return 0;
		}
		switch (errno) {
		case EAGAIN:
			return -EAGAIN;
		case EEXIST: /* another fault on the page was served first */
		case ENOENT: /* unregistered by a REMOVE since: the kernel serves it */
			wake(s, page);
			return 0;
		default:
			return fail(errno, "UFFDIO_COPY");
		}
	}
	fprintf(stderr, "uffd_handler: a fault at 0x%llx, outside every region\n", (unsigned long long)addr);
	return -EFAULT;
}

/* Reads every event there is: faults are queued, REMOVEs handled at
 * once (while one is unread, every UFFDIO_COPY says EAGAIN). */
static int read_events(struct server *s)
{
	struct uffd_msg m[32];
	ssize_t n;
	size_t i;

	for (;;) {
		n = read(s->uffd, m, sizeof(m));
		if (n < 0)
			return errno == EAGAIN ? 0 : fail(errno, "read userfaultfd");
		for (i = 0; i < (size_t)n / sizeof(m[0]); i++) {
			if (m[i].event == UFFD_EVENT_PAGEFAULT) {
				if (s->queued == MAX_QUEUE)
					return fail(0, "too many faults pending");
				s->queue[s->queued++] = m[i].arg.pagefault.address;
			} else if (m[i].event == UFFD_EVENT_REMOVE) {
				struct uffdio_range rg = { .start = m[i].arg.remove.start,
							   .len = m[i].arg.remove.end - m[i].arg.remove.start };

				/* The pages are gone: from now on the guest reads
				 * zeros there, which the kernel gives an
				 * unregistered anonymous range by itself. */
				if (ioctl(s->uffd, UFFDIO_UNREGISTER, &rg) < 0)
					return fail(errno, "UFFDIO_UNREGISTER");
				s->st->removes++;
			}
		}
	}
}

static int handle(struct server *s)
{
	unsigned i, kept;
	int r;

	do {
		if ((r = read_events(s)))
			return r;
		for (i = kept = 0; i < s->queued; i++) {
			r = serve_page(s, s->queue[i]);
			if (r == -EAGAIN)
				s->queue[kept++] = s->queue[i];
			else if (r)
				return r;
		}
		s->queued = kept;
	} while (s->queued);
	return 0;
}

int uffd_serve(int conn, const char *mem_path, struct uffd_serve_stats *st, FILE *log)
{
	struct server s = { .uffd = -1, .st = st };
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct stat sb;
	char msg[4096];
	size_t len;
	void *map = MAP_FAILED;
	int mfd, r;

	memset(st, 0, sizeof(*st));
	mfd = open(mem_path, O_RDONLY | O_CLOEXEC);
	if (mfd < 0 || fstat(mfd, &sb) < 0 || !sb.st_size) {
		r = fail(mfd < 0 ? errno : EINVAL, mem_path);
		goto out;
	}
	s.file_size = (uint64_t)sb.st_size;
	map = mmap(NULL, s.file_size, PROT_READ, MAP_PRIVATE, mfd, 0);
	if (map == MAP_FAILED) {
		r = fail(errno, "mmap of the memory file");
		goto out;
	}
	s.file = map;
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
		st->vmm_pid = cred.pid;
	if ((r = recv_handshake(conn, msg, sizeof(msg), &len, &s.uffd)) || (r = parse_mappings(&s, msg, len)))
		goto out;
	if (log) {
		fprintf(log, "mappings: %u regions, %llu bytes from pid %d\n", s.nr, (unsigned long long)st->bytes,
			(int)st->vmm_pid);
		fflush(log);
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = s.uffd, .events = POLLIN }, { .fd = conn, .events = POLLIN } };

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = fail(errno, "poll");
			goto out;
		}
		if (p[0].revents & POLLIN && (r = handle(&s)))
			goto out;
		if (p[1].revents) {
			char c;
			ssize_t n = recv(conn, &c, 1, MSG_DONTWAIT);

			/* Nothing more is ever sent: EOF (or an error) is the
			 * VMM gone. */
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				break;
		}
	}
	r = 0;
out:
	if (s.uffd >= 0)
		close(s.uffd);
	if (map != MAP_FAILED)
		munmap(map, s.file_size);
	if (mfd >= 0)
		close(mfd);
	return r;
}
