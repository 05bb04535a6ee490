/* Named drives for vmm serve's API and for restored clones (run_drives.h). */
#include "cli/launch/run_drives.h"
#include "cli/drive/drive.h"
#include "cli/launch/run_opts.h"
#include "devices/virtio_fs.h"
#include "vmm/api/fcapi.h"
#include "vmm/vm_snapshot.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "NAME:DIR[:ro]" appended to the record's list (vmm ls, drive used_by). */
static void note_drive(struct run_opts *o, const char *name, const char *at, int ro)
{
	size_t n = strlen(o->drives_text);

	snprintf(o->drives_text + n, sizeof(o->drives_text) - n, "%s%s:%s%s", n ? "," : "", name, at,
		 ro ? ":ro" : "");
}

/* drive_mount_opt for "NAME[:AT][:ro]" as sandbox o (its name and labels
 * meet the allow list), parsed into f. 0 or -errno (why). */
static int mount_drive(const char *name, const char *at, int ro, const struct run_opts *o, struct fs_options *f,
		       char *why, size_t len)
{
	char arg[256], opt[PATH_MAX * 2 + 256];
	const char *bad = "";
	int r;

	if (snprintf(arg, sizeof(arg), "%s%s%s%s", name, at[0] ? ":" : "", at, ro ? ":ro" : "") >= (int)sizeof(arg)) {
		snprintf(why, len, "drive %s: the guest directory is too long", name);
		return -EINVAL;
	}
	if ((r = drive_mount_opt(arg, o->name, o->labels_text, opt, sizeof(opt), why, len)))
		return r;
	if ((r = fs_options_parse(opt, f, &bad))) {
		snprintf(why, len, "drive %s: %s", name, bad);
		return r;
	}
	return 0;
}

int run_fc_drive(void *ctx, struct fcapi_fs *fs, char *why, size_t len)
{
	const struct run_opts *o = ctx;
	struct fs_options f;
	int r;

	if ((r = mount_drive(fs->drive, fs->at, fs->ro, o, &f, why, len)))
		return r;
	if (strlen(f.path) >= sizeof(fs->path) || (f.usage && strlen(f.usage) >= sizeof(fs->usage)) ||
	    (f.at && strlen(f.at) >= sizeof(fs->at))) {
		snprintf(why, len, "drive %s: its folder's path is too long", fs->drive);
		fs_options_free(&f);
		return -ENAMETOOLONG;
	}
	snprintf(fs->path, sizeof(fs->path), "%s", f.path);
	snprintf(fs->at, sizeof(fs->at), "%s", f.at ? f.at : "");
	snprintf(fs->usage, sizeof(fs->usage), "%s", f.usage ? f.usage : "");
	fs->limit = f.limit;
	fs_options_free(&f);
	return 0;
}

void run_fc_drives_text(const struct fcapi *a, struct run_opts *o)
{
	unsigned i;

	o->drives_text[0] = '\0';
	for (i = 0; i < a->cfg.nr_fs; i++)
		if (a->cfg.fs[i].drive[0])
			note_drive(o, a->cfg.fs[i].drive, a->cfg.fs[i].at, a->cfg.fs[i].ro);
}

/* Is the snapshot's shared folder f drive `d` of the store? Its tag is the
 * drive's name (vmm run --drive tags it so) and its folder the drive's. */
static int is_drive(const struct snap_fs *f, struct drive *d)
{
	char real[PATH_MAX];

	return drive_name_ok(f->tag) && !drive_load(f->tag, d) && realpath(d->path, real) && !strcmp(real, f->path);
}

static int overridden(const struct run_opts *o, const char *tag)
{
	unsigned j;

	for (j = 0; j < o->nr_over_fs; j++)
		if (!strcmp(o->over_fs[j].tag, tag))
			return 1;
	return 0;
}

int restore_drives(const struct snapshot *s, struct run_opts *o, char *why, size_t len)
{
	unsigned i, given = o->nr_over_fs;
	int r;

	o->drives_text[0] = '\0';
	for (i = 0; i < s->conf.nr_fs; i++) {
		const struct snap_fs *f = &s->conf.fs[i];
		char at[sizeof(f->at) + 16];
		struct drive d;

		/* a --fs of the clone's replaces the folder: not the drive then */
		if (overridden(o, f->tag) || !is_drive(f, &d))
			continue;
		if (o->nr_over_fs == VM_MAX_FS) {
			snprintf(why, len, "drive %s: too many shared drives", f->tag);
			return -E2BIG;
		}
		/* where the guest mounted it (older snapshots do not say:
		 * --drive's default) */
		if (f->at[0])
			snprintf(at, sizeof(at), "%s", f->at);
		else
			snprintf(at, sizeof(at), "/drives/%s", f->tag);
		if ((r = mount_drive(f->tag, at, f->ro, o, &o->over_fs[o->nr_over_fs], why, len))) {
			while (o->nr_over_fs > given)
				fs_options_free(&o->over_fs[--o->nr_over_fs]);
			return r;
		}
		o->nr_over_fs++;
		note_drive(o, f->tag, at, f->ro);
	}
	return 0;
}
