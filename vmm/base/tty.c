/* A terminal shared with the shell's job control: see tty.h. */
#include "vmm/base/tty.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

int tty_is_foreground(int fd)
{
	pid_t fg = tcgetpgrp(fd);

	return fg > 0 && fg == getpgrp();
}

int tty_open(struct tty *t, int fd, int raw_wanted, int keep_opost)
{
	memset(t, 0, sizeof(*t));
	t->fd = -1;
	if (!isatty(fd))
		return -1;
	t->fd = fd;
	t->raw_wanted = raw_wanted;
	t->keep_opost = keep_opost;
	signal(SIGTTIN, SIG_IGN);
	signal(SIGTTOU, SIG_IGN);
	return tty_update(t);
}

int tty_update(struct tty *t)
{
	struct termios raw;
	int fg;

	if (t->fd < 0)
		return 0;
	fg = tty_is_foreground(t->fd);
	/* The mode to put back is the one found the first time: a shell that
	 * stopped us and brings us back restores the raw mode it saved. */
	if (fg && !t->fg && t->raw_wanted && (t->raw || tcgetattr(t->fd, &t->saved) == 0)) {
		raw = t->saved;
		cfmakeraw(&raw);
		if (t->keep_opost)
			raw.c_oflag |= OPOST | ONLCR; /* keep host-side newlines sane */
		if (tcsetattr(t->fd, TCSANOW, &raw) == 0)
			t->raw = 1;
	}
	t->fg = fg;
	return fg;
}

void tty_close(struct tty *t)
{
	if (t->fd >= 0 && t->raw && tty_is_foreground(t->fd))
		tcsetattr(t->fd, TCSANOW, &t->saved);
	t->raw = 0;
}
