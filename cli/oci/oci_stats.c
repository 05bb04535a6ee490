/* A pod container's figures from its cgroup in the guest: see
 * oci_stats.h. */
#include "cli/oci/oci_stats.h"
#include "vmm/wire/pb.h"
#include "cli/oci/oci_pod.h"
#include "cli/oci/oci_state.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { S_PIDS, S_CPU, S_MEM, S_EVENTS };

/* memory.stat's keys, in metrics.proto's MemoryStat order (field 1..31):
 * the proto's names are the kernel's keys. */
static const char *const mem_keys[] = {
	"anon", "file", "kernel_stack", "slab", "sock", "shmem", "file_mapped", "file_dirty",
	"file_writeback", "anon_thp", "inactive_anon", "active_anon", "inactive_file", "active_file",
	"unevictable", "slab_reclaimable", "slab_unreclaimable", "pgfault", "pgmajfault",
	"workingset_refault", "workingset_activate", "workingset_nodereclaim", "pgrefill", "pgscan",
	"pgsteal", "pgactivate", "pgdeactivate", "pglazyfree", "pglazyfreed", "thp_fault_alloc",
	"thp_collapse_alloc",
};
static const char *const cpu_keys[] = { "usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled",
					"throttled_usec" };
static const char *const event_keys[] = { "low", "high", "max", "oom", "oom_kill" };

/* The files of one value each, and where it goes. */
static const struct {
	const char *file;
	int msg;
	unsigned field;
} single[] = {
	{ "memory.current", S_MEM, 32 }, { "memory.max", S_MEM, 33 },  { "memory.swap.current", S_MEM, 34 },
	{ "memory.swap.max", S_MEM, 35 }, { "pids.current", S_PIDS, 1 }, { "pids.max", S_PIDS, 2 },
};

/* The files of "KEY VALUE" lines, their keys in field order from 1. */
static const struct {
	const char *file;
	int msg;
	const char *const *keys;
	unsigned nr;
} keyed[] = {
	{ "cpu.stat", S_CPU, cpu_keys, sizeof(cpu_keys) / sizeof(cpu_keys[0]) },
	{ "memory.stat", S_MEM, mem_keys, sizeof(mem_keys) / sizeof(mem_keys[0]) },
	{ "memory.events", S_EVENTS, event_keys, sizeof(event_keys) / sizeof(event_keys[0]) },
};

static uint64_t *slot(struct oci_stats *st, int msg, unsigned field)
{
	switch (msg) {
	case S_PIDS: return field < 3 ? &st->pids[field] : NULL;
	case S_CPU: return field < 7 ? &st->cpu[field] : NULL;
	case S_MEM: return field < 36 ? &st->mem[field] : NULL;
	default: return field < 6 ? &st->events[field] : NULL;
	}
}

/* A cgroup file's number: decimal, or "max" (no limit). */
static int value(const char *s, size_t n, uint64_t *v)
{
	char t[24], *end;

	if (n == 3 && !memcmp(s, "max", 3)) {
		*v = UINT64_MAX;
		return 0;
	}
	if (!n || n >= sizeof(t) || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	memcpy(t, s, n);
	t[n] = '\0';
	errno = 0;
	*v = strtoull(t, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

/* One "FILE:VALUE" or "FILE:KEY VALUE" line: 1 when it set a figure. */
static int parse_line(const char *l, size_t n, struct oci_stats *st)
{
	const char *colon = memchr(l, ':', n), *v, *sp;
	size_t flen, i, k;
	uint64_t x, *p;

	if (!colon)
		return 0;
	flen = (size_t)(colon - l);
	v = colon + 1;
	n -= flen + 1;
	for (i = 0; i < sizeof(single) / sizeof(single[0]); i++)
		if (strlen(single[i].file) == flen && !memcmp(l, single[i].file, flen))
			return !value(v, n, &x) && (p = slot(st, single[i].msg, single[i].field)) ? (*p = x, 1) : 0;
	if (!(sp = memchr(v, ' ', n)))
		return 0;
	for (i = 0; i < sizeof(keyed) / sizeof(keyed[0]); i++) {
		if (strlen(keyed[i].file) != flen || memcmp(l, keyed[i].file, flen))
			continue;
		for (k = 0; k < keyed[i].nr; k++)
			if (strlen(keyed[i].keys[k]) == (size_t)(sp - v) && !memcmp(v, keyed[i].keys[k], (size_t)(sp - v)))
				break;
		if (k == keyed[i].nr || value(sp + 1, n - (size_t)(sp + 1 - v), &x))
			return 0;
		*slot(st, keyed[i].msg, (unsigned)k + 1) = x;
		return 1;
	}
	return 0;
}

int oci_stats_parse(const char *text, size_t n, struct oci_stats *st)
{
	size_t at = 0, len;
	unsigned set = 0;
	const char *nl;

	memset(st, 0, sizeof(*st));
	while (at < n) {
		nl = memchr(text + at, '\n', n - at);
		len = nl ? (size_t)(nl - (text + at)) : n - at;
		set += (unsigned)parse_line(text + at, len, st);
		at += len + 1;
	}
	return set ? 0 : -EINVAL;
}

/* One of Metrics' messages (its fields 1..nr-1 of v) as field num. */
static void message(struct pb_writer *w, unsigned num, const uint64_t *v, unsigned nr)
{
	uint8_t buf[36 * 12]; /* each field: a tag of up to 2 bytes, a varint of up to 10 */
	struct pb_writer m;

	pb_init(&m, buf, sizeof(buf));
	for (unsigned i = 1; i < nr; i++)
		pb_uint(&m, i, v[i]);
	if (pb_done(&m) < 0)
		w->err = pb_done(&m);
	else
		pb_bytes(w, num, buf, m.len);
}

int oci_stats_metrics(const struct oci_stats *st, uint8_t *buf, size_t len)
{
	struct pb_writer w;

	/* Metrics { PidsStat pids = 1; CPUStat cpu = 2; MemoryStat memory = 4;
	 * ...; MemoryEvents memory_events = 8; } */
	pb_init(&w, buf, len);
	message(&w, 1, st->pids, 3);
	message(&w, 2, st->cpu, 7);
	message(&w, 4, st->mem, 36);
	message(&w, 8, st->events, 6);
	return pb_done(&w);
}

/* In the child: id's figures from the guest, into st. */
static int read_guest(const struct oci_ctx *c, const char *id, struct oci_stats *st, char *why, size_t whylen)
{
	/* the files of the container's cgroup; grep -H names each line's
	 * file, and the container's ID comes in as $1, never in the script */
	static const char script[] = "cd \"" OCI_POD_CGROUP "/$1\" || exit 1\n"
				     "grep -H '' cpu.stat memory.current memory.max memory.stat memory.events "
				     "memory.swap.current memory.swap.max pids.current pids.max 2>/dev/null\n"
				     "exit 0\n";
	const char *argv[] = { "sh", "-c", script, "sh", id, NULL };
	char err[256], *out;
	struct sandbox_addr a;
	struct sandbox sb;
	size_t n = 0, cap = 16384;
	int r;

	if (oci_vm_addr(c, id, &sb, &a))
		return cli_seterr(why, whylen, -ESRCH, "%s: its pod's VM is gone", id);
	if (!(out = malloc(cap)))
		return cli_seterr(why, whylen, -ENOMEM, "out of memory");
	r = oci_guest_output(&a, argv, out, cap, &n, err, sizeof(err));
	if (r > 0)
		r = cli_seterr(why, whylen, -ESRCH, "%s: no cgroup in the guest: %s", id, err);
	else if (r < 0)
		cli_seterr(why, whylen, r, "%s: reading its cgroup in the guest: %s", id, err[0] ? err : strerror(-r));
	else if (oci_stats_parse(out, n, st))
		r = cli_seterr(why, whylen, -EPROTO, "%s: its cgroup in the guest gave no figures", id);
	free(out);
	return r;
}

/* What the child hands back through its pipe. */
struct stats_reply {
	int r;
	struct oci_stats st;
	char why[256];
};

/* Reads the child's reply from fd by the deadline: 0 or -ETIMEDOUT. */
static int reply_by(int fd, struct stats_reply *rep, unsigned timeout_ms)
{
	struct timespec t0, now;
	size_t got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < sizeof(*rep)) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long long spent;
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &now);
		spent = (now.tv_sec - t0.tv_sec) * 1000LL + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (spent >= timeout_ms || poll(&pf, 1, (int)(timeout_ms - spent)) == 0)
			return -ETIMEDOUT;
		n = read(fd, (char *)rep + got, sizeof(*rep) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EPIPE;
		got += (size_t)n;
	}
	return 0;
}

int oci_stats_of(const struct oci_ctx *c, const char *id, struct oci_stats *st, unsigned timeout_ms, char *why,
		 size_t whylen)
{
	char sbid[OCI_ID_MAX + 2];
	struct stats_reply rep;
	int p[2], r, status;
	pid_t pid;

	if (!oci_id_ok(id) || oci_pod_of(c, id, sbid, sizeof(sbid)))
		return -ENOENT;
	/* The guest is asked from a child, killed at the deadline: nothing
	 * the guest does (never accepting the connection, an answer a byte
	 * at a time) holds the caller longer, and the child's environment
	 * (oci_vm_addr sets VMM_STATE_DIR) is its own. */
	if (pipe2(p, O_CLOEXEC))
		return cli_seterr(why, whylen, -errno, "pipe: %s", strerror(errno));
	if ((pid = fork()) < 0) {
		r = -errno;
		close(p[0]);
		close(p[1]);
		return cli_seterr(why, whylen, r, "fork: %s", strerror(-r));
	}
	if (pid == 0) {
		close(p[0]);
		memset(&rep, 0, sizeof(rep));
		rep.r = read_guest(c, id, &rep.st, rep.why, sizeof(rep.why));
		_exit(write_full(p[1], &rep, sizeof(rep)) ? 1 : 0);
	}
	close(p[1]);
	r = reply_by(p[0], &rep, timeout_ms);
	close(p[0]);
	if (r)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r)
		return cli_seterr(why, whylen, r, "%s: the guest gave no figures in %u ms", id, timeout_ms);
	if (rep.r) {
		rep.why[sizeof(rep.why) - 1] = '\0';
		return cli_seterr(why, whylen, rep.r, "%s", rep.why);
	}
	*st = rep.st;
	return 0;
}
