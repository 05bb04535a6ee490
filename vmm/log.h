/* Small log module: one line per message on stderr, prefixed "vmm: ".
 * The level is per process (set once from the CLI before any thread starts);
 * it is configuration, not state that changes while VMs run. */
#ifndef VMM_LOG_H
#define VMM_LOG_H

#include <stdint.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* Rate limit for messages a guest can trigger: at most `burst` lines per
 * `interval_ns`, then one "suppressed N" note. Embed one per call site owner
 * (a device), never a static: two VMs must not share it. */
struct log_ratelimit {
	uint64_t interval_ns;
	uint64_t window_start;
	unsigned burst;
	unsigned printed;
	unsigned suppressed;
};
#define LOG_RATELIMIT_INIT { 5000000000ull, 0, 10, 0, 0 }
int log_ratelimit_ok(struct log_ratelimit *rl);

uint64_t log_now_ns(void); /* CLOCK_MONOTONIC */

#endif
