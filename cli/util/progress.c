/* A one-line status on a terminal (cli/util/progress.h). */
#include "cli/util/progress.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void progress_init(struct progress *p, int fd, int tty, uint64_t now_ns)
{
	memset(p, 0, sizeof(*p));
	p->fd = fd;
	p->tty = tty;
	p->t0_ns = now_ns;
}

static void put(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* a status line is not worth failing for */
		s += w;
		n -= (size_t)w;
	}
}

void progress_show(struct progress *p, const char *text)
{
	char line[sizeof(p->last) + 16];
	int n;

	if (p->fd < 0)
		return;
	if (!p->tty && !strcmp(p->last, text))
		return;
	snprintf(p->last, sizeof(p->last), "%s", text);
	/* "\r" then "ESC [ K" (erase to the end of the line): the new text
	 * replaces the old whatever their lengths. */
	n = snprintf(line, sizeof(line), p->tty ? "\r\033[K%s" : "%s\n", p->last);
	if (n > 0)
		put(p->fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	p->shown = p->tty;
}

void progress_clear(struct progress *p)
{
	if (p->fd >= 0 && p->shown)
		put(p->fd, "\r\033[K", 4);
	p->shown = 0;
}

void progress_bytes(char *buf, size_t len, uint64_t n)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	unsigned i = 0;

	if (n < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)n);
		return;
	}
	v /= 1024;
	while (v >= 1024 && i + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, "%.1f %s", v, unit[i]);
}

void progress_elapsed(char *buf, size_t len, uint64_t ns)
{
	uint64_t s = ns / 1000000000ull;

	if (s < 10)
		snprintf(buf, len, "%.1f s", (double)ns / 1e9);
	else if (s < 60)
		snprintf(buf, len, "%llu s", (unsigned long long)s);
	else
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
}
