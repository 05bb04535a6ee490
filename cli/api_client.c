#define _GNU_SOURCE
#include "api_client.h"
#include "../vmm/tty.h"
#include "../guest-init/json.h"
#include "../guest-init/proto.h"

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
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, e;

	if (strlen(a->uds) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->uds);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = -errno;
		close(fd);
		return e;
	}
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
	n = asprintf(&req, "{\"v\":%d%s%s%s%s}", API_VERSION, a->token ? ",\"token\":" : "", tok,
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

static void parse_error(const char *text, size_t len, struct api_error *err)
{
	static char arena_buf[8192];
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
		parse_error(buf, len, err);
		return -1;
	}
	return type == F_RESULT ? 0 : -2;
}

int api_wait_ready(const struct sandbox_addr *a, unsigned timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	char buf[512];
	struct api_error err;

	do {
		int fd = api_open(a, "\"op\":\"health\"");

		if (fd >= 0) {
			int r = api_result(fd, buf, sizeof(buf), &err);

			close(fd);
			if (r == 0)
				return 0;
			if (r == -1) {
				fprintf(stderr, "vmm: sandbox API: %s: %s\n", err.name, err.message);
				return -1;
			}
		}
		usleep(100000);
	} while (now_ms() < end);
	return -1;
}

static void report(const char *what, const struct api_error *e)
{
	fprintf(stderr, "vmm: %s: %s (%s)\n", what, e->message[0] ? e->message : strerror(e->eno), e->name);
}

/* ---- exec ----------------------------------------------------------------- */

static int json_exec_fields(const struct exec_opts *o, char *buf, size_t size)
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
	jw_key(&w, "stdin");
	jw_bool(&w, o->stdin_pass);
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

static int exit_from_json(const char *text, size_t len)
{
	static char arena_buf[4096];
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
			fprintf(stderr, "vmm: the command timed out and was killed\n");
		else if (crash_signal(sig))
			/* A crash, not a kill: say so, a caller that sees only
			 * the status (or "file missing") would not know. */
			fprintf(stderr, "vmm: the command crashed in the guest: %s (signal %d, exit status %d)\n",
				crash_signal(sig), (int)sig, (int)(code & 0xff));
	}
	return (int)(code & 0xff);
}

static void send_signal(int fd, uint32_t sig)
{
	uint8_t b[4] = { (uint8_t)sig, (uint8_t)(sig >> 8), (uint8_t)(sig >> 16), (uint8_t)(sig >> 24) };

	frame_write(fd, F_SIGNAL, b, 4);
}

int api_exec(const struct sandbox_addr *a, const struct exec_opts *o)
{
	static uint8_t buf[FRAME_MAX + 1];
	char fields[REQUEST_MAX];
	struct tty tty;
	int fd, r, sfd, status = -EPROTO, in_open = o->stdin_pass, is_tty, interrupts = 0;
	sigset_t sigs, old;

	r = json_exec_fields(o, fields, sizeof(fields));
	if (r) {
		fprintf(stderr, "vmm: command line too long for one request (64 KiB)\n");
		return r;
	}
	fd = api_open(a, fields);
	if (fd < 0) {
		fprintf(stderr, "vmm: cannot reach the sandbox API at %s: %s\n", a->uds, strerror(-fd));
		return fd;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigaddset(&sigs, SIGWINCH);
	/* Forwarded signals must reach our signalfd even if we were started
	 * with them ignored (a background job of a script ignores SIGINT);
	 * blocked first, so none comes in between with its default action. */
	sigprocmask(SIG_BLOCK, &sigs, &old);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	/* A terminal is read (and put in raw mode for -t) only while we are
	 * its foreground: `vmm exec ... &` must not stop on it (vmm/tty.h). */
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
				} else if (si.ssi_signo != SIGWINCH) {
					send_signal(fd, si.ssi_signo);
					/* The second Ctrl-C: the command did not stop, its
					 * sandbox does (vmm run -- CMD). */
					if (si.ssi_signo == SIGINT && ++interrupts == 2 && o->interrupt_pid > 0)
						kill(o->interrupt_pid, SIGINT);
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
			fprintf(stderr, "vmm: the sandbox closed the connection before the command ended\n");
			status = -EPIPE;
			break;
		}
		if (type == F_STDOUT || type == F_STDERR) {
			if (write_full(type == F_STDOUT ? STDOUT_FILENO : STDERR_FILENO, buf, len)) {
				/* our reader went away: stop the command, as a pipe would */
				send_signal(fd, SIGPIPE);
			}
		} else if (type == F_EXIT) {
			status = exit_from_json((const char *)buf, len);
			break;
		} else if (type == F_ERROR) {
			struct api_error e;

			buf[len] = '\0';
			parse_error((const char *)buf, len, &e);
			if (is_tty)
				tty_close(&tty);
			fprintf(stderr, "vmm: %s: %s (%s)\n", o->argv[0], e.message[0] ? e.message : strerror(e.eno), e.name);
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

/* ---- files ------------------------------------------------------------------ */

static int remote_op(const struct sandbox_addr *a, const char *fields, const char *what, char *out,
		     size_t outsize)
{
	char buf[4096];
	struct api_error e;
	int fd = api_open(a, fields), r;

	if (fd < 0) {
		fprintf(stderr, "vmm: cannot reach the sandbox API at %s: %s\n", a->uds, strerror(-fd));
		return fd;
	}
	r = api_result(fd, out ? out : buf, out ? outsize : sizeof(buf), &e);
	close(fd);
	if (r == -1) {
		report(what, &e);
		return -e.eno;
	}
	return r == 0 ? 0 : -EPROTO;
}

static int put_file(const struct sandbox_addr *a, const char *local, const char *remote, mode_t mode)
{
	static uint8_t buf[DATA_CHUNK];
	char fields[PATH_MAX + 128], res[512];
	struct json_writer w;
	struct api_error e;
	int fd, in, r;

	in = open(local, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
		return r;
	}
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "write");
	jw_key(&w, "path");
	jw_str(&w, remote);
	jw_key(&w, "mode");
	jw_int(&w, mode & 07777);
	jw_key(&w, "parents");
	jw_bool(&w, 1);
	fd = api_open(a, jw_done(&w) ? fields : "");
	if (fd < 0) {
		close(in);
		fprintf(stderr, "vmm: cannot reach the sandbox API at %s: %s\n", a->uds, strerror(-fd));
		return fd;
	}
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
			close(in);
			close(fd); /* the guest drops the half-written temporary */
			return r;
		}
		if (n == 0)
			break;
		if (frame_write(fd, F_DATA, buf, (size_t)n))
			break;
	}
	close(in);
	frame_write(fd, F_END, NULL, 0);
	r = api_result(fd, res, sizeof(res), &e);
	close(fd);
	if (r == -1) {
		fprintf(stderr, "vmm: cp: %s: %s (%s)\n", remote, e.message[0] ? e.message : strerror(e.eno), e.name);
		return -e.eno;
	}
	return r == 0 ? 0 : -EPROTO;
}

static int join(char *out, size_t size, const char *dir, const char *name)
{
	int n = snprintf(out, size, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int api_copy_in(const struct sandbox_addr *a, const char *local, const char *remote)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (lstat(local, &st) < 0) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
		return r;
	}
	if (S_ISREG(st.st_mode) || (S_ISLNK(st.st_mode) && stat(local, &st) == 0 && S_ISREG(st.st_mode)))
		return put_file(a, local, remote, st.st_mode);
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "vmm: cp: %s: not a regular file or directory; skipped\n", local);
		return 0;
	}
	{
		char fields[PATH_MAX + 128];
		struct json_writer w;

		jw_init(&w, fields, sizeof(fields));
		jw_key(&w, "op");
		jw_str(&w, "mkdir");
		jw_key(&w, "path");
		jw_str(&w, remote);
		jw_key(&w, "parents");
		jw_bool(&w, 1);
		jw_key(&w, "mode");
		jw_int(&w, st.st_mode & 07777);
		r = remote_op(a, jw_done(&w) ? fields : "", remote, NULL, 0);
		if (r)
			return r;
	}
	d = opendir(local);
	if (!d) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
		return r;
	}
	while ((de = readdir(d)) && !r) {
		char l[PATH_MAX], rm[PATH_MAX];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (join(l, sizeof(l), local, de->d_name) || join(rm, sizeof(rm), remote, de->d_name)) {
			r = -ENAMETOOLONG;
			break;
		}
		r = api_copy_in(a, l, rm);
	}
	closedir(d);
	return r;
}

static int get_file(const struct sandbox_addr *a, const char *remote, const char *local, mode_t mode)
{
	static uint8_t buf[FRAME_MAX + 1];
	char fields[PATH_MAX + 64], tmp[PATH_MAX + 32];
	struct json_writer w;
	struct api_error e;
	int fd, out, r;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "read");
	jw_key(&w, "path");
	jw_str(&w, remote);
	fd = api_open(a, jw_done(&w) ? fields : "");
	if (fd < 0) {
		fprintf(stderr, "vmm: cannot reach the sandbox API at %s: %s\n", a->uds, strerror(-fd));
		return fd;
	}
	r = api_result(fd, (char *)buf, sizeof(buf), &e);
	if (r) {
		close(fd);
		if (r == -1)
			fprintf(stderr, "vmm: cp: %s: %s (%s)\n", remote, e.message[0] ? e.message : strerror(e.eno), e.name);
		return r == -1 ? -e.eno : -EPROTO;
	}
	/* Atomic on the host side too: a temporary beside the target. */
	snprintf(tmp, sizeof(tmp), "%s.vmm-partial", local);
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode & 07777 ? mode & 07777 : 0644);
	if (out < 0) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
		close(fd);
		return r;
	}
	for (;;) {
		uint8_t type;
		size_t len;

		if (frame_read(fd, &type, buf, FRAME_MAX, &len)) {
			r = -EPIPE;
			fprintf(stderr, "vmm: cp: %s: the sandbox closed the connection midway\n", remote);
			break;
		}
		if (type == F_END)
			break;
		if (type == F_ERROR) {
			buf[len] = '\0';
			parse_error((const char *)buf, len, &e);
			fprintf(stderr, "vmm: cp: %s: %s\n", remote, e.message);
			r = -e.eno;
			break;
		}
		if (type == F_DATA && write_full(out, buf, len)) {
			r = -errno;
			fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
			break;
		}
	}
	close(fd);
	if (r == 0 && (fsync(out) < 0 || close(out) < 0 || rename(tmp, local) < 0)) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
		unlink(tmp);
		return r;
	}
	if (r) {
		close(out);
		unlink(tmp);
	}
	return r;
}

int api_copy_out(const struct sandbox_addr *a, const char *remote, const char *local)
{
	static char arena_buf[FRAME_MAX * 3];
	char fields[PATH_MAX + 64], *res;
	struct json_writer w;
	const char *type = NULL, *jerr;
	int64_t mode = 0644;
	const struct json *j, *ents, *ent;
	int r, more = 1, fd;
	struct api_error e;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "stat");
	jw_key(&w, "path");
	jw_str(&w, remote);
	res = malloc(FRAME_MAX + 1);
	if (!res)
		return -ENOMEM;
	r = remote_op(a, jw_done(&w) ? fields : "", remote, res, FRAME_MAX + 1);
	if (r)
		goto out;
	{
		struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };

		j = json_parse(res, strlen(res), &ar, &jerr);
		if (!j || json_get_str(j, "type", &type)) {
			r = -EPROTO;
			goto out;
		}
		json_get_int(j, "mode", &mode);
	}
	if (!strcmp(type, "file")) {
		r = get_file(a, remote, local, (mode_t)mode);
		goto out;
	}
	if (strcmp(type, "dir")) {
		fprintf(stderr, "vmm: cp: %s: a %s, not a file or directory; skipped\n", remote, type);
		r = 0;
		goto out;
	}
	if (mkdir(local, (mode_t)(mode & 07777)) < 0 && errno != EEXIST) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
		goto out;
	}
	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "list");
	jw_key(&w, "path");
	jw_str(&w, remote);
	fd = api_open(a, jw_done(&w) ? fields : "");
	if (fd < 0) {
		r = fd;
		goto out;
	}
	/* Pages of entries; each page is handled before the next is read,
	 * but the connection stays open: collect names first. */
	{
		char **names = NULL;
		size_t n = 0, i;

		while (more && r == 0) {
			struct json_arena ar = { arena_buf, sizeof(arena_buf), 0 };

			r = api_result(fd, res, FRAME_MAX + 1, &e);
			if (r) {
				if (r == -1)
					report(remote, &e);
				r = r == -1 ? -e.eno : -EPROTO;
				break;
			}
			j = json_parse(res, strlen(res), &ar, &jerr);
			ents = json_get(j, "entries");
			if (!j || !ents || ents->type != JSON_ARR) {
				r = -EPROTO;
				break;
			}
			json_get_bool(j, "more", &more);
			for (ent = ents->u.kids.first; ent; ent = ent->next) {
				const char *name;
				char **nn;

				if (json_get_str(ent, "name", &name) || strchr(name, '/') ||
				    !strcmp(name, ".") || !strcmp(name, ".."))
					continue; /* never let a name escape the target */
				nn = realloc(names, (n + 1) * sizeof(*names));
				if (!nn) {
					r = -ENOMEM;
					break;
				}
				names = nn;
				names[n++] = strdup(name);
			}
		}
		close(fd);
		for (i = 0; i < n; i++) {
			char rm[PATH_MAX], l[PATH_MAX];

			if (!r && names[i] && !join(rm, sizeof(rm), remote, names[i]) &&
			    !join(l, sizeof(l), local, names[i]))
				r = api_copy_out(a, rm, l);
			free(names[i]);
		}
		free(names);
	}
out:
	free(res);
	return r;
}

int api_shutdown(const struct sandbox_addr *a)
{
	return remote_op(a, "\"op\":\"shutdown\"", "shutdown", NULL, 0);
}

int api_sync(const struct sandbox_addr *a, const char *const *nets, unsigned nr_nets, unsigned egress_port)
{
	char fields[2048], hex[2 * 32 + 1];
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
	jw_init(&w, fields, sizeof(fields));
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
	return remote_op(a, fields + 1, "sync", NULL, 0);
}
