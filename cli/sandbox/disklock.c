/* Disk locks as the CLI sees them: before a VMM opens its disks, a disk
 * another sandbox holds is refused with that sandbox's name. The lock
 * itself is the device's (devices/virtio_blk.h, blk_lock): this only
 * finds who holds it, since an OFD lock has no owner pid (F_OFD_GETLK
 * reports -1). Each sandbox lists its disks, one real path a line, in
 * `disks` in its folder; the holder is a sandbox whose list has the path
 * and whose VMM is alive. */
#include "cli/sandbox/disklock.h"
#include "cli/util/util.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/base/log.h"
#include "vmm/vm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Does sandbox `name`'s disk list hold `real`? */
static int lists_disk(const char *root, const char *name, const char *real)
{
	char p[PATH_MAX + 2 * SANDBOX_NAME_MAX], line[PATH_MAX + 2];
	FILE *f;
	int found = 0;

	snprintf(p, sizeof(p), "%s/%s/disks", root, name);
	f = fopen(p, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		found = !strcmp(line, real);
	}
	fclose(f);
	return found;
}

/* The name of a live sandbox (not `self`) whose disks include `real`, in
 * holder; 0 if there is one, -ENOENT if not. */
static int find_holder(const char *real, const char *self, char *holder, size_t len)
{
	char root[PATH_MAX], **names = NULL;
	int n, i, r = -ENOENT;

	if (sandbox_root_existing(root, sizeof(root)) || (n = sandbox_list(&names)) < 0)
		return -ENOENT;
	for (i = 0; i < n; i++) {
		struct sandbox_status st;

		if (r && strcmp(names[i], self) && lists_disk(root, names[i], real) &&
		    sandbox_status(names[i], &st) == 0 &&
		    (st.state == SB_RUNNING || st.state == SB_PAUSED || st.state == SB_STARTING)) {
			snprintf(holder, len, "%s", names[i]);
			r = 0;
		}
		free(names[i]);
	}
	free(names);
	return r;
}

int disk_locks_check(const struct vm_config *cfg, const char *self)
{
	unsigned i;

	for (i = 0; i < cfg->nr_disks; i++) {
		const struct blk_options *o = &cfg->disks[i];
		char real[PATH_MAX], holder[SANDBOX_NAME_MAX + 1];

		/* lock=off takes no lock, and asks for none. A probe that cannot
		 * tell (a missing file) leaves the error to the device. */
		if (o->no_lock || blk_lock_probe(o->path, o->ro) != 1)
			continue;
		if (realpath(o->path, real) && find_holder(real, self, holder, sizeof(holder)) == 0)
			log_err("--disk %s: in use by sandbox %s (its VMM holds the disk's lock): 'vmm stop %s' "
				"first, or add lock=off to share the disk deliberately", o->path, holder, holder);
		else
			log_err("--disk %s: in use by another process (it holds the disk's lock): stop it first, "
				"or add lock=off to share the disk deliberately", o->path);
		return -EBUSY;
	}
	return 0;
}

int disk_locks_record(const char *dir, const struct vm_config *cfg)
{
	char p[PATH_MAX + 16], real[PATH_MAX];
	unsigned i;
	FILE *f;
	int r = 0;

	snprintf(p, sizeof(p), "%s/disks", dir);
	f = fopen(p, "we");
	if (!f)
		return -errno;
	for (i = 0; i < cfg->nr_disks; i++)
		if (!cfg->disks[i].no_lock && realpath(cfg->disks[i].path, real))
			fprintf(f, "%s\n", real);
	if (fclose(f))
		r = -errno;
	return r;
}
