/* Sandbox state directory: see sandbox.h. */
#define _GNU_SOURCE
#include "sandbox.h"
#include "api_client.h"
#include "../vmm/control.h"
#include "../vmm/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static int mkdir_p(const char *path)
{
	char tmp[PATH_MAX];
	char *p;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int sandbox_root(char *buf, size_t len)
{
	const char *env = getenv("VMM_STATE_DIR"), *xdg = getenv("XDG_RUNTIME_DIR");
	int n, r;

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
	r = mkdir_p(buf);
	if (r)
		log_err("cannot create the state directory %s: %s", buf, strerror(-r));
	return r;
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

static int paths(struct sandbox *sb, const char *root, const char *name)
{
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	if (snprintf(sb->dir, sizeof(sb->dir), "%s/%s", root, name) >= (int)sizeof(sb->dir) ||
	    snprintf(sb->control, sizeof(sb->control), "%s/control.sock", sb->dir) >=
		    (int)sizeof(sb->control) ||
	    snprintf(sb->vsock, sizeof(sb->vsock), "%s/vsock.sock", sb->dir) >= (int)sizeof(sb->vsock)) {
		log_err("the state directory path %s is too long for Unix sockets", root);
		return -ENAMETOOLONG;
	}
	return 0;
}

static pid_t read_pid(const char *dir)
{
	char p[PATH_MAX + 16], buf[32] = "";
	FILE *f;

	snprintf(p, sizeof(p), "%s/pid", dir);
	f = fopen(p, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return (pid_t)strtol(buf, NULL, 10);
}

int sandbox_create(struct sandbox *sb, const char *name)
{
	char root[PATH_MAX], gen[16];
	int r, tries;

	memset(sb, 0, sizeof(*sb));
	if ((r = sandbox_root(root, sizeof(root))))
		return r;
	if (name && !sandbox_name_ok(name)) {
		log_err("--name %s: use 1-64 letters, digits, '_', '.', '-' (not first)", name);
		return -EINVAL;
	}
	for (tries = 0; tries < 16; tries++) {
		if (!name) {
			uint32_t rnd;

			if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
				return -errno;
			snprintf(gen, sizeof(gen), "sb-%08x", rnd);
		}
		if ((r = paths(sb, root, name ? name : gen)))
			return r;
		if (mkdir(sb->dir, 0700) == 0) {
			sb->created = 1;
			return 0;
		}
		if (errno != EEXIST) {
			r = -errno;
			log_err("cannot create %s: %s", sb->dir, strerror(errno));
			return r;
		}
		if (name) {
			pid_t pid = read_pid(sb->dir);

			if (pid > 0 && (kill(pid, 0) == 0 || errno == EPERM))
				log_err("a sandbox named %s is running (pid %d)", name, (int)pid);
			else
				log_err("a sandbox named %s exists but its VMM is gone (crashed?): "
					"remove %s to reuse the name", name, sb->dir);
			return -EEXIST;
		}
	}
	return -EEXIST;
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX + 16];
	int fd, r = 0;
	size_t n = strlen(text);

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n)
		r = -EIO;
	close(fd);
	return r;
}

int sandbox_publish(struct sandbox *sb, const char *token)
{
	char pid[32];
	int r;

	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	snprintf(sb->token, sizeof(sb->token), "%s", token ? token : "");
	if ((r = write_file(sb->dir, "token", sb->token)) || (r = write_file(sb->dir, "pid", pid)))
		log_err("cannot write to %s: %s", sb->dir, strerror(-r));
	return r;
}

void sandbox_remove(struct sandbox *sb)
{
	DIR *d;
	struct dirent *e;
	char p[PATH_MAX];

	if (!sb->created)
		return;
	d = opendir(sb->dir);
	if (d) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (snprintf(p, sizeof(p), "%s/%s", sb->dir, e->d_name) < (int)sizeof(p))
				unlink(p);
		}
		closedir(d);
	}
	rmdir(sb->dir);
	sb->created = 0;
}

int sandbox_lookup(struct sandbox *sb, const char *arg)
{
	char root[PATH_MAX], p[PATH_MAX + 16];
	struct stat st;
	FILE *f;
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
	if ((r = sandbox_root(root, sizeof(root))) || (r = paths(sb, root, arg)))
		return r;
	if (stat(sb->dir, &st) < 0) {
		log_err("no sandbox named %s (in %s)", arg, root);
		return -ENOENT;
	}
	snprintf(p, sizeof(p), "%s/token", sb->dir);
	f = fopen(p, "re");
	if (f) {
		if (!fgets(sb->token, sizeof(sb->token), f))
			sb->token[0] = '\0';
		sb->token[strcspn(sb->token, "\n")] = '\0';
		fclose(f);
	}
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

int sandbox_api_addr(const char *arg, int token_given, struct sandbox *sb, struct sandbox_addr *a)
{
	int r = sandbox_lookup(sb, arg);

	if (r)
		return r;
	a->uds = sb->vsock;
	/* A named sandbox's own token, unless --token said otherwise. */
	if (sb->control[0] && !token_given)
		a->token = sb->token;
	return 0;
}
