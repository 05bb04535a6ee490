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

#include "egress_http.h"

#include "../vmm/ratelimit.h"

#define EGRESS_VSOCK_PORT 3128 /* and the guest's 127.0.0.1 TCP port */
#define EGRESS_MAX_CONNS EG_MAX_CONNS
/* The guest fetches the CA certificate here, through the proxy:
 * GET http://EGRESS_CA_HOST/ca.pem (guest-init does at boot and restore). */
#define EGRESS_CA_HOST "vmm-egress.invalid"

struct egtls_ca;

struct egress {
	struct eg_policy policy;
	void *tls[EG_MAX_RULES]; /* SSL_CTX per rule */
	struct egtls_ca *ca;     /* interception's CA; NULL: no rule intercepts */
	char ca_dir[PATH_MAX];   /* where it is kept: the sandbox folder, or the host's (policy "ca") */
	pthread_mutex_t rl_lock; /* the request rate limit */
	struct ratelimit rl;
	char sandbox[64];
	char path[108];          /* the listening Unix socket */
	int fd, log_fd;
	pthread_t thread;
	int started;
	int seccomp;             /* the threads run under SC_EGRESS (vmm/seccomp.h) */
	_Atomic unsigned conns;
};

/* Reads and checks the policy file, credentials included (from the
 * environment or files named in it). 0 or -errno, with a log line. */
int egress_load(struct egress *e, const char *policy_file, const char *sandbox)
	__attribute__((warn_unused_result));
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
