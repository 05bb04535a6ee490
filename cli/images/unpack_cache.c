/* The unpack cache (unpack_cache.h). */
#include "cli/images/unpack_cache.h"
#include "cli/util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void unpack_chain_ids(char (*diff_ids)[OCI_DIGEST_MAX], unsigned n, char (*chain)[OCI_DIGEST_MAX])
{
	for (unsigned i = 0; i < n; i++) {
		char buf[2 * OCI_DIGEST_MAX + 2];
		int len;

		if (i == 0) {
			snprintf(chain[0], OCI_DIGEST_MAX, "%s", diff_ids[0]);
			continue;
		}
		len = snprintf(buf, sizeof(buf), "%s %s", chain[i - 1], diff_ids[i]);
		oci_digest_buf(buf, (size_t)len, chain[i]);
	}
}

int unpack_cache_dir(char *buf, size_t len)
{
	int r = oci_cache_dir(buf, len);
	size_t n;

	if (r)
		return r;
	n = strlen(buf);
	if (n < 6 || strcmp(buf + n - 6, "/blobs"))
		return -EINVAL;
	snprintf(buf + n - 6, len - n + 6, "/unpack");
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	chmod(buf, 0700);
	return 0;
}

static int copy_into(const char *from, const char *to)
{
	char src[PATH_MAX + 4];
	const char *cp[] = { "cp", "-a", "--reflink=auto", "--", src, to, NULL };

	snprintf(src, sizeof(src), "%s/.", from);
	return cli_run_tool_ok(cp, 0);
}

int unpack_cache_restore(const char *cache, char (*chain)[OCI_DIGEST_MAX], unsigned n, const char *stage)
{
	char p[PATH_MAX];
	struct stat st;
	unsigned k;

	for (k = n; k > 0; k--) {
		snprintf(p, sizeof(p), "%s/%s/root", cache, chain[k - 1] + 7);
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			break;
	}
	if (!k)
		return 0;
	return copy_into(p, stage) ? -EIO : (int)k;
}

int unpack_cache_store(const char *cache, const char *chain, const char *stage)
{
	char tmp[PATH_MAX], root[PATH_MAX + 8], dst[PATH_MAX];
	const char *rm[] = { "rm", "-rf", "--", tmp, NULL };
	int r;

	snprintf(dst, sizeof(dst), "%s/%s", cache, chain + 7);
	if (access(dst, F_OK) == 0)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s/tmp-%d", cache, (int)getpid());
	snprintf(root, sizeof(root), "%s/root", tmp);
	(void)cli_run_tool(rm, 0);
	if (mkdir(tmp, 0700) < 0 || mkdir(root, 0755) < 0) {
		r = -errno;
		(void)cli_run_tool(rm, 0);
		return r;
	}
	if ((r = copy_into(stage, root)) || rename(tmp, dst) < 0) {
		r = r ? r : (errno == EEXIST || errno == ENOTEMPTY ? 0 : -errno);
		(void)cli_run_tool(rm, 0);
		return r;
	}
	return 0;
}
