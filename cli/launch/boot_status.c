/* vmm run's status line while a sandbox starts (cli/launch/boot_status.h). */
#include "cli/launch/boot_status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const stage_name[] = {
	[BOOT_BOOTING] = "booting",
	[BOOT_RESTORING] = "restoring",
	[BOOT_KERNEL_UP] = "kernel up",
	[BOOT_GUEST_READY] = "guest ready",
	[BOOT_API_READY] = "API ready",
};

void boot_status_init(struct boot_status *b, const char *name, int enabled, int tty, uint64_t t0_ns)
{
	memset(b, 0, sizeof(*b));
	progress_init(&b->prog, enabled ? STDERR_FILENO : -1, tty, t0_ns);
	b->name = name;
}

void boot_status_show(struct boot_status *b, enum boot_stage stage, uint64_t now_ns)
{
	char el[32], line[160];

	if (b->started && stage < b->stage)
		stage = b->stage; /* never backwards */
	if (b->started && stage == b->stage && !b->prog.tty)
		return; /* elsewhere: a line per stage */
	b->stage = stage;
	b->started = 1;
	progress_elapsed(el, sizeof(el), now_ns > b->prog.t0_ns ? now_ns - b->prog.t0_ns : 0);
	snprintf(line, sizeof(line), "vmm: sandbox %s: %s (%s)", b->name, stage_name[stage], el);
	progress_show(&b->prog, line);
}

int boot_status_read(struct boot_status *b, int fd)
{
	char buf[16];
	int stage = b->stage;
	ssize_t n;

	/* One read: fd may block (after poll said it is readable). */
	do
		n = read(fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -1;
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == 'K' && stage < BOOT_KERNEL_UP)
			stage = BOOT_KERNEL_UP;
		else if (buf[i] == 'R')
			stage = BOOT_GUEST_READY;
	}
	return stage;
}

void boot_status_done(struct boot_status *b)
{
	progress_clear(&b->prog);
}
