/* Event-loop thread for device backends: one epoll loop with reserved PAUSE
 * and KILL controls, so a device can be quiesced at a clean point (between
 * two handler calls: no request is half done) and resumed, e.g. around a
 * device reset or a snapshot. */
#ifndef VMM_EVLOOP_H
#define VMM_EVLOOP_H

#include <pthread.h>
#include <stdint.h>

#define EVLOOP_MAX_SOURCES 16

struct evloop;
typedef void evloop_fn(struct evloop *l, void *arg, uint32_t events);

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
	struct evloop_source {
		int fd;
		evloop_fn *fn;
		void *arg;
	} src[EVLOOP_MAX_SOURCES];
};

int evloop_init(struct evloop *l, const char *name) __attribute__((warn_unused_result));
/* Watch fd for `events` (EPOLLIN...); fn runs on the loop thread. Sources
 * may be added or removed only while the loop is paused or not started. */
int evloop_add(struct evloop *l, int fd, uint32_t events, evloop_fn *fn, void *arg)
	__attribute__((warn_unused_result));
int evloop_del(struct evloop *l, int fd);
int evloop_start(struct evloop *l) __attribute__((warn_unused_result));
/* Returns once the loop thread is parked between handlers. Idempotent.
 * Called from the loop thread itself it only records the request. */
void evloop_pause(struct evloop *l);
void evloop_resume(struct evloop *l);
/* Stops and joins the thread, closes everything. */
void evloop_destroy(struct evloop *l);

#endif
