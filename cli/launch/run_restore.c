/* A clone's configuration from its snapshot (run_restore.h). */
#include "cli/launch/run_restore.h"
#include "cli/util/util.h"
#include "cli/launch/run_opts.h"
#include "cli/sandbox/sandbox.h"
#include "devices/mmds.h"
#include "vmm/base/log.h"
#include "vmm/vm_snapshot.h"
#include "vmm/vm.h"

#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

int run_random_token(char *tok, size_t len)
{
	uint8_t rnd[16];
	unsigned i;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		log_err("getrandom: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < sizeof(rnd) && 2 * i + 2 < len; i++)
		snprintf(tok + 2 * i, len - 2 * i, "%02x", rnd[i]);
	return 0;
}

/* The token of a clone of snapshot `c`: --token (`given`), else a random
 * one; the snapshot's own if its guest-init is from before the token window
 * (it took its token from the command line, vmm.token=, and reads nothing
 * else). */
int restore_token(const struct snap_conf *c, const char *given, char *tok, size_t len)
{
	const char *p;

	for (p = c->cmdline; (p = strstr(p, "vmm.token=")); p++) {
		if (p == c->cmdline || p[-1] == ' ') {
			log_warn("restore: the snapshot's guest reads its API token from the kernel command "
				 "line (a snapshot from an older vmm): the clone keeps the snapshot's token, "
				 "and every process in it can read it; take a new snapshot");
			snprintf(tok, len, "%s", c->token);
			return 0;
		}
	}
	if (given) {
		snprintf(tok, len, "%s", given);
		return 0;
	}
	return run_random_token(tok, len);
}

/* restore: the snapshot's network interfaces, each on the TAP the k-th
 * --net names (default: the snapshot's). The device keeps the MAC the
 * guest's driver read at boot; a new mac=/ip=/gw=/dns= for the clone is
 * applied by guest-init once the API answers (the sync request), written
 * into spec[k]. */
int restore_nets(struct vm_config *cfg, const struct snapshot *s, const struct net_options *over,
		 const int *mac_given, unsigned nr_over, char spec[][API_NET_SPEC], unsigned *nr_spec)
{
	unsigned i;

	*nr_spec = 0;
	if (nr_over > s->conf.nr_nets) {
		log_err("restore: %u --net given, the snapshot has %u network interfaces", nr_over,
			s->conf.nr_nets);
		return -EINVAL;
	}
	cfg->nr_nets = s->conf.nr_nets;
	for (i = 0; i < s->conf.nr_nets; i++) {
		struct net_options *o = &cfg->nets[i];
		const struct snap_net *sn = &s->conf.nets[i];

		if (i < nr_over) {
			*o = over[i];
			if ((mac_given[i] && memcmp(o->mac, sn->mac, 6)) || o->ip) {
				struct net_options g = *o;
				char old[18], b[API_NET_SPEC];
				size_t n;

				/* net_guest_cmdline's form, then the old MAC first. */
				if (!mac_given[i])
					memcpy(g.mac, sn->mac, 6);
				if (net_guest_cmdline(&g, b, sizeof(b))) {
					log_err("restore: --net %s: description too long", o->tap);
					return -EINVAL;
				}
				net_format_mac(sn->mac, old);
				n = (size_t)snprintf(spec[*nr_spec], API_NET_SPEC, "%s,mac=%s", old,
						     b + strlen("vmm.net="));
				if (n >= API_NET_SPEC) {
					log_err("restore: --net %s: description too long", o->tap);
					return -EINVAL;
				}
				(*nr_spec)++;
			} else if (o->gw || o->dns) {
				log_err("restore: --net %s: gw= and dns= need ip= too", o->tap);
				return -EINVAL;
			}
		} else {
			memset(o, 0, sizeof(*o));
			snprintf(o->tap, sizeof(o->tap), "%s", sn->tap);
		}
		/* The device: the snapshot's MAC and offloads, the guest-side
		 * settings go through guest-init (above), not the command line. */
		o->ip = o->gw = o->dns = 0;
		o->prefix = 0;
		memcpy(o->mac, sn->mac, 6);
		o->has_mac = 1;
		o->no_offload = sn->no_offload;
		memcpy(o->host_mac, sn->host_mac, 6);
		o->has_host_mac = memcmp(sn->host_mac, "\0\0\0\0\0\0", 6) != 0;
	}
	return 0;
}

/* restore: the snapshot's shared drives, in its order, each on the
 * directory it had or the one an override (--fs tag=T,path=P, or a
 * drive's from restore_drives, with its limit and count) names. */
int restore_fs(struct vm_config *cfg, const struct snapshot *s, struct fs_options *over, unsigned nr_over)
{
	unsigned i, j;

	for (j = 0; j < nr_over; j++) {
		for (i = 0; i < s->conf.nr_fs; i++)
			if (!strcmp(s->conf.fs[i].tag, over[j].tag))
				break;
		if (i == s->conf.nr_fs) {
			log_err("--fs tag=%s: the snapshot has no shared drive of that name", over[j].tag);
			return -EINVAL;
		}
	}
	cfg->nr_fs = s->conf.nr_fs;
	for (i = 0; i < s->conf.nr_fs; i++) {
		const struct snap_fs *f = &s->conf.fs[i];
		struct fs_options *o = &cfg->fs[i];
		const struct fs_options *ov = NULL;
		const char *at;

		for (j = 0; j < nr_over; j++)
			if (!strcmp(f->tag, over[j].tag))
				ov = &over[j];
		snprintf(o->tag, sizeof(o->tag), "%s", f->tag);
		o->ro = f->ro;
		o->cache = (enum fuse_cache)f->cache;
		o->path = strdup(ov ? ov->path : f->path);
		if (!o->path)
			return -ENOMEM;
		/* where the guest has it (the clone's own snapshot keeps it);
		 * a drive's size limit and shared count (run_drives.h) */
		at = ov && ov->at ? ov->at : f->at[0] ? f->at : NULL;
		if ((at && !(o->at = strdup(at))) || (ov && ov->usage && !(o->usage = strdup(ov->usage))))
			return -ENOMEM;
		o->limit = o->usage ? ov->limit : 0;
	}
	return 0;
}

/* restore: the snapshot's disks for this clone. An override (--disk
 * path=F[,id=ID]) is used as is; a read-only disk is used in place if it
 * has not changed; a writable one is copied from the snapshot. */
int restore_disks(struct vm_config *cfg, const struct snapshot *s, struct blk_options *over, unsigned nr_over,
		  const struct sandbox *sb, int in_place)
{
	unsigned i, j, next = 0;
	int used[VM_MAX_DISKS] = { 0 };

	for (j = 0; j < nr_over; j++) {
		for (i = 0; i < s->conf.nr_disks && over[j].id[0]; i++)
			if (!strcmp(s->conf.disks[i].id, over[j].id))
				break;
		if (!over[j].id[0]) {
			while (next < s->conf.nr_disks && used[next])
				next++;
			i = next;
		}
		if (i >= s->conf.nr_disks || used[i]) {
			log_err("--disk %s: the snapshot has no%s disk %s", over[j].path,
				i < s->conf.nr_disks ? " other" : "", over[j].id[0] ? over[j].id : "left to replace");
			return -EINVAL;
		}
		used[i] = 1;
		cfg->disks[i].path = over[j].path;
		cfg->disks[i].no_lock = over[j].no_lock;
		over[j].path = NULL;
	}
	cfg->nr_disks = s->conf.nr_disks;
	for (i = 0; i < s->conf.nr_disks; i++) {
		const struct snap_disk *d = &s->conf.disks[i];
		struct blk_options *o = &cfg->disks[i];
		struct stat st;
		char p[PATH_MAX], src[PATH_MAX];
		int r;

		o->ro = d->ro;
		o->root = d->root;
		snprintf(o->id, sizeof(o->id), "%s", d->id);
		if (used[i])
			continue;
		if (!d->ro && !d->file[0]) {
			/* A standby state: its disks stayed where they are. */
			if (!in_place) {
				log_err("snapshot %s: a sandbox's standby state (its disks were not copied): "
					"'vmm resume NAME' restores it, in place", s->dir);
				return -EINVAL;
			}
			o->path = strdup(d->path);
		} else if (d->ro) {
			if (stat(d->path, &st) < 0 || (uint64_t)st.st_size != d->size ||
			    (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != d->mtime_ns) {
				log_err("snapshot %s: read-only disk %s is missing or changed since the "
					"snapshot (give --disk path=FILE,id=%s)", s->dir, d->path, d->id);
				return -EINVAL;
			}
			o->path = strdup(d->path);
		} else {
			if (snprintf(src, sizeof(src), "%s/%s", s->dir, d->file) >= (int)sizeof(src) ||
			    snprintf(p, sizeof(p), "%s/disk%u", sb->dir, i) >= (int)sizeof(p))
				return -ENAMETOOLONG;
			r = snap_copy_file(src, p);
			if (r) {
				log_err("snapshot %s: cannot copy %s for this sandbox: %s", s->dir, d->file,
					strerror(-r));
				return r;
			}
			o->path = strdup(p);
		}
		if (!o->path)
			return -ENOMEM;
	}
	return 0;
}

int restore_configure(struct vm_config *cfg, struct snapshot *snap, struct run_opts *o, const struct sandbox *sb,
		      struct mmds *api_mmds, char *tok, size_t toklen, char spec[][API_NET_SPEC], unsigned *nr_spec)
{
	const struct snap_conf *c = &snap->conf;

	cfg->restore = snap;
	cfg->mem_bytes = c->mem_bytes;
	cfg->cpus = c->cpus;
	cfg->tmpl = (enum cpu_template)c->tmpl;
	cfg->tmpl_explicit = 1;
	/* A clone gets a token of its own: guest-init reads the token
	 * window on every connection, so it takes the new one at once.
	 * A snapshot whose command line carries vmm.token= is from before
	 * the window (its guest-init knows only that one): it keeps it. */
	if (o->in_place) {
		/* The same identity: the token the folder holds. */
		char tp[PATH_MAX + 16];

		snprintf(tp, sizeof(tp), "%s/token", sb->dir);
		if (cli_read_text(tp, tok, toklen)) {
			log_err("resume: cannot read %s", tp);
			return CLI_EXIT_ERROR;
		}
		tok[strcspn(tok, "\n")] = '\0';
	} else if (restore_token(c, o->token, tok, toklen))
		return CLI_EXIT_ERROR;
	if (restore_disks(cfg, snap, o->over, o->nr_over, sb, o->in_place) ||
	    restore_fs(cfg, snap, o->over_fs, o->nr_over_fs))
		return CLI_EXIT_ERROR;
	if (restore_nets(cfg, snap, o->net_over, o->net_mac_given, o->nr_net_over, spec, nr_spec))
		return CLI_EXIT_USAGE;
	/* The interfaces that served the MMDS serve it again, with its
	 * version and address (the store starts empty: --metadata, or
	 * PUT /mmds through the API, fills it). A --net ...,mmds may add
	 * one; the stricter version of the two wins. */
	if (c->mmds.present) {
		unsigned k;

		for (k = 0; k < cfg->nr_nets; k++)
			if ((c->mmds.nets >> k) & 1 && cfg->nets[k].mmds < (int)c->mmds.version)
				cfg->nets[k].mmds = (int)c->mmds.version;
		if (api_mmds) {
			struct mmds *m = api_mmds;

			pthread_mutex_lock(&m->lock);
			m->version = (enum mmds_version)c->mmds.version;
			m->ipv4 = c->mmds.ipv4;
			m->imds_compat = c->mmds.imds_compat;
			pthread_mutex_unlock(&m->lock);
			cfg->mmds = m; /* the device thread reads it, under its lock */
		}
	}
	cfg->has_entropy = (int)c->has_entropy;
	cfg->entropy.rl = c->entropy_rl;
	cfg->has_balloon = (int)c->has_balloon;
	cfg->balloon = c->balloon;
	cfg->has_vsock = (int)c->has_vsock;
	if (cfg->has_vsock && !o->vsock_given)
		cfg->vsock.cid = c->cid;
	if (!cfg->has_vsock && o->vsock_given) {
		log_err("restore: the snapshot has no vsock device to configure");
		return CLI_EXIT_ERROR;
	}
	return 0;
}
