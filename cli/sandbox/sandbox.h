/* The sandbox state directory: one folder per running sandbox, named, with
 * its control socket, vsock socket, API token, pid and per-clone disks.
 *   root: $VMM_STATE_DIR, else /run/vmm as root, else $XDG_RUNTIME_DIR/vmm,
 *   else /tmp/vmm-UID.
 * The state directory must be a real directory (not a symbolic link) of
 * the caller's with mode 0700, each sandbox folder one of the caller's
 * that nobody else can write: otherwise every verb refuses it. */
#ifndef CLI_SANDBOX_H
#define CLI_SANDBOX_H

#include <linux/limits.h>
#include <limits.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/un.h>

#define SANDBOX_NAME_MAX 64

struct sandbox {
	char name[SANDBOX_NAME_MAX + 1];
	char dir[PATH_MAX];
	/* The sockets' paths: any length (vmm/base/unixsock.h reaches one too
	 * long for sun_path through its folder). */
	char control[PATH_MAX];
	char vsock[PATH_MAX];
	char rw[PATH_MAX + 16]; /* where the VMM itself writes once it runs (exit,
			      synced, console.log): dir, or for a jailed VMM
			      dir/jail-rw, the only part its uid owns */
	char token[160];
	int created; /* this process made dir */
	pid_t pid;   /* the VMM's pid as the host sees it, 0: getpid() (jailed:
			it is pid 1 in its own namespace) */
	unsigned long long start_time; /* that process's start (clock ticks
					  after boot, /proc/PID/stat field 22),
					  0: read our own */
	unsigned long long exe_dev, exe_ino; /* the vmm binary (sandbox_create) */
};

/* The subfolder a jailed VMM's uid owns; the rest of the folder (pid,
 * process, token, config.json, jail-id) stays root's (docs/cli.md). */
#define SANDBOX_JAIL_RW "jail-rw"
/* Why the last resume from standby failed (standby.h; sandbox_status reads it). */
#define STANDBY_ERROR "standby.error"

/* Root of the state directory, created (0700) if missing. 0 or -errno. */
int sandbox_root(char *buf, size_t len);
/* The same for readers, which never create it: -ENOENT if it is missing. */
int sandbox_root_existing(char *buf, size_t len);
/* Writes dir/name whole (n bytes): a temporary file renamed over it, so a
 * reader never sees half of it and no link in its place is followed. 0 or
 * -errno. */
int sandbox_write_file(const char *dir, const char *name, const void *data, size_t n);
/* Valid: 1..64 of [A-Za-z0-9_.-], not starting with '.' or '-'. */
int sandbox_name_ok(const char *name);
/* A drive as `--drive` names it (cli/drive/drive.h): "NAME[:/GUEST/DIR][:ro]"
 * split into its name (1..35 of sandbox_name_ok's: it is the virtio-fs tag
 * too), where the guest mounts it (default /drives/NAME; a directory
 * guest-init can mount at) and read-only or not. 0 or -EINVAL. Checked
 * wherever a drive is named: run, the API, an image's defaults. */
int sandbox_drive_arg(const char *arg, char *name, size_t nlen, char *at, size_t alen, int *ro);
/* Labels (`vmm run --label KEY=VALUE`, docs/cli.md "Labels"): KEY is 1..63
 * of [A-Za-z0-9_.-/] starting with a letter or digit, VALUE 0..63 of
 * [A-Za-z0-9_.-]; at most SANDBOX_LABELS_MAX per sandbox. A list is kept
 * as "KEY=VALUE,..." (no character of either is a ',' or '='). */
#define SANDBOX_LABEL_KEY_MAX 63
#define SANDBOX_LABEL_VALUE_MAX 63
#define SANDBOX_LABELS_MAX 16
#define SANDBOX_LABELS_TEXT (SANDBOX_LABELS_MAX * (SANDBOX_LABEL_KEY_MAX + SANDBOX_LABEL_VALUE_MAX + 2))
int sandbox_label_ok(const char *kv);
/* Adds kv to the list text (a KEY already there gets the new VALUE). 0,
 * -EINVAL (not KEY=VALUE) or -E2BIG (past SANDBOX_LABELS_MAX). */
int sandbox_labels_add(char *text, size_t len, const char *kv);
/* Does the list hold exactly this KEY=VALUE? */
int sandbox_has_label(const char *labels, const char *kv);
/* Creates the folder for `name` (NULL: a generated "sb-XXXXXXXX").
 * Refuses a name in use, saying whether its VMM still runs. With adopt,
 * takes over the folder `vmm create` left for `vmm start`. 0 or -errno
 * (logged). */
int sandbox_create(struct sandbox *sb, const char *name, int adopt);
/* adopt: the folder of `vmm create`; SANDBOX_ADOPT_STANDBY: the folder of
 * a sandbox on standby whose VMM is gone (a resume in place). */
#define SANDBOX_ADOPT_STANDBY 2
/* What config.json records about a sandbox (docs/cli.md). */
struct sandbox_info {
	const char *kind;     /* "run" or "restore" */
	const char *source;   /* the kernel, or the snapshot directory */
	unsigned cpus;
	unsigned long long mem_mib;
	long long ttl_s;      /* 0: none */
	int detached;
	const char *publish;  /* "ADDR:HOST:GUEST,..." or "" */
	const char *net;      /* "TAP=MAC[/ADDR/PREFIX],..." or "" */
	const char *image;    /* "NAME:VERSION" it started from, or "" */
	const char *drives;   /* "NAME:GUESTDIR[:ro],..." (--drive) or "" */
	const char *labels;   /* "KEY=VALUE,..." (--label) or "" */
	long long created, expires; /* a resume keeps the record's (Unix s); 0: now, ttl_s */
};
/* --jail: makes dir/jail-rw (root's until jail_drop hands it over) and
 * points sb->rw at it. 0 or -errno (logged). */
int sandbox_make_rw(struct sandbox *sb);
/* Writes the token, pid, process record (pid, start time, binary) and
 * config.json files (0600). */
int sandbox_publish(struct sandbox *sb, const char *token, const struct sandbox_info *info);
/* Removes what sandbox_create and the VMM put in the folder, and it. */
void sandbox_remove(struct sandbox *sb);
/* A detached sandbox's VMM exits: its sockets and pid go, an `exit` file
 * records the status and reason; logs, config and disks stay for `vmm
 * logs` until `vmm rm` or `vmm prune`. */
void sandbox_exited(struct sandbox *sb, int status, const char *reason);

enum sandbox_state { SB_RUNNING, SB_PAUSED, SB_STARTING, SB_EXITED, SB_DEAD, SB_CREATED, SB_STANDBY };
const char *sandbox_state_name(enum sandbox_state s);

/* A sandbox as `ls` and `inspect` show it: config.json, and its state
 * probed (the pid alive and the control socket answering: running or
 * paused; an exit file: exited; otherwise dead, its VMM crashed). */
struct sandbox_status {
	struct sandbox sb;
	enum sandbox_state state;
	int pid;
	int exit_status;
	char exit_reason[256];
	char kind[16];
	char source[PATH_MAX];
	unsigned cpus;
	unsigned long long mem_mib;
	long long created, expires; /* Unix seconds; expires 0: never */
	int detached;
	char publish[PATH_MAX];
	char net[512];
	char image[80];
	char drives[1024];
	char labels[SANDBOX_LABELS_TEXT];
};
int sandbox_status(const char *name, struct sandbox_status *st);
/* Stops a running sandbox: through the guest (the API's shutdown) and
 * up to graceful_ms for it to power off, then the control socket's stop,
 * then SIGKILL. 0 once its VMM is gone. */
int sandbox_stop(struct sandbox_status *st, unsigned graceful_ms);
/* Removes a sandbox's folder (its VMM must be gone), following no
 * symbolic link in it. */
void sandbox_delete(struct sandbox *sb);
/* The pid of the sandbox's VMM if the process the folder's record names
 * is alive and is it (the recorded start time and vmm binary), else 0. */
pid_t sandbox_vmm_pid(const char *dir);
/* Names in the state directory, sorted; *names is malloc'd (free each and
 * it). Returns the count or -errno. */
int sandbox_list(char ***names);
/* A sandbox named on the command line: a name in the state directory, or
 * a path (containing '/') to its vsock socket (older form; control is then
 * empty). Fills the paths and reads the token. 0 or -errno (logged). */
int sandbox_lookup(struct sandbox *sb, const char *arg);

struct sandbox_addr; /* api_client.h; sandbox_api_addr is standby.h's */


/* Sends one control request (docs/control-api.md) to a named sandbox and
 * reads the reply line. 0 or -errno (logged). */
int sandbox_control(const char *arg, const char *req, char *out, size_t outlen, int timeout_ms);

/* The rest of the subsystem's interface. */
#include "cli/sandbox/api_client.h"
#include "cli/sandbox/cp_files.h"
#include "cli/sandbox/disklock.h"
#include "cli/sandbox/sandbox_standby.h"

#endif
