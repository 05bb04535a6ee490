/* Shared between the Firecracker API's files (fcapi.c: routes and body
 * checks; fcapi_dev.c: the entropy and balloon devices' routes;
 * fcapi_obs.c). Not an interface for anyone else. */
#ifndef VMM_FCAPI_PRIV_H
#define VMM_FCAPI_PRIV_H

#include <stddef.h>

#include "fcapi.h"
#include "../guest-init/json.h"

#define MSG_AFTER_START "The requested operation is not supported after starting the microVM."
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
};

/* fcapi.c: the object has only known fields, each once and of its type,
 * and every required one; a RateLimiter object; the microVM not started. */
int fcapi_check_fields(const struct json *o, const struct field *f, size_t nf, struct why *w);
int fcapi_get_limiter(const struct json *o, const char *field, struct rl_limits *l, struct why *w);
int fcapi_pre_boot(const struct fcapi *a, struct why *w);
/* A path as Firecracker takes it: relative ones against the working
 * directory. 0 or -EINVAL with the fault in *w. */
int fcapi_abs_path(char *dst, size_t cap, const char *src, const char *field, struct why *w);

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
