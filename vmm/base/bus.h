/* Port-I/O and MMIO dispatch: address ranges to devices. Devices register
 * before the vCPUs start; lookups afterwards are read-only, so the vCPU
 * threads share the bus without a lock (each device locks itself). */
#ifndef VMM_BUS_H
#define VMM_BUS_H

#include <stddef.h>
#include <stdint.h>

/* The struct of type T whose member m is at p (devices embed their bus_dev
 * and virtio_dev; handlers get back to the device with this). */
#define container_of(p, T, m) ((T *)((char *)(p) - offsetof(T, m)))

#define BUS_MAX_DEVS 32

struct bus_dev;

struct bus_ops {
	/* `off` is relative to the device's base; 1 <= len <= 8. */
	void (*read)(struct bus_dev *d, uint64_t off, void *data, unsigned len);
	void (*write)(struct bus_dev *d, uint64_t off, const void *data, unsigned len);
};

struct bus_dev {
	uint64_t base;
	uint64_t len;
	const char *name;
	const struct bus_ops *ops;
};

struct bus {
	unsigned nr;
	struct bus_dev *devs[BUS_MAX_DEVS];
};

/* 0, -EEXIST (overlaps a registered range), -ENOSPC or -EINVAL. */
int bus_add(struct bus *b, struct bus_dev *d) __attribute__((warn_unused_result));
/* Dispatches an access. Returns 0 if a device took it, -ENOENT if no device
 * covers [addr, addr+len) (a read then returns all ones). */
int bus_access(struct bus *b, uint64_t addr, void *data, unsigned len, int is_write);

#endif
