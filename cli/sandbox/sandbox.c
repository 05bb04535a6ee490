/* Sandbox state directory: see sandbox.h. */
#include "cli/sandbox/sandbox.h"
#include "vmm/vm_standby.h"
#include "cli/util/util.h"
#include "cli/sandbox/api_client.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"
#include "vmm/api/control.h"
#include "vmm/base/log.h"
#include "devices/virtio_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The state directory's path, made only where create says: a reader
 * (lookup, list: vmm ls, rm, a cleanup's last vmm rm -f) never makes it,
 * so no reader brings back a folder its owner has just removed (vmm-oci's
 * ROOT/ID/vm after a failed create). */
static int root_at(char *buf, size_t len, int create)
{
	const char *env = getenv("VMM_STATE_DIR"), *xdg = getenv("XDG_RUNTIME_DIR");
	int n, r, fd;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/run/vmm");
	else if (xdg && *xdg)
		n = snprintf(buf, len, "%s/vmm", xdg);
	else
		n = snprintf(buf, len, "/tmp/vmm-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (!create) {
		struct stat st;

		if (lstat(buf, &st) < 0)
			return -errno;
	} else if ((r = cli_mkdir_p(buf, 0700))) {
		log_err("cannot create the state directory %s: %s", buf, strerror(-r));
		return r;
	}
	/* Made by us, or there before: in /tmp anyone could have made it (or
	 * a symbolic link by its name) to have us trust what is in it. */
	fd = cli_open_dir(AT_FDCWD, buf, buf, 077);
	if (fd < 0) {
		log_err("the state directory %s is unsafe (see above): nothing done", buf);
		return fd;
	}
	close(fd);
	return 0;
}

int sandbox_root(char *buf, size_t len)
{
	return root_at(buf, len, 1);
}

int sandbox_root_existing(char *buf, size_t len)
{
	return root_at(buf, len, 0);
}

int sandbox_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > SANDBOX_NAME_MAX || name[0] == '.' || name[0] == '-')
		return 0;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

int sandbox_drive_arg(const char *arg, char *name, size_t nlen, char *at, size_t alen, int *ro)
{
	char tmp[256], *parts[3], *save = NULL, *p;
	int n = 0;

	if (snprintf(tmp, sizeof(tmp), "%s", arg) >= (int)sizeof(tmp))
		return -EINVAL;
	for (p = strtok_r(tmp, ":", &save); p && n < 3; p = strtok_r(NULL, ":", &save))
		parts[n++] = p;
	if (!n || p || strlen(parts[0]) >= VIRTIO_FS_TAG_LEN || !sandbox_name_ok(parts[0]) ||
	    snprintf(name, nlen, "%s", parts[0]) >= (int)nlen)
		return -EINVAL;
	*ro = n > 1 && !strcmp(parts[n - 1], "ro");
	if (snprintf(at, alen, "/drives/%s", name) >= (int)alen)
		return -EINVAL;
	if (n - *ro == 2 && snprintf(at, alen, "%s", parts[1]) >= (int)alen)
		return -EINVAL;
	if (n - *ro > 2 || !fs_guest_path_valid(at))
		return -EINVAL;
	return 0;
}

static int paths(struct sandbox *sb, const char *root, const char *name)
{
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	if (snprintf(sb->dir, sizeof(sb->dir), "%s/%s", root, name) >= (int)sizeof(sb->dir) ||
	    snprintf(sb->control, sizeof(sb->control), "%s/control.sock", sb->dir) >=
		    (int)sizeof(sb->control) ||
	    snprintf(sb->vsock, sizeof(sb->vsock), "%s/vsock.sock", sb->dir) >= (int)sizeof(sb->vsock)) {
		log_err("the state directory path %s is too long", root);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Writes dir/name whole: a temporary file renamed over it, so a reader
 * never sees half of it and no link in its place is followed. */
int sandbox_write_file(const char *dir, const char *name, const void *text, size_t n)
{
	char p[PATH_MAX + 16], tmp[PATH_MAX + 32];
	int fd, r = 0;

	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p) ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n)
		r = -EIO;
	close(fd);
	if (!r && rename(tmp, p) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

static int write_file(const char *dir, const char *name, const char *text)
{
	return sandbox_write_file(dir, name, text, strlen(text));
}

/* The record of the sandbox's VMM process, `process`: its pid, start
 * time and the vmm binary's device and inode, so that neither a recycled
 * pid nor any other process is ever taken for it; then the plain `pid`
 * file for people and scripts (never trusted). */
static int write_record(const struct sandbox *sb, pid_t pid, unsigned long long start)
{
	char text[128];
	char state;
	int r;

	if (!start && pid == getpid() && (r = cli_proc_stat(pid, &state, &start)))
		return r;
	snprintf(text, sizeof(text), "%d %llu %llu %llu\n", (int)pid, start, sb->exe_dev, sb->exe_ino);
	if ((r = write_file(sb->dir, "process", text)))
		return r;
	snprintf(text, sizeof(text), "%d\n", (int)pid);
	return write_file(sb->dir, "pid", text);
}

pid_t sandbox_vmm_pid(const char *dir)
{
	char p[PATH_MAX + 16], buf[160], state = 0;
	unsigned long long start, now, dev, ino;
	struct stat exe;
	int pid;

	if (snprintf(p, sizeof(p), "%s/process", dir) >= (int)sizeof(p) ||
	    cli_read_text(p, buf, sizeof(buf)) ||
	    sscanf(buf, "%d %llu %llu %llu", &pid, &start, &dev, &ino) != 4 || pid <= 0)
		return 0;
	/* Alive (a zombie is gone for us), started when the record says, and
	 * running the recorded binary. */
	if (cli_proc_stat(pid, &state, &now) || state == 'Z' || now != start)
		return 0;
	snprintf(p, sizeof(p), "/proc/%d/exe", pid);
	if (stat(p, &exe) < 0 || (unsigned long long)exe.st_dev != dev || (unsigned long long)exe.st_ino != ino)
		return 0;
	return (pid_t)pid;
}

/* The folder is a real directory of the caller's that nobody else can
 * write (a jailed sandbox's is 0711: its uid reaches jail-rw); sb->rw is
 * set. 0 or -errno (logged). */
static int folder_ok(struct sandbox *sb)
{
	char p[PATH_MAX + 16];
	struct stat st;
	int fd = cli_open_dir(AT_FDCWD, sb->dir, sb->dir, 022);

	if (fd < 0)
		return fd;
	close(fd);
	snprintf(sb->rw, sizeof(sb->rw), "%s", sb->dir);
	if (snprintf(p, sizeof(p), "%s/%s", sb->dir, SANDBOX_JAIL_RW) < (int)sizeof(p) &&
	    lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(sb->rw, sizeof(sb->rw), "%s", p);
	return 0;
}

int sandbox_create(struct sandbox *sb, const char *name, int adopt)
{
	char root[PATH_MAX], gen[16];
	struct stat exe;
	int r, tries;

	memset(sb, 0, sizeof(*sb));
	if ((r = sandbox_root(root, sizeof(root))))
		return r;
	if (name && !sandbox_name_ok(name)) {
		log_err("--name %s: use 1-64 letters, digits, '_', '.', '-' (not first)", name);
		return -EINVAL;
	}
	if (stat("/proc/self/exe", &exe) < 0) {
		r = -errno;
		log_err("/proc/self/exe: %s", strerror(errno));
		return r;
	}
	sb->exe_dev = (unsigned long long)exe.st_dev;
	sb->exe_ino = (unsigned long long)exe.st_ino;
	for (tries = 0; tries < 16; tries++) {
		if (!name) {
			uint32_t rnd;

			if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
				return -errno;
			snprintf(gen, sizeof(gen), "sb-%08x", rnd);
		}
		if ((r = paths(sb, root, name ? name : gen)))
			return r;
		snprintf(sb->rw, sizeof(sb->rw), "%s", sb->dir);
		if (mkdir(sb->dir, 0700) == 0) {
			sb->created = 1;
			/* The pid first: from now on a folder without a live pid
			 * is a VMM that died, never one still setting up. */
			return write_record(sb, getpid(), 0);
		}
		if (errno != EEXIST) {
			r = -errno;
			log_err("cannot create %s: %s", sb->dir, strerror(errno));
			return r;
		}
		if (name) {
			char marker[PATH_MAX + 16];
			struct stat st;
			pid_t pid;

			if ((r = folder_ok(sb)))
				return r;
			pid = sandbox_vmm_pid(sb->dir);
			snprintf(marker, sizeof(marker), "%s/created", sb->dir);
			if (adopt == SANDBOX_ADOPT_STANDBY && !pid && standby_valid(sb->dir)) {
				sb->created = 1;
				return write_record(sb, getpid(), 0);
			}
			if (adopt && !pid && lstat(marker, &st) == 0) {
				/* vmm start: the folder vmm create made is ours. */
				unlink(marker);
				sb->created = 1;
				return write_record(sb, getpid(), 0);
			}
			if (pid)
				log_err("a sandbox named %s is running (pid %d)", name, (int)pid);
			else if (lstat(marker, &st) == 0)
				log_err("a sandbox named %s is created, not started: 'vmm start %s'", name, name);
			else
				log_err("a sandbox named %s exists, stopped or its VMM gone (crashed?): "
					"'vmm rm %s' to reuse the name", name, name);
			return -EEXIST;
		}
	}
	return -EEXIST;
}

int sandbox_make_rw(struct sandbox *sb)
{
	char p[PATH_MAX + 16];
	int fd;

	if (snprintf(p, sizeof(p), "%s/%s", sb->dir, SANDBOX_JAIL_RW) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	if (mkdir(p, 0700) < 0 && errno != EEXIST) {
		fd = -errno;
		log_err("cannot create %s: %s", p, strerror(errno));
		return fd;
	}
	fd = cli_open_dir(AT_FDCWD, p, p, 077);
	if (fd < 0)
		return fd;
	close(fd);
	snprintf(sb->rw, sizeof(sb->rw), "%s", p);
	return 0;
}

int sandbox_publish(struct sandbox *sb, const char *token, const struct sandbox_info *info)
{
	char cfg[PATH_MAX + 8192];
	struct json_writer w;
	int r;

	snprintf(sb->token, sizeof(sb->token), "%s", token ? token : "");
	jw_init(&w, cfg, sizeof(cfg));
	jw_obj(&w);
	jw_key(&w, "name");
	jw_str(&w, sb->name);
	jw_key(&w, "kind");
	jw_str(&w, info->kind);
	jw_key(&w, "source");
	jw_str(&w, info->source ? info->source : "");
	jw_key(&w, "cpus");
	jw_int(&w, info->cpus);
	jw_key(&w, "mem_mib");
	jw_int(&w, (int64_t)info->mem_mib);
	jw_key(&w, "created");
	jw_int(&w, info->created ? (int64_t)info->created : (int64_t)time(NULL));
	jw_key(&w, "expires");
	jw_int(&w, info->created ? (int64_t)info->expires
				 : info->ttl_s > 0 ? (int64_t)time(NULL) + info->ttl_s : 0);
	jw_key(&w, "detached");
	jw_bool(&w, info->detached);
	jw_key(&w, "publish");
	jw_str(&w, info->publish ? info->publish : "");
	jw_key(&w, "net");
	jw_str(&w, info->net ? info->net : "");
	jw_key(&w, "image");
	jw_str(&w, info->image ? info->image : "");
	jw_key(&w, "drives");
	jw_str(&w, info->drives ? info->drives : "");
	jw_key(&w, "labels");
	jw_str(&w, info->labels ? info->labels : "");
	jw_obj_end(&w);
	if (!jw_done(&w))
		return -E2BIG;
	if ((r = write_file(sb->dir, "token", sb->token)) || (r = write_file(sb->dir, "config.json", cfg)) ||
	    (r = write_record(sb, sb->pid ? sb->pid : getpid(), sb->start_time)))
		log_err("cannot write to %s: %s", sb->dir, strerror(-r));
	return r;
}

void sandbox_exited(struct sandbox *sb, int status, const char *reason)
{
	char text[512], p[PATH_MAX + 16];

	snprintf(text, sizeof(text), "%d\n%s\n", status, reason ? reason : "");
	(void)write_file(sb->rw[0] ? sb->rw : sb->dir, "exit", text);
	/* A jailed VMM cannot (the folder is root's): its relay does. */
	snprintf(p, sizeof(p), "%s/process", sb->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/pid", sb->dir);
	unlink(p);
	unlink(sb->control);
	unlink(sb->vsock);
	sb->created = 0; /* kept */
}

void sandbox_remove(struct sandbox *sb)
{
	if (!sb->created)
		return;
	(void)cli_rm_tree(sb->dir);
	sb->created = 0;
}

int sandbox_lookup(struct sandbox *sb, const char *arg)
{
	char root[PATH_MAX], p[PATH_MAX + 16];
	struct stat st;
	int r;

	memset(sb, 0, sizeof(*sb));
	if (strchr(arg, '/')) {
		if (strlen(arg) >= sizeof(sb->vsock))
			return -ENAMETOOLONG;
		snprintf(sb->vsock, sizeof(sb->vsock), "%s", arg);
		return 0;
	}
	if (!sandbox_name_ok(arg)) {
		log_err("%s: not a sandbox name or a socket path", arg);
		return -EINVAL;
	}
	if ((r = sandbox_root_existing(root, sizeof(root))) == -ENOENT) {
		log_err("no sandbox named %s (in %s: it does not exist)", arg, root);
		return r;
	}
	if (r || (r = paths(sb, root, arg)))
		return r;
	if (lstat(sb->dir, &st) < 0) {
		log_err("no sandbox named %s (in %s)", arg, root);
		return -ENOENT;
	}
	if ((r = folder_ok(sb)))
		return r;
	snprintf(p, sizeof(p), "%s/token", sb->dir);
	if (cli_read_text(p, sb->token, sizeof(sb->token)))
		sb->token[0] = '\0';
	sb->token[strcspn(sb->token, "\n")] = '\0';
	return 0;
}

int sandbox_control(const char *arg, const char *req, char *out, size_t outlen, int timeout_ms)
{
	struct sandbox sb;
	int r;

	if ((r = sandbox_lookup(&sb, arg)))
		return r;
	if (!sb.control[0]) {
		log_err("%s: name a sandbox (vmm run --name), not a socket", arg);
		return -EINVAL;
	}
	r = control_call(sb.control, req, out, outlen, timeout_ms);
	if (r)
		log_err("sandbox %s does not answer on %s: %s (is its VMM still running?)", arg,
			sb.control, strerror(-r));
	return r;
}

const char *sandbox_state_name(enum sandbox_state s)
{
	static const char *const names[] = {
		[SB_RUNNING] = "running", [SB_PAUSED] = "paused", [SB_STARTING] = "busy",
		[SB_EXITED] = "exited", [SB_DEAD] = "dead", [SB_CREATED] = "created",
		[SB_STANDBY] = "standby",
	};

	return names[s];
}

static int read_small(const char *dir, const char *name, char *buf, size_t len)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return cli_read_text(p, buf, len);
}

int sandbox_status(const char *name, struct sandbox_status *st)
{
	char buf[16384], arena_buf[32768], reply[1024];
	struct json_arena a = { .buf = arena_buf, .size = sizeof(arena_buf) };
	const struct json *j;
	const char *err, *str;
	int64_t v;
	int r;

	memset(st, 0, sizeof(*st));
	if ((r = sandbox_lookup(&st->sb, name)))
		return r;
	if (read_small(st->sb.dir, "config.json", buf, sizeof(buf)) == 0 &&
	    (j = json_parse(buf, strlen(buf), &a, &err))) {
		if (!json_get_str(j, "kind", &str))
			snprintf(st->kind, sizeof(st->kind), "%s", str);
		if (!json_get_str(j, "source", &str))
			snprintf(st->source, sizeof(st->source), "%s", str);
		if (!json_get_int(j, "cpus", &v))
			st->cpus = (unsigned)v;
		if (!json_get_int(j, "mem_mib", &v))
			st->mem_mib = (unsigned long long)v;
		if (!json_get_int(j, "created", &v))
			st->created = v;
		if (!json_get_int(j, "expires", &v))
			st->expires = v;
		(void)json_get_bool(j, "detached", &st->detached);
		if (!json_get_str(j, "publish", &str))
			snprintf(st->publish, sizeof(st->publish), "%s", str);
		if (!json_get_str(j, "net", &str))
			snprintf(st->net, sizeof(st->net), "%s", str);
		if (!json_get_str(j, "image", &str))
			snprintf(st->image, sizeof(st->image), "%s", str);
		if (!json_get_str(j, "drives", &str))
			snprintf(st->drives, sizeof(st->drives), "%s", str);
		if (!json_get_str(j, "labels", &str))
			snprintf(st->labels, sizeof(st->labels), "%s", str);
	}
	if (read_small(st->sb.dir, "created", buf, sizeof(buf)) == 0) {
		st->state = SB_CREATED;
		return 0;
	}
	if (read_small(st->sb.rw, "exit", buf, sizeof(buf)) == 0) {
		char *nl = strchr(buf, '\n');

		st->state = SB_EXITED;
		st->exit_status = atoi(buf);
		if (nl) {
			snprintf(st->exit_reason, sizeof(st->exit_reason), "%s", nl + 1);
			st->exit_reason[strcspn(st->exit_reason, "\n")] = '\0';
		}
		return 0;
	}
	st->pid = (int)sandbox_vmm_pid(st->sb.dir);
	if (!st->pid && standby_valid(st->sb.dir)) {
		/* Suspended in place: no VMM, its state in standby/ (a failed
		 * resume said why in standby.error, kept for inspect). */
		st->state = SB_STANDBY;
		if (read_small(st->sb.dir, STANDBY_ERROR, buf, sizeof(buf)) == 0) {
			snprintf(st->exit_reason, sizeof(st->exit_reason), "%s", buf);
			st->exit_reason[strcspn(st->exit_reason, "\n")] = '\0';
		}
		return 0;
	}
	if (!st->pid) {
		/* Gone without writing its exit file: it crashed or was killed
		 * (or the pid it had is another process's now). */
		st->state = SB_DEAD;
		return 0;
	}
	/* Alive: running, paused, or busy (setting up, writing a snapshot,
	 * or hung): never dead while its process lives. */
	st->state = SB_STARTING;
	if (control_call(st->sb.control, "{\"op\":\"info\"}", reply, sizeof(reply), 2000) == 0) {
		struct json_arena ra = { .buf = arena_buf, .size = sizeof(arena_buf) };
		const struct json *rj = json_parse(reply, strlen(reply), &ra, &err);
		const char *state = NULL;

		if (rj && !json_get_str(rj, "state", &state))
			st->state = !strcmp(state, "paused") ? SB_PAUSED : SB_RUNNING;
	}
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int sandbox_list(char ***names)
{
	char root[PATH_MAX];
	struct dirent *e;
	char **v = NULL;
	int n = 0, r;
	DIR *d;

	*names = NULL;
	if ((r = sandbox_root_existing(root, sizeof(root))))
		return r == -ENOENT ? 0 : r;
	d = opendir(root);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char **nv;

		if (!sandbox_name_ok(e->d_name) || strstr(e->d_name, ".partial-"))
			continue;
		/* A sandbox is a folder: a stray file or symbolic link here is
		 * not listed (and not an error per entry; a verb that names it
		 * still refuses it, cli_open_dir). */
		if (e->d_type != DT_DIR) {
			struct stat st;

			if (e->d_type != DT_UNKNOWN ||
			    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
				continue;
		}
		nv = realloc(v, sizeof(*v) * (size_t)(n + 1));
		if (!nv || !(nv[n] = strdup(e->d_name))) {
			free(nv ? nv : v);
			closedir(d);
			return -ENOMEM;
		}
		v = nv;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, (size_t)n, sizeof(*v), cmp_names);
	*names = v;
	return n;
}

/* Waits for the VMM to end. Its record goes first (sandbox_exited, while
 * the VMM still tears down and may still touch its folder), so with a
 * pidfd of the VMM (vmm_pidfd) this waits for the process itself: a
 * `vmm rm -f` that removed the folder at the record's going raced the
 * VMM's last steps and could leave the folder behind. */
static int wait_gone(const char *dir, int pidfd, unsigned ms)
{
	unsigned waited;

	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int r;

		while ((r = poll(&p, 1, (int)ms)) < 0 && errno == EINTR) {
		}
		return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -errno;
	}
	for (waited = 0; waited < ms; waited += 100) {
		if (!sandbox_vmm_pid(dir))
			return 0;
		usleep(100000);
	}
	return sandbox_vmm_pid(dir) ? -ETIMEDOUT : 0;
}

/* A pidfd of the sandbox's VMM, taken first and then checked against its
 * record, or -1 (no pidfds, or not that VMM); kill_vmm signals through it. */
static int vmm_pidfd(const char *dir, pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0 && sandbox_vmm_pid(dir) != pid) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* SIGKILL to the sandbox's VMM, once proven to be it. With pfd (from
 * vmm_pidfd: taken first, then checked against the record) the signal
 * goes through it, so the pid cannot have passed to another process.
 * Without one (no pidfds, or the VMM had already gone when stop began)
 * the record is checked again right before kill(). */
static int kill_vmm(const struct sandbox *sb, pid_t pid, int pfd)
{
	if (pfd >= 0) {
		if (syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0 || errno == ESRCH)
			return 0;
		return -errno;
	}
	if (sandbox_vmm_pid(sb->dir) != pid) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return 0; /* gone */
		log_err("sandbox %s: pid %d is not its VMM (that process does not match the sandbox's "
			"record): not killing it", sb->name, (int)pid);
		return -EPERM;
	}
	return kill(pid, SIGKILL) < 0 && errno != ESRCH ? -errno : 0;
}

static int stop_vmm(struct sandbox_status *st, pid_t pid, int pfd, unsigned graceful_ms)
{
	char reply[1024], err[600];
	int r;

	if (graceful_ms) {
		struct sandbox_addr a = { .uds = st->sb.vsock, .port = API_VSOCK_PORT, .token = st->sb.token };

		if (st->state == SB_PAUSED &&
		    control_call(st->sb.control, "{\"op\":\"resume\"}", reply, sizeof(reply), 5000))
			log_warn("sandbox %s: cannot resume it to power it off", st->sb.name);
		/* Through the guest: its processes get SIGTERM, filesystems
		 * are synced, it powers off. */
		if ((r = api_shutdown(&a, err, sizeof(err))) == 0 && wait_gone(st->sb.dir, pfd, graceful_ms) == 0)
			return 0;
		/* Only a guest that took the request had the time to power off. */
		if (r == 0)
			log_warn("sandbox %s did not power off within %.1f s: stopping it", st->sb.name,
				 graceful_ms / 1000.0);
		else
			log_warn("sandbox %s: its guest did not take the shutdown request (%s): stopping its VM",
				 st->sb.name, err);
	}
	if (control_call(st->sb.control, "{\"op\":\"stop\"}", reply, sizeof(reply), 5000) == 0 &&
	    wait_gone(st->sb.dir, pfd, 5000) == 0)
		return 0;
	log_warn("sandbox %s's VMM does not answer: killing it (pid %d)", st->sb.name, pid);
	if ((r = kill_vmm(&st->sb, pid, pfd)))
		return r;
	return wait_gone(st->sb.dir, pfd, 5000);
}

int sandbox_stop(struct sandbox_status *st, unsigned graceful_ms)
{
	int pid = st->pid, pfd, r;

	if (st->state == SB_STANDBY) {
		/* Nothing runs: the state is dropped (its keeper sees that and
		 * exits), the record says it stopped. */
		if (standby_consume(st->sb.dir))
			log_warn("sandbox %s: cannot drop its standby state", st->sb.name);
		st->sb.rw[0] = '\0';
		sandbox_exited(&st->sb, 0, "stopped on standby");
		return 0;
	}
	if (st->state == SB_EXITED || st->state == SB_DEAD || st->state == SB_CREATED || pid <= 0)
		return 0;
	pfd = vmm_pidfd(st->sb.dir, pid);
	r = stop_vmm(st, pid, pfd, graceful_ms);
	if (pfd >= 0)
		close(pfd);
	return r;
}

void sandbox_delete(struct sandbox *sb)
{
	sb->created = 1;
	sandbox_remove(sb);
}
