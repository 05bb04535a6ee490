/* Firecracker's MMDS routes (PUT/PATCH/GET /mmds, PUT /mmds/config) and
 * --metadata: the store is devices/mmds.c's, served to the guest by the
 * interfaces /mmds/config names (devices/mmds_net.c). docs/mmds.md. */
#include "vmm/api/fcapi_priv.h"
#include "vmm/base/http.h"
#include "devices/mmds.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fault(int status, const char *msg, char *out, size_t cap, size_t *len)
{
	*len = http_fault(out, cap, msg);
	return status;
}

/* PUT /mmds/config (before the guest starts). */
static int put_config(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = { { "network_interfaces", F_ARR, 1, NULL },
					  { "version", F_STR, 0, NULL },
					  { "ipv4_address", F_STR, 0, NULL },
					  { "imds_compat", F_BOOL, 0, NULL } };
	const struct json *ifs = json_get(b, "network_interfaces"), *e;
	unsigned mask = 0, i;
	const char *s;
	uint32_t ip = MMDS_DEFAULT_IPV4;
	enum mmds_version ver = MMDS_V1;
	int compat = 0;

	if (fcapi_pre_boot(a, w) || fcapi_check_fields(b, f, sizeof(f) / sizeof(f[0]), w))
		return -EINVAL;
	if (!ifs->u.kids.count) {
		snprintf(w->buf, w->len, "The list of network interface IDs that allow forwarding MMDS requests is empty.");
		return -EINVAL;
	}
	for (e = ifs->u.kids.first; e; e = e->next) {
		for (i = 0; i < a->cfg.nr_net; i++)
			if (e->type == JSON_STR && !strcmp(a->cfg.net[i].id, e->u.str.s))
				break;
		if (i == a->cfg.nr_net) {
			snprintf(w->buf, w->len,
				 "The list of network interface IDs provided contains at least one ID that does not "
				 "correspond to any existing network interface.");
			return -EINVAL;
		}
		mask |= 1u << i;
	}
	if (!json_get_str(b, "version", &s)) {
		if (!strcmp(s, "V1"))
			ver = MMDS_V1;
		else if (!strcmp(s, "V2"))
			ver = MMDS_V2;
		else {
			snprintf(w->buf, w->len, "An error occurred when deserializing the json body of a request: "
				 "unknown variant `%.32s`, expected `V1` or `V2`.", s);
			return -EINVAL;
		}
	}
	if (!json_get_str(b, "ipv4_address", &s) && mmds_parse_ipv4(s, &ip)) {
		snprintf(w->buf, w->len, "The MMDS IPv4 address is not link-local (169.254.1.0 - 169.254.254.255): %.32s", s);
		return -EINVAL;
	}
	(void)json_get_bool(b, "imds_compat", &compat);
	pthread_mutex_lock(&a->mmds.lock);
	a->mmds.version = ver;
	a->mmds.ipv4 = ip;
	a->mmds.imds_compat = compat;
	pthread_mutex_unlock(&a->mmds.lock);
	for (i = 0; i < a->cfg.nr_net; i++)
		a->cfg.net[i].mmds = (mask >> i) & 1;
	a->cfg.has_mmds = 1;
	return 0;
}

int fcapi_mmds_config_file(struct fcapi *a, const struct json *b, struct why *w)
{
	return put_config(a, b, w);
}

int fcapi_mmds(struct fcapi *a, const struct http_request *req, char *out, size_t cap, size_t *len)
{
	char msg[512];
	struct why w = { msg, sizeof(msg) };
	int r;

	*len = 0;
	if (!strcmp(req->path, "/mmds/config")) {
		struct json_arena ar = { .size = 1u << 16 };
		const struct json *b;
		const char *err = NULL;

		if (req->method != HTTP_PUT)
			return fault(400, "Invalid request method and/or path.", out, cap, len);
		if (!req->body_len)
			return fault(400, "Empty PUT request.", out, cap, len);
		ar.buf = malloc(ar.size);
		if (!ar.buf)
			return fault(500, "out of memory", out, cap, len);
		b = json_parse(req->body, req->body_len, &ar, &err);
		if (!b || b->type != JSON_OBJ) {
			snprintf(msg, sizeof(msg), "An error occurred when deserializing the json body of a request: %s",
				 b ? "expected an object" : err ? err : "invalid JSON");
			r = -EINVAL;
		} else {
			r = put_config(a, b, &w);
		}
		free(ar.buf);
		return r ? fault(400, msg, out, cap, len) : 204;
	}
	switch (req->method) {
	case HTTP_GET: {
		char *s;
		size_t n;

		if (req->body_len)
			return fault(400, "GET request cannot have a body.", out, cap, len);
		s = mmds_get(&a->mmds);
		if (!s)
			return fault(500, "out of memory", out, cap, len);
		n = strlen(s);
		if (n >= cap) {
			free(s);
			return fault(500, "The MMDS data store is larger than a reply can carry.", out, cap, len);
		}
		memcpy(out, s, n + 1);
		free(s);
		*len = n;
		return 200;
	}
	case HTTP_PUT:
	case HTTP_PATCH:
		if (!req->body_len)
			return fault(400, req->method == HTTP_PUT ? "Empty PUT request." : "Empty PATCH request.", out,
				     cap, len);
		if (req->method == HTTP_PATCH) {
			int initialized;

			pthread_mutex_lock(&a->mmds.lock);
			initialized = a->mmds.json != NULL;
			pthread_mutex_unlock(&a->mmds.lock);
			if (!initialized)
				return fault(400, "The MMDS data store is not initialized.", out, cap, len);
			r = mmds_patch(&a->mmds, req->body, req->body_len, msg, sizeof(msg));
		} else {
			r = mmds_put(&a->mmds, req->body, req->body_len, msg, sizeof(msg));
		}
		return r ? fault(r == -ENOMEM ? 500 : 400, msg, out, cap, len) : 204;
	default:
		return fault(400, "Invalid request method and/or path.", out, cap, len);
	}
}
