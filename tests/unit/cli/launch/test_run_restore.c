/* A clone's configuration from its snapshot (cli/launch/run_restore.h), on
 * made-up snapshot configs: the TAP and guest-side overrides of --net,
 * --fs by tag, --disk by id or in order, the copy of a writable disk and
 * the refusal of a changed read-only one, and which token a clone gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/launch/run_opts.h"
#include "cli/launch/run_restore.h"
#include "devices/mmds.h"
#include "cli/util/util.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/base/log.h"
#include "vmm/vm_snapshot.h"
#include "vmm/vm.h"

static const uint8_t MAC0[6] = { 0x02, 0, 0, 0, 0, 0x10 };
static const uint8_t MAC1[6] = { 0x02, 0, 0, 0, 0, 0x11 };

static struct snapshot *two_nets(void)
{
	static struct snapshot s;

	memset(&s, 0, sizeof(s));
	snprintf(s.dir, sizeof(s.dir), "/nonexistent/snap");
	s.conf.nr_nets = 2;
	snprintf(s.conf.nets[0].tap, sizeof(s.conf.nets[0].tap), "tap-a");
	memcpy(s.conf.nets[0].mac, MAC0, 6);
	s.conf.nets[0].no_offload = 1;
	snprintf(s.conf.nets[1].tap, sizeof(s.conf.nets[1].tap), "tap-b");
	memcpy(s.conf.nets[1].mac, MAC1, 6);
	memcpy(s.conf.nets[1].host_mac, MAC0, 6);
	return &s;
}

/* No --net: every interface on the snapshot's TAP with its MAC and
 * offloads, nothing for the guest to change. */
static void nets_default(void **state)
{
	struct vm_config cfg = { .nr_nets = 0 };
	char spec[VM_MAX_NETS][API_NET_SPEC];
	unsigned nr_spec = 99;

	(void)state;
	assert_int_equal(restore_nets(&cfg, two_nets(), NULL, NULL, 0, spec, &nr_spec), 0);
	assert_int_equal(cfg.nr_nets, 2);
	assert_int_equal(nr_spec, 0);
	assert_string_equal(cfg.nets[0].tap, "tap-a");
	assert_memory_equal(cfg.nets[0].mac, MAC0, 6);
	assert_true(cfg.nets[0].has_mac);
	assert_int_equal(cfg.nets[0].no_offload, 1);
	assert_false(cfg.nets[0].has_host_mac);
	assert_string_equal(cfg.nets[1].tap, "tap-b");
	assert_memory_equal(cfg.nets[1].mac, MAC1, 6);
	assert_true(cfg.nets[1].has_host_mac);
	assert_memory_equal(cfg.nets[1].host_mac, MAC0, 6);
}

/* --net tap=T,ip=...: the device on T keeps the snapshot's MAC; the new
 * address goes to guest-init as "OLDMAC,mac=MAC,ip=..." (the sync). */
static void nets_override_ip(void **state)
{
	struct vm_config cfg = { .nr_nets = 0 };
	struct net_options over[1];
	int mac_given[1] = { 0 };
	char spec[VM_MAX_NETS][API_NET_SPEC];
	unsigned nr_spec = 0;
	const char *why = "";

	(void)state;
	memset(over, 0, sizeof(over));
	assert_int_equal(net_options_parse("tap=clone0,ip=10.0.0.2/24,gw=10.0.0.1", &over[0], &why), 0);
	assert_int_equal(restore_nets(&cfg, two_nets(), over, mac_given, 1, spec, &nr_spec), 0);
	assert_int_equal(cfg.nr_nets, 2);
	assert_string_equal(cfg.nets[0].tap, "clone0");
	assert_memory_equal(cfg.nets[0].mac, MAC0, 6);
	assert_int_equal(cfg.nets[0].ip, 0);
	assert_int_equal(cfg.nets[0].gw, 0);
	assert_string_equal(cfg.nets[1].tap, "tap-b");
	assert_int_equal(nr_spec, 1);
	assert_non_null(strstr(spec[0], "02:00:00:00:00:10,mac=02:00:00:00:00:10"));
	assert_ptr_equal(strstr(spec[0], "02:00:00:00:00:10"), spec[0]);
	assert_non_null(strstr(spec[0], "ip=10.0.0.2/24"));
	assert_non_null(strstr(spec[0], "gw=10.0.0.1"));
}

/* A new mac= alone is a change too; the same MAC is not. */
static void nets_override_mac(void **state)
{
	struct vm_config cfg = { .nr_nets = 0 };
	struct net_options over[2];
	int mac_given[2] = { 1, 1 };
	char spec[VM_MAX_NETS][API_NET_SPEC];
	unsigned nr_spec = 0;
	const char *why = "";

	(void)state;
	memset(over, 0, sizeof(over));
	assert_int_equal(net_options_parse("tap=c0,mac=02:00:00:00:00:10", &over[0], &why), 0);
	assert_int_equal(net_options_parse("tap=c1,mac=02:00:00:00:00:99", &over[1], &why), 0);
	assert_int_equal(restore_nets(&cfg, two_nets(), over, mac_given, 2, spec, &nr_spec), 0);
	assert_int_equal(nr_spec, 1);
	assert_string_equal(spec[0], "02:00:00:00:00:11,mac=02:00:00:00:00:99");
	assert_memory_equal(cfg.nets[1].mac, MAC1, 6);
}

static void nets_refused(void **state)
{
	struct vm_config cfg = { .nr_nets = 0 };
	struct net_options over[3];
	int mac_given[3] = { 0 };
	char spec[VM_MAX_NETS][API_NET_SPEC];
	unsigned nr_spec = 0;
	const char *why = "";

	(void)state;
	memset(over, 0, sizeof(over));
	/* more --net than the snapshot has interfaces */
	assert_int_equal(restore_nets(&cfg, two_nets(), over, mac_given, 3, spec, &nr_spec), -EINVAL);
	/* gw= without ip= (net_options_parse refuses it first; the
	 * overrides of vmm serve's snapshot load come from elsewhere) */
	assert_int_equal(net_options_parse("tap=c0,gw=10.0.0.1", &over[0], &why), -EINVAL);
	snprintf(over[0].tap, sizeof(over[0].tap), "c0");
	over[0].gw = inet_addr("10.0.0.1");
	assert_int_equal(restore_nets(&cfg, two_nets(), over, mac_given, 1, spec, &nr_spec), -EINVAL);
}

static struct snapshot *two_fs(void)
{
	static struct snapshot s;

	memset(&s, 0, sizeof(s));
	s.conf.nr_fs = 2;
	snprintf(s.conf.fs[0].tag, sizeof(s.conf.fs[0].tag), "src");
	snprintf(s.conf.fs[0].path, sizeof(s.conf.fs[0].path), "/srv/src");
	s.conf.fs[0].ro = 1;
	snprintf(s.conf.fs[1].tag, sizeof(s.conf.fs[1].tag), "out");
	snprintf(s.conf.fs[1].path, sizeof(s.conf.fs[1].path), "/srv/out");
	s.conf.fs[1].cache = FUSE_CACHE_AUTO;
	return &s;
}

static void fs_overrides(void **state)
{
	struct vm_config cfg = { .nr_fs = 0 };
	struct fs_options over[1] = { { .tag = "out", .path = (char *)"/tmp/elsewhere" } };
	unsigned i;

	(void)state;
	assert_int_equal(restore_fs(&cfg, two_fs(), over, 1), 0);
	assert_int_equal(cfg.nr_fs, 2);
	assert_string_equal(cfg.fs[0].tag, "src");
	assert_string_equal(cfg.fs[0].path, "/srv/src");
	assert_int_equal(cfg.fs[0].ro, 1);
	assert_string_equal(cfg.fs[1].tag, "out");
	assert_string_equal(cfg.fs[1].path, "/tmp/elsewhere");
	assert_int_equal(cfg.fs[1].cache, FUSE_CACHE_AUTO);
	for (i = 0; i < cfg.nr_fs; i++)
		free(cfg.fs[i].path);

	/* a tag the snapshot does not have */
	snprintf(over[0].tag, sizeof(over[0].tag), "nope");
	memset(&cfg, 0, sizeof(cfg));
	assert_int_equal(restore_fs(&cfg, two_fs(), over, 1), -EINVAL);
	assert_int_equal(cfg.nr_fs, 0);
}

static void token_choice(void **state)
{
	struct snap_conf c;
	char tok[160];
	size_t i;

	(void)state;
	memset(&c, 0, sizeof(c));
	snprintf(c.token, sizeof(c.token), "snaptoken");
	snprintf(c.cmdline, sizeof(c.cmdline), "console=ttyS0 xvmm.token=no");
	assert_int_equal(restore_token(&c, "given.1", tok, sizeof(tok)), 0);
	assert_string_equal(tok, "given.1");
	assert_int_equal(restore_token(&c, NULL, tok, sizeof(tok)), 0);
	assert_int_equal(strlen(tok), 32);
	for (i = 0; i < 32; i++)
		assert_non_null(strchr("0123456789abcdef", tok[i]));
	/* an older guest-init reads only its command line's token */
	snprintf(c.cmdline, sizeof(c.cmdline), "console=ttyS0 vmm.token=snaptoken");
	assert_int_equal(restore_token(&c, "given.1", tok, sizeof(tok)), 0);
	assert_string_equal(tok, "snaptoken");
	snprintf(c.cmdline, sizeof(c.cmdline), "vmm.token=snaptoken quiet");
	assert_int_equal(restore_token(&c, NULL, tok, sizeof(tok)), 0);
	assert_string_equal(tok, "snaptoken");
}

/* The whole clone: the snapshot's shape and devices, the token, its MMDS
 * settings for the interfaces and vmm serve's store, vsock's CID. */
static void configure_clone(void **state)
{
	struct snapshot *s = two_nets();
	struct vm_config cfg;
	struct run_opts *o = calloc(1, sizeof(*o));
	struct mmds m;
	char tok[160] = "", spec[VM_MAX_NETS][API_NET_SPEC];
	unsigned nr_spec = 0;
	struct sandbox sb;

	(void)state;
	assert_non_null(o);
	memset(&cfg, 0, sizeof(cfg));
	memset(&sb, 0, sizeof(sb));
	assert_int_equal(mmds_init(&m), 0);
	s->conf.mem_bytes = 256ull << 20;
	s->conf.cpus = 2;
	s->conf.has_vsock = 1;
	s->conf.cid = 9;
	s->conf.has_entropy = 1;
	s->conf.mmds.present = 1;
	s->conf.mmds.version = MMDS_V2;
	s->conf.mmds.ipv4 = 0xa9fe0102;
	s->conf.mmds.nets = 2; /* interface 1 */
	o->token = "clone.token";
	assert_int_equal(restore_configure(&cfg, s, o, &sb, &m, tok, sizeof(tok), spec, &nr_spec), 0);
	assert_ptr_equal(cfg.restore, s);
	assert_int_equal(cfg.mem_bytes, 256ull << 20);
	assert_int_equal(cfg.cpus, 2);
	assert_int_equal(cfg.tmpl_explicit, 1);
	assert_string_equal(tok, "clone.token");
	assert_int_equal(cfg.nr_nets, 2);
	assert_int_equal(cfg.nets[0].mmds, 0);
	assert_int_equal(cfg.nets[1].mmds, MMDS_V2);
	assert_ptr_equal(cfg.mmds, &m);
	assert_int_equal(m.version, MMDS_V2);
	assert_int_equal(m.ipv4, 0xa9fe0102);
	assert_int_equal(cfg.has_vsock, 1);
	assert_int_equal(cfg.vsock.cid, 9);
	assert_int_equal(cfg.has_entropy, 1);

	/* --vsock for a snapshot without one */
	memset(&cfg, 0, sizeof(cfg));
	s->conf.has_vsock = 0;
	o->vsock_given = 1;
	assert_int_equal(restore_configure(&cfg, s, o, &sb, NULL, tok, sizeof(tok), spec, &nr_spec), CLI_EXIT_ERROR);
	/* too many --net: a usage mistake */
	memset(&cfg, 0, sizeof(cfg));
	o->vsock_given = 0;
	o->nr_net_over = 3;
	assert_int_equal(restore_configure(&cfg, s, o, &sb, NULL, tok, sizeof(tok), spec, &nr_spec), CLI_EXIT_USAGE);
	mmds_destroy(&m);
	free(o);
}

struct disks_fx {
	char dir[64];
	struct snapshot s;
	struct sandbox sb;
};

static void put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int disks_setup(void **state)
{
	struct disks_fx *f = calloc(1, sizeof(*f));
	struct stat st;
	char p[PATH_MAX + 32];

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_run_restore.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->s.dir, sizeof(f->s.dir), "%s/snap", f->dir);
	snprintf(f->sb.dir, sizeof(f->sb.dir), "%s/sb", f->dir);
	mkdir(f->s.dir, 0755);
	mkdir(f->sb.dir, 0755);
	/* disk 0: writable, its copy in the snapshot; disk 1: read-only, used in place */
	f->s.conf.nr_disks = 2;
	snprintf(f->s.conf.disks[0].id, sizeof(f->s.conf.disks[0].id), "root");
	snprintf(f->s.conf.disks[0].file, sizeof(f->s.conf.disks[0].file), "disk0");
	f->s.conf.disks[0].root = 1;
	snprintf(p, sizeof(p), "%s/disk0", f->s.dir);
	put_file(p, "root disk\n");
	snprintf(f->s.conf.disks[1].id, sizeof(f->s.conf.disks[1].id), "data");
	snprintf(f->s.conf.disks[1].path, sizeof(f->s.conf.disks[1].path), "%s/data.img", f->dir);
	f->s.conf.disks[1].ro = 1;
	put_file(f->s.conf.disks[1].path, "data\n");
	if (stat(f->s.conf.disks[1].path, &st))
		return -1;
	f->s.conf.disks[1].size = (uint64_t)st.st_size;
	f->s.conf.disks[1].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	*state = f;
	return 0;
}

static int disks_teardown(void **state)
{
	struct disks_fx *f = *state;
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd)) {
		/* the directory stays in /tmp */
	}
	free(f);
	return 0;
}

static void free_disks(struct vm_config *cfg)
{
	while (cfg->nr_disks > 0)
		blk_options_free(&cfg->disks[--cfg->nr_disks]);
}

static void disks_copied(void **state)
{
	struct disks_fx *f = *state;
	struct vm_config cfg = { .nr_disks = 0 };
	char want[PATH_MAX + 16], text[64] = "";
	FILE *in;

	assert_int_equal(restore_disks(&cfg, &f->s, NULL, 0, &f->sb, 0), 0);
	assert_int_equal(cfg.nr_disks, 2);
	snprintf(want, sizeof(want), "%s/disk0", f->sb.dir);
	assert_string_equal(cfg.disks[0].path, want);
	assert_int_equal(cfg.disks[0].root, 1);
	assert_string_equal(cfg.disks[0].id, "root");
	in = fopen(want, "re");
	assert_non_null(in);
	assert_non_null(fgets(text, sizeof(text), in));
	fclose(in);
	assert_string_equal(text, "root disk\n");
	assert_string_equal(cfg.disks[1].path, f->s.conf.disks[1].path);
	assert_int_equal(cfg.disks[1].ro, 1);
	free_disks(&cfg);
}

static void disks_override(void **state)
{
	struct disks_fx *f = *state;
	struct vm_config cfg = { .nr_disks = 0 };
	struct blk_options over[2];

	memset(over, 0, sizeof(over));
	/* by id, then one without an id takes the next disk left */
	over[0].path = strdup("/tmp/mine-data.img");
	snprintf(over[0].id, sizeof(over[0].id), "data");
	over[1].path = strdup("/tmp/mine-root.img");
	assert_int_equal(restore_disks(&cfg, &f->s, over, 2, &f->sb, 0), 0);
	assert_null(over[0].path); /* taken */
	assert_string_equal(cfg.disks[0].path, "/tmp/mine-root.img");
	assert_string_equal(cfg.disks[1].path, "/tmp/mine-data.img");
	assert_int_equal(cfg.disks[1].ro, 1);
	free_disks(&cfg);

	/* an id the snapshot does not have */
	memset(&cfg, 0, sizeof(cfg));
	over[0].path = strdup("/tmp/x.img");
	snprintf(over[0].id, sizeof(over[0].id), "nope");
	assert_int_equal(restore_disks(&cfg, &f->s, over, 1, &f->sb, 0), -EINVAL);
	free(over[0].path);
}

static void disks_refused(void **state)
{
	struct disks_fx *f = *state;
	struct vm_config cfg = { .nr_disks = 0 };

	/* the read-only disk changed since the snapshot */
	f->s.conf.disks[1].size++;
	assert_int_equal(restore_disks(&cfg, &f->s, NULL, 0, &f->sb, 0), -EINVAL);
	free_disks(&cfg);
	f->s.conf.disks[1].size--;
	/* a standby state (its writable disk not copied): only in place */
	f->s.conf.disks[0].file[0] = '\0';
	snprintf(f->s.conf.disks[0].path, sizeof(f->s.conf.disks[0].path), "/var/sb/rootfs.img");
	memset(&cfg, 0, sizeof(cfg));
	assert_int_equal(restore_disks(&cfg, &f->s, NULL, 0, &f->sb, 0), -EINVAL);
	free_disks(&cfg);
	memset(&cfg, 0, sizeof(cfg));
	assert_int_equal(restore_disks(&cfg, &f->s, NULL, 0, &f->sb, 1), 0);
	assert_string_equal(cfg.disks[0].path, "/var/sb/rootfs.img");
	free_disks(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nets_default),
		cmocka_unit_test(nets_override_ip),
		cmocka_unit_test(nets_override_mac),
		cmocka_unit_test(nets_refused),
		cmocka_unit_test(fs_overrides),
		cmocka_unit_test(token_choice),
		cmocka_unit_test(configure_clone),
		cmocka_unit_test_setup_teardown(disks_copied, disks_setup, disks_teardown),
		cmocka_unit_test_setup_teardown(disks_override, disks_setup, disks_teardown),
		cmocka_unit_test_setup_teardown(disks_refused, disks_setup, disks_teardown),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
