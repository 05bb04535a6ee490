/* The device backends' event-loop thread (vmm/base/evloop.h). */
#include "vmm/base/evloop.h"
#include "vmm/base/thread.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void ctl_kick(struct evloop *l)
{
	uint64_t one = 1;

	if (write(l->ctl_efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated only if a wakeup is pending */
	}
}

int evloop_init(struct evloop *l, const char *name)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int e;

	memset(l, 0, sizeof(*l));
	l->name = name;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		return -errno;
	l->ctl_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->ctl_efd < 0) {
		e = -errno;
		goto err_ep;
	}
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->ctl_efd, &ev) < 0) {
		e = -errno;
		goto err_efd;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->state = EVLOOP_RUNNING;
	return 0;

err_efd:
	close(l->ctl_efd);
err_ep:
	close(l->epfd);
	l->epfd = l->ctl_efd = -1;
	return e;
}

int evloop_add(struct evloop *l, struct evloop_source *s, int fd, uint32_t events,
	       evloop_fn *fn, void *arg)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	s->fd = fd;
	s->fn = fn;
	s->arg = arg;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		s->fd = -1;
		return -errno;
	}
	return 0;
}

int evloop_mod(struct evloop *l, struct evloop_source *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0 ? -errno : 0;
}

void evloop_del(struct evloop *l, struct evloop_source *s)
{
	if (s->fd < 0)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	s->fd = -1;
}

/* Returns 0 to keep running, 1 to exit. Parks while paused. */
static int evloop_check_state(struct evloop *l)
{
	int stop;

	pthread_mutex_lock(&l->lock);
	if (l->call_pending) {
		l->call_result = l->call_fn(l->call_arg);
		l->call_pending = 0;
		pthread_cond_broadcast(&l->cond);
	}
	if (l->state == EVLOOP_PAUSING) {
		l->state = EVLOOP_PAUSED;
		pthread_cond_broadcast(&l->cond);
	}
	while (l->state == EVLOOP_PAUSED)
		pthread_cond_wait(&l->cond, &l->lock);
	stop = l->state == EVLOOP_STOPPING;
	pthread_mutex_unlock(&l->lock);
	return stop;
}

/* One batch: waits up to timeout_ms, runs the handlers, then after_batch.
 * Returns the number of events or -errno. */
static int evloop_batch(struct evloop *l, int timeout_ms)
{
	struct epoll_event evs[64];
	int n, i;

	n = epoll_wait(l->epfd, evs, 64, timeout_ms);
	if (n < 0)
		return -errno;
	for (i = 0; i < n; i++) {
		struct evloop_source *s = evs[i].data.ptr;

		if (!s) {
			uint64_t v;

			if (read(l->ctl_efd, &v, sizeof(v)) < 0) {
				/* nothing pending: spurious wakeup */
			}
			continue;
		}
		/* A handler earlier in this batch may have removed it. */
		if (s->fd >= 0)
			s->fn(l, s, evs[i].events);
		/* Pause between handlers, never inside one. */
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != EVLOOP_RUNNING)
			break;
	}
	if (l->after_batch)
		l->after_batch(l, l->after_arg);
	return n;
}

static void *evloop_thread(void *arg)
{
	struct evloop *l = arg;
	sigset_t all;

	vmm_thread_name(l->name);
	/* Process-directed signals (SIGTERM...) are the main thread's to take
	 * through its signalfd: a device thread must never be picked for one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	for (;;) {
		int n;

		if (evloop_check_state(l))
			break;
		n = evloop_batch(l, -1);
		if (n == -EINTR)
			continue;
		if (n < 0) {
			log_err("%s: epoll_wait: %s", l->name, strerror(-n));
			break;
		}
	}
	return NULL;
}

int evloop_poll(struct evloop *l, int timeout_ms)
{
	if (l->started)
		return -EBUSY;
	return evloop_batch(l, timeout_ms);
}

int evloop_start(struct evloop *l)
{
	int r = vmm_thread_start(&l->thread, evloop_thread, l, 0);

	if (r)
		return -r;
	l->started = 1;
	return 0;
}

void evloop_pause(struct evloop *l)
{
	pthread_mutex_lock(&l->lock);
	if (l->state == EVLOOP_RUNNING) {
		__atomic_store_n(&l->state, EVLOOP_PAUSING, __ATOMIC_RELEASE);
		ctl_kick(l);
	}
	if (l->started && !pthread_equal(pthread_self(), l->thread))
		while (l->state == EVLOOP_PAUSING)
			pthread_cond_wait(&l->cond, &l->lock);
	else if (!l->started)
		l->state = EVLOOP_PAUSED;
	pthread_mutex_unlock(&l->lock);
}

int evloop_call(struct evloop *l, int (*fn)(void *arg), void *arg)
{
	int r;

	pthread_mutex_lock(&l->lock);
	if (!l->started || l->state != EVLOOP_RUNNING) {
		pthread_mutex_unlock(&l->lock);
		return -ESRCH;
	}
	l->call_fn = fn;
	l->call_arg = arg;
	l->call_pending = 1;
	ctl_kick(l);
	while (l->call_pending)
		pthread_cond_wait(&l->cond, &l->lock);
	r = l->call_result;
	pthread_mutex_unlock(&l->lock);
	return r;
}

void evloop_resume(struct evloop *l)
{
	pthread_mutex_lock(&l->lock);
	if (l->state == EVLOOP_PAUSED || l->state == EVLOOP_PAUSING) {
		l->state = EVLOOP_RUNNING;
		pthread_cond_broadcast(&l->cond);
	}
	pthread_mutex_unlock(&l->lock);
}

void evloop_stop(struct evloop *l)
{
	if (!l->started)
		return;
	pthread_mutex_lock(&l->lock);
	l->state = EVLOOP_STOPPING;
	pthread_cond_broadcast(&l->cond);
	ctl_kick(l);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	l->started = 0;
	l->state = EVLOOP_RUNNING;
}

void evloop_destroy(struct evloop *l)
{
	if (l->epfd < 0)
		return;
	evloop_stop(l);
	close(l->ctl_efd);
	close(l->epfd);
	l->epfd = l->ctl_efd = -1;
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
}
