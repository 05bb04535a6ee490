/* Guest memory served by a page-fault handler: the `Uffd` memory backend
 * of PUT /snapshot/load, as Firecracker specifies it
 * (docs/snapshotting/handling-page-faults-on-snapshot-resume.md there;
 * docs/control-api.md here).
 *
 * The VMM maps guest RAM anonymous and private, populates nothing,
 * creates a userfaultfd (the userfaultfd(2) call, or /dev/userfaultfd's
 * USERFAULTFD_IOC_NEW where the call is refused to an unprivileged user),
 * registers every region in MISSING mode with UFFD_FEATURE_EVENT_REMOVE
 * (the balloon's MADV_DONTNEED then reaches the handler as
 * UFFD_EVENT_REMOVE), connects to the handler's Unix socket and sends one
 * message: a JSON array of GuestRegionUffdMapping objects
 *
 *   [{"base_host_virt_addr":H,"size":S,"offset":O,"page_size":4096,
 *     "page_size_kib":4096}, ...]
 *
 * (offset: where the region's bytes start in the snapshot's memory file;
 * page_size_kib is Firecracker's deprecated duplicate, in bytes despite
 * its name), with the userfaultfd as SCM_RIGHTS ancillary data. Nothing
 * else is ever sent. The VMM keeps its copy of the userfaultfd and the
 * connection for the VM's life, as Firecracker does: a handler that dies
 * leaves faults waiting (the VM hangs) rather than silently reading zero
 * pages. */
#ifndef VMM_UFFD_H
#define VMM_UFFD_H

#include <stddef.h>

#include "vmm/base/gm.h"

/* The handler's two descriptors in the VMM; -1 when none. */
struct uffd_conn {
	int uffd;  /* the userfaultfd (O_CLOEXEC | O_NONBLOCK) */
	int sock;  /* the connection to the handler */
};

/* Guest memory handed to a handler, until vm_create takes it over. */
struct uffd_backend {
	struct gm gm;          /* anonymous, every region registered */
	struct uffd_conn conn;
};

void uffd_conn_init(struct uffd_conn *c);
void uffd_conn_close(struct uffd_conn *c);
void uffd_backend_init(struct uffd_backend *b);
/* gm_destroy and uffd_conn_close; a no-op on an empty (or taken) one. */
void uffd_backend_close(struct uffd_backend *b);

/* The handshake's JSON for gm's regions, NUL-terminated: its length, or
 * -ENOSPC if `cap` is too small. Pure (unit tests). */
int uffd_mappings_json(const struct gm *gm, char *out, size_t cap) __attribute__((warn_unused_result));

/* A userfaultfd with UFFD_FEATURE_EVENT_REMOVE and the API handshake
 * done: the fd, or -errno (both ways refused: the call's error, unless
 * /dev/userfaultfd exists and said something more useful). */
int uffd_create(void) __attribute__((warn_unused_result));

/* Sends `msg` with `fd` as SCM_RIGHTS on the connected stream `sock`
 * (MSG_NOSIGNAL: a handler that closed early is -EPIPE, not SIGPIPE).
 * 0 or -errno. */
int uffd_send_handshake(int sock, const char *msg, size_t len, int fd) __attribute__((warn_unused_result));

/* The whole backend for `nr` regions: maps, registers, connects to the
 * handler at `sock_path` and sends the handshake. 0, or -errno with *b
 * empty (nothing mapped, nothing open) and `why` holding Firecracker's
 * fault message ("Load snapshot error: ... Error creating guest memory
 * from uffd: Failed to connect to UDS Unix stream: ..."). */
int uffd_backend_open(struct uffd_backend *b, const char *sock_path, const struct gm_region *regions,
		      unsigned nr, char *why, size_t why_len) __attribute__((warn_unused_result));

#endif
