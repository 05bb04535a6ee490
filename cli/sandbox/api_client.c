/* The sandbox API's host client (cli/sandbox/api_client.h, docs/api.md). */
#include "cli/sandbox/api_client.h"
#include "cli/util/util.h"
#include "vmm/base/tty.h"
#include "vmm/base/unixsock.h"
#include "vmm/vm.h" /* VM_INTERRUPT_SIGNAL */
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static int connect_uds(const struct sandbox_addr *a)
{
	int fd = unix_connect_at(a->uds_dir > 0 ? a->uds_dir : -1, a->uds, 0);

	if (fd < 0)
		return fd;
	if (a->port) {
		struct timeval tv = { .tv_sec = 30 }, none = { 0 };
		char line[64];
		size_t n = 0;

		/* The handshake is bounded; the stream after it is not. */
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		dprintf(fd, "CONNECT %u\n", a->port);
		while (n < sizeof(line) - 1) {
			ssize_t r = read(fd, line + n, 1);

			if (r <= 0)
				break;
			if (line[n] == '\n')
				break;
			n++;
		}
		line[n] = '\0';
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
		if (strncmp(line, "OK ", 3)) {
			close(fd);
			return -ECONNREFUSED; /* the guest API is not listening (yet) */
		}
	}
	return fd;
}

int api_open(const struct sandbox_addr *a, const char *json_fields)
{
	return api_open_v(a, API_VERSION, json_fields);
}

int api_open_v(const struct sandbox_addr *a, int version, const char *json_fields)
{
	char *req;
	int fd = connect_uds(a), n;
	struct json_writer w;
	char tok[600] = "";

	if (fd < 0)
		return fd;
	if (a->token) {
		jw_init(&w, tok, sizeof(tok));
		jw_str(&w, a->token);
		if (!jw_done(&w)) {
			close(fd);
			return -E2BIG;
		}
	}
	n = asprintf(&req, "{\"v\":%d%s%s%s%s}", version, a->token ? ",\"token\":" : "", tok,
		     json_fields && *json_fields ? "," : "", json_fields ? json_fields : "");
	if (n < 0) {
		close(fd);
		return -ENOMEM;
	}
	if (frame_write(fd, F_REQUEST, req, (size_t)n)) {
		n = -errno;
		free(req);
		close(fd);
		return n;
	}
	free(req);
	return fd;
}

void api_parse_error(const char *text, size_t len, struct api_error *err)
{
	char arena_buf[8192]; /* not static: the MCP HTTP server's threads call it */
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const char *jerr, *s;
	const struct json *j = json_parse(text, len, &ar, &jerr);
	int64_t e = EIO;

	memset(err, 0, sizeof(*err));
	err->eno = EIO;
	snprintf(err->name, sizeof(err->name), "EIO");
	if (!j)
		return;
	if (json_get_int(j, "errno", &e) == 0)
		err->eno = (int)e;
	if (json_get_str(j, "error", &s) == 0) {
		snprintf(err->name, sizeof(err->name), "%s", s);
		err->eno = errno_from_name(s);
	}
	if (json_get_str(j, "message", &s) == 0)
		snprintf(err->message, sizeof(err->message), "%s", s);
}

int api_result(int fd, char *buf, size_t size, struct api_error *err)
{
	uint8_t type;
	size_t len;

	if (size == 0 || frame_read(fd, &type, buf, size - 1, &len))
		return -2;
	buf[len] = '\0';
	if (type == F_ERROR) {
		api_parse_error(buf, len, err);
		return -1;
	}
	return type == F_RESULT ? 0 : -2;
}

int api_wait_ready(const struct sandbox_addr *a, unsigned timeout_ms, char *err, size_t errlen)
{
	uint64_t end = now_ms() + timeout_ms;
	char buf[512];
	struct api_error e;

	cli_seterr(err, errlen, 0, "%s", "");
	do {
		int fd = api_open(a, "\"op\":\"health\"");

		if (fd >= 0) {
			int r = api_result(fd, buf, sizeof(buf), &e);

			close(fd);
			if (r == 0)
				return 0;
			if (r == -1)
				return cli_seterr(err, errlen, -1, "sandbox API: %s: %s", e.name, e.message);
		}
		usleep(100000);
	} while (now_ms() < end);
	return -1;
}

int api_error_msg(char *err, size_t errlen, const char *what, const struct api_error *e)
{
	return cli_seterr(err, errlen, -e->eno, "%s: %s (%s)", what, e->message[0] ? e->message : strerror(e->eno),
			  e->name);
}

int api_unreachable(char *err, size_t errlen, const struct sandbox_addr *a, int fd)
{
	return cli_seterr(err, errlen, fd, "cannot reach the sandbox API at %s: %s", a->uds, strerror(-fd));
}

/* ---- exec ----------------------------------------------------------------- */

int api_exec_fields(const struct exec_opts *o, char *buf, size_t size)
{
	struct json_writer w;
	unsigned i;

	jw_init(&w, buf, size);
	jw_key(&w, "op");
	jw_str(&w, "exec");
	jw_key(&w, "argv");
	jw_arr(&w);
	for (i = 0; o->argv[i]; i++)
		jw_str(&w, o->argv[i]);
	jw_arr_end(&w);
	if (o->env) {
		jw_key(&w, "env");
		jw_arr(&w);
		for (i = 0; o->env[i]; i++)
			jw_str(&w, o->env[i]);
		jw_arr_end(&w);
	}
	if (o->cwd) {
		jw_key(&w, "cwd");
		jw_str(&w, o->cwd);
	}
	if (o->user && o->user[0]) {
		jw_key(&w, "user");
		jw_str(&w, o->user);
	}
	jw_key(&w, "stdin");
	jw_bool(&w, o->stdin_pass);
	if (o->detach) {
		jw_key(&w, "detach");
		jw_bool(&w, 1);
		if (o->tag) {
			jw_key(&w, "tag");
			jw_str(&w, o->tag);
		}
		if (o->ring_bytes) {
			jw_key(&w, "ring_bytes");
			jw_int(&w, (int64_t)o->ring_bytes);
		}
	}
	if (o->tty) {
		struct winsize ws = { .ws_row = 24, .ws_col = 80 };

		ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
		jw_key(&w, "pty");
		jw_obj(&w);
		jw_key(&w, "rows");
		jw_int(&w, ws.ws_row ? ws.ws_row : 24);
		jw_key(&w, "cols");
		jw_int(&w, ws.ws_col ? ws.ws_col : 80);
		jw_obj_end(&w);
	}
	if (o->timeout_ms) {
		jw_key(&w, "timeout_ms");
		jw_int(&w, (int64_t)o->timeout_ms);
	}
	return jw_done(&w) ? 0 : -E2BIG;
}

/* The signals a process gets for its own fault (a bad access, a bad
 * instruction, abort()): NULL for the ones somebody sends. */
static const char *crash_signal(int64_t sig)
{
	switch (sig) {
	case SIGSEGV:
		return "SIGSEGV";
	case SIGBUS:
		return "SIGBUS";
	case SIGILL:
		return "SIGILL";
	case SIGFPE:
		return "SIGFPE";
	case SIGABRT:
		return "SIGABRT";
	case SIGTRAP:
		return "SIGTRAP";
	case SIGSYS:
		return "SIGSYS";
	default:
		return NULL;
	}
}

static int exit_from_json(const char *text, size_t len, char *err, size_t errlen)
{
	char arena_buf[4096];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const char *jerr;
	const struct json *j = json_parse(text, len, &ar, &jerr);
	int64_t code = 1, sig = 0;
	int timed_out = 0;

	if (!j)
		return 1;
	json_get_int(j, "exit_code", &code);
	json_get_bool(j, "timed_out", &timed_out);
	if (json_get_int(j, "signal", &sig) == 0) {
		if (timed_out)
			cli_seterr(err, errlen, 0, "the command timed out and was killed");
		else if (crash_signal(sig))
			/* A crash, not a kill: say so, a caller that sees only
			 * the status (or "file missing") would not know. */
			cli_seterr(err, errlen, 0, "the command crashed in the guest: %s (signal %d, exit status %d)",
				   crash_signal(sig), (int)sig, (int)(code & 0xff));
	}
	return (int)(code & 0xff);
}

static void send_signal(int fd, uint32_t sig)
{
	uint8_t b[4] = { (uint8_t)sig, (uint8_t)(sig >> 8), (uint8_t)(sig >> 16), (uint8_t)(sig >> 24) };

	frame_write(fd, F_SIGNAL, b, 4);
}

int api_exec(const struct sandbox_addr *a, const struct exec_opts *o, char *err, size_t errlen)
{
	char fields[REQUEST_MAX];
	int fd, r;

	r = api_exec_fields(o, fields, sizeof(fields));
	if (r)
		return cli_seterr(err, errlen, r, "command line too long for one request (64 KiB)");
	fd = api_open(a, fields);
	if (fd < 0)
		return api_unreachable(err, errlen, a, fd);
	return api_session(fd, o, o->argv[0], err, errlen);
}

static int session(int fd, const struct exec_opts *o, const char *what, uint8_t *buf, char *err, size_t errlen)
{
	struct tty tty;
	int r, sfd, status = -EPROTO, in_open = o->stdin_pass, is_tty, interrupts = 0;
	sigset_t sigs, old;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigaddset(&sigs, SIGWINCH);
	if (o->forward_usr) {
		sigaddset(&sigs, SIGUSR1);
		sigaddset(&sigs, SIGUSR2);
	}
	/* Forwarded signals must reach our signalfd even if we were started
	 * with them ignored (a background job of a script ignores SIGINT);
	 * blocked first, so none comes in between with its default action. */
	sigprocmask(SIG_BLOCK, &sigs, &old);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	if (o->forward_usr) {
		signal(SIGUSR1, SIG_DFL);
		signal(SIGUSR2, SIG_DFL);
	}
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	/* A terminal is read (and put in raw mode for -t) only while we are
	 * its foreground: `vmm exec ... &` must not stop on it (vmm/base/tty.h). */
	is_tty = (o->stdin_pass || o->tty) && tty_open(&tty, STDIN_FILENO, o->tty, 0) >= 0;
	for (;;) {
		int fg = !is_tty || tty_update(&tty);
		struct pollfd p[3] = {
			{ .fd = fd, .events = POLLIN },
			{ .fd = sfd, .events = POLLIN },
			{ .fd = in_open && fg ? STDIN_FILENO : -1, .events = POLLIN },
		};
		uint8_t type;
		size_t len;

		if (poll(p, 3, fg ? -1 : TTY_BACKGROUND_POLL_MS) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGWINCH && o->tty) {
					struct winsize ws;

					if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
						uint8_t b[4] = { (uint8_t)ws.ws_row, (uint8_t)(ws.ws_row >> 8),
								 (uint8_t)ws.ws_col, (uint8_t)(ws.ws_col >> 8) };

						frame_write(fd, F_RESIZE, b, 4);
					}
				} else if (si.ssi_signo != SIGWINCH && o->leave_on_signal) {
					/* attach: leave; the process goes on */
					status = 128 + (int)si.ssi_signo;
					break;
				} else if (si.ssi_signo != SIGWINCH) {
					send_signal(fd, si.ssi_signo);
					/* The second Ctrl-C: the command did not stop, its
					 * sandbox does (vmm run -- CMD). */
					if (si.ssi_signo == SIGINT && ++interrupts == 2 && o->interrupt_pid > 0)
						kill(o->interrupt_pid, VM_INTERRUPT_SIGNAL);
				}
			}
		}
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = read(STDIN_FILENO, buf, DATA_CHUNK);

			if (n > 0) {
				frame_write(fd, F_STDIN, buf, (size_t)n);
			} else if (n < 0 && errno == EIO && is_tty) {
				tty_update(&tty); /* the terminal went to another job */
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				frame_write(fd, F_STDIN_EOF, NULL, 0);
				in_open = 0;
			}
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		r = frame_read(fd, &type, buf, FRAME_MAX, &len);
		if (r) {
			status = cli_seterr(err, errlen, -EPIPE, "the sandbox closed the connection before the command ended");
			break;
		}
		if (type == F_STDOUT || type == F_STDERR) {
			if (write_full(type == F_STDOUT ? STDOUT_FILENO : STDERR_FILENO, buf, len)) {
				/* our reader went away: stop the command, as a pipe would */
				send_signal(fd, SIGPIPE);
			}
		} else if (type == F_EXIT) {
			status = exit_from_json((const char *)buf, len, err, errlen);
			break;
		} else if (type == F_END) {
			status = 0; /* logs without follow: all there is, for now */
			break;
		} else if (type == F_ERROR) {
			struct api_error e;

			buf[len] = '\0';
			api_parse_error((const char *)buf, len, &e);
			if (is_tty)
				tty_close(&tty);
			api_error_msg(err, errlen, what, &e);
			/* Like a shell: 127 not found, 126 not executable. */
			status = e.eno == ENOENT ? 127 : e.eno == EACCES || e.eno == ENOEXEC ? 126 : -e.eno;
			break;
		}
	}
	if (is_tty)
		tty_close(&tty);
	close(sfd);
	close(fd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}

/* The frame buffer (1 MiB) on the heap, not in every VMM's bss, where a
 * host with transparent huge pages "always" backs a touched 2 MiB stretch
 * with a huge page. */
int api_session(int fd, const struct exec_opts *o, const char *what, char *err, size_t errlen)
{
	uint8_t *buf = malloc(FRAME_MAX + 1);
	int r;

	cli_seterr(err, errlen, 0, "%s", "");
	if (!buf) {
		close(fd);
		return cli_seterr(err, errlen, -ENOMEM, "%s: %s", what, strerror(ENOMEM));
	}
	r = session(fd, o, what, buf, err, errlen);
	free(buf);
	return r;
}

static int remote_op(const struct sandbox_addr *a, const char *fields, const char *what, char *out,
		     size_t outsize, char *err, size_t errlen)
{
	char buf[4096];
	struct api_error e;
	int fd = api_open(a, fields), r;

	if (fd < 0)
		return api_unreachable(err, errlen, a, fd);
	r = api_result(fd, out ? out : buf, out ? outsize : sizeof(buf), &e);
	close(fd);
	if (r == -1)
		return api_error_msg(err, errlen, what, &e);
	return r == 0 ? 0 : cli_seterr(err, errlen, -EPROTO, "%s: the sandbox closed the connection", what);
}

int api_shutdown(const struct sandbox_addr *a, char *err, size_t errlen)
{
	return remote_op(a, "\"op\":\"shutdown\"", "shutdown", NULL, 0, err, errlen);
}

/* The sync request's fields into buf (the members of remote_op's object). */
static int sync_fields(char *fields, size_t size, const char *const *nets, unsigned nr_nets,
		       unsigned egress_port)
{
	char hex[2 * 32 + 1];
	struct json_writer w;
	uint8_t seed[32];
	struct timespec now;
	unsigned i;

	if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		return -errno;
	for (i = 0; i < sizeof(seed); i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	clock_gettime(CLOCK_REALTIME, &now);
	/* The fields go into remote_op's object as they are: write them as
	 * the members of one, then drop its braces. */
	jw_init(&w, fields, size);
	jw_obj(&w);
	jw_key(&w, "op");
	jw_str(&w, "sync");
	jw_key(&w, "time_s");
	jw_int(&w, (int64_t)now.tv_sec);
	jw_key(&w, "time_ns");
	jw_int(&w, (int64_t)now.tv_nsec);
	jw_key(&w, "seed");
	jw_str(&w, hex);
	if (nr_nets) {
		jw_key(&w, "net");
		jw_arr(&w);
		for (i = 0; i < nr_nets; i++)
			jw_str(&w, nets[i]);
		jw_arr_end(&w);
	}
	if (egress_port) {
		jw_key(&w, "egress_port");
		jw_int(&w, egress_port);
	}
	jw_obj_end(&w);
	if (!jw_done(&w))
		return -E2BIG;
	fields[strlen(fields) - 1] = '\0';
	memmove(fields, fields + 1, strlen(fields));
	return 0;
}

int api_sync(const struct sandbox_addr *a, const char *const *nets, unsigned nr_nets, unsigned egress_port,
	     char *err, size_t errlen)
{
	char fields[2048];
	int r = sync_fields(fields, sizeof(fields), nets, nr_nets, egress_port);

	if (r)
		return cli_seterr(err, errlen, r, "sync: %s", strerror(-r));
	return remote_op(a, fields, "sync", NULL, 0, err, errlen);
}

int api_sync_first(const struct sandbox_addr *a, const char *const *nets, unsigned nr_nets,
		   unsigned egress_port, int *forked, char *err, size_t errlen)
{
	char fields[2048], buf[512], arena_buf[1024];
	struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *j;
	const char *jerr, *worker;
	struct api_error e;
	int fd, r = sync_fields(fields, sizeof(fields), nets, nr_nets, egress_port);

	*forked = 0;
	if (r)
		return cli_seterr(err, errlen, r, "sync: %s", strerror(-r));
	fd = api_open(a, fields);
	if (fd < 0)
		return API_UNREACHED;
	r = api_result(fd, buf, sizeof(buf), &e);
	close(fd);
	if (r == -1)
		return api_error_msg(err, errlen, "sync", &e);
	if (r)
		return API_UNREACHED;
	/* An older guest-init replies {}: nothing said. */
	j = json_parse(buf, strlen(buf), &ar, &jerr);
	if (j && json_get_str(j, "worker", &worker) == 0 && !strcmp(worker, "forked"))
		*forked = 1;
	return 0;
}
