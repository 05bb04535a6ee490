/* The legacy devices every VM has, embedded in struct vm. */
#ifndef DEVICES_DEVICES_H
#define DEVICES_DEVICES_H

#include <pthread.h>
#include <stdint.h>

#include "vmm/base/bus.h"
#include "vmm/base/log.h"
#include "vmm/base/snapfmt.h"

/* What a legacy device asks of the machine it sits in, as callbacks the
 * VM hands it (devices know no struct vm; Firecracker's i8042 is built
 * with a reset eventfd the same way): an ISA interrupt line's level, an
 * end of the run (reset, power-off), and two notices of the guest's
 * progress. A NULL callback does nothing. */
enum legacy_exit { LEGACY_EXIT_POWEROFF, LEGACY_EXIT_REBOOT };
struct legacy_host {
	void *opaque;
	void (*irq_line)(void *opaque, unsigned irq, int level);
	void (*exit)(void *opaque, enum legacy_exit why, const char *msg);
	void (*boot_marker)(void *opaque);  /* the guest's init is up */
	void (*kernel_up)(void *opaque);    /* first read of the token window */
};

/* 8250 UART (16550A without a real FIFO timing model). */
#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ 4
#define SERIAL_RX_FIFO 64

struct serial {
	struct bus_dev bus;
	struct legacy_host host;
	unsigned irq;
	int out_fd;
	pthread_mutex_t lock;
	uint8_t ier, lcr, mcr, lsr, msr, scr, dll, dlm, fcr;
	int thri_pending;
	int irq_level;
	uint8_t rx[SERIAL_RX_FIFO];
	unsigned rx_head, rx_count;
	int rx_space_efd; /* signalled when the guest frees FIFO space */
	/* A console file's cap (serial_set_limit): out_fd takes at most
	 * out_limit bytes; past 7/8 of it rotate_efd asks the main thread to
	 * rotate the file (serial_rotate), which the vCPU thread, under its
	 * system call allow-list, cannot. Bytes past the cap before that are
	 * dropped (counted). */
	uint64_t out_limit, out_written, out_dropped;
	int rotate_asked;
	int rotate_efd;
};

/* `host` may be NULL (no interrupts). */
int serial_init(struct serial *s, const struct legacy_host *host, uint64_t base, unsigned irq, int out_fd);
void serial_destroy(struct serial *s);
/* Caps the console file at `limit` bytes, `written` of them there now.
 * 0 or -errno. */
int serial_set_limit(struct serial *s, uint64_t limit, uint64_t written);
/* The main thread, once rotate_efd fired: path becomes path.1 (replacing
 * it) and a new, empty path takes the console's fd number (dup3), so the
 * vCPU thread's next write goes there. 0 or -errno. */
int serial_rotate(struct serial *s, const char *path);
/* Feeds host input to the guest; returns how many bytes fit. */
size_t serial_rx(struct serial *s, const uint8_t *buf, size_t len);
size_t serial_rx_space(struct serial *s);
/* Snapshot record (registers and receive FIFO); restore masks reserved bits. */
void serial_save(struct serial *s, struct sbuf *b);
int serial_restore(struct serial *s, struct srd *r) __attribute__((warn_unused_result));

/* i8042 keyboard controller (devices/i8042.c), as much as Firecracker's:
 * the reset line (command 0xFE: reboot=k), the control register and output
 * port commands Linux's i8042 driver probes with, a keyboard that
 * acknowledges every command, and Ctrl-Alt-Del injected as scancodes on
 * IRQ 1 (SendCtrlAltDel). */
#define I8042_IRQ 1
#define I8042_BUF 16
struct i8042 {
	struct bus_dev bus;
	struct legacy_host host;
	pthread_mutex_t lock;  /* vCPU threads (ports) and the main thread (keys) */
	uint8_t status, control, outp, cmd;
	uint8_t buf[I8042_BUF];/* output buffer: bytes for port 0x60 */
	unsigned head, count;
	int driver_seen;       /* the guest wrote the control register */
	uint64_t resets, kbd_irqs;
};
void i8042_init(struct i8042 *k, const struct legacy_host *host);
void i8042_destroy(struct i8042 *k);
/* Puts Ctrl, Alt, Del (scancode set 2 make codes, as Firecracker sends
 * them) in the output buffer and raises IRQ 1. 0; -ENODEV if no driver
 * set the controller up (the guest has none: use another way); -ENOSPC
 * if the buffer has no room for the 4 bytes. Any thread. */
int i8042_ctrl_alt_del(struct i8042 *k);
/* Snapshot record: registers and the output buffer. */
void i8042_save(struct i8042 *k, struct sbuf *b);
int i8042_restore(struct i8042 *k, struct srd *r) __attribute__((warn_unused_result));

/* The vmm port: the guest writes VMM_PORT_BOOT_READY when its init is up
 * (boot-time marker, for benchmarks) and VMM_PORT_POWEROFF to power off.
 * The token window (VMM_TOKEN_BASE, VMM_TOKEN_LEN ports) reads as the
 * sandbox API's access token, NUL-padded: byte i at port base + i. Port
 * I/O needs CAP_SYS_RAWIO in a Linux guest, so only guest root (guest-init)
 * reads it; the token never goes on the kernel command line, which every
 * guest process can read (docs/api.md, "The access token"). */
#define VMM_PORT_BASE 0x0550
#define VMM_PORT_BOOT_READY 0x7b
#define VMM_PORT_POWEROFF 0x01
#define VMM_TOKEN_BASE 0x0560
#define VMM_TOKEN_LEN 128
struct vmm_port {
	struct bus_dev bus;
	struct bus_dev token_bus;
	struct legacy_host host;
	struct log_ratelimit rl;
	char token[VMM_TOKEN_LEN]; /* NUL-padded; at most VMM_TOKEN_LEN - 1 bytes */
};
/* `token`: the sandbox API's access token (NULL: none). */
void vmm_port_init(struct vmm_port *p, const struct legacy_host *host, const char *token);

/* Port 0x80 (POST codes; Linux's io_delay writes it). */
struct post_port {
	struct bus_dev bus;
};
void post_port_init(struct post_port *p);

struct devices {
	struct serial com1;
	struct i8042 i8042;
	struct vmm_port port;
	struct post_port post;
};

#endif
