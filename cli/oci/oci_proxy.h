/* The host processes that stand for a vmm oci container's processes
 * (docs/oci-runtime.md, "How a container runs"): the init proxy, whose
 * pid create writes to --pid-file, and an exec's proxy. Each carries the
 * engine's stdio (or a pty whose master went over --console-socket) to
 * its process in the guest, forwards the signals sent to it, and exits
 * with the process's status (128+N when signal N killed it). */
#ifndef CLI_OCI_PROXY_H
#define CLI_OCI_PROXY_H

#include <stddef.h>
#include <sys/types.h>

#include "cli/oci/oci_pod.h"
#include "cli/oci/oci_spec.h"
#include "cli/oci/oci_vm.h"
#include "cli/sandbox/sandbox.h"

/* The exec request fields for a container process p: argv, env, cwd,
 * user, groups, rlimits, no_new_privs, chrooted into w's root, in w's
 * cgroup and mount namespace (a pod's container); detach_init starts it
 * detached with w's tag. 0 or -E2BIG. */
int oci_process_fields(const struct oci_process *p, const struct oci_where *w, int detach_init, char *buf,
		       size_t len);

/* --console-socket: a pty here (rows x cols when both are set), its
 * master sent over the socket (SCM_RIGHTS, as runc does). The slave, or
 * -errno. */
int oci_console_setup(const char *sock, unsigned rows, unsigned cols);
/* In a proxy: a new session, slave its controlling terminal and stdio. */
void oci_console_attach(int slave);

/* Writes pid to path atomically (a temporary file renamed). 0 or -errno. */
int oci_write_pid_file(const char *path, pid_t pid) __attribute__((warn_unused_result));

/* The init proxy, run in create's child: waits until start opens fifo,
 * starts p detached (tag "init", or its own in a pod), follows it with
 * our stdio, stops the VM when it ends (in a pod: ends what is left of
 * the container's processes) and returns the exit status to exit with;
 * why: what went wrong (the process did not run, the session broke), or
 * "". */
int oci_init_proxy(const struct oci_ctx *c, const char *id, const struct oci_process *p, const char *fifo, char *why,
		   size_t whylen);

/* An exec's proxy: slave (>= 0) as its terminal, then the exec request
 * fields on a, followed to its end. The exit status; -EHOSTUNREACH
 * when the VM cannot be reached, another -errno when the session
 * breaks. err: why, or a note on the process's end ("" when none). */
int oci_exec_proxy(const struct sandbox_addr *a, const char *fields, const struct oci_process *p, int slave,
		   char *err, size_t errlen);

#endif
