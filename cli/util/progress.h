/* A one-line status on a terminal (vmm run's boot, vmm cp's bytes): on a
 * terminal the line is rewritten in place ("\r", clear to the end) and
 * cleared when done; elsewhere each new status is a line of its own. */
#ifndef CLI_PROGRESS_H
#define CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

struct progress {
	int fd;           /* where it goes (stderr), -1: silenced (-q) */
	int tty;          /* rewrite one line in place */
	int shown;        /* a status is on the terminal's line now */
	uint64_t t0_ns;   /* when it started: the elapsed time is from here */
	char last[160];   /* the status shown last (not a terminal: no repeats) */
};

/* fd -1 silences it; tty: fd is a terminal (isatty, or a test's choice). */
void progress_init(struct progress *p, int fd, int tty, uint64_t now_ns);
/* Shows text (one line, no newline). Not a terminal: a line each time
 * the text changes. */
void progress_show(struct progress *p, const char *text);
/* Takes the line off the terminal (output follows): nothing elsewhere. */
void progress_clear(struct progress *p);
/* "1.5 KiB", "12.3 MiB": n bytes, binary units. */
void progress_bytes(char *buf, size_t len, uint64_t n);
/* "0.4 s", "12 s", "2m05s": an elapsed time. */
void progress_elapsed(char *buf, size_t len, uint64_t ns);

#endif
