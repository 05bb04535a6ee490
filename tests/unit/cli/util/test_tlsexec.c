/* Which command lines the lean vmm hands to vmm-tls (cli/util/tlsexec.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cli/util/util.h"

#define NEEDS(...) ({ char *v[] = { "vmm", __VA_ARGS__, NULL }; \
		      cli_needs_tls((int)(sizeof(v) / sizeof(v[0])) - 1, v); })

static void verbs_and_options(void **state)
{
	char *bare[] = { "vmm", NULL };

	(void)state;
	assert_int_equal(cli_needs_tls(1, bare), 0);
	assert_int_equal(NEEDS("run", "--kernel", "k", "--", "true"), 0);
	assert_int_equal(NEEDS("restore", "-d", "snap"), 0);
	assert_int_equal(NEEDS("exec", "sb", "--", "ls"), 0);
	assert_int_equal(NEEDS("ls"), 0);
	assert_int_equal(NEEDS("image", "ls"), 1);
	assert_int_equal(NEEDS("mcp", "sb"), 1);
	assert_int_equal(NEEDS("token", "ls", "sb"), 1);
	assert_int_equal(NEEDS("egress", "show", "sb"), 1);
	assert_int_equal(NEEDS("run", "--egress-policy", "p.json"), 1);
	assert_int_equal(NEEDS("run", "--egress-policy=p.json", "-d"), 1);
	/* an image's sandbox resolves it locally: the lean VMM runs it */
	assert_int_equal(NEEDS("create", "--image", "alpine"), 0);
	assert_int_equal(NEEDS("run", "--image=alpine", "--", "sh"), 0);
	assert_int_equal(NEEDS("run", "--image", "base", "--egress-policy", "p.json"), 1);
}

static void guest_command_is_not_looked_at(void **state)
{
	(void)state;
	assert_int_equal(NEEDS("run", "--", "prog", "--egress-policy", "x"), 0);
	assert_int_equal(NEEDS("run", "-d", "--", "--egress-policy"), 0);
	/* a verb word later on is an argument, not the verb */
	assert_int_equal(NEEDS("run", "image"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(verbs_and_options),
		cmocka_unit_test(guest_command_is_not_looked_at),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
