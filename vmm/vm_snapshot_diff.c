/* Diff snapshots and in-place updates of a VM: dirty tracking in KVM,
 * restoring a diff chain, merging, and the in-place update (snapshot.h;
 * formats and the commit in snapdiff.c; docs/snapshot.md). */
#include "vmm/vm_snapshot.h"
#include "vmm/base/snapfmt.h"
#include "vmm/vm_snapshot_priv.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

int vm_track_dirty(struct vm *vm)
{
	int r = gm_track_dirty(&vm->gm), caps;

	if (r)
		return r;
	/* Manual protection: KVM_GET_DIRTY_LOG no longer clears and
	 * re-protects every page at once; we clear what we harvested with
	 * KVM_CLEAR_DIRTY_LOG. Without INITIALLY_SET: pages start clean. */
	caps = ioctl(vm->fd, KVM_CHECK_EXTENSION, KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2);
	if (caps > 0 && (caps & KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE)) {
		struct kvm_enable_cap cap = {
			.cap = KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
			.args = { KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE },
		};

		vm->dirty_manual = ioctl(vm->fd, KVM_ENABLE_CAP, &cap) == 0;
	}
	log_debug("dirty tracking on (%llu pages, %s)", (unsigned long long)vm->gm.dirty.pages,
		  vm->dirty_manual ? "manual protect" : "KVM_GET_DIRTY_LOG clears");
	return 0;
}

static void fsync_parent(const char *dir)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(dir, '/');

	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else
		snprintf(parent, sizeof(parent), "%.*s", slash == dir ? 1 : (int)(slash - dir), dir);
	(void)snap_fsync_dir(parent);
}

/* The chain below diff s: chain[0] = s (borrowed), then each base opened,
 * down to a full snapshot, each one's ID the one the diff above recorded.
 * `base` overrides where s's own base is. *n gets the length. */
static int open_chain(const struct snapshot *s, const char *base, struct snapshot **chain, unsigned *n)
{
	const struct snapshot *cur = s;

	*n = 1;
	chain[0] = (struct snapshot *)s;
	while (cur->ident.kind == SNAP_KIND_DIFF) {
		const char *where = *n == 1 && base ? base : cur->ident.base_dir;
		struct snapshot *b;

		if (*n == SNAP_MAX_CHAIN) {
			log_err("snapshot %s: more than %d diffs on one base: merge some (vmm snapshot merge)",
				s->dir, SNAP_MAX_CHAIN - 1);
			return -ELOOP;
		}
		b = calloc(1, sizeof(*b));
		if (!b)
			return -ENOMEM;
		if (snapshot_open_base(b, where)) {
			log_err("snapshot %s: its base %s cannot be opened (moved? give it with "
				"'vmm snapshot merge BASE DIFF')", cur->dir, where);
			free(b);
			return -ENOENT;
		}
		chain[(*n)++] = b;
		if (memcmp(b->ident.id, cur->ident.base_id, SNAP_ID_LEN)) {
			log_err("snapshot %s: %s is not the snapshot this diff was taken on (its ID differs: "
				"replaced or updated since)", cur->dir, b->dir);
			return -ESTALE;
		}
		if (b->conf.mem_bytes != s->conf.mem_bytes) {
			log_err("snapshot %s: its base %s has another memory size", cur->dir, b->dir);
			return -EINVAL;
		}
		cur = b;
	}
	return 0;
}

static void close_chain(struct snapshot **chain, unsigned n)
{
	unsigned i;

	for (i = 1; i < n; i++) {
		snapshot_close(chain[i]);
		free(chain[i]);
	}
}

static int open_memory(const struct snapshot *s, int flags)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s/%s", s->dir, SNAP_MEMORY_FILE) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	return open(p, flags | O_CLOEXEC | O_NOFOLLOW);
}

int snap_map_memory(struct gm *gm, const struct snapshot *s, char base_dir[PATH_MAX], uint8_t base_id[SNAP_ID_LEN])
{
	struct gm_region regions[GM_MAX_REGIONS];
	struct snapshot *chain[SNAP_MAX_CHAIN];
	char p[PATH_MAX];
	unsigned n = 0, i;
	int nr = gm_x86_layout(s->conf.mem_bytes, regions), r, fd;

	if (nr < 0)
		return nr;
	if ((r = open_chain(s, NULL, chain, &n)))
		goto out;
	if (snprintf(p, sizeof(p), "%s/%s", chain[n - 1]->dir, SNAP_MEMORY_FILE) >= (int)sizeof(p)) {
		r = -ENAMETOOLONG;
		goto out;
	}
	r = gm_open_file(gm, p, regions, (unsigned)nr);
	if (r) {
		log_err("snapshot %s: cannot map the memory file %s: %s", s->dir, p, strerror(-r));
		goto out;
	}
	/* Each diff's pages over its base, oldest first (private copies:
	 * the files are never written). */
	for (i = n - 1; i-- > 0;) {
		fd = open_memory(chain[i], O_RDONLY);
		r = fd < 0 ? -errno : snapmem_read_pages(gm->map, gm->total, &chain[i]->ident.pages, fd);
		if (fd >= 0)
			close(fd);
		if (r) {
			log_err("snapshot %s: reading its diff pages: %s", chain[i]->dir, strerror(-r));
			gm_destroy(gm);
			goto out;
		}
	}
	if (n > 1)
		log_info("snapshot %s: a diff on %s (%u in the chain)", s->dir, chain[n - 1]->dir, n);
	snprintf(base_dir, PATH_MAX, "%s", chain[n - 1]->dir);
	memcpy(base_id, chain[n - 1]->ident.id, SNAP_ID_LEN);
out:
	close_chain(chain, n);
	return r;
}

/* The state of diff `d` as a full snapshot: the same body, SNID now full
 * with the same ID. */
static int full_state(const struct snapshot *d, struct sbuf *b)
{
	struct snap_ident full = { .kind = SNAP_KIND_FULL };

	memcpy(full.id, d->ident.id, SNAP_ID_LEN);
	return snapid_replace(d->file + SNAP_HEADER, d->len - SNAP_HEADER, &full, b);
}

int snapshot_merge(const char *base, const char *diff, const char *out)
{
	struct snapshot *d = calloc(1, sizeof(*d)), *chain[SNAP_MAX_CHAIN];
	char target[PATH_MAX] = "", mem[PATH_MAX], root_mem[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	struct sbuf b;
	struct stat st;
	unsigned n = 0, i;
	int in_place, r, mfd = -1, fd;

	sb_init(&b);
	if (!d)
		return -ENOMEM;
	if ((r = snapshot_open(d, diff))) {
		free(d);
		return r;
	}
	if (d->ident.kind != SNAP_KIND_DIFF) {
		log_err("snapshot merge: %s is not a diff snapshot", diff);
		r = -EINVAL;
		goto out;
	}
	in_place = !out || (realpath(out, p) && !strcmp(p, d->dir));
	if (!in_place && lstat(out, &st) == 0) {
		log_err("snapshot merge: %s already exists", out);
		r = -EEXIST;
		goto out;
	}
	if ((r = open_chain(d, base, chain, &n)))
		goto out;
	if (in_place)
		snprintf(target, sizeof(target), "%s", d->dir);
	else if (snprintf(target, sizeof(target), "%s.partial-%d", out, (int)getpid()) >= (int)sizeof(target))
		r = -ENAMETOOLONG;
	else if (mkdir(target, 0700) < 0)
		r = -errno;
	if (r)
		goto out;
	if ((r = full_state(d, &b)))
		goto fail;
	if (snprintf(mem, sizeof(mem), "%s/%s", target, in_place ? "memory.merge" : SNAP_MEMORY_FILE) >=
		    (int)sizeof(mem) ||
	    snprintf(root_mem, sizeof(root_mem), "%s/%s", chain[n - 1]->dir, SNAP_MEMORY_FILE) >=
		    (int)sizeof(root_mem)) {
		r = -ENAMETOOLONG;
		goto fail;
	}
	/* The full base (a reflink where the filesystem can), then every
	 * diff's pages over it, oldest first. */
	unlink(mem);
	if ((r = snap_copy_file(root_mem, mem)))
		goto fail;
	mfd = open(mem, O_WRONLY | O_CLOEXEC);
	if (mfd < 0) {
		r = -errno;
		goto fail;
	}
	for (i = n - 1; i-- > 0 && !r;) {
		fd = open_memory(chain[i], O_RDONLY);
		r = fd < 0 ? -errno : snapmem_copy_pages(mfd, fd, &chain[i]->ident.pages);
		if (fd >= 0)
			close(fd);
	}
	if (!r && fsync(mfd) < 0)
		r = -errno;
	close(mfd);
	if (r)
		goto fail;
	if (in_place) {
		/* Memory first: a diff's state over a full memory file is still
		 * a right diff (its pages are at their offsets), so a crash
		 * between the two renames loses nothing. */
		if (snprintf(p, sizeof(p), "%s/%s", target, SNAP_MEMORY_FILE) >= (int)sizeof(p) ||
		    snprintf(q, sizeof(q), "%s/%s", target, SNAP_STATE_NEW) >= (int)sizeof(q)) {
			r = -ENAMETOOLONG;
			goto fail;
		}
		if (rename(mem, p) < 0 || snap_fsync_dir(target)) {
			r = -errno;
			goto fail;
		}
		unlink(q);
		if ((r = snapfile_write(q, &b)))
			goto fail;
		if (snprintf(p, sizeof(p), "%s/%s", target, SNAP_STATE_FILE) >= (int)sizeof(p) ||
		    rename(q, p) < 0) {
			r = -errno;
			unlink(q);
			goto out;
		}
		r = snap_fsync_dir(target);
		goto out;
	}
	for (i = 0; i < d->conf.nr_disks; i++) {
		const struct snap_disk *k = &d->conf.disks[i];

		if (k->ro)
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", d->dir, k->file) >= (int)sizeof(p) ||
		    snprintf(q, sizeof(q), "%s/%s", target, k->file) >= (int)sizeof(q)) {
			r = -ENAMETOOLONG;
			goto fail;
		}
		if ((r = snap_copy_file(p, q)))
			goto fail;
	}
	if (snprintf(p, sizeof(p), "%s/%s", target, SNAP_STATE_FILE) >= (int)sizeof(p)) {
		r = -ENAMETOOLONG;
		goto fail;
	}
	if ((r = snapfile_write(p, &b)) || (r = snap_fsync_dir(target)))
		goto fail;
	if (rename(target, out) < 0) {
		r = -errno;
		goto fail;
	}
	fsync_parent(out);
	goto out;
fail:
	log_err("snapshot merge: %s onto %s: %s", diff, n > 1 ? chain[1]->dir : "its base", strerror(-r));
	if (in_place) {
		unlink(mem);
	} else if (target[0]) {
		char cmd[PATH_MAX];
		snprintf(cmd, sizeof(cmd), "%s/%s", target, SNAP_STATE_FILE);
		unlink(cmd);
		snprintf(cmd, sizeof(cmd), "%s/%s", target, SNAP_MEMORY_FILE);
		unlink(cmd);
		for (i = 0; i < VM_MAX_DISKS; i++) {
			snprintf(cmd, sizeof(cmd), "%s/disk%u", target, i);
			unlink(cmd);
		}
		rmdir(target);
	}
out:
	close_chain(chain, n);
	sb_free(&b);
	snapshot_close(d);
	free(d);
	return r;
}

int snapshot_update_inplace(struct vm *vm, const char *dir, struct snap_stats *st)
{
	return snapshot_update_inplace_f(vm, dir, st, NULL);
}

int snapshot_update_inplace_f(struct vm *vm, const char *dir, struct snap_stats *st,
			      const struct snap_fault *f)
{
	return snapshot_update_inplace_ex(vm, dir, st, f, 0);
}

int snapshot_update_inplace_ex(struct vm *vm, const char *dir, struct snap_stats *st,
			       const struct snap_fault *f, int disks_in_place)
{
	struct snapshot *cur = calloc(1, sizeof(*cur));
	struct snap_conf *conf = calloc(1, sizeof(*conf));
	struct snap_ident ident = { .kind = SNAP_KIND_FULL };
	struct snap_inplace u = { 0 };
	struct dirty taken = { 0 };
	uint8_t now[SNAP_ID_LEN];
	uint64_t written = 0;
	struct sbuf b;
	unsigned i;
	int r;

	sb_init(&b);
	if (!cur || !conf) {
		r = -ENOMEM;
		goto out;
	}
	if (!vm->paused) {
		r = -EBUSY;
		goto out;
	}
	if (!vm->gm.dirty.w) {
		log_err("snapshot %s: an in-place update needs dirty-page tracking (--track-dirty)", dir);
		r = -EINVAL;
		goto out;
	}
	if ((r = snapshot_open(cur, dir)))
		goto out;
	if (cur->ident.kind != SNAP_KIND_FULL || cur->conf.mem_bytes != vm->cfg.mem_bytes ||
	    cur->conf.nr_disks != vm->cfg.nr_disks) {
		log_err("snapshot %s: an in-place update needs a full snapshot of this VM", dir);
		r = -EINVAL;
		goto out;
	}
	if (snapid_is_zero(cur->ident.id) || memcmp(cur->ident.id, vm->snap_id, SNAP_ID_LEN)) {
		log_err("snapshot %s is not the snapshot this VM's dirty pages count from (%s): "
			"write a full snapshot instead", dir, vm->snap_dir[0] ? vm->snap_dir : "none");
		r = -ESTALE;
		goto out;
	}
	if ((r = vm_dirty_harvest(vm)) || (r = dirty_init(&taken, vm->gm.dirty.pages)) ||
	    (r = dirty_take(&vm->gm.dirty, &taken))) {
		log_err("snapshot %s: reading the dirty log: %s", dir, strerror(-r));
		goto out;
	}
	if ((r = snapid_new(ident.id)))
		goto out;
	/* Writable disks: a fresh copy beside the old, renamed at the commit;
	 * or (standby) left where they are, fdatasync'd, recorded by path:
	 * nothing of theirs is in the journal or renamed (disk_mask 0). */
	if ((r = snap_fill_conf(vm, conf, disks_in_place ? NULL : cur->dir, ".next")))
		goto out;
	for (i = 0; !disks_in_place && i < conf->nr_disks; i++)
		if (!conf->disks[i].ro)
			u.disk_mask |= 1u << i;
	if ((r = snap_build_state(vm, &b, conf, &ident))) {
		log_err("snapshot %s: reading VM state: %s", dir, strerror(-r));
		goto out;
	}
	u.dir = cur->dir;
	u.mem = vm->gm.map;
	u.total = vm->gm.total;
	u.pages = &taken;
	u.state = &b;
	memcpy(u.new_id, ident.id, SNAP_ID_LEN);
	u.fault = f;
	r = snap_inplace_commit(&u, &written);
	if (r && r != -ECANCELED)
		log_err("snapshot %s: in-place update: %s", dir, strerror(-r));
	if (r && (snap_state_id(cur->dir, now) || memcmp(now, ident.id, SNAP_ID_LEN)))
		goto out; /* not committed: the old snapshot stands */
	/* Committed (a failure after the commit is finished by the next open). */
	memcpy(vm->snap_id, ident.id, SNAP_ID_LEN);
	if (st) {
		st->mem_written = written;
		st->mem_alloc = written;
		st->pages = dirty_count(&taken);
	}
	dirty_clear(&taken);
out:
	if (r) {
		char p[PATH_MAX];

		for (i = 0; cur && cur->dir[0] && i < VM_MAX_DISKS; i++)
			if (u.disk_mask & (1u << i) && snprintf(p, sizeof(p), "%s/disk%u.next", cur->dir, i) < (int)sizeof(p) &&
			    (snap_state_id(cur->dir, now) || memcmp(now, ident.id, SNAP_ID_LEN)))
				unlink(p);
	}
	if (taken.w)
		(void)dirty_merge(&vm->gm.dirty, &taken); /* cleared on success */
	dirty_free(&taken);
	sb_free(&b);
	if (cur) {
		snapshot_close(cur);
		free(cur);
	}
	free(conf);
	return r;
}
