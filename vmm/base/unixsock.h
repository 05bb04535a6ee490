/* Unix sockets for the VMM and its CLI at paths of any length (control
 * socket, vsock's host side, the ready notice, uffd, the sandbox API).
 *
 * sockaddr_un's sun_path holds 108 bytes (unix(7)); a state directory
 * under a long root (containerd's /run/containerd/vmm-oci/k8s.io/<64 hex>
 * for a Kubernetes container) passes that. A path that does not fit is
 * reached through its folder: an O_PATH descriptor N of the folder and
 * "/proc/self/fd/N/NAME" as sun_path, which the kernel resolves like any
 * path (proc(5), /proc/pid/fd: the links name the open folder). A path
 * that fits is used as it is, so a process without /proc (a jail that
 * mounts none) still reaches short paths; a long one is refused there,
 * saying why. The basename must fit in what the prefix leaves (about 80
 * bytes). */
#ifndef VMM_BASE_UNIXSOCK_H
#define VMM_BASE_UNIXSOCK_H

/* Listens on `path` (non-blocking, close-on-exec).
 * A stale socket there (nobody accepts on it: its VMM is gone) is
 * replaced; a live one or anything that is not a socket is refused.
 * `what` names the socket in the one log line a failure gets. Returns the
 * fd or -errno. `owner_only`: created with mode 0600 (else the umask's). */
int unix_listen(const char *path, int backlog, int owner_only, const char *what);

/* Connects a SOCK_STREAM socket to `path`; `flags` are socket(2)'s type
 * flags (SOCK_NONBLOCK; SOCK_CLOEXEC is always set). The fd or -errno
 * (-ENAMETOOLONG: too long and no /proc to go through the folder). */
int unix_connect(const char *path, int flags);

/* The same through `dir_fd`, an O_PATH descriptor of path's folder
 * (unix_dir_open), when path is too long: for threads whose seccomp filter
 * allows connect() but no open (vsock's device loop, the publish threads,
 * the run helper). dir_fd -1: as unix_connect. */
int unix_connect_at(int dir_fd, const char *path, int flags);

/* An O_PATH, close-on-exec descriptor of the folder `path` is in (its
 * dirname; "." for a bare name), or -errno. */
int unix_dir_open(const char *path);

/* Whether `path` fits in sun_path as it is (then no folder is needed). */
int unix_path_fits(const char *path);

#endif
