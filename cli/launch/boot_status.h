/* vmm run's status line while a sandbox starts (docs/cli.md): booting,
 * kernel up (the guest's init started), API ready, with the time elapsed;
 * one line rewritten on a terminal and taken away before the command's
 * output, a plain line per stage elsewhere, nothing with -q. */
#ifndef CLI_BOOT_STATUS_H
#define CLI_BOOT_STATUS_H

#include <stdint.h>

#include "cli/util/util.h"

enum boot_stage { BOOT_BOOTING, BOOT_RESTORING, BOOT_KERNEL_UP, BOOT_GUEST_READY, BOOT_API_READY };

struct boot_status {
	struct progress prog;
	const char *name;       /* the sandbox's */
	enum boot_stage stage;
	int started;            /* a stage was shown */
};

/* enabled: show anything (not -q); tty: stderr is a terminal. t0_ns: when
 * the VMM started (the elapsed time counts from there). */
void boot_status_init(struct boot_status *b, const char *name, int enabled, int tty, uint64_t t0_ns);
/* Shows stage at now_ns: on a terminal every call (the elapsed time
 * ticks), elsewhere only a new stage. */
void boot_status_show(struct boot_status *b, enum boot_stage stage, uint64_t now_ns);
/* The bytes the VMM writes to the boot marker pipe: 'K' kernel up, 'R'
 * ready (vmm/vm.h marker_fd). One read from fd (non-blocking, or after
 * poll said it is readable): the stage reached (at least b's; -1 at EOF,
 * b's if nothing was there). */
int boot_status_read(struct boot_status *b, int fd);
/* Takes the line away (the command's output follows). */
void boot_status_done(struct boot_status *b);

#endif
