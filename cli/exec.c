/* vmm exec: run a command in a running sandbox. */
#include "cli/sandbox/sandbox.h"
#include "cli/util/util.h"
#include "cli/verbs.h"
#include "cli/images/images.h"
#include "vmm/wire/proto.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

static void exec_usage(FILE *out)
{
	fprintf(out,
		"usage: vmm exec [options] SANDBOX [--] CMD [ARGS...]\n\n"
		"Runs CMD in a running sandbox and exits with its exit status (128+N if\n"
		"signal N killed it). Output streams as it is produced; stdin is passed\n"
		"through; Ctrl-C, SIGTERM and SIGHUP are forwarded to the command.\n"
		"SANDBOX is the sandbox's name (vmm run --name), or the path of its vsock\n"
		"socket (vmm run --vsock cid=N,uds=PATH). Options go before SANDBOX; what\n"
		"follows it is the command (the \"--\" is optional). Short options combine\n"
		"(-it).\n\n"
		"  -d, --detach         start CMD detached (API v2): it outlives this command,\n"
		"                       its output is kept; prints its id (vmm top, attach,\n"
		"                       logs --process, kill)\n"
		"      --tag NAME       with -d: a name for it (attach/kill/logs take it too)\n"
		"      --ring BYTES     with -d: output kept per stream (default 1 MiB)\n"
		"      --keep-alive     work that must not sleep: the sandbox does not go on\n"
		"                       standby (--idle-timeout) while CMD runs (with -d, a\n"
		"                       background 'vmm attach' holds it awake until CMD\n"
		"                       ends; without -d the exec stream does already)\n"
		"  -i, --interactive    with -d: keep its stdin open for vmm attach -i\n"
		"                       (without -d stdin is passed anyway: -it works)\n"
		"  -t, --tty            run in a pseudo-terminal (raw mode here, resizes follow)\n"
		"  -n, --no-stdin       do not pass stdin (the command reads /dev/null)\n"
		"  -e, --env NAME=VALUE set a variable (repeatable)\n"
		"  -w, --cwd DIR        working directory in the sandbox (default /root)\n"
		"  -u, --user USER[:GROUP]  run as this user (names from the sandbox's\n"
		"                       /etc/passwd; default root, or the image's User)\n"
		"      --timeout SECS   kill the command after SECS seconds\n"
		"      --token TOKEN    the sandbox's access token (default: a named sandbox's\n"
		"                       own, $VMM_TOKEN for a socket path)\n");
}

/* A sandbox started from an image with defaults (a pulled or imported
 * one): its Env under ours, its WorkingDir unless -w (docs/images.md). */
static void image_exec_defaults(const char *name, struct exec_opts *o, struct oci_exec_plan *plan)
{
	struct sandbox_status st;
	struct image_info im;
	struct oci_defaults *d;
	char iname[IMAGE_NAME_MAX + 1];
	unsigned version;

	if (!sandbox_name_ok(name) || sandbox_status(name, &st) || !st.image[0] ||
	    image_parse_ref(st.image, iname, &version) || !version || image_load(iname, version, &im))
		return;
	if (!(d = calloc(1, sizeof(*d))))
		return;
	if (image_defaults(&im, d) == 0) {
		oci_plan_exec(d, o->env, o->cwd, o->argv, plan);
		o->env = plan->nenv ? plan->env : NULL;
		o->cwd = plan->cwd;
		if (!o->user)
			o->user = plan->user; /* the image's User unless -u */
		plan->defaults = d; /* the plan points into d */
		return;
	}
	free(d);
}

/* exec -d --keep-alive: a background `vmm attach` follows the process
 * until it ends; its open API connection is activity, so the sandbox
 * does not go on standby meanwhile (vmm/idle.h). */
static void keep_awake(const char *name, const char *tag)
{
	char *args[] = { "vmm", "attach", (char *)name, (char *)tag, NULL };
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (fork() != 0) /* not our child: nobody waits for it */
			_exit(0);
		setsid();
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execv("/proc/self/exe", args);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static int exec_run(int argc, char **argv, struct oci_exec_plan *plan)
{
	char err[600] = "";
	static const struct option opts[] = {
		{ "tty", no_argument, NULL, 't' },
		{ "no-stdin", no_argument, NULL, 'n' },
		{ "env", required_argument, NULL, 'e' },
		{ "cwd", required_argument, NULL, 'w' },
		{ "user", required_argument, NULL, 'u' },
		{ "timeout", required_argument, NULL, 'o' },
		{ "token", required_argument, NULL, 'T' },
		{ "detach", no_argument, NULL, 'd' },
		{ "interactive", no_argument, NULL, 'i' },
		{ "tag", required_argument, NULL, 'g' },
		{ "ring", required_argument, NULL, 'R' },
		{ "keep-alive", no_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	struct sandbox_addr a = { .port = cli_api_port(), .token = getenv("VMM_TOKEN") };
	struct exec_opts o = { .stdin_pass = 1 };
	const char *env[257];
	unsigned nenv = 0;
	int opt, r, token_given = 0, interactive = 0, cmd, keep_alive = 0;
	char tag[40];
	int64_t id = 0;
	struct sandbox sb;

	optind = 1;
	while ((opt = cli_getopt(argc, argv, "+tne:w:u:di", opts, "exec")) != -1) {
		switch (opt) {
		case 't':
			o.tty = 1;
			break;
		case 'n':
			o.stdin_pass = 0;
			break;
		case 'e':
			if (nenv == 256 || !strchr(optarg, '=')) {
				fprintf(stderr, "vmm exec: --env wants NAME=VALUE (at most 256)\n");
				return CLI_EXIT_USAGE;
			}
			env[nenv++] = optarg;
			break;
		case 'w':
			o.cwd = optarg;
			break;
		case 'u':
			o.user = optarg;
			break;
		case 'o': {
			char *end;
			double s = strtod(optarg, &end);

			if (*end || s <= 0) {
				fprintf(stderr, "vmm exec: --timeout wants a number of seconds\n");
				return CLI_EXIT_USAGE;
			}
			o.timeout_ms = (uint64_t)(s * 1000);
			break;
		}
		case 'T':
			a.token = optarg;
			token_given = 1;
			break;
		case 'K':
			keep_alive = 1;
			break;
		case 'd':
			o.detach = 1;
			break;
		case 'i':
			interactive = 1;
			break;
		case 'g':
			o.tag = optarg;
			break;
		case 'R': {
			char *end;
			unsigned long long n = strtoull(optarg, &end, 10);

			if (*end || n < 4096 || n > (64ull << 20)) {
				fprintf(stderr, "vmm exec: --ring wants 4096..67108864 bytes\n");
				return CLI_EXIT_USAGE;
			}
			o.ring_bytes = n;
			break;
		}
		default:
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++; /* "vmm exec -- SANDBOX -- CMD" is not the form; tolerate one */
	/* Options end at SANDBOX (getopt's "+"): what follows is the command,
	 * after a "--" or, as docker takes it, without one. */
	if (argc - optind < 2 || (!strcmp(argv[optind + 1], "--") && argc - optind < 3))
		return cli_usage_error("exec", "expected SANDBOX [--] CMD [ARGS...]");
	cmd = !strcmp(argv[optind + 1], "--") ? optind + 2 : optind + 1;
	if (sandbox_api_addr(argv[optind], token_given, &sb, &a))
		return CLI_EXIT_ERROR;
	env[nenv] = NULL;
	o.env = nenv ? env : NULL;
	o.argv = (const char *const *)&argv[cmd];
	image_exec_defaults(argv[optind], &o, plan);
	/* -i without -d: stdin is passed anyway (docker's exec -it) */
	if ((o.tag || o.ring_bytes) && !o.detach)
		return cli_usage_error("exec", "--tag and --ring go with -d");
	if (o.detach) {
		/* Nobody is here to type: stdin only for later attachers. */
		o.stdin_pass = interactive;
		if (keep_alive && !o.tag) {
			uint32_t rnd = 0;

			if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
				return CLI_EXIT_ERROR;
			snprintf(tag, sizeof(tag), "keepalive-%08x", rnd);
			o.tag = tag;
		}
		if (api_start_id(&a, &o, &id, err, sizeof(err)) < 0) {
			fprintf(stderr, "vmm: %s\n", err);
			return CLI_EXIT_ERROR;
		}
		printf("%lld\n", (long long)id);
		if (keep_alive)
			keep_awake(argv[optind], o.tag);
		return 0;
	}
	r = api_exec(&a, &o, err, sizeof(err));
	if (err[0])
		fprintf(stderr, "vmm: %s\n", err);
	return r < 0 ? CLI_EXIT_ERROR : r;
}

static int exec_main(int argc, char **argv)
{
	struct oci_exec_plan *plan = calloc(1, sizeof(*plan));
	int r;

	if (!plan)
		return CLI_EXIT_ERROR;
	r = exec_run(argc, argv, plan);
	free(plan->defaults);
	free(plan);
	return r;
}

const struct cli_verb cli_verb_exec = {
	.name = "exec",
	.summary = "run a command in a running sandbox",
	.run = exec_main,
	.usage = exec_usage,
};
