/* Small port-I/O devices: the vmm port (boot marker, power-off and the
 * API token window) and port 0x80. The i8042 is devices/i8042.c. */
#include "devices/devices.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Reads as 0 (port 0x80). */
static void zero_read(struct bus_dev *d, uint64_t off, void *data, unsigned len)
{
	(void)d;
	(void)off;
	memset(data, 0, len);
}

static void vmm_port_read(struct bus_dev *d, uint64_t off, void *data, unsigned len)
{
	(void)d;
	(void)off;
	memset(data, 0, len);
}

static void vmm_port_write(struct bus_dev *d, uint64_t off, const void *data, unsigned len)
{
	struct vmm_port *p = container_of(d, struct vmm_port, bus);
	uint8_t v = *(const uint8_t *)data;

	(void)len;
	if (off != 0)
		return;
	if (v == VMM_PORT_BOOT_READY) {
		if (p->host.boot_marker)
			p->host.boot_marker(p->host.opaque);
	} else if (v == VMM_PORT_POWEROFF) {
		if (p->host.exit)
			p->host.exit(p->host.opaque, LEGACY_EXIT_POWEROFF, "guest powered off");
	} else if (log_ratelimit_ok(&p->rl)) {
		log_warn("vmm port: unknown command 0x%02x from the guest", v);
	}
}

static const struct bus_ops vmm_port_ops = { .read = vmm_port_read, .write = vmm_port_write };

/* The token window: stateless (the port number is the byte's index), so
 * two vCPUs reading at once cannot interleave. The bus hands over only
 * accesses inside the window (off + len <= VMM_TOKEN_LEN). guest-init
 * reads it first thing: the first read tells vmm run's status line that
 * the kernel is up (the kernel_up notice; the VM takes it once). */
static void vmm_token_read(struct bus_dev *d, uint64_t off, void *data, unsigned len)
{
	struct vmm_port *p = container_of(d, struct vmm_port, token_bus);

	memcpy(data, p->token + off, len);
	if (p->host.kernel_up)
		p->host.kernel_up(p->host.opaque);
}

static void vmm_token_write(struct bus_dev *d, uint64_t off, const void *data, unsigned len)
{
	(void)d;
	(void)off;
	(void)data;
	(void)len;
}

static const struct bus_ops vmm_token_ops = { .read = vmm_token_read, .write = vmm_token_write };

void vmm_port_init(struct vmm_port *p, const struct legacy_host *host, const char *tok)
{
	const struct log_ratelimit rl = LOG_RATELIMIT_INIT;

	memset(p, 0, sizeof(*p));
	p->bus.base = VMM_PORT_BASE;
	p->bus.len = 1;
	p->bus.name = "vmm-port";
	p->bus.ops = &vmm_port_ops;
	p->token_bus.base = VMM_TOKEN_BASE;
	p->token_bus.len = VMM_TOKEN_LEN;
	p->token_bus.name = "vmm-token";
	p->token_bus.ops = &vmm_token_ops;
	if (tok)
		snprintf(p->token, sizeof(p->token), "%s", tok);
	if (host)
		p->host = *host;
	p->rl = rl;
}

static void post_write(struct bus_dev *d, uint64_t off, const void *data, unsigned len)
{
	(void)d;
	(void)off;
	(void)data;
	(void)len;
}

static const struct bus_ops post_ops = { .read = zero_read, .write = post_write };

void post_port_init(struct post_port *p)
{
	memset(p, 0, sizeof(*p));
	p->bus.base = 0x80;
	p->bus.len = 1;
	p->bus.name = "post";
	p->bus.ops = &post_ops;
}
