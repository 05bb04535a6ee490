/* Standby on the CLI side (docs/snapshot.md, "Standby"): resuming a
 * sandbox in place, waking it on request (one restore for any number of
 * concurrent wakers), and the keeper: a small process that outlives a
 * suspended VMM, keeps its published ports listening and its TTLs
 * running, and restores it when a connection comes. */
#ifndef CLI_STANDBY_H
#define CLI_STANDBY_H

#include "cli/sandbox/sandbox.h"

/* The folder's files. */
#define STANDBY_ARGS "standby.args"   /* restore options a resume passes on (NUL-separated) */
#define STANDBY_LOCK "wake.lock"      /* flock: one restore at a time */
#define STANDBY_KEEPER "keeper"       /* the keeper's pid and start time */
#define STANDBY_SINCE "standby.since" /* Unix time the sandbox went on standby */

/* The environment variable a keeper hands its listening sockets over in:
 * "FD=SPEC;FD=SPEC" with SPEC a publish_format() text or "control". */
#define STANDBY_FDS_ENV "VMM_LISTEN_FDS"

/* The VMM, at start (before its threads' seccomp): writes STANDBY_ARGS. */
int standby_record_args(const struct sandbox *sb, char *const *args, unsigned n);
/* The VMM, before its allow-lists: starts its keeper with the listening
 * sockets fds[i] (spec[i] says which). 0 or -errno. */
int standby_keeper_spawn(const struct sandbox *sb, const int *fds, const char *const *spec, unsigned n);
/* An inherited listening socket for SPEC (STANDBY_FDS_ENV), made
 * close-on-exec, or -1. */
int standby_listen_fd(const char *spec);
/* Once every socket the restored VMM uses is claimed: the unclaimed ones
 * closed and STANDBY_FDS_ENV unset, so nothing the VMM starts inherits
 * either. */
void standby_listen_release(void);
/* Restores the standby sandbox in place and returns once its API answers
 * (or with the error, recorded in STANDBY_ERROR). The caller holds the
 * wake lock. 0 or -errno. */
int standby_restore(const struct sandbox *sb);
/* Wakes a sandbox on standby: takes the wake lock, and if it is still on
 * standby restores it (through its keeper if it has one, which holds the
 * published ports). Concurrent wakers wait for one restore, a waker that
 * finds it dead or starting while another's restore is under way too.
 * 0 or -errno. */
int standby_wake(const char *name);
/* Seconds the sandbox has been on standby (STANDBY_SINCE), -1 if unknown. */
long long standby_age(const struct sandbox *sb);
/* vmm __keeper NAME (internal). */
int standby_keeper_main(int argc, char **argv);

struct sandbox_addr;
/* Where the API of the sandbox named `arg` (or at socket path `arg`) is:
 * fills *a's socket and, for a name, its token unless token_given; a
 * sandbox on standby is woken first (the caller waits), a paused or
 * stopped one refused, saying why. 0 or -errno (logged). */
int sandbox_api_addr(const char *arg, int token_given, struct sandbox *sb, struct sandbox_addr *a);

#endif
