/* The control socket of a running VMM (docs/control-api.md): a Unix stream
 * socket (mode 0600) that speaks two protocols, told apart by a
 * connection's first byte:
 *  - '{': JSON lines, one request and one reply per connection (the vmm
 *    CLI's): {"op":"info"}, {"op":"pause"}, {"op":"resume"},
 *    {"op":"snapshot","dir":ABS,"then":...}, {"op":"stop"};
 *  - anything else: HTTP/1.1 with keep-alive, the Firecracker-compatible
 *    API (fcapi.h, docs/openapi.yaml).
 * All connections are nonblocking and served on the thread that polls
 * them (vm_run's, or the pre-boot loop's) between other events: at most
 * CONTROL_MAX_CONNS at once (the oldest idle one makes room for a new
 * one), a request must arrive whole within CONTROL_TIMEOUT_MS of its
 * first byte, a reply must be taken within CONTROL_TIMEOUT_MS, and an idle
 * connection is closed after CONTROL_IDLE_MS. */
#ifndef VMM_CONTROL_H
#define VMM_CONTROL_H

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <sys/un.h>

struct vm;
struct fcapi;

#define CONTROL_MAX_REQUEST 8192   /* a JSON-lines request */
#define CONTROL_TIMEOUT_MS 5000
#define CONTROL_IDLE_MS 60000
#define CONTROL_MAX_CONNS 16
#define CONTROL_MAX_LISTEN 2
#define CONTROL_POLLFDS (CONTROL_MAX_LISTEN + CONTROL_MAX_CONNS)

struct control_conn {
	int fd;                 /* -1: a free slot */
	int mode;               /* 0 not known yet, 1 JSON lines, 2 HTTP */
	char *in;               /* HTTP_MAX_HEADER + max_body bytes */
	size_t in_len;
	char *out;              /* CONTROL_OUT_MAX bytes */
	size_t out_len, out_off;
	uint64_t req_start;     /* ms: first byte of the request in progress */
	uint64_t out_start;     /* ms: a reply is waiting to be taken since */
	uint64_t last_active;   /* ms */
	int sent_continue;      /* "100 Continue" went out for this request */
	int keep_alive;         /* of the request being answered later */
	int close_after;        /* close once out is sent */
	int waiting;            /* the reply comes from control_finish() */
	int eof;                /* the client shut its side */
};

struct control {
	int open;               /* control_open() succeeded, not closed yet */
	int lfd[CONTROL_MAX_LISTEN];
	char lpath[CONTROL_MAX_LISTEN][PATH_MAX]; /* any length: vmm/base/unixsock.h */
	unsigned nr_listen;
	const char *name;       /* the sandbox's name, for "info" and GET / */
	struct fcapi *api;      /* the HTTP API's state (heap) */
	char *body;             /* FCAPI_REPLY_MAX bytes: an HTTP reply's body (heap) */
	size_t max_body;        /* HTTP body limit (--http-api-max-payload-size) */
	struct control_conn conns[CONTROL_MAX_CONNS];
	int keep_paths;         /* control_close leaves the socket paths: a
				   standby keeper listens on them (cli/sandbox/sandbox_standby.h) */
	int inherited_fd;       /* control_open: listen on this socket, already
				   bound to path (a keeper's), instead; -1: none */
};

/* Listens on `path` (a stale socket there is replaced, anything else is
 * refused). 0 or -errno, logged. */
int control_open(struct control *c, const char *path, const char *name)
	__attribute__((warn_unused_result));
/* The same on `fd`, a socket already listening on `path` (handed over by
 * a standby keeper). 0 or -errno. */
int control_open_fd(struct control *c, int fd, const char *path, const char *name)
	__attribute__((warn_unused_result));
/* A second socket serving the same (vmm --api-sock PATH). 0 or -errno. */
int control_listen(struct control *c, const char *path) __attribute__((warn_unused_result));
/* Closes every connection and listener (unlinking the sockets). Safe on
 * a struct control that was only zeroed or never opened. */
void control_close(struct control *c);
/* control_close, then frees the Firecracker API state, its MMDS store
 * included. Only after the VM's devices stopped (vm_destroy): a network
 * device answers the guest's MMDS requests from that store. Safe twice. */
void control_free(struct control *c);

/* Fills p[] (room for CONTROL_POLLFDS) with what to wait for; lowers
 * *timeout_ms (-1: none) to the nearest connection deadline. Returns how
 * many entries it filled. */
unsigned control_pollfds(struct control *c, struct pollfd *p, int *timeout_ms);
/* Serves what poll() reported in p[0..n) and expires what timed out.
 * vm is NULL before the VM exists (the pre-boot API). */
void control_events(struct control *c, struct vm *vm, const struct pollfd *p, unsigned n);
/* Answers the request waiting on an action (InstanceStart, snapshot
 * load): fault NULL for success (204), else 400 with it; vm is the VM it
 * built (NULL if none), which later requests then see. */
void control_finish(struct control *c, struct vm *vm, const char *fault);
/* Handles one request line; writes the reply (NUL-terminated, no newline)
 * into out. Exposed for tests. */
void control_handle(struct vm *vm, const struct control *c, const char *req, size_t len,
		    char *out, size_t outlen);

/* Client side: sends `req` to the socket at `path`, reads the reply line
 * into out. 0 or -errno. */
int control_call(const char *path, const char *req, char *out, size_t outlen, int timeout_ms)
	__attribute__((warn_unused_result));

#endif
