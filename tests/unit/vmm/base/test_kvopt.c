/* The key=value option tokenizer (vmm/base/kvopt.h) every device option and
 * --disk/--net/--fs/--vsock/--entropy/--balloon go through: the syntax
 * the parsers accepted before it (commas split, empty items skipped, the
 * first '=' cuts, no quoting or escapes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "vmm/base/kvopt.h"

/* The list as "key=value|key|..." (a key without '=' alone), for one
 * comparison per case. */
static const char *walk(const char *list, char *out, size_t len)
{
	char copy[256], *cur = copy, *key, *val;
	size_t n = 0;

	snprintf(copy, sizeof(copy), "%s", list);
	out[0] = '\0';
	while ((key = kvopt_next(&cur, &val)))
		n += (size_t)snprintf(out + n, len - n, "%s%s%s%s", n ? "|" : "", key, val ? "=" : "",
				      val ? val : "");
	/* At the end it stays at the end. */
	assert_null(kvopt_next(&cur, &val));
	assert_null(val);
	return out;
}

static void items_and_flags(void **state)
{
	char b[256];

	(void)state;
	assert_string_equal(walk("path=/a/b,ro,id=x1", b, sizeof(b)), "path=/a/b|ro|id=x1");
	assert_string_equal(walk("ro", b, sizeof(b)), "ro");
	assert_string_equal(walk("cid=3", b, sizeof(b)), "cid=3");
}

static void empty_items_are_skipped(void **state)
{
	char b[256];

	(void)state;
	assert_string_equal(walk("", b, sizeof(b)), "");
	assert_string_equal(walk(",,,", b, sizeof(b)), "");
	assert_string_equal(walk(",a=1,,b,", b, sizeof(b)), "a=1|b");
}

static void empty_values_and_keys(void **state)
{
	char b[256];
	char copy[] = "path=,=x,ro=";
	char *cur = copy, *key, *val;

	(void)state;
	assert_string_equal(walk("path=", b, sizeof(b)), "path=");
	/* "key=" is an empty value, not a flag: the parsers tell them apart */
	key = kvopt_next(&cur, &val);
	assert_string_equal(key, "path");
	assert_non_null(val);
	assert_string_equal(val, "");
	key = kvopt_next(&cur, &val);
	assert_string_equal(key, "");
	assert_string_equal(val, "x");
	key = kvopt_next(&cur, &val);
	assert_string_equal(key, "ro");
	assert_string_equal(val, "");
	assert_null(kvopt_next(&cur, &val));
}

static void first_equals_cuts_no_escapes(void **state)
{
	char b[256];

	(void)state;
	/* a value keeps later '=' and any quote or backslash as written */
	assert_string_equal(walk("path=/x=y=z,tag=\"a\"", b, sizeof(b)), "path=/x=y=z|tag=\"a\"");
	assert_string_equal(walk("uds=a\\,b", b, sizeof(b)), "uds=a\\|b");
}

static void duplicates_come_in_order(void **state)
{
	char b[256];

	(void)state;
	/* the parsers decide (the last path= wins in blk and fs) */
	assert_string_equal(walk("path=a,path=b,ro,ro", b, sizeof(b)), "path=a|path=b|ro|ro");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(items_and_flags),
		cmocka_unit_test(empty_items_are_skipped),
		cmocka_unit_test(empty_values_and_keys),
		cmocka_unit_test(first_equals_cuts_no_escapes),
		cmocka_unit_test(duplicates_come_in_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
