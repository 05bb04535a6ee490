/* libFuzzer target: what containerd-shim-vmm-v2 reads from others
 * (cli/oci/oci_shim.c, oci_stats.c, vmm/wire/pb.c). The first byte picks the
 * part, the rest is its input:
 *   0  a guest's cgroup files as `grep -H` prints them (the guest is root
 *      and prints what it likes): parsed, then encoded as Metrics, which
 *      must read back field for field;
 *   1  a ttrpc request body from containerd: a Create without runc's
 *      options is rewritten, and the result must be a message whose
 *      options are runc's, every other field kept; the Stats path runs
 *      too (no task's options.json: passed on);
 *   2  any message: walked two levels deep with pb_next.
 * The pod's VM is faked: no container here is a pod's. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/wire/pb.h"
#include "cli/oci/oci_pod.h"
#include "cli/oci/oci_shim.h"
#include "cli/oci/oci_stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int oci_pod_of(const struct oci_ctx *c, const char *id, char *sbid, size_t len)
{
	(void)c;
	(void)id;
	(void)sbid;
	(void)len;
	return -ENOENT;
}

int oci_vm_addr(const struct oci_ctx *c, const char *id, struct sandbox *sb, struct sandbox_addr *a)
{
	(void)c;
	(void)id;
	(void)sb;
	(void)a;
	return -ENOENT;
}

int oci_guest_output(const struct sandbox_addr *a, const char *const *argv, char *out, size_t outlen, size_t *outn,
		     char *err, size_t errlen)
{
	(void)a;
	(void)argv;
	(void)out;
	(void)outlen;
	(void)outn;
	(void)err;
	(void)errlen;
	return -EIO;
}

/* The varint field num of m (0 when absent). */
static uint64_t get_uint(const uint8_t *m, size_t n, unsigned num)
{
	struct pb_reader r;
	struct pb_entry f;
	uint64_t v = 0;

	pb_reader_init(&r, m, n);
	while (pb_next(&r, &f) > 0)
		if (f.num == num && f.wire == 0)
			v = f.v;
	return v;
}

static const uint8_t *get_msg(const uint8_t *data, size_t n, unsigned num, size_t *len)
{
	const uint8_t *m;

	return pb_get_bytes(data, n, num, &m, len) ? NULL : m;
}

static void stats(const uint8_t *data, size_t len)
{
	static uint8_t buf[4096];
	struct oci_stats st;
	const uint8_t *mem;
	size_t mlen = 0;
	int n;

	if (oci_stats_parse((const char *)data, len, &st))
		return;
	n = oci_stats_metrics(&st, buf, sizeof(buf));
	if (n < 0)
		abort(); /* any figures fit */
	mem = get_msg(buf, (size_t)n, 4, &mlen);
	for (unsigned i = 1; i < 36; i++)
		if ((mem ? get_uint(mem, mlen, i) : 0) != st.mem[i])
			abort();
}

static void request(const uint8_t *data, size_t len)
{
	static uint8_t out[1 << 17], resp[4096];
	const uint8_t *p, *o;
	size_t olen = 0, plen = 0, alen = 0, rlen = 0;
	char url[64];

	if (oci_shim_answer(data, len, "k8s.io", "/nonexistent", resp, sizeof(resp), &rlen))
		abort(); /* no task here has runc's options */
	if (oci_shim_create_options(data, len, "/x/vmm-oci", out, sizeof(out), &olen) != 1)
		return;
	if (!(p = get_msg(out, olen, 3, &plen)) || !(o = get_msg(p, plen, 10, &alen)) ||
	    pb_get_str(o, alen, 1, url, sizeof(url)) || strcmp(url, "containerd.runc.v1.Options"))
		abort();
	/* once rewritten, it is left alone */
	if (oci_shim_create_options(out, olen, "/x/vmm-oci", resp, sizeof(resp), &rlen) != 0)
		abort();
}

static void walk(const uint8_t *data, size_t len, int depth)
{
	struct pb_reader r;
	struct pb_entry f;
	char s[64];

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f) > 0) {
		if (f.wire == 2 && (f.data < data || f.data + f.len > data + len))
			abort();
		if (f.wire == 2 && depth < 2)
			walk(f.data, f.len, depth + 1);
	}
	(void)pb_get_str(data, len, 1, s, sizeof(s));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	if (len < 1)
		return 0;
	switch (data[0] % 3) {
	case 0: stats(data + 1, len - 1); break;
	case 1: request(data + 1, len - 1); break;
	default: walk(data + 1, len - 1, 0); break;
	}
	return 0;
}
