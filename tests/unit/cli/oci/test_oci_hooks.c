/* vmm oci hooks: each hook gets the state JSON on stdin, exactly its
 * args and env, and a timeout; hooks run in order and the first failure
 * stops them. Real /bin/sh scripts in a temporary folder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/oci/oci_hooks.h"
#include "cli/oci/oci_spec.h"

static char dir[64];

static void script(const char *name, const char *body)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
}

static char *slurp(const char *name)
{
	static char buf[4096];
	char path[128];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/oci-hooks.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

#define STATE "{\"ociVersion\":\"1.0.2\",\"id\":\"c1\",\"status\":\"creating\",\"pid\":42,\"bundle\":\"/b\"}"

static void stdin_args_env(void **state)
{
	char path[128], out[128], why[256] = "";
	struct oci_hook h = { .path = path };
	char *got;

	(void)state;
	snprintf(out, sizeof(out), "%s/out", dir);
	script("h1", "cat > \"$OUT\"; echo \"argv0=$0 args=$*\" >> \"$OUT\"; echo \"env=$(env | grep -c .)\" >> \"$OUT\"");
	snprintf(path, sizeof(path), "%s/h1", dir);
	h.args[0] = "hook-name";
	h.args[1] = "one";
	h.args[2] = "two";
	h.argc = 3;
	{
		static char env_out[160];

		snprintf(env_out, sizeof(env_out), "OUT=%s", out);
		h.env[0] = env_out;
		h.env[1] = "X=y";
		h.envc = 2;
	}
	assert_int_equal(oci_hook_run(&h, STATE, why, sizeof(why)), 0);
	got = slurp("out");
	assert_non_null(got);
	/* the state, as sent, on stdin */
	assert_memory_equal(got, STATE, strlen(STATE));
	assert_non_null(strstr(got, "args=one two"));
	/* exactly the hook's env (and what sh adds: PWD, SHLVL, _) */
	{
		const char *e = strstr(got, "env=");

		assert_non_null(e);
		assert_true(atoi(e + 4) <= 5);
	}
}

static void failure_and_output(void **state)
{
	char path[128], why[256] = "";
	struct oci_hook h = { .path = path };

	(void)state;
	script("bad", "echo 'no network for you' >&2; exit 3");
	snprintf(path, sizeof(path), "%s/bad", dir);
	assert_int_equal(oci_hook_run(&h, STATE, why, sizeof(why)), -ECHILD);
	assert_non_null(strstr(why, "exit status 3"));
	assert_non_null(strstr(why, "no network for you"));
	/* one that does not read its stdin is fine */
	script("noread", "exit 0");
	snprintf(path, sizeof(path), "%s/noread", dir);
	assert_int_equal(oci_hook_run(&h, STATE, why, sizeof(why)), 0);
	/* one that is not there */
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(oci_hook_run(&h, STATE, why, sizeof(why)), -ECHILD);
	assert_non_null(strstr(why, "exit status 127"));
}

static void timeout_kills(void **state)
{
	char path[128], why[256] = "";
	struct oci_hook h = { .path = path, .timeout_s = 1 };

	(void)state;
	/* also a child holding its output: the timeout still ends it */
	script("slow", "sleep 60 & sleep 60");
	snprintf(path, sizeof(path), "%s/slow", dir);
	assert_int_equal(oci_hook_run(&h, STATE, why, sizeof(why)), -ETIMEDOUT);
	assert_non_null(strstr(why, "timed out"));
}

static void detached_child_does_not_hold_us(void **state)
{
	char path[128], why[256] = "";
	struct oci_hook h = { .path = path };

	(void)state;
	/* exits at once, leaving a child with its stdout: no timeout, and
	 * the run still ends (the hook has exited) */
	script("bg", "sleep 30 & exit 0");
	snprintf(path, sizeof(path), "%s/bg", dir);
	assert_int_equal(oci_hook_run(&h, STATE, why, sizeof(why)), 0);
}

static void order_and_first_failure(void **state)
{
	static char json[1024];
	struct oci_spec s;
	char why[512] = "";
	int n;

	(void)state;
	script("a", "echo a >> \"$0.log\"");
	script("b", "exit 1");
	script("c", "echo c >> \"$0.log\"");
	n = snprintf(json, sizeof(json),
		     "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"/\"},\"hooks\":{"
		     "\"createRuntime\":[{\"path\":\"%s/a\"},{\"path\":\"%s/a\"}],"
		     "\"startContainer\":[{\"path\":\"%s/b\"},{\"path\":\"%s/c\"}]}}",
		     dir, dir, dir, dir);
	assert_true(n > 0 && n < (int)sizeof(json));
	assert_int_equal(oci_spec_parse(&s, json, (size_t)n, "/", why, sizeof(why)), 0);
	assert_int_equal(s.nhooks[OCI_HOOK_CREATE_RUNTIME], 2);
	assert_int_equal(s.nhooks[OCI_HOOK_START_CONTAINER], 2);
	assert_int_equal(oci_hooks_run(&s, OCI_HOOK_CREATE_RUNTIME, STATE, why, sizeof(why)), 0);
	assert_string_equal(slurp("a.log"), "a\na\n");
	assert_int_equal(oci_hooks_run(&s, OCI_HOOK_START_CONTAINER, STATE, why, sizeof(why)), -ECHILD);
	assert_non_null(strstr(why, "startContainer"));
	assert_null(slurp("c.log")); /* never ran */
	assert_int_equal(oci_hooks_run(&s, OCI_HOOK_POSTSTOP, STATE, why, sizeof(why)), 0); /* none */
	assert_string_equal(oci_hook_name(OCI_HOOK_CREATE_CONTAINER), "createContainer");
	oci_spec_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stdin_args_env),
		cmocka_unit_test(failure_and_output),
		cmocka_unit_test(timeout_kills),
		cmocka_unit_test(detached_child_does_not_hold_us),
		cmocka_unit_test(order_and_first_failure),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
