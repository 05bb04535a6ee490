/* Port-I/O and MMIO address ranges to devices (vmm/base/bus.h). */
#include "vmm/base/bus.h"

#include <errno.h>
#include <string.h>

int bus_add(struct bus *b, struct bus_dev *d)
{
	unsigned i;

	if (d->len == 0 || d->base + d->len < d->base || !d->ops)
		return -EINVAL;
	for (i = 0; i < b->nr; i++) {
		const struct bus_dev *o = b->devs[i];

		if (d->base < o->base + o->len && o->base < d->base + d->len)
			return -EEXIST;
	}
	if (b->nr >= BUS_MAX_DEVS)
		return -ENOSPC;
	b->devs[b->nr++] = d;
	return 0;
}

int bus_access(struct bus *b, uint64_t addr, void *data, unsigned len, int is_write)
{
	unsigned i;

	for (i = 0; i < b->nr; i++) {
		struct bus_dev *d = b->devs[i];

		if (addr < d->base || addr - d->base >= d->len || len > d->len - (addr - d->base))
			continue;
		if (is_write) {
			if (d->ops->write)
				d->ops->write(d, addr - d->base, data, len);
		} else if (d->ops->read) {
			d->ops->read(d, addr - d->base, data, len);
		} else {
			memset(data, 0xff, len);
		}
		return 0;
	}
	if (!is_write)
		memset(data, 0xff, len);
	return -ENOENT;
}
