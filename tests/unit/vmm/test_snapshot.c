/* Snapshots: the state-file format (every field type round-trips, every
 * corruption is refused), and whole VMs (needs /dev/kvm and the test
 * guests): a paused VM is saved, a second VM restored from it has the same
 * vCPU state and runs on, and each corruption of a real snapshot (bad
 * magic, version, checksums, truncation, a memory file of the wrong size,
 * a layout that does not match) is refused before any guest code runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vmm/base/log.h"
#include "vmm/base/snapfmt.h"
#include "vmm/vm_snapshot.h"
#include "vmm/vcpu.h"
#include "vmm/vm.h"
#include "tests/unit/vm_fixture.h"

#define TAG_A SNAP_TAG('T', 'S', 'T', 'A')
#define TAG_B SNAP_TAG('T', 'S', 'T', 'B')

static void fields_roundtrip(void **state)
{
	struct sbuf b;
	struct srd r;
	uint8_t raw[5] = { 1, 2, 3, 4, 5 }, back[5];
	char s[16];

	(void)state;
	sb_init(&b);
	sb_begin(&b, TAG_A);
	sb_u8(&b, 0xab);
	sb_u16(&b, 0xbeef);
	sb_u32(&b, 0xdeadbeef);
	sb_u64(&b, 0x0123456789abcdefull);
	sb_bytes(&b, raw, sizeof(raw));
	sb_str(&b, "hello");
	sb_str(&b, "");
	sb_end(&b);
	sb_begin(&b, TAG_B);
	sb_u32(&b, 7);
	sb_end(&b);
	assert_int_equal(b.err, 0);

	sr_init(&r, b.p, b.len);
	assert_int_equal(sr_begin(&r, TAG_A, "a"), 0);
	assert_int_equal(sr_u8(&r), 0xab);
	assert_int_equal(sr_u16(&r), 0xbeef);
	assert_int_equal(sr_u32(&r), 0xdeadbeef);
	assert_true(sr_u64(&r) == 0x0123456789abcdefull);
	sr_bytes(&r, back, sizeof(back));
	assert_memory_equal(back, raw, sizeof(raw));
	sr_str(&r, s, sizeof(s));
	assert_string_equal(s, "hello");
	sr_str(&r, s, sizeof(s));
	assert_string_equal(s, "");
	assert_int_equal(sr_end(&r, "a"), 0);
	assert_int_equal(sr_begin(&r, TAG_B, "b"), 0);
	assert_int_equal(sr_u32(&r), 7);
	assert_int_equal(sr_end(&r, "b"), 0);
	assert_int_equal(r.off, r.len);

	/* Reading past a section's end fails, sticky, and yields zeros. */
	sr_init(&r, b.p, b.len);
	assert_int_equal(sr_begin(&r, TAG_A, "a"), 0);
	sr_bytes(&r, back, 2);
	{
		uint8_t big[64];

		sr_bytes(&r, big, sizeof(big));
	}
	assert_true(r.err);
	assert_int_equal(sr_u32(&r), 0);
	assert_non_null(r.why);

	/* A string longer than its field, a section under another tag, a
	 * section with unread fields: all refused. */
	sr_init(&r, b.p, b.len);
	assert_int_equal(sr_begin(&r, TAG_A, "a"), 0);
	sr_u8(&r), sr_u16(&r), sr_u32(&r), sr_u64(&r), sr_bytes(&r, back, 5);
	sr_str(&r, s, 5); /* "hello" needs 6 with its NUL */
	assert_true(r.err);
	sr_init(&r, b.p, b.len);
	assert_int_not_equal(sr_begin(&r, TAG_B, "b"), 0);
	sr_init(&r, b.p, b.len);
	assert_int_equal(sr_begin(&r, TAG_A, "a"), 0);
	sr_u8(&r);
	assert_int_not_equal(sr_end(&r, "a"), 0);
	sb_free(&b);
}

static void string_with_nul_refused(void **state)
{
	const uint8_t rec[] = { 3, 0, 0, 0, 'a', 0, 'b' };
	struct srd r;
	char s[8];

	(void)state;
	sr_init(&r, rec, sizeof(rec));
	sr_str(&r, s, sizeof(s));
	assert_true(r.err);
}

static void le32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void file_corruptions_refused(void **state)
{
	char path[] = "/tmp/vmm-test-state-XXXXXX";
	uint8_t *file, *bad;
	size_t len, blen;
	const uint8_t *body;
	const char *why;
	struct sbuf b;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	unlink(path);
	sb_init(&b);
	sb_begin(&b, TAG_A);
	for (unsigned i = 0; i < 100; i++)
		sb_u32(&b, i * 2654435761u);
	sb_end(&b);
	assert_int_equal(snapfile_write(path, &b), 0);
	assert_int_equal(snapfile_write(path, &b), -EEXIST); /* never overwritten */
	assert_int_equal(snapfile_read(path, &file, &len, &body, &blen, &why), 0);
	assert_int_equal(blen, b.len);
	assert_memory_equal(body, b.p, b.len);
	bad = malloc(len + 1);

#define REFUSED(mutate, n)                                                        \
	do {                                                                      \
		memcpy(bad, file, len);                                           \
		mutate;                                                           \
		why = NULL;                                                       \
		assert_int_equal(snapfile_check(bad, (n), &body, &blen, &why), -EINVAL); \
		assert_non_null(why);                                             \
	} while (0)

	REFUSED(bad[0] ^= 1, len);                        /* magic */
	REFUSED(bad[8] = 9, len);                         /* version, header checksum stale */
	REFUSED((bad[8] = 9, le32(bad + 28, snap_crc32c(0, bad, 28))), len); /* version */
	REFUSED(bad[16] ^= 4, len);                       /* length, header checksum stale */
	REFUSED(bad[SNAP_HEADER + 17] ^= 0x40, len);      /* body bit flip */
	REFUSED((void)0, len - 1);                        /* truncated by one byte */
	REFUSED((void)0, SNAP_HEADER - 1);                /* truncated into the header */
	REFUSED(bad[len] = 0, len + 1);                   /* a byte past the end */
	{
		/* Every single-byte truncation is refused. */
		size_t n;

		for (n = 0; n < len; n++) {
			why = NULL;
			assert_int_equal(snapfile_check(file, n, &body, &blen, &why), -EINVAL);
		}
	}
	free(bad);
	free(file);
	unlink(path);
	assert_int_equal(snapfile_read(path, &file, &len, &body, &blen, &why), -ENOENT);
	free(file);
	sb_free(&b);
}

/* The TR type a restore writes back (snapshot_tr_type), for both vendors'
 * paths without KVM: on AMD and Hygon a busy 64-bit TSS goes back
 * available, as their CPUs keep it; on Intel unchanged (VMX wants it
 * busy). Every other type is a never-run vCPU's reset TR (KVM's SVM code:
 * 3, a busy 16-bit TSS; VMX: 11) and goes back as it was: the busy bit is
 * adjusted only where the CPU keeps it. */
static void tr_type_per_vendor(void **state)
{
	static const char *const hidden[] = { "AuthenticAMD", "HygonGenuine" };
	static const uint8_t others[] = { 0x1, 0x3, 0x9 };
	unsigned v, i;

	(void)state;
	for (v = 0; v < 2; v++) {
		assert_int_equal(snapshot_tr_type(0xb, hidden[v]), 0x9);
		for (i = 0; i < sizeof(others); i++)
			assert_int_equal(snapshot_tr_type(others[i], hidden[v]), others[i]);
	}
	assert_int_equal(snapshot_tr_type(0xb, "GenuineIntel"), 0xb);
	for (i = 0; i < sizeof(others); i++)
		assert_int_equal(snapshot_tr_type(others[i], "GenuineIntel"), others[i]);
}

/* ---- whole VMs ---- */

static void config(struct run *r)
{
	memset(&r->cfg, 0, sizeof(r->cfg));
	snprintf(r->kernel, sizeof(r->kernel), "%s/spin.elf", guest_dir());
	assert_int_equal(pipe2(r->out, O_NONBLOCK | O_CLOEXEC), 0);
	r->cfg.mem_bytes = 64ull << 20;
	r->cfg.cpus = 2;
	r->cfg.kernel = r->kernel;
	r->cfg.cmdline = "";
	r->cfg.console_in = -1;
	r->cfg.console_out = r->out[1];
	r->cfg.t0_ns = log_now_ns();
	r->cfg.api_token = "secret-token";
}

/* Waits until the guest printed `want` on its console. */
static void wait_output(struct run *r, const char *want)
{
	char buf[256] = "";
	size_t n = 0;
	int i;

	for (i = 0; i < 500 && !strstr(buf, want); i++) {
		ssize_t got = read(r->out[0], buf + n, sizeof(buf) - 1 - n);

		if (got > 0) {
			n += (size_t)got;
			buf[n] = '\0';
		} else {
			usleep(10000);
		}
	}
	assert_non_null(strstr(buf, want));
}

static void stop(struct run *r)
{
	vm_request_exit(&r->vm, VM_EXIT_STOPPED, "test done");
	pthread_join(r->t, NULL);
	vm_destroy(&r->vm);
	close(r->out[0]);
	close(r->out[1]);
}

static char snapdir[64];

static void cleanup_dir(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* vCPU 1 of vm_snapshot_restore: an AP that started. spin.S starts no
 * AP, so the test starts it as vmm starts the BSP (vcpu_set_boot_regs:
 * long mode, TR a busy 64-bit TSS), with a TSS base of its own, on a loop
 * that first marks it ran. */
#define AP_CODE 0x6000ull
#define AP_MARK 0x6100ull
#define AP_TSS 0x6200ull
static void start_ap(struct vm *vm, unsigned i)
{
	static const uint8_t code[] = {
		0xc6, 0x04, 0x25, 0x00, 0x61, 0x00, 0x00, 0x01, /* movb $1, AP_MARK */
		0xf3, 0x90, 0xeb, 0xfc,                         /* 1: pause; jmp 1b */
	};
	struct kvm_mp_state mp = { .mp_state = KVM_MP_STATE_RUNNABLE };
	struct kvm_sregs sr;

	memcpy(gm_ptr(&vm->gm, AP_CODE, sizeof(code)), code, sizeof(code));
	assert_int_equal(vcpu_set_boot_regs(&vm->vcpus[i], AP_CODE), 0);
	assert_int_equal(kvm_ioctl_ptr(vm->vcpus[i].fd, KVM_GET_SREGS, &sr), 0);
	sr.tr.base = AP_TSS;
	assert_int_equal(kvm_ioctl_ptr(vm->vcpus[i].fd, KVM_SET_SREGS, &sr), 0);
	assert_int_equal(kvm_ioctl_ptr(vm->vcpus[i].fd, KVM_SET_MP_STATE, &mp), 0);
}

static void wait_mark(struct vm *vm, uint64_t gpa)
{
	volatile uint8_t *m = gm_ptr(&vm->gm, gpa, 1);
	int i;

	for (i = 0; i < 500 && !*m; i++)
		usleep(10000);
	assert_int_equal(*m, 1);
}

/* Snapshot a running three-vCPU guest, restore it into a second VM,
 * compare the vCPU state KVM reports for both, and let the clone run.
 * vCPU 0 (the BSP) and vCPU 1 (an AP that started) ran; vCPU 2 is an AP
 * that never started and keeps KVM's reset state. */
static void vm_snapshot_restore(void **state)
{
	struct run *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct kvm_regs ra, rb;
	struct kvm_sregs sa, sb;
	struct kvm_segment reset_tr;
	struct kvm_mp_state ma, mb;
	struct snapshot s;
	char tmpl[] = "/tmp/vmm-test-snap-XXXXXX";
	uint64_t bytes = 0;
	unsigned i;

	(void)state;
	if (!have_kvm()) {
		free(a);
		free(b);
		skip();
	}
	assert_non_null(mkdtemp(tmpl));
	snprintf(snapdir, sizeof(snapdir), "%s/snap", tmpl);
	config(a);
	a->cfg.cpus = 3;
	assert_int_equal(vm_create(&a->vm, &a->cfg), 0);
	assert_int_equal(kvm_ioctl_ptr(a->vm.vcpus[2].fd, KVM_GET_SREGS, &sa), 0);
	reset_tr = sa.tr; /* as this host's KVM reports a vCPU that never ran */
	start_ap(&a->vm, 1);
	assert_int_equal(pthread_create(&a->t, NULL, run_thread, a), 0);
	wait_output(a, "spinning");
	wait_mark(&a->vm, AP_MARK);
	assert_int_equal(vm_pause(&a->vm), 0);
	assert_int_equal(vm_pause(&a->vm), 0); /* idempotent */
	assert_int_equal(vm_snapshot(&a->vm, snapdir, &bytes), 0);
	assert_true(bytes > 0 && bytes < a->cfg.mem_bytes); /* sparse */
	assert_int_equal(vm_snapshot(&a->vm, snapdir, &bytes), -EEXIST);

	assert_int_equal(snapshot_open(&s, snapdir), 0);
	assert_int_equal(s.conf.cpus, 3);
	assert_true(s.conf.mem_bytes == a->cfg.mem_bytes);
	assert_string_equal(s.conf.token, "secret-token");
	/* The token is never on the command line (every guest process reads
	 * /proc/cmdline): the token window serves it, and a clone's window
	 * serves the clone's own token. */
	assert_null(strstr(s.conf.cmdline, "vmm.token"));
	assert_null(strstr(a->vm.cmdline, "secret-token"));
	config(b);
	b->cfg.cpus = 3;
	b->cfg.restore = &s;
	b->cfg.api_token = "clone-token";
	assert_int_equal(vm_create(&b->vm, &b->cfg), 0);
	{
		char wa[VMM_TOKEN_LEN + 1] = "", wb[VMM_TOKEN_LEN + 1] = "";

		for (i = 0; i < VMM_TOKEN_LEN; i += 4) {
			bus_access(&a->vm.pio, VMM_TOKEN_BASE + i, wa + i, 4, 0);
			bus_access(&b->vm.pio, VMM_TOKEN_BASE + i, wb + i, 4, 0);
		}
		assert_string_equal(wa, "secret-token");
		assert_string_equal(wb, "clone-token");
		assert_true(wb[VMM_TOKEN_LEN - 1] == 0); /* NUL-padded to the end */
	}
	for (i = 0; i < 3; i++) {
		assert_int_equal(kvm_ioctl_ptr(a->vm.vcpus[i].fd, KVM_GET_REGS, &ra), 0);
		assert_int_equal(kvm_ioctl_ptr(b->vm.vcpus[i].fd, KVM_GET_REGS, &rb), 0);
		assert_memory_equal(&ra, &rb, sizeof(ra));
		assert_int_equal(kvm_ioctl_ptr(a->vm.vcpus[i].fd, KVM_GET_MP_STATE, &ma), 0);
		assert_int_equal(kvm_ioctl_ptr(b->vm.vcpus[i].fd, KVM_GET_MP_STATE, &mb), 0);
		assert_int_equal(ma.mp_state, mb.mp_state);
		assert_int_equal(kvm_ioctl_ptr(a->vm.vcpus[i].fd, KVM_GET_SREGS, &sa), 0);
		assert_int_equal(kvm_ioctl_ptr(b->vm.vcpus[i].fd, KVM_GET_SREGS, &sb), 0);
		if (i < 2) {
			/* A vCPU that ran keeps its TR, a 64-bit TSS (type 0xb
			 * busy, 0x9 available; a KVM that emulates ring 0,
			 * kvm_pvm, reports a restored vCPU's TR as available
			 * until it runs; long mode never switches tasks, so
			 * the guest cannot tell); base, limit and selector
			 * must match. */
			assert_true(sa.tr.type == 0xb || sa.tr.type == 0x9);
			assert_true(sb.tr.type == 0xb || sb.tr.type == 0x9);
			assert_true(sa.tr.base == (i ? AP_TSS : 0));
		} else {
			/* One that never ran keeps its reset TR, whatever
			 * type this host's KVM gives it (SVM: 3, VMX: 11),
			 * and the clone gets it back (up to the same busy
			 * bit kvm_pvm reports clear). */
			assert_memory_equal(&sa.tr, &reset_tr, sizeof(reset_tr));
			assert_int_equal(sb.tr.type | 2, reset_tr.type | 2);
		}
		sb.tr.type = sa.tr.type;
		assert_memory_equal(&sa, &sb, sizeof(sa));
	}
	/* Guest memory is the snapshot's, copy-on-write. */
	assert_memory_equal(gm_ptr(&a->vm.gm, 0x100000, 4096), gm_ptr(&b->vm.gm, 0x100000, 4096), 4096);
	snapshot_close(&s);
	/* The clone runs on (it spins: still running after a while), and
	 * the original resumes independently. */
	assert_int_equal(pthread_create(&b->t, NULL, run_thread, b), 0);
	vm_resume(&a->vm);
	usleep(200000);
	assert_int_equal(atomic_load(&b->vm.exit_reason), VM_RUNNING);
	assert_int_equal(atomic_load(&a->vm.exit_reason), VM_RUNNING);
	stop(b);
	stop(a);
	free(a);
	free(b);
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

/* Restores `dir` into r (started, not run) and compares all of guest RAM
 * with the paused original's. */
static void restore_equals(struct run *r, struct run *orig, const char *dir)
{
	struct snapshot s;

	assert_int_equal(snapshot_open(&s, dir), 0);
	config(r);
	r->cfg.restore = &s;
	assert_int_equal(vm_create(&r->vm, &r->cfg), 0);
	assert_int_equal(r->vm.gm.total, orig->vm.gm.total);
	assert_memory_equal(r->vm.gm.map, orig->vm.gm.map, orig->vm.gm.total);
	snapshot_close(&s);
	vm_destroy(&r->vm);
	close(r->out[0]);
	close(r->out[1]);
}

/* Dirty tracking end to end on KVM: a full snapshot, the guest runs and a
 * "device" writes a page (KVM's log cannot see that one), a diff holds
 * just the dirtied pages, and restoring the diff (base + pages) gives the
 * original's RAM byte for byte; merge flattens it; an in-place update of
 * a full snapshot gives the same. Prints full vs diff bytes and times. */
static void vm_diff_snapshots(void **state)
{
	struct run *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	char tmpl[] = "/tmp/vmm-test-diff-XXXXXX", full[96], diff[96], merged[96], inpl[96];
	struct snap_opts fo = { 0 }, dopt = { .diff = 1 };
	struct snap_stats fs, ds, is;
	struct snapshot s;
	uint64_t t0, t_full, t_diff, t_inpl;
	uint8_t marker[64];

	(void)state;
	if (!have_kvm()) {
		free(a);
		free(b);
		skip();
	}
	assert_non_null(mkdtemp(tmpl));
	snprintf(full, sizeof(full), "%s/full", tmpl);
	snprintf(diff, sizeof(diff), "%s/diff", tmpl);
	snprintf(merged, sizeof(merged), "%s/merged", tmpl);
	snprintf(inpl, sizeof(inpl), "%s/inplace", tmpl);
	config(a);
	a->cfg.track_dirty = 1;
	assert_int_equal(vm_create(&a->vm, &a->cfg), 0);
	assert_non_null(a->vm.gm.dirty.w);
	assert_int_equal(pthread_create(&a->t, NULL, run_thread, a), 0);
	wait_output(a, "spinning");
	assert_int_equal(vm_pause(&a->vm), 0);
	/* No snapshot yet: nothing to layer a diff on. */
	assert_int_equal(vm_snapshot_ex(&a->vm, diff, &dopt, &ds), -EINVAL);
	t0 = now_us();
	assert_int_equal(vm_snapshot_ex(&a->vm, full, &fo, &fs), 0);
	t_full = now_us() - t0;

	vm_resume(&a->vm);
	usleep(100000);
	assert_int_equal(vm_pause(&a->vm), 0);
	memset(marker, 0x5a, sizeof(marker));
	assert_int_equal(gm_write(&a->vm.gm, 0x345000, marker, sizeof(marker)), 0); /* a device's write */
	t0 = now_us();
	assert_int_equal(vm_snapshot_ex(&a->vm, diff, &dopt, &ds), 0);
	t_diff = now_us() - t0;
	print_message("full snapshot: %llu bytes of memory written, %llu us; diff: %llu pages, %llu bytes, %llu us "
		      "(%s dirty log)\n",
		      (unsigned long long)fs.mem_written, (unsigned long long)t_full, (unsigned long long)ds.pages,
		      (unsigned long long)ds.mem_written, (unsigned long long)t_diff,
		      a->vm.dirty_manual ? "manual-protect" : "plain");
	assert_true(ds.pages >= 1 && ds.mem_written < fs.mem_written);
	assert_int_equal(snapshot_open(&s, diff), 0);
	assert_int_equal(s.ident.kind, SNAP_KIND_DIFF);
	assert_true(dirty_test(&s.ident.pages, 0x345)); /* the device's page */
	snapshot_close(&s);

	/* The diff restores to the original's RAM, byte for byte. */
	restore_equals(b, a, diff);
	/* Merged into a full snapshot: the same. */
	assert_int_equal(snapshot_merge(NULL, diff, merged), 0);
	assert_int_equal(snapshot_open(&s, merged), 0);
	assert_int_equal(s.ident.kind, SNAP_KIND_FULL);
	snapshot_close(&s);
	restore_equals(b, a, merged);

	/* The dirty bitmap counts from the diff now: an in-place update of
	 * the full one is refused (it would miss pages). */
	assert_int_equal(snapshot_update_inplace(&a->vm, full, &is), -ESTALE);
	assert_int_equal(vm_snapshot_ex(&a->vm, inpl, &fo, &fs), 0);
	vm_resume(&a->vm);
	usleep(100000);
	assert_int_equal(vm_pause(&a->vm), 0);
	memset(marker, 0xa5, sizeof(marker));
	assert_int_equal(gm_write(&a->vm.gm, 0x789000, marker, sizeof(marker)), 0);
	t0 = now_us();
	assert_int_equal(snapshot_update_inplace(&a->vm, inpl, &is), 0);
	t_inpl = now_us() - t0;
	print_message("in-place update: %llu pages, %llu journal bytes, %llu us\n", (unsigned long long)is.pages,
		      (unsigned long long)is.mem_written, (unsigned long long)t_inpl);
	restore_equals(b, a, inpl);

	stop(a);
	cleanup_dir(tmpl);
	free(a);
	free(b);
}

/* Copies the snapshot, applies `fn` to its state file's bytes (optionally
 * fixing the checksums, as a deliberate tamperer would), and tries it. */
static int try_variant(void (*fn)(uint8_t *p, size_t *len), int fix_crc, int (*mem)(const char *path))
{
	char dir[128], cmd[512], p[192];
	struct snapshot s;
	struct stat st;
	uint8_t *buf;
	size_t len;
	FILE *f;
	int r;

	snprintf(dir, sizeof(dir), "%s-variant", snapdir);
	cleanup_dir(dir);
	snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", snapdir, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(p, sizeof(p), "%s/state", dir);
	assert_int_equal(stat(p, &st), 0);
	len = (size_t)st.st_size;
	buf = malloc(len + 64);
	f = fopen(p, "rb");
	assert_int_equal(fread(buf, 1, len, f), len);
	fclose(f);
	if (fn)
		fn(buf, &len);
	if (fix_crc) {
		le32(buf + 16, (uint32_t)(len - SNAP_HEADER));
		le32(buf + 24, snap_crc32c(0, buf + SNAP_HEADER, len - SNAP_HEADER));
		le32(buf + 28, snap_crc32c(0, buf, 28));
	}
	f = fopen(p, "wb");
	assert_int_equal(fwrite(buf, 1, len, f), len);
	fclose(f);
	free(buf);
	if (mem) {
		snprintf(p, sizeof(p), "%s/memory", dir);
		assert_int_equal(mem(p), 0);
	}
	r = snapshot_open(&s, dir);
	if (r == 0) {
		struct run *b = calloc(1, sizeof(*b));

		config(b);
		b->cfg.restore = &s;
		b->cfg.cpus = s.conf.cpus; /* as vmm restore does */
		r = vm_create(&b->vm, &b->cfg);
		if (r == 0)
			vm_destroy(&b->vm);
		close(b->out[0]);
		close(b->out[1]);
		free(b);
		snapshot_close(&s);
	}
	cleanup_dir(dir);
	return r;
}

static void flip_magic(uint8_t *p, size_t *len) { (void)len; p[1] ^= 0xff; }
static void bump_version(uint8_t *p, size_t *len) { (void)len; p[8]++; le32(p + 28, snap_crc32c(0, p, 28)); }
static void flip_body(uint8_t *p, size_t *len) { p[*len / 2] ^= 0x10; }
static void truncate_state(uint8_t *p, size_t *len) { (void)p; *len -= 100; }
static void drop_last_section_byte(uint8_t *p, size_t *len) { (void)p; *len -= 1; }

/* Finds the first section with `tag`; returns the offset of its body. */
static size_t find_section(const uint8_t *p, size_t len, uint32_t tag)
{
	size_t off = SNAP_HEADER;

	while (off + 8 <= len) {
		uint32_t t = p[off] | p[off + 1] << 8 | p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
		uint32_t n = p[off + 4] | p[off + 5] << 8 | p[off + 6] << 16 | (uint32_t)p[off + 7] << 24;

		if (t == tag)
			return off + 8;
		off += 8 + n;
	}
	fail_msg("section not found");
	return 0;
}

/* The memory region count in MEMR: a layout this VM does not have. */
static void wrong_layout(uint8_t *p, size_t *len)
{
	p[find_section(p, *len, SNAP_TAG('M', 'E', 'M', 'R'))] = 3;
}

/* The vCPU count in CONF: the VM built has 1 vCPU, the file holds 2. */
static void wrong_cpus(uint8_t *p, size_t *len)
{
	p[find_section(p, *len, SNAP_TAG('C', 'O', 'N', 'F')) + 8] = 1;
}

/* Another CPU vendor. */
static void other_host(uint8_t *p, size_t *len)
{
	memcpy(p + find_section(p, *len, SNAP_TAG('H', 'O', 'S', 'T')), "OtherVendor!", 12);
}

static int shrink_memory(const char *path) { return truncate(path, 4096); }
static int remove_memory(const char *path) { return unlink(path); }

static void corrupted_snapshots_refused(void **state)
{
	(void)state;
	if (!have_kvm() || !snapdir[0])
		skip();
	assert_int_equal(try_variant(NULL, 0, NULL), 0); /* the copy itself is good */
	assert_int_not_equal(try_variant(flip_magic, 0, NULL), 0);
	assert_int_not_equal(try_variant(bump_version, 0, NULL), 0);
	assert_int_not_equal(try_variant(flip_body, 0, NULL), 0);
	assert_int_not_equal(try_variant(truncate_state, 0, NULL), 0);
	assert_int_not_equal(try_variant(drop_last_section_byte, 0, NULL), 0);
	assert_int_not_equal(try_variant(drop_last_section_byte, 1, NULL), 0);
	assert_int_not_equal(try_variant(NULL, 0, shrink_memory), 0);
	assert_int_not_equal(try_variant(NULL, 0, remove_memory), 0);
	/* Tampered with valid checksums: caught by the checks behind them. */
	assert_int_not_equal(try_variant(wrong_layout, 1, NULL), 0);
	assert_int_not_equal(try_variant(wrong_cpus, 1, NULL), 0);
	assert_int_not_equal(try_variant(other_host, 1, NULL), 0);
	{
		struct snapshot s;

		assert_int_not_equal(snapshot_open(&s, "/nonexistent/snapshot"), 0);
		assert_int_not_equal(snapshot_open(&s, "/tmp"), 0); /* a directory without state */
	}
	cleanup_dir(snapdir);
	*strrchr(snapdir, '/') = '\0';
	cleanup_dir(snapdir);
}

/* ---- the MMDS record (snapmmds.h), without KVM ---- */

static void head_conf(struct snap_conf *c, int with_mmds)
{
	memset(c, 0, sizeof(*c));
	c->mem_bytes = 64 << 20;
	c->cpus = 1;
	c->nr_nets = 2;
	snprintf(c->nets[0].tap, sizeof(c->nets[0].tap), "tap0");
	snprintf(c->nets[1].tap, sizeof(c->nets[1].tap), "tap1");
	memcpy(c->vendor, "GenuineIntel", 13);
	if (with_mmds)
		c->mmds = (struct snap_mmds){ .present = 1, .version = 2, .ipv4 = 0xa9feaa02u, .imds_compat = 1,
					      .nets = 2 };
}

static size_t body_find(const struct sbuf *b, uint32_t tag)
{
	size_t off = 0;

	while (off + 8 <= b->len) {
		uint32_t t, n;

		memcpy(&t, b->p + off, 4);
		memcpy(&n, b->p + off + 4, 4);
		if (t == tag)
			return off;
		off += 8 + n;
	}
	return (size_t)-1;
}

static int head_load(const struct sbuf *b, struct snap_conf *c)
{
	struct snap_ident id;
	struct srd r;
	int e;

	sr_init(&r, b->p, b->len);
	memset(c, 0, sizeof(*c));
	e = snap_head_load(&r, c, &id);
	snapid_free(&id);
	if (!e && r.off != r.len)
		e = -1; /* the head must be all there is in these bodies */
	return e;
}

/* A diff names its base by path, and a tampered one may name any
 * directory: opening a base changes nothing there (the recovery of an
 * interrupted update unlinks state.new and diskN.next), where opening a
 * snapshot does. */
static void base_open_changes_nothing(void **state)
{
	char dir[] = "/tmp/test_snapshot_base.XXXXXX", p[PATH_MAX];
	static const char *const names[] = { "state.new", "disk0.next", "disk3.next" };
	struct snapshot s;
	unsigned i;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		f = fopen(p, "w");
		assert_non_null(f);
		fputs("someone else's\n", f);
		fclose(f);
	}
	assert_int_not_equal(snapshot_open_base(&s, dir), 0); /* no state: not a snapshot */
	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		assert_int_equal(access(p, F_OK), 0);
	}
	/* what a snapshot's own open does (and the chain used to do) */
	assert_int_not_equal(snapshot_open(&s, dir), 0);
	snprintf(p, sizeof(p), "%s/state.new", dir);
	assert_int_not_equal(access(p, F_OK), 0);
	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

static void mmds_record_roundtrip(void **state)
{
	struct snap_conf c, back;
	struct snap_ident id;
	struct sbuf b;
	struct srd r;
	size_t at;

	(void)state;
	memset(&id, 0, sizeof(id));
	id.id[0] = 7;
	/* With an MMDS: its section, after the identity, read back whole. */
	head_conf(&c, 1);
	sb_init(&b);
	snap_head_save(&b, &c, &id);
	assert_int_equal(b.err, 0);
	at = body_find(&b, SNAP_TAG_MMDS);
	assert_true(at != (size_t)-1);
	assert_true(body_find(&b, SNAP_TAG_SNID) < at);
	assert_int_equal(head_load(&b, &back), 0);
	assert_int_equal(back.mmds.present, 1);
	assert_int_equal(back.mmds.version, 2);
	assert_int_equal(back.mmds.ipv4, 0xa9feaa02u);
	assert_int_equal(back.mmds.imds_compat, 1);
	assert_int_equal(back.mmds.nets, 2);
	assert_string_equal(back.nets[1].tap, "tap1");

	/* A vmm from before the record reads CONF, HOST, SNID and then wants
	 * the memory layout: it meets MMDS there and refuses the file. */
	sr_init(&r, b.p, b.len);
	r.off = at;
	assert_int_not_equal(sr_begin(&r, SNAP_TAG('M', 'E', 'M', 'R'), "memory"), 0);
	assert_non_null(strstr(r.why, "out of order"));

	/* Tampered records are refused like a client's PUT /mmds/config. */
	{
		static const struct { size_t field; uint32_t v; } bad[] = {
			{ 0, 3 },           /* version */
			{ 0, 0 },
			{ 4, 0x0a000001u }, /* 10.0.0.1: not link-local */
			{ 4, 0xa9fe0001u }, /* 169.254.0.1: outside 169.254.1-254 */
			{ 9, 4 },           /* interface 2 of 2 */
			{ 9, 0 },           /* no interface */
		};
		for (unsigned k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			struct sbuf t;
			uint8_t *f;

			sb_init(&t);
			sb_bytes(&t, b.p, b.len);
			f = t.p + at + 8 + bad[k].field;
			for (unsigned i = 0; i < 4; i++)
				f[i] = (uint8_t)(bad[k].v >> (8 * i));
			assert_int_not_equal(head_load(&t, &back), 0);
			sb_free(&t);
		}
	}
	/* A section with a byte more than its fields: refused. */
	{
		struct sbuf t;

		sb_init(&t);
		sb_bytes(&t, b.p, at);
		sb_begin(&t, SNAP_TAG_MMDS);
		sb_bytes(&t, b.p + at + 8, b.len - at - 8);
		sb_u8(&t, 0);
		sb_end(&t);
		assert_int_not_equal(head_load(&t, &back), 0);
		sb_free(&t);
	}
	sb_free(&b);

	/* Without an MMDS: no section, the bytes an older vmm wrote and reads. */
	head_conf(&c, 0);
	sb_init(&b);
	snap_head_save(&b, &c, &id);
	assert_int_equal(body_find(&b, SNAP_TAG_MMDS), (size_t)-1);
	assert_int_equal(head_load(&b, &back), 0);
	assert_int_equal(back.mmds.present, 0);
	sb_free(&b);
}

/* Where each shared drive is mounted (a clone's record names it): read
 * back; a guest directory guest-init could not mount at is refused; a
 * config section from before the field (it ends after the balloon's)
 * reads with none. */
static void drive_at_roundtrip(void **state)
{
	struct snap_conf c, back;
	struct snap_ident id;
	struct sbuf b, t;
	uint32_t n;

	(void)state;
	memset(&id, 0, sizeof(id));
	head_conf(&c, 0);
	c.nr_fs = 2;
	snprintf(c.fs[0].tag, sizeof(c.fs[0].tag), "work");
	snprintf(c.fs[0].path, sizeof(c.fs[0].path), "/srv/work");
	snprintf(c.fs[0].at, sizeof(c.fs[0].at), "/w");
	snprintf(c.fs[1].tag, sizeof(c.fs[1].tag), "plain");
	snprintf(c.fs[1].path, sizeof(c.fs[1].path), "/srv/plain");
	sb_init(&b);
	snap_head_save(&b, &c, &id);
	assert_int_equal(b.err, 0);
	assert_int_equal(head_load(&b, &back), 0);
	assert_string_equal(back.fs[0].at, "/w");
	assert_string_equal(back.fs[1].at, "");

	/* the same section without the two strings (4+2 and 4+0 bytes) */
	assert_int_equal(body_find(&b, SNAP_TAG('C', 'O', 'N', 'F')), 0);
	memcpy(&n, b.p + 4, 4);
	n = le32toh(n);
	sb_init(&t);
	sb_begin(&t, SNAP_TAG('C', 'O', 'N', 'F'));
	sb_bytes(&t, b.p + 8, n - 10);
	sb_end(&t);
	sb_bytes(&t, b.p + 8 + n, b.len - 8 - n);
	assert_int_equal(head_load(&t, &back), 0);
	assert_string_equal(back.fs[0].at, "");
	assert_string_equal(back.fs[1].tag, "plain");
	sb_free(&t);
	sb_free(&b);

	snprintf(c.fs[0].at, sizeof(c.fs[0].at), "/w/../etc");
	sb_init(&b);
	snap_head_save(&b, &c, &id);
	assert_int_not_equal(head_load(&b, &back), 0);
	sb_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fields_roundtrip),
		cmocka_unit_test(string_with_nul_refused),
		cmocka_unit_test(file_corruptions_refused),
		cmocka_unit_test(tr_type_per_vendor),
		cmocka_unit_test(mmds_record_roundtrip),
		cmocka_unit_test(drive_at_roundtrip),
		cmocka_unit_test(base_open_changes_nothing),
		cmocka_unit_test(vm_snapshot_restore),
		cmocka_unit_test(vm_diff_snapshots),
		cmocka_unit_test(corrupted_snapshots_refused),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
