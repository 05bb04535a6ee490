/* GET /sandboxes/{id}/metrics (openapi.yml, SandboxMetric): one sample
 * read from the guest through the sandbox API's read (docs/api.md):
 * /proc/stat twice 200 ms apart for the CPUs' busy share and their count,
 * /proc/meminfo for memory (used is MemTotal less MemAvailable, cache
 * Cached). The disk is the host's view of the sandbox's disks: their
 * size (diskTotal) and the blocks they take (diskUsed; sparse images grow
 * as the guest writes). A paused sandbox has none: []. */
#include "cli/e2b/e2b_priv.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A guest file (a /proc one: its stat says 0 bytes, it reads to its end)
 * into buf, NUL-terminated. 0 or -errno. */
static int read_guest(const struct sandbox_addr *a, const char *path, char *buf, size_t cap)
{
	char fields[256], res[1024];
	struct api_error e;
	size_t len = 0;
	int fd, r;

	snprintf(fields, sizeof(fields), "\"op\":\"read\",\"path\":\"%s\"", path);
	fd = api_open_v(a, 1, fields);
	if (fd < 0)
		return fd;
	r = api_result(fd, res, sizeof(res), &e);
	while (!r) {
		uint8_t type;
		size_t n;

		if (frame_read(fd, &type, buf + len, cap - 1 - len, &n) || (type != F_DATA && type != F_END)) {
			r = -EIO;
			break;
		}
		if (type == F_END)
			break;
		len += n;
		if (len >= cap - 1) {
			r = -E2BIG;
			break;
		}
	}
	close(fd);
	buf[len] = '\0';
	return r == -1 ? -e.eno : r;
}

/* The "cpu " line's total and idle (idle + iowait) ticks; the count of
 * "cpuN" lines. */
static void cpu_ticks(const char *stat, unsigned long long *total, unsigned long long *idle, unsigned *ncpu)
{
	unsigned long long v[10] = { 0 };
	const char *p = stat;
	int i;

	*total = *idle = 0;
	*ncpu = 0;
	if (sscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5], &v[6], &v[7], &v[8], &v[9]) >= 4) {
		for (i = 0; i < 8; i++) /* guest time is counted in user already */
			*total += v[i];
		*idle = v[3] + v[4];
	}
	while ((p = strstr(p, "\ncpu")))
		if (*(p += 4) >= '0' && *p <= '9')
			++*ncpu;
}

static long long meminfo(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	long long kb = 0;

	if (p && sscanf(p + strlen(key), " %lld", &kb) == 1)
		return kb * 1024;
	return 0;
}

/* The sandbox folder's disk images (regular files of 1 MiB or more):
 * their sizes and the bytes they take. */
static void disks(const char *dir, long long *total, long long *used)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	*total = *used = 0;
	while (d && (de = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    st.st_size >= (1 << 20) && (strstr(de->d_name, ".img") || strstr(de->d_name, ".ext4") ||
						strstr(de->d_name, "disk"))) {
			*total += st.st_size;
			*used += (long long)st.st_blocks * 512;
		}
	}
	if (d)
		closedir(d);
}

int e2b_metrics(struct e2b_conn *c, const char *id, const struct sandbox_status *st)
{
	struct sandbox_addr a = { .port = cli_api_port() };
	unsigned long long t1, i1, t2, i2;
	const struct timespec gap = { 0, 200 * 1000000 };
	char *s1 = malloc(65536), *s2 = malloc(65536), *mem = malloc(65536), out[1024], when[40];
	long long disk_total, disk_used, now = (long long)time(NULL);
	struct json_writer w;
	struct sandbox sb;
	unsigned ncpu;
	struct tm tm;
	time_t tt = (time_t)now;
	int k;

	if (!s1 || !s2 || !mem) {
		k = e2b_send_error(c, 500, "out of memory");
		goto out;
	}
	if (st->state == SB_STANDBY) {
		k = e2b_send(c, 200, "application/json", "[]", 2, NULL);
		goto out;
	}
	if (sandbox_api_addr(id, 0, &sb, &a) || read_guest(&a, "/proc/stat", s1, 65536) ||
	    nanosleep(&gap, NULL) || read_guest(&a, "/proc/stat", s2, 65536) || read_guest(&a, "/proc/meminfo", mem, 65536)) {
		k = e2b_send_error(c, 500, "sandbox %s: its metrics could not be read", id);
		goto out;
	}
	cpu_ticks(s1, &t1, &i1, &ncpu);
	cpu_ticks(s2, &t2, &i2, &ncpu);
	disks(st->sb.dir, &disk_total, &disk_used);
	gmtime_r(&tt, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jw_init(&w, out, sizeof(out));
	jw_arr(&w);
	jw_obj(&w);
	jw_key(&w, "timestamp");
	jw_str(&w, when);
	jw_key(&w, "timestampUnix");
	jw_int(&w, now);
	jw_key(&w, "cpuCount");
	jw_int(&w, ncpu ? ncpu : 1);
	jw_key(&w, "cpuUsedPct");
	/* a JSON number with a fraction: jw_raw of the text */
	{
		char pct[32];
		double busy = t2 > t1 ? 100.0 * (double)((t2 - t1) - (i2 - i1)) / (double)(t2 - t1) : 0.0;

		snprintf(pct, sizeof(pct), "%.2f", busy < 0 ? 0.0 : busy);
		jw_raw(&w, pct);
	}
	jw_key(&w, "memUsed");
	jw_int(&w, meminfo(mem, "MemTotal:") - meminfo(mem, "MemAvailable:"));
	jw_key(&w, "memTotal");
	jw_int(&w, meminfo(mem, "MemTotal:"));
	jw_key(&w, "memCache");
	jw_int(&w, meminfo(mem, "Cached:"));
	jw_key(&w, "diskUsed");
	jw_int(&w, disk_used);
	jw_key(&w, "diskTotal");
	jw_int(&w, disk_total);
	jw_obj_end(&w);
	jw_arr_end(&w);
	k = e2b_send_json(c, 200, &w);
out:
	free(s1);
	free(s2);
	free(mem);
	return k;
}
