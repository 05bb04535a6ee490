/* Small log module: one line per message on stderr, prefixed "vmm: ".
 * The level and the sink are per process, set from the CLI or the
 * pre-boot API (PUT /logger) before any VM thread starts; they are
 * configuration, not state that changes while VMs run (the API refuses a
 * new logger once the VM runs). */
#ifndef VMM_LOG_H
#define VMM_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Firecracker's logger (PUT /logger): lines go to `fd` (a file or FIFO,
 * written without blocking: a line a full FIFO cannot take is dropped) in
 * Firecracker's shape, "TIME [ID:THREAD(:LEVEL)(:FILE:LINE)] message";
 * fd -1 goes back to stderr and vmm's own "vmm: " lines. The caller keeps
 * fd open while it is set, and `id` alive. */
struct log_sink {
	int fd;
	const char *id;
	int show_level, show_origin;
};
void log_set_sink(const struct log_sink *s);
/* Formats one line for a sink into out (at most cap bytes, with the
 * newline). Exposed for tests. Its length. */
size_t log_format_sink(char *out, size_t cap, const struct log_sink *s, enum log_level level,
		       const char *file, int line, const char *msg);

void log_msg_at(enum log_level level, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#define log_msg(level, ...) log_msg_at(level, __FILE__, __LINE__, __VA_ARGS__)

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
