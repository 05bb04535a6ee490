/* Named drives for vmm serve's API and restored clones
 * (cli/launch/run_drives.h), against a real drive store in a scratch
 * folder: the API's resolver refuses a sandbox the allow list does not
 * name and gives an allowed one the drive's folder, limit and count; a
 * snapshot's shared folder that is a drive becomes the clone's drive
 * (checked for the clone's name, its limit back), one that is not, or that
 * --fs replaces, stays a plain folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/drive/drive.h"
#include "cli/launch/run_drives.h"
#include "cli/launch/run_opts.h"
#include "cli/launch/run_restore.h"
#include "vmm/api/fcapi.h"
#include "vmm/vm_snapshot.h"
#include "vmm/vm.h"

static char root[] = "/tmp/test_run_drives.XXXXXX";
static char work_data[PATH_MAX]; /* drive work's folder, as realpath gives it */

/* drive NAME with --size 8M (size: 0 for none), allowing `who`. */
static void make_drive(const char *name, uint64_t size, const char *who)
{
	struct drive d;
	struct drive_rule r;
	char why[256];

	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "%s", name);
	d.size = size;
	assert_int_equal(drive_rule_parse(who, &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_create(&d, why, sizeof(why)), 0);
}

static struct run_opts *opts(const char *name)
{
	static struct run_opts o;

	memset(&o, 0, sizeof(o));
	o.name = name;
	return &o;
}

static void api_resolver(void **state)
{
	struct fcapi_fs fs;
	struct run_opts *o = opts("eve");
	char why[512], want[PATH_MAX + 16];

	(void)state;
	memset(&fs, 0, sizeof(fs));
	snprintf(fs.drive, sizeof(fs.drive), "work");
	assert_int_equal(run_fc_drive(o, &fs, why, sizeof(why)), -EACCES);
	assert_string_equal(why, "drive work does not allow sandbox eve (not on its allow list; vmm drive allow work eve)");
	o = opts("alice");
	assert_int_equal(run_fc_drive(o, &fs, why, sizeof(why)), 0);
	snprintf(want, sizeof(want), "%s/drives/work/data", root);
	assert_string_equal(fs.path, want);
	assert_string_equal(fs.at, "/drives/work");
	assert_int_equal(fs.limit, 8 << 20);
	snprintf(want, sizeof(want), "%s/drives/work/usage", root);
	assert_string_equal(fs.usage, want);
	/* a mount point and read-only (alice may: a rw rule allows ro) */
	snprintf(fs.at, sizeof(fs.at), "/w");
	fs.ro = 1;
	assert_int_equal(run_fc_drive(o, &fs, why, sizeof(why)), 0);
	assert_string_equal(fs.at, "/w");
	/* read-write on a read-only rule: refused */
	memset(&fs, 0, sizeof(fs));
	snprintf(fs.drive, sizeof(fs.drive), "docs");
	assert_int_equal(run_fc_drive(o, &fs, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "read-only"));
	snprintf(fs.drive, sizeof(fs.drive), "nosuch");
	assert_int_not_equal(run_fc_drive(o, &fs, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "no drive nosuch"));
}

static void api_record_text(void **state)
{
	struct fcapi *a = fcapi_new("t");
	struct run_opts *o = opts("alice");

	(void)state;
	assert_non_null(a);
	a->cfg.nr_fs = 2;
	snprintf(a->cfg.fs[0].tag, sizeof(a->cfg.fs[0].tag), "share");
	snprintf(a->cfg.fs[1].tag, sizeof(a->cfg.fs[1].tag), "w");
	snprintf(a->cfg.fs[1].drive, sizeof(a->cfg.fs[1].drive), "work");
	snprintf(a->cfg.fs[1].at, sizeof(a->cfg.fs[1].at), "/w");
	a->cfg.fs[1].ro = 1;
	run_fc_drives_text(a, o);
	assert_string_equal(o->drives_text, "work:/w:ro");
	fcapi_close(a);
	free(a);
}

/* A snapshot of a sandbox that had drive work at /w, drive docs (where
 * older snapshots say nothing: /drives/docs), and a plain folder tagged
 * like a drive but elsewhere. */
static struct snapshot *snap(void)
{
	static struct snapshot s;
	char docs[PATH_MAX + 16];

	memset(&s, 0, sizeof(s));
	s.conf.nr_fs = 3;
	snprintf(s.conf.fs[0].tag, sizeof(s.conf.fs[0].tag), "work");
	snprintf(s.conf.fs[0].path, sizeof(s.conf.fs[0].path), "%s", work_data);
	snprintf(s.conf.fs[0].at, sizeof(s.conf.fs[0].at), "/w");
	snprintf(docs, sizeof(docs), "%s/drives/docs/data", root);
	snprintf(s.conf.fs[1].tag, sizeof(s.conf.fs[1].tag), "docs");
	assert_non_null(realpath(docs, s.conf.fs[1].path));
	s.conf.fs[1].ro = 1;
	snprintf(s.conf.fs[2].tag, sizeof(s.conf.fs[2].tag), "open");
	snprintf(s.conf.fs[2].path, sizeof(s.conf.fs[2].path), "/tmp");
	snprintf(s.conf.fs[2].at, sizeof(s.conf.fs[2].at), "/o");
	return &s;
}

static void restore_refused(void **state)
{
	struct run_opts *o = opts("eve");
	char why[512];

	(void)state;
	assert_int_equal(restore_drives(snap(), o, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "drive work does not allow sandbox eve"));
	assert_int_equal(o->nr_over_fs, 0);
	/* without --name: only "*" rules */
	o = opts(NULL);
	assert_int_equal(restore_drives(snap(), o, why, sizeof(why)), -EACCES);
	assert_int_equal(o->nr_over_fs, 0);
}

static void restore_allowed(void **state)
{
	struct run_opts *o = opts("alice");
	struct vm_config cfg;
	struct snapshot *s = snap();
	char why[512], want[PATH_MAX + 16];
	unsigned i;

	(void)state;
	assert_int_equal(restore_drives(s, o, why, sizeof(why)), 0);
	assert_int_equal(o->nr_over_fs, 2); /* work and docs; "open" is no drive */
	assert_string_equal(o->drives_text, "work:/w,docs:/drives/docs:ro");
	memset(&cfg, 0, sizeof(cfg));
	assert_int_equal(restore_fs(&cfg, s, o->over_fs, o->nr_over_fs), 0);
	assert_int_equal(cfg.nr_fs, 3);
	snprintf(want, sizeof(want), "%s/drives/work/data", root);
	assert_string_equal(cfg.fs[0].path, want);
	assert_int_equal(cfg.fs[0].limit, 8 << 20);
	snprintf(want, sizeof(want), "%s/drives/work/usage", root);
	assert_string_equal(cfg.fs[0].usage, want);
	assert_string_equal(cfg.fs[0].at, "/w");
	assert_true(cfg.fs[1].ro);
	assert_int_equal(cfg.fs[1].limit, 0); /* docs has no size limit */
	assert_null(cfg.fs[1].usage);
	assert_string_equal(cfg.fs[2].path, "/tmp");
	assert_null(cfg.fs[2].usage);
	assert_string_equal(cfg.fs[2].at, "/o"); /* kept for the clone's own snapshots */
	for (i = 0; i < cfg.nr_fs; i++)
		fs_options_free(&cfg.fs[i]);
	for (i = 0; i < o->nr_over_fs; i++)
		fs_options_free(&o->over_fs[i]);
}

/* --fs tag=work,path=DIR: the clone's own folder, not the drive (no
 * check, no limit); a drive whose folder is not the snapshot's: not it. */
static void restore_replaced(void **state)
{
	struct run_opts *o = opts("eve");
	struct snapshot *s = snap();
	const char *bad = "";
	char why[512];

	(void)state;
	assert_int_equal(fs_options_parse("tag=work,path=/tmp", &o->over_fs[0], &bad), 0);
	o->nr_over_fs = 1;
	snprintf(s->conf.fs[1].path, sizeof(s->conf.fs[1].path), "/var");
	assert_int_equal(restore_drives(s, o, why, sizeof(why)), 0);
	assert_int_equal(o->nr_over_fs, 1);
	assert_string_equal(o->drives_text, "");
	fs_options_free(&o->over_fs[0]);
}

static int setup(void **state)
{
	static char env[PATH_MAX], senv[PATH_MAX];
	char p[PATH_MAX + 32];

	(void)state;
	if (!mkdtemp(root))
		return -1;
	snprintf(env, sizeof(env), "%s/drives", root);
	snprintf(senv, sizeof(senv), "%s/state", root);
	mkdir(senv, 0700);
	setenv("VMM_DRIVE_DIR", env, 1);
	setenv("VMM_STATE_DIR", senv, 1);
	make_drive("work", 8 << 20, "alice");
	make_drive("docs", 0, "alice:ro");
	snprintf(p, sizeof(p), "%s/drives/work/data", root);
	return realpath(p, work_data) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(api_resolver),
		cmocka_unit_test(api_record_text),
		cmocka_unit_test(restore_refused),
		cmocka_unit_test(restore_allowed),
		cmocka_unit_test(restore_replaced),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
