/* vmm snapshot SANDBOX DIR: pause, write a snapshot, resume (or stop). */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/wire/json.h"
#include "vmm/base/log.h"
#include "vmm/vm_snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static void snapshot_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm snapshot [--stop | --pause] [--diff] SANDBOX DIR\n"
		"       vmm snapshot merge BASE DIFF [OUT]\n\n"
		"Pauses the running sandbox SANDBOX (its name), writes a snapshot of it to\n"
		"DIR (which must not exist: memory, vCPU and device state, copies of its\n"
		"writable disks), then resumes it. Start clones with 'vmm restore DIR'.\n"
		"The snapshot is complete and fsynced when this returns 0; on failure (a\n"
		"full disk) nothing that looks like a snapshot is left behind.\n\n"
		"  --stop     stop the sandbox after the snapshot instead of resuming it\n"
		"  --pause    leave it paused ('vmm resume SANDBOX')\n"
		"  --diff     only the pages written since the sandbox's last snapshot or\n"
		"             restore, layered on that one (needs --track-dirty at start)\n\n"
		"'merge' flattens the diff DIFF onto BASE (its base, wherever it is now)\n"
		"into a full snapshot OUT, or in place without OUT (docs/snapshot.md).\n");
}

/* Prints the reply's error, or nothing: 0 if the reply says ok. */
int cli_reply_ok(const char *verb, const char *reply)
{
	char arena_buf[8192];
	struct json_arena a = { .buf = arena_buf, .size = sizeof(arena_buf) };
	const char *err = NULL, *msg = NULL;
	const struct json *j = json_parse(reply, strlen(reply), &a, &err);
	int ok = 0;

	if (!j || json_get_bool(j, "ok", &ok)) {
		fprintf(stderr, "vmm %s: unreadable reply from the VMM: %s\n", verb, reply);
		return -EPROTO;
	}
	if (ok)
		return 0;
	if (json_get_str(j, "error", &msg))
		msg = "failed";
	fprintf(stderr, "vmm %s: %s\n", verb, msg);
	return -EIO;
}

/* Is the sandbox's VMM jailed (vmm run --jail)? Its root is not ours:
 * it writes only in its jail-rw subfolder. */
static int jailed(const struct sandbox *sb)
{
	return strcmp(sb->rw, sb->dir) != 0;
}

/* A jailed VMM's snapshot, moved to path: made the caller's before it
 * is looked at (the jail uid, which may hold a descriptor of the folder,
 * can change it no more), then checked: a real folder of regular files
 * with one link each. A VMM its guest took over could otherwise leave a
 * link to any host file as the snapshot's memory, for a later `vmm
 * restore` to read as root. 0 or -errno. */
static int claim_snapshot(const char *path)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r = 0;
	struct dirent *e;
	struct stat st;
	DIR *d;

	if (dfd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -ENOTDIR : -errno;
	if (fchown(dfd, getuid(), getgid()) < 0 || fchmod(dfd, 0700) < 0 || !(d = fdopendir(dfd))) {
		r = -errno;
		close(dfd);
		return r;
	}
	while (!r && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = -errno;
		else if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
			r = -EINVAL;
		else if (fchownat(dfd, e->d_name, getuid(), getgid(), AT_SYMLINK_NOFOLLOW) < 0)
			r = -errno;
	}
	closedir(d);
	return r;
}

static int snapshot_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stop", no_argument, NULL, 's' },
		{ "pause", no_argument, NULL, 'p' },
		{ "diff", no_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	int diff = 0;
	char abs[PATH_MAX], req[PATH_MAX * 2 + 64], reply[4096], staged[PATH_MAX + 64];
	const char *target = abs;
	struct sandbox sb;
	const char *then = "resume", *dir;
	struct json_writer w;
	int opt, r;

	if (argc >= 2 && !strcmp(argv[1], "merge")) {
		if (argc != 4 && argc != 5)
			return cli_usage_error("snapshot", "merge expects BASE DIFF [OUT]");
		return snapshot_merge(argv[2], argv[3], argc == 5 ? argv[4] : NULL) ? CLI_EXIT_ERROR : 0;
	}
	optind = 1;
	while ((opt = cli_getopt(argc, argv, "+", opts, "snapshot")) != -1) {
		if (opt == 'D')
			diff = 1;
		else if (opt == 's')
			then = "stop";
		else if (opt == 'p')
			then = "pause";
		else
			return CLI_EXIT_USAGE;
	}
	if (argc - optind != 2)
		return cli_usage_error("snapshot", "expected SANDBOX DIR");
	dir = argv[optind + 1];
	/* The VMM may run elsewhere in the tree: hand it an absolute path. */
	if (dir[0] == '/') {
		snprintf(abs, sizeof(abs), "%s", dir);
	} else {
		char cwd[PATH_MAX];

		if (!getcwd(cwd, sizeof(cwd)) ||
		    snprintf(abs, sizeof(abs), "%s/%s", cwd, dir) >= (int)sizeof(abs)) {
			fprintf(stderr, "vmm snapshot: %s: path too long\n", dir);
			return CLI_EXIT_ERROR;
		}
	}
	/* A jailed VMM sees only its folder: it writes there, and the
	 * snapshot is moved to DIR from here (docs/security.md). */
	/* (no sandbox: said once here, not again by sandbox_control) */
	if (sandbox_lookup(&sb, argv[optind]))
		return CLI_EXIT_ERROR;
	if (jailed(&sb) && strncmp(abs, sb.dir, strlen(sb.dir))) {
		snprintf(staged, sizeof(staged), "%s/.snapshot-%d", sb.rw, (int)getpid());
		target = staged;
	}
	jw_init(&w, req, sizeof(req));
	jw_obj(&w);
	jw_key(&w, "op");
	jw_str(&w, "snapshot");
	jw_key(&w, "dir");
	jw_str(&w, target);
	jw_key(&w, "then");
	jw_str(&w, then);
	if (diff) {
		jw_key(&w, "diff");
		jw_bool(&w, 1);
	}
	jw_obj_end(&w);
	if (!jw_done(&w))
		return CLI_EXIT_ERROR;
	/* Writing guest memory takes as long as the disk needs. */
	if (sandbox_control(argv[optind], req, reply, sizeof(reply), 600000))
		return CLI_EXIT_ERROR;
	if (cli_reply_ok("snapshot", reply))
		return CLI_EXIT_ERROR;
	if (target != abs && rename(staged, abs) < 0) {
		fprintf(stderr, "vmm snapshot: the jailed sandbox wrote its snapshot to %s; moving it to %s: %s\n",
			staged, abs, strerror(errno));
		return CLI_EXIT_ERROR;
	}
	if (target != abs && (r = claim_snapshot(abs))) {
		fprintf(stderr, "vmm snapshot: the jailed sandbox's snapshot is not a folder of plain files "
				"(%s): removed, not kept at %s\n", strerror(-r), abs);
		if (r == -ENOTDIR)
			unlink(abs);
		else
			cli_rm_tree(abs);
		return CLI_EXIT_ERROR;
	}
	printf("%s\n", reply);
	return 0;
}

const struct cli_verb cli_verb_snapshot = {
	.name = "snapshot",
	.summary = "write a snapshot of a running sandbox",
	.run = snapshot_main,
	.usage = snapshot_usage,
};
