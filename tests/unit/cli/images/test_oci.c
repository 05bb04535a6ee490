/* OCI images: references, index/manifest/config parsing on recorded
 * documents, the defaults -> command mapping, cache keys, registry auth
 * helpers, and layer unpacking (whiteouts, opaque directories, hard links,
 * escapes) on tar streams built here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli/images/oci_image.h"
#include "cli/images/oci_unpack.h"
#include "cli/images/registry.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

/* docker.io/library/busybox's manifest list, trimmed (recorded). */
static const char index_fixture[] =
	"{\"manifests\":[{\"digest\":\"" D1 "\",\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
	"\"platform\":{\"architecture\":\"arm\",\"os\":\"linux\",\"variant\":\"v7\"},\"size\":527},"
	"{\"digest\":\"" D2 "\",\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
	"\"platform\":{\"architecture\":\"unknown\",\"os\":\"unknown\"},\"size\":566},"
	"{\"digest\":\"" D3 "\",\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
	"\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"},\"size\":528}],"
	"\"mediaType\":\"application/vnd.docker.distribution.manifest.list.v2+json\",\"schemaVersion\":2}";

static const char manifest_fixture[] =
	"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
	"\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\",\"size\":1457,\"digest\":\"" D1 "\"},"
	"\"layers\":[{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar.gzip\",\"size\":2591575,"
	"\"digest\":\"" D2 "\"},{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\",\"size\":10,"
	"\"digest\":\"" D3 "\"}]}";

static const char config_fixture[] =
	"{\"architecture\":\"amd64\",\"config\":{\"Env\":[\"PATH=/usr/local/bin:/usr/bin\",\"LANG=C.UTF-8\"],"
	"\"Entrypoint\":[\"python3\"],\"Cmd\":[\"-m\",\"http.server\"],\"WorkingDir\":\"/app\",\"User\":\"app\","
	"\"ExposedPorts\":{\"8000/tcp\":{},\"53/udp\":{}},\"Labels\":{\"vmm.mem\":\"1G\",\"vmm.cpus\":\"2\","
	"\"vmm.idle-timeout\":\"10m\",\"vmm.drives\":\"work:/w,docs:ro\",\"other\":\"x\"}},\"created\":\"2024-01-01T00:00:00Z\",\"os\":\"linux\","
	"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" D2 "\",\"" D3 "\"]}}";

static void test_refs(void **state)
{
	struct oci_ref r;

	(void)state;
	assert_int_equal(oci_parse_ref("python:3.12", &r), 0);
	assert_string_equal(r.registry, "docker.io");
	assert_string_equal(r.api_host, "registry-1.docker.io");
	assert_string_equal(r.repo, "library/python");
	assert_string_equal(r.tag, "3.12");
	assert_int_equal(oci_parse_ref("registry.example.com:5000/team/agent:1.4", &r), 0);
	assert_string_equal(r.registry, "registry.example.com:5000");
	assert_string_equal(r.repo, "team/agent");
	assert_string_equal(r.tag, "1.4");
	assert_int_equal(oci_parse_ref("localhost/x", &r), 0);
	assert_string_equal(r.registry, "localhost");
	assert_string_equal(r.tag, "latest");
	assert_int_equal(oci_parse_ref("ghcr.io/o/r@" D1, &r), 0);
	assert_string_equal(r.digest, D1);
	assert_string_equal(r.tag, "");
	assert_int_equal(oci_parse_ref("http://127.0.0.1:5000/a/b", &r), 0);
	assert_int_equal(r.http, 1);
	assert_int_not_equal(oci_parse_ref("http://busybox", &r), 0);   /* http:// wants a registry */
	assert_int_not_equal(oci_parse_ref("Upper/Case", &r), 0);
	assert_int_not_equal(oci_parse_ref("a/../b", &r), 0);
	assert_int_not_equal(oci_parse_ref("reg.io/a..b/c", &r), 0); /* found by fuzz_oci */
	assert_int_not_equal(oci_parse_ref("x@sha256:12", &r), 0);
	assert_int_not_equal(oci_parse_ref("x:bad tag", &r), 0);
	assert_int_equal(oci_digest_ok(D1), 1);
	assert_int_equal(oci_digest_ok("sha256:ABCD"), 0);
	assert_int_equal(oci_digest_ok("sha512:1111111111111111111111111111111111111111111111111111111111111111"), 0);
}

static void test_index(void **state)
{
	struct oci_desc d;
	char err[200];

	(void)state;
	assert_int_equal(oci_doc_kind(index_fixture, strlen(index_fixture), NULL), OCI_DOC_INDEX);
	assert_int_equal(oci_parse_index(index_fixture, strlen(index_fixture), 0, &d, err, sizeof(err)), 0);
	assert_string_equal(d.digest, D3);
	assert_int_equal(d.size, 528);
	/* no amd64 */
	{
		const char *arm = "{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"" D1 "\",\"size\":1,"
				  "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}}]}";

		assert_int_equal(oci_parse_index(arm, strlen(arm), 0, &d, err, sizeof(err)), -ENOENT);
		assert_non_null(strstr(err, "linux/amd64"));
		/* a layout's index.json names images without platforms */
		assert_int_equal(oci_parse_index(arm, strlen(arm), 1, &d, err, sizeof(err)), -ENOENT);
	}
	{
		const char *lay = "{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"" D2 "\",\"size\":9}]}";

		assert_int_equal(oci_parse_index(lay, strlen(lay), 0, &d, err, sizeof(err)), -ENOENT);
		assert_int_equal(oci_parse_index(lay, strlen(lay), 1, &d, err, sizeof(err)), 0);
		assert_string_equal(d.digest, D2);
	}
	assert_int_equal(oci_parse_index("{\"manifests\":{}}", 16, 0, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(oci_parse_index("[", 1, 0, &d, err, sizeof(err)), -EINVAL);
}

static void test_manifest(void **state)
{
	struct oci_manifest *m = calloc(1, sizeof(*m));
	char err[200];
	char bad[2048];

	(void)state;
	assert_int_equal(oci_doc_kind(manifest_fixture, strlen(manifest_fixture), NULL), OCI_DOC_MANIFEST);
	assert_int_equal(oci_parse_manifest(manifest_fixture, strlen(manifest_fixture), m, err, sizeof(err)), 0);
	assert_int_equal(m->nlayers, 2);
	assert_string_equal(m->config.digest, D1);
	assert_string_equal(m->layers[0].digest, D2);
	assert_int_equal(m->layers[0].size, 2591575);
	assert_string_equal(m->layers[1].media, MT_OCI_LAYER_ZSTD);
	/* a layer of another kind (a helm chart, say) */
	snprintf(bad, sizeof(bad), "%s", manifest_fixture);
	memcpy(strstr(bad, "vnd.oci.image.layer.v1.tar+zstd"), "vnd.cncf.helm.chart.c+zstd-zzz", 30);
	assert_int_equal(oci_parse_manifest(bad, strlen(bad), m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "layer 2"));
	/* a short digest */
	snprintf(bad, sizeof(bad), "%s", manifest_fixture);
	memcpy(strstr(bad, D2) + 10, "\"", 1);
	assert_int_equal(oci_parse_manifest(bad, strlen(bad), m, err, sizeof(err)), -EINVAL);
	/* schema 1 */
	assert_int_equal(oci_parse_manifest("{\"schemaVersion\":1}", 19, m, err, sizeof(err)), -EINVAL);
	assert_int_equal(oci_doc_kind("{\"schemaVersion\":1}", 19, "application/json"), OCI_DOC_BAD);
	free(m);
}

static void test_config_and_plan(void **state)
{
	struct oci_defaults *d = calloc(1, sizeof(*d)), *back = calloc(1, sizeof(*back));
	char diff[4][OCI_DIGEST_MAX], err[200], json[8192];
	struct oci_exec_plan *p = calloc(1, sizeof(*p));
	unsigned n;

	(void)state;
	assert_int_equal(oci_parse_config(config_fixture, strlen(config_fixture), d, diff, 4, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(diff[1], D3);
	assert_int_equal(d->nenv, 2);
	assert_string_equal(d->workdir, "/app");
	assert_string_equal(d->user, "app");
	assert_int_equal(d->nports, 1); /* udp is not published */
	assert_int_equal(d->ports[0], 8000);
	assert_int_equal(d->mem_mib, 1024);
	assert_int_equal(d->cpus, 2);
	assert_int_equal(d->idle_timeout_s, 600);
	assert_string_equal(d->drives, "work:/w,docs:ro"); /* checked where an image takes it */
	/* round trip through config.json */
	assert_int_equal(oci_defaults_json(d, json, sizeof(json)), 0);
	assert_int_equal(oci_defaults_parse(json, strlen(json), back), 0);
	assert_int_equal(back->nenv, 2);
	assert_string_equal(back->cmd[1], "http.server");
	assert_int_equal(back->mem_mib, 1024);
	assert_int_equal(back->idle_timeout_s, 600);
	assert_string_equal(back->drives, "work:/w,docs:ro");
	/* no command: Entrypoint + Cmd, the image's env, cwd and user */
	oci_plan_exec(back, NULL, NULL, NULL, p);
	assert_int_equal(p->argc, 3);
	assert_string_equal(p->argv[0], "python3");
	assert_string_equal(p->argv[2], "http.server");
	assert_null(p->argv[3]);
	assert_string_equal(p->cwd, "/app");
	assert_string_equal(p->user, "app");
	assert_int_equal(p->nenv, 2);
	/* the user's command, env and cwd win */
	{
		const char *env[] = { "LANG=en_US.UTF-8", "X=1", NULL };
		const char *argv[] = { "sh", "-c", "true", NULL };

		oci_plan_exec(back, env, "/tmp", argv, p);
		assert_int_equal(p->argc, 3);
		assert_string_equal(p->argv[0], "sh");
		assert_string_equal(p->cwd, "/tmp");
		assert_int_equal(p->nenv, 3);
		assert_string_equal(p->env[0], "PATH=/usr/local/bin:/usr/bin");
		assert_string_equal(p->env[1], "LANG=en_US.UTF-8");
		assert_string_equal(p->env[2], "X=1");
		assert_null(p->env[3]);
	}
	/* no defaults at all (an image vmm built) */
	oci_plan_exec(NULL, NULL, NULL, NULL, p);
	assert_int_equal(p->argc, 0);
	assert_null(p->cwd);
	/* bad configs */
	{
		static const char *const bad[] = {
			"{\"os\":\"windows\",\"rootfs\":{\"diff_ids\":[]}}",
			"{\"architecture\":\"arm64\",\"os\":\"linux\",\"rootfs\":{\"diff_ids\":[]}}",
			"{\"os\":\"linux\"}",
			"{\"os\":\"linux\",\"rootfs\":{\"diff_ids\":[\"md5:x\"]}}",
			"{\"config\":{\"Env\":\"A=1\"},\"rootfs\":{\"diff_ids\":[]}}",
			"{\"config\":{\"Env\":[\"NOEQUALS\"]},\"rootfs\":{\"diff_ids\":[]}}",
			"{\"config\":{\"WorkingDir\":\"rel\"},\"rootfs\":{\"diff_ids\":[]}}",
			"{\"config\":{\"ExposedPorts\":{\"99999/tcp\":{}}},\"rootfs\":{\"diff_ids\":[]}}",
			"{\"config\":{\"Labels\":{\"vmm.mem\":\"lots\"}},\"rootfs\":{\"diff_ids\":[]}}",
			"{\"config\":{\"Labels\":{\"vmm.cpus\":\"0\"}},\"rootfs\":{\"diff_ids\":[]}}",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			assert_int_not_equal(oci_parse_config(bad[i], strlen(bad[i]), d, diff, 4, &n, err, sizeof(err)), 0);
	}
	free(d);
	free(back);
	free(p);
}

static void test_cache_keys(void **state)
{
	char dir[256], path[512], d[OCI_DIGEST_MAX];

	(void)state;
	setenv("VMM_CACHE", "/tmp/vmm-test-oci-cache", 1);
	assert_int_equal(oci_cache_dir(dir, sizeof(dir)), 0);
	assert_string_equal(dir, "/tmp/vmm-test-oci-cache/blobs");
	assert_int_equal(oci_blob_path(dir, D1, path, sizeof(path)), 0);
	assert_string_equal(path, "/tmp/vmm-test-oci-cache/blobs/sha256/"
				  "1111111111111111111111111111111111111111111111111111111111111111");
	/* a digest that would climb out of the cache is not a key */
	assert_int_equal(oci_blob_path(dir, "sha256:../../../../etc/passwd", path, sizeof(path)), -EINVAL);
	oci_digest_buf("", 0, d);
	assert_string_equal(d, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	system("rm -rf /tmp/vmm-test-oci-cache");
}

/* The blob cache is the user's alone (issue 40, item 8): its folders are
 * 0700, also when an older vmm left them 0755. */
static void test_cache_modes(void **state)
{
	char dir[256];
	struct stat st;

	(void)state;
	system("rm -rf /tmp/vmm-test-oci-modes");
	setenv("VMM_CACHE", "/tmp/vmm-test-oci-modes", 1);
	assert_int_equal(oci_cache_dir(dir, sizeof(dir)), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(stat("/tmp/vmm-test-oci-modes/blobs/sha256", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(chmod("/tmp/vmm-test-oci-modes/blobs/sha256", 0755), 0);
	assert_int_equal(oci_cache_dir(dir, sizeof(dir)), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(stat("/tmp/vmm-test-oci-modes/blobs/sha256", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	system("rm -rf /tmp/vmm-test-oci-modes");
}

static const char *layer_of(const char *size)
{
	static char buf[1024];

	snprintf(buf, sizeof(buf),
		 "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"size\":100,"
		 "\"digest\":\"" D1 "\"},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
		 "\"size\":%s,\"digest\":\"" D2 "\"}]}", size);
	return buf;
}

/* Size caps (issue 40, item 1): settings, descriptor checks, free disk. */
static void test_limits(void **state)
{
	struct oci_manifest m;
	struct oci_limits l;
	char err[300];

	(void)state;
	unsetenv("VMM_PULL_MAX_BLOB");
	unsetenv("VMM_PULL_MAX_IMAGE");
	unsetenv("VMM_UNPACK_MAX_LAYER");
	unsetenv("VMM_UNPACK_MAX_IMAGE");
	unsetenv("VMM_UNPACK_MAX_ENTRIES");
	assert_int_equal(oci_limits_init(&l, err, sizeof(err)), 0);
	assert_true(l.blob == 16ull << 30 && l.image == 64ull << 30 && l.layer_tar == 64ull << 30 &&
		    l.image_tar == 128ull << 30 && l.entries == 1000000);
	setenv("VMM_PULL_MAX_BLOB", "2G", 1);
	setenv("VMM_UNPACK_MAX_ENTRIES", "500", 1);
	assert_int_equal(oci_limits_init(&l, err, sizeof(err)), 0);
	assert_true(l.blob == 2ull << 30 && l.entries == 500);
	setenv("VMM_PULL_MAX_BLOB", "-1", 1);
	assert_int_equal(oci_limits_init(&l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "VMM_PULL_MAX_BLOB"));
	unsetenv("VMM_PULL_MAX_BLOB");
	unsetenv("VMM_UNPACK_MAX_ENTRIES");
	assert_int_equal(oci_limits_init(&l, err, sizeof(err)), 0);
	/* flags: sizes in MiB, counts plain; 0, junk and absurd values refused */
	assert_int_equal(oci_limits_set(&l, "--max-blob", "1", err, sizeof(err)), 0);
	assert_int_equal(l.blob, 1u << 20);
	assert_int_equal(oci_limits_set(&l, "--max-image", "3M", err, sizeof(err)), 0);
	assert_int_equal(l.image, 3u << 20);
	assert_int_equal(oci_limits_set(&l, "--max-entries", "7", err, sizeof(err)), 0);
	assert_int_equal(l.entries, 7);
	assert_int_equal(oci_limits_set(&l, "--max-unpacked", "0", err, sizeof(err)), -EINVAL);
	assert_int_equal(oci_limits_set(&l, "--max-unpacked", "lots", err, sizeof(err)), -EINVAL);
	assert_int_equal(oci_limits_set(&l, "--max-unpacked", "99999999T", err, sizeof(err)), -EINVAL);
	assert_int_equal(oci_limits_set(&l, "--max-entries", "-3", err, sizeof(err)), -EINVAL);
	assert_int_equal(oci_limits_set(&l, "--name", "x", err, sizeof(err)), 1);
	/* descriptors: a layer over the blob cap, an image over the image cap */
	assert_int_equal(oci_parse_manifest(layer_of("2097152"), strlen(layer_of("2097152")), &m, err, sizeof(err)), 0);
	assert_int_equal(oci_limits_check(&l, &m, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "layer 1/1"));
	assert_non_null(strstr(err, "--max-blob, $VMM_PULL_MAX_BLOB"));
	l.blob = 4u << 20;
	assert_int_equal(oci_limits_check(&l, &m, err, sizeof(err)), 0);
	l.image = 2u << 20; /* 2 MiB of layer + 100 bytes of config */
	assert_int_equal(oci_limits_check(&l, &m, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "--max-image"));
	/* a claimed 1 TiB under generous caps: the disk says no */
	assert_int_equal(oci_limits_init(&l, err, sizeof(err)), 0);
	assert_int_equal(oci_parse_manifest(layer_of("562949953421312"), strlen(layer_of("562949953421312")), &m, err,
					    sizeof(err)),
			 0); /* 2^49 */
	assert_int_equal(oci_cache_room("/tmp", &m, err, sizeof(err)), -ENOSPC);
	assert_non_null(strstr(err, "MiB free"));
	/* negative and absurd sizes are malformed, whatever the caps */
	assert_int_equal(oci_parse_manifest(layer_of("-1"), strlen(layer_of("-1")), &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(oci_parse_manifest(layer_of("2251799813685248"), strlen(layer_of("2251799813685248")), &m, err,
					    sizeof(err)),
			 -EINVAL); /* 2^51 */
}

/* Where registry credentials go (issue 40, item 5). */
static void test_realm_rules(void **state)
{
	struct oci_ref ref, hub;
	char out[256], host[64];
	const char *json = "{\"auths\":{\"reg.example:5000\":{\"auth\":\"dTpw\"},"
			   "\"auth.example\":{\"auth\":\"YjpxcQ==\"}}}";

	(void)state;
	assert_int_equal(reg_url_host("https://Reg.Example:443/token?x=1", host, sizeof(host)), 0);
	assert_string_equal(host, "reg.example");
	assert_int_equal(reg_url_host("http://reg.example:80/t", host, sizeof(host)), 0);
	assert_string_equal(host, "reg.example");
	assert_int_equal(reg_url_host("https://reg.example:5000", host, sizeof(host)), 0);
	assert_string_equal(host, "reg.example:5000");
	assert_int_equal(reg_url_host("https://user:pw@evil.example/t", host, sizeof(host)), -EINVAL);
	assert_int_equal(reg_url_host("ftp://reg.example/t", host, sizeof(host)), -EINVAL);
	assert_int_equal(oci_parse_ref("reg.example:5000/team/app:1", &ref), 0);
	/* the registry's own host: its credentials */
	assert_int_equal(reg_realm_creds("u:p", &ref, "https://reg.example:5000/token", out, sizeof(out)), 0);
	assert_string_equal(out, "Basic dTpw");
	assert_int_equal(reg_realm_creds(json, &ref, "https://REG.example:5000/token", out, sizeof(out)), 0);
	assert_string_equal(out, "Basic dTpw");
	/* another host (another port is another host): nothing from a one-line file ... */
	assert_int_equal(reg_realm_creds("u:p", &ref, "https://evil.example/token", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(reg_realm_creds("u:p", &ref, "https://reg.example:5001/token", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(reg_realm_creds("u:p", &ref, "https://reg.example/token", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	/* ... and from a config.json only the entry that names that host */
	assert_int_equal(reg_realm_creds(json, &ref, "https://auth.example/token", out, sizeof(out)), 0);
	assert_string_equal(out, "Basic YjpxcQ==");
	assert_int_equal(reg_realm_creds(json, &ref, "https://evil.example/token", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(reg_realm_creds(NULL, &ref, "https://reg.example:5000/token", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(reg_realm_creds("u:p", &ref, "not a url", out, sizeof(out)), -EINVAL);
	/* Docker Hub: its token service is part of it */
	assert_int_equal(oci_parse_ref("busybox", &hub), 0);
	assert_int_equal(reg_realm_creds("u:p", &hub, "https://auth.docker.io/token", out, sizeof(out)), 0);
	assert_string_equal(out, "Basic dTpw");
	assert_int_equal(reg_realm_creds("u:p", &ref, "https://auth.docker.io/token", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	/* challenges: only from the host the registry is reached at */
	assert_true(reg_challenge_host_ok(&ref, "https://reg.example:5000/v2/team/app/manifests/1"));
	assert_false(reg_challenge_host_ok(&ref, "https://cdn.example/blob?sig=1"));
	assert_false(reg_challenge_host_ok(&ref, "https://reg.example/v2/"));
	assert_true(reg_challenge_host_ok(&hub, "https://registry-1.docker.io/v2/library/busybox/manifests/latest"));
	assert_false(reg_challenge_host_ok(&hub, "https://auth.docker.io/token"));
}

static void test_auth_helpers(void **state)
{
	char scheme[16], realm[256], service[128], scope[256], out[256];

	(void)state;
	assert_int_equal(reg_parse_challenge("Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
					     "scope=\"repository:library/python:pull\"",
					     scheme, sizeof(scheme), realm, sizeof(realm), service, sizeof(service), scope,
					     sizeof(scope)),
			 0);
	assert_string_equal(scheme, "Bearer");
	assert_string_equal(realm, "https://auth.docker.io/token");
	assert_string_equal(service, "registry.docker.io");
	assert_string_equal(scope, "repository:library/python:pull");
	assert_int_equal(reg_parse_challenge("Basic realm=\"Registry\"", scheme, sizeof(scheme), realm, sizeof(realm),
					     service, sizeof(service), scope, sizeof(scope)),
			 0);
	assert_string_equal(scheme, "Basic");
	assert_string_equal(scope, "");
	assert_int_not_equal(reg_parse_challenge("Bearer realm=\"unterminated", scheme, sizeof(scheme), realm,
						 sizeof(realm), service, sizeof(service), scope, sizeof(scope)),
			     0);
	assert_int_equal(reg_creds_lookup("{\"auths\":{\"reg.example:5000\":{\"auth\":\"dTpw\"}}}", "reg.example:5000",
					  out, sizeof(out)),
			 0);
	assert_string_equal(out, "Basic dTpw");
	assert_int_equal(reg_creds_lookup("{\"auths\":{\"https://index.docker.io/v1/\":{\"username\":\"u\","
					  "\"password\":\"p\"}}}",
					  "docker.io", out, sizeof(out)),
			 0);
	assert_string_equal(out, "Basic dTpw");
	assert_int_equal(reg_creds_lookup("{\"auths\":{\"other\":{\"auth\":\"x\"}}}", "reg", out, sizeof(out)), -ENOENT);
	assert_int_equal(reg_creds_lookup("u:p\n", "any", out, sizeof(out)), 0);
	assert_string_equal(out, "Basic dTpw");
}

/* ---- tar streams ---------------------------------------------------------- */

struct tarbuf {
	unsigned char *b;
	size_t len;
};

static void tar_add(struct tarbuf *t, const char *name, char type, const char *data, const char *link, unsigned mode)
{
	unsigned char h[512];
	size_t n = data ? strlen(data) : 0, pad = (512 - (n & 511)) & 511;
	unsigned sum = 0;

	memset(h, 0, sizeof(h));
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)n & 07777777);
	snprintf((char *)h + 136, 12, "%011o", 1700000000);
	h[156] = (unsigned char)type;
	if (link)
		snprintf((char *)h + 157, 100, "%s", link);
	memcpy(h + 257, "ustar\0" "00", 8);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	t->b = realloc(t->b, t->len + 512 + n + pad + 1024);
	memcpy(t->b + t->len, h, 512);
	t->len += 512;
	if (n) {
		memcpy(t->b + t->len, data, n);
		memset(t->b + t->len + n, 0, pad);
		t->len += n + pad;
	}
}

static void tar_end(struct tarbuf *t)
{
	t->b = realloc(t->b, t->len + 1024);
	memset(t->b + t->len, 0, 1024);
	t->len += 1024;
}

static char root[64] = "/tmp/vmm-test-oci-XXXXXX";

static int setup_root(void **state)
{
	(void)state;
	strcpy(root, "/tmp/vmm-test-oci-XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown_root(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd);
}

static int apply(struct tarbuf *t, char *err, size_t errlen)
{
	struct unpack_stats st;
	int fd = open(root, O_RDONLY | O_DIRECTORY), r;

	r = oci_unpack_mem(fd, t->b, t->len, &st, err, errlen);
	close(fd);
	free(t->b);
	t->b = NULL;
	t->len = 0;
	return r;
}

static int exists(const char *rel)
{
	char p[1100];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	return lstat(p, &st) == 0;
}

static void test_whiteouts(void **state)
{
	struct tarbuf t = { 0 };
	char err[300];
	struct stat a, b;
	char p1[512], p2[512];

	(void)state;
	/* layer 1 */
	tar_add(&t, "./etc/", '5', NULL, NULL, 0755);
	tar_add(&t, "./etc/passwd", '0', "root:x:0:0\n", NULL, 0644);
	tar_add(&t, "./etc/gone", '0', "x", NULL, 0644);
	tar_add(&t, "./opq/", '5', NULL, NULL, 0755);
	tar_add(&t, "./opq/lower1", '0', "1", NULL, 0644);
	tar_add(&t, "./opq/lowerdir/", '5', NULL, NULL, 0755);
	tar_add(&t, "./opq/lowerdir/f", '0', "1", NULL, 0644);
	tar_add(&t, "./link", '1', NULL, "etc/passwd", 0644);
	tar_add(&t, "./dev/null", '3', NULL, NULL, 0666);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), 0);
	snprintf(p1, sizeof(p1), "%s/etc/passwd", root);
	snprintf(p2, sizeof(p2), "%s/link", root);
	assert_int_equal(stat(p1, &a), 0);
	assert_int_equal(stat(p2, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino); /* a hard link, not a copy */
	assert_false(exists("dev/null"));     /* device nodes are skipped */
	/* layer 2: a whiteout, an opaque dir with one new entry before the marker */
	tar_add(&t, "etc/.wh.gone", '0', NULL, NULL, 0644);
	tar_add(&t, "opq/new", '0', "2", NULL, 0644);
	tar_add(&t, "opq/.wh..wh..opq", '0', NULL, NULL, 0644);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), 0);
	assert_false(exists("etc/gone"));
	assert_false(exists("etc/.wh.gone"));
	assert_true(exists("etc/passwd"));
	assert_true(exists("opq/new"));
	assert_false(exists("opq/lower1"));
	assert_false(exists("opq/lowerdir"));
	assert_false(exists("opq/.wh..wh..opq"));
	/* layer 3: a file replaces a directory, a directory a file */
	tar_add(&t, "opq", '0', "now a file", NULL, 0600);
	tar_add(&t, "etc/passwd/", '5', NULL, NULL, 0700);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), 0);
	assert_int_equal(lstat(p1, &a), 0);
	assert_true(S_ISDIR(a.st_mode));
	assert_int_equal(a.st_mode & 07777, 0700);
}

static void test_escapes(void **state)
{
	struct tarbuf t = { 0 };
	char err[300], outside[512];
	struct stat st;

	(void)state;
	snprintf(outside, sizeof(outside), "%s-outside", root);
	mkdir(outside, 0755);
	/* ".." */
	tar_add(&t, "../escaped", '0', "x", NULL, 0644);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), -EXDEV);
	assert_non_null(strstr(err, "escapes the root"));
	tar_add(&t, "a/../../escaped", '0', "x", NULL, 0644);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), -EXDEV);
	/* an absolute name lands inside */
	tar_add(&t, "/abs", '0', "x", NULL, 0644);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), 0);
	assert_true(exists("abs"));
	/* a symlinked parent pointing outside: resolved inside the root */
	tar_add(&t, "evil", '2', NULL, NULL, 0777);
	memcpy(t.b + t.len - 512 + 157, outside, strlen(outside) + 1);
	{ /* fix the checksum for the patched link name */
		unsigned sum = 0;
		unsigned char *h = t.b + t.len - 512;

		memset(h + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			sum += h[i];
		snprintf((char *)h + 148, 8, "%06o", sum);
	}
	tar_add(&t, "evil/pwned", '0', "x", NULL, 0644);
	tar_add(&t, "rel", '2', NULL, "../../../../..", 0777);
	tar_add(&t, "rel/tmp/pwned2", '0', "x", NULL, 0644);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), 0);
	snprintf(err, sizeof(err), "%s/pwned", outside);
	assert_int_not_equal(stat(err, &st), 0);
	assert_int_not_equal(stat("/tmp/pwned2", &st), 0);
	snprintf(err, sizeof(err), "%.200s/pwned", outside + 1);
	assert_true(exists(err));         /* where the link points, in the image */
	assert_true(exists("tmp/pwned2")); /* "../../../.." stops at the root */
	/* a hard link to a file outside */
	tar_add(&t, "hl", '1', NULL, "../../etc/passwd", 0644);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), -EXDEV);
	/* a whiteout can only remove inside: ".wh..." names are not "..". */
	tar_add(&t, "x/.wh..", '0', NULL, NULL, 0644);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), 0);
	rmdir(outside);
	snprintf(err, sizeof(err), "rm -rf %s", outside);
	assert_int_equal(system(err), 0);
}

/* ".wh..." names ".." as its victim: the whiteout must not remove the
 * root's parent (found in review: an archive's top-level ".wh..."
 * emptied the image store). The root is nested in a scratch folder so
 * that the old code's damage stays in it. */
static char nested_outer[sizeof(root)];

static void test_whiteout_dotdot(void **state)
{
	struct tarbuf t = { 0 };
	char err[300], outer[512], sib[600];
	struct stat st;
	int fd, r;

	(void)state;
	snprintf(outer, sizeof(outer), "%s", root);
	snprintf(sib, sizeof(sib), "%s/sibling", outer);
	fd = open(sib, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	close(fd);
	memcpy(nested_outer, root, sizeof(root));
	snprintf(root, sizeof(root), "%.40s/r", nested_outer);
	assert_int_equal(mkdir(root, 0755), 0);
	tar_add(&t, "keep", '0', "x", NULL, 0644);
	tar_add(&t, ".wh...", '0', NULL, NULL, 0644);
	tar_end(&t);
	r = apply(&t, err, sizeof(err));
	assert_int_equal(lstat(sib, &st), 0); /* outside the root: untouched */
	assert_int_equal(r, -EXDEV);
	assert_non_null(strstr(err, "escapes the root"));
	/* one level down: ".." would be the root itself, also refused */
	tar_add(&t, "keep", '0', "x", NULL, 0644);
	tar_add(&t, "d/.wh...", '0', NULL, NULL, 0644);
	tar_end(&t);
	assert_int_equal(apply(&t, err, sizeof(err)), -EXDEV);
	assert_true(exists("keep"));
}

static int teardown_nested(void **state)
{
	memcpy(root, nested_outer, sizeof(root));
	return teardown_root(state);
}

static void test_truncated_and_gzip(void **state)
{
	struct tarbuf t = { 0 };
	char err[300];
	unsigned char gz[8192];
	uLongf gzlen;
	z_stream z;

	(void)state;
	tar_add(&t, "big", '0', "0123456789abcdef0123456789abcdef", NULL, 0644);
	tar_end(&t);
	t.len = 512 + 10; /* the data stops early */
	assert_int_equal(apply(&t, err, sizeof(err)), -EPIPE);
	assert_non_null(strstr(err, "truncated"));
	/* gzip */
	tar_add(&t, "zipped", '0', "gz", NULL, 0644);
	tar_end(&t);
	memset(&z, 0, sizeof(z));
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = t.b;
	z.avail_in = (uInt)t.len;
	z.next_out = gz;
	z.avail_out = sizeof(gz);
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	gzlen = sizeof(gz) - z.avail_out;
	deflateEnd(&z);
	free(t.b);
	t.b = malloc(gzlen);
	memcpy(t.b, gz, gzlen);
	t.len = gzlen;
	assert_int_equal(apply(&t, err, sizeof(err)), 0);
	assert_true(exists("zipped"));
	/* a truncated gzip stream */
	t.b = malloc(gzlen);
	memcpy(t.b, gz, gzlen);
	t.len = gzlen / 2;
	assert_int_not_equal(apply(&t, err, sizeof(err)), 0);
	/* garbage */
	t.b = calloc(1, 600);
	memset(t.b, 'A', 600);
	t.len = 600;
	assert_int_equal(apply(&t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a tar"));
}

/* Bounds while decompressing (issue 40, item 1): a gzip bomb stops at the
 * per-layer cap, a layer of too many entries at the entries cap; both from
 * the environment for oci_unpack_mem (as vmm image pull and ADD get them). */
static void test_unpack_caps(void **state)
{
	struct tarbuf t = { 0 };
	struct unpack_limits ul;
	struct oci_limits l;
	struct unpack_stats st;
	char err[300], *big = malloc((3u << 19) + 1);
	unsigned char *gz;
	uLongf gzlen;
	int fd;

	(void)state;
	memset(big, 'a', 3u << 19); /* 1.5 MiB */
	big[3u << 19] = '\0';
	tar_add(&t, "big", '0', big, NULL, 0644);
	tar_end(&t);
	free(big);
	gzlen = compressBound((uLong)t.len) + 64;
	gz = malloc(gzlen);
	{
		z_stream z;

		memset(&z, 0, sizeof(z));
		assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
		z.next_in = t.b;
		z.avail_in = (uInt)t.len;
		z.next_out = gz;
		z.avail_out = (uInt)gzlen;
		assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
		gzlen -= z.avail_out;
		deflateEnd(&z);
	}
	assert_true(gzlen < 16384); /* a bomb: kilobytes that become megabytes */
	free(t.b);
	t.b = NULL;
	t.len = 0;
	setenv("VMM_UNPACK_MAX_LAYER", "1", 1);
	fd = open(root, O_RDONLY | O_DIRECTORY);
	assert_int_equal(oci_unpack_mem(fd, gz, gzlen, &st, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "decompresses to more than 1 MiB"));
	assert_non_null(strstr(err, "VMM_UNPACK_MAX_LAYER"));
	unsetenv("VMM_UNPACK_MAX_LAYER");
	assert_int_equal(oci_unpack_mem(fd, gz, gzlen, &st, err, sizeof(err)), 0);
	assert_true(st.tar_bytes >= 3u << 19);
	/* the per-image cap: what is left of it after the layers before */
	assert_int_equal(oci_limits_init(&l, err, sizeof(err)), 0);
	l.image_tar = 2u << 20;
	oci_unpack_limits(&l, 1u << 20, &ul);
	assert_int_equal(ul.tar_bytes, 1u << 20);
	assert_int_equal(oci_unpack_mem_limited(fd, gz, gzlen, &ul, &st, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "per-image cap (--max-unpacked"));
	free(gz);
	/* zeros after the end marker count too */
	tar_add(&t, "small", '0', "x", NULL, 0644);
	tar_end(&t);
	t.b = realloc(t.b, t.len + (2u << 20));
	memset(t.b + t.len, 0, 2u << 20);
	t.len += 2u << 20;
	ul.tar_bytes = 1u << 20;
	assert_int_equal(oci_unpack_mem_limited(fd, t.b, t.len, &ul, &st, err, sizeof(err)), -EFBIG);
	free(t.b);
	t.b = NULL;
	t.len = 0;
	/* entries */
	for (int i = 0; i < 5; i++) {
		char name[16];

		snprintf(name, sizeof(name), "e%d", i);
		tar_add(&t, name, '0', "x", NULL, 0644);
	}
	tar_end(&t);
	setenv("VMM_UNPACK_MAX_ENTRIES", "3", 1);
	assert_int_equal(oci_unpack_mem(fd, t.b, t.len, &st, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "more than 3 entries"));
	setenv("VMM_UNPACK_MAX_ENTRIES", "5", 1);
	assert_int_equal(oci_unpack_mem(fd, t.b, t.len, &st, err, sizeof(err)), 0);
	unsetenv("VMM_UNPACK_MAX_ENTRIES");
	close(fd);
	free(t.b);
}

static void test_root_put(void **state)
{
	char outside[512], p[600];
	struct stat st;
	int fd;

	(void)state;
	snprintf(outside, sizeof(outside), "%s-out2", root);
	mkdir(outside, 0755);
	snprintf(p, sizeof(p), "%s/sbin", root);
	assert_int_equal(symlink(outside, p), 0); /* /sbin -> a host directory */
	fd = open(root, O_RDONLY | O_DIRECTORY);
	assert_int_equal(oci_root_put(fd, "/sbin/vmm-init", -1, "init", 4, 0755, 0), 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/vmm-init", outside);
	assert_int_not_equal(stat(p, &st), 0); /* not on the host */
	snprintf(p, sizeof(p), "%s%s/vmm-init", root, outside);
	assert_int_equal(stat(p, &st), 0); /* inside, where the link points in the image */
	assert_int_equal(st.st_mode & 0777, 0755);
	rmdir(outside);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refs),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_config_and_plan),
		cmocka_unit_test(test_cache_keys),
		cmocka_unit_test(test_auth_helpers),
		cmocka_unit_test(test_cache_modes),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_realm_rules),
		cmocka_unit_test_setup_teardown(test_unpack_caps, setup_root, teardown_root),
		cmocka_unit_test_setup_teardown(test_whiteouts, setup_root, teardown_root),
		cmocka_unit_test_setup_teardown(test_escapes, setup_root, teardown_root),
		cmocka_unit_test_setup_teardown(test_whiteout_dotdot, setup_root, teardown_nested),
		cmocka_unit_test_setup_teardown(test_truncated_and_gzip, setup_root, teardown_root),
		cmocka_unit_test_setup_teardown(test_root_put, setup_root, teardown_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
