/* OCI hooks; see oci_hooks.h. */
#include "cli/oci/oci_hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const names[OCI_HOOK_KINDS] = { "prestart",	     "createRuntime", "createContainer",
						   "startContainer", "poststart",     "poststop" };

const char *oci_hook_name(enum oci_hook_kind k)
{
	return (unsigned)k < OCI_HOOK_KINDS ? names[k] : "?";
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int oci_hook_run(const struct oci_hook *h, const char *state_json, char *why, size_t whylen)
{
	char *const *argv = (char *const *)h->args;
	char *const alone[] = { (char *)h->path, NULL };
	char out[1024];
	size_t got = 0, slen = strlen(state_json), sent = 0;
	long long deadline = h->timeout_s > 0 ? now_ms() + (long long)h->timeout_s * 1000 : 0;
	int in[2] = { -1, -1 }, op[2] = { -1, -1 }, st = 0, r = 0, done = 0, reaped = 0;
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	pid_t pid;

	out[0] = '\0';
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(op, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		goto out;
	}
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(op[1], 1);
		dup2(op[1], 2);
		setpgid(0, 0); /* a timeout kills its children too */
		execve(h->path, h->argc ? argv : alone, (char *const *)h->env);
		fprintf(stderr, "%s", strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(op[1]);
	in[0] = op[1] = -1;
	/* a hook that does not read its stdin must not kill us */
	sigaction(SIGPIPE, &ign, &old);
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	fcntl(op[0], F_SETFL, O_NONBLOCK);
	while (!done) {
		struct pollfd p[2] = { { .fd = op[0], .events = POLLIN }, { .fd = in[1], .events = POLLOUT } };
		long long left = deadline ? deadline - now_ms() : 100;
		ssize_t n;

		if (deadline && left <= 0) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			r = -ETIMEDOUT;
			break;
		}
		if (poll(p, in[1] >= 0 ? 2 : 1, (int)(left > 100 ? 100 : left)) < 0 && errno != EINTR) {
			r = -errno;
			kill(pid, SIGKILL);
			break;
		}
		if (in[1] >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			n = write(in[1], state_json + sent, slen - sent);
			if (n > 0)
				sent += (size_t)n;
			if (n < 0 && errno != EAGAIN) /* EPIPE: it closed its stdin */
				sent = slen;
			if (sent == slen) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP)) {
			char tmp[512];

			n = read(op[0], tmp, sizeof(tmp));
			if (n > 0 && got < sizeof(out) - 1) {
				size_t k = (size_t)n < sizeof(out) - 1 - got ? (size_t)n : sizeof(out) - 1 - got;

				memcpy(out + got, tmp, k);
				got += k;
				out[got] = '\0';
			}
			if (n == 0)
				done = 1; /* all its writers are gone: it has exited (or closed them) */
		}
		/* it may have exited leaving a child that holds its output */
		if (!done && waitpid(pid, &st, WNOHANG) == pid)
			reaped = done = 1;
	}
	sigaction(SIGPIPE, &old, NULL);
	/* output closed (or timed out): wait for it, still within the limit */
	while (!reaped) {
		pid_t w = waitpid(pid, &st, deadline && r == 0 ? WNOHANG : 0);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			r = r ? r : -errno;
			break;
		}
		if (w == 0) {
			if (now_ms() >= deadline) {
				kill(-pid, SIGKILL);
				kill(pid, SIGKILL);
				r = -ETIMEDOUT;
			} else {
				usleep(10000);
			}
		}
	}
	while (got && out[got - 1] == '\n')
		out[--got] = '\0';
	if (r == -ETIMEDOUT)
		snprintf(why, whylen, "hook %s: timed out after %d s", h->path, h->timeout_s);
	else if (r)
		snprintf(why, whylen, "hook %s: %s", h->path, strerror(-r));
	else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		r = -ECHILD;
		if (WIFEXITED(st))
			snprintf(why, whylen, "hook %s: exit status %d%s%s", h->path, WEXITSTATUS(st), got ? ": " : "",
				 out);
		else
			snprintf(why, whylen, "hook %s: killed by signal %d", h->path, WTERMSIG(st));
	}
out:
	if (in[0] >= 0)
		close(in[0]);
	if (in[1] >= 0)
		close(in[1]);
	if (op[0] >= 0)
		close(op[0]);
	if (op[1] >= 0)
		close(op[1]);
	if (r && r != -ETIMEDOUT && r != -ECHILD && why && !why[0])
		snprintf(why, whylen, "hook %s: %s", h->path, strerror(-r));
	return r;
}

int oci_hooks_run(const struct oci_spec *s, enum oci_hook_kind k, const char *state_json, char *why, size_t whylen)
{
	char one[1024];
	unsigned i;
	int r;

	for (i = 0; i < s->nhooks[k]; i++) {
		one[0] = '\0';
		if ((r = oci_hook_run(&s->hooks[k][i], state_json, one, sizeof(one)))) {
			snprintf(why, whylen, "%s %s", names[k], one);
			return r;
		}
	}
	return 0;
}
