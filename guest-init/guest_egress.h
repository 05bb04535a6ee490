/* The guest side of the egress proxy (docs/egress.md): a forwarder from
 * 127.0.0.1:PORT (TCP, in the sandbox) to the host's vsock port PORT,
 * where the VMM's proxy holds the policy and the credentials. */
#ifndef GUEST_EGRESS_H
#define GUEST_EGRESS_H

#define GEGRESS_STATE "/run/vmm-egress" /* the port it serves, once it listens */

/* The egress CA (docs/egress.md, "HTTPS"): the certificate alone, and
 * the system's bundle with it, which commands get as SSL_CERT_FILE,
 * REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and GIT_SSL_CAINFO. */
#define GEGRESS_CA "/run/vmm-egress-ca.pem"
#define GEGRESS_BUNDLE "/run/vmm-egress-bundle.pem"
#define GEGRESS_SYS_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define GEGRESS_LOCAL_CA "/usr/local/share/ca-certificates/vmm-egress.crt"

/* Starts the forwarder in a process of its own (reparented to PID 1) if
 * none runs yet, and installs the host proxy's CA (gegress_install_ca),
 * also when the forwarder was running (a clone: its own sandbox's CA
 * replaces the snapshot's). 0, or -errno (and nothing runs). */
int gegress_start(unsigned port);
/* Fetches the CA certificate from the host's proxy on vsock port (GET
 * http://vmm-egress.invalid/ca.pem) and installs it: GEGRESS_CA,
 * GEGRESS_LOCAL_CA if that folder exists, GEGRESS_SYS_BUNDLE (the
 * previous egress CA's block replaced) if it exists, and GEGRESS_BUNDLE.
 * A proxy that intercepts nothing (404): all of them removed. 0 or -errno. */
int gegress_install_ca(unsigned port);
/* The port the forwarder serves, 0 if none (it reads GEGRESS_STATE). */
unsigned gegress_port(void);

#endif
