/* The MMDS record of a snapshot: see snapmmds.h. */
#include "vmm/vm_snapshot_mmds.h"
#include "devices/mmds.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

void snap_mmds_save(struct sbuf *b, const struct snap_mmds *m)
{
	if (!m->present)
		return;
	sb_begin(b, SNAP_TAG_MMDS);
	sb_u32(b, m->version);
	sb_u32(b, m->ipv4);
	sb_u8(b, m->imds_compat);
	sb_u32(b, m->nets);
	sb_end(b);
}

static uint32_t peek_tag(const struct srd *r)
{
	uint32_t t;

	if (r->err || r->len - r->off < 4)
		return 0;
	memcpy(&t, r->p + r->off, 4);
	return le32toh(t);
}

int snap_mmds_load(struct srd *r, struct snap_mmds *m, uint32_t nr_nets)
{
	uint32_t c;

	memset(m, 0, sizeof(*m));
	if (peek_tag(r) != SNAP_TAG_MMDS)
		return r->err ? -EINVAL : 0; /* no MMDS, or a snapshot from before the record */
	if (sr_begin(r, SNAP_TAG_MMDS, "mmds"))
		return -EINVAL;
	m->version = sr_u32(r);
	m->ipv4 = sr_u32(r);
	m->imds_compat = sr_u8(r);
	m->nets = sr_u32(r);
	if (sr_end(r, "mmds"))
		return -EINVAL;
	c = (m->ipv4 >> 8) & 0xff;
	/* The rules of PUT /mmds/config (fcapi_mmds.c), once more: a
	 * tampered file gets no further than a client would. */
	if ((m->version != MMDS_V1 && m->version != MMDS_V2) || (m->ipv4 >> 16) != 0xa9fe || c < 1 || c > 254 ||
	    m->imds_compat > 1 || !m->nets || nr_nets > 32 || (nr_nets < 32 && m->nets >> nr_nets)) {
		sr_fail(r, "the MMDS record is invalid (version, address or interfaces)");
		memset(m, 0, sizeof(*m));
		return -EINVAL;
	}
	m->present = 1;
	return 0;
}
