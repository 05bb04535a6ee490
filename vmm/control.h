/* The control socket of a running VMM (docs/control-api.md): a Unix stream
 * socket (mode 0600) on which a control plane, or the vmm CLI, sends one
 * JSON request per line and reads one JSON reply line:
 *   {"op":"info"}                  state, vCPUs, memory, pid
 *   {"op":"pause"} {"op":"resume"}
 *   {"op":"snapshot","dir":ABS,"then":"resume"|"pause"|"stop"}
 *   {"op":"stop"}                  stop the VM now (exit status 0)
 * Requests are served on vm_run's thread between guest events, one
 * connection at a time, with a receive timeout so a silent client cannot
 * hold the VMM. */
#ifndef VMM_CONTROL_H
#define VMM_CONTROL_H

#include <sys/un.h>

struct vm;

#define CONTROL_MAX_REQUEST 8192
#define CONTROL_TIMEOUT_MS 5000

struct control {
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *name; /* the sandbox's name, for "info" */
};

/* Listens on `path` (a stale socket there is replaced, anything else is
 * refused). 0 or -errno, logged. */
int control_open(struct control *c, const char *path, const char *name)
	__attribute__((warn_unused_result));
void control_close(struct control *c);
/* Accepts one connection and serves its requests until it closes or
 * times out. Called by vm_run when c->fd is readable. */
void control_serve(struct control *c, struct vm *vm);
/* Handles one request line; writes the reply (NUL-terminated, no newline)
 * into out. Exposed for tests. */
void control_handle(struct vm *vm, const struct control *c, const char *req, size_t len,
		    char *out, size_t outlen);

/* Client side: sends `req` to the socket at `path`, reads the reply line
 * into out. 0 or -errno. */
int control_call(const char *path, const char *req, char *out, size_t outlen, int timeout_ms)
	__attribute__((warn_unused_result));

#endif
