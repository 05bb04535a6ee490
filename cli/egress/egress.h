/* The egress proxy (docs/egress.md): it listens on the vsock host port
 * EGRESS_VSOCK_PORT (the Unix socket UDS_3128 the vsock device hands guest
 * connections to), checks each request against the sandbox's policy, adds
 * the credential and forwards it over TLS; every request is a JSON line in
 * the sandbox's egress.log. Threads in the VMM process, like publish.c. */
#ifndef CLI_EGRESS_H
#define CLI_EGRESS_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cli/egress/egress_http.h"
#include "cli/egress/egress_pol.h"

#include "vmm/base/ratelimit.h"

#define EGRESS_VSOCK_PORT 3128 /* and the guest's 127.0.0.1 TCP port */
#define EGRESS_MAX_CONNS EG_MAX_CONNS
/* The guest fetches the CA certificate here, through the proxy:
 * GET http://EGRESS_CA_HOST/ca.pem (guest-init does at boot and restore). */
#define EGRESS_CA_HOST "vmm-egress.invalid"
/* The proxy's control socket, in the sandbox folder (mode 0600): JSON
 * lines, {"op":"egress_set",...} and {"op":"egress_show"} (docs/egress.md,
 * "Changing the policy"), served wherever the proxy runs (the VMM, or the
 * jail's companion process). */
#define EGRESS_CTL_SOCK "egress.sock"
#define EGRESS_CTL_MAX (4u << 20) /* a request line */

struct egtls_ca;

struct egress {
	struct eg_holder pol;    /* the policy in force, and its SSL_CTX per rule (egress_pol.h) */
	int ca_shared;           /* the policy's "ca" at start: a change cannot change it */
	struct egtls_ca *ca;     /* interception's CA; NULL: no rule intercepts */
	char ca_dir[PATH_MAX];   /* where it is kept: the sandbox folder, or the host's (policy "ca") */
	pthread_mutex_t rl_lock; /* the request rate limit, and rate */
	struct ratelimit rl;
	unsigned rate;           /* the policy's requests per second, 0: none */
	_Atomic unsigned max_conns;
	char sandbox[64];
	char path[PATH_MAX];     /* the listening Unix socket (any length: vmm/base/unixsock.h) */
	char ctl_path[PATH_MAX]; /* the control socket (EGRESS_CTL_SOCK); "": next to the log */
	int fd, log_fd, ctl_fd;
	pthread_t thread;
	int started;
	int seccomp;             /* the threads run under SC_EGRESS (vmm/seccomp.h) */
	_Atomic unsigned conns;
};

/* Reads and checks the policy file, credentials included (from the
 * environment or files named in it). 0 or -errno, with a log line. */
int egress_load(struct egress *e, const char *policy_file, const char *sandbox)
	__attribute__((warn_unused_result));
/* The client side of egress_set: reads and checks policy_file as a whole
 * (credentials from this process's environment and files, CA files read
 * here) and returns the request line (malloc'd) that carries it, with the
 * credential values and CA certificates it names, to the control socket.
 * NULL with a log line naming what is wrong (never a value). */
char *egress_set_request(const char *policy_file);

/* Listens on VSOCK_UDS_3128, appends to log_path; serves on a thread with
 * every signal blocked. Loads or makes the CA in e->ca_dir (set it before;
 * "" : the folder of log_path) if a rule intercepts. 0 or -errno. */
int egress_start(struct egress *e, const char *vsock_uds, const char *log_path)
	__attribute__((warn_unused_result));
/* egress_start in two steps, for the jail's companion process, which
 * drops its privileges in between: the log and the listening socket (the
 * sandbox folder is root's), then the threads. 0 or -errno (logged). */
int egress_open(struct egress *e, const char *vsock_uds, const char *log_path)
	__attribute__((warn_unused_result));
int egress_launch(struct egress *e) __attribute__((warn_unused_result));
/* Stops accepting; connections in flight finish on their own. The struct
 * is freed by the last of them if any are left (egress_release). */
void egress_stop(struct egress *e);
/* Frees e once no connection uses it any more (else the last one does). */
void egress_release(struct egress *e);

#endif
