/* Inside guest-init's API server: the reply helpers api.c exports and the
 * operations that live in files of their own (files.c, spawn.c, procs.c,
 * watch.c). Not a public interface: api.h is. */
#ifndef GUEST_OPS_H
#define GUEST_OPS_H

#include <stdint.h>
#include <sys/types.h>

#include "vmm/wire/api.h"
#include "vmm/wire/json.h"

/* Replies (api.c). */
void api_send_error(int fd, int e, const char *msg);
void api_send_json(int fd, uint8_t type, struct json_writer *w);
void api_send_ok(int fd);
/* 1 if t is a valid process tag (api.c). */
int api_valid_tag(const char *t);

/* Files (files.c). */
void files_read(int fd, const struct api_request *r);
void files_write(int fd, const struct api_request *r);
void files_list(int fd, const struct api_request *r);
void files_stat(int fd, const struct api_request *r);
void files_mkdir(int fd, const struct api_request *r);
void files_remove(int fd, const struct api_request *r);
void files_rename(int fd, const struct api_request *r);
void files_readlink(int fd, const struct api_request *r); /* v2 */
void files_symlink(int fd, const struct api_request *r);  /* v2 */
/* mkdir -p: each missing component of PATH with MODE. 0 or -errno. */
int files_mkdir_p(const char *path, mode_t mode);

/* Starting a command (spawn.c). */
struct exec_io {
	int out, err;        /* read ends (err = -1 with a pty) */
	int in;              /* write end of stdin (or the pty master), -1 if none */
	int pty;
	int cwd_failed;      /* set with -1: 1 the working directory, 2 the user (exec's "user"), not the exec, failed */
};
/* Forks and execs r's command in a new session: io gets its ends. The
 * child's pid, or -1 with *err the errno (exec failures included; a
 * working directory it could not enter sets io->cwd_failed). extra:
 * variables (NULL-terminated) the request's own env overrides. */
pid_t spawn_command(const struct api_request *r, const char *const *extra, struct exec_io *io, int *err);
/* The message for spawn_command's failure (buf: room for it). */
const char *spawn_error_message(const struct api_request *r, const struct exec_io *io, int err, char *buf,
				size_t len);
/* The egress proxy's variables for port (vars NULL-terminated in buf). */
#define EGRESS_ENV 10 /* spawn_proxy_env: 5 proxy variables, 5 for the CA */
void spawn_proxy_env(unsigned port, char buf[EGRESS_ENV][96], const char *vars[EGRESS_ENV + 1]);

/* The process manager (procs.c). */
struct procs_limits {
	unsigned max_procs;  /* processes kept, running or finished */
	size_t ring_bytes;   /* default output kept per stream */
};
/* Forks the manager; returns its pid and sets *chan to the end connection
 * processes use (procs_forward), or -errno. The manager dies with its
 * parent (SIGTERM, killing the process groups it started). */
pid_t procs_start(const struct procs_limits *lim, const struct api_config *cfg, int *chan);
/* Hands a parsed request's text and the client's connection to the
 * manager. 0 or -errno. */
int procs_forward(int chan, int client, const char *req, size_t len);

/* Directories as tar streams (tar_ops.c): tar_get sends RESULT, the
 * archive in DATA frames, END; tar_put answers RESULT {"ready":true},
 * takes the archive in DATA frames until END, answers RESULT with counts. */
void tar_get(int fd, const struct api_request *r);
void tar_put(int fd, const struct api_request *r);

/* File watching (watch.c). */
void watch_serve(int fd, const struct api_request *r);

#endif
