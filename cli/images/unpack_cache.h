/* The unpack cache (docs/images.md "Unpacking"): the root tree after
 * layers 1..k of an image, kept under $VMM_CACHE/unpack/CHAINID/root
 * (mode 0700: trees hold set-uid files) and keyed by the OCI chain ID of
 * those layers' diff IDs (image-spec config.md: ChainID(L1) = DiffID(L1),
 * ChainID(L1..Lk) = SHA256(ChainID(L1..Lk-1) + " " + DiffID(Lk))), so a
 * layer stack two images share is unpacked once: a pull or import starts
 * from the deepest chain in the cache and unpacks only the layers above. */
#ifndef CLI_UNPACK_CACHE_H
#define CLI_UNPACK_CACHE_H

#include <stddef.h>

#include "cli/images/oci_image.h"

/* chain[i] = ChainID of diff_ids[0..i] ("sha256:..."). */
void unpack_chain_ids(char (*diff_ids)[OCI_DIGEST_MAX], unsigned n, char (*chain)[OCI_DIGEST_MAX]);

/* $VMM_CACHE/unpack (created, 0700). */
int unpack_cache_dir(char *buf, size_t len);

/* How many layers (0..n) the deepest cached chain covers; when k > 0 its
 * tree is copied into stage (which must be empty). -errno if the copy
 * fails. */
int unpack_cache_restore(const char *cache, char (*chain)[OCI_DIGEST_MAX], unsigned n, const char *stage);

/* Records stage as the tree of chain (a copy; a concurrent writer's entry
 * is kept). 0 or -errno (the caller may go on without). */
int unpack_cache_store(const char *cache, const char *chain, const char *stage);

#endif
