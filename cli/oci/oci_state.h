/* `vmm oci`'s state directory (docs/oci-runtime.md): ROOT/ID per
 * container, with state.json, a lock file and the VM's own sandbox
 * directory. The record outlives every runtime process; the status is
 * derived, never trusted: a container whose init proxy is gone is
 * stopped, whatever the file says (a crashed VMM). Also the pure
 * mappings the runtime spec and runc fix: exit status, signal names. */
#ifndef CLI_OCI_STATE_H
#define CLI_OCI_STATE_H

#include <limits.h>
#include <linux/limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OCI_ID_MAX 200
#define OCI_VERSION "1.0.2" /* the runtime spec version vmm implements */
#define OCI_DEFAULT_ROOT "/run/vmm-oci"

enum oci_status { OCI_CREATING, OCI_CREATED, OCI_RUNNING, OCI_STOPPED };

struct oci_state {
	char id[OCI_ID_MAX + 1];
	char bundle[PATH_MAX];
	pid_t pid;                    /* the init proxy, 0: none yet */
	unsigned long long pid_start; /* its start time (/proc/PID/stat field 22) */
	enum oci_status status;       /* as recorded: creating, created or running */
	char created[32];             /* RFC 3339, UTC */
	char annotations[8192];       /* the config's annotations, a JSON object */
	int exit_known;               /* the init proxy recorded its exit (ROOT/ID/exit) */
	int exit_status;              /* then: the status it exited with */
};

/* runc's rule for IDs: 1..OCI_ID_MAX of [A-Za-z0-9_+.-], not "." or "..". */
int oci_id_ok(const char *id);
const char *oci_status_name(enum oci_status s);
/* The status `state` reports: a recorded created/running stays so only
 * while its proxy lives (alive: the recorded pid exists with the recorded
 * start time); otherwise stopped. */
enum oci_status oci_status_now(enum oci_status recorded, int alive);

/* state.json for s (status as given): the runtime spec's state object
 * plus vmm's own members. Into buf; 0 or -E2BIG. */
int oci_state_render(const struct oci_state *s, enum oci_status status, int with_private, char *buf,
		     size_t len);
/* Parses what oci_state_render wrote (with_private). 0 or -EINVAL. */
int oci_state_parse(const char *text, size_t len, struct oci_state *s);

/* The container's folder: ROOT/ID. */
int oci_state_dir(const char *root, const char *id, char *buf, size_t len);
/* Makes ROOT (0700, parents as needed) and ROOT/ID (0700): -EEXIST if
 * the ID is taken. 0 or -errno. */
/* The state root is the caller's, not a symbolic link, and not writable
 * by group or others: 0 (or it does not exist yet), else -errno (logged). */
int oci_root_check(const char *root);
int oci_state_create(const char *root, const char *id);
/* Locks ROOT/ID (flock on ROOT/ID/lock; exclusive or shared), waiting
 * for another runtime call on the same ID. The fd or -errno (-ENOENT: no
 * such container). */
int oci_state_lock(const char *root, const char *id, int exclusive);
/* Writes ROOT/ID/state.json atomically (temporary, fsync, rename). */
int oci_state_save(const char *root, const struct oci_state *s);
/* Reads it. 0, -ENOENT, -EINVAL. */
int oci_state_load(const char *root, const char *id, struct oci_state *s);
/* The init proxy's exit status, kept in ROOT/ID/exit (written
 * atomically) so that a container run by hand, whose proxy is nobody's
 * child, still tells it: `state` shows it as "exitStatus" once stopped
 * (vmm's member; docs/oci-runtime.md). 0 or -errno. */
int oci_exit_record(const char *root, const char *id, int status) __attribute__((warn_unused_result));
/* Reads it into s->exit_known/exit_status (exit_known 0 when none). */
void oci_exit_load(const char *root, struct oci_state *s);
/* Is the recorded proxy alive (same pid and start time)? */
int oci_proxy_alive(const struct oci_state *s);

/* What a waiting parent reports for a child's wait status: its exit code,
 * or 128+N when signal N killed it (runc, the shells). */
int oci_exit_status(int wstatus);
/* A signal as `kill` takes it: "KILL", "SIGKILL", "9". The number
 * (1..64) or -EINVAL. */
int oci_signal_parse(const char *s);

#endif
