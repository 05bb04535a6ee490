/* oci_rootfs_targets: a read-only root gets the mount targets its image
 * lacks (a file for a bind of a file, else a folder, with their parents),
 * resolved inside the root: a link in the image that points out of it
 * (absolute, or up with "..") never makes anything outside. A writable
 * root is left alone (the guest makes its targets). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/oci/oci_rootfs.h"

struct fx {
	char top[64], root[96], out[96], file[96];
	struct oci_spec s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	FILE *fp;

	snprintf(f->top, sizeof(f->top), "/tmp/test_oci_rootfs.XXXXXX");
	assert_non_null(mkdtemp(f->top));
	snprintf(f->root, sizeof(f->root), "%s/root", f->top);
	snprintf(f->out, sizeof(f->out), "%s/outside", f->top);
	snprintf(f->file, sizeof(f->file), "%s/resolv.conf", f->top);
	assert_int_equal(mkdir(f->root, 0755), 0);
	assert_int_equal(mkdir(f->out, 0755), 0);
	assert_non_null(fp = fopen(f->file, "w"));
	fclose(fp);
	snprintf(f->s.root, sizeof(f->s.root), "%s", f->root);
	f->s.root_ro = 1;
	*state = f;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *w)
{
	(void)st, (void)type, (void)w;
	return remove(p);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	nftw(f->top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void add(struct fx *f, const char *dest, enum oci_mount_kind kind, const char *src)
{
	struct oci_mount *m = &f->s.mounts[f->s.nmounts++];

	m->dest = dest;
	m->kind = kind;
	m->source = src;
}

static mode_t type_at(const struct fx *f, const char *rel)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", f->root, rel);
	return lstat(p, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

static void makes_missing_targets(void **state)
{
	struct fx *f = *state;
	char why[256] = "";

	add(f, "/etc/resolv.conf", OCI_MNT_BIND, f->file);
	add(f, "/dev/shm", OCI_MNT_BIND, f->out);
	add(f, "/proc", OCI_MNT_OTHER, NULL);
	assert_int_equal(oci_rootfs_targets(&f->s, why, sizeof(why)), 0);
	assert_int_equal(type_at(f, "etc"), S_IFDIR);
	assert_int_equal(type_at(f, "etc/resolv.conf"), S_IFREG);
	assert_int_equal(type_at(f, "dev/shm"), S_IFDIR);
	assert_int_equal(type_at(f, "proc"), S_IFDIR);
	/* there already: fine, again */
	assert_int_equal(oci_rootfs_targets(&f->s, why, sizeof(why)), 0);
}

static void writable_root_untouched(void **state)
{
	struct fx *f = *state;
	char why[256] = "";

	f->s.root_ro = 0;
	add(f, "/etc/resolv.conf", OCI_MNT_BIND, f->file);
	assert_int_equal(oci_rootfs_targets(&f->s, why, sizeof(why)), 0);
	assert_int_equal(type_at(f, "etc"), 0);
}

static void links_stay_inside(void **state)
{
	struct fx *f = *state;
	char link[160], up[160], why[256] = "";
	struct stat st;

	/* etc -> the host's outside folder (absolute), run -> ../outside */
	snprintf(link, sizeof(link), "%s/etc", f->root);
	assert_int_equal(symlink(f->out, link), 0);
	snprintf(up, sizeof(up), "%s/run", f->root);
	assert_int_equal(symlink("../outside", up), 0);
	add(f, "/etc/resolv.conf", OCI_MNT_BIND, f->file);
	assert_int_not_equal(oci_rootfs_targets(&f->s, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "/etc/resolv.conf"));
	f->s.nmounts = 0;
	add(f, "/run/x", OCI_MNT_BIND, f->out);
	oci_rootfs_targets(&f->s, why, sizeof(why));
	/* nothing made outside the root */
	snprintf(link, sizeof(link), "%s/resolv.conf", f->out);
	assert_int_equal(stat(link, &st), -1);
	snprintf(link, sizeof(link), "%s/x", f->out);
	assert_int_equal(stat(link, &st), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(makes_missing_targets, setup, teardown),
		cmocka_unit_test_setup_teardown(writable_root_untouched, setup, teardown),
		cmocka_unit_test_setup_teardown(links_stay_inside, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
