/* Busybox applet links from a list made at build time (docs/api.md,
 * "guest-init as PID 1"): PID 1 creates them itself instead of running
 * `busybox --install -s /bin`, which costs a fork and an exec of the 2 MB
 * busybox on every cold boot (a sixth of a second where guest ring 0 is
 * emulated). */
#ifndef GUEST_INIT_APPLETS_H
#define GUEST_INIT_APPLETS_H

#include <stddef.h>

/* Where the initramfs keeps the list (`busybox --list` at build time). */
#define APPLETS_LIST "/etc/busybox.applets"

/* Largest list accepted (busybox has about 400 applets). */
#define APPLETS_LIST_MAX (64 * 1024)

/* For each line of LIST (LEN bytes, one applet name a line), a symlink
 * DIRFD/NAME -> TARGET. Names that are empty, ".", "..", contain '/' or
 * are longer than NAME_MAX are skipped; an existing entry is kept. *MADE
 * (if not NULL) counts the links made. Returns 0, or -errno of the first
 * failure other than EEXIST (the rest are still tried). */
int applets_link(int dirfd, const char *list, size_t len, const char *target, unsigned *made);

/* Reads LIST_PATH and links its applets into DIR (-> TARGET). Returns 0,
 * -ENOENT when there is no list (the caller falls back to busybox
 * --install), or -errno. */
int applets_install(const char *list_path, const char *dir, const char *target, unsigned *made);

#endif
