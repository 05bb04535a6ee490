/* vmm drive create|ls|inspect|rm|allow|deny: named shared folders that
 * outlive sandboxes (cli/drive/drive.h, docs/cli.md "Drives"). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/drive/drive.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void drive_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm drive create NAME [--size LIMIT] [--path DIR] [--allow WHO[:ro]]...\n"
		"       vmm drive ls\n"
		"       vmm drive inspect NAME\n"
		"       vmm drive rm [-f] NAME\n"
		"       vmm drive allow NAME WHO[:ro]\n"
		"       vmm drive deny NAME WHO\n\n"
		"A drive is a named shared folder that outlives every sandbox; mount it with\n"
		"vmm run --drive NAME[:/GUEST/DIR][:ro] (default /drives/NAME). WHO is a sandbox\n"
		"name, label:KEY=VALUE (sandboxes run with --label KEY=VALUE) or * (any sandbox);\n"
		"a sandbox's own name rule decides first, then its label rules (read-only if\n"
		"any matching one is), then *. A new drive allows nobody until allowed. --size bounds\n"
		"what its files take (in MiB, or 8M, 1G; writes past it get ENOSPC in the guest). --path\n"
		"shares a folder of yours (never deleted by rm); otherwise the drive's folder is\n"
		"in vmm's store and rm deletes it. Changes to the list apply to the next mount.\n");
}

static int drive_err(const char *fmt, const char *a, int r)
{
	fprintf(stderr, "vmm drive: ");
	fprintf(stderr, fmt, a);
	if (r)
		fprintf(stderr, ": %s", strerror(-r));
	fputc('\n', stderr);
	return CLI_EXIT_ERROR;
}

static int do_create(int argc, char **argv)
{
	struct drive d;
	struct drive_rule rule;
	char why[512];
	unsigned long long mib;
	int i;

	memset(&d, 0, sizeof(d));
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			if (cli_parse_mib(argv[++i], &mib) || !mib || mib > (1ull << 40))
				return cli_usage_error("drive", "--size '%s': MiB, or with M or G (8M, 2G)", argv[i]);
			d.size = mib << 20;
		} else if (!strcmp(argv[i], "--path") && i + 1 < argc) {
			if (!realpath(argv[++i], d.path))
				return drive_err("--path %s", argv[i], -errno);
		} else if (!strcmp(argv[i], "--allow") && i + 1 < argc) {
			if (drive_rule_parse(argv[++i], &rule) || drive_allow(&d, &rule))
				return cli_usage_error("drive", "--allow '%s': a sandbox name, label:KEY=VALUE or *, then :ro or :rw", argv[i]);
		} else if (argv[i][0] != '-' && !d.name[0] && strlen(argv[i]) < sizeof(d.name)) {
			snprintf(d.name, sizeof(d.name), "%s", argv[i]);
		} else {
			return cli_bad_arg("drive", argv[i], "--size --path --allow");
		}
	}
	if (!d.name[0] && (i = argc - 1) >= 2)
		return cli_usage_error("drive", "drive name '%s': 1 to 35 of A-Z a-z 0-9 . _ -", argv[i]);
	if (!d.name[0])
		return cli_usage_error("drive", "%s", "create needs a NAME");
	if (drive_create(&d, why, sizeof(why)))
		return drive_err("%s", why, 0);
	printf("%s\n", d.name);
	return 0;
}

static int do_ls(void)
{
	char **names;
	int i, n = drive_list(&names);

	if (n < 0)
		return drive_err("%s", "cannot list the drives", n);
	printf("%-24s %12s %12s %s\n", "NAME", "USED", "SIZE", "ALLOW");
	for (i = 0; i < n; i++) {
		struct drive d;
		char allow[512] = "";
		size_t k = 0;

		if (!drive_load(names[i], &d)) {
			for (unsigned j = 0; j < d.nr_allow && k < sizeof(allow); j++)
				k += (size_t)snprintf(allow + k, sizeof(allow) - k, "%s%s%s", j ? "," : "",
						      d.allow[j].who, d.allow[j].ro ? ":ro" : "");
			printf("%-24s %12lld %12llu %s\n", d.name, (long long)drive_walk_usage(d.path),
			       (unsigned long long)d.size, allow[0] ? allow : "-");
		}
		free(names[i]);
	}
	free(names);
	return 0;
}

static int do_inspect(const char *name)
{
	char out[8192], users[1024];
	struct json_writer w;
	struct drive d;
	unsigned j;
	int r;

	if ((r = drive_load(name, &d)))
		return drive_err("no drive %s", name, r);
	drive_users(name, users, sizeof(users));
	jw_init(&w, out, sizeof(out));
	jw_obj(&w);
	jw_key(&w, "name");
	jw_str(&w, d.name);
	jw_key(&w, "path");
	jw_str(&w, d.path);
	jw_key(&w, "own_folder");
	jw_bool(&w, d.own);
	jw_key(&w, "size_limit");
	jw_int(&w, (int64_t)d.size);
	jw_key(&w, "bytes_used");
	jw_int(&w, drive_walk_usage(d.path));
	jw_key(&w, "allow");
	jw_arr(&w);
	for (j = 0; j < d.nr_allow; j++) {
		jw_obj(&w);
		jw_key(&w, "who");
		jw_str(&w, d.allow[j].who);
		jw_key(&w, "ro");
		jw_bool(&w, d.allow[j].ro);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_key(&w, "used_by");
	jw_arr(&w);
	for (char *p = users, *save = NULL, *t; (t = strtok_r(p, ",", &save)); p = NULL)
		jw_str(&w, t);
	jw_arr_end(&w);
	jw_obj_end(&w);
	if (!jw_done(&w))
		return drive_err("%s: record too long", name, 0);
	printf("%s\n", out);
	return 0;
}

static int do_rm(int argc, char **argv)
{
	const char *name = NULL;
	char users[1024];
	struct drive d;
	int i, force = 0, r;

	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-f"))
			force = 1;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return cli_bad_arg("drive", argv[i], NULL);
	}
	if (!name)
		return cli_usage_error("drive", "%s", "rm needs a NAME");
	if ((r = drive_load(name, &d)))
		return drive_err("no drive %s", name, r);
	drive_users(name, users, sizeof(users));
	if (users[0] && !force) {
		fprintf(stderr, "vmm drive: drive %s is in use by %s (stop them, or rm -f)\n", name, users);
		return CLI_EXIT_ERROR;
	}
	if ((r = drive_remove(&d)))
		return drive_err("cannot remove drive %s", name, r);
	return 0;
}

static int do_allow(int argc, char **argv, int allow)
{
	struct drive_rule rule;
	struct drive d;
	int r;

	if (argc != 4)
		return cli_usage_error("drive", "%s NAME WHO%s", allow ? "allow" : "deny", allow ? "[:ro]" : "");
	if ((r = drive_load(argv[2], &d)))
		return drive_err("no drive %s", argv[2], r);
	if (allow && (drive_rule_parse(argv[3], &rule) || drive_allow(&d, &rule)))
		return cli_usage_error("drive", "allow '%s': a sandbox name, label:KEY=VALUE or *, then :ro or :rw", argv[3]);
	if (!allow && drive_deny(&d, argv[3]))
		return drive_err("drive %s has no rule for that sandbox", argv[2], 0);
	if ((r = drive_save(&d)))
		return drive_err("cannot save drive %s", argv[2], r);
	return 0;
}

static int drive_main(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : "";

	if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		drive_usage(stdout);
		return 0;
	}
	if (!strcmp(sub, "create"))
		return do_create(argc, argv);
	if (!strcmp(sub, "ls"))
		return do_ls();
	if (!strcmp(sub, "inspect") && argc == 3)
		return do_inspect(argv[2]);
	if (!strcmp(sub, "rm"))
		return do_rm(argc, argv);
	if (!strcmp(sub, "allow") || !strcmp(sub, "deny"))
		return do_allow(argc, argv, !strcmp(sub, "allow"));
	return cli_usage_error("drive", "unknown or incomplete command '%s'", sub);
}

const struct cli_verb cli_verb_drive = {
	.name = "drive",
	.summary = "create, list, inspect and remove named shared folders (drives)",
	.run = drive_main,
	.usage = drive_usage,
};
