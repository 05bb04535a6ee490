#define _GNU_SOURCE
#include "api_client.h"
#include "../vmm/tty.h"
#include "../vmm/vm.h" /* VM_INTERRUPT_SIGNAL */
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
	char fields[REQUEST_MAX];
	int fd, r;

	r = api_exec_fields(o, fields, sizeof(fields));
	if (r) {
		fprintf(stderr, "vmm: command line too long for one request (64 KiB)\n");
		return r;
	}
	fd = api_open(a, fields);
	if (fd < 0) {
		fprintf(stderr, "vmm: cannot reach the sandbox API at %s: %s\n", a->uds, strerror(-fd));
		return fd;
	}
	return api_session(fd, o, o->argv[0]);
}

int api_session(int fd, const struct exec_opts *o, const char *what)
{
	static uint8_t buf[FRAME_MAX + 1];
	struct tty tty;
	int r, sfd, status = -EPROTO, in_open = o->stdin_pass, is_tty, interrupts = 0;
	sigset_t sigs, old;

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
		} else if (type == F_END) {
			status = 0; /* logs without follow: all there is, for now */
			break;
		} else if (type == F_ERROR) {
			struct api_error e;

			buf[len] = '\0';
			parse_error((const char *)buf, len, &e);
			if (is_tty)
				tty_close(&tty);
			fprintf(stderr, "vmm: %s: %s (%s)\n", what, e.message[0] ? e.message : strerror(e.eno), e.name);
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

/* ---- copying out of the sandbox ------------------------------------------- */

/* The guest chooses every name, type and mode below: names are checked
 * (one path component, not "." or ".."), a mode keeps its permission
 * bits only and passes the umask, and the host side is written with
 * openat/mkdirat relative to directory descriptors opened O_NOFOLLOW, so
 * nothing is written outside the destination or through a symlink in it.
 * The walk is iterative (a stack on the heap): a guest tree of any depth
 * is at most an ENAMETOOLONG when its path outgrows PATH_MAX. */

#define COPY_MAX_ENTRIES (1u << 20) /* names in one directory */

struct copy_ent {
	char *name;
	char type[8]; /* "file", "dir", or another type (skipped) */
	mode_t mode;
};

struct copy_dir {
	char *remote;
	int fd;         /* the host directory; -1 while a subdirectory is open */
	dev_t dev;      /* its identity, to check ".." on the way back up */
	ino_t ino;
	mode_t mode;    /* given to it when done, if this copy created it */
	int created;
	struct copy_ent *ents;
	size_t n, next;
};

static int guest_name_ok(const struct json *nm)
{
	return nm && nm->type == JSON_STR && nm->u.str.len && nm->u.str.len <= NAME_MAX &&
	       strlen(nm->u.str.s) == nm->u.str.len && !strchr(nm->u.str.s, '/') && strcmp(nm->u.str.s, ".") &&
	       strcmp(nm->u.str.s, "..");
}

static int ent_cmp(const void *x, const void *y)
{
	return strcmp(((const struct copy_ent *)x)->name, ((const struct copy_ent *)y)->name);
}

static void free_ents(struct copy_ent *e, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(e[i].name);
	free(e);
}

/* The guest's listing of remote, checked: names one component each, no
 * name twice. Sorted by name. */
static int list_remote(const struct sandbox_addr *a, const char *remote, char *res, char *arena, size_t arena_size,
		       struct copy_ent **out, size_t *nout)
{
	char fields[PATH_MAX + 64];
	struct json_writer w;
	struct copy_ent *ents = NULL;
	size_t n = 0, i;
	int fd, r = 0, more = 1;
	struct api_error e;

	jw_init(&w, fields, sizeof(fields));
	jw_key(&w, "op");
	jw_str(&w, "list");
	jw_key(&w, "path");
	jw_str(&w, remote);
	fd = api_open(a, jw_done(&w) ? fields : "");
	if (fd < 0) {
		fprintf(stderr, "vmm: cannot reach the sandbox API at %s: %s\n", a->uds, strerror(-fd));
		return fd;
	}
	while (more && r == 0) {
		struct json_arena ar = { arena, arena_size, 0 };
		const struct json *j, *ents_j, *ent, *nm;
		const char *jerr, *type;

		r = api_result(fd, res, FRAME_MAX + 1, &e);
		if (r) {
			if (r == -1)
				report(remote, &e);
			r = r == -1 ? -e.eno : -EPROTO;
			break;
		}
		j = json_parse(res, strlen(res), &ar, &jerr);
		ents_j = j ? json_get(j, "entries") : NULL;
		if (!ents_j || ents_j->type != JSON_ARR || json_get_bool(j, "more", &more)) {
			fprintf(stderr, "vmm: cp: %s: the sandbox sent a malformed listing\n", remote);
			r = -EPROTO;
			break;
		}
		for (ent = ents_j->u.kids.first; ent && !r; ent = ent->next) {
			struct copy_ent *nn;
			int64_t mode = 0;

			nm = ent->type == JSON_OBJ ? json_get(ent, "name") : NULL;
			if (!guest_name_ok(nm) || json_get_str(ent, "type", &type)) {
				fprintf(stderr, "vmm: cp: %s: the sandbox listed an invalid name (empty, \".\", \"..\", "
						"or with '/'); nothing is copied under such a name\n", remote);
				r = -EPROTO;
				break;
			}
			if (n == COPY_MAX_ENTRIES) {
				fprintf(stderr, "vmm: cp: %s: more than %u entries\n", remote, COPY_MAX_ENTRIES);
				r = -E2BIG;
				break;
			}
			json_get_int(ent, "mode", &mode);
			nn = realloc(ents, (n + 1) * sizeof(*ents));
			if (!nn) {
				r = -ENOMEM;
				break;
			}
			ents = nn;
			ents[n].name = strdup(nm->u.str.s);
			if (!ents[n].name) {
				r = -ENOMEM;
				break;
			}
			snprintf(ents[n].type, sizeof(ents[n].type), "%s", type);
			ents[n].mode = (mode_t)(mode & 0777);
			n++;
		}
	}
	close(fd);
	if (!r && n) {
		qsort(ents, n, sizeof(*ents), ent_cmp);
		for (i = 1; i < n && !r; i++) {
			if (!strcmp(ents[i - 1].name, ents[i].name)) {
				fprintf(stderr, "vmm: cp: %s: the sandbox listed %s twice\n", remote, ents[i].name);
				r = -EPROTO;
			}
		}
	}
	if (r) {
		free_ents(ents, n);
		return r;
	}
	*out = ents;
	*nout = n;
	return 0;
}

/* remote's content into dfd/name, through a temporary beside it renamed
 * over it (atomic on the host too; a symlink at name is replaced, never
 * followed). mode: permission bits only, and the umask applies. */
static int get_file(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, mode_t mode)
{
	static uint8_t buf[FRAME_MAX + 1];
	char fields[PATH_MAX + 64], tmp[64];
	struct json_writer w;
	struct api_error e;
	int fd, out = -1, r;

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
	snprintf(tmp, sizeof(tmp), ".vmm-partial.%ld", (long)getpid());
	mode &= 0777;
	for (int tries = 0; out < 0 && tries < 2; tries++) {
		out = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode ? mode : 0644);
		if (out < 0 && (errno != EEXIST || unlinkat(dfd, tmp, 0) < 0))
			break; /* a leftover of an earlier cp with this pid is removed once */
	}
	if (out < 0) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", name, strerror(errno));
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
			fprintf(stderr, "vmm: cp: %s: %s\n", name, strerror(errno));
			break;
		}
	}
	close(fd);
	if (r == 0 && (fsync(out) < 0 || close(out) < 0 || renameat(dfd, tmp, dfd, name) < 0)) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", name, strerror(errno));
		unlinkat(dfd, tmp, 0);
		return r;
	}
	if (r) {
		close(out);
		unlinkat(dfd, tmp, 0);
	}
	return r;
}

static char *join_remote(const char *dir, const char *name)
{
	char *p;

	if (strlen(dir) + strlen(name) + 2 > PATH_MAX) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if (asprintf(&p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name) < 0) {
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

/* Opens (creating it 0700 if missing) the directory name in dfd, never
 * through a symlink unless follow (the destination the user named); d->fd,
 * identity and created set. */
static int enter_dir(int dfd, const char *name, int follow, struct copy_dir *d)
{
	struct stat st;

	d->created = mkdirat(dfd, name, 0700) == 0;
	if (!d->created && errno != EEXIST)
		return -errno;
	d->fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | (follow ? 0 : O_NOFOLLOW) | O_CLOEXEC);
	if (d->fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno; /* a symlink there is not followed */
	if (fstat(d->fd, &st) < 0)
		return -errno;
	d->dev = st.st_dev;
	d->ino = st.st_ino;
	return 0;
}

static void free_stack(struct copy_dir *stack, size_t depth)
{
	while (depth--) {
		if (stack[depth].fd >= 0)
			close(stack[depth].fd);
		free(stack[depth].remote);
		free_ents(stack[depth].ents, stack[depth].n);
	}
	free(stack);
}

/* Copies the directory remote into the host directory in dfd/name. */
static int copy_tree_out(const struct sandbox_addr *a, const char *remote, int dfd, const char *name, mode_t mode,
			 mode_t umask_bits, char *res)
{
	static char arena[FRAME_MAX * 3];
	struct copy_dir *stack = NULL, *top;
	size_t depth = 0, cap = 0;
	int r = 0;

	stack = calloc(1, sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	cap = depth = 1;
	stack[0].fd = -1;
	stack[0].mode = mode;
	stack[0].remote = strdup(remote);
	r = stack[0].remote ? enter_dir(dfd, name, 1, &stack[0]) : -ENOMEM;
	if (r)
		fprintf(stderr, "vmm: cp: %s: %s\n", name, strerror(-r));
	else
		r = list_remote(a, remote, res, arena, sizeof(arena), &stack[0].ents, &stack[0].n);
	while (r == 0) {
		struct copy_ent *e;
		char *rm;

		top = &stack[depth - 1];
		if (top->next == top->n) {
			/* done with it: its mode (permission bits, umask), then back up */
			if (top->created && fchmod(top->fd, top->mode & 0777 & ~umask_bits) < 0) {
				r = -errno;
				break;
			}
			if (depth == 1)
				break;
			{
				struct copy_dir *up = &stack[depth - 2];
				struct stat st;
				int pfd = openat(top->fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

				if (pfd < 0 || fstat(pfd, &st) < 0 || st.st_dev != up->dev || st.st_ino != up->ino) {
					fprintf(stderr, "vmm: cp: %s: the destination moved during the copy\n", top->remote);
					if (pfd >= 0)
						close(pfd);
					r = -ESTALE;
					break;
				}
				up->fd = pfd;
			}
			close(top->fd);
			free(top->remote);
			free_ents(top->ents, top->n);
			depth--;
			continue;
		}
		e = &top->ents[top->next++];
		rm = join_remote(top->remote, e->name);
		if (!rm) {
			r = -errno;
			fprintf(stderr, "vmm: cp: %s/%s: %s\n", top->remote, e->name, strerror(errno));
			break;
		}
		if (!strcmp(e->type, "file")) {
			r = get_file(a, rm, top->fd, e->name, e->mode);
			free(rm);
			continue;
		}
		if (strcmp(e->type, "dir")) {
			fprintf(stderr, "vmm: cp: %s: a %s, not a file or directory; skipped\n", rm, e->type);
			free(rm);
			continue;
		}
		if (depth == cap) {
			struct copy_dir *ns = realloc(stack, 2 * cap * sizeof(*stack));

			if (!ns) {
				free(rm);
				r = -ENOMEM;
				break;
			}
			stack = ns;
			cap *= 2;
			top = &stack[depth - 1];
		}
		memset(&stack[depth], 0, sizeof(stack[depth]));
		stack[depth].fd = -1;
		stack[depth].remote = rm;
		stack[depth].mode = e->mode;
		r = enter_dir(top->fd, e->name, 0, &stack[depth]);
		depth++;
		if (r) {
			fprintf(stderr, "vmm: cp: %s: %s\n", rm, strerror(-r));
			break;
		}
		r = list_remote(a, rm, res, arena, sizeof(arena), &stack[depth - 1].ents, &stack[depth - 1].n);
		if (r)
			break;
		/* one descriptor open at a time: the parent is found again through ".." */
		close(top->fd);
		top->fd = -1;
	}
	free_stack(stack, depth);
	return r;
}

int api_copy_out(const struct sandbox_addr *a, const char *remote, const char *local)
{
	static char arena_buf[8192];
	char fields[PATH_MAX + 64], *res, *dir = NULL, *base;
	struct json_writer w;
	const char *type = NULL, *jerr;
	int64_t mode = 0644;
	const struct json *j;
	mode_t um = umask(0);
	int r, dfd = -1;

	umask(um);
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
	if (strcmp(type, "file") && strcmp(type, "dir")) {
		fprintf(stderr, "vmm: cp: %s: a %s, not a file or directory; skipped\n", remote, type);
		r = 0;
		goto out;
	}
	/* The destination as the user wrote it: its parent directory and its
	 * last component, which is written relative to that. */
	dir = strdup(local);
	if (!dir) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
		dir[n - 1] = '\0';
	base = strrchr(dir, '/');
	if (base) {
		*base++ = '\0';
		dfd = open(base == dir + 1 ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		base = dir;
		dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (dfd < 0) {
		r = -errno;
		fprintf(stderr, "vmm: cp: %s: %s\n", local, strerror(errno));
		goto out;
	}
	if (!*base)
		base = "."; /* "/" */
	if (!strcmp(type, "file"))
		r = get_file(a, remote, dfd, base, (mode_t)(mode & 0777));
	else
		r = copy_tree_out(a, remote, dfd, base, (mode_t)(mode & 0777), um, res);
out:
	if (dfd >= 0)
		close(dfd);
	free(dir);
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
