/* i8042 keyboard controller at ports 0x60 (data) and 0x64 (status and
 * commands), modelled on Firecracker's (src/vmm/src/devices/legacy/
 * i8042.rs): enough for Linux's i8042 and atkbd drivers to probe it and for
 * the host to type Ctrl-Alt-Del. Register accesses come from vCPU threads,
 * the keys from the main thread: one lock. */
#include "devices/devices.h"

#include <errno.h>
#include <string.h>

#define OFS_DATA 0
#define OFS_STATUS 4

/* Controller commands (port 0x64). */
#define CMD_READ_CTR 0x20
#define CMD_WRITE_CTR 0x60
#define CMD_DISABLE_AUX 0xa7
#define CMD_ENABLE_AUX 0xa8
#define CMD_SELF_TEST 0xaa
#define CMD_KBD_TEST 0xab
#define CMD_DISABLE_KBD 0xad
#define CMD_ENABLE_KBD 0xae
#define CMD_READ_OUTP 0xd0
#define CMD_WRITE_OUTP 0xd1
#define CMD_RESET_CPU 0xfe

/* Status register bits. */
#define SB_OUT_DATA_AVAIL 0x01
#define SB_I8042_CMD_DATA 0x08 /* the next byte on 0x60 is a command's parameter */
#define SB_KBD_ENABLED 0x10

/* Control register bits. */
#define CB_KBD_INT 0x01
#define CB_POST_OK 0x04
#define CB_KBD_DISABLE 0x10

#define KBD_ACK 0xfa
#define KBD_CMD_GETID 0xf2
#define SELF_TEST_OK 0x55

/* Scancode set 2 make codes (untranslated: the control register's
 * translate bit stays clear, as in Firecracker). */
static const uint8_t ctrl_alt_del[] = { 0x14, 0x11, 0xe0, 0x71 };

static void flush_buf(struct i8042 *k)
{
	k->head = k->count = 0;
	k->status &= (uint8_t)~SB_OUT_DATA_AVAIL;
}

static void push_byte(struct i8042 *k, uint8_t v)
{
	if (k->count == I8042_BUF)
		return;
	k->buf[(k->head + k->count) % I8042_BUF] = v;
	k->count++;
	k->status |= SB_OUT_DATA_AVAIL;
}

static uint8_t pop_byte(struct i8042 *k)
{
	uint8_t v;

	if (!k->count)
		return 0;
	v = k->buf[k->head];
	k->head = (k->head + 1) % I8042_BUF;
	if (!--k->count)
		k->status &= (uint8_t)~SB_OUT_DATA_AVAIL;
	return v;
}

/* ISA interrupts are edges: raise and lower IRQ 1, if the driver enabled
 * the keyboard interrupt in the control register. */
static void kbd_irq(struct i8042 *k)
{
	if (!(k->control & CB_KBD_INT))
		return;
	k->kbd_irqs++;
	if (k->host.irq_line) {
		k->host.irq_line(k->host.opaque, I8042_IRQ, 1);
		k->host.irq_line(k->host.opaque, I8042_IRQ, 0);
	}
}

static void i8042_read(struct bus_dev *d, uint64_t off, void *data, unsigned len)
{
	struct i8042 *k = container_of(d, struct i8042, bus);
	uint8_t v = 0;

	memset(data, 0, len);
	if (len != 1)
		return; /* byte-wide ports only */
	pthread_mutex_lock(&k->lock);
	if (off == OFS_STATUS) {
		v = k->status;
	} else if (off == OFS_DATA) {
		v = pop_byte(k);
		/* More to read: another interrupt for the next byte. */
		if (k->count)
			kbd_irq(k);
	}
	pthread_mutex_unlock(&k->lock);
	*(uint8_t *)data = v;
}

static void i8042_write(struct bus_dev *d, uint64_t off, const void *data, unsigned len)
{
	struct i8042 *k = container_of(d, struct i8042, bus);
	uint8_t v = *(const uint8_t *)data;
	int reset = 0;

	if (len != 1)
		return;
	pthread_mutex_lock(&k->lock);
	if (off == OFS_STATUS) {
		switch (v) {
		case CMD_RESET_CPU:
			k->resets++;
			reset = 1;
			break;
		case CMD_READ_CTR:
			flush_buf(k);
			push_byte(k, k->control);
			break;
		case CMD_WRITE_CTR:
		case CMD_WRITE_OUTP:
			if (v == CMD_WRITE_CTR)
				flush_buf(k);
			k->status |= SB_I8042_CMD_DATA;
			k->cmd = v;
			break;
		case CMD_READ_OUTP:
			flush_buf(k);
			push_byte(k, k->outp);
			break;
		case CMD_SELF_TEST:
			/* Linux's i8042.reset path wants 0x55 back. */
			flush_buf(k);
			push_byte(k, SELF_TEST_OK);
			break;
		case CMD_KBD_TEST:
			flush_buf(k);
			push_byte(k, 0x00); /* no error on the keyboard lines */
			break;
		case CMD_DISABLE_KBD:
			k->control |= CB_KBD_DISABLE;
			break;
		case CMD_ENABLE_KBD:
			k->control &= (uint8_t)~CB_KBD_DISABLE;
			break;
		default:
			break; /* no mouse port, nothing else: ignored */
		}
	} else if (off == OFS_DATA) {
		if (k->status & SB_I8042_CMD_DATA) {
			if (k->cmd == CMD_WRITE_CTR) {
				k->control = v;
				k->driver_seen = 1;
			} else if (k->cmd == CMD_WRITE_OUTP) {
				k->outp = v;
			}
			k->status &= (uint8_t)~SB_I8042_CMD_DATA;
		} else {
			/* A command for the keyboard itself: a keyboard
			 * that acknowledges everything and names itself an
			 * MF2 keyboard (0xab 0x83) when asked, so atkbd's
			 * probe (GETID) is answered rather than timed out. */
			flush_buf(k);
			push_byte(k, KBD_ACK);
			if (v == KBD_CMD_GETID) {
				push_byte(k, 0xab);
				push_byte(k, 0x83);
			}
			kbd_irq(k);
		}
	}
	pthread_mutex_unlock(&k->lock);
	if (reset && k->host.exit)
		k->host.exit(k->host.opaque, LEGACY_EXIT_REBOOT, "guest reset the machine (i8042)");
}

static const struct bus_ops i8042_ops = { .read = i8042_read, .write = i8042_write };

void i8042_init(struct i8042 *k, const struct legacy_host *host)
{
	memset(k, 0, sizeof(*k));
	k->bus.base = 0x60;
	k->bus.len = 5;
	k->bus.name = "i8042";
	k->bus.ops = &i8042_ops;
	if (host)
		k->host = *host;
	k->control = CB_POST_OK | CB_KBD_INT;
	k->status = SB_KBD_ENABLED;
	pthread_mutex_init(&k->lock, NULL);
}

void i8042_destroy(struct i8042 *k)
{
	pthread_mutex_destroy(&k->lock);
}

int i8042_ctrl_alt_del(struct i8042 *k)
{
	unsigned i;
	int r = 0;

	pthread_mutex_lock(&k->lock);
	if (!k->driver_seen || !(k->control & CB_KBD_INT))
		r = -ENODEV;
	else if (I8042_BUF - k->count < sizeof(ctrl_alt_del))
		r = -ENOSPC;
	if (!r) {
		for (i = 0; i < sizeof(ctrl_alt_del); i++)
			push_byte(k, ctrl_alt_del[i]);
		kbd_irq(k);
	}
	pthread_mutex_unlock(&k->lock);
	return r;
}

void i8042_save(struct i8042 *k, struct sbuf *b)
{
	unsigned i;

	pthread_mutex_lock(&k->lock);
	sb_u8(b, k->status);
	sb_u8(b, k->control);
	sb_u8(b, k->outp);
	sb_u8(b, k->cmd);
	sb_u8(b, (uint8_t)k->driver_seen);
	sb_u8(b, (uint8_t)k->count);
	for (i = 0; i < k->count; i++)
		sb_u8(b, k->buf[(k->head + i) % I8042_BUF]);
	pthread_mutex_unlock(&k->lock);
}

int i8042_restore(struct i8042 *k, struct srd *r)
{
	uint8_t status = sr_u8(r), control = sr_u8(r), outp = sr_u8(r), cmd = sr_u8(r);
	uint8_t seen = sr_u8(r), count = sr_u8(r), buf[I8042_BUF];
	unsigned i;

	if (count > I8042_BUF || seen > 1) {
		sr_fail(r, "i8042 record out of range");
		return -EINVAL;
	}
	sr_bytes(r, buf, count);
	if (r->err)
		return -EINVAL;
	pthread_mutex_lock(&k->lock);
	/* Only the bits this model sets. */
	k->status = status & (SB_OUT_DATA_AVAIL | SB_I8042_CMD_DATA | SB_KBD_ENABLED);
	k->control = control;
	k->outp = outp;
	k->cmd = cmd;
	k->driver_seen = seen;
	k->head = 0;
	k->count = count;
	for (i = 0; i < count; i++)
		k->buf[i] = buf[i];
	k->status = (uint8_t)((k->status & ~SB_OUT_DATA_AVAIL) | (count ? SB_OUT_DATA_AVAIL : 0));
	pthread_mutex_unlock(&k->lock);
	return 0;
}
