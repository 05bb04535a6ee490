/* vmm ls: the sandboxes in the state directory, a table or JSON. */
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/wire/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void ls_usage(FILE *out)
{
	fprintf(out, "usage: vmm ls [-a] [--filter label=KEY=VALUE]... [-q | --json | --format TEMPLATE]\n"
		     "       (also: vmm ps)\n\n"
		     "Lists the sandboxes: name, state (running, paused, starting, created,\n"
		     "exited, dead: its VMM is gone without a word, it crashed or was killed),\n"
		     "PID, vCPUs, memory, age, and the time left when it has a --ttl. Every\n"
		     "sandbox is listed, exited and dead ones too (-a, --all: the same, for\n"
		     "docker's habit). 'vmm prune' removes the exited, dead and expired ones.\n\n"
		     "      --filter label=KEY=VALUE\n"
		     "                       only sandboxes with that label (vmm run --label);\n"
		     "                       several filters: all of them\n"
		     "  -q, --quiet          names only, one a line\n"
		     "      --json           a JSON array (the fields of vmm inspect)\n"
		     "      --format T       one line per sandbox from T, where {{.Name}},\n"
		     "                       {{.State}}, {{.Pid}}, {{.Image}}, {{.Ports}} and\n"
		     "                       {{.ExitStatus}} are replaced (\\t: a tab)\n");
}

/* One --format field's value (buf: scratch), or NULL if there is none. */
static const char *format_field(const struct sandbox_status *st, const char *f, size_t n, char *buf, size_t len)
{
	if (n == 4 && !strncmp(f, "Name", n))
		return st->sb.name;
	if (n == 5 && !strncmp(f, "State", n))
		return sandbox_state_name(st->state);
	if (n == 3 && !strncmp(f, "Pid", n)) {
		snprintf(buf, len, "%d", st->pid > 0 ? st->pid : 0);
		return buf;
	}
	if (n == 5 && !strncmp(f, "Image", n))
		return st->image;
	if (n == 5 && !strncmp(f, "Ports", n))
		return st->publish;
	if (n == 10 && !strncmp(f, "ExitStatus", n)) {
		if (st->state != SB_EXITED)
			return "";
		snprintf(buf, len, "%d", st->exit_status);
		return buf;
	}
	return NULL;
}

/* Prints st through the template t ({{.Field}}, \t, \n); -EINVAL for a
 * field there is not (nothing printed then: st may be NULL to check t). */
static int format_line(const struct sandbox_status *st, const char *t)
{
	static const struct sandbox_status none;
	char buf[32];
	const char *p, *v;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		for (p = t; *p;) {
			if (!strncmp(p, "{{", 2)) {
				const char *f = p + 2, *end = strstr(p, "}}");
				size_t n;

				while (*f == ' ')
					f++;
				if (!end || *f != '.')
					return -EINVAL;
				f++;
				for (n = 0; f + n < end && f[n] != ' '; n++)
					;
				v = format_field(st ? st : &none, f, n, buf, sizeof(buf));
				if (!v)
					return -EINVAL;
				if (pass)
					fputs(v, stdout);
				p = end + 2;
			} else if (p[0] == '\\' && (p[1] == 't' || p[1] == 'n')) {
				if (pass)
					putchar(p[1] == 't' ? '\t' : '\n');
				p += 2;
			} else {
				if (pass)
					putchar(*p);
				p++;
			}
		}
		if (!st)
			return 0;
	}
	putchar('\n');
	return 0;
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
	jw_key(w, "drives");
	jw_str(w, st->drives);
	jw_key(w, "labels");
	jw_obj(w);
	for (const char *p = st->labels; *p; p += strcspn(p, ","), p += *p == ',') {
		char kv[SANDBOX_LABEL_KEY_MAX + SANDBOX_LABEL_VALUE_MAX + 2];
		size_t n = strcspn(p, ",");

		if (n >= sizeof(kv) || !memchr(p, '=', n))
			continue;
		memcpy(kv, p, n);
		kv[n] = '\0';
		*strchr(kv, '=') = '\0';
		jw_key(w, kv);
		jw_str(w, kv + strlen(kv) + 1);
	}
	jw_obj_end(w);
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
	if (st->state == SB_STANDBY) {
		/* why the last resume failed, "" if none did */
		jw_key(w, "standby_error");
		jw_str(w, st->exit_reason);
	}
	jw_obj_end(w);
}

static int labels_match(const char *labels, const char *const *filters, int nf)
{
	int i;

	for (i = 0; i < nf; i++)
		if (!sandbox_has_label(labels, filters[i]))
			return 0;
	return 1;
}

static int ls_main(int argc, char **argv)
{
	int json = 0, quiet = 0, n, i, nf = 0, shown = 0;
	const char *format = NULL, *verb = argv[0], *filters[SANDBOX_LABELS_MAX];
	char **names;
	long long now = (long long)time(NULL);

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
			quiet = 1;
		else if (!strcmp(argv[i], "-a") || !strcmp(argv[i], "--all"))
			; /* every sandbox is listed anyway */
		else if (!strcmp(argv[i], "-aq") || !strcmp(argv[i], "-qa"))
			quiet = 1;
		else if (!strcmp(argv[i], "--format") && i + 1 < argc)
			format = argv[++i];
		else if (!strncmp(argv[i], "--format=", 9))
			format = argv[i] + 9;
		else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
			const char *f = argv[++i];

			if (strncmp(f, "label=", 6) || !sandbox_label_ok(f + 6) || nf == SANDBOX_LABELS_MAX)
				return cli_usage_error(verb, "--filter '%s': label=KEY=VALUE (at most 16)", f);
			filters[nf++] = f + 6;
		} else if (!strcmp(argv[i], "--help")) {
			ls_usage(stdout);
			return 0;
		} else
			return cli_bad_arg(verb, argv[i], "--format --filter");
	}
	if (json + quiet + !!format > 1)
		return cli_usage_error(verb, "-q, --json and --format go alone");
	if (format && format_line(NULL, format))
		return cli_usage_error(verb, "--format '%s': fields are {{.Name}}, {{.State}}, {{.Pid}}, "
				       "{{.Image}}, {{.Ports}}, {{.ExitStatus}}", format);
	n = sandbox_list(&names);
	if (n < 0)
		return CLI_EXIT_ERROR;
	if (json)
		printf("[");
	else if (!quiet && !format)
		printf("%-24s %-9s %8s %4s %8s %7s %9s  %s\n", "NAME", "STATE", "PID", "CPUS", "MEMORY", "AGE",
		       "TTL LEFT", "PORTS");
	for (i = 0; i < n; i++) {
		struct sandbox_status st;
		char age[16] = "-", left[16] = "-", mem[16] = "-", pid[16] = "-";

		if (sandbox_status(names[i], &st) == 0 && labels_match(st.labels, filters, nf)) {
			if (quiet) {
				printf("%s\n", st.sb.name);
			} else if (format) {
				format_line(&st, format);
			} else if (json) {
				char buf[16384];
				struct json_writer w;

				jw_init(&w, buf, sizeof(buf));
				cli_status_json(&w, &st);
				printf("%s%s", shown++ ? "," : "", jw_done(&w) ? buf : "{}");
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

/* docker's name for it. */
const struct cli_verb cli_verb_ps = {
	.name = "ps",
	.summary = "the same as ls",
	.run = ls_main,
	.usage = ls_usage,
};
