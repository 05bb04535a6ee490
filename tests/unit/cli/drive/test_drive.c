/* Tests cli/drive/: drive names, allow rules and the allow decision, the
 * store (create once, load, save, remove; a second create of a name
 * refused), the usage walk and count, and what --drive mounts. */
#include "cli/drive/drive.h"
#include "cli/sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char root[] = "/tmp/test_drive.XXXXXX";

static void names(void **state)
{
	(void)state;
	assert_true(drive_name_ok("work"));
	assert_true(drive_name_ok("a.b_c-9"));
	assert_false(drive_name_ok(""));
	assert_false(drive_name_ok(".hidden"));
	assert_false(drive_name_ok("-x"));
	assert_false(drive_name_ok("a/b"));
	assert_false(drive_name_ok(".."));
	assert_false(drive_name_ok("abcdefghijabcdefghijabcdefghijabcdef")); /* 36 */
	assert_true(drive_name_ok("abcdefghijabcdefghijabcdefghijabcde"));   /* 35 */
}

/* Label rules: parsed with their own colon, and the order of decision
 * (drive.h): own name rule, then label rules (read-only wins among
 * them), then "*". */
static void label_rules(void **state)
{
	struct drive d = { .name = "shared" };
	struct drive_rule r;
	char why[256], text[SANDBOX_LABELS_TEXT] = "";

	(void)state;
	assert_int_equal(drive_rule_parse("label:team=a", &r), 0);
	assert_string_equal(r.who, "label:team=a");
	assert_false(r.ro);
	assert_int_equal(drive_rule_parse("label:team=a:ro", &r), 0);
	assert_string_equal(r.who, "label:team=a");
	assert_true(r.ro);
	assert_int_equal(drive_rule_parse("label:k/x=", &r), 0); /* an empty value is a value */
	assert_int_equal(drive_rule_parse("label:team", &r), -EINVAL);
	assert_int_equal(drive_rule_parse("label:=a", &r), -EINVAL);
	assert_int_equal(drive_rule_parse("label:t=a,b", &r), -EINVAL);
	assert_int_equal(drive_rule_parse("label:t=a:rx", &r), -EINVAL);
	/* labels: checked, a key set twice keeps the last value, bounded */
	assert_true(sandbox_label_ok("team=a"));
	assert_false(sandbox_label_ok("/x=a"));
	assert_false(sandbox_label_ok("x=a/b"));
	assert_int_equal(sandbox_labels_add(text, sizeof(text), "team=a"), 0);
	assert_int_equal(sandbox_labels_add(text, sizeof(text), "role=review"), 0);
	assert_int_equal(sandbox_labels_add(text, sizeof(text), "team=b"), 0);
	assert_string_equal(text, "role=review,team=b");
	assert_true(sandbox_has_label(text, "team=b"));
	assert_false(sandbox_has_label(text, "team=a"));
	assert_false(sandbox_has_label(text, "team=bb"));
	assert_false(sandbox_has_label(text, "eam=b"));
	for (int i = 0; i < SANDBOX_LABELS_MAX - 2; i++) {
		char kv[16];

		snprintf(kv, sizeof(kv), "k%d=v", i);
		assert_int_equal(sandbox_labels_add(text, sizeof(text), kv), 0);
	}
	assert_int_equal(sandbox_labels_add(text, sizeof(text), "one=more"), -E2BIG);
	assert_int_equal(sandbox_labels_add(text, sizeof(text), "team=c"), 0); /* a change is not one more */

	/* a label rule lets a sandbox of that label in, by no name */
	assert_int_equal(drive_rule_parse("label:team=a", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_allowed(&d, "eve", "team=a", 0, why, sizeof(why)), 0);
	assert_int_equal(drive_allowed(&d, NULL, "x=1,team=a", 0, why, sizeof(why)), 0);
	assert_int_equal(drive_allowed(&d, "eve", "team=b", 1, why, sizeof(why)), -EACCES);
	assert_int_equal(drive_allowed(&d, "eve", NULL, 1, why, sizeof(why)), -EACCES);
	/* two matching label rules: read-only wins, in either order */
	assert_int_equal(drive_rule_parse("label:role=review:ro", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_allowed(&d, "eve", "team=a,role=review", 0, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "rule label:role=review:ro"));
	assert_int_equal(drive_allowed(&d, "eve", "team=a,role=review", 1, why, sizeof(why)), 0);
	assert_int_equal(drive_deny(&d, "label:team=a"), 0);
	assert_int_equal(drive_allow(&d, &(struct drive_rule){ .who = "label:team=a" }), 0); /* now after */
	assert_int_equal(drive_allowed(&d, "eve", "team=a,role=review", 0, why, sizeof(why)), -EACCES);
	/* the own name rule wins over label rules */
	assert_int_equal(drive_rule_parse("eve:rw", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_allowed(&d, "eve", "team=a,role=review", 0, why, sizeof(why)), 0);
	/* label rules win over "*" (rw for the rest, ro for reviewers) */
	assert_int_equal(drive_rule_parse("*", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_allowed(&d, "bob", "role=review", 0, why, sizeof(why)), -EACCES);
	assert_int_equal(drive_allowed(&d, "bob", "other=1", 0, why, sizeof(why)), 0);
}

static void rules_and_decision(void **state)
{
	struct drive d = { .name = "shared" };
	struct drive_rule r;
	char why[256];

	(void)state;
	assert_int_equal(drive_rule_parse("alice", &r), 0);
	assert_false(r.ro);
	assert_int_equal(drive_rule_parse("bob:ro", &r), 0);
	assert_true(r.ro);
	assert_int_equal(drive_rule_parse("*:rw", &r), 0);
	assert_int_equal(drive_rule_parse("bob:rx", &r), -EINVAL);
	assert_int_equal(drive_rule_parse("../x", &r), -EINVAL);
	assert_int_equal(drive_rule_parse(":ro", &r), -EINVAL);
	/* empty: nobody */
	assert_int_equal(drive_allowed(&d, "alice", NULL, 0, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "shared"));
	assert_non_null(strstr(why, "empty"));
	assert_int_equal(drive_rule_parse("alice", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_rule_parse("bob:ro", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_allowed(&d, "alice", NULL, 0, why, sizeof(why)), 0);
	assert_int_equal(drive_allowed(&d, "bob", NULL, 1, why, sizeof(why)), 0);
	assert_int_equal(drive_allowed(&d, "bob", NULL, 0, why, sizeof(why)), -EACCES); /* rw asked, ro given */
	assert_non_null(strstr(why, "read-only"));
	assert_int_equal(drive_allowed(&d, "eve", NULL, 1, why, sizeof(why)), -EACCES);
	assert_int_equal(drive_allowed(&d, NULL, NULL, 1, why, sizeof(why)), -EACCES);
	/* "*" read-only for the rest; a name's own rule wins over it */
	assert_int_equal(drive_rule_parse("*:ro", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_allowed(&d, "eve", NULL, 1, why, sizeof(why)), 0);
	assert_int_equal(drive_allowed(&d, "eve", NULL, 0, why, sizeof(why)), -EACCES);
	assert_int_equal(drive_allowed(&d, "alice", NULL, 0, why, sizeof(why)), 0);
	/* allow again changes the rule; deny removes it */
	assert_int_equal(drive_rule_parse("alice:ro", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(d.nr_allow, 3);
	assert_int_equal(drive_allowed(&d, "alice", NULL, 0, why, sizeof(why)), -EACCES);
	assert_int_equal(drive_deny(&d, "alice"), 0);
	assert_int_equal(drive_deny(&d, "alice"), -ENOENT);
	assert_int_equal(d.nr_allow, 2);
}

static void store_round_trip(void **state)
{
	struct drive d, e;
	struct drive_rule r;
	char why[256], p[PATH_MAX + 32], **list;
	int fd, n;

	(void)state;
	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "work");
	d.size = 1 << 20;
	assert_int_equal(drive_rule_parse("alice:ro", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_rule_parse("label:team/x=a.b:ro", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_create(&d, why, sizeof(why)), 0);
	assert_true(d.own);
	/* the same name again: refused, the first untouched */
	memset(&e, 0, sizeof(e));
	snprintf(e.name, sizeof(e.name), "work");
	assert_int_equal(drive_create(&e, why, sizeof(why)), -EEXIST);
	assert_non_null(strstr(why, "exists"));
	snprintf(e.name, sizeof(e.name), "../evil");
	assert_int_equal(drive_create(&e, why, sizeof(why)), -EINVAL);
	assert_int_equal(drive_load("work", &e), 0);
	assert_string_equal(e.path, d.path);
	assert_int_equal(e.size, 1 << 20);
	assert_int_equal(e.nr_allow, 2);
	assert_string_equal(e.allow[0].who, "alice");
	assert_true(e.allow[0].ro);
	assert_string_equal(e.allow[1].who, "label:team/x=a.b");
	assert_true(e.allow[1].ro);
	/* usage: a file of 64 KiB in the folder is counted */
	snprintf(p, sizeof(p), "%s/f", d.path);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	{
		static char buf[65536];

		memset(buf, 1, sizeof(buf));
		assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
	}
	fsync(fd);
	close(fd);
	assert_true(drive_walk_usage(d.path) >= 65536);
	assert_int_equal(drive_usage_read(&e), 0);
	assert_int_equal(drive_usage_set(&e, 12345), 0);
	assert_int_equal(drive_usage_read(&e), 12345);
	n = drive_list(&list);
	assert_int_equal(n, 1);
	assert_string_equal(list[0], "work");
	free(list[0]);
	free(list);
	assert_int_equal(drive_remove(&e), 0);
	assert_int_equal(access(d.path, F_OK), -1);
	assert_int_equal(drive_load("work", &e), -ENOENT);
}

static void mount_option(void **state)
{
	struct drive d;
	struct drive_rule r;
	char why[256], fs[PATH_MAX * 2 + 256];

	(void)state;
	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "m");
	d.size = 4 << 20;
	assert_int_equal(drive_rule_parse("alice", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_create(&d, why, sizeof(why)), 0);
	assert_int_equal(drive_mount_opt("m", "alice", NULL, fs, sizeof(fs), why, sizeof(why)), 0);
	assert_non_null(strstr(fs, "tag=m,"));
	assert_non_null(strstr(fs, ",at=/drives/m,"));
	assert_non_null(strstr(fs, ",limit=4194304,usage="));
	assert_int_equal(drive_mount_opt("m:/work:ro", "alice", NULL, fs, sizeof(fs), why, sizeof(why)), 0);
	assert_non_null(strstr(fs, ",ro,at=/work,"));
	assert_int_equal(drive_mount_opt("m:/a/../etc", "alice", NULL, fs, sizeof(fs), why, sizeof(why)), -EINVAL);
	assert_int_equal(drive_mount_opt("m:rel", "alice", NULL, fs, sizeof(fs), why, sizeof(why)), -EINVAL);
	assert_int_equal(drive_mount_opt("m", "eve", NULL, fs, sizeof(fs), why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "drive m"));
	/* by label: read-only for team=a, so rw is refused naming the rule */
	assert_int_equal(drive_rule_parse("label:team=a:ro", &r), 0);
	assert_int_equal(drive_allow(&d, &r), 0);
	assert_int_equal(drive_save(&d), 0);
	assert_int_equal(drive_mount_opt("m:ro", "eve", "team=a", fs, sizeof(fs), why, sizeof(why)), 0);
	assert_int_equal(drive_mount_opt("m", "eve", "team=a", fs, sizeof(fs), why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "rule label:team=a:ro"));
	assert_int_equal(drive_mount_opt("none", "alice", NULL, fs, sizeof(fs), why, sizeof(why)), -ENOENT);
	assert_int_equal(drive_remove(&d), 0);
}

/* The host-side file access (drive_files.c): reads, listings and writes
 * stay beneath the drive whatever links a guest planted, and writes keep
 * the shared count exact. */
static void files_beneath(void **state)
{
	struct drive d;
	struct drive_files f;
	struct drive_dirent ents[8];
	char why[256], p[PATH_MAX + 32], *data, big[600 * 1024];
	size_t len, n, total, i;
	uint64_t size;
	int64_t mode, before;

	(void)state;
	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "fb");
	d.size = 1 << 20;
	assert_int_equal(drive_create(&d, why, sizeof(why)), 0);
	assert_int_equal(drive_files_open(&d, &f), 0);
	assert_int_equal(drive_file_write(&f, "a/b/c.txt", "hello", 5, 0600, 1), 0);
	assert_int_equal(drive_file_read(&f, "a/b/c.txt", 0, 100, 0, &data, &len, &size, &mode), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(data, "hello", 5);
	assert_int_equal(mode, 0600);
	free(data);
	/* no setuid/setgid/sticky on the host file, whatever the call asks */
	assert_int_equal(drive_file_write(&f, "a/suid", "x", 1, 07755, 0), 0);
	assert_int_equal(drive_file_read(&f, "a/suid", 0, 100, 0, &data, &len, &size, &mode), 0);
	assert_int_equal(mode, 0755);
	free(data);
	assert_int_equal(drive_file_write(&f, "x/y", "z", 1, -1, 0), -ENOENT); /* no parents made */
	assert_int_equal(drive_file_write(&f, "a/", "z", 1, -1, 0), -EISDIR);
	/* links a guest could plant: to /, to .., to /proc's magic link, absolute */
	snprintf(p, sizeof(p), "%s/root", d.path);
	assert_int_equal(symlink("/", p), 0);
	snprintf(p, sizeof(p), "%s/a/up", d.path);
	assert_int_equal(symlink("../..", p), 0);
	snprintf(p, sizeof(p), "%s/magic", d.path);
	assert_int_equal(symlink("/proc/self/root", p), 0);
	snprintf(p, sizeof(p), "%s/in", d.path);
	assert_int_equal(symlink("a/b", p), 0);
	assert_int_equal(drive_file_read(&f, "root/etc/passwd", 0, 100, 0, &data, &len, &size, NULL), -EXDEV);
	assert_int_equal(drive_file_read(&f, "a/up/fb/drive", 0, 100, 0, &data, &len, &size, NULL), -EXDEV);
	assert_int_equal(drive_file_read(&f, "../drive", 0, 100, 0, &data, &len, &size, NULL), -EXDEV);
	assert_int_equal(drive_file_read(&f, "/etc/passwd", 0, 100, 0, &data, &len, &size, NULL), -EXDEV);
	assert_true(drive_file_read(&f, "magic/etc/passwd", 0, 100, 0, &data, &len, &size, NULL) < 0);
	assert_int_equal(drive_file_list(&f, "root", 8, ents, &n, &total), -EXDEV);
	assert_int_equal(drive_file_list(&f, "a/up", 8, ents, &n, &total), -EXDEV);
	assert_int_equal(drive_file_write(&f, "root/tmp/test_drive_escape", "x", 1, -1, 1), -EXDEV);
	assert_int_equal(access("/tmp/test_drive_escape", F_OK), -1);
	assert_int_equal(drive_file_write(&f, "a/up/escape", "x", 1, -1, 0), -EXDEV);
	/* a link that stays inside is followed, unless nofollow */
	assert_int_equal(drive_file_read(&f, "in/c.txt", 0, 100, 0, &data, &len, &size, NULL), 0);
	free(data);
	snprintf(p, sizeof(p), "%s/lnk", d.path);
	assert_int_equal(symlink("a/b/c.txt", p), 0);
	assert_int_equal(drive_file_read(&f, "lnk", 0, 100, 1, &data, &len, &size, NULL), -ELOOP);
	/* a FIFO is never opened (it would block) */
	snprintf(p, sizeof(p), "%s/fifo", d.path);
	assert_int_equal(mkfifo(p, 0600), 0);
	assert_int_equal(drive_file_read(&f, "fifo", 0, 100, 0, &data, &len, &size, NULL), -EINVAL);
	assert_int_equal(drive_file_list(&f, "", 8, ents, &n, &total), 0);
	assert_int_equal(total, 6); /* a root magic in lnk fifo */
	assert_int_equal(n, 6);
	for (i = 0; i < n; i++) {
		if (!strcmp(ents[i].name, "a"))
			assert_int_equal(ents[i].type, 'd');
		if (!strcmp(ents[i].name, "root"))
			assert_int_equal(ents[i].type, 'l');
		free(ents[i].name);
	}
	assert_int_equal(drive_file_list(&f, "", 2, ents, &n, &total), 0);
	assert_int_equal(n, 2);
	assert_int_equal(total, 6);
	free(ents[0].name);
	free(ents[1].name);
	/* the budget: counted, refused past the limit, given back on replace */
	memset(big, 'x', sizeof(big));
	before = *f.budget.used;
	assert_int_equal(drive_file_write(&f, "big1", big, 512 * 1024, -1, 0), 0);
	assert_true(*f.budget.used >= before + 512 * 1024);
	assert_int_equal(*f.budget.used, drive_walk_usage(d.path));
	assert_int_equal(drive_file_write(&f, "big2", big, sizeof(big), -1, 0), -ENOSPC);
	assert_int_equal(drive_file_read(&f, "big2", 0, 1, 0, &data, &len, &size, NULL), -ENOENT);
	assert_int_equal(*f.budget.used, drive_walk_usage(d.path)); /* the refused temporary file is gone */
	assert_int_equal(drive_file_write(&f, "big1", "small", 5, -1, 0), 0);
	assert_int_equal(*f.budget.used, drive_walk_usage(d.path));
	assert_int_equal(drive_file_write(&f, "big2", big, sizeof(big), -1, 0), 0);
	assert_int_equal(*f.budget.used, drive_walk_usage(d.path));
	drive_files_close(&f);
	assert_int_equal(drive_remove(&d), 0);
}

static int setup(void **state)
{
	static char env[PATH_MAX], senv[PATH_MAX];

	(void)state;
	if (!mkdtemp(root))
		return -1;
	snprintf(env, sizeof(env), "%s/drives", root);
	snprintf(senv, sizeof(senv), "%s/state", root);
	mkdir(senv, 0700);
	setenv("VMM_DRIVE_DIR", env, 1);
	setenv("VMM_STATE_DIR", senv, 1);
	return 0;
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
		cmocka_unit_test(names),
		cmocka_unit_test(rules_and_decision),
		cmocka_unit_test(label_rules),
		cmocka_unit_test(store_round_trip),
		cmocka_unit_test(mount_option),
		cmocka_unit_test(files_beneath),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
