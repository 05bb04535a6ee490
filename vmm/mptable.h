/* Intel MultiProcessor Specification 1.4 table: how a guest without ACPI
 * learns its CPUs, the IOAPIC and the IRQ routing. */
#ifndef VMM_MPTABLE_H
#define VMM_MPTABLE_H

#include <stddef.h>
#include <stdint.h>

#define MPTABLE_MAX_CPUS 254 /* the IOAPIC takes the next APIC ID */
#define MPTABLE_IOAPIC_PINS 24
#define MPTABLE_IOAPIC_ADDR 0xfec00000u
#define MPTABLE_LAPIC_ADDR 0xfee00000u

/* Size of the table for `cpus` processors. */
size_t mptable_size(unsigned cpus);
/* Writes the floating pointer and configuration table into buf (which will
 * live at guest-physical `gpa`). Returns bytes written or -errno. */
int mptable_build(uint8_t *buf, size_t len, uint64_t gpa, unsigned cpus,
		  uint32_t cpu_signature, uint32_t cpu_features);

#endif
