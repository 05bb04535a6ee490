/* The legacy devices every VM has, embedded in struct vm. */
#ifndef DEVICES_DEVICES_H
#define DEVICES_DEVICES_H

#include <pthread.h>
#include <stdint.h>

#include "../vmm/bus.h"
#include "../vmm/log.h"
#include "../vmm/snapfmt.h"

struct vm;

/* 8250 UART (16550A without a real FIFO timing model). */
#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ 4
#define SERIAL_RX_FIFO 64

struct serial {
	struct bus_dev bus;
	struct vm *vm;
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

int serial_init(struct serial *s, struct vm *vm, uint64_t base, unsigned irq, int out_fd);
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

/* i8042: only what a guest needs to reset the machine (reboot=k). */
struct i8042 {
	struct bus_dev bus;
	struct vm *vm;
};
void i8042_init(struct i8042 *k, struct vm *vm);

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
	struct vm *vm;
	struct log_ratelimit rl;
	char token[VMM_TOKEN_LEN]; /* NUL-padded; at most VMM_TOKEN_LEN - 1 bytes */
};
void vmm_port_init(struct vmm_port *p, struct vm *vm);

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
