/* The egress proxy's live policy (cli/egress/egress_pol.c): readers that take
 * and drop the policy in force while another thread swaps it see whole,
 * unchanging snapshots; every snapshot is freed exactly once, by its last
 * user; `vmm egress show` never prints a credential. Run under ASan (a
 * use after free) and TSan (a data race) too: see tests/README. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/egress/egress_pol.h"

#define READERS 3
#define SWAPS 20000

static _Atomic unsigned freed;

/* A snapshot's TLS slot holds a marker here: freed once, with it. */
static void count_free(void *p)
{
	atomic_fetch_add(&freed, 1);
	free(p);
}

/* Snapshot n: n % 7 + 1 rules, each with port n % 60000 + 1 and a
 * credential naming n; readers check it is all one n. */
static struct eg_live *make(unsigned n)
{
	struct eg_live *l = eg_live_new();
	unsigned i;

	assert_non_null(l);
	l->p.nr_rules = n % 7 + 1;
	for (i = 0; i < l->p.nr_rules; i++) {
		l->p.rules[i].port = n % 60000 + 1;
		snprintf(l->p.rules[i].host, sizeof(l->p.rules[i].host), "h%u.example.com", n);
		assert_int_not_equal(asprintf(&l->p.rules[i].cred, "cred-%u", n), -1);
	}
	l->tls[0] = malloc(1);
	l->free_tls = count_free;
	return l;
}

struct shared {
	struct eg_holder *h;
	_Atomic int stop;
	_Atomic unsigned long reads, bad;
};

static void *reader(void *arg)
{
	struct shared *s = arg;
	uint64_t last = 0;

	while (!atomic_load(&s->stop)) {
		struct eg_live *l = eg_holder_get(s->h);
		unsigned i, port = l->p.rules[0].port;
		char want[32];

		snprintf(want, sizeof(want), "cred-%s", l->p.rules[0].host + 1);
		*strchr(want, '.') = '\0';
		for (i = 0; i < l->p.nr_rules; i++)
			if (l->p.rules[i].port != port || strcmp(l->p.rules[i].cred, want))
				atomic_fetch_add(&s->bad, 1);
		if (l->version < last) /* versions only go up */
			atomic_fetch_add(&s->bad, 1);
		last = l->version;
		eg_live_put(l);
		atomic_fetch_add(&s->reads, 1);
	}
	return NULL;
}

static void swap_under_readers(void **state)
{
	struct eg_holder h;
	struct shared s = { .h = &h };
	pthread_t t[READERS];
	unsigned i;

	(void)state;
	atomic_store(&freed, 0);
	eg_holder_init(&h, make(0));
	assert_int_equal(h.cur->version, 1);
	for (i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, reader, &s), 0);
	for (i = 1; i <= SWAPS; i++)
		assert_int_equal(eg_holder_swap(&h, make(i)), i + 1);
	atomic_store(&s.stop, 1);
	for (i = 0; i < READERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&s.bad), 0);
	assert_true(atomic_load(&s.reads) > 0);
	/* every old snapshot is gone, the current one with the holder */
	assert_int_equal(atomic_load(&freed), SWAPS);
	eg_holder_destroy(&h);
	assert_int_equal(atomic_load(&freed), SWAPS + 1);
}

/* A user's reference outlives the swap: the old policy stays whole until
 * it is dropped. */
static void old_policy_kept_by_its_user(void **state)
{
	struct eg_holder h;
	struct eg_live *mine;

	(void)state;
	atomic_store(&freed, 0);
	eg_holder_init(&h, make(1));
	mine = eg_holder_get(&h);
	eg_holder_swap(&h, make(2));
	assert_int_equal(atomic_load(&freed), 0);
	assert_string_equal(mine->p.rules[0].cred, "cred-1");
	assert_int_equal(mine->version, 1);
	assert_int_equal(h.cur->version, 2);
	eg_live_put(mine);
	assert_int_equal(atomic_load(&freed), 1);
	eg_holder_destroy(&h);
	assert_int_equal(atomic_load(&freed), 2);
}

static char *env(const char *name, void *ctx)
{
	(void)ctx;
	return !strcmp(name, "K") ? strdup("sk-live-123") : NULL;
}

static char *nofile(const char *path, void *ctx)
{
	(void)path;
	(void)ctx;
	return NULL;
}

static void show_redacts(void **state)
{
	static const char text[] =
		"{\"limits\": {\"requests_per_second\": 5},"
		" \"allow\": [{\"host\": \"api.test\", \"path_prefix\": \"/v1\", \"methods\": [\"GET\"],"
		"  \"inject\": {\"header\": \"Authorization\", \"value_env\": \"K\", \"prefix\": \"Bearer \"}},"
		"  {\"host\": \"pipe.test\", \"tunnel\": true, \"connect\": \"127.0.0.1:9\"}]}";
	const struct eg_cred_source src = { .env = env, .file = nofile };
	struct eg_policy p;
	char why[256], out[4096], small[64];

	(void)state;
	assert_int_equal(eg_policy_parse(text, strlen(text), &src, &p, why, sizeof(why)), 0);
	assert_true(eg_policy_show(&p, 7, out, sizeof(out)) > 0);
	assert_null(strstr(out, "sk-live"));
	assert_null(strstr(out, "Bearer"));
	assert_non_null(strstr(out, "\"version\":7"));
	assert_non_null(strstr(out, "\"inject\":{\"header\":\"Authorization\",\"value\":\"(redacted)\"}"));
	assert_non_null(strstr(out, "\"path_prefix\":\"/v1\""));
	assert_non_null(strstr(out, "\"methods\":[\"GET\"]"));
	assert_non_null(strstr(out, "\"requests_per_second\":5,\"burst\":5"));
	assert_non_null(strstr(out, "\"connect\":\"127.0.0.1:9\""));
	assert_int_equal(eg_policy_show(&p, 7, small, sizeof(small)), -E2BIG);
	eg_policy_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(swap_under_readers),
		cmocka_unit_test(old_policy_kept_by_its_user),
		cmocka_unit_test(show_redacts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
