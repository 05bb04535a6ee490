/* The process manager: detached processes (docs/api.md, version 2).
 *
 * guest-init serves every API connection in a process of its own, which
 * ends with the connection. A detached process must outlive it, and its
 * output must be kept for whoever attaches later, so one long-lived child
 * of the init owns them all: it forks them, drains their output into a
 * bounded ring per stream (oldest bytes dropped and counted), reaps them
 * and keeps their exit status. A connection process that gets a process
 * op (exec with "detach", processes, attach, logs, signal, wait) checks
 * the token and the request, then hands the request and the connection
 * itself (SCM_RIGHTS) to the manager over a socketpair only the init's
 * children inherit, and exits.
 *
 * The manager is one poll loop and never blocks on a client: attachers
 * read from the rings at their own offsets (a slow one skips what the ring
 * dropped, and is told how much), and their input (stdin, signals,
 * resizes) is taken one frame at a time. Bounded: at most max_procs
 * processes are kept (the oldest finished one without readers goes when a
 * new one needs its place) and at most PROCS_MAX_CLIENTS connections. */
#include "guest-init/ops.h"
#include "vmm/wire/proto.h"
#include "guest-init/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define PROCS_MAGIC 0x70766d76u /* "vmvp": a forwarded request */
#define PROCS_MAX 1024          /* the most max_procs may be */
#define PROCS_MAX_CLIENTS 64    /* attached/waiting connections at once */
#define CLIENT_IN_MAX DATA_CHUNK /* largest frame an attacher may send */
#define DRAIN_MS 200            /* after the exit: output still in the pipes */
#define ARGV_JSON_MAX 2048      /* of one process's argv in a listing */

struct proc {
	int64_t id;             /* 0: a free slot */
	char tag[API_TAG_MAX + 1];
	char *argv_json;        /* the argv as a JSON array (for listings) */
	pid_t pid;
	int running;            /* not reaped yet */
	int done;               /* reaped and its output closed: final */
	int status, timed_out;
	int pty;
	int64_t started_ms, ended_ms; /* since the server started */
	int64_t started_at;     /* wall clock, seconds */
	uint64_t deadline;      /* timeout_ms (0: none) */
	uint64_t drain_until;   /* after the reap */
	int out, err, in;       /* pipe ends / pty master (-1: closed) */
	struct ring ring[2];    /* stdout, stderr */
};

enum client_kind { C_ATTACH, C_LOGS, C_WAIT };

struct client {
	int fd;                 /* -1: a free slot */
	enum client_kind kind;
	int64_t proc_id;
	int follow;
	uint64_t off[2];        /* next stdout/stderr byte to send */
	uint64_t skipped;       /* bytes the ring dropped before this reader got them */
	uint64_t deadline;      /* wait: timeout (0: none) */
	int final;              /* the last frame is queued: close once sent */
	uint8_t out[FRAME_HDR + DATA_CHUNK];
	size_t out_off, out_len;
	uint8_t in[FRAME_HDR + CLIENT_IN_MAX];
	size_t in_len;          /* bytes of the frame being read */
	size_t stdin_off;       /* a complete STDIN frame: bytes already written */
	int stdin_pending;
};

struct procs {
	struct procs_limits lim;
	const struct api_config *cfg;
	int chan, sfd;
	int64_t next_id;
	struct proc *procs;     /* lim.max_procs slots */
	struct client clients[PROCS_MAX_CLIENTS];
	char req[REQUEST_MAX + 64];
	char arena[REQUEST_MAX * 2];
	char reply[FRAME_MAX / 2];
};

/* ---- small helpers --------------------------------------------------------- */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* One-shot replies are written blocking, but never for long: a client
 * that does not read cannot stall the manager past this. */
static void reply_timeout(int fd)
{
	struct timeval tv = { .tv_sec = 5 };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static struct proc *find_proc(struct procs *ps, int64_t id, const char *tag)
{
	struct proc *best = NULL;
	unsigned i;

	for (i = 0; i < ps->lim.max_procs; i++) {
		struct proc *p = &ps->procs[i];

		if (!p->id)
			continue;
		if (id && p->id == id)
			return p;
		if (!id && tag && !strcmp(p->tag, tag) && (!best || p->id > best->id))
			best = p; /* a tag names its newest process */
	}
	return best;
}

static unsigned proc_readers(struct procs *ps, const struct proc *p)
{
	unsigned i, n = 0;

	for (i = 0; i < PROCS_MAX_CLIENTS; i++)
		n += ps->clients[i].fd >= 0 && ps->clients[i].proc_id == p->id;
	return n;
}

static void proc_free(struct proc *p)
{
	close_fd(&p->out);
	close_fd(&p->err);
	close_fd(&p->in);
	ring_free(&p->ring[0]);
	ring_free(&p->ring[1]);
	free(p->argv_json);
	memset(p, 0, sizeof(*p));
	p->out = p->err = p->in = -1;
}

static void exit_fields(struct json_writer *w, const struct proc *p)
{
	if (WIFSIGNALED(p->status)) {
		jw_key(w, "signal");
		jw_int(w, WTERMSIG(p->status));
		jw_key(w, "exit_code");
		jw_int(w, 128 + WTERMSIG(p->status));
	} else {
		jw_key(w, "exit_code");
		jw_int(w, WEXITSTATUS(p->status));
	}
	jw_key(w, "timed_out");
	jw_bool(w, p->timed_out);
}

static void stream_fields(struct json_writer *w, const struct proc *p)
{
	static const char *const names[2] = { "stdout", "stderr" };
	int s;

	for (s = 0; s < 2; s++) {
		jw_key(w, names[s]);
		jw_obj(w);
		jw_key(w, "start");
		jw_int(w, (int64_t)p->ring[s].head);
		jw_key(w, "end");
		jw_int(w, (int64_t)p->ring[s].tail);
		jw_key(w, "dropped");
		jw_int(w, (int64_t)ring_dropped(&p->ring[s]));
		jw_obj_end(w);
	}
}

static void proc_json(struct json_writer *w, const struct proc *p)
{
	jw_obj(w);
	jw_key(w, "id");
	jw_int(w, p->id);
	jw_key(w, "tag");
	if (p->tag[0])
		jw_str(w, p->tag);
	else
		jw_null(w);
	jw_key(w, "argv");
	jw_raw(w, p->argv_json); /* built by argv_json() */
	jw_key(w, "pid");
	jw_int(w, p->pid);
	jw_key(w, "state");
	jw_str(w, p->running ? "running" : "exited");
	jw_key(w, "pty");
	jw_bool(w, p->pty);
	jw_key(w, "started_ms");
	jw_int(w, p->started_ms);
	jw_key(w, "started_at");
	jw_int(w, p->started_at);
	if (!p->running) {
		jw_key(w, "ended_ms");
		jw_int(w, p->ended_ms);
		exit_fields(w, p);
	}
	stream_fields(w, p);
	jw_obj_end(w);
}

static char *argv_json(const struct api_request *r)
{
	char buf[ARGV_JSON_MAX + 64];
	struct json_writer w;
	unsigned i;

	jw_init(&w, buf, sizeof(buf));
	jw_arr(&w);
	for (i = 0; i < r->argc && w.len < ARGV_JSON_MAX - 8; i++) {
		size_t room = ARGV_JSON_MAX - 8 - w.len, n = strlen(r->argv[i]);

		/* A long argument is cut (escaping can grow it 6x). */
		jw_strn(&w, r->argv[i], n * 6 < room ? n : room / 6);
	}
	jw_arr_end(&w);
	return strdup(jw_done(&w) ? buf : "[]");
}

/* ---- ops -------------------------------------------------------------------- */

static struct proc *free_slot(struct procs *ps)
{
	struct proc *oldest = NULL;
	unsigned i;

	for (i = 0; i < ps->lim.max_procs; i++)
		if (!ps->procs[i].id)
			return &ps->procs[i];
	/* Full: the oldest finished process nobody reads goes. */
	for (i = 0; i < ps->lim.max_procs; i++) {
		struct proc *p = &ps->procs[i];

		if (p->done && !proc_readers(ps, p) && (!oldest || p->id < oldest->id))
			oldest = p;
	}
	if (oldest)
		proc_free(oldest);
	return oldest;
}

static void op_start(struct procs *ps, int fd, const struct api_request *r)
{
	char egress_buf[EGRESS_ENV][96], meta[256];
	const char *extra[EGRESS_ENV + 1] = { NULL };
	struct exec_io io;
	struct json_writer w;
	struct proc *p;
	size_t ring = r->ring_bytes ? (size_t)r->ring_bytes : ps->lim.ring_bytes;
	unsigned port;
	int e = 0;

	if (r->tag && (p = find_proc(ps, 0, r->tag)) && p->running) {
		api_send_error(fd, EEXIST, "a running detached process has that tag");
		return;
	}
	p = free_slot(ps);
	if (!p) {
		api_send_error(fd, EAGAIN, "the sandbox keeps as many detached processes as it may and none "
					   "has finished: end one first");
		return;
	}
	if (ring_init(&p->ring[0], ring) || ring_init(&p->ring[1], r->pty ? 1 : ring)) {
		proc_free(p);
		api_send_error(fd, ENOMEM, "no memory for the output ring");
		return;
	}
	p->argv_json = argv_json(r);
	if (!p->argv_json) {
		proc_free(p);
		api_send_error(fd, ENOMEM, NULL);
		return;
	}
	if (ps->cfg->egress_port && (port = ps->cfg->egress_port()))
		spawn_proxy_env(port, egress_buf, extra);
	p->pid = spawn_command(r, extra, &io, &e);
	if (p->pid < 0) {
		char why[4200];

		proc_free(p);
		api_send_error(fd, e, spawn_error_message(r, &io, e, why, sizeof(why)));
		return;
	}
	p->id = ++ps->next_id;
	snprintf(p->tag, sizeof(p->tag), "%s", r->tag ? r->tag : "");
	p->running = 1;
	p->pty = io.pty;
	p->out = io.out;
	p->err = io.err;
	/* Closed on its own; close-on-exec like every descriptor here: a
	 * plain dup() leaked this pty's master into every later detached
	 * command (one that gave up root could type into a root shell). */
	p->in = io.pty ? fcntl(io.out, F_DUPFD_CLOEXEC, 0) : io.in;
	p->started_ms = (int64_t)(now_ms() - ps->cfg->start_ms);
	p->started_at = (int64_t)time(NULL);
	p->deadline = r->timeout_ms ? now_ms() + (uint64_t)r->timeout_ms : 0;
	fcntl(p->out, F_SETFL, O_NONBLOCK);
	if (p->err >= 0)
		fcntl(p->err, F_SETFL, O_NONBLOCK);
	if (p->in >= 0)
		fcntl(p->in, F_SETFL, O_NONBLOCK);
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	jw_key(&w, "id");
	jw_int(&w, p->id);
	jw_key(&w, "pid");
	jw_int(&w, p->pid);
	jw_key(&w, "tag");
	if (p->tag[0])
		jw_str(&w, p->tag);
	else
		jw_null(&w);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
}

static void op_list(struct procs *ps, int fd)
{
	struct json_writer w;
	unsigned i;

	jw_init(&w, ps->reply, sizeof(ps->reply));
	jw_obj(&w);
	jw_key(&w, "processes");
	jw_arr(&w);
	for (i = 0; i < ps->lim.max_procs; i++)
		if (ps->procs[i].id)
			proc_json(&w, &ps->procs[i]);
	jw_arr_end(&w);
	jw_key(&w, "max_processes");
	jw_int(&w, ps->lim.max_procs);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
}

static struct proc *lookup(struct procs *ps, int fd, const struct api_request *r, int want_running)
{
	struct proc *p = find_proc(ps, r->id, r->tag);
	char msg[160];

	if (!p) {
		api_send_error(fd, ESRCH, r->tag ? "no detached process has that tag" :
						  "no detached process has that id (or it was evicted)");
		return NULL;
	}
	if (want_running && !p->running) {
		snprintf(msg, sizeof(msg), "process %lld has exited; its output and exit status stay readable "
					   "(logs, wait, processes)", (long long)p->id);
		api_send_error(fd, ECHILD, msg);
		return NULL;
	}
	return p;
}

static void op_signal(struct procs *ps, int fd, const struct api_request *r)
{
	struct proc *p = lookup(ps, fd, r, 1);

	if (!p)
		return;
	/* Its process group (it leads a session), else the process. */
	if (kill(-p->pid, (int)r->sig) < 0 && kill(p->pid, (int)r->sig) < 0)
		api_send_error(fd, errno, NULL);
	else
		api_send_ok(fd);
}

static void send_exit(int fd, const struct proc *p)
{
	char meta[256];
	struct json_writer w;

	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	jw_key(&w, "id");
	jw_int(&w, p->id);
	exit_fields(&w, p);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
}

static struct client *new_client(struct procs *ps, int fd, enum client_kind kind, const struct proc *p)
{
	unsigned i;

	for (i = 0; i < PROCS_MAX_CLIENTS; i++) {
		struct client *c = &ps->clients[i];

		if (c->fd >= 0)
			continue;
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->kind = kind;
		c->proc_id = p->id;
		fcntl(fd, F_SETFL, O_NONBLOCK);
		return c;
	}
	api_send_error(fd, EAGAIN, "too many connections attached to detached processes");
	return NULL;
}

/* attach/logs: a RESULT describing what is kept, then the output from
 * the offsets asked for; returns the client to keep (or NULL: done). */
static struct client *op_read_out(struct procs *ps, int fd, const struct api_request *r)
{
	struct proc *p = lookup(ps, fd, r, r->op == OP_ATTACH);
	struct client *c;
	struct json_writer w;
	char meta[512];

	if (!p)
		return NULL;
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	jw_key(&w, "id");
	jw_int(&w, p->id);
	jw_key(&w, "pid");
	jw_int(&w, p->pid);
	jw_key(&w, "state");
	jw_str(&w, p->running ? "running" : "exited");
	jw_key(&w, "pty");
	jw_bool(&w, p->pty);
	stream_fields(&w, p);
	jw_obj_end(&w);
	api_send_json(fd, F_RESULT, &w);
	c = new_client(ps, fd, r->op == OP_ATTACH ? C_ATTACH : C_LOGS, p);
	if (!c)
		return NULL;
	c->follow = r->follow;
	c->off[0] = (uint64_t)r->offset;
	c->off[1] = (uint64_t)r->stderr_offset;
	return c;
}

static struct client *op_wait(struct procs *ps, int fd, const struct api_request *r)
{
	struct proc *p = lookup(ps, fd, r, 0);
	struct client *c;

	if (!p)
		return NULL;
	if (p->done) {
		send_exit(fd, p);
		return NULL;
	}
	c = new_client(ps, fd, C_WAIT, p);
	if (c && r->timeout_ms)
		c->deadline = now_ms() + (uint64_t)r->timeout_ms;
	return c;
}

/* A forwarded request: its text, with the client's connection. */
static void __attribute__((noreturn)) manager_exit(struct procs *ps);

static void take_request(struct procs *ps)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { ps->req, sizeof(ps->req) - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct json_arena a = { ps->arena, sizeof(ps->arena), 0 };
	struct api_request r;
	struct cmsghdr *cm;
	const char *err = NULL;
	uint32_t magic;
	int fd = -1, eno = 0;
	ssize_t n = recvmsg(ps->chan, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	if (n == 0)
		manager_exit(ps); /* every holder of the channel (the init, its API workers) is gone */
	if (n < 0)
		return;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (fd < 0)
		return;
	memcpy(&magic, ps->req, sizeof(magic));
	if ((size_t)n < sizeof(magic) || magic != PROCS_MAGIC || (mh.msg_flags & MSG_TRUNC)) {
		close(fd);
		return;
	}
	reply_timeout(fd);
	/* Checked by the connection's process already (the token too):
	 * parsed again here, where the strings must live. */
	if (api_parse(ps->req + sizeof(magic), (size_t)n - sizeof(magic), NULL, &a, &r, &err, &eno)) {
		api_send_error(fd, eno, err);
		close(fd);
		return;
	}
	switch (r.op) {
	case OP_EXEC:
		op_start(ps, fd, &r);
		break;
	case OP_PROCESSES:
		op_list(ps, fd);
		break;
	case OP_SIGNAL:
		op_signal(ps, fd, &r);
		break;
	case OP_ATTACH:
	case OP_LOGS:
		if (op_read_out(ps, fd, &r))
			return; /* kept */
		break;
	case OP_WAIT:
		if (op_wait(ps, fd, &r))
			return;
		break;
	default:
		api_send_error(fd, EINVAL, "not an op of the process manager");
		break;
	}
	close(fd);
}

/* ---- the loop --------------------------------------------------------------- */

static void client_close(struct client *c)
{
	close_fd(&c->fd);
}

static void queue_frame(struct client *c, uint8_t type, const void *data, size_t len)
{
	uint8_t *h = c->out;

	h[0] = (uint8_t)len;
	h[1] = (uint8_t)(len >> 8);
	h[2] = (uint8_t)(len >> 16);
	h[3] = (uint8_t)(len >> 24);
	h[4] = type;
	h[5] = h[6] = h[7] = 0;
	if (len)
		memcpy(c->out + FRAME_HDR, data, len);
	c->out_off = 0;
	c->out_len = FRAME_HDR + len;
}

/* Fills the client's frame from the rings, or queues its last frame. */
static void client_fill(struct procs *ps, struct client *c, const struct proc *p)
{
	size_t n;
	int s;

	if (c->out_len || c->final || c->kind == C_WAIT)
		return;
	for (s = 0; s < 2; s++) {
		n = ring_read(&p->ring[s], &c->off[s], c->out + FRAME_HDR, DATA_CHUNK, &c->skipped);
		if (n) {
			queue_frame(c, s ? F_STDERR : F_STDOUT, c->out + FRAME_HDR, n);
			return;
		}
	}
	if (p->done || !c->follow) {
		char meta[320];
		struct json_writer w;

		jw_init(&w, meta, sizeof(meta));
		jw_obj(&w);
		jw_key(&w, "id");
		jw_int(&w, p->id);
		jw_key(&w, "skipped");
		jw_int(&w, (int64_t)c->skipped);
		jw_key(&w, "stdout_end");
		jw_int(&w, (int64_t)c->off[0]);
		jw_key(&w, "stderr_end");
		jw_int(&w, (int64_t)c->off[1]);
		if (p->done) {
			exit_fields(&w, p);
			jw_obj_end(&w);
			queue_frame(c, F_EXIT, meta, jw_done(&w) ? w.len : 0);
		} else {
			jw_obj_end(&w);
			queue_frame(c, F_END, meta, jw_done(&w) ? w.len : 0);
		}
		c->final = 1;
	}
	(void)ps;
}

static void client_flush(struct procs *ps, struct client *c)
{
	const struct proc *p = find_proc(ps, c->proc_id, NULL);

	if (!p) {
		client_close(c);
		return;
	}
	if (c->kind == C_WAIT) {
		if (p->done) {
			fcntl(c->fd, F_SETFL, 0);
			send_exit(c->fd, p);
			client_close(c);
		} else if (c->deadline && now_ms() >= c->deadline) {
			fcntl(c->fd, F_SETFL, 0);
			api_send_error(c->fd, ETIMEDOUT, "the process is still running");
			client_close(c);
		}
		return;
	}
	for (;;) {
		ssize_t k;

		client_fill(ps, c, p);
		if (!c->out_len)
			return;
		k = send(c->fd, c->out + c->out_off, c->out_len, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return;
		if (k <= 0) {
			client_close(c);
			return;
		}
		c->out_off += (size_t)k;
		c->out_len -= (size_t)k;
		if (!c->out_len && c->final) {
			client_close(c);
			return;
		}
	}
}

/* An attacher's frame, complete in c->in. */
static void client_frame(struct client *c, struct proc *p)
{
	uint8_t type = c->in[4];
	const uint8_t *d = c->in + FRAME_HDR;
	size_t len = c->in_len - FRAME_HDR;

	c->in_len = 0;
	if (c->kind != C_ATTACH || !p->running)
		return; /* logs and wait take no input; an exited process none */
	switch (type) {
	case F_STDIN:
		if (p->in >= 0 && len) {
			memmove(c->in, d, len); /* kept until the pipe takes it */
			c->in_len = len;
			c->stdin_off = 0;
			c->stdin_pending = 1;
		}
		break;
	case F_STDIN_EOF:
		if (p->pty && p->in >= 0) {
			uint8_t eot = 4; /* ^D: EOF for the line discipline */

			if (write(p->in, &eot, 1) < 0) {
				/* a full pty: the ^D is lost, as a typed one would be */
			}
		} else {
			close_fd(&p->in);
		}
		break;
	case F_SIGNAL:
		if (len == 4) {
			uint32_t sig = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;

			if (sig >= 1 && sig <= 64 && kill(-p->pid, (int)sig) < 0)
				kill(p->pid, (int)sig);
		}
		break;
	case F_RESIZE:
		if (len == 4 && p->pty && p->in >= 0) {
			struct winsize ws = { .ws_row = (unsigned short)(d[0] | d[1] << 8),
					      .ws_col = (unsigned short)(d[2] | d[3] << 8) };

			ioctl(p->in, TIOCSWINSZ, &ws);
		}
		break;
	default:
		break; /* unknown frames are ignored, as in exec */
	}
}

static uint32_t frame_len(const uint8_t *h)
{
	return (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
}

static void client_read(struct procs *ps, struct client *c)
{
	struct proc *p = find_proc(ps, c->proc_id, NULL);
	size_t want;
	ssize_t k;

	if (c->stdin_pending)
		return;
	want = c->in_len < FRAME_HDR ? FRAME_HDR - c->in_len : FRAME_HDR + frame_len(c->in) - c->in_len;
	k = want ? read(c->fd, c->in + c->in_len, want) : 0;
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (want && k <= 0) {
		client_close(c); /* the client left; the process goes on */
		return;
	}
	c->in_len += (size_t)k;
	if (c->in_len < FRAME_HDR)
		return;
	if (frame_len(c->in) > CLIENT_IN_MAX) {
		fcntl(c->fd, F_SETFL, 0);
		api_send_error(c->fd, EMSGSIZE, "frames to a detached process are at most 64 KiB");
		client_close(c);
		return;
	}
	if (c->in_len == FRAME_HDR + frame_len(c->in)) {
		if (p)
			client_frame(c, p);
		else
			c->in_len = 0;
	}
}

static void stdin_push(struct procs *ps, struct proc *p)
{
	unsigned i;

	for (i = 0; i < PROCS_MAX_CLIENTS && p->in >= 0; i++) {
		struct client *c = &ps->clients[i];
		ssize_t k;

		if (c->fd < 0 || c->proc_id != p->id || !c->stdin_pending)
			continue;
		k = write(p->in, c->in + c->stdin_off, c->in_len - c->stdin_off);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (k <= 0) {
			/* The command closed its stdin: what is left is lost. */
			c->stdin_off = c->in_len;
		} else {
			c->stdin_off += (size_t)k;
		}
		if (c->stdin_off == c->in_len) {
			c->stdin_pending = 0;
			c->in_len = 0;
		}
	}
}

static void drain(struct proc *p, int *fd, int s)
{
	uint8_t buf[16384];
	int rounds;

	for (rounds = 0; rounds < 64; rounds++) {
		ssize_t k = read(*fd, buf, sizeof(buf));

		if (k > 0) {
			ring_write(&p->ring[s], buf, (size_t)k);
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* EOF (or EIO: a pty whose last holder closed it) */
		if (*fd == p->out && p->pty)
			close_fd(&p->in);
		close_fd(fd);
		return;
	}
}

static void reap(struct procs *ps)
{
	pid_t pid;
	int st;
	unsigned i;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (i = 0; i < ps->lim.max_procs; i++) {
			struct proc *p = &ps->procs[i];

			if (!p->id || !p->running || p->pid != pid)
				continue;
			p->running = 0;
			p->status = st;
			p->ended_ms = (int64_t)(now_ms() - ps->cfg->start_ms);
			p->drain_until = now_ms() + DRAIN_MS;
			if (!p->pty)
				close_fd(&p->in);
		}
	}
}

static void finish(struct proc *p)
{
	uint64_t t = now_ms();

	if (p->running && p->deadline && t >= p->deadline && !p->timed_out) {
		p->timed_out = 1;
		kill(-p->pid, SIGKILL);
		kill(p->pid, SIGKILL);
	}
	if (p->running || p->done)
		return;
	/* Exited: done once its output is read, or after a moment for
	 * stragglers that hold its pipes (a background child). */
	if ((p->out < 0 && p->err < 0) || t >= p->drain_until) {
		if (p->out >= 0)
			drain(p, &p->out, 0);
		if (p->err >= 0)
			drain(p, &p->err, 1);
		close_fd(&p->out);
		close_fd(&p->err);
		close_fd(&p->in);
		p->done = 1;
	}
}

static void __attribute__((noreturn)) manager_exit(struct procs *ps)
{
	unsigned i;

	for (i = 0; i < ps->lim.max_procs; i++)
		if (ps->procs[i].id && ps->procs[i].running) {
			kill(-ps->procs[i].pid, SIGKILL);
			kill(ps->procs[i].pid, SIGKILL);
		}
	_exit(0);
}

static void __attribute__((noreturn)) manager_loop(struct procs *ps, pid_t parent)
{
	enum { MAXFD = 2 + PROCS_MAX_CLIENTS + 3 * PROCS_MAX };
	static struct pollfd pf[MAXFD];
	static struct { int kind; void *obj; int s; } what[MAXFD];

	for (;;) {
		int n = 0, timeout = -1, i, k;
		uint64_t t = now_ms();
		unsigned j;

		if (getppid() != parent)
			manager_exit(ps);
		pf[n] = (struct pollfd){ .fd = ps->sfd, .events = POLLIN };
		what[n++].kind = 0;
		pf[n] = (struct pollfd){ .fd = ps->chan, .events = POLLIN };
		what[n++].kind = 1;
		for (j = 0; j < ps->lim.max_procs; j++) {
			struct proc *p = &ps->procs[j];
			int want_in = 0;

			if (!p->id || p->done)
				continue;
			if (p->out >= 0) {
				pf[n] = (struct pollfd){ .fd = p->out, .events = POLLIN };
				what[n].kind = 2, what[n].obj = p, what[n++].s = 0;
			}
			if (p->err >= 0) {
				pf[n] = (struct pollfd){ .fd = p->err, .events = POLLIN };
				what[n].kind = 2, what[n].obj = p, what[n++].s = 1;
			}
			for (i = 0; i < PROCS_MAX_CLIENTS; i++)
				want_in |= ps->clients[i].fd >= 0 && ps->clients[i].proc_id == p->id &&
					   ps->clients[i].stdin_pending;
			if (want_in && p->in >= 0) {
				pf[n] = (struct pollfd){ .fd = p->in, .events = POLLOUT };
				what[n].kind = 3, what[n++].obj = p;
			}
			if (p->deadline && p->running)
				timeout = timeout < 0 || p->deadline - t < (uint64_t)timeout ?
						  (int)(p->deadline > t ? p->deadline - t : 0) : timeout;
			if (!p->running)
				timeout = timeout < 0 || p->drain_until - t < (uint64_t)timeout ?
						  (int)(p->drain_until > t ? p->drain_until - t : 0) : timeout;
		}
		for (j = 0; j < PROCS_MAX_CLIENTS; j++) {
			struct client *c = &ps->clients[j];

			if (c->fd < 0)
				continue;
			pf[n] = (struct pollfd){ .fd = c->fd,
						 .events = (short)((c->stdin_pending ? 0 : POLLIN) |
								   (c->out_len ? POLLOUT : 0)) };
			what[n].kind = 4, what[n++].obj = c;
			if (c->deadline)
				timeout = timeout < 0 || c->deadline - t < (uint64_t)timeout ?
						  (int)(c->deadline > t ? c->deadline - t : 0) : timeout;
		}
		/* No timer of its own: an idle sandbox's guest sleeps (issue 42;
		 * this loop woke it once a second). The parent's death comes as
		 * SIGTERM on the signalfd (PR_SET_PDEATHSIG), the channel's
		 * hang-up as an end of file (take_request). */
		k = poll(pf, (nfds_t)n, timeout);
		if (k < 0 && errno != EINTR)
			manager_exit(ps);
		for (i = 0; k > 0 && i < n; i++) {
			if (!pf[i].revents)
				continue;
			switch (what[i].kind) {
			case 0: {
				struct signalfd_siginfo si;

				while (read(ps->sfd, &si, sizeof(si)) == sizeof(si))
					if (si.ssi_signo != SIGCHLD)
						manager_exit(ps);
				reap(ps);
				break;
			}
			case 1:
				take_request(ps);
				break;
			case 2: {
				struct proc *p = what[i].obj;

				if (what[i].s == 0 && p->out >= 0)
					drain(p, &p->out, 0);
				else if (what[i].s == 1 && p->err >= 0)
					drain(p, &p->err, 1);
				break;
			}
			case 3:
				stdin_push(ps, what[i].obj);
				break;
			case 4: {
				struct client *c = what[i].obj;

				if (c->fd >= 0 && (pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
					client_read(ps, c);
				break;
			}
			}
		}
		reap(ps); /* a SIGCHLD merged with another */
		for (j = 0; j < ps->lim.max_procs; j++) {
			if (ps->procs[j].id) {
				finish(&ps->procs[j]);
				if (ps->procs[j].in >= 0 && !ps->procs[j].done)
					stdin_push(ps, &ps->procs[j]);
			}
		}
		for (j = 0; j < PROCS_MAX_CLIENTS; j++)
			if (ps->clients[j].fd >= 0)
				client_flush(ps, &ps->clients[j]);
	}
}

pid_t procs_start(const struct procs_limits *lim, const struct api_config *cfg, int *chan)
{
	int sv[2];
	pid_t parent = getpid(), pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = -errno;

		close(sv[0]);
		close(sv[1]);
		return e;
	}
	if (pid == 0) {
		static struct procs ps;
		sigset_t set;
		unsigned i;

		close(sv[0]);
		/* Dies with the init (a host build's server, in tests). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		prctl(PR_SET_NAME, "vmm-procs");
		ps.lim = *lim;
		if (ps.lim.max_procs < 1 || ps.lim.max_procs > PROCS_MAX)
			ps.lim.max_procs = 64;
		if (ps.lim.ring_bytes < API_RING_MIN || ps.lim.ring_bytes > API_RING_MAX)
			ps.lim.ring_bytes = API_RING_DEFAULT;
		ps.cfg = cfg;
		ps.chan = sv[1];
		ps.procs = calloc(ps.lim.max_procs, sizeof(*ps.procs));
		if (!ps.procs)
			_exit(1);
		for (i = 0; i < ps.lim.max_procs; i++)
			ps.procs[i].out = ps.procs[i].err = ps.procs[i].in = -1;
		for (i = 0; i < PROCS_MAX_CLIENTS; i++)
			ps.clients[i].fd = -1;
		sigemptyset(&set);
		sigaddset(&set, SIGCHLD);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGHUP);
		sigprocmask(SIG_SETMASK, &set, NULL);
		signal(SIGPIPE, SIG_IGN);
		ps.sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
		if (ps.sfd < 0)
			_exit(1);
		manager_loop(&ps, parent);
	}
	close(sv[1]);
	*chan = sv[0];
	return pid;
}

int procs_forward(int chan, int client, const char *req, size_t len)
{
	static char buf[REQUEST_MAX + 64];
	uint32_t magic = PROCS_MAGIC;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { buf, sizeof(magic) + len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;

	if (len > REQUEST_MAX)
		return -EMSGSIZE;
	memcpy(buf, &magic, sizeof(magic));
	memcpy(buf + sizeof(magic), req, len);
	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &client, sizeof(int));
	if (sendmsg(chan, &mh, MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}
