/* The log: one line per message, level and sink per process (vmm/base/log.h). */
#include "vmm/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

/* Process-wide configuration written by the CLI or the pre-boot API
 * before VM threads start (log.h). */
static enum log_level configured_level = LOG_INFO;
static struct log_sink configured_sink = { .fd = -1 };

void log_set_sink(const struct log_sink *s)
{
	if (s)
		configured_sink = *s;
	else
		configured_sink = (struct log_sink){ .fd = -1 };
}

size_t log_format_sink(char *out, size_t cap, const struct log_sink *s, enum log_level level,
		       const char *file, int line, const char *msg)
{
	static const char *const levels[] = { "ERROR", "WARN", "INFO", "DEBUG" };
	char thread[16] = "", when[40] = "", lv[16] = "", origin[128] = "";
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (localtime_r(&ts.tv_sec, &tm))
		snprintf(when + strftime(when, 24, "%Y-%m-%dT%H:%M:%S", &tm), 16, ".%09ld", ts.tv_nsec);
	if (pthread_getname_np(pthread_self(), thread, sizeof(thread)) || !thread[0])
		snprintf(thread, sizeof(thread), "main");
	if (s->show_level)
		snprintf(lv, sizeof(lv), ":%s", levels[level]);
	if (s->show_origin)
		snprintf(origin, sizeof(origin), ":%s:%d", file, line);
	n = snprintf(out, cap, "%s [%s:%s%s%s] %s\n", when, s->id ? s->id : "anonymous-instance", thread, lv,
		     origin, msg);
	if (n < 0)
		return 0;
	if ((size_t)n >= cap) { /* cut, but still one line */
		out[cap - 2] = '\n';
		return cap - 1;
	}
	return (size_t)n;
}

void log_set_level(enum log_level level) { configured_level = level; }
enum log_level log_get_level(void) { return configured_level; }

uint64_t log_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void log_msg_at(enum log_level level, const char *file, int line, const char *fmt, ...)
{
	static const char *const names[] = { "error: ", "warning: ", "", "debug: " };
	char buf[1024];
	va_list ap;
	int n;

	if (level > configured_level)
		return;
	if (configured_sink.fd >= 0) {
		char msg[1024], out[1400];
		size_t len;
		ssize_t w;

		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		len = log_format_sink(out, sizeof(out), &configured_sink, level, file, line, msg);
		/* One write per line (O_APPEND); a full FIFO drops the line. */
		w = write(configured_sink.fd, out, len);
		(void)w;
		return;
	}
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
