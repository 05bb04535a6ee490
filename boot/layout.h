/* Where the VMM puts the x86 boot structures in guest memory. */
#ifndef BOOT_LAYOUT_H
#define BOOT_LAYOUT_H

#define BOOT_GDT_ADDR 0x500ull
#define BOOT_IDT_ADDR 0x520ull
#define BOOT_ZERO_PAGE 0x7000ull   /* struct boot_params */
#define BOOT_STACK 0x8ff0ull
#define BOOT_PML4 0x9000ull
#define BOOT_PDPT 0xa000ull
#define BOOT_PD 0xb000ull          /* 4 pages: identity map of 0..4 GiB */
#define BOOT_CMDLINE 0x20000ull
#define BOOT_CMDLINE_MAX 0x10000ull
#define BOOT_EBDA_START 0x9fc00ull /* top of conventional RAM (639 KiB) */
#define BOOT_MPTABLE 0xf0000ull    /* BIOS area, scanned by Linux for "_MP_" */
#define BOOT_MPTABLE_MAX 0x10000ull
#define BOOT_HIMEM_START 0x100000ull
#define BOOT_KERNEL_LOAD 0x1000000ull /* 16 MiB: bzImage load address */

/* Selectors the 64-bit boot protocol requires (__BOOT_CS, __BOOT_DS). */
#define BOOT_CS 0x10
#define BOOT_DS 0x18
#define BOOT_TSS 0x20

#endif
