/* The egress proxy's TLS interception (docs/egress.md, "HTTPS"): the
 * sandbox's CA (EC P-256, made at first use, kept on the host only),
 * leaf certificates minted per host and cached, and the TLS server side
 * of an intercepted tunnel. */
#ifndef CLI_EGRESS_TLS_H
#define CLI_EGRESS_TLS_H

#include <openssl/ssl.h>
#include <time.h>

#include "cli/egress/egress_tunnel.h"

#define EGTLS_CA_FILE "egress-ca.pem"  /* key and certificate, mode 0600 */
#define EGTLS_LEAF_DAYS 1               /* a leaf's validity */
#define EGTLS_CACHE 64                  /* leaves kept, one per host */

struct egtls_ca;

/* Loads DIR/egress-ca.pem, or makes a new CA there (mode 0600; DIR is
 * made 0700 if missing). cn names it ("vmm egress CA for NAME"). 0 or
 * -errno, with a log line. Reads files: call it before the seccomp
 * filter. */
int egtls_ca_open(struct egtls_ca **out, const char *dir, const char *cn) __attribute__((warn_unused_result));
void egtls_ca_free(struct egtls_ca *ca);
/* The CA certificate, PEM: what the guest installs. */
const char *egtls_ca_pem(const struct egtls_ca *ca);

/* A leaf for host (SAN = host: a DNS name, or an IP address for an IPv4
 * literal) valid from an hour before now for EGTLS_LEAF_DAYS, signed by
 * the CA; from the cache while it has more than half its life left. A
 * reference the caller frees (X509_free), or NULL. */
X509 *egtls_leaf(struct egtls_ca *ca, const char *host, time_t now);
/* The key every leaf of this CA certifies (not a reference). */
EVP_PKEY *egtls_leaf_key(const struct egtls_ca *ca);

/* The TLS server side of an intercepted tunnel to host on fd: a leaf for
 * host, ALPN http/1.1 only, no renegotiation, a ClientHello whose
 * server_name (if any) is host. The handshake's SSL, or NULL with *why. */
SSL *egtls_accept(struct egtls_ca *ca, int fd, const char *host, const char **why);

/* A stream over an SSL whose socket has SO_RCVTIMEO set (a timeout reads
 * as -ETIMEDOUT). */
void egtls_stream(SSL *ssl, struct eg_stream *s);

#endif
