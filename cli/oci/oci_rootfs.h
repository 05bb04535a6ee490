/* A read-only root (root.readonly: the CRI's sandbox container) is shared
 * read-only with its VM, where the mount script (oci_vm.h) can then make
 * no mount target that the image lacks (/etc/resolv.conf, /etc/hostname,
 * /dev/shm). They are made on the host first, as runc makes them before
 * it remounts the root read-only: each resolved inside the root
 * (openat2(2) RESOLVE_IN_ROOT), so a link in the image never leads out. */
#ifndef CLI_OCI_ROOTFS_H
#define CLI_OCI_ROOTFS_H

#include <stddef.h>

#include "cli/oci/oci_spec.h"

/* For a read-only root, each mount's target: a folder, or an empty file
 * for a bind of a file. 0 (nothing to do for a writable root) or -errno
 * with why set. */
int oci_rootfs_targets(const struct oci_spec *s, char *why, size_t wl);

#endif
