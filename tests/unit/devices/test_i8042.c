/* i8042: Linux's i8042/atkbd probe sequence answered, Ctrl-Alt-Del typed
 * only once a driver set the controller up, IRQ 1 edges, the reset line,
 * the snapshot record. No KVM: the VM's side (struct legacy_host) is
 * callbacks that record what the controller asked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "devices/devices.h"

static unsigned irq_edges, resets;
static int irq_level;

static void irq_line(void *opaque, unsigned gsi, int level)
{
	(void)opaque;
	assert_int_equal(gsi, I8042_IRQ);
	if (level && !irq_level)
		irq_edges++;
	irq_level = level;
}

static void machine_exit(void *opaque, enum legacy_exit r, const char *msg)
{
	(void)opaque;
	(void)msg;
	assert_int_equal(r, LEGACY_EXIT_REBOOT);
	resets++;
}

static const struct legacy_host host = { .irq_line = irq_line, .exit = machine_exit };

static uint8_t in8(struct i8042 *k, unsigned port)
{
	uint8_t v = 0xee;

	k->bus.ops->read(&k->bus, port - 0x60, &v, 1);
	return v;
}

static void out8(struct i8042 *k, unsigned port, uint8_t v)
{
	k->bus.ops->write(&k->bus, port - 0x60, &v, 1);
}

static void reset_counts(void)
{
	irq_edges = resets = 0;
	irq_level = 0;
}

/* What Linux's i8042_controller_check/init and atkbd do, in order. */
static void linux_probe(void **state)
{
	struct i8042 k;
	uint8_t ctr;

	(void)state;
	reset_counts();
	i8042_init(&k, &host);
	/* A controller is there: the status is not 0xff, nothing to flush. */
	assert_int_not_equal(in8(&k, 0x64), 0xff);
	assert_int_equal(in8(&k, 0x64) & 1, 0);
	/* Self test (i8042.reset): 0x55. */
	out8(&k, 0x64, 0xaa);
	assert_int_equal(in8(&k, 0x64) & 1, 1);
	assert_int_equal(in8(&k, 0x60), 0x55);
	assert_int_equal(in8(&k, 0x64) & 1, 0);
	/* Read the control register (twice, as Linux does until it agrees). */
	out8(&k, 0x64, 0x20);
	ctr = in8(&k, 0x60);
	out8(&k, 0x64, 0x20);
	assert_int_equal(in8(&k, 0x60), ctr);
	assert_true(ctr & 0x01); /* keyboard interrupt on */
	assert_false(ctr & 0x40); /* no translation: set 2 codes */
	/* Before a driver wrote the control register, no keys. */
	assert_int_equal(i8042_ctrl_alt_del(&k), -ENODEV);
	/* Write it: interrupts off while probing... */
	out8(&k, 0x64, 0x60);
	assert_true(in8(&k, 0x64) & 0x08);
	out8(&k, 0x60, (uint8_t)(ctr & ~0x01));
	assert_false(in8(&k, 0x64) & 0x08);
	out8(&k, 0x64, 0x20);
	assert_int_equal(in8(&k, 0x60), ctr & ~0x01);
	/* ... a keyboard command is acknowledged, no interrupt while off. */
	out8(&k, 0x60, 0xf2); /* GETID: ACK, then an MF2 keyboard's id */
	assert_int_equal(in8(&k, 0x60), 0xfa);
	assert_int_equal(in8(&k, 0x60), 0xab);
	assert_int_equal(in8(&k, 0x60), 0x83);
	assert_false(in8(&k, 0x64) & 0x01);
	assert_int_equal(irq_edges, 0);
	/* Interrupts back on (i8042_enable_kbd_port). */
	out8(&k, 0x64, 0x60);
	out8(&k, 0x60, ctr);
	out8(&k, 0x60, 0xed); /* SETLEDS: ACK with an edge on IRQ 1 */
	assert_int_equal(irq_edges, 1);
	assert_int_equal(irq_level, 0);
	assert_int_equal(in8(&k, 0x60), 0xfa);
	/* Output port round trip. */
	out8(&k, 0x64, 0xd1);
	out8(&k, 0x60, 0x03);
	out8(&k, 0x64, 0xd0);
	assert_int_equal(in8(&k, 0x60), 0x03);
	/* Wider accesses are ignored. */
	{
		uint16_t w = 0x1234;

		k.bus.ops->read(&k.bus, 4, &w, 2);
		assert_int_equal(w, 0);
	}
	i8042_destroy(&k);
}

static void ctrl_alt_del(void **state)
{
	static const uint8_t want[] = { 0x14, 0x11, 0xe0, 0x71 };
	struct i8042 k;
	unsigned i;

	(void)state;
	reset_counts();
	i8042_init(&k, &host);
	out8(&k, 0x64, 0x60);
	out8(&k, 0x60, 0x45); /* Linux's usual CTR: KBDINT, SYS, XLATE off... */
	out8(&k, 0x64, 0x60);
	out8(&k, 0x60, 0x05);
	assert_int_equal(i8042_ctrl_alt_del(&k), 0);
	assert_int_equal(irq_edges, 1);
	for (i = 0; i < sizeof(want); i++) {
		assert_true(in8(&k, 0x64) & 1);
		assert_int_equal(in8(&k, 0x60), want[i]);
	}
	assert_false(in8(&k, 0x64) & 1);
	/* An interrupt per byte left after a read: three more. */
	assert_int_equal(irq_edges, 4);
	/* Four sequences fill the 16-byte buffer; a fifth has no room. */
	for (i = 0; i < 4; i++)
		assert_int_equal(i8042_ctrl_alt_del(&k), 0);
	assert_int_equal(i8042_ctrl_alt_del(&k), -ENOSPC);
	/* Keyboard interrupt turned off by the driver: no keys. */
	out8(&k, 0x64, 0x60);
	out8(&k, 0x60, 0x04);
	assert_int_equal(i8042_ctrl_alt_del(&k), -ENODEV);
	i8042_destroy(&k);
}

static void reset_line(void **state)
{
	struct i8042 k;

	(void)state;
	reset_counts();
	i8042_init(&k, &host);
	out8(&k, 0x64, 0xfe);
	assert_int_equal(resets, 1);
	out8(&k, 0x60, 0xfe); /* on the data port: a keyboard command */
	assert_int_equal(resets, 1);
	i8042_destroy(&k);
}

static void snapshot(void **state)
{
	struct i8042 k, k2;
	struct sbuf b;
	struct srd r;

	(void)state;
	reset_counts();
	i8042_init(&k, &host);
	i8042_init(&k2, &host);
	out8(&k, 0x64, 0x60);
	out8(&k, 0x60, 0x05);
	assert_int_equal(i8042_ctrl_alt_del(&k), 0);
	(void)in8(&k, 0x60);
	sb_init(&b);
	i8042_save(&k, &b);
	assert_int_equal(b.err, 0);
	sr_init(&r, b.p, b.len);
	assert_int_equal(i8042_restore(&k2, &r), 0);
	assert_int_equal(in8(&k2, 0x60), 0x11);
	assert_int_equal(in8(&k2, 0x60), 0xe0);
	assert_int_equal(i8042_ctrl_alt_del(&k2), 0); /* the driver was seen */
	/* A count past the buffer is refused. */
	b.p[5] = 17;
	sr_init(&r, b.p, b.len);
	assert_int_equal(i8042_restore(&k2, &r), -EINVAL);
	sb_free(&b);
	i8042_destroy(&k);
	i8042_destroy(&k2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(linux_probe),
		cmocka_unit_test(ctrl_alt_del),
		cmocka_unit_test(reset_line),
		cmocka_unit_test(snapshot),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
