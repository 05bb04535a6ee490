/* Event-loop thread for device backends: one epoll loop with reserved PAUSE
 * and STOP controls, so a device can be quiesced at a clean point (between
 * two handler calls: no request is half done) and resumed, e.g. around a
 * device reset or a snapshot.
 *
 * Sources are owned by the caller (embed a struct evloop_source, any
 * number of them). A source removed by a handler may still be referenced by
 * the batch of events being dispatched: evloop_del() marks it dead so the
 * loop skips it, and the caller frees its memory only after the batch, in
 * the `after_batch` hook. */
#ifndef VMM_EVLOOP_H
#define VMM_EVLOOP_H

#include <pthread.h>
#include <stdint.h>

struct evloop;
struct evloop_source;
typedef void evloop_fn(struct evloop *l, struct evloop_source *s, uint32_t events);

struct evloop_source {
	int fd;          /* -1 once removed */
	evloop_fn *fn;
	void *arg;
};

enum evloop_state { EVLOOP_RUNNING, EVLOOP_PAUSING, EVLOOP_PAUSED, EVLOOP_STOPPING };

struct evloop {
	const char *name;
	int epfd;
	int ctl_efd;          /* wakes the loop to look at `state` */
	pthread_t thread;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum evloop_state state;
	/* Optional: runs on the loop thread after each batch of events. */
	void (*after_batch)(struct evloop *l, void *arg);
	void *after_arg;
	/* evloop_call: a function for the loop thread to run, its result. */
	int (*call_fn)(void *arg);
	void *call_arg;
	int call_result;
	int call_pending;
};

int evloop_init(struct evloop *l, const char *name) __attribute__((warn_unused_result));
/* Watches s->fd for `events` (EPOLLIN, EPOLLOUT, ...); s->fn runs on the
 * loop thread. Safe from the loop thread, or while it is paused/not
 * started. */
int evloop_add(struct evloop *l, struct evloop_source *s, int fd, uint32_t events,
	       evloop_fn *fn, void *arg) __attribute__((warn_unused_result));
int evloop_mod(struct evloop *l, struct evloop_source *s, uint32_t events);
void evloop_del(struct evloop *l, struct evloop_source *s);
int evloop_start(struct evloop *l) __attribute__((warn_unused_result));
/* Returns once the loop thread is parked between handlers. Idempotent. */
void evloop_pause(struct evloop *l);
void evloop_resume(struct evloop *l);
/* Runs fn(arg) on the loop thread, between two handler calls, and returns
 * its result: how a loop thread installs its own seccomp filter (vm_run).
 * Not from the loop thread itself. -ESRCH if the loop is not running. */
int evloop_call(struct evloop *l, int (*fn)(void *arg), void *arg)
	__attribute__((warn_unused_result));
/* Stops and joins the thread; sources stay registered, the loop can be
 * driven with evloop_poll() from then on. Idempotent. */
void evloop_stop(struct evloop *l);
/* Runs one batch on the caller's thread (a loop whose thread is not
 * running: tests and fuzzers drive a device deterministically this way):
 * waits up to timeout_ms for events, runs their handlers, then
 * after_batch. Returns the number of events, or -errno (-EBUSY while the
 * thread runs). */
int evloop_poll(struct evloop *l, int timeout_ms) __attribute__((warn_unused_result));
/* Stops and joins the thread, closes the loop's own fds (not the sources'). */
void evloop_destroy(struct evloop *l);

#endif
