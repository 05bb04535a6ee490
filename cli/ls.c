/* vmm ls: the sandboxes in the state directory, a table or JSON. */
#include "cli.h"
#include "sandbox.h"
#include "../guest-init/json.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void ls_usage(FILE *out)
{
	fprintf(out, "usage: vmm ls [--json]\n\n"
		     "Lists the sandboxes: name, state (running, paused, starting, exited,\n"
		     "dead: its VMM is gone without a word, it crashed or was killed), PID,\n"
		     "vCPUs, memory, age, and the time left when it has a --ttl.\n"
		     "'vmm prune' removes the exited, dead and expired ones.\n");
}

/* One sandbox as a JSON object (also `vmm inspect`). */
void cli_status_json(struct json_writer *w, const struct sandbox_status *st)
{
	jw_obj(w);
	jw_key(w, "name");
	jw_str(w, st->sb.name);
	jw_key(w, "state");
	jw_str(w, sandbox_state_name(st->state));
	jw_key(w, "pid");
	jw_int(w, st->pid);
	jw_key(w, "kind");
	jw_str(w, st->kind);
	jw_key(w, "source");
	jw_str(w, st->source);
	jw_key(w, "cpus");
	jw_int(w, st->cpus);
	jw_key(w, "mem_mib");
	jw_int(w, (int64_t)st->mem_mib);
	jw_key(w, "created");
	jw_int(w, st->created);
	jw_key(w, "expires");
	jw_int(w, st->expires);
	jw_key(w, "detached");
	jw_bool(w, st->detached);
	jw_key(w, "publish");
	jw_str(w, st->publish);
	jw_key(w, "net");
	jw_str(w, st->net);
	jw_key(w, "image");
	jw_str(w, st->image);
	jw_key(w, "dir");
	jw_str(w, st->sb.dir);
	jw_key(w, "control_socket");
	jw_str(w, st->sb.control);
	jw_key(w, "vsock_socket");
	jw_str(w, st->sb.vsock);
	if (st->state == SB_EXITED) {
		jw_key(w, "exit_status");
		jw_int(w, st->exit_status);
		jw_key(w, "exit_reason");
		jw_str(w, st->exit_reason);
	}
	jw_obj_end(w);
}

static int ls_main(int argc, char **argv)
{
	int json = 0, n, i;
	char **names;
	long long now = (long long)time(NULL);

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else {
			ls_usage(strcmp(argv[i], "--help") ? stderr : stdout);
			return strcmp(argv[i], "--help") ? CLI_EXIT_USAGE : 0;
		}
	}
	n = sandbox_list(&names);
	if (n < 0)
		return CLI_EXIT_ERROR;
	if (json)
		printf("[");
	else
		printf("%-24s %-9s %8s %4s %8s %7s %9s  %s\n", "NAME", "STATE", "PID", "CPUS", "MEMORY", "AGE",
		       "TTL LEFT", "PORTS");
	for (i = 0; i < n; i++) {
		struct sandbox_status st;
		char age[16] = "-", left[16] = "-", mem[16] = "-", pid[16] = "-";

		if (sandbox_status(names[i], &st) == 0) {
			if (json) {
				char buf[8192];
				struct json_writer w;

				jw_init(&w, buf, sizeof(buf));
				cli_status_json(&w, &st);
				printf("%s%s", i ? "," : "", jw_done(&w) ? buf : "{}");
			} else {
				if (st.created)
					cli_human_duration(now - st.created, age, sizeof(age));
				if (st.expires)
					cli_human_duration(st.expires - now, left, sizeof(left));
				if (st.mem_mib)
					snprintf(mem, sizeof(mem), st.mem_mib >= 1024 && st.mem_mib % 1024 == 0 ? "%llu GiB" : "%llu MiB",
						 st.mem_mib >= 1024 && st.mem_mib % 1024 == 0 ? st.mem_mib / 1024 : st.mem_mib);
				if (st.pid > 0)
					snprintf(pid, sizeof(pid), "%d", st.pid);
				if (st.state == SB_EXITED)
					snprintf(pid, sizeof(pid), "(%d)", st.exit_status);
				printf("%-24s %-9s %8s %4u %8s %7s %9s  %s\n", st.sb.name, sandbox_state_name(st.state),
				       pid, st.cpus, mem, age, left, st.publish);
			}
		}
		free(names[i]);
	}
	free(names);
	if (json)
		printf("]\n");
	return 0;
}

const struct cli_verb cli_verb_ls = {
	.name = "ls",
	.summary = "list sandboxes",
	.run = ls_main,
	.usage = ls_usage,
};
