/* SHA-256 digests of OCI blobs (libcrypto), apart from cli/images/oci_image.c so
 * that the parsing there links without libcrypto: the lean `vmm` binary
 * (docs/perf.md, "Two binaries") carries oci_image.c for `vmm exec` on an
 * image's sandbox but no TLS library. */
#include "cli/images/oci_image.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

int oci_hash_init(struct oci_hash *h)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	h->ctx = c;
	if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(c);
		h->ctx = NULL;
		return -ENOMEM;
	}
	return 0;
}

void oci_hash_update(struct oci_hash *h, const void *p, size_t n)
{
	if (h->ctx && n)
		EVP_DigestUpdate(h->ctx, p, n);
}

void oci_hash_final(struct oci_hash *h, char out[OCI_DIGEST_MAX])
{
	unsigned char md[32];
	unsigned int n = 0, i;

	out[0] = '\0';
	if (!h->ctx)
		return;
	EVP_DigestFinal_ex(h->ctx, md, &n);
	strcpy(out, "sha256:");
	for (i = 0; i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
	oci_hash_free(h);
}

void oci_hash_free(struct oci_hash *h)
{
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

void oci_digest_buf(const void *p, size_t n, char out[OCI_DIGEST_MAX])
{
	struct oci_hash h;

	out[0] = '\0';
	if (oci_hash_init(&h))
		return;
	oci_hash_update(&h, p, n);
	oci_hash_final(&h, out);
}

int oci_digest_fd(int fd, char out[OCI_DIGEST_MAX])
{
	char buf[65536];
	struct oci_hash h;
	ssize_t n;

	if (oci_hash_init(&h))
		return -ENOMEM;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		oci_hash_update(&h, buf, (size_t)n);
	if (n < 0) {
		oci_hash_free(&h);
		return -errno;
	}
	oci_hash_final(&h, out);
	return 0;
}
