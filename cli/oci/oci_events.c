/* containerd's task events from the runtime: see oci_events.h. */
#include "cli/oci/oci_events.h"
#include "vmm/wire/pb.h"
#include "cli/util/util.h"
#include "vmm/wire/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int oci_event_oom_any(const char *id, unsigned char *buf, size_t len)
{
	/* containerd's api/events/task.proto: message TaskOOM { string container_id = 1; } */
	unsigned char oom[2 + 127];
	struct pb_writer w, ev;

	if (!id[0] || strlen(id) > 127)
		return -EINVAL;
	pb_init(&ev, oom, sizeof(oom));
	pb_str(&ev, 1, id);
	pb_init(&w, buf, len);
	pb_str(&w, 1, "containerd.events.TaskOOM");
	pb_bytes(&w, 2, oom, ev.len);
	return pb_done(&ev) < 0 ? pb_done(&ev) : pb_done(&w);
}

/* The child's stdin: the read end of the event's pipe. */
static int stdin_from(void *arg)
{
	return dup2(*(int *)arg, STDIN_FILENO) < 0 ? -1 : 0;
}

/* The shim's own arguments (containerd's runc shim runs as `... -namespace
 * NS -id ID -address GRPC -publish-binary CONTAINERD`): the runtime's
 * parent is the shim (its subreaper once create has exited). Each found
 * is copied; 0, or -errno. */
static int shim_args(char *addr, size_t alen, char *ns, size_t nlen, char *bin, size_t blen)
{
	char path[64], cmd[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)getppid());
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read_upto(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? (int)n : -ENOENT;
	cmd[n] = '\0';
	for (char *a = cmd; a < cmd + n;) {
		char *v = a + strlen(a) + 1;

		if (v >= cmd + n)
			break;
		if (!strcmp(a, "-address") && !addr[0])
			snprintf(addr, alen, "%s", v);
		else if (!strcmp(a, "-namespace") && !ns[0])
			snprintf(ns, nlen, "%s", v);
		else if (!strcmp(a, "-publish-binary") && v[0] == '/')
			snprintf(bin, blen, "%s", v);
		a = v;
	}
	return 0;
}

int oci_event_oom_publish(const char *id, char *why, size_t whylen)
{
	static const char *const dirs[] = { "/usr/local/bin", "/usr/bin", "/bin" };
	const char *ea = getenv("GRPC_ADDRESS"), *en = getenv("NAMESPACE");
	unsigned char ev[256];
	char addr[512] = "", ns[128] = "", bin[512] = "";
	int p[2], n, r;

	/* containerd's environment for its shims, else the shim's arguments */
	snprintf(addr, sizeof(addr), "%s", ea ? ea : "");
	snprintf(ns, sizeof(ns), "%s", en ? en : "");
	(void)shim_args(addr, sizeof(addr), ns, sizeof(ns), bin, sizeof(bin));
	if (!addr[0] || !ns[0])
		return -ENOENT;
	if (bin[0] && access(bin, X_OK))
		bin[0] = '\0';
	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]) && !bin[0]; d++) {
		snprintf(bin, sizeof(bin), "%s/containerd", dirs[d]);
		if (access(bin, X_OK))
			bin[0] = '\0';
	}
	if (!bin[0])
		return -ENOENT;
	if ((n = oci_event_oom_any(id, ev, sizeof(ev))) < 0)
		return cli_seterr(why, whylen, n, "the OOM event of %s: %s", id, strerror(-n));
	if (pipe2(p, O_CLOEXEC) < 0)
		return cli_seterr(why, whylen, -errno, "pipe: %s", strerror(errno));
	/* far below a pipe's buffer: written whole before the child runs */
	r = write_full(p[1], ev, (size_t)n) ? -errno : 0;
	close(p[1]);
	if (!r) {
		const char *argv[] = { bin, "--address", addr, "publish", "--topic", "/tasks/oom", "--namespace", ns, NULL };

		r = cli_run_tool_in(argv, 2, stdin_from, &p[0]);
		r = r > 0 ? -EIO : r;
	}
	close(p[0]);
	return r ? cli_seterr(why, whylen, r, "%s publish /tasks/oom: %s", bin, r == -EIO ? "failed" : strerror(-r)) : 0;
}
