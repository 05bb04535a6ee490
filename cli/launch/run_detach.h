/* vmm run -d / restore -d / start (docs/cli.md): the sandbox's process
 * goes on in a session of its own, its output in the folder's vmm.log,
 * while the caller shows the boot status line and waits until the
 * sandbox's API answers (then prints its name), it died (its log shown)
 * or the wait ran out or was interrupted (the sandbox stopped and
 * removed: nothing runs on behind a failure). */
#ifndef CLI_RUN_DETACH_H
#define CLI_RUN_DETACH_H

#include <stdint.h>
#include <stdio.h>

struct sandbox;
struct exec_opts;

/* -d: the sandbox runs on in a child of its own session, its stdout and
 * stderr in vmm.log in its folder. Returns -1 in that child (go on; its
 * *ready_wr is the pipe to write 'K'/'R' into: vmm/vm.h marker_fd), or in
 * the caller the status to exit with: 0 once the sandbox's API answers
 * (its name written to out; dcmd, if not NULL, started as its detached process),
 * 1 if it died first (its log's end written to diag) or did not answer
 * within ready_s (stopped and removed, its logs' ends to diag), 128+N if
 * signal N (Ctrl-C: 130) came first (stopped and removed; err says so). */
int detach_self(const struct sandbox *sb, unsigned long ready_s, int restored, const struct exec_opts *dcmd,
		int *ready_wr, int quiet, uint64_t t0_ns, FILE *out, FILE *diag, char *err, size_t errlen);

#endif
