/* containerd-shim-vmm-v2, containerd's runc shim with in-guest stats in
 * front of it: see oci_shim.h. */
#include "cli/oci/oci_shim.h"
#include "vmm/wire/pb.h"
#include "cli/oci/oci_state.h"
#include "cli/oci/oci_stats.h"
#include "cli/util/util.h"
#include "vmm/base/log.h"
#include "vmm/base/unixsock.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define UPSTREAM "containerd-shim-runc-v2"
#define TTRPC_HEADER 10
#define TTRPC_MAX (4u << 20) /* ttrpc's messageLengthMax */
#define TTRPC_REQUEST 1
#define TTRPC_RESPONSE 2
#define TASK_SERVICE "containerd.task.v2.Task" /* runtime/v2/task/shim.proto */
#define TASK_SERVICE_V3 "containerd.task.v3.Task" /* containerd 2.x: api/runtime/task/v3 */
#define RUNC_ROOT "/run/containerd/runc"       /* the runc shim's root when its options give none */
#define RUNC_OPTIONS "containerd.runc.v1.Options"  /* runtime/v2/runc/options/oci.proto */
#define OCI_ROOT "/run/containerd/vmm-oci"         /* vmm-oci's root when containerd names none */
#define SOCK_MAX 108                           /* sun_path (unix(7)) */
#define IDLE_CHECK_MS 10000
/* How long a pod's guest gets to answer a Stats: the call's connection
 * waits on it (containerd's other calls on it wait too). */
#define STATS_TIMEOUT_MS 5000

int oci_shim_args(int argc, char **argv, struct oci_shim_args *a)
{
	static const char *const valued[] = { "namespace", "address", "publish-binary", "id", "bundle", "socket" };
	int i;

	memset(a, 0, sizeof(*a));
	for (i = 1; i < argc; i++) {
		const char *f = argv[i], *eq;
		size_t n, k;

		if (f[0] != '-') {
			if (!a->action)
				a->action = f;
			continue;
		}
		f += f[1] == '-' ? 2 : 1;
		eq = strchr(f, '=');
		n = eq ? (size_t)(eq - f) : strlen(f);
		for (k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
			if (strlen(valued[k]) == n && !memcmp(f, valued[k], n))
				break;
		if (k == sizeof(valued) / sizeof(valued[0]))
			continue; /* -debug and the like: the runc shim's business */
		if (!eq && i + 1 >= argc)
			return -EINVAL;
		if (k == 0)
			a->ns = eq ? eq + 1 : argv[i + 1];
		else if (k == 2)
			a->publish = eq ? eq + 1 : argv[i + 1];
		if (!eq)
			i++;
	}
	return a->action ? 0 : -EINVAL;
}

int oci_shim_upstream(const struct oci_shim_args *a, char *path, size_t len)
{
	const char *env = getenv("PATH"), *p, *slash = a->publish ? strrchr(a->publish, '/') : NULL;
	char dirs[4096];

	if (slash && (size_t)snprintf(path, len, "%.*s/%s", (int)(slash - a->publish), a->publish, UPSTREAM) < len &&
	    !access(path, X_OK))
		return 0;
	snprintf(dirs, sizeof(dirs), "%s", env && env[0] ? env : "/usr/local/bin:/usr/bin:/bin");
	for (p = strtok(dirs, ":"); p; p = strtok(NULL, ":"))
		if (p[0] == '/' && (size_t)snprintf(path, len, "%s/%s", p, UPSTREAM) < len && !access(path, X_OK))
			return 0;
	return -ENOENT;
}

/* Runs the runc shim with our arguments (argv[0] its path) and in[0..inlen)
 * on its stdin, its stdout and stderr both into out (the start's answer,
 * or why it failed): its exit status, or -errno. */
static int run_upstream(const char *up, char **argv, const void *in, size_t inlen, char *out, size_t outlen)
{
	int p[2], q[2], st;
	ssize_t n;
	size_t got = 0;
	pid_t pid;

	/* its stdin: in, whole in the pipe's buffer before it starts */
	if (inlen > 65536 || pipe2(q, O_CLOEXEC))
		return inlen > 65536 ? -E2BIG : -errno;
	if (write_full(q[1], in, inlen) || pipe2(p, O_CLOEXEC)) {
		close(q[0]);
		close(q[1]);
		return -errno;
	}
	close(q[1]);
	pid = fork();
	if (pid < 0) {
		close(q[0]);
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		if (dup2(q[0], STDIN_FILENO) < 0 || dup2(p[1], STDOUT_FILENO) < 0 || dup2(p[1], STDERR_FILENO) < 0)
			_exit(127);
		argv[0] = (char *)up;
		execv(up, argv);
		_exit(127);
	}
	close(p[1]);
	close(q[0]);
	for (;;) {
		char drop[512];
		int full = got == outlen - 1;

		n = read(p[0], full ? drop : out + got, full ? sizeof(drop) : outlen - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (!full)
			got += (size_t)n; /* what does not fit is read and dropped */
	}
	out[got] = '\0';
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* "address" in the bundle (the current folder), as containerd's shims
 * write it: a temporary beside it renamed over it. containerd reads it
 * to reach the shim again after a restart. */
static int write_address(const char *addr)
{
	int r = cli_write_text(".address", addr, 0644);

	if (!r && rename(".address", "address"))
		r = -errno;
	return r;
}

int oci_shim_parse_start(const char *answer, char *path, size_t len, int *version)
{
	char abuf[2048];
	struct json_arena ar = { abuf, sizeof(abuf), 0 };
	const struct json *j;
	const char *addr = answer, *proto = "ttrpc";
	int64_t v = 0;

	*version = 0;
	if (answer[0] == '{') {
		/* containerd 2.x's pkg/shim BootstrapParams */
		if (!(j = json_parse(answer, strlen(answer), &ar, &(const char *){ NULL })) ||
		    json_get_str(j, "address", &addr) || json_get_int(j, "version", &v) || v < 2 || v > 1000)
			return -EINVAL;
		json_get_str(j, "protocol", &proto);
		if (strcmp(proto, "ttrpc"))
			return -EINVAL;
		*version = (int)v;
	}
	if (strncmp(addr, "unix://", 7) || !addr[7] || strlen(addr + 7) + 4 >= SOCK_MAX || strlen(addr + 7) >= len)
		return -EINVAL;
	strcpy(path, addr + 7);
	return 0;
}

int oci_shim_format_start(int version, const char *path, char *out, size_t len)
{
	int n = version ? snprintf(out, len, "{\"version\":%d,\"address\":\"unix://%s\",\"protocol\":\"ttrpc\"}", version,
				   path)
			: snprintf(out, len, "unix://%s", path);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the daemon ------------------------------------------------------------- */

struct shim_daemon {
	int lfd;
	char up[SOCK_MAX], ours[SOCK_MAX];
	char ns[256];
	char bundles[PATH_MAX];
	pthread_mutex_t mu; /* pairs, and each pair's refs */
	unsigned pairs;
	int wake; /* an eventfd each pair's end writes: time to look again */
	int log;  /* the log's sink: the first task's bundle's "log" FIFO, or /dev/null */
	char oci[PATH_MAX]; /* vmm-oci beside us, for tasks without runc's options */
};

/* One connection of containerd's and ours to the runc shim for it,
 * carried by two threads, one each way; containerd's side is written by
 * both (the runc shim's answers, and ours), one frame at a time. */
struct shim_pair {
	struct shim_daemon *d;
	int c, u;
	pthread_mutex_t wc; /* writes to c */
	unsigned refs;      /* its threads still running */
};

int oci_ttrpc_header(const uint8_t h[TTRPC_HEADER], struct oci_ttrpc_header *out)
{
	out->len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
	out->stream = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
	out->type = h[8];
	out->flags = h[9];
	return out->len > TTRPC_MAX ? -EPROTO : 0;
}

static void put_header(uint8_t h[TTRPC_HEADER], uint32_t len, uint32_t stream, uint8_t type, uint8_t flags)
{
	h[0] = (uint8_t)(len >> 24);
	h[1] = (uint8_t)(len >> 16);
	h[2] = (uint8_t)(len >> 8);
	h[3] = (uint8_t)len;
	h[4] = (uint8_t)(stream >> 24);
	h[5] = (uint8_t)(stream >> 16);
	h[6] = (uint8_t)(stream >> 8);
	h[7] = (uint8_t)stream;
	h[8] = type;
	h[9] = flags;
}

/* The task API's service, as containerd 1.x (v2) or 2.x (v3) names it:
 * the messages the shim reads of it are the same in both. */
static int task_service(const char *s)
{
	return !strcmp(s, TASK_SERVICE) || !strcmp(s, TASK_SERVICE_V3);
}

/* vmm oci's --root for the task id: the runc shim's options.json in its
 * bundle ("root", RUNC_ROOT when empty), with the namespace, as the runc
 * shim passes it to its runc (containerd's pkg/process, NewRunc). */
static int task_root(const char *bundles, const char *ns, const char *id, char *root, size_t len)
{
	char path[PATH_MAX], text[8192], abuf[8192];
	struct json_arena ar = { abuf, sizeof(abuf), 0 };
	const struct json *j;
	const char *r = NULL;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s/options.json", bundles, id) >= sizeof(path) ||
	    cli_read_text(path, text, sizeof(text)))
		return -ENOENT;
	if (!(j = json_parse(text, strlen(text), &ar, &(const char *){ NULL })))
		return -EINVAL;
	json_get_str(j, "root", &r);
	return (size_t)snprintf(root, len, "%s/%s", r && r[0] ? r : RUNC_ROOT, ns) < len ? 0 : -ENAMETOOLONG;
}

int oci_shim_answer(const uint8_t *body, size_t len, const char *ns, const char *bundles, uint8_t *resp,
		    size_t cap, size_t *rlen)
{
	char service[64], method[32], id[OCI_ID_MAX + 2], root[PATH_MAX], why[512];
	uint8_t metrics[2048], stats[2200];
	struct oci_ctx c = { 0 };
	struct oci_stats st;
	struct pb_writer w;
	const uint8_t *payload = NULL;
	size_t plen = 0;
	int n;

	if (pb_get_str(body, len, 1, service, sizeof(service)) || !task_service(service) ||
	    pb_get_str(body, len, 2, method, sizeof(method)) || strcmp(method, "Stats"))
		return 0;
	/* the Request's payload = 3: StatsRequest { string id = 1; } */
	if (pb_get_bytes(body, len, 3, &payload, &plen) || pb_get_str(payload, plen, 1, id, sizeof(id)) || !oci_id_ok(id) ||
	    task_root(bundles, ns, id, root, sizeof(root)))
		return 0;
	c.root = root;
	if ((n = oci_stats_of(&c, id, &st, STATS_TIMEOUT_MS, why, sizeof(why)))) {
		/* not a pod's container, or its VM did not answer: the host's
		 * view, from the runc shim */
		if (n != -ENOENT)
			log_warn("Stats of %s from its guest: %s; passed to the runc shim", id, why);
		return 0;
	}
	/* StatsResponse { google.protobuf.Any stats = 1; } in
	 * Response { Status status = 1; bytes payload = 2; }, the status
	 * left out: OK */
	if ((n = oci_stats_metrics(&st, metrics, sizeof(metrics))) < 0)
		return 0;
	pb_init(&w, stats, sizeof(stats));
	pb_any(&w, 1, OCI_METRICS_TYPE, metrics, (size_t)n);
	if (pb_done(&w) < 0)
		return 0;
	n = (int)w.len;
	pb_init(&w, resp, cap);
	pb_bytes(&w, 2, stats, (size_t)n);
	if (pb_done(&w) < 0)
		return 0;
	*rlen = w.len;
	return 1;
}

/* Whether an Any's type is runc's options. */
static int runc_options(const uint8_t *any, size_t len)
{
	char url[64];

	return !pb_get_str(any, len, 1, url, sizeof(url)) && !strcmp(url, RUNC_OPTIONS);
}

int oci_shim_create_options(const uint8_t *body, size_t len, const char *oci, uint8_t *out, size_t cap,
			    size_t *olen)
{
	char service[64], method[32];
	uint8_t opts[PATH_MAX + 128], any[PATH_MAX + 192], *np;
	const uint8_t *payload, *have;
	struct pb_writer w, p, o, a;
	size_t plen, hlen, pcap;
	int got;

	/* the Request's payload = 3, a CreateTaskRequest, its options = 10 */
	if (pb_get_str(body, len, 1, service, sizeof(service)) || !task_service(service) ||
	    pb_get_str(body, len, 2, method, sizeof(method)) || strcmp(method, "Create") ||
	    pb_get_bytes(body, len, 3, &payload, &plen))
		return 0;
	got = pb_get_bytes(payload, plen, 10, &have, &hlen);
	if (got == -EPROTO || (!got && runc_options(have, hlen)))
		return 0; /* runc's options (runtime_type io.containerd.runc.v2): as they are */
	/* runc's Options { string binary_name = 6; string root = 7; } as the
	 * Any of CreateTaskRequest's options = 10 */
	pb_init(&o, opts, sizeof(opts));
	pb_str(&o, 6, oci);
	pb_str(&o, 7, OCI_ROOT);
	pb_init(&a, any, sizeof(any));
	pb_str(&a, 1, RUNC_OPTIONS);
	pb_bytes(&a, 2, opts, o.len);
	if (pb_done(&o) < 0 || pb_done(&a) < 0)
		return 0;
	/* the CreateTaskRequest with those options, then the Request with
	 * that payload (field 3), every other field as it came */
	pcap = plen + a.len + 16;
	if (!(np = malloc(pcap)))
		return 0;
	pb_init(&p, np, pcap);
	got = pb_copy_except(&p, payload, plen, 10);
	pb_bytes(&p, 10, any, a.len);
	pb_init(&w, out, cap);
	if (!got && pb_done(&p) >= 0 && !(got = pb_copy_except(&w, body, len, 3)))
		pb_bytes(&w, 3, np, p.len);
	free(np);
	if (got || pb_done(&p) < 0 || pb_done(&w) < 0)
		return 0; /* not a message throughout: passed on as it came */
	*olen = w.len;
	return 1;
}

/* One frame from fd into h and buf (at most TTRPC_MAX): 0 or -1. */
static int read_frame(int fd, struct oci_ttrpc_header *h, uint8_t *buf)
{
	uint8_t raw[TTRPC_HEADER];

	if (read_full(fd, raw, sizeof(raw)) || oci_ttrpc_header(raw, h))
		return -1;
	return read_full(fd, buf, h->len) ? -1 : 0;
}

static int write_frame(int fd, uint32_t stream, uint8_t type, uint8_t flags, const uint8_t *body, size_t len)
{
	uint8_t h[TTRPC_HEADER];

	put_header(h, (uint32_t)len, stream, type, flags);
	return write_full(fd, h, sizeof(h)) || write_full(fd, body, len) ? -1 : 0;
}

/* A thread of the pair is done: both sockets are shut down (which ends
 * the other thread's read), and the last one out closes them. */
static void pair_put(struct shim_pair *p)
{
	struct shim_daemon *d = p->d;
	unsigned left;

	shutdown(p->c, SHUT_RDWR);
	shutdown(p->u, SHUT_RDWR);
	pthread_mutex_lock(&d->mu);
	left = --p->refs;
	if (!left)
		d->pairs--;
	pthread_mutex_unlock(&d->mu);
	if (left)
		return;
	close(p->c);
	close(p->u);
	pthread_mutex_destroy(&p->wc);
	free(p);
	(void)eventfd_write(d->wake, 1);
}

static int write_c(struct shim_pair *p, uint32_t stream, uint8_t type, uint8_t flags, const uint8_t *body, size_t len)
{
	int r;

	pthread_mutex_lock(&p->wc);
	r = write_frame(p->c, stream, type, flags, body, len);
	pthread_mutex_unlock(&p->wc);
	return r;
}

/* One request of containerd's: answered here, passed on with runc's
 * options put in (a Create without them), or passed on as it came. */
static int down_one(struct shim_pair *p, const struct oci_ttrpc_header *h, const uint8_t *buf, uint8_t *resp)
{
	size_t rlen, cap = (size_t)h->len + 2 * PATH_MAX + 512;
	uint8_t *re;
	int r;

	if (h->type != TTRPC_REQUEST)
		return write_frame(p->u, h->stream, h->type, h->flags, buf, h->len);
	if (oci_shim_answer(buf, h->len, p->d->ns, p->d->bundles, resp, 4096, &rlen) == 1)
		return write_c(p, h->stream, TTRPC_RESPONSE, 0, resp, rlen);
	if ((re = malloc(cap)) && oci_shim_create_options(buf, h->len, p->d->oci, re, cap, &rlen) == 1 &&
	    rlen <= TTRPC_MAX) {
		r = write_frame(p->u, h->stream, h->type, h->flags, re, rlen);
		free(re);
		return r;
	}
	free(re);
	return write_frame(p->u, h->stream, h->type, h->flags, buf, h->len);
}

/* containerd to the runc shim, but for the calls the shim answers. */
static void *pair_down(void *arg)
{
	struct shim_pair *p = arg;
	uint8_t *buf = malloc(TTRPC_MAX), *resp = malloc(4096);
	struct oci_ttrpc_header h;

	while (buf && resp && !read_frame(p->c, &h, buf))
		if (down_one(p, &h, buf, resp))
			break;
	free(buf);
	free(resp);
	pair_put(p);
	return NULL;
}

/* The runc shim's answers back to containerd. */
static void *pair_up(void *arg)
{
	struct shim_pair *p = arg;
	uint8_t *buf = malloc(TTRPC_MAX);
	struct oci_ttrpc_header h;

	while (buf && !read_frame(p->u, &h, buf) && !write_c(p, h.stream, h.type, h.flags, buf, h.len))
		;
	free(buf);
	pair_put(p);
	return NULL;
}

/* Whether something accepts on the socket at path. */
static int alive(const char *path)
{
	int fd = unix_connect(path, 0);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static void accept_one(struct shim_daemon *d)
{
	struct shim_pair *p;
	pthread_attr_t at;
	pthread_t t;
	int c = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC), u;

	if (c < 0)
		return;
	if ((u = unix_connect(d->up, 0)) < 0 || !(p = calloc(1, sizeof(*p)))) {
		if (u >= 0)
			close(u);
		close(c);
		return;
	}
	p->d = d;
	p->c = c;
	p->u = u;
	p->refs = 2;
	pthread_mutex_init(&p->wc, NULL);
	pthread_mutex_lock(&d->mu);
	d->pairs++;
	pthread_mutex_unlock(&d->mu);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, pair_down, p))
		pair_put(p); /* its share, and the other thread's below */
	if (pthread_create(&t, &at, pair_up, p))
		pair_put(p);
	pthread_attr_destroy(&at);
}

/* Serves until the runc shim is gone and no connection is left (looked
 * at when a connection ends, then every IDLE_CHECK_MS, or a tenth of it
 * while none is left); then
 * removes both sockets (the runc shim removes its own, unless it read
 * our address from the bundle first). */
static void __attribute__((noreturn)) daemon_run(struct shim_daemon *d)
{
	struct pollfd pf[2] = { { .fd = d->lfd, .events = POLLIN }, { .fd = d->wake, .events = POLLIN } };
	eventfd_t v;

	for (;;) {
		int idle, n, done;

		pthread_mutex_lock(&d->mu);
		idle = d->pairs == 0;
		pthread_mutex_unlock(&d->mu);
		/* with no connection left, the runc shim is about to go */
		n = poll(pf, 2, idle ? IDLE_CHECK_MS / 10 : IDLE_CHECK_MS);

		if (n > 0 && pf[0].revents)
			accept_one(d);
		if (n > 0 && !pf[1].revents)
			continue;
		if (n > 0)
			(void)eventfd_read(d->wake, &v);
		pthread_mutex_lock(&d->mu);
		done = d->pairs == 0 && !alive(d->up);
		pthread_mutex_unlock(&d->mu);
		if (done)
			break;
	}
	log_info("%s: the runc shim at %s is gone; done", OCI_SHIM_NAME, d->up);
	unlink(d->ours); /* before the close: a start beside us then makes its own */
	close(d->lfd);
	if (!alive(d->up))
		unlink(d->up);
	_exit(0);
}

/* Starts the daemon for our socket (already listening on lfd): a child
 * in a session of its own, its stdio /dev/null, so the start's caller,
 * which reads our output to its end, is not held. */
static int spawn_daemon(struct shim_daemon *d)
{
	pid_t pid;
	int nul;

	if ((d->wake = eventfd(0, EFD_CLOEXEC)) < 0)
		return -errno;
	if ((pid = fork()) < 0) {
		close(d->wake);
		return -errno;
	}
	if (pid > 0)
		return 0;
	setsid();
	(void)chdir("/"); /* the bundle goes before we do */
	signal(SIGPIPE, SIG_IGN); /* a peer gone mid-write ends its pair, not us */
	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		dup2(nul, STDERR_FILENO);
	}
	log_info("%s serving %s in front of %s", OCI_SHIM_NAME, d->ours, d->up);
	daemon_run(d);
}

int oci_shim_start(const struct oci_shim_args *a, const char *upstream, char **argv, char *addr, size_t addrlen,
		   char *err, size_t errlen)
{
	static struct shim_daemon d; /* the daemon's, for its life */
	static uint8_t opts[65536];
	char out[4096], *up, *slash;
	size_t olen;
	ssize_t self;
	int r, version;

	/* containerd's options for the shim on our stdin: runc's pass on
	 * (its ShimCgroup); those of another runtime_type (the CRI's
	 * runtimeoptions for io.containerd.vmm.v2) the runc shim would
	 * refuse, so it gets none */
	{
		ssize_t n = read_upto(STDIN_FILENO, opts, sizeof(opts));

		olen = n > 0 && runc_options(opts, (size_t)n) ? (size_t)n : 0;
	}
	r = run_upstream(upstream, argv, opts, olen, out, sizeof(out));
	up = out + strspn(out, " \t\r\n");
	up[strcspn(up, "\r\n")] = '\0';
	if (r)
		return cli_seterr(err, errlen, -EIO, "%s start: %s", UPSTREAM, r < 0 ? strerror(-r) : out);
	memset(&d, 0, sizeof(d));
	if (oci_shim_parse_start(up, d.up, sizeof(d.up), &version))
		return cli_seterr(err, errlen, -EINVAL, "%s start gave an address vmm's shim cannot stand in front of: %s",
				  UPSTREAM, up);
	if ((size_t)snprintf(d.ours, sizeof(d.ours), "%s-vmm", d.up) >= sizeof(d.ours))
		return -ENAMETOOLONG; /* checked above */
	snprintf(d.ns, sizeof(d.ns), "%s", a->ns ? a->ns : "default");
	if (!getcwd(d.bundles, sizeof(d.bundles)) || !strrchr(d.bundles, '/'))
		return cli_seterr(err, errlen, -errno, "the bundle's folder: %s", strerror(errno));
	*strrchr(d.bundles, '/') = '\0';
	/* vmm-oci beside vmm (this binary, whatever the link's name) */
	self = readlink("/proc/self/exe", d.oci, sizeof(d.oci) - 16);
	if (self <= 0 || !(slash = memrchr(d.oci, '/', (size_t)self)))
		return cli_seterr(err, errlen, -ENOENT, "cannot find the vmm binary: %s", strerror(errno));
	strcpy(slash + 1, "vmm-oci");
	pthread_mutex_init(&d.mu, NULL);
	/* containerd reads the bundle's "log" FIFO into its own log, as it
	 * does every shim's: our log lines go there from here on (the
	 * daemon's too), never into the answer containerd reads from our
	 * stdout and stderr */
	if ((d.log = open("log", O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		d.log = open("/dev/null", O_WRONLY | O_CLOEXEC);
	log_set_sink(&(struct log_sink){ .fd = d.log, .id = OCI_SHIM_NAME, .show_level = 1 });
	/* a pod's second task finds the daemon of its first */
	d.lfd = alive(d.ours) ? -EADDRINUSE : unix_listen(d.ours, 64, 1, "the shim's socket");
	if (d.lfd < 0 && !alive(d.ours))
		return cli_seterr(err, errlen, d.lfd, "%s: %s", d.ours, strerror(-d.lfd));
	if (d.lfd >= 0 && (r = spawn_daemon(&d))) {
		close(d.lfd);
		unlink(d.ours);
		return cli_seterr(err, errlen, r, "starting the shim: %s", strerror(-r));
	}
	if (d.lfd >= 0)
		close(d.lfd);
	log_set_sink(&(struct log_sink){ .fd = -1 });
	if (d.log >= 0)
		close(d.log);
	/* the bundle's "address" (containerd 1.x reads it after a restart;
	 * 2.x keeps our answer in bootstrap.json itself), then our answer in
	 * the runc shim's form */
	if ((r = oci_shim_format_start(0, d.ours, addr, addrlen)) || (r = write_address(addr)))
		return cli_seterr(err, errlen, r, "the bundle's address file: %s", strerror(-r));
	return oci_shim_format_start(version, d.ours, addr, addrlen);
}
