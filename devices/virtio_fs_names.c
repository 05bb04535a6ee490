/* What guest-init can mount a virtio-fs share as (devices/virtio_fs.h):
 * its tag and the guest directory a drive goes at. Kept apart from the
 * device so that the layers which only check a configuration (the
 * Firecracker-style API, snapshots, the CLI) and their fuzzers need none
 * of the device. */
#include "devices/virtio_fs.h"

#include <string.h>

int fs_tag_valid(const char *tag)
{
	size_t i, n = strlen(tag);

	if (n == 0 || n >= VIRTIO_FS_TAG_LEN || !strcmp(tag, ".") || !strcmp(tag, ".."))
		return 0;
	for (i = 0; i < n; i++) {
		char c = tag[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int fs_guest_path_valid(const char *p)
{
	size_t i, n = strlen(p);

	if (n < 2 || n > 100 || p[0] != '/' || strstr(p, "//") || p[n - 1] == '/')
		return 0;
	for (i = 0; i < n; i++) {
		char c = p[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-' || c == '/'))
			return 0;
		/* a part that is "." or ".." */
		if (c == '.' && p[i - 1] == '/' &&
		    (p[i + 1] == '/' || !p[i + 1] || (p[i + 1] == '.' && (p[i + 2] == '/' || !p[i + 2]))))
			return 0;
	}
	return 1;
}
