/* Shared by snapshot.c and snapshot_diff.c only. */
#ifndef VMM_SNAPSHOT_PRIV_H
#define VMM_SNAPSHOT_PRIV_H

#include "vmm/vm_snapshot.h"

/* The config of a paused VM; writable disks copied to
 * copy_dir/diskN<suffix>. 0 or -errno (logged). */
int snap_fill_conf(struct vm *vm, struct snap_conf *conf, const char *copy_dir, const char *suffix)
	__attribute__((warn_unused_result));
/* The whole state file body: config, host, identity, memory layout, VM,
 * vCPUs, devices. 0 or -errno. */
int snap_build_state(struct vm *vm, struct sbuf *b, struct snap_conf *conf, const struct snap_ident *ident)
	__attribute__((warn_unused_result));

#endif
