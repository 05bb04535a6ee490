/* Shared between the Firecracker API's files, for no one else:
 *   fcapi.c          the route table and dispatch, the body checks every
 *                    route uses, GET / and /version, --config-file
 *   fcapi_machine.c  boot source, machine config, actions, PATCH /vm, and
 *                    the VM's configuration built from what was stored
 *   fcapi_io.c       drives, network interfaces, vsock, shared directories
 *                    (PUT, and PATCH on a running VM)
 *   fcapi_snap.c     PUT /snapshot/create and /snapshot/load
 *   fcapi_dev.c      entropy and balloon
 *   fcapi_mmds.c     /mmds and /mmds/config
 *   fcapi_obs.c      logger, metrics, GET /vm/config
 *   fcapi_cpu.c      serial and cpu-config */
#ifndef VMM_FCAPI_PRIV_H
#define VMM_FCAPI_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/api/fcapi.h"
#include "vmm/wire/json.h"

#define MSG_AFTER_START "The requested operation is not supported after starting the microVM."
/* Firecracker's frame around serde_json's errors (parsed_request.rs). */
#define FCAPI_DESER "An error occurred when deserializing the json body of a request: "
#define MSG_BEFORE_START "The requested operation is not supported before starting the microVM."

/* Where a refusal's fault_message goes. */
struct why {
	char *buf;
	size_t len;
};

enum ftype { F_STR, F_BOOL, F_UINT, F_OBJ, F_ARR };

struct field {
	const char *name;
	enum ftype type;
	int required;
	const char *expect; /* the Rust type serde names (NULL: u64 for F_UINT) */
};

/* fcapi.c: the body checks. Each returns 0 or -EINVAL with the fault in
 * *w; fcapi_fail only says why. */
int fcapi_fail(struct why *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The object has only known fields, each once and of its type (null
 * counts as absent), and every required one. */
int fcapi_check_fields(const struct json *o, const struct field *f, size_t nf, struct why *w);
/* serde_json's complaint about the value at `at`, in Firecracker's frame
 * (FCAPI_DESER ... at line L column C.). */
int fcapi_deser_fail(struct why *w, struct json_pos at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Says which nested object fcapi_check_fields' complaint is about (none
 * for serde_json's, which say where). */
int fcapi_in_field(struct why *w, const char *field, const char *name);
/* A RateLimiter {bandwidth, ops} (bytes and operations per second). */
int fcapi_get_limiter(const struct json *o, const char *field, struct rl_limits *l, struct why *w);
/* The microVM not started, nor being started. */
int fcapi_pre_boot(const struct fcapi *a, struct why *w);
/* A path as Firecracker takes it: relative ones against the working
 * directory. */
int fcapi_abs_path(char *dst, size_t cap, const char *src, const char *field, struct why *w);
/* An absolute path to a regular file or block device we may read (and
 * write, with want_write). */
int fcapi_readable_file(const char *path, const char *field, int want_write, struct why *w);
/* A string field into a fixed buffer, refusing what does not fit. */
int fcapi_copy_str(char *dst, size_t cap, const char *src, const char *field, struct why *w);
/* The id in the path (NULL: from a config file) and the body's agree, and
 * the body's is 1..max of [A-Za-z0-9_-] (fcapi_id_ok). */
int fcapi_check_id(const char *path_id, const char *body_id, const char *field, size_t max, struct why *w);
int fcapi_id_ok(const char *s, size_t max);
/* A member's value (after fcapi_check_fields: of its type, or absent). */
const char *fcapi_get_str(const struct json *o, const char *k);
int fcapi_get_bool(const struct json *o, const char *k, int def);
uint64_t fcapi_get_uint(const struct json *o, const char *k);
int fcapi_has(const struct json *o, const char *k); /* there and not null */

/* The routes, for fcapi_handle and fcapi_apply_config_file (path_id: the
 * id in the path, NULL from a config file). Each returns 0 or -EINVAL
 * with the fault in *w. */
/* fcapi_machine.c */
int fcapi_put_boot_source(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_put_machine_config(struct fcapi *a, const struct json *b, int patch, struct why *w);
int fcapi_put_actions(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_patch_vm(struct fcapi *a, const struct json *b, struct why *w);
/* GET /machine-config's body into out: its length, 0 if it did not fit. */
size_t fcapi_get_machine_config(const struct fcapi *a, char *out, size_t cap);
/* fcapi_io.c */
int fcapi_put_drive(struct fcapi *a, const struct json *b, const char *path_id, struct why *w);
int fcapi_put_net(struct fcapi *a, const struct json *b, const char *path_id, struct why *w);
int fcapi_put_vsock(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_put_fs(struct fcapi *a, const struct json *b, const char *path_id, struct why *w);
int fcapi_patch_drive(struct fcapi *a, const struct json *b, const char *path_id, struct why *w);
int fcapi_patch_net(struct fcapi *a, const struct json *b, const char *path_id, struct why *w);
/* fcapi_snap.c */
int fcapi_put_snapshot_create(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_put_snapshot_load(struct fcapi *a, const struct json *b, struct why *w);
/* fcapi_obs.c */
int fcapi_put_logger(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_put_metrics(struct fcapi *a, const struct json *b, struct why *w);

/* fcapi_cpu.c: PUT /serial and PUT /cpu-config (the config file's
 * "serial" and "cpu-config": an object, or for cpu-config a file's path). */
int fcapi_put_serial(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_put_cpu_config(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_cpu_config_file(struct fcapi *a, const struct json *v, struct why *w);

/* fcapi_obs.c: a RateLimiter member (nothing if no limit). */
void fcapi_limiter_json(struct json_writer *w, const char *key, const struct rl_limits *l);

/* fcapi_dev.c: PUT /entropy; PUT, PATCH and GET /balloon; GET and PATCH
 * /balloon/statistics. Each returns 0 or -EINVAL with the fault in *w
 * (GETs: the body's length in *n). */
int fcapi_put_entropy(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_put_balloon(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_patch_balloon(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_patch_balloon_stats(struct fcapi *a, const struct json *b, struct why *w);
int fcapi_get_balloon(const struct fcapi *a, char *out, size_t cap, size_t *n, struct why *w);
int fcapi_get_balloon_stats(const struct fcapi *a, char *out, size_t cap, size_t *n, struct why *w);
/* GET /vm/config's "balloon" and "entropy" members. */
void fcapi_dev_config_json(const struct fcapi *a, struct json_writer *jw);
/* The VM's entropy and balloon devices from a->cfg. */
void fcapi_dev_vm_config(const struct fcapi *a, struct vm_config *cfg);
/* MMDS (fcapi_mmds.c): /mmds and /mmds/config, answered into out; the
 * config file's "mmds-config". */
struct http_request;
int fcapi_mmds(struct fcapi *a, const struct http_request *req, char *out, size_t cap, size_t *len);
int fcapi_mmds_config_file(struct fcapi *a, const struct json *b, struct why *w);

#endif
