/* Small tools guest-init carries for images whose userland lacks them
 * (Debian's busybox has no nohup, flock or script): guest-init is a
 * multi-call binary, and a link to it named nohup, flock or script runs
 * that tool (guest-init's main picks it by argv[0]). The built-in base
 * image links /bin/NAME -> /sbin/vmm-init for each one its busybox lacks
 * (cli/images/image_build.c, docs/images.md).
 *
 *   nohup CMD [ARG]...      SIGHUP ignored; output to nohup.out when
 *                           stdout is a terminal (POSIX nohup)
 *   flock [-s|-x|-u] [-n] [-w SECS] [-o] [-E CODE] FILE|DIR CMD [ARG]...
 *   flock [...] FILE|DIR -c CMD
 *   flock [-s|-x|-u] [-n] [-w SECS] [-E CODE] FD
 *                           util-linux flock(1)'s forms
 *   script [-q] [-e] [-a] [-f] [-c CMD] [FILE]
 *                           CMD (or $SHELL) on a new pseudo-terminal, its
 *                           output also to FILE (default "typescript");
 *                           -e returns CMD's status (util-linux script(1))
 */
#ifndef GUEST_INIT_TOOLS_H
#define GUEST_INIT_TOOLS_H

typedef int tool_fn(int argc, char **argv);

/* The tool that ARGV0's last component names, or NULL. */
tool_fn *tools_lookup(const char *argv0);

/* The names, NULL-terminated (what an image may link to guest-init). */
extern const char *const tools_names[];

/* flock's command line, parsed (a pure function, for tests). */
struct flock_args {
	int op;            /* LOCK_EX (default), LOCK_SH or LOCK_UN */
	int nonblock;      /* -n, or -w 0 */
	double timeout;    /* -w SECS; < 0: none */
	int close_fd;      /* -o: the command does not inherit the lock's fd */
	int conflict_code; /* -E: the exit status when the lock is busy (default 1) */
	const char *path;  /* FILE|DIR, or NULL with fd */
	int fd;            /* the FD form; -1 otherwise */
	char **cmd;        /* the command (NULL: none, the FD form) */
	const char *shell_cmd; /* -c CMD */
};
/* 0, or -1 with a message in err. */
int flock_parse(int argc, char **argv, struct flock_args *a, char *err, unsigned errlen);

/* script's command line, parsed. */
struct script_args {
	int quiet, ret, append, flush;
	const char *cmd;   /* -c CMD, or NULL: an interactive $SHELL */
	const char *file;  /* the typescript (default "typescript") */
};
int script_parse(int argc, char **argv, struct script_args *a, char *err, unsigned errlen);

/* The tools themselves: each returns its exit status (or does not return:
 * nohup execs its command). */
int tool_nohup(int argc, char **argv);
int tool_flock(int argc, char **argv);
int tool_script(int argc, char **argv);

#endif
