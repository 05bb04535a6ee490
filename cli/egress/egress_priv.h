/* The egress proxy's files' shared internals (egress.c, egress_ctl.c):
 * not for other modules. */
#ifndef CLI_EGRESS_PRIV_H
#define CLI_EGRESS_PRIV_H

#include "cli/egress/egress.h"

#define POLICY_MAX (1 << 20)

/* Where a policy's credentials and CA files come from: this process's
 * environment and files (at start, and in `vmm egress set`), or the
 * values a set request carries (in the proxy). */
struct pol_src {
	struct eg_cred_source cred;
	char *(*ca)(const char *path, void *ctx); /* the PEM text of a ca_file */
};

/* A file of at most max bytes, NUL-terminated (malloc'd), or NULL. */
char *read_small_file(const char *path, size_t max, size_t *len);
char *cred_env(const char *name, void *ctx);
char *cred_file(const char *path, void *ctx);
char *ca_read(const char *path, void *ctx);
/* A policy's text, checked as a whole, into a new snapshot with the TLS
 * context of each rule. 0, or -errno with why[] filled. */
int pol_build(const char *text, size_t len, const struct pol_src *src, struct eg_live **out, char *why, size_t wl);
/* One request on the control socket (accepted fd) and its reply; closes fd. */
void egress_serve_ctl(struct egress *e, int fd);

#endif
