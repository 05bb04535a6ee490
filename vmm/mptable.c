/* The MultiProcessor Specification table (vmm/mptable.h). */
#include "vmm/mptable.h"

#include <errno.h>
#include <string.h>

/* MP spec 1.4, chapter 4: layouts of the floating pointer, the config table
 * header and its entries. */
struct mpf {
	char signature[4];
	uint32_t physptr;
	uint8_t length;
	uint8_t spec_rev;
	uint8_t checksum;
	uint8_t feature[5];
} __attribute__((packed));

struct mpc_header {
	char signature[4];
	uint16_t length;
	uint8_t spec_rev;
	uint8_t checksum;
	char oem[8];
	char product[12];
	uint32_t oem_ptr;
	uint16_t oem_size;
	uint16_t count;
	uint32_t lapic;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

struct mpc_cpu {
	uint8_t type;
	uint8_t apic_id;
	uint8_t apic_ver;
	uint8_t flags;
	uint32_t signature;
	uint32_t features;
	uint32_t reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type;
	uint8_t bus_id;
	char bus_type[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type;
	uint8_t apic_id;
	uint8_t apic_ver;
	uint8_t flags;
	uint32_t addr;
} __attribute__((packed));

struct mpc_intsrc {
	uint8_t type;
	uint8_t irq_type;
	uint16_t irq_flags;
	uint8_t src_bus;
	uint8_t src_irq;
	uint8_t dst_apic;
	uint8_t dst_irq;
} __attribute__((packed));

_Static_assert(sizeof(struct mpf) == 16, "MP floating pointer is 16 bytes");
_Static_assert(sizeof(struct mpc_header) == 44, "MP config header is 44 bytes");
_Static_assert(sizeof(struct mpc_cpu) == 20, "MP processor entry is 20 bytes");
_Static_assert(sizeof(struct mpc_bus) == 8, "MP bus entry is 8 bytes");
_Static_assert(sizeof(struct mpc_ioapic) == 8, "MP IOAPIC entry is 8 bytes");
_Static_assert(sizeof(struct mpc_intsrc) == 8, "MP interrupt entry is 8 bytes");

enum { MP_PROCESSOR, MP_BUS, MP_IOAPIC, MP_INTSRC, MP_LINTSRC };
enum { MP_INT, MP_NMI, MP_SMI, MP_EXTINT };
#define CPU_ENABLED 1
#define CPU_BOOTPROCESSOR 2
#define APIC_VERSION 0x14
#define IOAPIC_VERSION 0x11

static uint8_t checksum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint8_t s = 0;

	while (n--)
		s += *b++;
	return (uint8_t)-s;
}

size_t mptable_size(unsigned cpus)
{
	return sizeof(struct mpf) + sizeof(struct mpc_header) +
	       cpus * sizeof(struct mpc_cpu) + sizeof(struct mpc_bus) +
	       sizeof(struct mpc_ioapic) +
	       (MPTABLE_IOAPIC_PINS + 2) * sizeof(struct mpc_intsrc);
}

int mptable_build(uint8_t *buf, size_t len, uint64_t gpa, unsigned cpus,
		  uint32_t cpu_signature, uint32_t cpu_features)
{
	size_t need = mptable_size(cpus);
	struct mpf *mpf = (struct mpf *)buf;
	struct mpc_header *hdr = (struct mpc_header *)(buf + sizeof(*mpf));
	uint8_t *p = (uint8_t *)(hdr + 1);
	uint8_t ioapic_id = (uint8_t)cpus;
	uint16_t count = 0;
	unsigned i;

	if (cpus == 0 || cpus > MPTABLE_MAX_CPUS)
		return -EINVAL;
	if (len < need || gpa > UINT32_MAX - need)
		return -ENOSPC;
	memset(buf, 0, need);

	for (i = 0; i < cpus; i++, count++) {
		struct mpc_cpu c = {
			.type = MP_PROCESSOR,
			.apic_id = (uint8_t)i,
			.apic_ver = APIC_VERSION,
			.flags = CPU_ENABLED | (i == 0 ? CPU_BOOTPROCESSOR : 0),
			.signature = cpu_signature,
			.features = cpu_features,
		};
		memcpy(p, &c, sizeof(c));
		p += sizeof(c);
	}
	{
		struct mpc_bus b = { .type = MP_BUS, .bus_id = 0 };

		memcpy(b.bus_type, "ISA   ", 6);
		memcpy(p, &b, sizeof(b));
		p += sizeof(b);
		count++;
	}
	{
		struct mpc_ioapic io = {
			.type = MP_IOAPIC,
			.apic_id = ioapic_id,
			.apic_ver = IOAPIC_VERSION,
			.flags = 1,
			.addr = MPTABLE_IOAPIC_ADDR,
		};
		memcpy(p, &io, sizeof(io));
		p += sizeof(io);
		count++;
	}
	/* Every IOAPIC pin i carries ISA IRQ i, as KVM's default GSI routing
	 * wires them; virtio-mmio devices use pins 5..23. */
	for (i = 0; i < MPTABLE_IOAPIC_PINS; i++, count++) {
		struct mpc_intsrc s = {
			.type = MP_INTSRC,
			.irq_type = MP_INT,
			.src_bus = 0,
			.src_irq = (uint8_t)i,
			.dst_apic = ioapic_id,
			.dst_irq = (uint8_t)i,
		};
		memcpy(p, &s, sizeof(s));
		p += sizeof(s);
	}
	{
		/* LINT0 = ExtINT (the PIC), LINT1 = NMI, on every local APIC. */
		struct mpc_intsrc l0 = { .type = MP_LINTSRC, .irq_type = MP_EXTINT,
					 .dst_apic = 0xff, .dst_irq = 0 };
		struct mpc_intsrc l1 = { .type = MP_LINTSRC, .irq_type = MP_NMI,
					 .dst_apic = 0xff, .dst_irq = 1 };
		memcpy(p, &l0, sizeof(l0));
		p += sizeof(l0);
		memcpy(p, &l1, sizeof(l1));
		p += sizeof(l1);
		count += 2;
	}

	memcpy(hdr->signature, "PCMP", 4);
	hdr->length = (uint16_t)(p - (uint8_t *)hdr);
	hdr->spec_rev = 4;
	memcpy(hdr->oem, "VMM     ", 8);
	memcpy(hdr->product, "vmm         ", 12);
	hdr->count = count;
	hdr->lapic = MPTABLE_LAPIC_ADDR;
	hdr->checksum = checksum(hdr, hdr->length);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->physptr = (uint32_t)(gpa + sizeof(*mpf));
	mpf->length = 1; /* in 16-byte units */
	mpf->spec_rev = 4;
	mpf->checksum = checksum(mpf, sizeof(*mpf));
	return (int)need;
}
