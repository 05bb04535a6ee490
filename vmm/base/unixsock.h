/* Listening Unix sockets for the VMM (control socket, vsock's host side). */
#ifndef VMM_UNIXSOCK_H
#define VMM_UNIXSOCK_H

/* Listens on `path` (non-blocking, close-on-exec).
 * A stale socket there (nobody accepts on it: its VMM is gone) is
 * replaced; a live one or anything that is not a socket is refused.
 * `what` names the socket in the one log line a failure gets. Returns the
 * fd or -errno. `owner_only`: created with mode 0600 (else the umask's). */
int unix_listen(const char *path, int backlog, int owner_only, const char *what);

#endif
