/* What `vmm run --drive` mounts (drive.h): the allow list checked before
 * boot, the size count refreshed, the VMM's --fs option built; and which
 * running sandboxes use a drive (their records' "drives"). */
#include "cli/drive/drive.h"
#include "cli/sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* Does the record's "NAME:DIR[:ro],..." list name this drive? */
static int lists_drive(const char *drives, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	for (p = drives; *p; p += strcspn(p, ","), p += *p == ',') {
		if (!strncmp(p, name, n) && (p[n] == ':' || p[n] == ',' || !p[n]))
			return 1;
	}
	return 0;
}

void drive_users(const char *name, char *buf, size_t len)
{
	char **names;
	int i, n = sandbox_list(&names);
	size_t k = 0;

	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		struct sandbox_status st;

		if (!sandbox_status(names[i], &st) && (st.state == SB_RUNNING || st.state == SB_PAUSED ||
						      st.state == SB_STARTING) && lists_drive(st.drives, name) &&
		    k < len)
			k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? "," : "", names[i]);
		free(names[i]);
	}
	if (n > 0)
		free(names);
}

int drive_mount_opt(const char *arg, const char *who, const char *labels, char *fs, size_t fslen, char *why, size_t len)
{
	char name[DRIVE_NAME_MAX + 2], at[128], users[512];
	struct drive d;
	int ro, r;

	if (sandbox_drive_arg(arg, name, sizeof(name), at, sizeof(at), &ro) || !drive_name_ok(name)) {
		snprintf(why, len, "--drive %s: NAME[:/GUEST/DIR][:ro]", arg);
		return -EINVAL;
	}
	if ((r = drive_load(name, &d))) {
		snprintf(why, len, "no drive %s (vmm drive create %s)", name, name);
		return r;
	}
	if ((r = drive_allowed(&d, who, labels, ro, why, len)))
		return r;
	/* The count starts from the folder as it is when no sandbox holds
	 * the drive (what the host changed meanwhile is counted). */
	drive_users(name, users, sizeof(users));
	if (d.size && !users[0]) {
		int64_t used = drive_walk_usage(d.path);

		if (used >= 0)
			(void)drive_usage_set(&d, used);
	}
	if (d.size)
		snprintf(fs, fslen, "tag=%s,path=%s%s,at=%s,limit=%llu,usage=%s/usage", name, d.path, ro ? ",ro" : "", at,
			 (unsigned long long)d.size, d.dir);
	else
		snprintf(fs, fslen, "tag=%s,path=%s%s,at=%s", name, d.path, ro ? ",ro" : "", at);
	return 0;
}
