/* Who holds a disk's lock (cli/sandbox/disklock.c). */
#ifndef CLI_DISKLOCK_H
#define CLI_DISKLOCK_H

struct vm_config;

/* Refuses (-EBUSY, one line logged naming the sandbox that holds it, or
 * "another process") if one of cfg's disks is locked against this VMM
 * (blk_lock); disks with lock=off are not checked. `self`: this
 * sandbox's name. The device's own lock, taken when the VMM opens the
 * disk, is what guarantees it; this check is for the message. */
int disk_locks_check(const struct vm_config *cfg, const char *self);
/* Writes `disks` in the sandbox's folder `dir`: the real path of each
 * locked disk, one a line, for disk_locks_check to find. 0 or -errno. */
int disk_locks_record(const char *dir, const struct vm_config *cfg);

#endif
