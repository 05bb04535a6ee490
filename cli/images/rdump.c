/* debugfs rdump under Landlock: see rdump.h. */
#include <stddef.h>

#include "cli/images/rdump.h"

#include "cli/util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ull << 14) /* ABI 3 (Linux 6.2); older headers lack it */
#endif

/* Every right that changes the filesystem, for the Landlock ABI the kernel
 * has (1: the basic ones, 2: REFER, 3: TRUNCATE). */
static uint64_t write_rights(int abi)
{
	uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
		     LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
		     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		     LANDLOCK_ACCESS_FS_MAKE_SYM;

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	return r;
}

static int landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? -errno : (int)v;
}

int rdump_can_confine(char *why, size_t len)
{
	int abi = landlock_abi();

	if (abi > 0)
		return 0;
	snprintf(why, len,
		 "reading a guest-written ext4 back needs Landlock to keep debugfs inside its folder, and this "
		 "kernel has none (%s; Linux 5.13+ with CONFIG_SECURITY_LANDLOCK and landlock in lsm=)",
		 strerror(-abi));
	return -EOPNOTSUPP;
}

int confine_writes_below(const char *dir)
{
	int abi = landlock_abi(), rs, r = 0;
	struct landlock_ruleset_attr attr = { 0 };
	struct landlock_path_beneath_attr pb = { 0 };

	if (abi <= 0)
		return abi < 0 ? abi : -EOPNOTSUPP;
	attr.handled_access_fs = write_rights(abi);
	rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0)
		return -errno;
	pb.allowed_access = attr.handled_access_fs;
	pb.parent_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pb.parent_fd < 0) {
		r = -errno;
		goto out;
	}
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		r = -errno;
	close(pb.parent_fd);
out:
	close(rs);
	return r;
}

/* In the child, after /dev/null is open: from here no write outside dest. */
static int confine_child(void *dest)
{
	return confine_writes_below(dest);
}

int rdump_confined(const char *image, const char *dest, int quiet)
{
	char cmd[PATH_MAX + 16];
	const char *argv[] = { "debugfs", "-R", cmd, image, NULL };

	if (snprintf(cmd, sizeof(cmd), "rdump / %s", dest) >= (int)sizeof(cmd))
		return -ENAMETOOLONG;
	if (landlock_abi() <= 0)
		return -EOPNOTSUPP;
	return cli_run_tool_in(argv, quiet ? 2 : 0, confine_child, (void *)dest);
}
