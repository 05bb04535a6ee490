/* The Firecracker API's snapshot routes (fcapi_priv.h): PUT
 * /snapshot/create of a paused VM (Full or Diff, written beside and put in
 * place of an earlier one it may replace) and PUT /snapshot/load before
 * anything is configured (File or Uffd memory, network and vsock
 * overrides). The snapshot itself is vmm/vm_snapshot.h's. */
#include "vmm/api/fcapi.h"
#include "vmm/api/fcapi_priv.h"
#include "vmm/base/log.h"
#include "vmm/vm_snapshot.h"
#include "vmm/wire/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A name a vmm snapshot directory holds: state, memory, diskN (N below
 * VM_MAX_DISKS, no leading zero) and the API's vm-config.json. */
static int snapshot_own_name(const char *name)
{
	char *end;
	unsigned long i;

	if (!strcmp(name, SNAP_STATE_FILE) || !strcmp(name, SNAP_MEMORY_FILE) || !strcmp(name, FCAPI_SNAP_CONFIG) ||
	    !strcmp(name, SNAP_JOURNAL_FILE) || !strcmp(name, SNAP_STATE_NEW))
		return 1;
	if (strncmp(name, "disk", 4) || name[4] < '0' || name[4] > '9' || (name[4] == '0' && name[5]))
		return 0;
	i = strtoul(name + 4, &end, 10);
	return !*end && i < VM_MAX_DISKS;
}

/* An earlier snapshot at `dir` that a new one may replace (Firecracker
 * overwrites its files): nothing, a single file or link (a Firecracker
 * state file), or a directory that holds a regular `state` file and
 * nothing but a snapshot's own regular files. Anything else is refused
 * as a whole: the check reads every entry before anything is touched.
 * With `remove`, the same check is made again (the directory may have
 * changed since), then the entries and the directory are removed. */
static int old_snapshot(const char *dir, int remove, struct why *w)
{
	struct dirent *e;
	struct stat st;
	int fd, has_state = 0, r = 0;
	DIR *d;

	if (lstat(dir, &st) < 0)
		return errno == ENOENT ? 0 : fcapi_fail(w, "'snapshot_path' %.200s: %s", dir, strerror(errno));
	if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
		if (remove && unlink(dir) < 0)
			return fcapi_fail(w, "'snapshot_path' %.200s: %s", dir, strerror(errno));
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return fcapi_fail(w, "'snapshot_path' %.200s exists and is not a snapshot: not overwritten", dir);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fcapi_fail(w, "'snapshot_path' %.200s: %s", dir, strerror(errno));
	d = fdopendir(fd);
	if (!d) {
		r = fcapi_fail(w, "'snapshot_path' %.200s: %s", dir, strerror(errno));
		close(fd);
		return r;
	}
	while (!r && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!snapshot_own_name(e->d_name) || fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			r = fcapi_fail(w, "'snapshot_path' %.200s exists and is not a snapshot (it holds %.64s): not overwritten",
				 dir, e->d_name);
		else if (!strcmp(e->d_name, SNAP_STATE_FILE))
			has_state = 1;
	}
	if (!r && !has_state)
		r = fcapi_fail(w, "'snapshot_path' %.200s exists and is not a snapshot (no state file): not overwritten", dir);
	if (!r && remove) {
		rewinddir(d);
		while (!r && (e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlinkat(fd, e->d_name, 0) < 0)
				r = fcapi_fail(w, "'snapshot_path' %.200s: removing %.64s: %s", dir, e->d_name, strerror(errno));
		if (!r && rmdir(dir) < 0)
			r = fcapi_fail(w, "'snapshot_path' %.200s: %s", dir, strerror(errno));
	}
	closedir(d);
	return r;
}

int fcapi_put_snapshot_create(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = {
		{ "snapshot_path", F_STR, 1, NULL },
		{ "mem_file_path", F_STR, 1, NULL },
		{ "snapshot_type", F_STR, 0, NULL },
	};
	const char *type;
	char dir[PATH_MAX], mem[PATH_MAX], own_mem[PATH_MAX], tmp[PATH_MAX], side[PATH_MAX];
	struct snap_opts o = { 0 };
	struct snap_stats sst = { 0 };
	uint64_t bytes = 0;
	size_t n;
	int r;

	if ((r = fcapi_check_fields(b, f, 3, w)))
		return r;
	type = fcapi_get_str(b, "snapshot_type");
	if (type && strcmp(type, "Full") && strcmp(type, "Diff"))
		return fcapi_fail(w, "'snapshot_type' %.16s: Full or Diff", type);
	if ((r = fcapi_abs_path(dir, sizeof(dir), fcapi_get_str(b, "snapshot_path"), "snapshot_path", w)) ||
	    (r = fcapi_abs_path(mem, sizeof(mem), fcapi_get_str(b, "mem_file_path"), "mem_file_path", w)))
		return r;
	for (n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
		dir[n - 1] = '\0'; /* DIR.new-PID beside DIR, not in it */
	if (snprintf(own_mem, sizeof(own_mem), "%s/%s", dir, SNAP_MEMORY_FILE) >= (int)sizeof(own_mem) ||
	    snprintf(tmp, sizeof(tmp), "%s.new-%d", dir, (int)getpid()) >= (int)sizeof(tmp) ||
	    snprintf(side, sizeof(side), "%s/%s", tmp, FCAPI_SNAP_CONFIG) >= (int)sizeof(side))
		return fcapi_fail(w, "'snapshot_path' is too long");
	if (!a->vm)
		return fcapi_fail(w, MSG_BEFORE_START);
	if (!a->vm->paused)
		return fcapi_fail(w, "Create snapshot only while the microVM is paused (PATCH /vm {\"state\": \"Paused\"} first)");
	if (!strcmp(mem, dir))
		return fcapi_fail(w, "'mem_file_path' and 'snapshot_path' must differ");
	o.diff = type && !strcmp(type, "Diff");
	o.final_dir = dir;
	if (o.diff && !a->vm->gm.dirty.w)
		return fcapi_fail(w, "Diff snapshots need dirty page tracking: set track_dirty_pages in /machine-config "
			    "(or /snapshot/load)");
	if (o.diff && !a->vm->snap_dir[0])
		return fcapi_fail(w, "a Diff snapshot holds the pages written since the last snapshot or load, and this "
			    "microVM has none: create a Full snapshot first");
	if (o.diff && !strcmp(a->vm->snap_dir, dir))
		return fcapi_fail(w, "a Diff snapshot cannot replace the snapshot it is layered on (%.200s): give another "
			    "'snapshot_path'", dir);
	/* Every refusal before anything is written. */
	if ((r = old_snapshot(dir, 0, w)))
		return r;
	if (strcmp(mem, own_mem)) {
		struct stat st;

		n = strlen(dir);
		if (!strncmp(mem, dir, n) && mem[n] == '/')
			return fcapi_fail(w, "'mem_file_path' inside 'snapshot_path' can only be its %s file", SNAP_MEMORY_FILE);
		if (lstat(mem, &st) == 0 && S_ISDIR(st.st_mode))
			return fcapi_fail(w, "'mem_file_path' %.200s is a directory", mem);
	}
	/* Written beside, then put in place: a failure leaves the old one. */
	r = vm_snapshot_ex(a->vm, tmp, &o, &sst);
	bytes = sst.mem_alloc;
	if (r)
		return fcapi_fail(w, "snapshot to %.200s failed: %s (nothing was left behind)", dir, strerror(-r));
	{
		/* The API's configuration, for network_overrides' iface ids on load. */
		char *cfg = malloc(FCAPI_REPLY_MAX);
		size_t len = cfg ? fcapi_vm_config_json(a, cfg, FCAPI_REPLY_MAX) : 0;
		FILE *fp = len ? fopen(side, "we") : NULL;

		if (fp) {
			fwrite(cfg, 1, len, fp);
			fclose(fp);
		}
		free(cfg);
	}
	/* Checked again as it is removed (it may have changed meanwhile):
	 * a refusal removes the new one, and nothing was changed. */
	if ((r = old_snapshot(dir, 1, w))) {
		char why[600];
		struct why w2 = { why, sizeof(why) };

		if (old_snapshot(tmp, 1, &w2))
			log_warn("snapshot: could not remove %s: %s", tmp, why);
		return r;
	}
	if (rename(tmp, dir) < 0)
		return fcapi_fail(w, "the snapshot is in %.200s, but could not take the place of %.200s: %s", tmp, dir,
			    strerror(errno));
	if (strcmp(mem, own_mem)) {
		/* Firecracker's memory file: here a link to the directory's. */
		unlink(mem);
		if (symlink(own_mem, mem) < 0)
			return fcapi_fail(w, "the snapshot is in %.200s, but mem_file_path could not link to its memory file: %s",
				    dir, strerror(errno));
	}
	a->n.snapshot_create++;
	log_info("%s snapshot written to %s (memory %llu KiB on disk, %llu pages)", o.diff ? "diff" : "full", dir,
		 (unsigned long long)(bytes >> 10), (unsigned long long)sst.pages);
	return 0;
}

static int same_file(const char *x, const char *y)
{
	struct stat a, b;

	return stat(x, &a) == 0 && stat(y, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* network_overrides: each names an interface the snapshot fcapi_has (by the id
 * it had in the API that made it, else "ethN" for the Nth), once. */
static int load_overrides(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field nf[] = {
		{ "iface_id", F_STR, 1, NULL },
		{ "host_dev_name", F_STR, 1, NULL },
	};
	static const struct field vf[] = { { "uds_path", F_STR, 1, NULL } };
	const struct json *arr = json_get(b, "network_overrides"), *e, *v = json_get(b, "vsock_override");
	int r;

	a->nr_load_net = 0;
	a->load_vsock_uds[0] = '\0';
	if (arr && arr->type != JSON_NULL) {
		for (e = arr->u.kids.first; e; e = e->next) {
			struct fcapi_net_override *o;
			const char *id, *dev;
			unsigned i;

			if ((r = fcapi_check_fields(e, nf, 2, w)))
				return fcapi_in_field(w, "network_overrides", NULL);
			id = fcapi_get_str(e, "iface_id");
			dev = fcapi_get_str(e, "host_dev_name");
			if (!fcapi_id_ok(id, 63))
				return fcapi_fail(w, "'network_overrides': bad 'iface_id'");
			if (!dev[0] || strlen(dev) > 15 || strpbrk(dev, "/ ,=:"))
				return fcapi_fail(w, "'network_overrides': 'host_dev_name' must be a TAP device name of 1 to 15 characters");
			for (i = 0; i < a->nr_load_net; i++)
				if (!strcmp(a->load_net[i].iface_id, id))
					return fcapi_fail(w, "'network_overrides': interface %s given twice", id);
			if (a->nr_load_net == FCAPI_MAX_NET)
				return fcapi_fail(w, "'network_overrides': at most %d", FCAPI_MAX_NET);
			o = &a->load_net[a->nr_load_net++];
			snprintf(o->iface_id, sizeof(o->iface_id), "%s", id);
			snprintf(o->host_dev, sizeof(o->host_dev), "%s", dev);
		}
	}
	if (v && v->type != JSON_NULL) {
		if ((r = fcapi_check_fields(v, vf, 1, w)))
			return fcapi_in_field(w, "vsock_override", NULL);
		if (!fcapi_get_str(v, "uds_path")[0])
			return fcapi_fail(w, "'vsock_override.uds_path' must not be empty");
		if ((r = fcapi_copy_str(a->load_vsock_uds, sizeof(a->load_vsock_uds), fcapi_get_str(v, "uds_path"),
				  "vsock_override.uds_path", w)))
			return r;
	}
	return 0;
}

static int put_snapshot_load(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = {
		{ "snapshot_path", F_STR, 1, NULL },
		{ "mem_file_path", F_STR, 0, NULL },
		{ "mem_backend", F_OBJ, 0, NULL },
		{ "enable_diff_snapshots", F_BOOL, 0, NULL },
		{ "track_dirty_pages", F_BOOL, 0, NULL },
		{ "resume_vm", F_BOOL, 0, NULL },
		{ "network_overrides", F_ARR, 0, NULL },
		{ "vsock_override", F_OBJ, 0, NULL },
		{ "clock_realtime", F_BOOL, 0, NULL },
		{ "huge_pages", F_STR, 0, NULL },
	};
	static const struct field bf[] = {
		{ "backend_path", F_STR, 1, NULL }, /* Firecracker's order: serde names the first missing */
		{ "backend_type", F_STR, 1, NULL },
	};
	const char *mem, *hp = fcapi_get_str(b, "huge_pages");
	char dir[PATH_MAX], membuf[PATH_MAX], own_mem[PATH_MAX], state[PATH_MAX];
	const struct json *mb = json_get(b, "mem_backend");
	int r, uffd = 0;

	/* serde_json meets mem_backend before the end of the body, where
	 * it notices a missing snapshot_path. */
	if ((mb && mb->type == JSON_OBJ && (r = fcapi_check_fields(mb, bf, 2, w))) ||
	    (r = fcapi_check_fields(b, f, 10, w)))
		return r;
	if (fcapi_has(b, "mem_file_path") && fcapi_has(b, "mem_backend"))
		return fcapi_fail(w, FCAPI_DESER "too many fields: either `mem_backend` or `mem_file_path` exclusively is "
				  "required.");
	if (!fcapi_has(b, "mem_file_path") && !fcapi_has(b, "mem_backend"))
		return fcapi_fail(w, FCAPI_DESER "missing field: either `mem_backend` or `mem_file_path` is required.");
	if (fcapi_has(b, "mem_backend")) {
		const struct json *bt = json_get(mb, "backend_type");
		const char *t = bt->u.str.s;

		uffd = !strcmp(t, "Uffd");
		if (!uffd && strcmp(t, "File"))
			return fcapi_deser_fail(w, bt->end, "unknown variant `%.16s`, expected `File` or `Uffd`", t);
		mem = fcapi_get_str(mb, "backend_path");
	} else {
		mem = fcapi_get_str(b, "mem_file_path");
	}
	/* Firecracker: mem_file_path and enable_diff_snapshots are deprecated. */
	if (fcapi_has(b, "mem_file_path") || fcapi_has(b, "enable_diff_snapshots"))
		a->deprecated = 1;
	if (hp && strcmp(hp, "Snapshot") && strcmp(hp, "None"))
		return fcapi_fail(w, "'huge_pages' %.16s is not supported: Snapshot or None", hp);
	if (a->vm || a->pending != FCAPI_NONE || a->cfg.touched)
		return fcapi_fail(w, "Loading a microVM snapshot not allowed after configuring boot-specific resources.");
	/* From here a refusal is a failed load: Firecracker answers and
	 * exits (its clients wait for that), and so does `vmm serve`. */
	a->load_failed = 1;
	if ((r = fcapi_abs_path(dir, sizeof(dir), fcapi_get_str(b, "snapshot_path"), "snapshot_path", w)) ||
	    (r = fcapi_abs_path(membuf, sizeof(membuf), mem, uffd ? "backend_path" : "mem_file_path", w)))
		return r;
	/* Uffd: the handler's socket, connected once the snapshot checks out
	 * (cli/run.c, vmm/base/uffd.h); it serves the memory, so no file here. */
	if (uffd && strlen(membuf) >= sizeof(a->load_uffd))
		return fcapi_fail(w, "'backend_path' %.200s is too long for a Unix socket (at most %zu bytes)", membuf,
			    sizeof(a->load_uffd) - 1);
	if (snprintf(own_mem, sizeof(own_mem), "%s/%s", dir, SNAP_MEMORY_FILE) >= (int)sizeof(own_mem) ||
	    snprintf(state, sizeof(state), "%s/%s", dir, SNAP_STATE_FILE) >= (int)sizeof(state) ||
	    strlen(dir) >= sizeof(a->load_dir))
		return fcapi_fail(w, "'snapshot_path' is too long");
	if (access(state, R_OK) < 0)
		return fcapi_fail(w, "'snapshot_path' %.200s: not a vmm snapshot directory (%s)", dir, strerror(errno));
	if (!uffd && !same_file(membuf, own_mem))
		return fcapi_fail(w, "the memory file must be the snapshot's own (%.200s, or a link to it)", own_mem);
	if ((r = load_overrides(a, b, w)))
		return r;
	snprintf(a->load_dir, sizeof(a->load_dir), "%s", dir);
	snprintf(a->load_uffd, sizeof(a->load_uffd), "%s", uffd ? membuf : "");
	a->load_resume = fcapi_get_bool(b, "resume_vm", 0);
	a->load_clock_realtime = fcapi_get_bool(b, "clock_realtime", 0);
	/* Tracking for Diff snapshots of the loaded VM (GET /vm/config shows it). */
	a->cfg.track_dirty_pages = fcapi_get_bool(b, "track_dirty_pages", 0) || fcapi_get_bool(b, "enable_diff_snapshots", 0);
	a->pending = FCAPI_LOAD;
	a->load_failed = 0;
	a->n.snapshot_load++;
	return 0;
}

int fcapi_put_snapshot_load(struct fcapi *a, const struct json *b, struct why *w)
{
	int r;

	a->load_failed = 0;
	r = put_snapshot_load(a, b, w);
	/* A body serde_json would not take is no failed load (Firecracker
	 * answers it and serves on). */
	if (r && a->load_failed && !strncmp(w->buf, FCAPI_DESER, strlen(FCAPI_DESER)))
		a->load_failed = 0;
	return r;
}
