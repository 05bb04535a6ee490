/* The MMDS record of a snapshot (docs/snapshot.md, docs/mmds.md): the
 * metadata service's version, address and which network interfaces serve
 * it, as Firecracker keeps them in its snapshots. Not the data store: a
 * loaded clone's store starts empty and PUT /mmds (or --metadata) fills it.
 *
 * An optional section, MMDS, right after the identity (SNID): written only
 * when the VM has an MMDS, so a snapshot without one is what a vmm from
 * before this record wrote and reads. A vmm from before meets the section
 * where it expects the memory layout and refuses the snapshot ("sections out
 * of order"): it could not serve the guest's MMDS. */
#ifndef VMM_SNAPMMDS_H
#define VMM_SNAPMMDS_H

#include <stdint.h>

#include "vmm/base/snapfmt.h"

#define SNAP_TAG_MMDS SNAP_TAG('M', 'M', 'D', 'S')

struct snap_mmds {
	uint32_t present;   /* 0: no MMDS (and no section) */
	uint32_t version;   /* MMDS_V1 or MMDS_V2 */
	uint32_t ipv4;      /* host order, 169.254.1.0 - 169.254.254.255 */
	uint8_t imds_compat;
	uint32_t nets;      /* bit i: network interface i serves it */
};

/* The section if m->present; nothing otherwise. */
void snap_mmds_save(struct sbuf *b, const struct snap_mmds *m);
/* Reads the section if the reader is at one (else *m is "no MMDS"), and
 * checks it against a VM with nr_nets interfaces. 0, or -EINVAL with
 * r->why set. */
int snap_mmds_load(struct srd *r, struct snap_mmds *m, uint32_t nr_nets) __attribute__((warn_unused_result));

#endif
