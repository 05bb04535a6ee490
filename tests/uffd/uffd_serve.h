/* A page-fault handler for PUT /snapshot/load's Uffd memory backend
 * (vmm/base/uffd.h, docs/control-api.md), after Firecracker's example "valid"
 * handler: it takes the VMM's one handshake message (the JSON array of
 * GuestRegionUffdMapping objects, the userfaultfd as SCM_RIGHTS), checks
 * the regions against the snapshot's memory file, and serves every
 * missing-page fault with UFFDIO_COPY of that page from the file.
 * UFFD_EVENT_REMOVE (the balloon's MADV_DONTNEED) unregisters the range,
 * so the kernel gives the guest zero pages there afterwards, as
 * Firecracker's docs ask. It serves until the VMM closes the connection.
 *
 * Used by tests/uffd/handler.c (the uffd_handler program) and the unit
 * test tests/unit/vmm/base/test_uffd.c. */
#ifndef TESTS_UFFD_SERVE_H
#define TESTS_UFFD_SERVE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct uffd_serve_stats {
	unsigned regions;     /* in the handshake */
	uint64_t bytes;       /* their total size */
	uint64_t pages;       /* faults served from the file */
	uint64_t removes;     /* UFFD_EVENT_REMOVE events */
	pid_t vmm_pid;        /* SO_PEERCRED of the connection */
};

/* Serves the VMM connected on `conn` from the memory file `mem_path`
 * until the VMM closes the connection. `log` (or NULL) gets one line once
 * the handshake is in ("mappings: N regions, M bytes from PID"). 0, or
 * -errno after a line on stderr (a bad handshake: no descriptor, bad JSON,
 * regions that do not fit the file). */
int uffd_serve(int conn, const char *mem_path, struct uffd_serve_stats *st, FILE *log);

#endif
