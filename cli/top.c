/* vmm top NAME [--json]: the detached processes in a sandbox (API v2). */
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "vmm/wire/json.h"
#include "vmm/wire/proto.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void top_usage(FILE *out)
{
	fprintf(out, "usage: vmm top [--json] [--token TOKEN] SANDBOX\n\n"
		     "Lists the sandbox's detached processes (vmm exec -d), running and\n"
		     "finished: id, tag, pid, state, age, exit status, output kept, command.\n"
		     "--json prints the API's answer ({\"processes\":[...]}, docs/api.md).\n");
}

static void print_argv(const struct json *argv)
{
	const struct json *e;
	int first = 1;

	for (e = argv ? argv->u.kids.first : NULL; e; e = e->next, first = 0)
		if (e->type == JSON_STR)
			printf("%s%s", first ? "" : " ", e->u.str.s);
	printf("\n");
}

/* The answer and its parse, on the heap: 2.5 MiB of static buffers would
 * sit in every VMM's bss, where a host with transparent huge pages "always"
 * backs a touched 2 MiB stretch with a huge page. */
struct top_bufs {
	char out[FRAME_MAX / 2 + 1];
	char arena[FRAME_MAX * 2];
};

static int top_run(int argc, char **argv, struct top_bufs *b)
{
	char err[600] = "";
	char *out = b->out;
	struct json_arena ar = { b->arena, sizeof(b->arena), 0 };
	struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
	const struct json *j, *list, *p;
	const char *name = NULL, *jerr;
	int json = 0, token_given = 0, i;
	struct sandbox sb;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--token") && i + 1 < argc) {
			a.token = argv[++i];
			token_given = 1;
		} else if (argv[i][0] != '-' && !name) {
			name = argv[i];
		} else {
			return cli_bad_arg("top", argv[i], "--token");
		}
	}
	if (!name)
		return cli_usage_error("top", "expected SANDBOX");
	if (sandbox_api_addr(name, token_given, &sb, &a))
		return CLI_EXIT_ERROR;
	if (api_call2(&a, "\"op\":\"processes\"", "top", out, sizeof(b->out), err, sizeof(err))) {
		fprintf(stderr, "vmm: %s\n", err);
		return CLI_EXIT_ERROR;
	}
	if (json) {
		printf("%s\n", out);
		return 0;
	}
	j = json_parse(out, strlen(out), &ar, &jerr);
	list = j ? json_get(j, "processes") : NULL;
	if (!list || list->type != JSON_ARR) {
		fprintf(stderr, "vmm top: an answer without processes\n");
		return CLI_EXIT_ERROR;
	}
	printf("%-5s %-16s %-8s %-8s %-8s %-6s %-10s %s\n", "ID", "TAG", "PID", "STATE", "AGE", "EXIT", "OUTPUT",
	       "COMMAND");
	for (p = list->u.kids.first; p; p = p->next) {
		const struct json *so = json_get(p, "stdout"), *se = json_get(p, "stderr");
		int64_t id = 0, pid = 0, started = 0, code = 0, out_b = 0, err_b = 0;
		const char *tag = "-", *state = "?";
		char age[32], exit_s[16] = "-";

		json_get_int(p, "id", &id);
		json_get_str(p, "tag", &tag);
		json_get_int(p, "pid", &pid);
		json_get_str(p, "state", &state);
		json_get_int(p, "started_at", &started);
		if (!json_get_int(p, "exit_code", &code))
			snprintf(exit_s, sizeof(exit_s), "%lld", (long long)code);
		if (so)
			json_get_int(so, "end", &out_b);
		if (se)
			json_get_int(se, "end", &err_b);
		cli_human_duration(time(NULL) - started > 0 ? time(NULL) - started : 0, age, sizeof(age));
		printf("%-5lld %-16s %-8lld %-8s %-8s %-6s %-10lld ", (long long)id, tag, (long long)pid, state, age,
		       exit_s, (long long)(out_b + err_b));
		print_argv(json_get(p, "argv"));
	}
	return 0;
}

static int top_main(int argc, char **argv)
{
	struct top_bufs *b = malloc(sizeof(*b));
	int r;

	if (!b) {
		fprintf(stderr, "vmm top: out of memory\n");
		return CLI_EXIT_ERROR;
	}
	r = top_run(argc, argv, b);
	free(b);
	return r;
}

const struct cli_verb cli_verb_top = {
	.name = "top",
	.summary = "list a sandbox's detached processes",
	.run = top_main,
	.usage = top_usage,
};
