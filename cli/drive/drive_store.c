/* The drive store (drive.h): names, records, the allow list's decision,
 * the usage count and walk, and what `vmm run --drive` mounts. */
#include "cli/drive/drive.h"
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int drive_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > DRIVE_NAME_MAX || name[0] == '.' || name[0] == '-')
		return 0;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int drive_root(char *buf, size_t len)
{
	const char *env = getenv("VMM_DRIVE_DIR"), *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/var/lib/vmm/drives");
	else if (xdg && *xdg)
		n = snprintf(buf, len, "%s/vmm/drives", xdg);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.local/state/vmm/drives", home);
	else
		n = snprintf(buf, len, "/tmp/vmm-drives-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return cli_mkdir_p(buf, 0700);
}

int drive_rule_parse(const char *s, struct drive_rule *r)
{
	const char *colon = strrchr(s, ':');
	size_t n;

	memset(r, 0, sizeof(*r));
	/* "label:KEY=VALUE" holds a colon of its own: the mode is the last one */
	if (colon && strcmp(colon, ":ro") && strcmp(colon, ":rw"))
		colon = NULL;
	n = colon ? (size_t)(colon - s) : strlen(s);
	if (n == 0 || n >= sizeof(r->who))
		return -EINVAL;
	memcpy(r->who, s, n);
	if (!strncmp(r->who, DRIVE_RULE_LABEL, strlen(DRIVE_RULE_LABEL))) {
		if (!sandbox_label_ok(r->who + strlen(DRIVE_RULE_LABEL)))
			return -EINVAL;
	} else if (strcmp(r->who, "*") && !sandbox_name_ok(r->who)) {
		return -EINVAL;
	}
	r->ro = colon && !strcmp(colon, ":ro");
	return 0;
}

/* The rule that decides for who/labels (drive.h): NULL if none does. */
static const struct drive_rule *deciding_rule(const struct drive *d, const char *who, const char *labels)
{
	const struct drive_rule *any = NULL, *mine = NULL, *label = NULL, *r;
	size_t lp = strlen(DRIVE_RULE_LABEL);
	unsigned i;

	for (i = 0; i < d->nr_allow; i++) {
		r = &d->allow[i];
		if (!strcmp(r->who, "*"))
			any = r;
		else if (!strncmp(r->who, DRIVE_RULE_LABEL, lp)) {
			if (sandbox_has_label(labels, r->who + lp) && (!label || (r->ro && !label->ro)))
				label = r;
		} else if (who && !strcmp(r->who, who))
			mine = r;
	}
	return mine ? mine : label ? label : any;
}

int drive_allowed(const struct drive *d, const char *who, const char *labels, int ro, char *why, size_t len)
{
	const struct drive_rule *rule = deciding_rule(d, who, labels);

	if (!rule) {
		snprintf(why, len, "drive %s does not allow sandbox %s (%s; vmm drive allow %s %s)", d->name,
			 who ? who : "without a --name", d->nr_allow ? "not on its allow list" : "its allow list is empty",
			 d->name, who ? who : "NAME");
		return -EACCES;
	}
	if (rule->ro && !ro) {
		snprintf(why, len, "drive %s allows sandbox %s read-only (rule %s:ro): mount it with :ro", d->name,
			 who ? who : "*", rule->who);
		return -EACCES;
	}
	return 0;
}

int drive_allow(struct drive *d, const struct drive_rule *r)
{
	unsigned i;

	for (i = 0; i < d->nr_allow; i++)
		if (!strcmp(d->allow[i].who, r->who)) {
			d->allow[i].ro = r->ro;
			return 0;
		}
	if (d->nr_allow == DRIVE_ALLOW_MAX)
		return -ENOSPC;
	d->allow[d->nr_allow++] = *r;
	return 0;
}

int drive_deny(struct drive *d, const char *who)
{
	unsigned i;

	for (i = 0; i < d->nr_allow; i++)
		if (!strcmp(d->allow[i].who, who)) {
			memmove(&d->allow[i], &d->allow[i + 1], (d->nr_allow - i - 1) * sizeof(d->allow[0]));
			d->nr_allow--;
			return 0;
		}
	return -ENOENT;
}

static int drive_dir(const char *name, char *buf, size_t len)
{
	char root[PATH_MAX];
	int r;

	if (!drive_name_ok(name))
		return -EINVAL;
	if ((r = drive_root(root, sizeof(root))))
		return r;
	return snprintf(buf, len, "%s/%s", root, name) >= (int)len ? -ENAMETOOLONG : 0;
}

static int record_text(const struct drive *d, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "path=%s\nown=%d\nsize=%llu\n", d->path, d->own,
				    (unsigned long long)d->size);
	unsigned i;

	for (i = 0; i < d->nr_allow && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "allow=%s%s\n", d->allow[i].who, d->allow[i].ro ? ":ro" : "");
	return n < len ? 0 : -E2BIG;
}

int drive_save(const struct drive *d)
{
	char text[PATH_MAX + DRIVE_ALLOW_MAX * 160], lock[PATH_MAX + 8];
	int fd, r;

	if ((r = record_text(d, text, sizeof(text))))
		return r;
	snprintf(lock, sizeof(lock), "%s/lock", d->dir);
	if ((fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return -errno;
	flock(fd, LOCK_EX);
	r = sandbox_write_file(d->dir, "drive", text, strlen(text));
	close(fd);
	return r;
}

int drive_load(const char *name, struct drive *d)
{
	char text[PATH_MAX + DRIVE_ALLOW_MAX * 160], p[PATH_MAX + 8], *line, *save = NULL;
	int r;

	memset(d, 0, sizeof(*d));
	if ((r = drive_dir(name, d->dir, sizeof(d->dir))))
		return r;
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(p, sizeof(p), "%s/drive", d->dir);
	if ((r = cli_read_text(p, text, sizeof(text))))
		return r;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "path=", 5))
			snprintf(d->path, sizeof(d->path), "%s", line + 5);
		else if (!strncmp(line, "own=", 4))
			d->own = atoi(line + 4);
		else if (!strncmp(line, "size=", 5))
			d->size = strtoull(line + 5, NULL, 10);
		else if (!strncmp(line, "allow=", 6) && d->nr_allow < DRIVE_ALLOW_MAX &&
			 !drive_rule_parse(line + 6, &d->allow[d->nr_allow]))
			d->nr_allow++;
	}
	return d->path[0] ? 0 : -EINVAL;
}

int drive_create(struct drive *d, char *why, size_t len)
{
	char p[PATH_MAX + 8];
	int64_t zero = 0;
	int r;

	if ((r = drive_dir(d->name, d->dir, sizeof(d->dir)))) {
		snprintf(why, len, "drive name %s: 1 to 35 of A-Z a-z 0-9 . _ - (not starting with . or -)", d->name);
		return r;
	}
	/* mkdir is the one atomic step: of two creates of a name, one wins. */
	if (mkdir(d->dir, 0700) < 0) {
		r = -errno;
		snprintf(why, len, r == -EEXIST ? "drive %s exists" : "cannot make %s: %s", r == -EEXIST ? d->name : d->dir,
			 strerror(-r));
		return r;
	}
	if (!d->path[0]) {
		snprintf(d->path, sizeof(d->path), "%s/data", d->dir);
		d->own = 1;
		if (mkdir(d->path, 0700) < 0)
			r = -errno;
	}
	if (!r)
		r = sandbox_write_file(d->dir, "usage", &zero, sizeof(zero));
	snprintf(p, sizeof(p), "%s/lock", d->dir);
	if (!r && (r = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0)
		r = close(r);
	if (!r)
		r = drive_save(d);
	if (r) {
		snprintf(why, len, "cannot create drive %s: %s", d->name, strerror(-r));
		cli_rm_tree(d->dir);
	}
	return r;
}

int drive_remove(const struct drive *d)
{
	/* A user-given folder is never deleted: only the store's own. */
	return cli_rm_tree(d->dir);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int drive_list(char ***names)
{
	char root[PATH_MAX], **v = NULL;
	struct dirent *e;
	DIR *dir;
	int n = 0, r;

	*names = NULL;
	if ((r = drive_root(root, sizeof(root))))
		return r;
	if (!(dir = opendir(root)))
		return -errno;
	while ((e = readdir(dir))) {
		char **nv;

		if (!drive_name_ok(e->d_name) || !(nv = realloc(v, (size_t)(n + 1) * sizeof(*v))))
			continue;
		v = nv;
		if ((v[n] = strdup(e->d_name)))
			n++;
	}
	closedir(dir);
	if (n)
		qsort(v, (size_t)n, sizeof(*v), cmp_names);
	*names = v;
	return n;
}

/* Sums st_blocks of the regular files under dirfd, following no link. */
static int64_t walk_fd(int dirfd, int depth)
{
	DIR *dir = fdopendir(dirfd);
	struct dirent *e;
	int64_t sum = 0;

	if (!dir) {
		close(dirfd);
		return 0;
	}
	while ((e = readdir(dir))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			sum += (int64_t)st.st_blocks * 512;
		} else if (S_ISDIR(st.st_mode) && depth < 64) {
			int fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (fd >= 0)
				sum += walk_fd(fd, depth + 1);
		}
	}
	closedir(dir);
	return sum;
}

int64_t drive_walk_usage(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? -errno : walk_fd(fd, 0);
}

int64_t drive_usage_read(const struct drive *d)
{
	char p[PATH_MAX + 8];
	int64_t v = 0;
	int fd;

	snprintf(p, sizeof(p), "%s/usage", d->dir);
	if ((fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	if (pread(fd, &v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = -EIO;
	close(fd);
	return v;
}

int drive_usage_set(const struct drive *d, int64_t bytes)
{
	char p[PATH_MAX + 8];
	int fd, r = 0;

	snprintf(p, sizeof(p), "%s/usage", d->dir);
	if ((fd = open(p, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	if (pwrite(fd, &bytes, sizeof(bytes), 0) != (ssize_t)sizeof(bytes))
		r = -EIO;
	close(fd);
	return r;
}
