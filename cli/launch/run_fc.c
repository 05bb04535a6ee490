/* The Firecracker-compatible side of starting a sandbox (run_fc.h). */
#include "cli/launch/run_fc.h"
#include "cli/util/util.h"
#include "cli/launch/run_drives.h"
#include "cli/launch/run_opts.h"
#include "cli/sandbox/sandbox.h"
#include "devices/mmds.h"
#include "vmm/api/control.h"
#include "vmm/api/fcapi.h"
#include "vmm/base/log.h"
#include "vmm/base/gm.h"
#include "vmm/vm_snapshot.h"
#include "vmm/base/uffd.h"
#include "vmm/vm.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

/* vmm serve's pre-boot loop: serves the API until an action is pending
 * (0), a stop signal came (-EINTR) or a PUT /snapshot/load failed and was
 * answered (-ECANCELED: the VMM exits, as Firecracker does). */
static int serve_preboot(struct control *c)
{
	struct pollfd p[1 + CONTROL_POLLFDS];
	sigset_t sigs, old;
	int sfd, r = 0;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		r = -errno;
		log_err("signalfd: %s", strerror(errno));
		goto out;
	}
	while (c->api->pending == FCAPI_NONE && !c->api->load_failed) {
		int timeout = -1;
		unsigned n;

		p[0].fd = sfd;
		p[0].events = POLLIN;
		p[0].revents = 0;
		n = control_pollfds(c, &p[1], &timeout);
		if (poll(p, n + 1, timeout) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			log_err("poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			/* Taken, so it does not kill us once unblocked. */
			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			log_info("stopped by signal %s before the VM started", strsignal((int)si.ssi_signo));
			r = -EINTR;
			break;
		}
		control_events(c, NULL, &p[1], n);
	}
	if (!r && c->api->load_failed) {
		log_err("PUT /snapshot/load failed (answered): exiting, as Firecracker does");
		r = -ECANCELED;
	}
	close(sfd);
out:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* PUT /snapshot/load's network_overrides and vsock_override as vmm
 * restore's --net and --vsock: every interface gets its TAP (the
 * override's, else the snapshot's own). An interface is named by the
 * iface_id it had in the API that made the snapshot (its vm-config.json),
 * else "ethN" for the Nth. 0, or -EINVAL with why set. */
static int fc_load_overrides(const struct fcapi *a, const struct snapshot *s, struct net_options *over,
			     unsigned *nr_over, struct vm_config *cfg, char *why, size_t n)
{
	char ids[VM_MAX_NETS][64], path[PATH_MAX + 32], *text = NULL;
	unsigned i, k;
	FILE *f;

	for (i = 0; i < VM_MAX_NETS; i++)
		snprintf(ids[i], sizeof(ids[i]), "eth%u", i);
	snprintf(path, sizeof(path), "%s/%s", s->dir, FCAPI_SNAP_CONFIG);
	f = a->nr_load_net ? fopen(path, "re") : NULL;
	if (f) {
		size_t len;
		char *arena = malloc(1u << 20);

		text = malloc(FCAPI_REPLY_MAX);
		len = text ? fread(text, 1, FCAPI_REPLY_MAX, f) : 0;
		if (arena && len) {
			struct json_arena ar = { .buf = arena, .size = 1u << 20 };
			const char *err;
			const struct json *root = json_parse(text, len, &ar, &err), *arr, *e;

			arr = root ? json_get(root, "network-interfaces") : NULL;
			for (e = arr && arr->type == JSON_ARR ? arr->u.kids.first : NULL, i = 0; e && i < VM_MAX_NETS;
			     e = e->next, i++) {
				const char *id = NULL;

				if (!json_get_str(e, "iface_id", &id))
					snprintf(ids[i], sizeof(ids[i]), "%s", id);
			}
		}
		free(arena);
		free(text);
		fclose(f);
	}
	for (k = 0; k < a->nr_load_net; k++) {
		for (i = 0; i < s->conf.nr_nets && strcmp(ids[i], a->load_net[k].iface_id); i++) {
		}
		if (i == s->conf.nr_nets) {
			snprintf(why, n, "network_overrides: the snapshot has no interface %s", a->load_net[k].iface_id);
			return -EINVAL;
		}
	}
	if (a->nr_load_net) {
		for (i = 0; i < s->conf.nr_nets; i++) {
			memset(&over[i], 0, sizeof(over[i]));
			snprintf(over[i].tap, sizeof(over[i].tap), "%s", s->conf.nets[i].tap);
			for (k = 0; k < a->nr_load_net; k++)
				if (!strcmp(ids[i], a->load_net[k].iface_id))
					snprintf(over[i].tap, sizeof(over[i].tap), "%s", a->load_net[k].host_dev);
		}
		*nr_over = s->conf.nr_nets;
	}
	if (a->load_vsock_uds[0]) {
		if (!s->conf.has_vsock) {
			snprintf(why, n, "vsock_override: the snapshot has no vsock device");
			return -EINVAL;
		}
		snprintf(cfg->vsock.uds, sizeof(cfg->vsock.uds), "%s", a->load_vsock_uds);
	}
	return 0;
}

/* vmm serve (--config-file): the Firecracker configuration file, applied
 * through the same checks as the API's PUTs. */
static int apply_config_file(struct control *ctl, const char *path)
{
	char why[512];
	struct stat st;
	char *text;
	FILE *f = fopen(path, "re");
	size_t n;
	int r;

	if (!f || fstat(fileno(f), &st) < 0 || st.st_size > (1 << 20)) {
		log_err("--config-file %s: %s", path, f ? "larger than 1 MiB" : strerror(errno));
		if (f)
			fclose(f);
		return -EINVAL;
	}
	text = malloc((size_t)st.st_size + 1);
	n = text ? fread(text, 1, (size_t)st.st_size, f) : 0;
	fclose(f);
	if (!text)
		return -ENOMEM;
	r = fcapi_apply_config_file(ctl->api, text, n, why, sizeof(why));
	free(text);
	if (r) {
		log_err("--config-file %s: %s", path, why);
		return r;
	}
	ctl->api->pending = FCAPI_START;
	return 0;
}

/* Firecracker's --metadata FILE: the MMDS's first contents (as PUT /mmds). */
static int load_metadata(struct mmds *m, const char *path)
{
	char why[512], *text;
	FILE *f = fopen(path, "re");
	size_t n = 0, cap = m->limit * 4 + 4096; /* blanks do not count against the limit */
	int r;

	if (!f) {
		log_err("--metadata %s: %s", path, strerror(errno));
		return -EINVAL;
	}
	text = malloc(cap + 1);
	if (text)
		n = fread(text, 1, cap + 1, f);
	fclose(f);
	if (!text)
		return -ENOMEM;
	if (n > cap) {
		free(text);
		log_err("--metadata %s: larger than %zu bytes", path, cap);
		return -EFBIG;
	}
	r = mmds_put(m, text, n, why, sizeof(why));
	free(text);
	if (r)
		log_err("--metadata %s: %s", path, why);
	return r;
}

/* --net ...,mmds[=v2] and --metadata FILE outside the Firecracker API:
 * the store the VM's interfaces serve. 0 or a CLI exit status. */
int run_fc_mmds(struct run_opts *o, struct vm_config *cfg, struct mmds **out, const char *metadata, unsigned long limit,
		const struct snap_mmds *snap)
{
	struct mmds *m;
	int want = 0;
	unsigned i;

	for (i = 0; i < cfg->nr_nets; i++)
		if (cfg->nets[i].mmds > want)
			want = cfg->nets[i].mmds;
	if (!want) {
		if (metadata)
			return run_bad_usage(o, "--metadata %s: no interface serves the MMDS (add mmds to a --net)", metadata);
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m || mmds_init(m)) {
		free(m);
		return CLI_EXIT_ERROR;
	}
	m->version = want == 2 ? MMDS_V2 : MMDS_V1;
	if (snap && snap->present) { /* restore: the snapshot's address */
		m->ipv4 = snap->ipv4;
		m->imds_compat = snap->imds_compat;
	}
	if (limit)
		m->limit = limit;
	if (metadata && load_metadata(m, metadata)) {
		mmds_destroy(m);
		free(m);
		return CLI_EXIT_USAGE;
	}
	cfg->mmds = m;
	*out = m;
	return 0;
}

/* PUT /snapshot/load's Uffd memory backend: guest memory for the
 * snapshot's layout, mapped and handed to the page-fault handler at the
 * request's socket (vmm/base/uffd.h) before anything else is built, so a
 * handler that is not there is a 400 and the API serves on. 0, or -errno
 * with why set. */
static int fc_load_uffd(const struct fcapi *a, const struct snapshot *s, struct uffd_backend *ub, char *why,
			size_t n)
{
	struct gm_region regions[GM_MAX_REGIONS];
	int nr;

	/* A diff's memory file holds only the pages written since its base
	 * (restore layers the chain); a handler given that file alone would
	 * serve zeros for the rest. */
	if (s->ident.kind != SNAP_KIND_FULL) {
		snprintf(why, n, "Load snapshot error: %.200s is a Diff snapshot: a page-fault handler (Uffd) needs "
			 "a full one; flatten it first (vmm snapshot merge BASE DIFF) or load it with a File backend",
			 s->dir);
		return -EINVAL;
	}
	nr = gm_x86_layout(s->conf.mem_bytes, regions);
	if (nr < 0) {
		snprintf(why, n, "Load snapshot error: the snapshot's memory size is not a valid layout");
		return nr;
	}
	return uffd_backend_open(ub, a->load_uffd, regions, (unsigned)nr, why, n);
}

int run_fc_serve_configure(struct control *ctl, struct run_opts *o, const struct sandbox *sb,
			   struct vm_config *cfg, struct snapshot *snap, struct uffd_backend *ub, int *status)
{
	char why[512];

	if (o->fc.no_api && !o->config_file) {
		*status = run_bad_usage(o, "--no-api needs --config-file%s", "");
		return -1;
	}
	if (control_open(ctl, sb->control, sb->name)) {
		*status = CLI_EXIT_ERROR;
		return -1;
	}
	if (o->fc.max_payload)
		ctl->max_body = o->fc.max_payload;
	/* PUT /fs {"drive": NAME}: the store's drives, for this sandbox */
	ctl->api->drive_resolve = run_fc_drive;
	ctl->api->drive_ctx = o;
	/* Firecracker's --log-path and friends: as PUT /logger, first. */
	if ((o->fc.log_path || o->fc.level || o->fc.show_level || o->fc.show_origin) &&
	    fcapi_set_logger(ctl->api, o->fc.log_path, o->fc.level, o->fc.show_level, o->fc.show_origin, why, sizeof(why))) {
		log_err("--log-path/--level: %s", why);
		*status = CLI_EXIT_USAGE;
		return -1;
	}
	if (o->fc.mmds_limit)
		ctl->api->mmds.limit = o->fc.mmds_limit;
	if (o->fc.metadata && load_metadata(&ctl->api->mmds, o->fc.metadata)) {
		*status = CLI_EXIT_USAGE;
		return -1;
	}
	if (o->fc.metrics_path && fcapi_set_metrics(ctl->api, o->fc.metrics_path, why, sizeof(why))) {
		log_err("--metrics-path: %s", why);
		*status = CLI_EXIT_ERROR;
		return -1;
	}
	if ((o->api_sock && !o->fc.no_api && control_listen(ctl, o->api_sock)) ||
	    (o->config_file && apply_config_file(ctl, o->config_file))) {
		*status = CLI_EXIT_ERROR;
		return -1;
	}
	log_info("sandbox %s: serving the API on %s; configure it and PUT /actions InstanceStart",
		 sb->name, o->api_sock ? o->api_sock : sb->control);
	/* Until an InstanceStart or a load that can go ahead: one that
	 * cannot is answered and the API serves on. */
	for (;;) {
		int r, was_load;

		if (!o->config_file && (r = serve_preboot(ctl))) {
			/* 0: stopped by a signal before anything ran */
			*status = r == -ECANCELED ? CLI_EXIT_ERROR : 0;
			return -1;
		}
		was_load = ctl->api->pending == FCAPI_LOAD;
		if (was_load) {
			if ((r = snapshot_open(snap, ctl->api->load_dir)) == 0) {
				char uds[sizeof(cfg->vsock.uds)];

				memcpy(uds, cfg->vsock.uds, sizeof(uds));
				if (fc_load_overrides(ctl->api, snap, o->net_over, &o->nr_net_over, cfg, why,
						      sizeof(why)) == 0) {
					/* its named drives: allowed for this sandbox? */
					if (restore_drives(snap, o, why, sizeof(why)) == 0 &&
					    (!ctl->api->load_uffd[0] ||
					     fc_load_uffd(ctl->api, snap, ub, why, sizeof(why)) == 0))
						break;
					/* as before this load: another may follow */
					o->nr_net_over = 0;
					while (o->nr_over_fs)
						fs_options_free(&o->over_fs[--o->nr_over_fs]);
					memcpy(cfg->vsock.uds, uds, sizeof(uds));
				}
				snapshot_close(snap);
			} else {
				snprintf(why, sizeof(why),
					 "snapshot %.150s cannot be loaded: %s (the VMM's log says more)",
					 ctl->api->load_dir, strerror(-r));
			}
		} else if (fcapi_vm_config(ctl->api, cfg, why, sizeof(why)) == 0) {
			run_fc_drives_text(ctl->api, o);
			if (!o->nr_pub || cfg->has_vsock)
				break;
			snprintf(why, sizeof(why), "--publish needs a vsock device: PUT /vsock first");
		}
		if (o->config_file) {
			log_err("--config-file %s: %s", o->config_file, why);
			*status = CLI_EXIT_ERROR;
			return -1;
		}
		while (cfg->nr_disks > 0)
			blk_options_free(&cfg->disks[--cfg->nr_disks]);
		while (cfg->nr_fs > 0)
			fs_options_free(&cfg->fs[--cfg->nr_fs]);
		cfg->nr_nets = 0;
		control_finish(ctl, NULL, why);
		/* A load that failed here: answered, then the VMM exits, as
		 * Firecracker does (docs/control-api.md). */
		if (ctl->api->pending == FCAPI_NONE && was_load) {
			log_err("PUT /snapshot/load failed: %s; exiting, as Firecracker does", why);
			*status = CLI_EXIT_ERROR;
			return -1;
		}
	}
	return 0;
}
