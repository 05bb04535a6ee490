#define _GNU_SOURCE
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Process-wide configuration written once by the CLI before threads start. */
static enum log_level configured_level = LOG_INFO;

void log_set_level(enum log_level level) { configured_level = level; }
enum log_level log_get_level(void) { return configured_level; }

uint64_t log_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error: ", "warning: ", "", "debug: " };
	char buf[1024];
	va_list ap;
	int n;

	if (level > configured_level)
		return;
	n = snprintf(buf, sizeof(buf), "vmm: %s", names[level]);
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	/* One write per line so lines from several threads do not interleave. */
	strcat(buf, "\n");
	fputs(buf, stderr);
}

/* Callable from several threads at once (vCPUs and a device's loop): the
 * counters are updated atomically; a race only blurs a window's edge. */
int log_ratelimit_ok(struct log_ratelimit *rl)
{
	uint64_t now = log_now_ns();
	uint64_t start = __atomic_load_n(&rl->window_start, __ATOMIC_RELAXED);

	if (now - start > rl->interval_ns &&
	    __atomic_compare_exchange_n(&rl->window_start, &start, now, 0, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED)) {
		unsigned missed = __atomic_exchange_n(&rl->suppressed, 0, __ATOMIC_RELAXED);

		if (missed)
			log_warn("%u similar messages suppressed", missed);
		__atomic_store_n(&rl->printed, 0, __ATOMIC_RELAXED);
	}
	if (__atomic_fetch_add(&rl->printed, 1, __ATOMIC_RELAXED) < rl->burst)
		return 1;
	__atomic_fetch_add(&rl->suppressed, 1, __ATOMIC_RELAXED);
	return 0;
}
