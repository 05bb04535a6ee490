/* Sandbox API operations. Every connection runs in its own process (forked
 * by the init), so a crash or a slow client affects only that request. */
#include "vmm/wire/api.h"
#include "guest-init/ops.h"
#include "vmm/wire/tar.h"
#include "vmm/wire/proto.h"
#include "vmm/wire/vsock.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define send_error api_send_error
#define send_json api_send_json
#define send_ok api_send_ok

/* ---- processes ------------------------------------------------------------ */

static void registry_add(const struct api_config *cfg, pid_t pid, const struct api_request *r)
{
	char path[PATH_MAX], buf[4096];
	struct json_writer w;
	unsigned i;
	int f;

	if (!cfg->registry)
		return;
	snprintf(path, sizeof(path), "%s/%d", cfg->registry, (int)pid);
	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "pid");
	jw_int(&w, pid);
	jw_key(&w, "started_ms");
	jw_int(&w, (int64_t)(now_ms() - cfg->start_ms));
	jw_key(&w, "argv");
	jw_arr(&w);
	for (i = 0; i < r->argc && w.len < 3000; i++)
		jw_str(&w, r->argv[i]);
	jw_arr_end(&w);
	jw_obj_end(&w);
	f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (f >= 0) {
		if (jw_done(&w))
			write_full(f, w.buf, w.len);
		close(f);
	}
}

static void registry_del(const struct api_config *cfg, pid_t pid)
{
	char path[PATH_MAX];

	if (!cfg->registry)
		return;
	snprintf(path, sizeof(path), "%s/%d", cfg->registry, (int)pid);
	unlink(path);
}

static void op_ps(int fd, const struct api_config *cfg)
{
	static char buf[FRAME_MAX / 2];
	struct json_writer w;
	struct dirent *de;
	DIR *d = cfg->registry ? opendir(cfg->registry) : NULL;

	jw_init(&w, buf, sizeof(buf));
	jw_obj(&w);
	jw_key(&w, "processes");
	jw_arr(&w);
	while (d && (de = readdir(d))) {
		char path[PATH_MAX], rec[4096];
		int f;
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", cfg->registry, de->d_name);
		f = open(path, O_RDONLY | O_CLOEXEC);
		if (f < 0)
			continue;
		n = read(f, rec, sizeof(rec) - 1);
		close(f);
		if (n <= 0 || w.len + (size_t)n + 8 > sizeof(buf))
			continue;
		/* Records are JSON we wrote ourselves: splice them in. */
		if (w.need_comma)
			memcpy(w.buf + w.len++, ",", 1);
		memcpy(w.buf + w.len, rec, (size_t)n);
		w.len += (size_t)n;
		w.buf[w.len] = '\0';
		w.need_comma = 1;
	}
	if (d)
		closedir(d);
	jw_arr_end(&w);
	jw_obj_end(&w);
	send_json(fd, F_RESULT, &w);
}

/* connect: a TCP connection to 127.0.0.1:port in the sandbox, then the
 * API connection carries its bytes both ways (published ports). Each side's
 * end of stream is passed on as a half-close. */
static void op_connect(int fd, const struct api_request *r)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char buf[65536];
	int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (tcp < 0 || connect(tcp, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		send_error(fd, errno, "nothing listens on that port in the sandbox");
		if (tcp >= 0)
			close(tcp);
		return;
	}
	send_ok(fd);
	splice_streams(fd, tcp, buf, sizeof(buf));
	close(tcp);
}

static void op_kill(int fd, const struct api_request *r, const struct api_config *cfg)
{
	char path[PATH_MAX];

	/* Only processes the API started (their session leaders). */
	snprintf(path, sizeof(path), "%s/%lld", cfg->registry ? cfg->registry : "/nonexistent",
		 (long long)r->pid);
	if (access(path, F_OK) < 0) {
		send_error(fd, ESRCH, "no process started through the API has that pid");
		return;
	}
	if (kill(-(pid_t)r->pid, (int)r->sig) < 0 && kill((pid_t)r->pid, (int)r->sig) < 0)
		send_error(fd, errno, NULL);
	else
		send_ok(fd);
}

/* One exec request's state while its command runs (op_exec's steps). */
struct exec_run {
	int fd;                 /* the client's connection */
	const struct api_config *cfg;
	pid_t pid;
	int sfd;                /* SIGCHLD's signalfd */
	struct exec_io io;
	uint8_t *inbuf;         /* FRAME_MAX: a stdin frame being written */
	size_t in_len, in_off;
	int status, exited, timed_out, client_gone;
	uint64_t deadline;      /* ms, 0: none */
};

/* Where each part sits in one turn's p[] (-1: not this turn). */
struct exec_poll {
	struct pollfd p[5];
	int n, i_conn, i_out, i_err, i_sig, i_in, timeout;
};

/* One turn's poll set and timeout. */
static void exec_poll_build(const struct exec_run *x, struct exec_poll *ep)
{
	ep->n = 0;
	ep->i_conn = ep->i_out = ep->i_err = ep->i_sig = ep->i_in = -1;
	ep->timeout = -1;
	if (!x->client_gone && x->in_len == 0) {
		ep->i_conn = ep->n;
		ep->p[ep->n].fd = x->fd;
		ep->p[ep->n++].events = POLLIN;
	}
	if (x->io.out >= 0) {
		ep->i_out = ep->n;
		ep->p[ep->n].fd = x->io.out;
		ep->p[ep->n++].events = POLLIN;
	}
	if (x->io.err >= 0) {
		ep->i_err = ep->n;
		ep->p[ep->n].fd = x->io.err;
		ep->p[ep->n++].events = POLLIN;
	}
	if (x->in_len && x->io.in >= 0) {
		ep->i_in = ep->n;
		ep->p[ep->n].fd = x->io.in;
		ep->p[ep->n++].events = POLLOUT;
	}
	if (!x->exited) {
		ep->i_sig = ep->n;
		ep->p[ep->n].fd = x->sfd;
		ep->p[ep->n++].events = POLLIN;
	}
	if (x->deadline && !x->exited) {
		uint64_t t = now_ms();

		ep->timeout = t >= x->deadline ? 0 : (int)(x->deadline - t);
	}
	if (x->exited) {
		/* The command is gone; give stragglers holding its pipes a
		 * moment, then stop waiting for them. */
		ep->timeout = 200;
	}
}

/* SIGCHLD: the command reaped if it exited (its stdin pipe closed). */
static void exec_reap(struct exec_run *x)
{
	struct signalfd_siginfo si;

	while (read(x->sfd, &si, sizeof(si)) == sizeof(si)) {
	}
	if (waitpid(x->pid, &x->status, WNOHANG) == x->pid) {
		x->exited = 1;
		registry_del(x->cfg, x->pid);
		if (x->io.in >= 0 && !x->io.pty)
			close(x->io.in);
		if (!x->io.pty)
			x->io.in = -1;
	}
}

/* The command's stdout or stderr (*pfd) to the client as frames of type;
 * at its end, closed. */
static void exec_output(struct exec_run *x, int *pfd, uint8_t type, uint8_t *buf)
{
	ssize_t k = read(*pfd, buf, DATA_CHUNK);

	if (k > 0) {
		if (frame_write(x->fd, type, buf, (size_t)k))
			x->client_gone = 1;
	} else if (k == 0 || errno != EINTR) {
		close(*pfd);
		if (pfd == &x->io.out && x->io.in == x->io.out)
			x->io.in = -1;
		*pfd = -1;
	}
}

/* The stdin frame held, written on as the command takes it. */
static void exec_stdin(struct exec_run *x)
{
	ssize_t k = write(x->io.in, x->inbuf + x->in_off, x->in_len);

	if (k > 0) {
		x->in_off += (size_t)k;
		x->in_len -= (size_t)k;
	} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
		x->in_len = 0; /* the command closed its stdin */
	}
}

/* The command killed: its process group, and itself. */
static void exec_kill(const struct exec_run *x)
{
	kill(-x->pid, SIGKILL);
	kill(x->pid, SIGKILL);
}

/* A frame from the client: stdin, its end, a signal, a terminal size. */
static void exec_client_frame(struct exec_run *x)
{
	uint8_t type;
	size_t len;
	const uint8_t *in = x->inbuf;

	if (frame_read(x->fd, &type, x->inbuf, FRAME_MAX, &len)) {
		/* The client left: nobody reads the output any more. */
		x->client_gone = 1;
		if (!x->exited)
			exec_kill(x);
		return;
	}
	switch (type) {
	case F_STDIN:
		if (x->io.in >= 0) {
			x->in_off = 0;
			x->in_len = len;
		}
		break;
	case F_STDIN_EOF:
		if (x->io.pty && x->io.in >= 0) {
			uint8_t eot = 4; /* ^D: EOF for the line discipline */

			write_full(x->io.in, &eot, 1);
		} else if (x->io.in >= 0) {
			close(x->io.in);
			x->io.in = -1;
		}
		break;
	case F_SIGNAL:
		if (len == 4 && !x->exited) {
			uint32_t sig = (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 |
				       (uint32_t)in[3] << 24;

			if (sig >= 1 && sig <= 64 && kill(-x->pid, (int)sig) < 0)
				kill(x->pid, (int)sig);
		}
		break;
	case F_RESIZE:
		if (len == 4 && x->io.pty && x->io.out >= 0) {
			struct winsize ws = { .ws_row = (unsigned short)(in[0] | in[1] << 8),
					      .ws_col = (unsigned short)(in[2] | in[3] << 8) };

			ioctl(x->io.out, TIOCSWINSZ, &ws);
		}
		break;
	default:
		break; /* unknown frames are ignored (forward compatible) */
	}
}

/* The command's run: its output to the client, the client's input to it,
 * until it exited and its pipes are done (or 200 ms quiet after its
 * exit), the deadline killing it. */
static void exec_loop(struct exec_run *x)
{
	static uint8_t buf[FRAME_MAX];
	struct exec_poll ep;

	while (x->io.out >= 0 || x->io.err >= 0 || !x->exited) {
		struct pollfd *p = ep.p;

		exec_poll_build(x, &ep);
		if (poll(p, (nfds_t)ep.n, ep.timeout) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (x->deadline && !x->exited && now_ms() >= x->deadline && !x->timed_out) {
			x->timed_out = 1;
			exec_kill(x);
		}
		if (ep.i_sig >= 0 && (p[ep.i_sig].revents & POLLIN))
			exec_reap(x);
		if (x->exited && ep.timeout == 200 && ep.n > 0) {
			int any = 0, i;

			for (i = 0; i < ep.n; i++)
				any |= p[i].revents;
			if (!any)
				break; /* 200 ms of silence after the exit */
		}
		if (ep.i_out >= 0 && (p[ep.i_out].revents & (POLLIN | POLLHUP | POLLERR)))
			exec_output(x, &x->io.out, F_STDOUT, buf);
		if (ep.i_err >= 0 && (p[ep.i_err].revents & (POLLIN | POLLHUP | POLLERR)))
			exec_output(x, &x->io.err, F_STDERR, buf);
		if (ep.i_in >= 0 && (p[ep.i_in].revents & (POLLOUT | POLLERR | POLLHUP)))
			exec_stdin(x);
		if (ep.i_conn >= 0 && (p[ep.i_conn].revents & (POLLIN | POLLHUP | POLLERR)))
			exec_client_frame(x);
	}
}

/* After the loop: the command killed and reaped if it still runs, its
 * pipes closed, and F_EXIT with its status to a client still there. */
static void exec_finish(struct exec_run *x)
{
	char meta[256];
	struct json_writer w;

	if (!x->exited) {
		kill(-x->pid, SIGKILL);
		waitpid(x->pid, &x->status, 0);
		registry_del(x->cfg, x->pid);
	}
	if (x->io.out >= 0)
		close(x->io.out);
	if (x->io.err >= 0)
		close(x->io.err);
	if (x->io.in >= 0 && x->io.in != x->io.out)
		close(x->io.in);
	close(x->sfd);
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	if (WIFSIGNALED(x->status)) {
		jw_key(&w, "signal");
		jw_int(&w, WTERMSIG(x->status));
		jw_key(&w, "exit_code");
		jw_int(&w, 128 + WTERMSIG(x->status));
	} else {
		jw_key(&w, "exit_code");
		jw_int(&w, WEXITSTATUS(x->status));
	}
	jw_key(&w, "timed_out");
	jw_bool(&w, x->timed_out);
	jw_obj_end(&w);
	if (!x->client_gone)
		send_json(x->fd, F_EXIT, &w);
}

static void op_exec(int fd, const struct api_request *r, const struct api_config *cfg)
{
	static uint8_t inbuf[FRAME_MAX];
	struct exec_run x = {
		.fd = fd,
		.cfg = cfg,
		.inbuf = inbuf,
		.deadline = r->timeout_ms ? now_ms() + (uint64_t)r->timeout_ms : 0,
	};
	char meta[256];
	struct json_writer w;
	sigset_t chld;
	int e = 0;
	char egress_buf[EGRESS_ENV][96];
	const char *extra[EGRESS_ENV + 1] = { NULL };
	unsigned port;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	x.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (cfg->egress_port && (port = cfg->egress_port()))
		spawn_proxy_env(port, egress_buf, extra);
	x.pid = spawn_command(r, extra, &x.io, &e);
	if (x.pid < 0) {
		char why[4200];

		send_error(fd, e, spawn_error_message(r, &x.io, e, why, sizeof(why)));
		close(x.sfd);
		return;
	}
	registry_add(cfg, x.pid, r);
	jw_init(&w, meta, sizeof(meta));
	jw_obj(&w);
	jw_key(&w, "pid");
	jw_int(&w, x.pid);
	jw_obj_end(&w);
	send_json(fd, F_STARTED, &w);
	exec_loop(&x);
	exec_finish(&x);
}

/* ---- the connection -------------------------------------------------------- */

/* Detached processes live in the process manager (procs.c), which
 * outlives this connection: it takes the request and the connection. */
static void forward(int fd, const char *req, size_t len, const struct api_config *cfg)
{
	int e;

	if (cfg->procs_fd < 0) {
		send_error(fd, ENOTSUP, "this server keeps no detached processes");
		return;
	}
	e = procs_forward(cfg->procs_fd, fd, req, len);
	if (e < 0)
		send_error(fd, -e, "the process manager is not running");
}

void api_serve(int fd, const struct api_config *cfg)
{
	static char req[REQUEST_MAX];
	static char arena_buf[REQUEST_MAX * 2];
	struct json_arena arena = { arena_buf, sizeof(arena_buf), 0 };
	struct api_request r;
	char token[API_TOKEN_MAX] = "";
	const char *err = NULL, *tok = cfg->token;
	uint8_t type;
	size_t len;
	unsigned i;
	int eno = 0, rr;

	signal(SIGPIPE, SIG_IGN);
	rr = frame_read(fd, &type, req, sizeof(req), &len);
	if (rr == -2) {
		send_error(fd, EMSGSIZE, "request larger than 64 KiB");
		return;
	}
	if (rr)
		return;
	if (type != F_REQUEST) {
		send_error(fd, EPROTO, "the first frame must be a REQUEST");
		return;
	}
	if (cfg->token_read) {
		/* The VMM's current token: a restored clone's own, not its
		 * snapshot's. Unreadable: nobody gets in. */
		rr = cfg->token_read(token, sizeof(token));
		if (rr < 0) {
			send_error(fd, EACCES, "the sandbox's access token cannot be read");
			return;
		}
		tok = rr ? token : NULL;
	}
	rr = api_parse(req, len, tok, &arena, &r, &err, &eno);
	explicit_bzero(token, sizeof(token));
	if (rr) {
		send_error(fd, eno, err);
		return;
	}
	switch (r.op) {
	case OP_HEALTH: {
		char buf[256];
		struct json_writer w;

		jw_init(&w, buf, sizeof(buf));
		jw_obj(&w);
		/* A version 1 client reads "api":1 (it checks that). */
		jw_key(&w, "api");
		jw_int(&w, r.version);
		jw_key(&w, "versions");
		jw_arr(&w);
		jw_int(&w, 1);
		jw_int(&w, 2);
		jw_arr_end(&w);
		jw_key(&w, "server");
		jw_str(&w, "vmm guest-init");
		/* What a client must not assume of an older guest-init:
		 * "container", exec's container members (root, uid, gid,
		 * groups, rlimits, no_new_privs) are honoured, not ignored. */
		jw_key(&w, "features");
		jw_arr(&w);
		jw_str(&w, "container");
		/* "pod": exec's "cgroup" and "mntns" (docs/kubernetes.md) */
		jw_str(&w, "pod");
		/* "pidns": exec's "pidns" (a container's PID namespace) */
		jw_str(&w, "pidns");
		jw_arr_end(&w);
		jw_key(&w, "uptime_ms");
		jw_int(&w, (int64_t)(now_ms() - cfg->start_ms));
		jw_key(&w, "worker");
		jw_str(&w, cfg->spare ? "spare" : "forked");
		jw_obj_end(&w);
		send_json(fd, F_RESULT, &w);
		break;
	}
	case OP_EXEC:
		if (r.detach)
			forward(fd, req, len, cfg);
		else
			op_exec(fd, &r, cfg);
		break;
	case OP_PROCESSES:
	case OP_ATTACH:
	case OP_LOGS:
	case OP_SIGNAL:
	case OP_WAIT:
		forward(fd, req, len, cfg);
		break;
	case OP_WATCH: watch_serve(fd, &r); break;
	case OP_READ: files_read(fd, &r); break;
	case OP_WRITE: files_write(fd, &r); break;
	case OP_LIST: files_list(fd, &r); break;
	case OP_STAT: files_stat(fd, &r); break;
	case OP_MKDIR: files_mkdir(fd, &r); break;
	case OP_REMOVE: files_remove(fd, &r); break;
	case OP_RENAME: files_rename(fd, &r); break;
	case OP_READLINK: files_readlink(fd, &r); break;
	case OP_SYMLINK: files_symlink(fd, &r); break;
	case OP_TAR_GET: tar_get(fd, &r); break;
	case OP_TAR_PUT: tar_put(fd, &r); break;
	case OP_PS: op_ps(fd, cfg); break;
	case OP_KILL: op_kill(fd, &r, cfg); break;
	case OP_CONNECT: op_connect(fd, &r); break;
	case OP_SYNC:
		if (!cfg->sync) {
			send_error(fd, ENOTSUP, "this server does not set the clock or the entropy pool");
			break;
		}
		if (cfg->sync(r.time_s, r.time_ns, r.seed, r.seed_len) < 0) {
			send_error(fd, errno, "setting the clock or adding entropy failed");
			break;
		}
		if (r.nr_net && !cfg->net) {
			send_error(fd, ENOTSUP, "this server does not configure network interfaces");
			break;
		}
		for (i = 0; i < r.nr_net; i++) {
			char why[200];

			if (cfg->net(r.net[i], why, sizeof(why)) < 0) {
				send_error(fd, EINVAL, why);
				break;
			}
		}
		if (i < r.nr_net)
			break;
		if (r.egress_port && !cfg->egress) {
			send_error(fd, ENOTSUP, "this server has no egress proxy side");
			break;
		}
		if (r.egress_port && (eno = cfg->egress((unsigned)r.egress_port)) < 0) {
			send_error(fd, -eno, "starting the egress proxy's guest side failed");
			break;
		}
		{
			/* Which worker served a clone's sync: "forked" means the
			 * snapshot held no spare (the restore helper says so). */
			static const char spare[] = "{\"worker\":\"spare\"}", forked[] = "{\"worker\":\"forked\"}";

			if (cfg->spare)
				frame_write(fd, F_RESULT, spare, sizeof(spare) - 1);
			else
				frame_write(fd, F_RESULT, forked, sizeof(forked) - 1);
		}
		break;
	case OP_SHUTDOWN:
		/* Reply first: the power-off stops this process too. */
		if (!cfg->shutdown) {
			send_error(fd, ENOTSUP, "this server cannot power the sandbox off");
			break;
		}
		send_ok(fd);
		cfg->shutdown();
		break;
	}
}
