/* What the verbs and the subsystems under cli/ share: option and duration
 * parsing, files and directories handled safely, running tools, the
 * library and cache directories, the two binaries (docs/perf.md). The verb
 * table is cli/verbs.h. */
#ifndef CLI_UTIL_UTIL_H
#define CLI_UTIL_UTIL_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Two binaries (docs/perf.md, "Two binaries"): `vmm` links no TLS
 * library (libssl, libcrypto, libcurl and the 28 libraries libcurl
 * brings: 54,000 relocations at every start); `vmm-tls`, next to it, is
 * the whole CLI with them. 1 in the lean one (cli/notls.c), 0 in vmm-tls. */
extern const int cli_lean;
/* Does this command line need vmm-tls: the egress, mcp, token, image and e2b
 * verbs, or an --egress-... or --image option before "--"? */
int cli_needs_tls(int argc, char *const *argv);
/* Runs vmm-tls (next to this binary) with argv. Returns only on failure,
 * -errno, with what it tried in `path`. */
int cli_exec_tls(char *const *argv, char *path, size_t len);

/* CLOCK_MONOTONIC in milliseconds (deadlines, durations). */
long long cli_mono_ms(void);

/* Exit statuses of the CLI itself (the guest's are in docs/exit-status.md). */
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2

/* The one way a subsystem under cli/ hands an error up (docs/ARCHITECTURE.md,
 * "Errors"): the message, one line without "vmm VERB: " or a newline, goes
 * into err[errlen] (if err and errlen) and r, 0 or -errno, comes back; the
 * verb prints it. No subsystem writes to stderr itself. */
int cli_seterr(char *err, size_t errlen, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A usage mistake as one line, "MESSAGE (see 'vmm VERB --help')", into
 * err (the verb prints it after "vmm VERB: ": cli_usage_error and the
 * other printers are the verbs', cli/verbs.h). Returns CLI_EXIT_USAGE. */
int cli_usage_msg(char *err, size_t errlen, const char *verb, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
struct option;
/* getopt_long with an unknown option or a missing value said in err
 * with cli_usage_msg (getopt's own messages off); then returns '?'. */
int cli_getopt_msg(int argc, char **argv, const char *sopts, const struct option *lopts, const char *verb, char *err,
		   size_t errlen);
/* A hand-parsed verb's argument it does not take, into err with
 * cli_usage_msg: one of `valued` (its options that take a value,
 * space-separated; may be NULL) missing its value, an unknown option, or
 * an extra word. Returns CLI_EXIT_USAGE. */
int cli_bad_arg_msg(char *err, size_t errlen, const char *verb, const char *arg, const char *valued);
/* Parses a duration: seconds, or a number with s, m, h or d. 0 or -EINVAL. */
int cli_parse_duration(const char *s, long long *secs);
/* "45s", "12m", "3h05m", "2d". */
void cli_human_duration(long long secs, char *buf, size_t len);
/* Parses a size in MiB ("512", "2G" = 2048 MiB, "512M"). 0 or -EINVAL. */
int cli_parse_mib(const char *s, unsigned long long *mib);
/* The guest API's vsock port: 1024, or $VMM_API_PORT (0: the socket is
 * the API itself, as `guest-init --serve-unix` serves it in tests). */
unsigned cli_api_port(void);
struct json_writer;
struct sandbox_status;
/* One sandbox as a JSON object (ls --json, inspect). */
void cli_status_json(struct json_writer *w, const struct sandbox_status *st);
/* A control reply ({"ok":...}): 0 if ok, else prints its error. */
int cli_reply_ok(const char *verb, const char *reply);
/* mkdir -p PATH (each missing level with `mode`). 0 or -errno. */
int cli_mkdir_p(const char *path, unsigned mode);
/* Runs ARGV (PATH searched) and waits: its exit status, 128+N if signal
 * N ended it, 127 if it could not run, or -errno if it could not start.
 * QUIET: 0 leaves its output alone, 1 sends stdout to /dev/null, 2 stdout
 * and stderr. */
int cli_run_tool(const char *const *argv, int quiet);
/* The same, with CHILD_SETUP(ARG) run in the child after the redirection
 * and before the exec; if it fails the child exits 126. */
int cli_run_tool_in(const char *const *argv, int quiet, int (*child_setup)(void *), void *arg);
/* The same as 0 (it exited 0), -EIO (it failed) or -errno. */
int cli_run_tool_ok(const char *const *argv, int quiet);
/* The mount points below dir (with_self: and dir itself), from
 * /proc/self/mountinfo, the first max of them into out (NULL: only
 * counted) deepest (longest) first. The count, or -errno. */
int cli_mounts_under(const char *dir, int with_self, char (*out)[PATH_MAX], int max);
/* Detaches (MNT_DETACH) what is mounted below dir (with_self: and on dir),
 * deepest first; the count of mounts still there, or -errno. */
int cli_unmount_under(const char *dir, int with_self);
/* buf = the cache folder: $VMM_CACHE, else $XDG_CACHE_HOME/vmm, else
 * ~/.cache/vmm (not made). 0, -ENOENT (none of them set) or -ENAMETOOLONG. */
int cli_cache_root(char *buf, size_t len);
/* buf = the cache folder (made, 0755, if missing) + "/" + name. 0 or -errno. */
int cli_cache_file(const char *name, char *buf, size_t len);
/* Reads a small file into buf (NUL-terminated, at most len - 1 bytes):
 * a regular file with one link, never through a symbolic link. */
int cli_read_text(const char *path, char *buf, size_t len);
/* Writes text as the whole of path (created with mode, or truncated; never
 * through a symbolic link). 0 or -errno (a full disk: -ENOSPC). */
int cli_write_text(const char *path, const char *text, unsigned mode);
/* Opens dirfd/name for reading if it is a regular file with one link (not
 * a symbolic link, FIFO or device): the fd or -errno. */
int cli_open_regular(int dirfd, const char *name);
/* Is the directory open at fd (named path in messages) the caller's, with
 * none of the `forbidden` mode bits? 0 or -errno (logged). */
int cli_dir_check(const char *path, int fd, unsigned forbidden);
/* Opens dirfd/name as a directory (never through a symbolic link) and
 * checks it as cli_dir_check does: the fd or -errno (logged). */
int cli_open_dir(int dirfd, const char *name, const char *path, unsigned forbidden);
/* rm -r PATH without following any symbolic link in it: each level is
 * opened O_NOFOLLOW and emptied with unlinkat relative to its descriptor.
 * 0 or the first -errno. */
int cli_rm_tree(const char *path);
/* State (field 3) and start time (field 22, clock ticks after boot) of a
 * process, from /proc/PID/stat. 0 or -errno. */
int cli_proc_stat(pid_t pid, char *state, unsigned long long *start);
/* The host's memory in MiB: all of it and what is available now
 * (/proc/meminfo). 0 or -errno. */
int cli_host_mem_mib(unsigned long long *total, unsigned long long *avail);
/* Directory holding the running vmm binary. */
int cli_exe_dir(char *buf, size_t len);
/* Directory holding vmm's kernel/vmlinux, initramfs.cpio and
 * guest/guest-init: $VMM_LIB_DIR; else the binary's own (the build tree,
 * build/vmm) if they are there; else BINDIR/../lib/vmm (make install).
 * `looked` (if looked_len) says where it looked, for messages. 0 or -errno. */
int cli_lib_dir(char *buf, size_t len, char *looked, size_t looked_len);

struct sockaddr;
/* Is sa a loopback address (127/8, ::1)? */
int cli_sockaddr_loopback(const struct sockaddr *sa);
/* A listening TCP socket for --listen SPEC ("ADDR:PORT", "[V6]:PORT" or a
 * PORT alone: 127.0.0.1), numeric only; a non-loopback address only with
 * allow_remote. `who` prefixes the messages. The fd or -errno (logged). */
int cli_listen_tcp(const char *who, const char *spec, int allow_remote);
/* For a server's main loop: SIGPIPE ignored, SIGINT and SIGTERM blocked
 * (call it before the first thread starts, so every thread inherits the
 * mask) and read from the signalfd it returns (or -errno). */
int cli_stop_signals(void);
/* The address fd listens on as "127.0.0.1:PORT" or "[::1]:PORT". */
int cli_listen_addr(int fd, char *buf, size_t len);

/* The rest of the subsystem's interface. */
#include "cli/util/progress.h"

#endif
