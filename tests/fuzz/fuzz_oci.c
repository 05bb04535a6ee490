/* libFuzzer target: what vmm image pull/import parse from a registry or an
 * archive before trusting it: manifests, indexes, image configs (and the
 * defaults that come out of them, round-tripped through config.json),
 * references, WWW-Authenticate challenges and credentials files, the
 * realm a challenge names; tar headers and pax records block by block.
 * Oracles: a parsed manifest's digests are all well-formed sha256 digests
 * (so blob paths never leave the cache) and its sizes are under
 * OCI_SIZE_ABSURD, a manifest the size caps pass claims no more than they
 * allow, a parsed config's defaults survive config.json unchanged, a tar
 * header's name is NUL-terminated inside its buffer, and credentials go
 * to a realm only on the registry's host or a host the file names. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/images/oci_image.h"
#include "cli/images/oci_unpack.h"
#include "cli/images/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct oci_manifest m;
	static struct oci_defaults d, back;
	static char diff[OCI_MAX_LAYERS][OCI_DIGEST_MAX], json[1 << 16];
	char err[256], path[512];
	const char *text = (const char *)data;
	struct oci_desc desc;
	struct oci_ref ref;
	unsigned n, i;

	if (len > (1 << 20))
		return 0;
	(void)oci_doc_kind(text, len, "application/vnd.oci.image.index.v1+json");
	if (oci_parse_index(text, len, len & 1, &desc, err, sizeof(err)) == 0 && !oci_digest_ok(desc.digest))
		abort();
	if (oci_parse_manifest(text, len, &m, err, sizeof(err)) == 0) {
		struct oci_limits l;
		uint64_t total = (uint64_t)m.config.size;

		if (!oci_digest_ok(m.config.digest) || m.config.size < 0 || (uint64_t)m.config.size > OCI_SIZE_ABSURD)
			abort();
		for (i = 0; i < m.nlayers; i++) {
			if (!oci_digest_ok(m.layers[i].digest) ||
			    oci_blob_path("/c", m.layers[i].digest, path, sizeof(path)) || strstr(path, "..") ||
			    m.layers[i].size < 0 || (uint64_t)m.layers[i].size > OCI_SIZE_ABSURD)
				abort();
			total += (uint64_t)m.layers[i].size;
		}
		(void)oci_limits_init(&l, NULL, 0);
		l.blob = 1u << 20;
		l.image = 3u << 20;
		if (oci_limits_check(&l, &m, err, sizeof(err)) == 0) {
			if (total > l.image || (uint64_t)m.config.size > l.blob)
				abort();
			for (i = 0; i < m.nlayers; i++)
				if ((uint64_t)m.layers[i].size > l.blob)
					abort();
		}
	}
	if (oci_parse_config(text, len, &d, diff, OCI_MAX_LAYERS, &n, err, sizeof(err)) == 0) {
		for (i = 0; i < n; i++)
			if (!oci_digest_ok(diff[i]))
				abort();
		if (oci_defaults_json(&d, json, sizeof(json)) == 0) {
			if (oci_defaults_parse(json, strlen(json), &back) || back.nenv != d.nenv || back.ncmd != d.ncmd ||
			    back.nentry != d.nentry || back.nports != d.nports || back.mem_mib != d.mem_mib ||
			    back.cpus != d.cpus || strcmp(back.workdir, d.workdir) || strcmp(back.user, d.user))
				abort();
			for (i = 0; i < d.nenv; i++)
				if (strcmp(back.env[i], d.env[i]))
					abort();
		}
	}
	(void)oci_defaults_parse(text, len, &back);
	{
		char *s = malloc(len + 1);
		char scheme[32], realm[256], service[256], scope[256], out[512];

		if (!s)
			return 0;
		memcpy(s, data, len);
		s[len] = '\0';
		if (oci_parse_ref(s, &ref) == 0 && ((ref.digest[0] && !oci_digest_ok(ref.digest)) || strstr(ref.repo, "..")))
			abort();
		(void)reg_parse_challenge(s, scheme, sizeof(scheme), realm, sizeof(realm), service, sizeof(service), scope,
					  sizeof(scope));
		(void)reg_creds_lookup(s, "docker.io", out, sizeof(out));
		{
			/* the input as a realm: registry credentials ("u:p") only to its own host */
			static const struct oci_ref reg = { .registry = "reg.example:5000", .api_host = "reg.example:5000",
							    .repo = "a/b" };
			char host[300];

			if (reg_realm_creds("u:p", &reg, s, out, sizeof(out)) == 0 && out[0] &&
			    (reg_url_host(s, host, sizeof(host)) || strcmp(host, "reg.example:5000")))
				abort();
			if (reg_challenge_host_ok(&reg, s) && (reg_url_host(s, host, sizeof(host)) ||
							       strcmp(host, "reg.example:5000")))
				abort();
		}
		free(s);
	}
	/* tar: each 512-byte block as a header, the whole input as pax records */
	for (size_t off = 0; off + 512 <= len; off += 512) {
		static struct tar_hdr h;

		if (tar_header_parse(data + off, &h) == 0 &&
		    (strnlen(h.name, sizeof(h.name)) == sizeof(h.name) || strnlen(h.link, sizeof(h.link)) == sizeof(h.link)))
			abort();
	}
	{
		static struct tar_hdr h;
		static char xb[4096];
		size_t xl = 0;

		memset(&h, 0, sizeof(h));
		if (tar_pax_parse(text, len, &h, xb, sizeof(xb), &xl) == 0 &&
		    (strnlen(h.name, sizeof(h.name)) == sizeof(h.name) || xl > sizeof(xb)))
			abort();
	}
	return 0;
}
