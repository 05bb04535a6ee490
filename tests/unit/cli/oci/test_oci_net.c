/* vmm oci networking: the parsers behind joining a CNI network
 * namespace (the default route, the nameserver, the VMM's --net), and the
 * probe of a namespace when one can be made here (root only). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/oci/oci_net.h"

/* /proc/net/route as a CNI bridge network's namespace shows it (eth0 on
 * 10.88.0.5/16 via 10.88.0.1), with a second interface's default route
 * first, which is not eth0's. */
static const char route_text[] =
	"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	"eth1\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	"eth0\t00000000\t0100580A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	"eth0\t0000580A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";

static void default_route(void **state)
{
	char gw[16];

	(void)state;
	assert_int_equal(oci_net_route_gw(route_text, "eth0", gw, sizeof(gw)), 0);
	assert_string_equal(gw, "10.88.0.1");
	assert_int_equal(oci_net_route_gw(route_text, "eth1", gw, sizeof(gw)), 0);
	assert_string_equal(gw, "192.168.1.1");
	/* only the on-link route: no gateway */
	assert_int_equal(oci_net_route_gw(route_text + 0, "lo", gw, sizeof(gw)), -ENOENT);
	assert_int_equal(oci_net_route_gw("Iface\tDestination\n"
					  "eth0\t0000580A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n",
					  "eth0", gw, sizeof(gw)),
			 -ENOENT);
	/* a default route without the gateway flag is not one via a router */
	assert_int_equal(oci_net_route_gw("eth0\t00000000\t0100580A\t0001\t0\t0\t0\t00000000\t0\t0\t0\n", "eth0", gw,
					  sizeof(gw)),
			 -ENOENT);
	assert_int_equal(oci_net_route_gw("", "eth0", gw, sizeof(gw)), -ENOENT);
	assert_int_equal(oci_net_route_gw("garbage\n\n\t\n", "eth0", gw, sizeof(gw)), -ENOENT);
}

static void nameserver(void **state)
{
	char ns[16];

	(void)state;
	assert_int_equal(oci_net_nameserver("# podman\nsearch dns.podman\nnameserver fe80::1\n"
					    "nameserver 10.88.0.1\nnameserver 1.1.1.1\n",
					    ns, sizeof(ns)),
			 0);
	assert_string_equal(ns, "10.88.0.1");
	assert_int_equal(oci_net_nameserver("  nameserver 8.8.8.8", ns, sizeof(ns)), 0);
	assert_string_equal(ns, "8.8.8.8");
	assert_int_equal(oci_net_nameserver("nameserver\nnameserver not-an-ip\n", ns, sizeof(ns)), -ENOENT);
	assert_int_equal(oci_net_nameserver("", ns, sizeof(ns)), -ENOENT);
	assert_int_equal(oci_net_nameserver("nameserver 8.8.8.8\n", ns, 4), -ENOSPC);
}

static void net_option(void **state)
{
	struct oci_net n = { .mac = { 0x2a, 0x5b, 0x00, 0x01, 0xfe, 0x10 }, .ip = "10.88.0.5", .prefix = 16,
			     .gw = "10.88.0.1", .dns = "10.88.0.1" };
	char buf[256];

	(void)state;
	assert_int_equal(oci_net_option(&n, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "tap=vmmtap0,mac=2a:5b:00:01:fe:10,ip=10.88.0.5/16,gw=10.88.0.1,dns=10.88.0.1");
	n.gw[0] = n.dns[0] = '\0';
	assert_int_equal(oci_net_option(&n, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "tap=vmmtap0,mac=2a:5b:00:01:fe:10,ip=10.88.0.5/16");
	assert_int_equal(oci_net_option(&n, buf, 10), -ENOSPC);
}

static void probe_missing_namespace(void **state)
{
	struct oci_net n;
	char why[256] = "";

	(void)state;
	assert_int_equal(oci_net_probe("/nonexistent/netns", &n, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "/nonexistent/netns"));
}

/* A namespace with a TAP (a dummy is not everywhere) on 10.77.0.2/24, default route via
 * 10.77.0.1, MTU 1400: what the probe reads back, and that it returns to
 * our namespace. Needs root (and `ip`); skipped otherwise. */
static void probe_real_namespace(void **state)
{
	char path[64], ours[64], after[64], why[256] = "";
	struct oci_net n;
	pid_t pid;
	int p[2], st;
	ssize_t k;

	(void)state;
	if (geteuid() != 0 || system("command -v ip > /dev/null 2>&1") != 0)
		skip();
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;

		close(p[0]);
		if (unshare(CLONE_NEWNET) < 0 ||
		    system("ip link set lo up && ip tuntap add d0 mode tap && ip link set d0 mtu 1400 && "
			   "ip addr add 10.77.0.2/24 dev d0 && ip link set d0 up && "
			   "ip route add default via 10.77.0.1 && ip tuntap add vmmtap0 mode tap") != 0)
			_exit(1);
		if (write(p[1], "k", 1) != 1)
			_exit(1);
		close(p[1]);
		pause();
		(void)c;
		_exit(0);
	}
	close(p[1]);
	{
		char c;

		k = read(p[0], &c, 1);
	}
	close(p[0]);
	if (k != 1) {
		waitpid(pid, &st, 0);
		skip(); /* no netns or dummy here (a container) */
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	memset(ours, 0, sizeof(ours)); /* readlink does not end the text */
	assert_true(readlink("/proc/self/ns/net", ours, sizeof(ours) - 1) > 0);
	assert_int_equal(oci_net_probe(path, &n, why, sizeof(why)), 0);
	memset(after, 0, sizeof(after));
	assert_true(readlink("/proc/self/ns/net", after, sizeof(after) - 1) > 0);
	assert_string_equal(ours, after);
	assert_string_equal(n.ifname, "d0");
	assert_string_equal(n.ip, "10.77.0.2");
	assert_int_equal(n.prefix, 24);
	assert_string_equal(n.gw, "10.77.0.1");
	assert_int_equal(n.mtu, 1400);
	assert_int_equal(n.taken, 1); /* vmmtap0 is there: another VM's */
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(default_route),
		cmocka_unit_test(nameserver),
		cmocka_unit_test(net_option),
		cmocka_unit_test(probe_missing_namespace),
		cmocka_unit_test(probe_real_namespace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
