/* A terminal shared with the shell's job control. A process that reads
 * its terminal, or changes its mode, while its process group is not the
 * terminal's foreground one is stopped (SIGTTIN, SIGTTOU): `vmm run ... &`
 * stopped at once. So the VMM's console and `vmm exec`/`run -- CMD`'s
 * stdin read the terminal, and put it in raw mode, only while they are in
 * the foreground, and take it up again when the shell brings them there
 * (`fg`): the caller checks tty_update() when it would read, and every
 * fraction of a second while in the background. */
#ifndef VMM_TTY_H
#define VMM_TTY_H

#include <termios.h>

struct tty {
	int fd;          /* the terminal */
	int raw_wanted;  /* raw mode while in the foreground */
	int keep_opost;  /* raw, but output keeps OPOST|ONLCR (the console) */
	int fg;          /* our process group is the terminal's foreground */
	int raw;         /* raw mode set by us: `saved` is the mode to put back */
	struct termios saved;
};

/* How often a background reader looks again (tty_update). */
#define TTY_BACKGROUND_POLL_MS 250

/* 1 if fd is a terminal and our process group is its foreground, else 0. */
int tty_is_foreground(int fd);
/* If fd is a terminal: fills *t, ignores SIGTTIN and SIGTTOU for the
 * process (a background read then fails with EIO instead of stopping us;
 * output goes on), and returns tty_update(t). -1 if fd is no terminal. */
int tty_open(struct tty *t, int fd, int raw_wanted, int keep_opost);
/* Looks whether we are in the foreground (now), setting raw mode on the
 * way in (the mode found then is what tty_close puts back). On the way out
 * nothing is touched: the shell that took the terminal has set its own
 * mode. Returns t->fg. */
int tty_update(struct tty *t);
/* Puts back the mode we changed, if we are still in the foreground. */
void tty_close(struct tty *t);

#endif
