/* virtio-fs: option parsing, then the device end to end over the
 * transport and fake rings (no KVM) on a scratch directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devices/virtio_fs.h"
#include "vmm/seccomp.h"
#include "tests/unit/virtio_driver.h"
#include "tests/unit/vq_builder.h"

static void options(void **state)
{
	struct fs_options o;
	const char *why = NULL;

	(void)state;
	assert_int_equal(fs_options_parse("tag=work,path=/srv/x,ro,cache=auto", &o, &why), 0);
	assert_string_equal(o.tag, "work");
	assert_string_equal(o.path, "/srv/x");
	assert_true(o.ro);
	assert_int_equal(o.cache, FUSE_CACHE_AUTO);
	fs_options_free(&o);
	assert_int_equal(fs_options_parse("path=/srv/x,tag=a.b_c-9", &o, &why), 0);
	assert_int_equal(o.cache, FUSE_CACHE_NONE);
	assert_false(o.ro);
	fs_options_free(&o);
	assert_int_equal(fs_options_parse("tag=x", &o, &why), -EINVAL);          /* no path */
	assert_int_equal(fs_options_parse("path=/x", &o, &why), -EINVAL);        /* no tag */
	assert_int_equal(fs_options_parse("tag=a/b,path=/x", &o, &why), -EINVAL);
	assert_int_equal(fs_options_parse("tag=..,path=/x", &o, &why), -EINVAL);
	assert_int_equal(fs_options_parse("tag=,path=/x", &o, &why), -EINVAL);
	assert_int_equal(fs_options_parse("tag=a b,path=/x", &o, &why), -EINVAL);
	assert_int_equal(fs_options_parse("tag=012345678901234567890123456789012345,path=/x", &o, &why),
			 -EINVAL); /* 36: no room for the guest's NUL */
	assert_int_equal(fs_options_parse("tag=01234567890123456789012345678901234,path=/x", &o, &why), 0);
	fs_options_free(&o);
	assert_int_equal(fs_options_parse("tag=x,path=/x,cache=always", &o, &why), -EINVAL);
	assert_int_equal(fs_options_parse("tag=x,path=/x,bogus", &o, &why), -EINVAL);
}

struct fx {
	struct vqb b, hi, rq; /* hi: queue 0 (hiprio), rq: queue 1 (requests) */
	struct virtio_fs fs;
	char dir[64];
	uint64_t unique;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct fs_options o = { .tag = "share" };
	struct vq_config c[2];

	if (!f || vqb_init(&f->b, 16))
		return -1;
	vqb_init_view(&f->hi, &f->b, 0, 16);
	vqb_init_view(&f->rq, &f->b, 1, 16);
	snprintf(f->dir, sizeof(f->dir), "/tmp/vmm-test-fs-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	o.path = f->dir;
	if (virtio_fs_init(&f->fs, &o, -1, &f->b.gm, 0xd0000000, 5, 0))
		return -1;
	c[0] = vqb_config(&f->hi);
	c[1] = vqb_config(&f->rq);
	if (!(vd_setup_n(&f->fs.vdev, (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_EVENT_IDX) |
				       (1ull << VIRTIO_F_INDIRECT_DESC), c, 2) & VIRTIO_STATUS_DRIVER_OK))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	virtio_fs_destroy(&f->fs);
	vqb_destroy(&f->b);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd)) {
		/* best effort */
	}
	free(f);
	return 0;
}

/* One request as a chain of nr readable buffers (the request split into
 * equal parts) then nw writable ones of wlen bytes each; waits for it.
 * Returns the used length; *out points at the first writable buffer. */
static uint32_t submit(struct fx *f, struct vqb *q, unsigned qi, const void *req, uint32_t len,
		       unsigned nr, unsigned nw, uint32_t wlen, uint8_t **out)
{
	uint32_t lens[16];
	int w[16];
	uint16_t before = vqb_used_idx(q), head;
	unsigned i, off = 0;

	for (i = 0; i < nr; i++) {
		lens[i] = i + 1 < nr ? len / nr : len - (len / nr) * (nr - 1);
		w[i] = 0;
	}
	for (i = nr; i < nr + nw; i++) {
		lens[i] = wlen;
		w[i] = 1;
	}
	q->next_desc = 0; /* every earlier request completed: reuse */
	q->next_data = q->base + VQB_DATA;
	head = vqb_chain(q, nr + nw, lens, w);
	for (i = 0; i < nr; i++) {
		struct virtq_desc *d = vqb_desc(q, (uint16_t)(head + i));

		memcpy(gm_ptr(&q->gm, d->addr, d->len), (const uint8_t *)req + off, d->len);
		off += d->len;
	}
	if (out && nw)
		*out = gm_ptr(&q->gm, vqb_desc(q, (uint16_t)(head + nr))->addr, wlen);
	vqb_set_used_event(q, before);
	vd_notify(&f->fs.vdev, qi);
	assert_true(vd_wait_irq(&f->fs.vdev) & VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vqb_used_idx(q), (uint16_t)(before + 1));
	return vqb_used(q, before).len;
}

static uint32_t fuse_req(struct fx *f, uint8_t *buf, uint32_t op, uint64_t nodeid, const void *arg,
			 uint32_t alen)
{
	struct fuse_in_header h = { .len = (uint32_t)sizeof(h) + alen, .opcode = op, .unique = ++f->unique,
				    .nodeid = nodeid };

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), arg, alen);
	return h.len;
}

static void device(void **state)
{
	struct fx *f = *state;
	struct fuse_init_in init = { .major = 7, .minor = 38, .max_readahead = 1 << 17 };
	struct fuse_out_header oh;
	uint8_t req[512], *out;
	uint32_t len, used;
	char tag[40] = { 0 };
	uint64_t node, fh;
	unsigned i;

	/* Config space: the tag, NUL-padded, and one request queue (5.11.4). */
	for (i = 0; i < 40; i += 4) {
		uint32_t v;

		f->fs.vdev.bus.ops->read(&f->fs.vdev.bus, 0x100 + i, &v, 4);
		memcpy(tag + i, &v, 4);
	}
	assert_string_equal(tag, "share");
	assert_int_equal(tag[36] | tag[37] << 8, 1);
	assert_int_equal(vd_rd(&f->fs.vdev, 0x008), VIRTIO_ID_FS);

	len = fuse_req(f, req, FUSE_INIT, 0, &init, sizeof(init));
	used = submit(f, &f->rq, 1, req, len, 1, 1, 256, &out);
	assert_int_equal(used, 16 + sizeof(struct fuse_init_out));
	memcpy(&oh, out, sizeof(oh));
	assert_int_equal(oh.error, 0);
	assert_int_equal(oh.unique, f->unique);

	/* A file from the host, looked up and read through scattered
	 * buffers: the request in three pieces, the reply in four. */
	{
		char p[128];
		int fd;

		snprintf(p, sizeof(p), "%s/hello", f->dir);
		fd = open(p, O_CREAT | O_WRONLY, 0644);
		assert_int_equal(write(fd, "hello, guest", 12), 12);
		close(fd);
	}
	len = fuse_req(f, req, FUSE_LOOKUP, 1, "hello", 6);
	used = submit(f, &f->rq, 1, req, len, 3, 1, 256, &out);
	assert_int_equal(used, 16 + sizeof(struct fuse_entry_out));
	node = ((struct fuse_entry_out *)(out + 16))->nodeid;
	{
		struct fuse_open_in o = { .flags = O_RDONLY };

		len = fuse_req(f, req, FUSE_OPEN, node, &o, sizeof(o));
		used = submit(f, &f->rq, 1, req, len, 1, 1, 256, &out);
		assert_int_equal(((struct fuse_out_header *)out)->error, 0);
		fh = ((struct fuse_open_out *)(out + 16))->fh;
	}
	{
		struct fuse_read_in r = { .fh = fh, .size = 4096 };
		char got[12];
		uint8_t *o0;

		len = fuse_req(f, req, FUSE_READ, node, &r, sizeof(r));
		used = submit(f, &f->rq, 1, req, len, 1, 4, 8, &o0);
		assert_int_equal(used, 16 + 12); /* chunked to the 32 bytes offered */
		/* the header in writable buffers 0-1 (descriptors 1-2), the data in 2-3 */
		assert_int_equal(((struct fuse_out_header *)(void *)o0)->len, 16 + 12);
		memcpy(got, gm_ptr(&f->rq.gm, vqb_desc(&f->rq, 3)->addr, 8), 8);
		memcpy(got + 8, gm_ptr(&f->rq.gm, vqb_desc(&f->rq, 4)->addr, 4), 4);
		assert_memory_equal(got, "hello, guest", 12);
	}
	/* FORGET on the hiprio queue: readable only, no reply. */
	{
		struct fuse_forget_in fg = { .nlookup = 1 };

		assert_int_equal(f->fs.srv.nr_ino, 2);
		len = fuse_req(f, req, FUSE_FORGET, node, &fg, sizeof(fg));
		used = submit(f, &f->hi, 0, req, len, 1, 0, 0, NULL);
		assert_int_equal(used, 0);
		assert_int_equal(f->fs.srv.nr_ino, 1);
	}
	/* A chain too short for a header, and one without room for the
	 * reply: returned unused, the device stays live. */
	used = submit(f, &f->rq, 1, req, 10, 1, 1, 256, &out);
	assert_int_equal(used, 0);
	len = fuse_req(f, req, FUSE_GETATTR, 1, &(struct fuse_getattr_in){ 0 }, sizeof(struct fuse_getattr_in));
	used = submit(f, &f->rq, 1, req, len, 1, 1, 8, &out);
	assert_int_equal(used, 0);
	assert_false(vd_rd(&f->fs.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
	/* A lying length gets an error reply. */
	((struct fuse_in_header *)req)->len = 4000;
	used = submit(f, &f->rq, 1, req, len, 1, 1, 256, &out);
	assert_int_equal(used, 16);
	assert_int_equal(((struct fuse_out_header *)out)->error, -EINVAL);
	len = fuse_req(f, req, FUSE_GETATTR, 1, &(struct fuse_getattr_in){ 0 }, sizeof(struct fuse_getattr_in));
	used = submit(f, &f->rq, 1, req, len, 1, 1, 256, &out);
	assert_int_equal(used, 16 + sizeof(struct fuse_attr_out));
	assert_true(S_ISDIR(((struct fuse_attr_out *)(out + 16))->attr.mode));
	/* A device reset ends the FUSE session: INIT again first. */
	vd_wr(&f->fs.vdev, 0x070, 0);
	assert_int_equal(f->fs.srv.initialized, 0);
}

/* ---- locks: a SETLKW held off the loop ---------------------------------- */

/* Posts a request at descriptor `desc` (a region of its own) without
 * waiting; returns where its reply header lands. */
static struct fuse_out_header *post(struct fx *f, struct vqb *q, unsigned qi, uint16_t desc,
				    const uint8_t *req, uint32_t len, uint32_t wlen)
{
	const uint32_t lens[] = { len, wlen };
	const int w[] = { 0, 1 };
	unsigned n = wlen ? 2 : 1;
	uint16_t head;

	q->next_desc = desc;
	q->next_data = q->base + VQB_DATA + 0x10000u * desc;
	head = vqb_chain(q, n, lens, w);
	memcpy(gm_ptr(&q->gm, vqb_desc(q, head)->addr, len), req, len);
	vqb_set_used_event(q, (uint16_t)(vqb_used_idx(q) - 1)); /* interrupt at every use */
	vd_notify(&f->fs.vdev, qi);
	return wlen ? gm_ptr(&q->gm, vqb_desc(q, (uint16_t)(head + 1))->addr, wlen) : NULL;
}

/* Waits (5 s at most: a hang fails instead) until the used index reaches idx. */
static void wait_used(struct vqb *q, uint16_t idx)
{
	struct timespec t = { 0, 1000000 };
	unsigned i;

	for (i = 0; i < 5000 && (int16_t)(vqb_used_idx(q) - idx) < 0; i++)
		nanosleep(&t, NULL);
	assert_int_equal(vqb_used_idx(q), idx);
}

/* Waits (5 s at most) until the server has n SETLKWs waiting. */
static void wait_waiters(struct fx *f, unsigned n)
{
	struct timespec t = { 0, 1000000 };
	unsigned i;

	for (i = 0; i < 5000 && __atomic_load_n(&f->fs.srv.nr_waiters, __ATOMIC_ACQUIRE) != n; i++)
		nanosleep(&t, NULL);
	assert_int_equal(__atomic_load_n(&f->fs.srv.nr_waiters, __ATOMIC_ACQUIRE), n);
}

static struct fuse_out_header *lk_post(struct fx *f, uint16_t desc, uint32_t op, uint64_t node, uint64_t fh,
				       uint64_t owner, uint32_t type, uint8_t *req)
{
	struct fuse_lk_in in = { .fh = fh, .owner = owner,
				 .lk = { .start = 0, .end = (uint64_t)INT64_MAX, .type = type } };

	return post(f, &f->rq, 1, desc, req, fuse_req(f, req, op, node, &in, sizeof(in)), 64);
}

static void lock_wait_off_the_loop(void **state)
{
	struct fx *f = *state;
	struct fuse_init_in init = { .major = 7, .minor = 38, .max_readahead = 1 << 17 };
	struct fuse_open_in o = { .flags = O_RDWR };
	struct fuse_out_header *oh, *waiter;
	uint8_t req[512], *out;
	uint64_t node, fh, wunique;
	uint16_t u;
	char p[128];
	int fd;

	submit(f, &f->rq, 1, req, fuse_req(f, req, FUSE_INIT, 0, &init, sizeof(init)), 1, 1, 256, &out);
	snprintf(p, sizeof(p), "%s/counter", f->dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	submit(f, &f->rq, 1, req, fuse_req(f, req, FUSE_LOOKUP, 1, "counter", 8), 1, 1, 256, &out);
	node = ((struct fuse_entry_out *)(out + 16))->nodeid;
	submit(f, &f->rq, 1, req, fuse_req(f, req, FUSE_OPEN, node, &o, sizeof(o)), 1, 1, 256, &out);
	fh = ((struct fuse_open_out *)(out + 16))->fh;

	/* Owner 1 holds the file; owner 2's SETLKW waits, unanswered, while
	 * other requests are served. */
	u = vqb_used_idx(&f->rq);
	oh = lk_post(f, 2, FUSE_SETLK, node, fh, 1, F_WRLCK, req);
	wait_used(&f->rq, ++u);
	assert_int_equal(oh->error, 0);
	waiter = lk_post(f, 4, FUSE_SETLKW, node, fh, 2, F_WRLCK, req);
	wunique = f->unique;
	oh = lk_post(f, 6, FUSE_GETLK, node, fh, 3, F_RDLCK, req);
	wait_used(&f->rq, ++u);
	assert_int_equal(oh->unique, f->unique);
	assert_int_equal(((struct fuse_lk_out *)(void *)(oh + 1))->lk.type, F_WRLCK);
	assert_int_equal(vqb_used(&f->rq, (uint16_t)(u - 1)).id, 6); /* the GETLK, not the waiter */
	/* Owner 1 unlocks: the waiter is granted and answered. */
	oh = lk_post(f, 8, FUSE_SETLK, node, fh, 1, F_UNLCK, req);
	wait_used(&f->rq, (uint16_t)(u + 2));
	assert_int_equal(oh->error, 0);
	assert_int_equal(waiter->unique, wunique);
	assert_int_equal(waiter->len, 16);
	assert_int_equal(waiter->error, 0);
	u = (uint16_t)(u + 2);
	/* Owner 3 waits in turn; an INTERRUPT on the hiprio queue ends it EINTR. */
	waiter = lk_post(f, 10, FUSE_SETLKW, node, fh, 3, F_RDLCK, req);
	wunique = f->unique;
	{
		struct fuse_interrupt_in in = { .unique = wunique };

		post(f, &f->hi, 0, 0, req, fuse_req(f, req, FUSE_INTERRUPT, 0, &in, sizeof(in)), 0);
	}
	wait_used(&f->rq, ++u);
	assert_int_equal(waiter->unique, wunique);
	assert_int_equal(waiter->error, -EINTR);
	/* A host process holds the file now (owner 2 let go at its FLUSH);
	 * owner 3 waits until the host unlocks: only the timer sees that. */
	{
		struct fuse_flush_in fl = { .fh = fh, .lock_owner = 2 };
		struct flock hl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

		oh = post(f, &f->rq, 1, 12, req, fuse_req(f, req, FUSE_FLUSH, node, &fl, sizeof(fl)), 64);
		wait_used(&f->rq, ++u);
		assert_int_equal(oh->error, 0);
		fd = open(p, O_RDWR);
		assert_true(fd >= 0);
		assert_int_equal(fcntl(fd, F_OFD_SETLK, &hl), 0);
		waiter = lk_post(f, 14, FUSE_SETLKW, node, fh, 3, F_RDLCK, req);
		wait_waiters(f, 1); /* parked: the unlock below reaches it by the timer only */
		assert_int_equal(vqb_used_idx(&f->rq), u);
		hl.l_type = F_UNLCK;
		assert_int_equal(fcntl(fd, F_OFD_SETLK, &hl), 0);
		wait_used(&f->rq, ++u);
		assert_int_equal(waiter->error, 0);
		/* ... and now it is the host that meets the guest's lock. */
		hl.l_type = F_WRLCK;
		assert_int_equal(fcntl(fd, F_OFD_SETLK, &hl), -1);
		close(fd);
	}
	assert_int_equal(fuse_lk_waiting(&f->fs.srv), 0);
	assert_false(vd_rd(&f->fs.vdev, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
}

/* ---- bulk frees under the seccomp filters ------------------------------ */

/* One request in one readable and one writable descriptor, without cmocka
 * (the child below): the reply's error, or 1 if the device did not use it
 * within 5 s. Polls the used index: the vCPU list has no poll. */
static int churn_req(struct fx *f, const uint8_t *req, uint32_t len)
{
	const uint32_t lens[] = { len, 256 };
	const int w[] = { 0, 1 };
	uint16_t before = vqb_used_idx(&f->rq), head;
	struct timespec t = { 0, 100000 };
	unsigned i;

	f->rq.next_desc = 0;
	f->rq.next_data = f->rq.base + VQB_DATA;
	head = vqb_chain(&f->rq, 2, lens, w);
	memcpy(gm_ptr(&f->rq.gm, vqb_desc(&f->rq, head)->addr, len), req, len);
	vqb_set_used_event(&f->rq, before);
	vd_notify(&f->fs.vdev, 1);
	for (i = 0; i < 50000 && vqb_used_idx(&f->rq) == before; i++)
		nanosleep(&t, NULL);
	if (vqb_used_idx(&f->rq) == before)
		return 1;
	return ((struct fuse_out_header *)gm_ptr(&f->rq.gm, vqb_desc(&f->rq, (uint16_t)(head + 1))->addr,
						 16))->error;
}

static int lockdown(void *arg)
{
	(void)arg;
	return sc_install(SC_FS);
}

/* The child: a process set up as the VMM's main() does, the device's loop
 * under the virtio-fs filter, this thread under the vCPU's; FUSE_INIT,
 * 1000 MKNODs of 200-byte names (an inode and a copy of its name each),
 * then a driver reset, which frees them on this thread. Exits 0, 2 (setup) or 3 (a request failed); a trap 159. */
static void churn_child(int report)
{
	struct fuse_init_in init = { .major = 7, .minor = 38, .max_readahead = 1 << 17 };
	struct {
		struct fuse_mknod_in m;
		char name[208];
	} mk = { .m = { .mode = S_IFREG | 0600 } };
	void *state = NULL;
	uint8_t req[512];
	struct fx *f;
	unsigned i;

	if (sc_process_init() || setup(&state))
		_exit(2);
	f = state;
	if (write(report, f->dir, sizeof(f->dir)) != (ssize_t)sizeof(f->dir))
		_exit(2);
	if (evloop_call(&f->fs.vdev.loop, lockdown, NULL) || sc_install(SC_VCPU))
		_exit(2);
	if (churn_req(f, req, fuse_req(f, req, FUSE_INIT, 0, &init, sizeof(init))))
		_exit(3);
	for (i = 0; i < 1000; i++) {
		/* Long names: their copies are freed one by one and merge
		 * (shorter ones stay in glibc's fast bins). */
		snprintf(mk.name, sizeof(mk.name), "%0200u", i);
		if (churn_req(f, req, fuse_req(f, req, FUSE_MKNOD, 1, &mk,
					       (uint32_t)(sizeof(mk.m) + strlen(mk.name) + 1))))
			_exit(3);
	}
	vd_wr(&f->fs.vdev, 0x070, 0);
	_exit(0); /* no teardown: the vCPU list has no unlink (the parent cleans up) */
}

/* A guest picks which thread frees what: a reset after many MKNODs freed
 * the inode table on the vCPU thread, where glibc's first trim of the
 * device's arena opened /proc/sys/vm/overcommit_memory: the vCPU filter
 * trapped it and the VMM exited 159. */
static void bulk_frees_under_filters(void **state)
{
	char dir[64] = "", cmd[128];
	int p[2], st = 0;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char fd[16];

		/* A fresh process: glibc probes once per process. */
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		execl("/proc/self/exe", "test_virtio_fs", "--churn-child", fd, (char *)NULL);
		_exit(2);
	}
	close(p[1]);
	if (read(p[0], dir, sizeof(dir)) != (ssize_t)sizeof(dir))
		dir[0] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!strncmp(dir, "/tmp/vmm-test-fs-", 17)) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd)) {
			/* best effort */
		}
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "child: status 0x%x\n", st);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(options),
		cmocka_unit_test_setup_teardown(device, setup, teardown),
		cmocka_unit_test_setup_teardown(lock_wait_off_the_loop, setup, teardown),
		cmocka_unit_test(bulk_frees_under_filters),
	};

	if (argc == 3 && !strcmp(argv[1], "--churn-child"))
		churn_child(atoi(argv[2]));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
