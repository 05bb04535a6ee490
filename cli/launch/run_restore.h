/* vmm restore (and vmm resume, vmm serve's snapshot load): a clone's VM
 * configuration from its snapshot (docs/snapshot.md). The snapshot fixes
 * the VM's shape; what may differ per clone comes from the command line
 * as overrides: its token, the TAP (and new guest-side addresses) of each
 * network interface, the directory of each shared drive, the file of each
 * disk. */
#ifndef CLI_RUN_RESTORE_H
#define CLI_RUN_RESTORE_H

#include <stddef.h>

#include "vmm/wire/api.h"

struct blk_options;
struct fs_options;
struct mmds;
struct net_options;
struct run_opts;
struct sandbox;
struct snap_conf;
struct snapshot;
struct vm_config;

/* A fresh API token (32 hex digits, from getrandom) into tok. 0, or -1
 * (logged). */
int run_random_token(char *tok, size_t len);
/* The token of a clone of snapshot `c`: `given` (--token), else a random
 * one; the snapshot's own if its guest-init is from before the token
 * window (it took its token from the command line, vmm.token=, and reads
 * nothing else). 0 or -1. */
int restore_token(const struct snap_conf *c, const char *given, char *tok, size_t len);
/* The snapshot's network interfaces into cfg, each on the TAP the k-th of
 * over[nr_over] names (default: the snapshot's). The device keeps the MAC
 * the guest's driver read at boot; a new mac= (mac_given[k]) or ip=/gw=/
 * dns= for the clone is applied by guest-init once the API answers (the
 * sync request): written into spec[*nr_spec]. 0 or -EINVAL (logged). */
int restore_nets(struct vm_config *cfg, const struct snapshot *s, const struct net_options *over,
		 const int *mac_given, unsigned nr_over, char spec[][API_NET_SPEC], unsigned *nr_spec);
/* The snapshot's shared drives into cfg, in its order, each on the
 * directory it had or the one an override (--fs tag=T,path=P; a named
 * drive's from restore_drives, with its limit=/usage=) names, where the
 * guest mounted it kept. 0, -EINVAL (an override names no drive: logged) or -ENOMEM. */
int restore_fs(struct vm_config *cfg, const struct snapshot *s, struct fs_options *over, unsigned nr_over);
/* The snapshot's disks into cfg for this clone. An override (--disk
 * path=F[,id=ID]) is used as is (its path taken from over); a read-only
 * disk is used in place if it has not changed; a writable one is copied
 * from the snapshot into sb's folder; with in_place (vmm resume) a
 * standby state's disks stay where they are. 0 or -errno (logged). */
int restore_disks(struct vm_config *cfg, const struct snapshot *s, struct blk_options *over, unsigned nr_over,
		  const struct sandbox *sb, int in_place);
/* A clone's VM (vmm restore, resume, serve's snapshot load) into cfg from
 * snap: its shape and devices, its token into tok (in_place: the folder's;
 * else restore_token), o's disk, drive and interface overrides (the
 * guest's new interface settings into spec[*nr_spec]); api_mmds, vmm
 * serve's store, takes the snapshot's MMDS version and address. 0, or the
 * exit status (logged). */
int restore_configure(struct vm_config *cfg, struct snapshot *snap, struct run_opts *o, const struct sandbox *sb,
		      struct mmds *api_mmds, char *tok, size_t toklen, char spec[][API_NET_SPEC], unsigned *nr_spec);

#endif
