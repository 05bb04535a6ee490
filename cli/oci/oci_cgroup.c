/* The container's cgroup on the host: see oci_cgroup.h. */
#include "cli/oci/oci_cgroup.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int oci_cgroup_dir(const char *mnt, const char *cgroups_path, char *buf, size_t len)
{
	const char *p = cgroups_path;
	char probe[4096];

	if (!p || !p[0])
		return -EINVAL;
	if (strchr(p, ':'))
		return -ENOTSUP; /* the systemd driver's slice:prefix:name */
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);

		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		p = *end ? end + 1 : end;
	}
	/* runc takes a relative path under the hierarchy's root too */
	if (snprintf(buf, len, "%s%s%s", mnt, cgroups_path[0] == '/' ? "" : "/", cgroups_path) >= (int)len)
		return -ENAMETOOLONG;
	if (snprintf(probe, sizeof(probe), "%s/cgroup.controllers", mnt) >= (int)sizeof(probe))
		return -ENAMETOOLONG;
	return access(probe, F_OK) ? -ENOTSUP : 0;
}

/* Writes text into dir/file: 0 or -errno. */
static int cg_write(const char *dir, const char *file, const char *text)
{
	char p[4096];
	int fd, r = 0;

	if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	if ((fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0) /* as `echo +memory >>` */
		return -errno;
	if (write_full(fd, text, strlen(text)))
		r = -errno;
	close(fd);
	return r;
}

/* Switches on in parent's subtree_control what the container's stats
 * need, of the controllers parent has (its cgroup.controllers): each
 * alone, so one the kernel refuses (a parent with processes of its own,
 * a controller held elsewhere) leaves the others. */
static void cg_enable(const char *parent)
{
	static const char *const want[] = { "cpu", "memory", "pids", "io" };
	char p[4096], have[512] = "", *save = NULL;
	FILE *f;

	if (snprintf(p, sizeof(p), "%s/cgroup.controllers", parent) >= (int)sizeof(p) || !(f = fopen(p, "re")))
		return;
	if (!fgets(have, sizeof(have), f))
		have[0] = '\0';
	fclose(f);
	for (char *w = strtok_r(have, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			if (!strcmp(w, want[i])) {
				char word[16];

				snprintf(word, sizeof(word), "+%s", w);
				(void)cg_write(parent, "cgroup.subtree_control", word);
			}
}

int oci_cgroup_join(const char *mnt, const char *dir, pid_t pid, char *why, size_t whylen)
{
	size_t base = strlen(mnt);
	char path[4096];
	int r;

	if (strncmp(dir, mnt, base) || dir[base] != '/' || strlen(dir) >= sizeof(path))
		return cli_seterr(why, whylen, -EINVAL, "%s: not under %s", dir, mnt);
	snprintf(path, sizeof(path), "%s", dir);
	/* each level from the top: its parent's controllers, then itself */
	for (char *s = path + base + 1;; s++) {
		char keep = *s;

		if (keep != '/' && keep != '\0')
			continue;
		*s = '\0';
		{
			char *slash = strrchr(path, '/');

			*slash = '\0';
			cg_enable(path);
			*slash = '/';
		}
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			return cli_seterr(why, whylen, r, "cgroup %s: %s", path, strerror(-r));
		}
		*s = keep;
		if (!keep)
			break;
	}
	if ((r = oci_cgroup_move(dir, pid)))
		return cli_seterr(why, whylen, r, "cgroup %s: joining it: %s", dir, strerror(-r));
	return 0;
}

int oci_cgroup_move(const char *dir, pid_t pid)
{
	char text[32];

	snprintf(text, sizeof(text), "%d", (int)pid);
	return cg_write(dir, "cgroup.procs", text);
}

int oci_cgroup_self(const char *mnt, char *buf, size_t len)
{
	char line[4096];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int r = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			r = snprintf(buf, len, "%s%s", mnt, line + 3) >= (int)len ? -ENAMETOOLONG : 0;
			break;
		}
	fclose(f);
	return r;
}

int oci_cgroup_remove(const char *dir)
{
	for (int tries = 0;; tries++) {
		if (!rmdir(dir) || errno == ENOENT)
			return 0;
		if (errno != EBUSY || tries == 50)
			return -errno;
		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
	}
}

int oci_cgroup_record(const char *state_dir, const char *dir)
{
	char p[4096], text[4096];

	if (snprintf(p, sizeof(p), "%s/cgroup", state_dir) >= (int)sizeof(p) ||
	    snprintf(text, sizeof(text), "%s\n", dir) >= (int)sizeof(text))
		return -ENAMETOOLONG;
	return cli_write_text(p, text, 0644);
}

int oci_cgroup_forget(const char *state_dir, char *why, size_t whylen)
{
	char p[4096], dir[4096];
	size_t n;
	int r;

	if (snprintf(p, sizeof(p), "%s/cgroup", state_dir) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	if ((r = cli_read_text(p, dir, sizeof(dir))) == -ENOENT)
		return 0;
	if (r < 0)
		return cli_seterr(why, whylen, r, "%s: %s", p, strerror(-r));
	n = strlen(dir);
	while (n && dir[n - 1] == '\n')
		dir[--n] = '\0';
	/* only what oci_cgroup_join made: a folder under the hierarchy */
	if (strncmp(dir, OCI_CGROUP_ROOT "/", sizeof(OCI_CGROUP_ROOT)) || strstr(dir, "/.."))
		return cli_seterr(why, whylen, -EINVAL, "%s: names %s, not a cgroup", p, dir);
	if ((r = oci_cgroup_remove(dir)))
		return cli_seterr(why, whylen, r, "cgroup %s: %s", dir, strerror(-r));
	return 0;
}
