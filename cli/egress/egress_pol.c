/* The egress proxy's live policy: see egress_pol.h. */
#include "cli/egress/egress_pol.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct eg_live *eg_live_new(void)
{
	struct eg_live *l = calloc(1, sizeof(*l));

	if (l)
		atomic_init(&l->refs, 1);
	return l;
}

void eg_live_put(struct eg_live *l)
{
	unsigned i;

	/* acq_rel: the freeing thread sees every other user's last accesses
	 * (their decrement releases them). */
	if (!l || atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (i = 0; i < EG_MAX_RULES; i++)
		if (l->tls[i] && l->free_tls)
			l->free_tls(l->tls[i]);
	eg_policy_free(&l->p);
	explicit_bzero(l, sizeof(*l));
	free(l);
}

void eg_holder_init(struct eg_holder *h, struct eg_live *first)
{
	pthread_mutex_init(&h->lock, NULL);
	h->cur = first;
	h->last_version = first ? (first->version = 1) : 0;
}

struct eg_live *eg_holder_get(struct eg_holder *h)
{
	struct eg_live *l;

	/* Under the lock: the holder's reference keeps cur alive until the
	 * new one is taken (a swap cannot drop it in between). */
	pthread_mutex_lock(&h->lock);
	l = h->cur;
	if (l)
		atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&h->lock);
	return l;
}

uint64_t eg_holder_swap(struct eg_holder *h, struct eg_live *l)
{
	struct eg_live *old;
	uint64_t v;

	pthread_mutex_lock(&h->lock);
	old = h->cur;
	v = l->version = ++h->last_version;
	h->cur = l; /* the mutex publishes l's contents to the next eg_holder_get */
	pthread_mutex_unlock(&h->lock);
	eg_live_put(old);
	return v;
}

void eg_holder_destroy(struct eg_holder *h)
{
	eg_live_put(h->cur);
	h->cur = NULL;
	pthread_mutex_destroy(&h->lock);
}

long eg_policy_show(const struct eg_policy *p, uint64_t version, char *out, size_t len)
{
	struct json_writer w;
	unsigned i, k;

	jw_init(&w, out, len);
	jw_obj(&w);
	jw_key(&w, "version");
	jw_int(&w, (int64_t)version);
	jw_key(&w, "ca");
	jw_str(&w, p->ca_shared ? "host" : "sandbox");
	jw_key(&w, "limits");
	jw_obj(&w);
	if (p->limits.rate) {
		jw_key(&w, "requests_per_second");
		jw_int(&w, p->limits.rate);
		jw_key(&w, "burst");
		jw_int(&w, p->limits.burst ? p->limits.burst : p->limits.rate);
	}
	jw_key(&w, "max_connections");
	jw_int(&w, p->limits.max_conns);
	jw_obj_end(&w);
	jw_key(&w, "allow");
	jw_arr(&w);
	for (i = 0; i < p->nr_rules; i++) {
		const struct eg_rule *r = &p->rules[i];

		jw_obj(&w);
		jw_key(&w, "host");
		jw_str(&w, r->host);
		jw_key(&w, "port");
		jw_int(&w, r->port);
		if (r->path_prefix[0]) {
			jw_key(&w, "path_prefix");
			jw_str(&w, r->path_prefix);
		}
		if (r->nr_methods) {
			jw_key(&w, "methods");
			jw_arr(&w);
			for (k = 0; k < r->nr_methods; k++)
				jw_str(&w, r->methods[k]);
			jw_arr_end(&w);
		}
		jw_key(&w, "tunnel");
		jw_bool(&w, r->tunnel);
		jw_key(&w, "intercept");
		jw_bool(&w, r->intercept);
		jw_key(&w, "require_sni");
		jw_bool(&w, r->require_sni);
		if (r->header[0]) {
			jw_key(&w, "inject");
			jw_obj(&w);
			jw_key(&w, "header");
			jw_str(&w, r->header);
			/* The value is never shown: not its bytes, not its length. */
			jw_key(&w, "value");
			jw_str(&w, "(redacted)");
			jw_obj_end(&w);
		}
		if (r->connect[0]) {
			jw_key(&w, "connect");
			jw_str(&w, r->connect);
		}
		if (r->ca_file[0]) {
			jw_key(&w, "ca_file");
			jw_str(&w, r->ca_file);
		}
		jw_key(&w, "timeout_ms");
		jw_int(&w, r->timeout_ms);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);
	return jw_done(&w) ? (long)w.len : -E2BIG;
}
