/* `vmm oci` state: ROOT/ID/{lock,state.json}, and the pure mappings. */
#include "cli/oci/oci_state.h"
#include "cli/util/util.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int oci_id_ok(const char *id)
{
	size_t i, n = strlen(id);

	if (n == 0 || n > OCI_ID_MAX || !strcmp(id, ".") || !strcmp(id, ".."))
		return 0;
	for (i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '+' || c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

const char *oci_status_name(enum oci_status s)
{
	switch (s) {
	case OCI_CREATING:
		return "creating";
	case OCI_CREATED:
		return "created";
	case OCI_RUNNING:
		return "running";
	case OCI_STOPPED:
		break;
	}
	return "stopped";
}

enum oci_status oci_status_now(enum oci_status recorded, int alive)
{
	if (recorded == OCI_STOPPED || !alive)
		return OCI_STOPPED;
	return recorded;
}

int oci_state_render(const struct oci_state *s, enum oci_status status, int with_private, char *buf, size_t len)
{
	struct json_writer w;

	jw_init(&w, buf, len);
	jw_obj(&w);
	jw_key(&w, "ociVersion");
	jw_str(&w, OCI_VERSION);
	jw_key(&w, "id");
	jw_str(&w, s->id);
	jw_key(&w, "pid");
	/* runtime.md: pid is REQUIRED when status is created or running. */
	jw_int(&w, status == OCI_STOPPED && !with_private ? 0 : s->pid);
	jw_key(&w, "status");
	jw_str(&w, oci_status_name(status));
	jw_key(&w, "bundle");
	jw_str(&w, s->bundle);
	jw_key(&w, "rootfs"); /* runc's own member, which Podman reads */
	{
		char r[PATH_MAX + 8];

		snprintf(r, sizeof(r), "%s/rootfs", s->bundle);
		jw_str(&w, r);
	}
	jw_key(&w, "created");
	jw_str(&w, s->created);
	jw_key(&w, "annotations");
	jw_raw(&w, s->annotations[0] ? s->annotations : "{}");
	jw_key(&w, "owner");
	jw_str(&w, "");
	if (status == OCI_STOPPED && s->exit_known && !with_private) {
		jw_key(&w, "exitStatus");
		jw_int(&w, s->exit_status);
	}
	if (with_private) {
		jw_key(&w, "vmm_pid_start");
		jw_int(&w, (int64_t)s->pid_start);
	}
	jw_obj_end(&w);
	return jw_done(&w) ? 0 : -E2BIG;
}

int oci_state_parse(const char *text, size_t len, struct oci_state *s)
{
	static const enum oci_status kinds[] = { OCI_CREATING, OCI_CREATED, OCI_RUNNING, OCI_STOPPED };
	char arena[32768];
	struct json_arena a = { arena, sizeof(arena), 0 };
	const struct json *root, *ann;
	const char *err, *id, *bundle, *status, *created;
	struct json_writer w;
	int64_t pid, start;
	size_t i;

	memset(s, 0, sizeof(*s));
	root = json_parse(text, len, &a, &err);
	if (!root || root->type != JSON_OBJ || json_get_str(root, "id", &id) || !oci_id_ok(id) ||
	    json_get_str(root, "bundle", &bundle) || strlen(bundle) >= sizeof(s->bundle) ||
	    json_get_str(root, "status", &status) || json_get_int(root, "pid", &pid) || pid < 0 ||
	    pid > INT32_MAX || json_get_int(root, "vmm_pid_start", &start) || start < 0 ||
	    json_get_str(root, "created", &created) || strlen(created) >= sizeof(s->created))
		return -EINVAL;
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->bundle, sizeof(s->bundle), "%s", bundle);
	snprintf(s->created, sizeof(s->created), "%s", created);
	s->pid = (pid_t)pid;
	s->pid_start = (unsigned long long)start;
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(status, oci_status_name(kinds[i])))
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0]))
		return -EINVAL;
	s->status = kinds[i];
	/* The annotations are written back as they came: re-render them. */
	if ((ann = json_get(root, "annotations")) && ann->type == JSON_OBJ) {
		const struct json *e;

		jw_init(&w, s->annotations, sizeof(s->annotations));
		jw_obj(&w);
		for (e = ann->u.kids.first; e; e = e->next)
			if (e->type == JSON_STR) {
				jw_key(&w, e->key);
				jw_str(&w, e->u.str.s);
			}
		jw_obj_end(&w);
		if (!jw_done(&w))
			return -EINVAL;
	}
	return 0;
}

int oci_state_dir(const char *root, const char *id, char *buf, size_t len)
{
	int n;

	if (!oci_id_ok(id))
		return -EINVAL;
	n = snprintf(buf, len, "%s/%s", root, id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int oci_root_check(const char *root)
{
	int fd = cli_open_dir(AT_FDCWD, root, root, 022);

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int oci_state_create(const char *root, const char *id)
{
	char dir[PATH_MAX];
	int r;

	if ((r = oci_state_dir(root, id, dir, sizeof(dir))))
		return r;
	if ((r = cli_mkdir_p(root, 0700)))
		return r;
	/* Ours and no one else's to write: a --root under /tmp that another
	 * user made first (or a link by its name) would let them plant the
	 * state (a pid) that kill and delete act on. */
	if ((r = oci_root_check(root)))
		return r;
	if (mkdir(dir, 0700) < 0)
		return -errno;
	return 0;
}

int oci_state_lock(const char *root, const char *id, int exclusive)
{
	char dir[PATH_MAX], p[PATH_MAX + 8];
	int fd, r;

	if ((r = oci_state_dir(root, id, dir, sizeof(dir))))
		return r;
	snprintf(p, sizeof(p), "%s/lock", dir);
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
		if (errno != EINTR) {
			r = -errno;
			close(fd);
			return r;
		}
	/* A delete that held the lock may have removed the folder meanwhile. */
	if (access(dir, F_OK) < 0 || access(p, F_OK) < 0) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

int oci_state_save(const char *root, const struct oci_state *s)
{
	char dir[PATH_MAX], p[PATH_MAX + 16], t[PATH_MAX + 16], buf[16384];
	size_t n, off = 0;
	ssize_t w;
	int fd, r;

	if ((r = oci_state_dir(root, s->id, dir, sizeof(dir))))
		return r;
	if ((r = oci_state_render(s, s->status, 1, buf, sizeof(buf))))
		return r;
	n = strlen(buf);
	snprintf(p, sizeof(p), "%s/state.json", dir);
	snprintf(t, sizeof(t), "%s/state.json.tmp", dir);
	fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	while (off < n && (w = write(fd, buf + off, n - off)) > 0)
		off += (size_t)w;
	r = off == n && fsync(fd) == 0 ? 0 : -EIO;
	close(fd);
	if (!r && rename(t, p) < 0)
		r = -errno;
	if (r)
		unlink(t);
	return r;
}

int oci_state_load(const char *root, const char *id, struct oci_state *s)
{
	char dir[PATH_MAX], p[PATH_MAX + 16], buf[16384];
	int r;

	if ((r = oci_state_dir(root, id, dir, sizeof(dir))))
		return r;
	snprintf(p, sizeof(p), "%s/state.json", dir);
	if ((r = cli_read_text(p, buf, sizeof(buf))))
		return r == -ENOENT ? -ENOENT : -EINVAL;
	return oci_state_parse(buf, strlen(buf), s);
}

int oci_exit_record(const char *root, const char *id, int status)
{
	char dir[PATH_MAX], p[PATH_MAX + 16], tmp[PATH_MAX + 16], buf[16];
	int fd, n, r;

	if ((r = oci_state_dir(root, id, dir, sizeof(dir))))
		return r;
	snprintf(p, sizeof(p), "%s/exit", dir);
	snprintf(tmp, sizeof(tmp), "%s/exit.tmp", dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%d\n", status);
	if (write(fd, buf, (size_t)n) != n) {
		r = -EIO;
		close(fd);
		unlink(tmp);
		return r;
	}
	close(fd);
	return rename(tmp, p) < 0 ? -errno : 0;
}

void oci_exit_load(const char *root, struct oci_state *s)
{
	char dir[PATH_MAX], p[PATH_MAX + 16], buf[32], *end;
	long v;

	s->exit_known = 0;
	if (oci_state_dir(root, s->id, dir, sizeof(dir)))
		return;
	snprintf(p, sizeof(p), "%s/exit", dir);
	if (cli_read_text(p, buf, sizeof(buf)))
		return;
	v = strtol(buf, &end, 10);
	if (end == buf || (*end && *end != '\n') || v < 0 || v > 255)
		return;
	s->exit_known = 1;
	s->exit_status = (int)v;
}

int oci_proxy_alive(const struct oci_state *s)
{
	unsigned long long start;
	char st;

	if (s->pid <= 0 || cli_proc_stat(s->pid, &st, &start))
		return 0;
	return start == s->pid_start && st != 'Z' && st != 'X';
}

int oci_exit_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 255;
}

int oci_signal_parse(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {
		{ "HUP", SIGHUP },   { "INT", SIGINT },	  { "QUIT", SIGQUIT },	   { "ILL", SIGILL },
		{ "TRAP", SIGTRAP }, { "ABRT", SIGABRT }, { "IOT", SIGIOT },	   { "BUS", SIGBUS },
		{ "FPE", SIGFPE },   { "KILL", SIGKILL }, { "USR1", SIGUSR1 },	   { "SEGV", SIGSEGV },
		{ "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },	   { "TERM", SIGTERM },
		{ "STKFLT", SIGSTKFLT }, { "CHLD", SIGCHLD }, { "CONT", SIGCONT }, { "STOP", SIGSTOP },
		{ "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },	   { "URG", SIGURG },
		{ "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF },
		{ "WINCH", SIGWINCH }, { "IO", SIGIO },	  { "POLL", SIGPOLL },	   { "PWR", SIGPWR },
		{ "SYS", SIGSYS },
	};
	const char *n = s;
	char *end;
	long v;
	size_t i;

	if (!s || !*s)
		return -EINVAL;
	if (*s >= '0' && *s <= '9') {
		v = strtol(s, &end, 10);
		return *end || v < 1 || v > 64 ? -EINVAL : (int)v;
	}
	if (!strncasecmp(n, "SIG", 3))
		n += 3;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(n, names[i].name))
			return names[i].sig;
	/* RTMIN+N, RTMAX-N */
	if (!strncasecmp(n, "RTMIN+", 6) || !strncasecmp(n, "RTMAX-", 6)) {
		v = strtol(n + 6, &end, 10);
		if (*end || v < 0 || v > SIGRTMAX - SIGRTMIN)
			return -EINVAL;
		return n[5] == '+' ? SIGRTMIN + (int)v : SIGRTMAX - (int)v;
	}
	return -EINVAL;
}
