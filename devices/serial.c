/* 8250/16550A UART on COM1. The guest's writes go straight to the console
 * fd; host input is queued in a 64-byte receive FIFO. Interrupts follow the
 * IIR priority (receive data over transmit-empty) and the line is driven at
 * the level IIR implies, as kvmtool does. Loopback mode is emulated because
 * Linux's autoconfig probes the UART with it. */
#include "devices/devices.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum {
	UART_RX = 0, UART_TX = 0, UART_DLL = 0,
	UART_IER = 1, UART_DLM = 1,
	UART_IIR = 2, UART_FCR = 2,
	UART_LCR = 3, UART_MCR = 4, UART_LSR = 5, UART_MSR = 6, UART_SCR = 7,
};
#define IER_RDI 0x01
#define IER_THRI 0x02
#define IIR_NO_INT 0x01
#define IIR_THRI 0x02
#define IIR_RDI 0x04
#define IIR_FIFO_BITS 0xc0
#define FCR_FIFO_ENABLE 0x01
#define FCR_CLEAR_RCVR 0x02
#define LCR_DLAB 0x80
#define MCR_DTR 0x01
#define MCR_RTS 0x02
#define MCR_OUT1 0x04
#define MCR_OUT2 0x08
#define MCR_LOOP 0x10
#define LSR_DR 0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define MSR_CTS 0x10
#define MSR_DSR 0x20
#define MSR_RI 0x40
#define MSR_DCD 0x80

static uint8_t serial_iir(const struct serial *s)
{
	uint8_t fifo = (s->fcr & FCR_FIFO_ENABLE) ? IIR_FIFO_BITS : 0;

	if ((s->ier & IER_RDI) && s->rx_count)
		return fifo | IIR_RDI;
	if ((s->ier & IER_THRI) && s->thri_pending)
		return fifo | IIR_THRI;
	return fifo | IIR_NO_INT;
}

/* Called with the lock held. */
static void serial_update_irq(struct serial *s)
{
	int level = !(serial_iir(s) & IIR_NO_INT);

	if (s->rx_count)
		s->lsr |= LSR_DR;
	else
		s->lsr &= (uint8_t)~LSR_DR;
	if (level != s->irq_level) {
		s->irq_level = level;
		if (s->host.irq_line)
			s->host.irq_line(s->host.opaque, s->irq, level);
	}
}

static void rx_push(struct serial *s, uint8_t c)
{
	if (s->rx_count < SERIAL_RX_FIFO) {
		s->rx[(s->rx_head + s->rx_count) % SERIAL_RX_FIFO] = c;
		s->rx_count++;
	}
}

static void tx_byte(struct serial *s, uint8_t c)
{
	if (s->mcr & MCR_LOOP) {
		rx_push(s, c);
		return;
	}
	if (s->out_fd < 0)
		return;
	if (s->out_limit) {
		if (s->out_written >= s->out_limit) {
			s->out_dropped++; /* full: until the main thread rotates it */
			return;
		}
		if (!s->rotate_asked && s->out_written >= s->out_limit - s->out_limit / 8) {
			uint64_t one = 1;

			s->rotate_asked = 1;
			if (write(s->rotate_efd, &one, sizeof(one)) < 0) {
				/* counter saturated: a request is pending anyway */
			}
		}
	}
	for (;;) {
		ssize_t w = write(s->out_fd, &c, 1);

		if (w == 1)
			s->out_written++;
		if (w == 1 || (w < 0 && errno != EINTR))
			return; /* a console that fails drops output, not the VM */
	}
}

static void serial_read(struct bus_dev *d, uint64_t off, void *data, unsigned len)
{
	struct serial *s = container_of(d, struct serial, bus);
	uint8_t v = 0;

	pthread_mutex_lock(&s->lock);
	switch (off) {
	case UART_RX:
		if (s->lcr & LCR_DLAB) {
			v = s->dll;
		} else if (s->rx_count) {
			int was_full = s->rx_count == SERIAL_RX_FIFO;

			v = s->rx[s->rx_head];
			s->rx_head = (s->rx_head + 1) % SERIAL_RX_FIFO;
			s->rx_count--;
			if (was_full && s->rx_space_efd >= 0) {
				uint64_t one = 1;

				if (write(s->rx_space_efd, &one, sizeof(one)) < 0) {
					/* counter saturated: a wakeup is pending anyway */
				}
			}
		}
		break;
	case UART_IER:
		v = (s->lcr & LCR_DLAB) ? s->dlm : s->ier;
		break;
	case UART_IIR:
		v = serial_iir(s);
		/* Reading IIR while it reports THRI acknowledges it. */
		if ((v & 0x0f) == IIR_THRI)
			s->thri_pending = 0;
		break;
	case UART_LCR:
		v = s->lcr;
		break;
	case UART_MCR:
		v = s->mcr;
		break;
	case UART_LSR:
		v = s->lsr | LSR_THRE | LSR_TEMT;
		break;
	case UART_MSR:
		if (s->mcr & MCR_LOOP) {
			v = 0;
			if (s->mcr & MCR_RTS)
				v |= MSR_CTS;
			if (s->mcr & MCR_DTR)
				v |= MSR_DSR;
			if (s->mcr & MCR_OUT1)
				v |= MSR_RI;
			if (s->mcr & MCR_OUT2)
				v |= MSR_DCD;
		} else {
			v = s->msr;
		}
		break;
	case UART_SCR:
		v = s->scr;
		break;
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	memset(data, 0, len);
	*(uint8_t *)data = v;
}

static void serial_write(struct bus_dev *d, uint64_t off, const void *data, unsigned len)
{
	struct serial *s = container_of(d, struct serial, bus);
	uint8_t v = *(const uint8_t *)data;

	(void)len;
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case UART_TX:
		if (s->lcr & LCR_DLAB) {
			s->dll = v;
		} else {
			tx_byte(s, v);
			/* Transmission is instant: THR is empty again. */
			s->thri_pending = 1;
		}
		break;
	case UART_IER:
		if (s->lcr & LCR_DLAB) {
			s->dlm = v;
		} else {
			/* Enabling THRI while THR is empty raises it at once. */
			if (!(s->ier & IER_THRI) && (v & IER_THRI))
				s->thri_pending = 1;
			s->ier = v & 0x0f;
		}
		break;
	case UART_FCR:
		s->fcr = v & (FCR_FIFO_ENABLE | 0xc0);
		if (v & FCR_CLEAR_RCVR) {
			s->rx_head = 0;
			s->rx_count = 0;
		}
		break;
	case UART_LCR:
		s->lcr = v;
		break;
	case UART_MCR:
		s->mcr = v & 0x1f;
		break;
	case UART_SCR:
		s->scr = v;
		break;
	default:
		break; /* LSR and MSR are read-only */
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

static const struct bus_ops serial_ops = {
	.read = serial_read,
	.write = serial_write,
};

int serial_init(struct serial *s, const struct legacy_host *host, uint64_t base, unsigned irq, int out_fd)
{
	memset(s, 0, sizeof(*s));
	s->bus.base = base;
	s->bus.len = 8;
	s->bus.name = "serial";
	s->bus.ops = &serial_ops;
	if (host)
		s->host = *host;
	s->irq = irq;
	s->out_fd = out_fd;
	s->msr = MSR_DCD | MSR_DSR | MSR_CTS;
	s->mcr = MCR_OUT2;
	s->rotate_efd = -1;
	s->rx_space_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->rx_space_efd < 0)
		return -errno;
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

int serial_set_limit(struct serial *s, uint64_t limit, uint64_t written)
{
	if (s->rotate_efd < 0) {
		s->rotate_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (s->rotate_efd < 0)
			return -errno;
	}
	pthread_mutex_lock(&s->lock);
	s->out_limit = limit;
	s->out_written = written;
	s->rotate_asked = 0;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int serial_rotate(struct serial *s, const char *path)
{
	char old[4096];
	uint64_t v;
	int fd, r = 0;

	if (read(s->rotate_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	if (snprintf(old, sizeof(old), "%s.1", path) >= (int)sizeof(old))
		return -ENAMETOOLONG;
	if (rename(path, old) < 0 && errno != ENOENT)
		r = -errno;
	/* A new file, never through a link someone put in its place. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0 && errno == EEXIST && unlink(path) == 0)
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&s->lock);
	if (dup3(fd, s->out_fd, O_CLOEXEC) < 0) {
		r = -errno;
	} else {
		s->out_written = 0;
		s->rotate_asked = 0;
	}
	pthread_mutex_unlock(&s->lock);
	close(fd);
	return r;
}

void serial_destroy(struct serial *s)
{
	if (s->rotate_efd >= 0)
		close(s->rotate_efd);
	s->rotate_efd = -1;
	if (s->rx_space_efd >= 0)
		close(s->rx_space_efd);
	s->rx_space_efd = -1;
	pthread_mutex_destroy(&s->lock);
}

size_t serial_rx_space(struct serial *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = SERIAL_RX_FIFO - s->rx_count;
	pthread_mutex_unlock(&s->lock);
	return n;
}

size_t serial_rx(struct serial *s, const uint8_t *buf, size_t len)
{
	size_t i;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < len && s->rx_count < SERIAL_RX_FIFO; i++)
		rx_push(s, buf[i]);
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return i;
}

void serial_save(struct serial *s, struct sbuf *b)
{
	unsigned i;

	pthread_mutex_lock(&s->lock);
	sb_u8(b, s->ier);
	sb_u8(b, s->lcr);
	sb_u8(b, s->mcr);
	sb_u8(b, s->lsr);
	sb_u8(b, s->msr);
	sb_u8(b, s->scr);
	sb_u8(b, s->dll);
	sb_u8(b, s->dlm);
	sb_u8(b, s->fcr);
	sb_u8(b, (uint8_t)s->thri_pending);
	sb_u8(b, (uint8_t)s->irq_level);
	sb_u32(b, s->rx_count);
	for (i = 0; i < s->rx_count; i++)
		sb_u8(b, s->rx[(s->rx_head + i) % SERIAL_RX_FIFO]);
	pthread_mutex_unlock(&s->lock);
}

int serial_restore(struct serial *s, struct srd *r)
{
	uint8_t rx[SERIAL_RX_FIFO];
	uint8_t v[11];
	uint32_t n, i;

	for (i = 0; i < sizeof(v); i++)
		v[i] = sr_u8(r);
	n = sr_u32(r);
	if (n > SERIAL_RX_FIFO) {
		sr_fail(r, "serial receive FIFO larger than the device's");
		return -EINVAL;
	}
	for (i = 0; i < n; i++)
		rx[i] = sr_u8(r);
	if (r->err)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->ier = v[0] & 0x0f;
	s->lcr = v[1];
	s->mcr = v[2] & 0x1f;
	s->lsr = v[3];
	s->msr = v[4];
	s->scr = v[5];
	s->dll = v[6];
	s->dlm = v[7];
	s->fcr = v[8];
	s->thri_pending = v[9] ? 1 : 0;
	s->irq_level = v[10] ? 1 : 0; /* the irqchip state carries the line */
	s->rx_head = 0;
	s->rx_count = n;
	memcpy(s->rx, rx, n);
	pthread_mutex_unlock(&s->lock);
	return 0;
}
