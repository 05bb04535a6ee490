/* The egress proxy's live policy (docs/egress.md, "Changing the policy"):
 * an immutable, reference-counted snapshot (the parsed policy, its
 * credentials, the TLS client context of each rule) that a holder swaps
 * for a new one under a mutex. A request takes a reference to the policy
 * current when it starts and keeps it to its end, so a change applies
 * from the next request on (inside an intercepted tunnel too) and never
 * under a request's feet; the last reference frees the old one, its
 * credentials wiped. No I/O here: tests/unit/cli/egress/test_egress_pol.c swaps it
 * under concurrent readers. */
#ifndef CLI_EGRESS_POL_H
#define CLI_EGRESS_POL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/egress/egress_http.h"

struct eg_live {
	_Atomic unsigned refs;   /* the holder's, while current, and one per user */
	uint64_t version;        /* 1 for the policy a proxy starts with, +1 for each change */
	struct eg_policy p;      /* never changes once published */
	void *tls[EG_MAX_RULES]; /* the upstream TLS context of each rule (egress.c) */
	void (*free_tls)(void *); /* frees one of them; NULL: nothing to free */
};

struct eg_holder {
	pthread_mutex_t lock;    /* guards cur and the reference it holds */
	struct eg_live *cur;
	uint64_t last_version;
};

/* A new, unpublished snapshot with one reference (the caller's), or NULL. */
struct eg_live *eg_live_new(void);
/* Drops a reference; the last frees the snapshot (credentials wiped). */
void eg_live_put(struct eg_live *l);

/* The holder starts with first (taking over the caller's reference). */
void eg_holder_init(struct eg_holder *h, struct eg_live *first);
/* The current policy, with a reference the caller drops (eg_live_put). */
struct eg_live *eg_holder_get(struct eg_holder *h);
/* Publishes l (taking over the caller's reference) as the next version;
 * the old one goes when its last user is done. Returns l's version. */
uint64_t eg_holder_swap(struct eg_holder *h, struct eg_live *l);
/* Drops the holder's reference (users may still hold theirs). */
void eg_holder_destroy(struct eg_holder *h);

/* The policy as JSON for `vmm egress show`: every field, with each
 * credential replaced by "value": "(redacted)" (never its bytes, nor its
 * length). Its length, or -E2BIG. */
long eg_policy_show(const struct eg_policy *p, uint64_t version, char *out, size_t len);

#endif
