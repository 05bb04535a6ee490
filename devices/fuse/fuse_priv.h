/* What a guest may never put on the host through a shared drive
 * (docs/virtio-fs.md, "Ownership"): setuid bits, setgid bits on anything
 * but a directory, file capabilities and other security labels, and files
 * owned by anyone but the VMM's own user (or whoever owned them already).
 * Pure policy for the FUSE server (fuse_internal.h); no state. */
#ifndef DEVICES_FUSE_PRIV_H
#define DEVICES_FUSE_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The permission bits a guest may give a file of this type (S_IFMT bits):
 * never S_ISUID; S_ISGID only on a directory (where it means "new entries
 * take my group", never "run as my group"). */
mode_t fpriv_mode(uint32_t type, uint32_t mode);

/* A chown the guest asked for, of a file now `st`: each id (-1: left
 * alone) must be the file's current one or the VMM's effective one (what
 * a file the guest creates gets). 0 or -EPERM. */
int fpriv_chown_ok(const struct stat *st, uid_t uid, gid_t gid);

/* The kernel's "killpriv" for data the guest changes (WRITE, truncation,
 * FALLOCATE) and for a chown: a regular file behind `fd` (any descriptor,
 * O_PATH too) loses S_ISUID and S_ISGID. The kernel does it itself only
 * for a writer without CAP_FSETID; a VMM running as root has it. It
 * drops security.capability itself, for root too (checked on 6.18).
 * 0 or -errno; EPERM (we do not own the file, so we are no root and the
 * kernel clears the bits at the write) counts as done. */
int fpriv_kill(int proc_fd, int fd) __attribute__((warn_unused_result));

/* Is this an xattr the guest may see or change? Only the user. namespace:
 * security.* (file capabilities, SELinux/SMACK labels, IMA), trusted.*
 * (overlayfs' own) and system.* (POSIX ACLs) stay the host's. */
int fpriv_xattr_ok(const char *name);

/* Keeps only the names fpriv_xattr_ok accepts in a listxattr() result
 * (NUL-terminated names back to back), in place. The new length. */
size_t fpriv_xattr_filter(char *list, size_t len);

#endif
