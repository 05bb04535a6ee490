/* oci_events: the TaskOOM event as `containerd publish` reads it (a
 * google.protobuf.Any in Protocol Buffers' encoding, byte for byte), its
 * bounds, and no publishing outside a shim's environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/oci/oci_events.h"

static void oom_any(void **state)
{
	static const unsigned char want[] = {
		0x0a, 25, 'c', 'o', 'n', 't', 'a', 'i', 'n', 'e', 'r', 'd', '.', 'e', 'v', 'e', 'n', 't', 's', '.',
		'T', 'a', 's', 'k', 'O', 'O', 'M', /* type_url = 1 */
		0x12, 5, 0x0a, 3, 'a', 'b', 'c', /* value = 2: TaskOOM{container_id = 1} */
	};
	unsigned char buf[256];
	char id[129];
	int n;

	(void)state;
	n = oci_event_oom_any("abc", buf, sizeof(buf));
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	/* Kubernetes' 64 hex digits: still one-byte lengths (66 + 2 < 128) */
	memset(id, 'f', 64);
	id[64] = '\0';
	n = oci_event_oom_any(id, buf, sizeof(buf));
	assert_int_equal(n, 2 + 25 + 2 + 2 + 64);
	assert_int_equal(buf[28], 66);
	assert_int_equal(buf[30], 64);
	assert_int_equal(oci_event_oom_any("", buf, sizeof(buf)), -EINVAL);
	memset(id, 'a', 128);
	id[128] = '\0';
	assert_int_equal(oci_event_oom_any(id, buf, sizeof(buf)), -EINVAL);
	/* an id whose TaskOOM passes 127 bytes: the Any's value length
	 * takes two bytes (128 = 0x80 0x01) */
	id[126] = '\0';
	n = oci_event_oom_any(id, buf, sizeof(buf));
	assert_int_equal(n, 2 + 25 + 1 + 2 + 2 + 126);
	assert_int_equal(buf[28], 0x80);
	assert_int_equal(buf[29], 0x01);
	assert_int_equal(buf[31], 126);
	assert_int_equal(oci_event_oom_any("abc", buf, 20), -E2BIG);
}

static void not_under_a_shim(void **state)
{
	char why[256];

	(void)state;
	unsetenv("GRPC_ADDRESS");
	setenv("NAMESPACE", "k8s.io", 1);
	assert_int_equal(oci_event_oom_publish("abc", why, sizeof(why)), -ENOENT);
	setenv("GRPC_ADDRESS", "/nonexistent/containerd.sock", 1);
	unsetenv("NAMESPACE");
	assert_int_equal(oci_event_oom_publish("abc", why, sizeof(why)), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(oom_any),
		cmocka_unit_test(not_under_a_shim),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
