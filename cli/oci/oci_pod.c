/* A Kubernetes pod as one VM for vmm oci (cli/oci/oci_pod.h): a
 * container's role from its CRI annotations, where its processes run in
 * the pod's guest, its root and bind sources shown to the guest through
 * the pod share, and their undoing. */
#include "cli/oci/oci_pod.h"
#include "cli/oci/oci_state.h"
#include "cli/util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

enum oci_role oci_pod_role(const struct oci_spec *s, const char **sbid)
{
	const char *t = oci_spec_annotation(s, "io.kubernetes.cri.container-type");
	const char *sb = oci_spec_annotation(s, "io.kubernetes.cri.sandbox-id");

	if (!t) {
		t = oci_spec_annotation(s, "io.kubernetes.cri-o.ContainerType");
		sb = oci_spec_annotation(s, "io.kubernetes.cri-o.SandboxID");
	}
	*sbid = NULL;
	if (t && !strcmp(t, "sandbox"))
		return OCI_POD_SANDBOX;
	if (t && !strcmp(t, "container") && sb && oci_id_ok(sb)) {
		*sbid = sb;
		return OCI_POD_CONTAINER;
	}
	return OCI_ALONE;
}

static int file_in(const struct oci_ctx *c, const char *id, const char *name, char *p, size_t len)
{
	char dir[PATH_MAX];

	if (oci_state_dir(c->root, id, dir, sizeof(dir)))
		return -EINVAL;
	return snprintf(p, len, "%s/%s", dir, name) >= (int)len ? -ENAMETOOLONG : 0;
}

int oci_pod_record(const struct oci_ctx *c, const char *id, const char *sbid)
{
	char p[PATH_MAX + 16];
	int r = file_in(c, id, "sandbox", p, sizeof(p));

	return r ? r : cli_write_text(p, sbid, 0644);
}

int oci_pod_of(const struct oci_ctx *c, const char *id, char *sbid, size_t len)
{
	char p[PATH_MAX + 16];
	int r = file_in(c, id, "sandbox", p, sizeof(p));

	if (r || (r = cli_read_text(p, sbid, len)))
		return r == -EINVAL ? r : -ENOENT;
	sbid[strcspn(sbid, "\n")] = '\0';
	return oci_id_ok(sbid) ? 0 : -ENOENT;
}

void oci_pod_record_gpid(const struct oci_ctx *c, const char *id, long gpid)
{
	char p[PATH_MAX + 16], t[32];

	snprintf(t, sizeof(t), "%ld", gpid);
	if (!file_in(c, id, "gpid", p, sizeof(p)))
		(void)cli_write_text(p, t, 0644);
}

int oci_pod_record_pidns(const struct oci_ctx *c, const char *id, enum oci_role role, const struct oci_spec *s)
{
	char p[PATH_MAX + 16];
	int r;

	/* CRI: NamespaceMode CONTAINER gives a pid entry of the container's
	 * own, POD one with the sandbox's path, NODE none (the guest's, in
	 * a VM); the sandbox's own entry makes the pod's namespace. */
	if (role == OCI_ALONE || s->pidns == OCI_PIDNS_NONE)
		return 0;
	if ((r = file_in(c, id, "pidns", p, sizeof(p))))
		return r;
	return cli_write_text(p, role == OCI_POD_CONTAINER && s->pidns == OCI_PIDNS_JOIN ? "pod" : "new", 0644);
}

/* ROOT/ID/gpid: the guest pid of id's init, or 0. */
static long gpid_of(const struct oci_ctx *c, const char *id)
{
	char p[PATH_MAX + 16], t[32];
	long gpid;

	if (file_in(c, id, "gpid", p, sizeof(p)) || cli_read_text(p, t, sizeof(t)))
		return 0;
	gpid = strtol(t, NULL, 10);
	return gpid > 1 ? gpid : 0;
}

/* The "pidns" of an exec request (oci_where): a container's init gets a
 * new one, or its pod's (the sandbox's init's); an exec joins its
 * init's. Empty: the guest's (no pid entry, or no init to join yet). */
static void where_pidns(const struct oci_ctx *c, const char *id, const char *sbid, int for_init, char *buf,
			size_t len)
{
	char p[PATH_MAX + 16], kind[16];
	long gpid;
	int i;

	buf[0] = '\0';
	if (file_in(c, id, "pidns", p, sizeof(p)) || cli_read_text(p, kind, sizeof(kind)))
		return;
	if (for_init && !strcmp(kind, "new")) {
		snprintf(buf, len, "new");
		return;
	}
	/* the pod's: its sandbox's init records its pid as it starts, which
	 * containerd may not have waited for (up to 5 s) */
	for (i = 0; !(gpid = gpid_of(c, for_init ? sbid : id)) && for_init && i < 100; i++)
		usleep(50 * 1000);
	if (gpid)
		snprintf(buf, len, "/proc/%ld/ns/pid", gpid);
}

int oci_pod_wait_init(const struct oci_ctx *c, const char *id)
{
	char sbid[OCI_ID_MAX + 2];

	if (oci_pod_of(c, id, sbid, sizeof(sbid)))
		return 0; /* alone, or a sandbox: the VM's own namespaces */
	for (int i = 0; i < 100; i++) {
		if (gpid_of(c, id))
			return 0;
		usleep(50 * 1000);
	}
	return -EAGAIN;
}

/* The tag of id's init: "c" and the ID's first 63 characters (a tag
 * starts with no digit; Kubernetes' IDs are 64 hex digits). */
static void pod_tag(const char *id, char *tag, size_t len)
{
	snprintf(tag, len, "c%.63s", id);
}

void oci_where_of(const struct oci_ctx *c, const char *id, int for_init, struct oci_where *w)
{
	char sbid[OCI_ID_MAX + 2];
	long gpid;

	memset(w, 0, sizeof(*w));
	if (oci_pod_of(c, id, sbid, sizeof(sbid))) {
		/* alone, or a pod's sandbox (whose pidns file says "new") */
		snprintf(w->root, sizeof(w->root), "%s", OCI_GUEST_ROOT);
		snprintf(w->tag, sizeof(w->tag), "init");
		where_pidns(c, id, id, for_init, w->pidns, sizeof(w->pidns));
		return;
	}
	snprintf(w->root, sizeof(w->root), "%s/%s", OCI_POD_GUEST_ROOTS, id);
	pod_tag(id, w->tag, sizeof(w->tag));
	snprintf(w->cgroup, sizeof(w->cgroup), "%s/%s", OCI_POD_CGROUP, id);
	if (for_init)
		snprintf(w->mntns, sizeof(w->mntns), "new");
	else if ((gpid = gpid_of(c, id)))
		snprintf(w->mntns, sizeof(w->mntns), "/proc/%ld/ns/mnt", gpid);
	where_pidns(c, id, sbid, for_init, w->pidns, sizeof(w->pidns));
}

int oci_pod_dir(const struct oci_ctx *c, const char *sbid, char *buf, size_t len)
{
	return file_in(c, sbid, "pod", buf, len);
}

int oci_pod_share_make(const char *dir)
{
	if (mkdir(dir, 0700) < 0)
		return -errno;
	if (mount(dir, dir, NULL, MS_BIND, NULL) < 0 || mount(NULL, dir, NULL, MS_SHARED, NULL) < 0) {
		int r = -errno;

		umount2(dir, MNT_DETACH);
		rmdir(dir);
		return r;
	}
	return 0;
}

/* A read-only bind made read-only before it is attached: the copy that
 * propagates into the pod's jailed VMM is then read-only too (a remount
 * afterwards changes the host's mount only). Linux 5.12's mount_setattr;
 * 0, or -errno (-ENOSYS on older kernels). */
static int bind_ro_tree(const char *src, const char *dst)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
	int fd = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE), r = 0;

	if (fd < 0)
		return -errno;
	if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0 ||
	    move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* Binds src at dir/name (made: a folder). 0 or -errno. */
static int bind_at(const char *dir, const char *name, const char *src, int ro)
{
	char p[PATH_MAX];
	int r;

	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (ro && (r = bind_ro_tree(src, p)) != -ENOSYS)
		return r;
	if (mount(src, p, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -errno;
	if (ro && mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
		return -errno;
	return 0;
}

int oci_pod_attach(const struct oci_ctx *c, const char *sbid, const char *id, const struct oci_spec *s,
		   char shares[][PATH_MAX], unsigned n, char *why, size_t whylen)
{
	char pod[PATH_MAX], dir[PATH_MAX], name[16];
	unsigned i;
	int r;

	if ((r = oci_pod_dir(c, sbid, pod, sizeof(pod))) ||
	    snprintf(dir, sizeof(dir), "%s/%s", pod, id) >= (int)sizeof(dir)) {
		snprintf(why, whylen, "the pod's folder: %s", strerror(r ? -r : ENAMETOOLONG));
		return r ? r : -ENAMETOOLONG;
	}
	if (access(pod, F_OK) < 0) {
		snprintf(why, whylen, "%s: %s (is the sandbox %s this runtime's, booted with a pod share?)", pod,
			 strerror(errno), sbid);
		return -ENOENT;
	}
	if (mkdir(dir, 0700) < 0) {
		r = -errno;
		snprintf(why, whylen, "%s: %s", dir, strerror(-r));
		return r;
	}
	if ((r = bind_at(dir, "rootfs", s->root, s->root_ro))) {
		snprintf(why, whylen, "binding root.path %s into the pod: %s", s->root, strerror(-r));
		goto err;
	}
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "b%u", i);
		if ((r = bind_at(dir, name, shares[i], 0))) {
			snprintf(why, whylen, "binding %s into the pod: %s", shares[i], strerror(-r));
			goto err;
		}
	}
	return 0;
err:
	(void)oci_pod_unmount_under(dir, 1);
	return r;
}

char *oci_pod_guest_prepare(const struct oci_spec *s, const char *id)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	/* the root, as the host bound it into the pod share */
	fprintf(f, "R=%s/%s\nmkdir -p \"$R\" && mount --bind %s/%s/rootfs \"$R\" || exit 1\n", OCI_POD_GUEST_ROOTS, id,
		OCI_POD_GUEST_SHARE, id);
	if (s->root_ro)
		fputs("mount -o remount,bind,ro \"$R\" || exit 1\n", f);
	/* its cgroup (cgroup v2): the controllers enabled down to it, then
	 * its limits (linux.resources), which the guest's kernel enforces */
	fprintf(f, "G=%s/%s\nmkdir -p \"$G\" || exit 1\n", OCI_POD_CGROUP, id);
	fprintf(f, "for c in memory cpu pids; do echo +$c > /sys/fs/cgroup/cgroup.subtree_control; "
		   "echo +$c > %s/cgroup.subtree_control; done 2>/dev/null\n",
		OCI_POD_CGROUP);
	if (s->mem_limit > 0)
		fprintf(f, "echo %lld > \"$G/memory.max\" || exit 1\n", (long long)s->mem_limit);
	if (s->cpu_quota > 0 && s->cpu_period > 0)
		fprintf(f, "echo '%lld %llu' > \"$G/cpu.max\" || exit 1\n", (long long)s->cpu_quota,
			(unsigned long long)s->cpu_period);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}

int oci_pod_guest_remove(const struct sandbox_addr *a, const char *id, int all, char *err, size_t errlen)
{
	char script[1024];
	const char *sh[] = { "sh", "-c", script, NULL };

	/* cgroup.kill (Linux 5.14) ends every process of the cgroup at once */
	snprintf(script, sizeof(script),
		 "R=%s/%s G=%s/%s\n[ -d \"$G\" ] && echo 1 > \"$G/cgroup.kill\"\n%s", OCI_POD_GUEST_ROOTS, id,
		 OCI_POD_CGROUP, id,
		 all ? "if [ -d \"$R\" ]; then umount -l \"$R\" && rmdir \"$R\" || exit 1; fi\n"
		       "for i in $(seq 50); do [ -d \"$G\" ] || break; rmdir \"$G\" 2>/dev/null || sleep 0.1; done\n"
		       "[ ! -d \"$G\" ] || { echo \"$G stays\" >&2; exit 1; }\n"
		       /* the pod share's dentries of this root go, and with
			* them (FUSE FORGET) the VMM's handles on the host's mount */
		       "echo 2 > /proc/sys/vm/drop_caches\n" :
		       "true\n");
	return oci_guest_run(a, sh, err, errlen);
}

int oci_pod_guest_oomed(const struct sandbox_addr *a, const char *id)
{
	char script[512], err[256];
	const char *sh[] = { "sh", "-c", script, NULL };
	int r;

	/* memory.events' oom_kill: processes the guest's OOM killer ended
	 * in the cgroup (Linux's Documentation/admin-guide/cgroup-v2.rst) */
	snprintf(script, sizeof(script), "grep -q '^oom_kill [1-9]' %s/%s/memory.events", OCI_POD_CGROUP, id);
	r = oci_guest_run(a, sh, err, sizeof(err));
	return r < 0 ? r : r == 0;
}

int oci_pod_guest_limits(const struct sandbox_addr *a, const char *id, int64_t mem, int64_t quota, uint64_t period,
			 char *err, size_t errlen)
{
	char script[1024];
	const char *sh[] = { "sh", "-c", script, NULL };
	size_t n;

	n = (size_t)snprintf(script, sizeof(script), "G=%s/%s\n[ -d \"$G\" ] || { echo \"$G: no such cgroup\" >&2; exit 1; }\n",
			     OCI_POD_CGROUP, id);
	if (mem > 0)
		n += (size_t)snprintf(script + n, sizeof(script) - n, "echo %lld > \"$G/memory.max\" || exit 1\n",
				      (long long)mem);
	if (quota != 0 && n < sizeof(script)) {
		char q[24] = "max"; /* -1: no limit (cgroup v2's "max") */

		if (quota > 0)
			snprintf(q, sizeof(q), "%lld", (long long)quota);
		n += (size_t)snprintf(script + n, sizeof(script) - n, "echo '%s %llu' > \"$G/cpu.max\" || exit 1\n", q,
				      (unsigned long long)(period ? period : 100000));
	}
	if (n >= sizeof(script))
		return -E2BIG;
	return oci_guest_run(a, sh, err, errlen);
}

int oci_mounts_under(const char *dir)
{
	return cli_mounts_under(dir, 1, NULL, 0);
}

/* Removes the empty folders of the tree at dirfd/name (never a file,
 * never across a mount: rmdir of a mount point fails). */
static void rmdirs(int dirfd, const char *name, unsigned depth)
{
	struct dirent *e;
	DIR *d;
	int fd;

	if (depth > 4 || (fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (e->d_type == DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rmdirs(fd, e->d_name, depth + 1);
	closedir(d);
	(void)unlinkat(dirfd, name, AT_REMOVEDIR);
}

int oci_pod_unmount_under(const char *dir, int rm_dir)
{
	char parent[PATH_MAX], *slash;
	int n, fd;

	if ((n = cli_unmount_under(dir, 1)) == -ENOMEM)
		return n;
	if (n > 0)
		return -EBUSY;
	if (!rm_dir)
		return 0;
	snprintf(parent, sizeof(parent), "%s", dir);
	if (!(slash = strrchr(parent, '/')) || slash == parent)
		return -EINVAL;
	*slash = '\0';
	if ((fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : -errno;
	rmdirs(fd, slash + 1, 0);
	close(fd);
	return 0;
}
