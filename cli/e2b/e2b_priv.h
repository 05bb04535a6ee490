/* The E2B gateway's internals (cli/e2b/e2b.h is its public side): the pure
 * parsers (connect.c, chunked.c, multipart.c, e2b_req.c, process_req.c),
 * which the unit tests and the fuzzer reach without a socket, and the
 * server's parts: HTTP (e2b_http.c), keys and access tokens (e2b_keys.c),
 * the control plane (e2b_control.c), processes (e2b_process.c), files
 * (e2b_files.c) and the filesystem service (e2b_fs.c). */
#ifndef CLI_E2B_PRIV_H
#define CLI_E2B_PRIV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/e2b/e2b.h"
#include "cli/sandbox/sandbox.h"
#include "vmm/wire/json.h"

/* envd's version as the gateway reports it (EnvdVersion in openapi.yml):
 * at or over 0.4.0, so the SDKs send no default user ("user", which a
 * vmm image need not have), under 0.5.7, so they upload files as
 * multipart (envd.yaml's POST /files) rather than octet streams. */
#define E2B_ENVD_VERSION "0.5.4"
#define E2B_ENVD_PORT 49983
#define E2B_BODY_MAX (100u << 20) /* the largest request body (a file upload) */

/* ---- chunked.c: chunked transfer coding (RFC 9112 section 7.1) ---- */
/* Decodes the chunked body at buf[0..len) in place: the data moves to the
 * front of buf. Returns the bytes of buf the body took (> 0) with *out
 * the data's length, 0 if more bytes are needed, -EPROTO (malformed) or
 * -E2BIG (the data would pass max). Trailer fields are skipped. */
long e2b_chunked_decode(char *buf, size_t len, size_t max, size_t *out);
/* One chunk's header ("%zx\r\n") into hdr (at least 20 bytes): its length. */
size_t e2b_chunk_header(char *hdr, size_t n);

/* ---- connect.c: the Connect protocol (connectrpc.com/docs/protocol) ---- */
#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END 0x02
#define CONNECT_ENVELOPE_HDR 5
/* One envelope at buf[0..len): 1 byte flags, 4 bytes big-endian length,
 * the message. Returns the bytes it takes (> 0), 0 if more are needed,
 * -EMSGSIZE past max, -EPROTO for a compressed message (none is
 * negotiated). */
long connect_envelope(const uint8_t *buf, size_t len, size_t max, uint8_t *flags, const uint8_t **msg,
		      size_t *msg_len);
void connect_envelope_hdr(uint8_t hdr[CONNECT_ENVELOPE_HDR], uint8_t flags, uint32_t len);
/* The HTTP status of a unary call's error code ("not_found": 404). */
int connect_code_status(const char *code);
/* The Connect code for an errno a sandbox API call failed with. */
const char *connect_errno_code(int eno);
/* A unary error body {"code":C,"message":M}, or an end-stream message
 * {"error":{...}} (code NULL: {}): its length, 0 if it did not fit. */
size_t connect_error_json(char *out, size_t cap, const char *code, const char *msg);
size_t connect_end_json(char *out, size_t cap, const char *code, const char *msg);

/* ---- multipart.c: multipart/form-data bodies (RFC 7578) ---- */
/* The boundary parameter of a Content-Type value. 0 or -EINVAL. */
int mp_boundary(const char *content_type, char *out, size_t len);
struct mp_part {
	char name[64];       /* the form field's name */
	char filename[4096]; /* its filename parameter, "" if none */
	const char *data;    /* into the body */
	size_t len;
};
/* The part after *pos in body[0..len) (start with *pos 0): 1 and *p
 * filled, 0 after the last one, -EPROTO if the body is malformed. */
int mp_next(const char *body, size_t len, const char *boundary, size_t *pos, struct mp_part *p);

/* ---- e2b_req.c: one HTTP request, read from a buffer ---- */
struct e2b_req {
	char method[16];
	char path[256];    /* without the query */
	char query[4096];  /* after '?', still percent-encoded; "" if none */
	const char *head;  /* the request line and headers */
	size_t head_len;
	const char *body;
	size_t body_len;
	int keep_alive;
	int expect_continue; /* (need more) the client waits for 100 Continue */
	int status;          /* on a refusal: the status to answer */
	const char *why;
};
/* Parses the request at buf[0..len) (a chunked body decoded in place).
 * Returns its length in buf (> 0), 0 if more bytes are needed, -EPROTO
 * to refuse it (r->status, r->why) and close. */
long e2b_req_parse(char *buf, size_t len, size_t max_body, struct e2b_req *r);
/* Header `name` (case-insensitive) of r. 0, -ENOENT, -E2BIG. */
int e2b_req_header(const struct e2b_req *r, const char *name, char *out, size_t len);
/* Query parameter `key` percent-decoded ('+' is a space). 0, -ENOENT,
 * -EINVAL (a bad escape or a NUL), -E2BIG. */
int e2b_query_get(const char *query, const char *key, char *out, size_t len);
/* Base64 (RFC 4648 section 4, padded) both ways. encode: the length
 * written (out: 4 * ((n + 2) / 3) + 1 bytes, NUL-terminated); decode:
 * the bytes or -EINVAL. */
size_t e2b_b64_encode(const void *in, size_t n, char *out);
long e2b_b64_decode(const char *in, size_t n, void *out, size_t cap);

/* ---- process_req.c: process.Process messages in Connect's JSON ---- */
#define E2B_ARGS_MAX 250
#define E2B_ENVS_MAX 128
struct e2b_start {
	const char *cmd;
	const char *args[E2B_ARGS_MAX];
	unsigned nargs;
	char *envs[E2B_ENVS_MAX]; /* "K=V", malloc'd (e2b_start_free) */
	unsigned nenvs;
	const char *cwd, *tag;
	int stdin_open;
	int pty;
	unsigned rows, cols;
};
/* StartRequest (process.proto) from its JSON. 0 or -EINVAL (why). The
 * strings point into the parsed tree (its arena). */
int e2b_start_parse(const struct json *root, struct e2b_start *s, const char **why);
void e2b_start_free(struct e2b_start *s);
/* PTY {"size":{"rows","cols"}} (1..65535 each; 24x80 where absent). 0 or
 * -EINVAL (not an object). */
int e2b_pty_size(const struct json *pty, unsigned *rows, unsigned *cols);
/* A ProcessSelector ({"pid":N} or {"tag":T}) under root's key `process`:
 * *pid (0: by tag) or *tag. 0 or -EINVAL. */
int e2b_selector(const struct json *root, uint32_t *pid, const char **tag);
/* The signal of SendSignalRequest (a Signal name or number): 9, 15, or
 * -EINVAL. */
int e2b_signal_parse(const struct json *root);
/* Process events as StartResponse/ConnectResponse JSON into w. */
void e2b_event_start(struct json_writer *w, uint32_t pid);
/* stream: "stdout", "stderr" or "pty" */
void e2b_event_data(struct json_writer *w, const char *stream, const void *data, size_t len, char *b64, size_t b64cap);
void e2b_event_keepalive(struct json_writer *w);
/* exit_code, or signal (> 0: it was killed by that signal: exitCode -1,
 * as envd reports it). */
void e2b_event_end(struct json_writer *w, int exit_code, int signal);

/* ---- e2b_proto.c: binary protobuf, transcoded to and from the JSON ---- */
struct pb_msg;
/* The request and response messages of service/method. 0 or -ENOENT. */
int e2b_pb_method(const char *service, const char *method, const struct pb_msg **req, const struct pb_msg **resp);
/* A binary message as its JSON into w. 0, -EPROTO (malformed), -E2BIG. */
int e2b_pb_to_json(const struct pb_msg *m, const uint8_t *b, size_t len, struct json_writer *w);
/* A JSON message as binary into out: its length, or -EINVAL, -E2BIG. */
long e2b_pb_from_json(const struct pb_msg *m, const struct json *j, uint8_t *out, size_t cap);

/* ---- the server ---- */
#define E2B_WATCHERS 64
struct e2b_watcher;
struct e2b_server {
	const struct e2b_serve_opts *o;
	char keys_dir[PATH_MAX + 16];
	pthread_mutex_t lock; /* records, the connection count */
	unsigned conns;
	unsigned forking;     /* forks between their snapshot and clones (under lock) */
	unsigned forks;       /* forks begun (under lock) */
	int stop[2];          /* readable once the server stops */
	struct e2b_watcher *watchers[E2B_WATCHERS]; /* CreateWatcher's (under lock) */
};

/* One connection. */
struct e2b_conn {
	struct e2b_server *srv;
	int fd;
	int keep_alive;
	int streaming; /* a chunked response is open */
};

/* e2b_http.c: answers. Each returns 0, or -EPIPE (the client is gone). */
int e2b_send(struct e2b_conn *c, int status, const char *type, const void *body, size_t len, const char *extra);
/* An E2B error body {"code":status,"message":msg}. */
int e2b_send_error(struct e2b_conn *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A JSON body (w's text) with status, or 500 if it did not fit. */
int e2b_send_json(struct e2b_conn *c, int status, struct json_writer *w);
/* A chunked response: the head, then chunks, then the last chunk. */
int e2b_stream_begin(struct e2b_conn *c, int status, const char *type);
int e2b_stream_write(struct e2b_conn *c, const void *data, size_t len);
int e2b_stream_end(struct e2b_conn *c);
/* Has the client closed its side (or sent more than this server reads
 * while streaming)? */
int e2b_client_gone(const struct e2b_conn *c);

/* e2b_keys.c */
/* Is X-API-KEY (or Authorization: Bearer) one of the keys? 0, or -EACCES
 * (the 401 is sent). */
int e2b_key_check(struct e2b_conn *c, const struct e2b_req *r);
/* A new envd access token for the sandbox folder dir (its tokens file,
 * cli/mcp/mcp_tokens.h; scopes exec, files and processes). 0 or -errno. */
int e2b_token_issue(const char *dir, char *tok, size_t len);
/* Is X-Access-Token a live token of the sandbox's with the scopes `need`? 0
 * or -EACCES (the 401 or 403 is sent). */
int e2b_token_check(struct e2b_conn *c, const struct e2b_req *r, const char *dir, unsigned need);

/* e2b_control.c: the record of a sandbox the gateway started
 * (E2B_RECORD in its folder). */
#define E2B_RECORD "e2b.json"
struct e2b_rec {
	char template_id[128];
	long long started, end; /* Unix seconds */
	int auto_pause;
	char token[128];        /* the envd access token */
	char metadata[4096];    /* a JSON object of strings */
	char envs[4096];        /* a JSON object of strings */
};
int e2b_rec_read(const char *dir, struct e2b_rec *rec);
int e2b_rec_write(const char *dir, const struct e2b_rec *rec);
/* Routes a control plane request. 0 or -EPIPE. */
int e2b_control(struct e2b_conn *c, const struct e2b_req *r);
/* e2b_metrics.c: GET /sandboxes/{id}/metrics of a running or paused
 * sandbox. 0 or -EPIPE. */
int e2b_metrics(struct e2b_conn *c, const char *id, const struct sandbox_status *st);
/* Runs `vmm VERB ID` (suspend, resume) with default signals. Its status. */
int e2b_vmm(const struct e2b_server *srv, const char *verb, const char *id);
/* The timeout reaper's round: sandboxes past their end are killed, or
 * paused (autoPause); fork snapshots no sandbox came from are removed. */
void e2b_reap(struct e2b_server *srv);

/* An envd call's target. */
struct e2b_envd {
	struct e2b_conn *c;
	const struct e2b_req *r;
	struct sandbox sb;
	struct sandbox_addr addr;
	struct e2b_rec rec;
	int stream; /* a server-streaming call (application/connect+json or +proto) */
	int begun;  /* its 200 and head are sent */
	const struct pb_msg *binary; /* binary protobuf: the response message (else NULL: JSON) */
};
/* Routes an envd request (E2b-Sandbox-Id). 0 or -EPIPE. */
int e2b_envd(struct e2b_conn *c, const struct e2b_req *r);

/* The sandbox API without messages on stderr (cli/sandbox/api_client.h):
 * one request, its RESULT into out. 0, or -errno (ERROR's, with its
 * message in err). */
int e2b_api_call(const struct sandbox_addr *a, int version, const char *fields, char *out, size_t outlen,
		 char *err, size_t errlen);
/* Starts w in buf with a sandbox API request's "op":op,"path":path. */
void e2b_op_fields(struct json_writer *w, char *buf, size_t len, const char *op, const char *path);
/* A Connect error for a failed call: unary (status from the code) or, if
 * the stream is open, its end-stream message. */
int e2b_rpc_error(struct e2b_envd *e, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A unary Connect answer: w's JSON (binary: transcoded) with 200. */
int e2b_rpc_reply(struct e2b_envd *e, struct json_writer *w);
/* The empty message as a unary answer. */
int e2b_rpc_empty(struct e2b_envd *e);
/* Streams: the open (200, application/connect+json), one message, the
 * end (code NULL: success). */
int e2b_rpc_stream_begin(struct e2b_envd *e);
int e2b_rpc_stream_msg(struct e2b_envd *e, struct json_writer *w);
int e2b_rpc_stream_end(struct e2b_envd *e, const char *code, const char *msg);
/* A guest path from an E2B one: relative ones are under /root. */
int e2b_abs_path(const char *in, char *out, size_t len);

/* e2b_process.c: process.Process/<method>. json: the request message. */
int e2b_process(struct e2b_envd *e, const char *method, const struct json *req);
/* e2b_fs.c: filesystem.Filesystem/<method>. */
int e2b_fs(struct e2b_envd *e, const char *method, const struct json *req);
/* e2b_fs.c, for the watchers: the API watch of path opened (its RESULT
 * read): the fd, or -errno with the Connect error sent. */
int e2b_watch_open(struct e2b_envd *e, const char *path, int recursive);
/* One EVENT frame's events as (name relative to root, EventType name)
 * through emit; the first non-zero emit ends it and is returned. */
int e2b_watch_events(const char *root, const char *text, size_t len, int (*emit)(void *, const char *, const char *),
		     void *ctx);
/* A FilesystemEvent {"name","type"} into w. */
void e2b_fs_event_json(struct json_writer *w, const char *name, const char *type);
/* e2b_watch.c: CreateWatcher, GetWatcherEvents, RemoveWatcher. */
int e2b_watcher(struct e2b_envd *e, const char *method, const struct json *req);
/* The server's end: every watcher stopped. */
void e2b_watchers_free(struct e2b_server *srv);
/* e2b_files.c: GET and POST /files (envd.yaml). */
int e2b_files(struct e2b_envd *e);

#endif
