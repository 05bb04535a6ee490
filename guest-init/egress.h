/* The guest side of the egress proxy (docs/egress.md): a forwarder from
 * 127.0.0.1:PORT (TCP, in the sandbox) to the host's vsock port PORT,
 * where the VMM's proxy holds the policy and the credentials. */
#ifndef GUEST_EGRESS_H
#define GUEST_EGRESS_H

#define GEGRESS_STATE "/run/vmm-egress" /* the port it serves, once it listens */

/* Starts the forwarder in a process of its own (reparented to PID 1) if
 * none runs yet. 0, or -errno (and nothing runs). */
int gegress_start(unsigned port);
/* The port the forwarder serves, 0 if none (it reads GEGRESS_STATE). */
unsigned gegress_port(void);

#endif
