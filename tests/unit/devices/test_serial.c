/* 8250 UART: output, loopback probe, receive FIFO and interrupts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "devices/devices.h"

/* The one thing the UART asks of its VM (struct legacy_host): the
 * interrupt line's level, recorded. */
static int irq_level = -1;
static unsigned irq_changes;
static void irq_line(void *opaque, unsigned gsi, int level)
{
	(void)opaque;
	assert_int_equal(gsi, SERIAL_COM1_IRQ);
	irq_level = level;
	irq_changes++;
}

static const struct legacy_host host = { .irq_line = irq_line };

struct fixture {
	struct serial s;
	int pipe[2];
};

static uint8_t rd(struct serial *s, unsigned off)
{
	uint8_t v;

	s->bus.ops->read(&s->bus, off, &v, 1);
	return v;
}

static void wr(struct serial *s, unsigned off, uint8_t v)
{
	s->bus.ops->write(&s->bus, off, &v, 1);
}

static int setup(void **state)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	if (pipe2(f.pipe, O_NONBLOCK))
		return -1;
	if (serial_init(&f.s, &host, SERIAL_COM1_BASE, SERIAL_COM1_IRQ, f.pipe[1]))
		return -1;
	irq_level = -1;
	irq_changes = 0;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	serial_destroy(&f->s);
	close(f->pipe[0]);
	close(f->pipe[1]);
	return 0;
}

static void output_goes_to_fd(void **state)
{
	struct fixture *f = *state;
	char buf[8];

	wr(&f->s, 0, 'h');
	wr(&f->s, 0, 'i');
	assert_int_equal(read(f->pipe[0], buf, sizeof(buf)), 2);
	assert_memory_equal(buf, "hi", 2);
	assert_int_equal(rd(&f->s, 5) & 0x60, 0x60); /* THRE|TEMT: always ready */
}

/* A console file is capped: past 7/8 of the limit the main thread is
 * asked (rotate_efd) to rotate it; nothing past the limit reaches the
 * file; serial_rotate moves it to PATH.1 and the writes go to a new PATH. */
static void console_file_is_capped_and_rotated(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/test_serial.XXXXXX", path[64], old[80];
	struct pollfd p;
	struct stat st;
	int fd, i;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/console.log", dir);
	snprintf(old, sizeof(old), "%s.1", path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	f->s.out_fd = fd;
	assert_int_equal(serial_set_limit(&f->s, 1024, 0), 0);
	p.fd = f->s.rotate_efd;
	p.events = POLLIN;
	for (i = 0; i < 800; i++)
		wr(&f->s, 0, 'a');
	assert_int_equal(poll(&p, 1, 0), 0); /* below 7/8: no request */
	for (i = 0; i < 100000; i++)
		wr(&f->s, 0, 'b');
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 1024);
	assert_int_equal(poll(&p, 1, 0), 1);
	assert_int_equal(serial_rotate(&f->s, path), 0);
	assert_int_equal(poll(&p, 1, 0), 0);
	assert_int_equal(stat(old, &st), 0);
	assert_int_equal(st.st_size, 1024);
	wr(&f->s, 0, 'c');
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 1);
	/* A link put in the new file's place is not followed. */
	for (i = 0; i < 1000; i++)
		wr(&f->s, 0, 'd');
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/passwd-not-here", path), 0);
	assert_int_equal(serial_rotate(&f->s, path), 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	f->s.out_fd = -1;
	close(fd);
	unlink(path);
	unlink(old);
	rmdir(dir);
}

static void loopback_probe(void **state)
{
	struct fixture *f = *state;
	char buf[4];

	/* Linux's autoconfig: MCR = LOOP|OUT2|RTS, expect MSR high nibble 0x90. */
	wr(&f->s, 4, 0x1a);
	assert_int_equal(rd(&f->s, 6) & 0xf0, 0x90);
	wr(&f->s, 4, 0x1f);
	assert_int_equal(rd(&f->s, 6) & 0xf0, 0xf0);
	/* In loopback, transmitted bytes come back and never reach the fd. */
	wr(&f->s, 0, 'x');
	assert_true(rd(&f->s, 5) & 1);
	assert_int_equal(rd(&f->s, 0), 'x');
	assert_int_equal(read(f->pipe[0], buf, sizeof(buf)), -1);
	wr(&f->s, 4, 0x08);
	assert_int_equal(rd(&f->s, 6) & 0xf0, 0xb0); /* DCD|DSR|CTS */
}

static void divisor_latch(void **state)
{
	struct fixture *f = *state;
	char buf[4];

	wr(&f->s, 3, 0x80); /* DLAB */
	wr(&f->s, 0, 0x0c);
	wr(&f->s, 1, 0x00);
	assert_int_equal(rd(&f->s, 0), 0x0c);
	assert_int_equal(read(f->pipe[0], buf, sizeof(buf)), -1); /* not output */
	wr(&f->s, 3, 0x03);
	assert_int_equal(rd(&f->s, 3), 0x03);
}

static void receive_and_interrupts(void **state)
{
	struct fixture *f = *state;
	uint8_t big[100];
	uint64_t ev;
	unsigned i;

	assert_int_equal(rd(&f->s, 2) & 0x0f, 0x01); /* no interrupt */
	wr(&f->s, 1, 0x01);                          /* IER: receive data */
	assert_int_equal(serial_rx(&f->s, (const uint8_t *)"ab", 2), 2);
	assert_int_equal(irq_level, 1);
	assert_int_equal(rd(&f->s, 2) & 0x0f, 0x04); /* RDI */
	assert_int_equal(rd(&f->s, 0), 'a');
	assert_int_equal(irq_level, 1);
	assert_int_equal(rd(&f->s, 0), 'b');
	assert_int_equal(irq_level, 0);
	assert_int_equal(rd(&f->s, 5) & 1, 0);

	/* The FIFO takes 64 bytes, no more; draining a full FIFO tells the
	 * host side there is room again. */
	memset(big, 'z', sizeof(big));
	assert_int_equal(serial_rx(&f->s, big, sizeof(big)), SERIAL_RX_FIFO);
	assert_int_equal(serial_rx_space(&f->s), 0);
	assert_int_equal(serial_rx(&f->s, big, 1), 0);
	rd(&f->s, 0);
	assert_int_equal(read(f->s.rx_space_efd, &ev, sizeof(ev)), sizeof(ev));
	for (i = 1; i < SERIAL_RX_FIFO; i++)
		assert_int_equal(rd(&f->s, 0), 'z');
	assert_int_equal(irq_level, 0);

	/* THRI: raised when enabled with THR empty, acknowledged by reading
	 * IIR, raised again by the next transmitted byte. */
	wr(&f->s, 1, 0x02);
	assert_int_equal(irq_level, 1);
	assert_int_equal(rd(&f->s, 2) & 0x0f, 0x02);
	assert_int_equal(irq_level, 0);
	assert_int_equal(rd(&f->s, 2) & 0x0f, 0x01);
	wr(&f->s, 0, '!');
	assert_int_equal(irq_level, 1);
	/* Receive data outranks THRI. */
	wr(&f->s, 1, 0x03);
	serial_rx(&f->s, (const uint8_t *)"q", 1);
	assert_int_equal(rd(&f->s, 2) & 0x0f, 0x04);
}

static void fifo_control(void **state)
{
	struct fixture *f = *state;

	wr(&f->s, 2, 0x01);
	assert_int_equal(rd(&f->s, 2) & 0xc0, 0xc0);
	serial_rx(&f->s, (const uint8_t *)"abc", 3);
	wr(&f->s, 2, 0x03); /* clear receive FIFO */
	assert_int_equal(rd(&f->s, 5) & 1, 0);
	assert_int_equal(serial_rx_space(&f->s), SERIAL_RX_FIFO);
	/* Writes to read-only registers and odd offsets are ignored. */
	wr(&f->s, 5, 0);
	wr(&f->s, 6, 0);
	assert_int_equal(rd(&f->s, 5) & 0x60, 0x60);
	wr(&f->s, 7, 0x42);
	assert_int_equal(rd(&f->s, 7), 0x42);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(output_goes_to_fd, setup, teardown),
		cmocka_unit_test_setup_teardown(loopback_probe, setup, teardown),
		cmocka_unit_test_setup_teardown(divisor_latch, setup, teardown),
		cmocka_unit_test_setup_teardown(receive_and_interrupts, setup, teardown),
		cmocka_unit_test_setup_teardown(fifo_control, setup, teardown),
		cmocka_unit_test_setup_teardown(console_file_is_capped_and_rotated, setup, teardown),
	};

	return cmocka_run_group_tests_name("serial", tests, NULL, NULL);
}
