/* The Firecracker API's I/O device routes (fcapi_priv.h): PUT /drives/ID,
 * /network-interfaces/ID, /vsock and /fs/ID before the start, with their
 * rate limiters; PATCH /drives/ID (a new backing file, new limits) and
 * /network-interfaces/ID (new limits) on a running VM. */
#include "vmm/api/fcapi.h"
#include "vmm/api/fcapi_priv.h"
#include "vmm/base/log.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int fcapi_put_drive(struct fcapi *a, const struct json *b, const char *path_id, struct why *w)
{
	static const struct field f[] = {
		{ "drive_id", F_STR, 1, NULL },
		{ "path_on_host", F_STR, 1, NULL },
		{ "is_root_device", F_BOOL, 1, NULL },
		{ "is_read_only", F_BOOL, 0, NULL },
		{ "partuuid", F_STR, 0, NULL },
		{ "cache_type", F_STR, 0, NULL },
		{ "io_engine", F_STR, 0, NULL },
		{ "rate_limiter", F_OBJ, 0, NULL },
		{ "socket", F_STR, 0, NULL },
	};
	struct fcapi_config *c = &a->cfg;
	const char *id, *path, *cache, *eng;
	struct fcapi_drive *d = NULL;
	char pbuf[PATH_MAX];
	struct rl_limits rl;
	int r, root, ro;
	unsigned i;

	if ((r = fcapi_check_fields(b, f, 9, w)) || (r = fcapi_pre_boot(a, w)))
		return r;
	id = fcapi_get_str(b, "drive_id");
	path = fcapi_get_str(b, "path_on_host");
	if ((r = fcapi_abs_path(pbuf, sizeof(pbuf), path, "path_on_host", w)))
		return r;
	path = pbuf;
	root = fcapi_get_bool(b, "is_root_device", 0);
	ro = fcapi_get_bool(b, "is_read_only", 0);
	cache = fcapi_get_str(b, "cache_type");
	eng = fcapi_get_str(b, "io_engine");
	if ((r = fcapi_check_id(path_id, id, "drive_id", FCAPI_DRIVE_ID_MAX, w)))
		return r;
	/* An empty string is what some clients send for "none". */
	if (fcapi_get_str(b, "partuuid") && fcapi_get_str(b, "partuuid")[0])
		return fcapi_fail(w, "'partuuid' is not supported: the root device is /dev/vda");
	if ((r = fcapi_get_limiter(b, "rate_limiter", &rl, w)))
		return r;
	if (fcapi_get_str(b, "socket") && fcapi_get_str(b, "socket")[0])
		return fcapi_fail(w, "'socket' (vhost-user) is not supported");
	if (cache && strcmp(cache, "Unsafe") && strcmp(cache, "Writeback"))
		return fcapi_fail(w, "'cache_type' must be Unsafe or Writeback");
	if (eng && strcmp(eng, "Sync"))
		return fcapi_fail(w, "'io_engine' %.32s is not supported: only Sync", eng);
	if ((r = fcapi_readable_file(path, "path_on_host", !ro, w)))
		return r;
	if (strlen(path) >= sizeof(d->path))
		return fcapi_fail(w, "'path_on_host' is too long");
	for (i = 0; i < c->nr_drives; i++) {
		if (!strcmp(c->drives[i].id, id))
			d = &c->drives[i];
		else if (root && c->drives[i].root)
			return fcapi_fail(w, "A root block device already exists (drive %s)", c->drives[i].id);
	}
	if (!d) {
		if (c->nr_drives == VM_MAX_DISKS)
			return fcapi_fail(w, "at most %d drives", VM_MAX_DISKS);
		d = &c->drives[c->nr_drives++];
	}
	snprintf(d->id, sizeof(d->id), "%s", id);
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->root = root;
	d->ro = ro;
	d->rl = rl;
	c->touched = 1;
	return 0;
}

static int mac_ok(const char *m)
{
	unsigned i;

	if (strlen(m) != 17)
		return 0;
	for (i = 0; i < 17; i++) {
		char ch = m[i];

		if (i % 3 == 2 ? ch != ':' : !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
			return 0;
	}
	return 1;
}

int fcapi_put_net(struct fcapi *a, const struct json *b, const char *path_id, struct why *w)
{
	static const struct field f[] = {
		{ "iface_id", F_STR, 1, NULL },
		{ "host_dev_name", F_STR, 1, NULL },
		{ "guest_mac", F_STR, 0, NULL },
		{ "rx_rate_limiter", F_OBJ, 0, NULL },
		{ "tx_rate_limiter", F_OBJ, 0, NULL },
	};
	const char *id, *dev, *mac;
	struct rl_limits rx, tx;
	int r;

	if ((r = fcapi_check_fields(b, f, 5, w)) || (r = fcapi_pre_boot(a, w)))
		return r;
	id = fcapi_get_str(b, "iface_id");
	dev = fcapi_get_str(b, "host_dev_name");
	mac = fcapi_get_str(b, "guest_mac");
	if ((r = fcapi_check_id(path_id, id, "iface_id", 63, w)))
		return r;
	if (!dev[0] || strlen(dev) > 15 || strpbrk(dev, "/ ,=:"))
		return fcapi_fail(w, "'host_dev_name' must be a TAP device name of 1 to 15 characters");
	if (mac && !mac_ok(mac))
		return fcapi_fail(w, "'guest_mac' must look like 06:00:ac:10:00:02");
	if ((r = fcapi_get_limiter(b, "rx_rate_limiter", &rx, w)) || (r = fcapi_get_limiter(b, "tx_rate_limiter", &tx, w)))
		return r;
	{
		struct fcapi_config *c = &a->cfg;
		struct fcapi_net *n = NULL;
		struct net_options o;
		const char *why = NULL;
		char spec[64];
		unsigned i;

		/* The same rules as vmm run --net (a unicast MAC, ...). */
		snprintf(spec, sizeof(spec), "tap=%s%s%s", dev, mac ? ",mac=" : "", mac ? mac : "");
		if (net_options_parse(spec, &o, &why))
			return fcapi_fail(w, "%s", why ? why : "invalid network interface");

		for (i = 0; i < c->nr_net; i++) {
			if (!strcmp(c->net[i].id, id))
				n = &c->net[i];
			else if (mac && !strcasecmp(c->net[i].mac, mac))
				return fcapi_fail(w, "The MAC address is already in use: %s", mac);
		}
		if (!n) {
			if (c->nr_net == FCAPI_MAX_NET)
				return fcapi_fail(w, "at most %d network interfaces", FCAPI_MAX_NET);
			n = &c->net[c->nr_net++];
		}
		snprintf(n->id, sizeof(n->id), "%s", id);
		snprintf(n->host_dev, sizeof(n->host_dev), "%s", dev);
		snprintf(n->mac, sizeof(n->mac), "%s", mac ? mac : "");
		n->rx = rx;
		n->tx = tx;
		c->touched = 1;
		return 0;
	}
}

int fcapi_put_vsock(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = {
		{ "guest_cid", F_UINT, 1, NULL },
		{ "uds_path", F_STR, 1, NULL },
		{ "vsock_id", F_STR, 0, NULL },
	};
	struct fcapi_config *c = &a->cfg;
	const char *uds;
	uint64_t cid;
	int r;

	if ((r = fcapi_check_fields(b, f, 3, w)) || (r = fcapi_pre_boot(a, w)))
		return r;
	cid = fcapi_get_uint(b, "guest_cid");
	uds = fcapi_get_str(b, "uds_path");
	if (cid < 3 || cid >= 0xffffffffull)
		return fcapi_fail(w, "'guest_cid' must be from 3 to 4294967294");
	if (!uds[0])
		return fcapi_fail(w, "'uds_path' must not be empty");
	if ((r = fcapi_copy_str(c->uds, sizeof(c->uds), uds, "uds_path", w)))
		return r;
	c->cid = cid;
	c->has_vsock = 1;
	if (fcapi_has(b, "vsock_id"))
		a->deprecated = 1; /* Firecracker: vsock_id is deprecated */
	c->touched = 1;
	return 0;
}

/* PUT /fs's "drive": a named drive, resolved (and its allow list checked)
 * by the launcher before it is stored. */
static int fs_drive(struct fcapi *a, const struct json *b, struct fcapi_fs *s, struct why *w)
{
	const char *drive = fcapi_get_str(b, "drive"), *at = fcapi_get_str(b, "mount_point");
	char why[512];

	if (fcapi_has(b, "path_on_host"))
		return fcapi_fail(w, "give 'path_on_host' or 'drive', not both");
	if (at && !fs_guest_path_valid(at))
		return fcapi_fail(w, "'mount_point' must be an absolute guest directory (at most 100 of A-Z a-z 0-9 . _ - /)");
	if (!a->drive_resolve)
		return fcapi_fail(w, "'drive': this VMM has no drive store (vmm serve has)");
	snprintf(s->drive, sizeof(s->drive), "%s", drive);
	snprintf(s->at, sizeof(s->at), "%s", at ? at : "");
	why[0] = '\0';
	if (a->drive_resolve(a->drive_ctx, s, why, sizeof(why)))
		return fcapi_fail(w, "%s", why[0] ? why : "drive refused");
	return 0;
}

/* PUT /fs/ID: a host directory (tag, path_on_host) or a named drive
 * (drive, mount_point; the tag is the drive's name unless given). */
int fcapi_put_fs(struct fcapi *a, const struct json *b, const char *path_id, struct why *w)
{
	static const struct field f[] = {
		{ "fs_id", F_STR, 0, NULL },
		{ "tag", F_STR, 0, NULL },
		{ "path_on_host", F_STR, 0, NULL },
		{ "read_only", F_BOOL, 0, NULL },
		{ "drive", F_STR, 0, NULL },
		{ "mount_point", F_STR, 0, NULL },
	};
	struct fcapi_config *c = &a->cfg;
	struct fcapi_fs s, *slot = NULL;
	const char *id, *tag, *path;
	struct stat st;
	unsigned i;
	int r, drive;

	if ((r = fcapi_check_fields(b, f, 6, w)) || (r = fcapi_pre_boot(a, w)))
		return r;
	drive = fcapi_has(b, "drive");
	id = fcapi_get_str(b, "fs_id");
	tag = fcapi_get_str(b, "tag");
	path = fcapi_get_str(b, "path_on_host");
	if (!drive && (!tag || !path)) /* serde's words for a missing field */
		return fcapi_deser_fail(w, b->end, "missing field `%s`", !tag ? "tag" : "path_on_host");
	if (!drive && fcapi_has(b, "mount_point"))
		return fcapi_fail(w, "'mount_point' is for a 'drive'");
	if (!id && !path_id)
		return fcapi_fail(w, "missing required field 'fs_id'");
	if ((r = fcapi_check_id(path_id, id ? id : path_id, "fs_id", 63, w)))
		return r;
	if (drive && !fs_tag_valid(fcapi_get_str(b, "drive")))
		return fcapi_fail(w, "'drive' must be a drive's name (vmm drive ls)");
	if (drive && !tag)
		tag = fcapi_get_str(b, "drive");
	if (!fs_tag_valid(tag))
		return fcapi_fail(w, "'tag' must be 1 to %d of A-Z a-z 0-9 . _ - (and not . or ..)", VIRTIO_FS_TAG_LEN - 1);
	id = id ? id : path_id;
	for (i = 0; i < c->nr_fs; i++) {
		if (!strcmp(c->fs[i].id, id))
			slot = &c->fs[i];
		else if (!strcmp(c->fs[i].tag, tag))
			return fcapi_fail(w, "tag %s is taken by shared directory %s", tag, c->fs[i].id);
	}
	if (!slot && c->nr_fs == FCAPI_MAX_FS)
		return fcapi_fail(w, "at most %d shared directories", FCAPI_MAX_FS);
	memset(&s, 0, sizeof(s));
	snprintf(s.id, sizeof(s.id), "%s", id);
	snprintf(s.tag, sizeof(s.tag), "%s", tag);
	s.ro = fcapi_get_bool(b, "read_only", 0);
	if (drive) {
		if ((r = fs_drive(a, b, &s, w)))
			return r;
	} else {
		if (path[0] != '/')
			return fcapi_fail(w, "'path_on_host' must be an absolute path");
		if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			return fcapi_fail(w, "'path_on_host' %.200s: not a directory", path);
		if ((r = fcapi_copy_str(s.path, sizeof(s.path), path, "path_on_host", w)))
			return r;
	}
	*(slot ? slot : &c->fs[c->nr_fs++]) = s;
	c->touched = 1;
	return 0;
}

/* ---- PATCH on a running VM ----------------------------------------------------- */

/* A RateLimiter in a PATCH: only the buckets given change (Firecracker:
 * "if any optional data is missing, it will not be nullified"); a bucket
 * of size 0 or refill_time 0 turns that limit off. */
static int patch_limiter(const struct json *o, const char *field, struct rl_limits *l, int *given, struct why *w)
{
	const struct json *lim = json_get(o, field);
	struct rl_limits n;
	int r;

	*given = 0;
	if (!lim || lim->type == JSON_NULL)
		return 0;
	if ((r = fcapi_get_limiter(o, field, &n, w)))
		return r;
	if (fcapi_has(lim, "bandwidth")) {
		l->bytes_per_s = n.bytes_per_s;
		l->bytes_burst = n.bytes_burst;
	}
	if (fcapi_has(lim, "ops")) {
		l->ops_per_s = n.ops_per_s;
		l->ops_burst = n.ops_burst;
	}
	*given = 1;
	return 0;
}

static struct virtio_blk *vm_drive(const struct vm *vm, const char *id)
{
	unsigned i;

	for (i = 0; i < vm->cfg.nr_disks && i < VM_MAX_DISKS; i++)
		if (vm->disks[i] && !strncmp(vm->disks[i]->serial, id, VIRTIO_BLK_ID_BYTES))
			return vm->disks[i];
	return NULL;
}

int fcapi_patch_drive(struct fcapi *a, const struct json *b, const char *path_id, struct why *w)
{
	static const struct field f[] = {
		{ "drive_id", F_STR, 1, NULL },
		{ "path_on_host", F_STR, 0, NULL },
		{ "rate_limiter", F_OBJ, 0, NULL },
	};
	const char *path = fcapi_get_str(b, "path_on_host"), *err = "";
	struct fcapi_drive *d = NULL;
	struct virtio_blk *blk;
	struct rl_limits rl;
	char pbuf[PATH_MAX];
	int r, rl_given;
	unsigned i;

	if ((r = fcapi_check_fields(b, f, 3, w)) ||
	    (r = fcapi_check_id(path_id, fcapi_get_str(b, "drive_id"), "drive_id", FCAPI_DRIVE_ID_MAX, w)))
		return r;
	/* Firecracker: no PATCH before the start, and one with neither
	 * field is its vhost-user update, refused for a virtio drive. */
	if (!a->vm)
		return fcapi_fail(w, MSG_BEFORE_START);
	if (!fcapi_has(b, "path_on_host") && !fcapi_has(b, "rate_limiter"))
		return fcapi_fail(w, "Drive config error: Unable to patch the block device: Running method expected "
			    "different backend. Please verify the request arguments.");
	blk = vm_drive(a->vm, path_id);
	if (!blk)
		return fcapi_fail(w, "Unable to patch the block device: Invalid block device ID: %s", path_id);
	virtio_blk_limits(blk, &rl);
	if ((r = patch_limiter(b, "rate_limiter", &rl, &rl_given, w)))
		return r;
	if (path) {
		if ((r = fcapi_abs_path(pbuf, sizeof(pbuf), path, "path_on_host", w)) ||
		    (r = fcapi_readable_file(pbuf, "path_on_host", !blk->ro, w)))
			return r;
		path = pbuf;
	}
	r = virtio_blk_update(blk, path, rl_given ? &rl : NULL, &err);
	if (r) {
		a->n.block_update_fails++;
		return fcapi_fail(w, "Unable to patch the block device: %s: %s", err, strerror(-r));
	}
	a->n.block_update++;
	for (i = 0; i < a->cfg.nr_drives; i++)
		if (!strcmp(a->cfg.drives[i].id, path_id))
			d = &a->cfg.drives[i];
	if (d && path)
		snprintf(d->path, sizeof(d->path), "%s", path);
	if (d && rl_given)
		d->rl = rl;
	if (path)
		log_info("drive %s now on %s (%llu sectors)", path_id, path, (unsigned long long)blk->capacity);
	return 0;
}

int fcapi_patch_net(struct fcapi *a, const struct json *b, const char *path_id, struct why *w)
{
	static const struct field f[] = {
		{ "iface_id", F_STR, 1, NULL },
		{ "rx_rate_limiter", F_OBJ, 0, NULL },
		{ "tx_rate_limiter", F_OBJ, 0, NULL },
	};
	struct rl_limits rx, tx;
	int r, rx_given, tx_given;
	unsigned i, k = UINT32_MAX;

	if ((r = fcapi_check_fields(b, f, 3, w)) || (r = fcapi_check_id(path_id, fcapi_get_str(b, "iface_id"), "iface_id", 63, w)))
		return r;
	/* Firecracker refuses any PATCH before the start, and takes one
	 * that changes nothing afterwards (below: neither limiter given). */
	if (!a->vm)
		return fcapi_fail(w, MSG_BEFORE_START);
	/* The API's interfaces are the VM's, in order. */
	for (i = 0; i < a->cfg.nr_net; i++)
		if (!strcmp(a->cfg.net[i].id, path_id))
			k = i;
	if (k == UINT32_MAX || k >= a->vm->cfg.nr_nets || !a->vm->nets[k])
		return fcapi_fail(w, "Unable to update the net device: Invalid network interface ID: %s", path_id);
	virtio_net_limits(a->vm->nets[k], &rx, &tx);
	if ((r = patch_limiter(b, "rx_rate_limiter", &rx, &rx_given, w)) ||
	    (r = patch_limiter(b, "tx_rate_limiter", &tx, &tx_given, w)))
		return r;
	virtio_net_set_limits(a->vm->nets[k], rx_given ? &rx : NULL, tx_given ? &tx : NULL);
	a->n.net_update++;
	if (rx_given)
		a->cfg.net[k].rx = rx;
	if (tx_given)
		a->cfg.net[k].tx = tx;
	return 0;
}
