/* Host side of the sandbox API (docs/api.md): connects through the
 * sandbox's vsock Unix socket and speaks the framed protocol. The exec/cp
 * verbs use it today; the lifecycle CLI and the control API will too. */
#ifndef CLI_API_CLIENT_H
#define CLI_API_CLIENT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/wire/json.h"

struct sandbox_addr {
	const char *uds;     /* the sandbox's vsock Unix socket (any length) */
	int uds_dir;         /* > 0: an O_PATH descriptor of uds's folder, to reach
				a path too long for sun_path from a thread whose
				seccomp filter allows no open (the publish
				threads, the run helper: vmm/base/unixsock.h);
				0: opened when needed */
	unsigned port;       /* guest API port (1024); 0: no CONNECT handshake */
	const char *token;   /* access token, or NULL */
	int cancel_fd;       /* > 0: an fd that turns readable when a long call
				(an MCP exec) is to give up (the MCP HTTP
				server's shutdown); 0: none */
};

/* Opens a connection to the API and sends a REQUEST with `json` (an object
 * without "v"/"token": they are added). Returns the fd or -errno. */
int api_open(const struct sandbox_addr *a, const char *json_fields);
/* The same with "v":version (2 for the version 2 operations; an older
 * guest-init refuses 2, so version 1 operations go as 1). */
int api_open_v(const struct sandbox_addr *a, int version, const char *json_fields);

struct api_error {
	int eno;
	char name[32];
	char message[256];
};

/* Reads one RESULT (or ERROR) frame into buf as a NUL-terminated string.
 * 0 on RESULT, -1 on ERROR (err filled), -2 on a broken connection. */
int api_result(int fd, char *buf, size_t size, struct api_error *err);

/* An ERROR frame's payload into err. */
void api_parse_error(const char *text, size_t len, struct api_error *err);
/* Errors: every call below that fails returns -errno (or its documented
 * status) with one line in err[errlen] saying why, for the verb to print
 * ("vmm: " before it); none prints (docs/ARCHITECTURE.md, "Errors"). */
/* "WHAT: message (ENAME)" into err; returns -e->eno. */
int api_error_msg(char *err, size_t errlen, const char *what, const struct api_error *e);
/* "cannot reach the sandbox API at UDS: strerror" into err; returns fd
 * (the -errno api_open gave). */
int api_unreachable(char *err, size_t errlen, const struct sandbox_addr *a, int fd);

/* Waits until the API answers health (or `timeout_ms` passes). 0 or -1;
 * err set when the API answered with an error, else "". */
int api_wait_ready(const struct sandbox_addr *a, unsigned timeout_ms, char *err, size_t errlen);

struct exec_opts {
	const char *const *argv;
	const char *const *env;   /* NAME=value, NULL-terminated, may be NULL */
	const char *cwd;
	const char *user;         /* USER[:GROUP] to run as (NULL: root) */
	int tty;                  /* a pty in the guest, raw mode here */
	int stdin_pass;           /* stream our stdin to the command */
	uint64_t timeout_ms;
	int detach;               /* v2: a detached process (api_start) */
	const char *tag;          /* detach: its tag, or NULL */
	uint64_t ring_bytes;      /* detach: output kept per stream (0: default) */
	int leave_on_signal;      /* api_session: SIGINT/TERM/HUP end the session, not the command */
	int forward_usr;          /* api_session: SIGUSR1/USR2 are forwarded too (vmm oci's proxies) */
	pid_t interrupt_pid;      /* >0: a second Ctrl-C sends it VM_INTERRUPT_SIGNAL
				     (vmm run -- CMD: the VMM, which stops the
				     sandbox as if interrupted; vmm/vm.h) */
};

/* The request fields for o (without "v"/"token"). 0 or -E2BIG. */
int api_exec_fields(const struct exec_opts *o, char *buf, size_t size);

/* Runs a command, streaming its output to our stdout/stderr and our stdin
 * to it (the product: the guest's output passed through); Ctrl-C
 * (SIGINT), SIGTERM and SIGHUP are forwarded. Returns the exit status to
 * use (the command's, 128+N for signal N), or -errno on a failure before
 * the command ran. err: why it failed, or with a status, a note for the
 * user when the command timed out or crashed ("" when none). */
int api_exec(const struct sandbox_addr *a, const struct exec_opts *o, char *err, size_t errlen);
/* The streaming half of exec on an open connection (exec, attach, logs):
 * output to our stdout/stderr until EXIT (its status) or END (0); stdin,
 * signals and resizes as o says. `what` names the command in messages;
 * err as for api_exec. */
int api_session(int fd, const struct exec_opts *o, const char *what, char *err, size_t errlen);

/* Version 2: detached processes (cli/sandbox/api_procs.c). `sel` is a process id
 * (digits) or tag. */
/* Starts o (o->detach set): its id in *id. 0 or -errno. */
int api_start_id(const struct sandbox_addr *a, const struct exec_opts *o, int64_t *id, char *err, size_t errlen);
/* A one-shot version 2 request: its RESULT in out. 0 or -errno. */
int api_call2(const struct sandbox_addr *a, const char *fields, const char *what, char *out, size_t outlen,
	      char *err, size_t errlen);
/* Adds "id":N or "tag":S for sel. 0 or -EINVAL (neither). */
struct json_writer;
int api_selector(struct json_writer *w, const char *sel);
/* attach (stdin_pass: stream our stdin to it) or logs (follow): the
 * output, then its exit status (attach, or logs of an exited process). */
int api_attach(const struct sandbox_addr *a, const char *sel, int stdin_pass, int tty, char *err, size_t errlen);
/* attach that stands for the process (vmm oci's init proxy): SIGINT,
 * TERM, HUP, QUIT, USR1 and USR2 sent to us go to it, and the session
 * lasts until it exits. Its exit status, or -errno. */
int api_attach_forward(const struct sandbox_addr *a, const char *sel, int tty, char *err, size_t errlen);
int api_logs(const struct sandbox_addr *a, const char *sel, int follow, char *err, size_t errlen);
/* watch: events as lines on out (the product) until interrupted or out's
 * reader leaves. -errno when the watch ends otherwise. */
int api_watch(const struct sandbox_addr *a, const char *path, int recursive, int json, FILE *out, char *err,
	      size_t errlen);


/* After a restore: gives the guest the host's wall-clock time and 32
 * bytes of fresh entropy (getrandom). 0 or -errno. */
/* nets[0..nr_nets): interfaces the guest reconfigures after the clock and
 * entropy ("OLDMAC[,mac=NEW][,ip=A/P][,gw=G][,dns=D]", guest-init/net.h). */
int api_sync(const struct sandbox_addr *a, const char *const *nets, unsigned nr_nets, unsigned egress_port,
	     char *err, size_t errlen);
/* A restored clone's sync sent at once, before the guest says it is back
 * (its vsock holds the connection until the guest handled the transport
 * reset: devices/virtio_vsock.c): 0, -errno when the guest answered with
 * an error (err says it), or API_UNREACHED, quietly, when no API answered
 * (a snapshot taken before the API listened): then wait and api_sync. */
#define API_UNREACHED 1
/* *forked: 1 when the guest said a worker was forked for the sync (the
 * snapshot held no spare: guest-init), else 0. */
int api_sync_first(const struct sandbox_addr *a, const char *const *nets, unsigned nr_nets,
		   unsigned egress_port, int *forked, char *err, size_t errlen);

/* Asks the guest to power off. 0 or -errno. */
int api_shutdown(const struct sandbox_addr *a, char *err, size_t errlen);

#endif
