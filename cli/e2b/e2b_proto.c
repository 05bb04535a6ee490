/* Binary protobuf for envd's Connect calls (the encoding the Python SDK's
 * default codec sends: application/proto, application/connect+proto),
 * transcoded to and from the protobuf JSON mapping the handlers speak, by
 * tables of the messages of envd/process/process.proto and
 * envd/filesystem/filesystem.proto (field numbers, JSON names, types).
 * Decoding follows the protobuf encoding (protobuf.dev, "Encoding"):
 * varints, zigzag for sint32, length-delimited strings, bytes, messages
 * and maps (entries of key 1, value 2), the last of a repeated scalar
 * wins, unknown fields are skipped; bytes become base64, 64-bit numbers
 * decimal strings, enums their names, Timestamps RFC 3339 text, as the
 * JSON mapping writes them. Pure (cli/e2b/e2b_priv.h). */
#include "cli/e2b/e2b_priv.h"
#include "vmm/wire/pb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum pb_type { PB_STRING, PB_BYTES, PB_BOOL, PB_UINT32, PB_INT32, PB_SINT32, PB_INT64, PB_ENUM, PB_MSG, PB_MAP,
	       PB_TIMESTAMP };

struct pb_field {
	unsigned num;
	const char *json;
	enum pb_type type;
	int repeated;
	const struct pb_msg *msg;        /* PB_MSG */
	const char *const *enum_names;   /* PB_ENUM: by number */
	unsigned nenum;
};

struct pb_msg {
	const struct pb_field *f;
	unsigned n;
};

#define MSG(name, ...)                                                          \
	static const struct pb_field name##_f[] = { __VA_ARGS__ };              \
	static const struct pb_msg name = { name##_f, sizeof(name##_f) / sizeof(name##_f[0]) }
#define EMPTY(name) static const struct pb_msg name = { NULL, 0 }
#define ENUM(arr) .enum_names = arr, .nenum = sizeof(arr) / sizeof(arr[0])

static const char *const signal_names[] = { [0] = "SIGNAL_UNSPECIFIED", [9] = "SIGNAL_SIGKILL",
					    [15] = "SIGNAL_SIGTERM" };
static const char *const file_types[] = { "FILE_TYPE_UNSPECIFIED", "FILE_TYPE_FILE", "FILE_TYPE_DIRECTORY",
					  "FILE_TYPE_SYMLINK" };
static const char *const event_types[] = { "EVENT_TYPE_UNSPECIFIED", "EVENT_TYPE_CREATE", "EVENT_TYPE_WRITE",
					   "EVENT_TYPE_REMOVE", "EVENT_TYPE_RENAME", "EVENT_TYPE_CHMOD" };

/* envd/process/process.proto */
EMPTY(pb_empty);
MSG(pb_size, { .num = 1, .json = "cols", .type = PB_UINT32 }, { .num = 2, .json = "rows", .type = PB_UINT32 });
MSG(pb_pty, { .num = 1, .json = "size", .type = PB_MSG, .msg = &pb_size });
MSG(pb_config, { .num = 1, .json = "cmd", .type = PB_STRING }, { .num = 2, .json = "args", .type = PB_STRING, .repeated = 1 }, { .num = 3, .json = "envs", .type = PB_MAP },
    { .num = 4, .json = "cwd", .type = PB_STRING });
MSG(pb_selector, { .num = 1, .json = "pid", .type = PB_UINT32 }, { .num = 2, .json = "tag", .type = PB_STRING });
MSG(pb_input, { .num = 1, .json = "stdin", .type = PB_BYTES }, { .num = 2, .json = "pty", .type = PB_BYTES });
MSG(pb_start_req, { .num = 1, .json = "process", .type = PB_MSG, .msg = &pb_config }, { .num = 2, .json = "pty", .type = PB_MSG, .msg = &pb_pty },
    { .num = 3, .json = "tag", .type = PB_STRING }, { .num = 4, .json = "stdin", .type = PB_BOOL });
MSG(pb_sel_req, { .num = 1, .json = "process", .type = PB_MSG, .msg = &pb_selector });
MSG(pb_signal_req, { .num = 1, .json = "process", .type = PB_MSG, .msg = &pb_selector }, { .num = 2, .json = "signal", .type = PB_ENUM, ENUM(signal_names) });
MSG(pb_input_req, { .num = 1, .json = "process", .type = PB_MSG, .msg = &pb_selector }, { .num = 2, .json = "input", .type = PB_MSG, .msg = &pb_input });
MSG(pb_update_req, { .num = 1, .json = "process", .type = PB_MSG, .msg = &pb_selector }, { .num = 2, .json = "pty", .type = PB_MSG, .msg = &pb_pty });
MSG(pb_ev_start, { .num = 1, .json = "pid", .type = PB_UINT32 });
MSG(pb_ev_data, { .num = 1, .json = "stdout", .type = PB_BYTES }, { .num = 2, .json = "stderr", .type = PB_BYTES }, { .num = 3, .json = "pty", .type = PB_BYTES });
MSG(pb_ev_end, { .num = 1, .json = "exitCode", .type = PB_SINT32 }, { .num = 2, .json = "exited", .type = PB_BOOL }, { .num = 3, .json = "status", .type = PB_STRING },
    { .num = 4, .json = "error", .type = PB_STRING });
MSG(pb_event, { .num = 1, .json = "start", .type = PB_MSG, .msg = &pb_ev_start }, { .num = 2, .json = "data", .type = PB_MSG, .msg = &pb_ev_data },
    { .num = 3, .json = "end", .type = PB_MSG, .msg = &pb_ev_end }, { .num = 4, .json = "keepalive", .type = PB_MSG, .msg = &pb_empty });
MSG(pb_event_resp, { .num = 1, .json = "event", .type = PB_MSG, .msg = &pb_event });
MSG(pb_proc_info, { .num = 1, .json = "config", .type = PB_MSG, .msg = &pb_config }, { .num = 2, .json = "pid", .type = PB_UINT32 }, { .num = 3, .json = "tag", .type = PB_STRING });
MSG(pb_list_resp, { .num = 1, .json = "processes", .type = PB_MSG, .repeated = 1, .msg = &pb_proc_info });

/* envd/filesystem/filesystem.proto */
MSG(pb_path_req, { .num = 1, .json = "path", .type = PB_STRING });
MSG(pb_move_req, { .num = 1, .json = "source", .type = PB_STRING }, { .num = 2, .json = "destination", .type = PB_STRING });
MSG(pb_listdir_req, { .num = 1, .json = "path", .type = PB_STRING }, { .num = 2, .json = "depth", .type = PB_UINT32 });
MSG(pb_watch_req, { .num = 1, .json = "path", .type = PB_STRING }, { .num = 2, .json = "recursive", .type = PB_BOOL }, { .num = 3, .json = "includeEntry", .type = PB_BOOL },
    { .num = 4, .json = "allowNetworkMounts", .type = PB_BOOL });
MSG(pb_entry, { .num = 1, .json = "name", .type = PB_STRING }, { .num = 2, .json = "type", .type = PB_ENUM, ENUM(file_types) }, { .num = 3, .json = "path", .type = PB_STRING },
    { .num = 4, .json = "size", .type = PB_INT64 }, { .num = 5, .json = "mode", .type = PB_UINT32 }, { .num = 6, .json = "permissions", .type = PB_STRING }, { .num = 7, .json = "owner", .type = PB_STRING },
    { .num = 8, .json = "group", .type = PB_STRING }, { .num = 9, .json = "modifiedTime", .type = PB_TIMESTAMP }, { .num = 10, .json = "symlinkTarget", .type = PB_STRING });
MSG(pb_entry_resp, { .num = 1, .json = "entry", .type = PB_MSG, .msg = &pb_entry });
MSG(pb_listdir_resp, { .num = 1, .json = "entries", .type = PB_MSG, .repeated = 1, .msg = &pb_entry });
MSG(pb_fs_event, { .num = 1, .json = "name", .type = PB_STRING }, { .num = 2, .json = "type", .type = PB_ENUM, ENUM(event_types) },
    { .num = 3, .json = "entry", .type = PB_MSG, .msg = &pb_entry });
MSG(pb_watch_resp, { .num = 1, .json = "start", .type = PB_MSG, .msg = &pb_empty }, { .num = 2, .json = "filesystem", .type = PB_MSG, .msg = &pb_fs_event },
    { .num = 3, .json = "keepalive", .type = PB_MSG, .msg = &pb_empty });

MSG(pb_watcher_req, { .num = 1, .json = "watcherId", .type = PB_STRING });
MSG(pb_events_resp, { .num = 1, .json = "events", .type = PB_MSG, .repeated = 1, .msg = &pb_fs_event });

static const struct {
	const char *path; /* service/method */
	const struct pb_msg *req, *resp;
} methods[] = {
	{ "process.Process/Start", &pb_start_req, &pb_event_resp },
	{ "process.Process/Connect", &pb_sel_req, &pb_event_resp },
	{ "process.Process/List", &pb_empty, &pb_list_resp },
	{ "process.Process/SendSignal", &pb_signal_req, &pb_empty },
	{ "process.Process/SendInput", &pb_input_req, &pb_empty },
	{ "process.Process/CloseStdin", &pb_sel_req, &pb_empty },
	{ "process.Process/Update", &pb_update_req, &pb_empty },
	{ "filesystem.Filesystem/Stat", &pb_path_req, &pb_entry_resp },
	{ "filesystem.Filesystem/MakeDir", &pb_path_req, &pb_entry_resp },
	{ "filesystem.Filesystem/Move", &pb_move_req, &pb_entry_resp },
	{ "filesystem.Filesystem/ListDir", &pb_listdir_req, &pb_listdir_resp },
	{ "filesystem.Filesystem/Remove", &pb_path_req, &pb_empty },
	{ "filesystem.Filesystem/WatchDir", &pb_watch_req, &pb_watch_resp },
	{ "filesystem.Filesystem/CreateWatcher", &pb_watch_req, &pb_watcher_req },
	{ "filesystem.Filesystem/GetWatcherEvents", &pb_watcher_req, &pb_events_resp },
	{ "filesystem.Filesystem/RemoveWatcher", &pb_watcher_req, &pb_empty },
};

int e2b_pb_method(const char *service, const char *method, const struct pb_msg **req, const struct pb_msg **resp)
{
	size_t i, sl = strlen(service);

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strncmp(methods[i].path, service, sl) && methods[i].path[sl] == '/' &&
		    !strcmp(methods[i].path + sl + 1, method)) {
			*req = methods[i].req;
			*resp = methods[i].resp;
			return 0;
		}
	return -ENOENT;
}

/* ---- decoding ---- */

/* The next field at *i: its number, wire type, and value (a varint or
 * fixed number in *v, a length-delimited one's bytes in *p, *plen and its
 * length in *v), read by the wire layer's reader (vmm/wire/pb.h). */
static int next_field(const uint8_t *b, size_t len, size_t *i, unsigned *num, unsigned *wt, uint64_t *v,
		      const uint8_t **p, size_t *plen)
{
	struct pb_reader r;
	struct pb_entry f;

	pb_reader_init(&r, b + *i, len - *i);
	if (pb_next(&r, &f) <= 0)
		return -EPROTO;
	*i = (size_t)(r.p - b);
	*num = f.num;
	*wt = f.wire;
	*v = f.wire == 2 ? f.len : f.v;
	if (f.wire == 2) {
		*p = f.data;
		*plen = f.len;
	}
	return 0;
}

static int to_json(const struct pb_msg *m, const uint8_t *b, size_t len, struct json_writer *w, unsigned depth);

/* One value of field f (wire type wt) as JSON. */
static int value_json(const struct pb_field *f, unsigned wt, uint64_t v, const uint8_t *p, size_t plen,
		      struct json_writer *w, unsigned depth)
{
	char num[32];

	if ((f->type == PB_STRING || f->type == PB_BYTES || f->type == PB_MSG || f->type == PB_MAP ||
	     f->type == PB_TIMESTAMP) != (wt == 2))
		return -EPROTO;
	switch (f->type) {
	case PB_STRING:
		/* the JSON side holds no NUL (vmm/wire/json.h), nor does a path */
		if (memchr(p, 0, plen))
			return -EPROTO;
		jw_text(w, (const char *)p, plen);
		return 0;
	case PB_BYTES: {
		char *enc = malloc(4 * ((plen + 2) / 3) + 1);

		if (!enc)
			return -ENOMEM;
		e2b_b64_encode(p, plen, enc);
		jw_str(w, enc);
		free(enc);
		return 0;
	}
	case PB_BOOL:
		jw_bool(w, v != 0);
		return 0;
	case PB_UINT32:
		jw_int(w, (uint32_t)v);
		return 0;
	case PB_INT32:
		jw_int(w, (int32_t)v);
		return 0;
	case PB_SINT32:
		jw_int(w, (int32_t)((uint32_t)(v >> 1) ^ -(uint32_t)(v & 1)));
		return 0;
	case PB_INT64:
		snprintf(num, sizeof(num), "%lld", (long long)v);
		jw_str(w, num);
		return 0;
	case PB_ENUM: {
		int32_t e = (int32_t)v; /* an enum is an int32 on the wire */

		if (e >= 0 && (unsigned)e < f->nenum && f->enum_names[e])
			jw_str(w, f->enum_names[e]);
		else
			jw_int(w, e);
		return 0;
	}
	case PB_MSG:
		return to_json(f->msg, p, plen, w, depth + 1);
	case PB_TIMESTAMP: {
		size_t i = 0;
		unsigned n, t;
		int64_t secs = 0;
		const uint8_t *q;
		size_t ql;
		struct tm tm;
		time_t tt;
		char when[64];

		while (i < plen) {
			if (next_field(p, plen, &i, &n, &t, &v, &q, &ql))
				return -EPROTO;
			if (n == 1 && t == 0)
				secs = (int64_t)v;
		}
		tt = (time_t)secs;
		if (!gmtime_r(&tt, &tm))
			return -EPROTO;
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		jw_str(w, when);
		return 0;
	}
	default:
		return -EPROTO;
	}
}

/* A map<string,string> entry's key and value (fields 1 and 2). */
static int map_entry(const uint8_t *p, size_t plen, struct json_writer *w)
{
	const uint8_t *k = (const uint8_t *)"", *v = (const uint8_t *)"", *q;
	size_t kl = 0, vl = 0, ql, i = 0;
	unsigned n, t;
	uint64_t x;
	char *key;

	while (i < plen) {
		if (next_field(p, plen, &i, &n, &t, &x, &q, &ql))
			return -EPROTO;
		if (n == 1 && t == 2)
			k = q, kl = ql;
		else if (n == 2 && t == 2)
			v = q, vl = ql;
	}
	if (memchr(k, 0, kl) || memchr(v, 0, vl) || !(key = strndup((const char *)k, kl)))
		return -EPROTO;
	jw_key(w, key);
	free(key);
	jw_text(w, (const char *)v, vl);
	return 0;
}

static int to_json(const struct pb_msg *m, const uint8_t *b, size_t len, struct json_writer *w, unsigned depth)
{
	unsigned fi;

	if (depth > 8)
		return -EPROTO;
	jw_obj(w);
	/* field by field of the schema: a repeated one's occurrences gathered
	 * in one array (a map's in one object), a singular one's last kept */
	for (fi = 0; fi < m->n; fi++) {
		const struct pb_field *f = &m->f[fi];
		size_t i = 0, last = (size_t)-1, at;
		int seen = 0, r;

		while (i < len) {
			const uint8_t *p = NULL;
			size_t plen = 0;
			unsigned n, wt;
			uint64_t v;

			at = i;
			if (next_field(b, len, &i, &n, &wt, &v, &p, &plen))
				return -EPROTO;
			if (n != f->num)
				continue;
			if (!f->repeated && f->type != PB_MAP) {
				last = at;
				continue;
			}
			if (!seen++) {
				jw_key(w, f->json);
				if (f->type == PB_MAP)
					jw_obj(w);
				else
					jw_arr(w);
			}
			r = f->type == PB_MAP ? (wt == 2 ? map_entry(p, plen, w) : -EPROTO)
					      : value_json(f, wt, v, p, plen, w, depth);
			if (r)
				return r;
		}
		if (seen)
			f->type == PB_MAP ? jw_obj_end(w) : jw_arr_end(w);
		if (last != (size_t)-1) {
			const uint8_t *p = NULL;
			size_t plen = 0;
			unsigned n, wt;
			uint64_t v;

			i = last;
			next_field(b, len, &i, &n, &wt, &v, &p, &plen);
			jw_key(w, f->json);
			if ((r = value_json(f, wt, v, p, plen, w, depth)))
				return r;
		}
	}
	jw_obj_end(w);
	return w->err ? -E2BIG : 0;
}

int e2b_pb_to_json(const struct pb_msg *m, const uint8_t *b, size_t len, struct json_writer *w)
{
	return to_json(m, b, len, w, 0);
}

/* ---- encoding ---- */

static int from_json(const struct pb_msg *m, const struct json *j, struct pb_writer *o, unsigned depth);

/* A length-delimited nested part: its bytes written after a 5-byte hole
 * for the length, then moved down to the length's real size. */
static int nested(struct pb_writer *o, unsigned num, const struct pb_msg *m, const struct json *j, unsigned depth)
{
	size_t start, body, n;
	uint8_t lb[10];
	struct pb_writer l = { lb, sizeof(lb), 0, 0 };
	int r;

	pb_tag(o, num, 2);
	start = o->len;
	pb_put(o, "\0\0\0\0\0", 5);
	if (o->err)
		return -E2BIG;
	body = o->len;
	if ((r = from_json(m, j, o, depth + 1)))
		return r;
	if (o->err)
		return -E2BIG;
	n = o->len - body;
	pb_put_varint(&l, n);
	memmove(o->buf + start + l.len, o->buf + body, n);
	memcpy(o->buf + start, lb, l.len);
	o->len = start + l.len + n;
	return 0;
}

static int64_t num_of(const struct json *v)
{
	if (v->type == JSON_NUM)
		return (int64_t)v->u.num;
	if (v->type == JSON_STR)
		return strtoll(v->u.str.s, NULL, 10);
	if (v->type == JSON_BOOL)
		return v->u.boolean;
	return 0;
}

static int value_pb(const struct pb_field *f, const struct json *v, struct pb_writer *o, unsigned depth)
{
	unsigned i;

	switch (f->type) {
	case PB_STRING:
		if (v->type != JSON_STR)
			return -EINVAL;
		pb_bytes(o, f->num, v->u.str.s, v->u.str.len);
		return 0;
	case PB_BYTES: {
		size_t cap = v->type == JSON_STR ? v->u.str.len / 4 * 3 + 3 : 0;
		uint8_t *d = cap ? malloc(cap) : NULL;
		long n = d ? e2b_b64_decode(v->u.str.s, v->u.str.len, d, cap) : v->type == JSON_STR ? 0 : -EINVAL;

		if (n >= 0)
			pb_bytes(o, f->num, d, (size_t)n);
		free(d);
		return n < 0 ? -EINVAL : 0;
	}
	case PB_BOOL:
	case PB_UINT32:
	case PB_INT32:
	case PB_INT64:
		pb_tag(o, f->num, 0);
		pb_put_varint(o, f->type == PB_INT32 ? (uint64_t)(int64_t)(int32_t)num_of(v) : (uint64_t)num_of(v));
		return 0;
	case PB_SINT32: {
		int32_t x = (int32_t)num_of(v);

		pb_tag(o, f->num, 0);
		pb_put_varint(o, (uint32_t)((uint32_t)x << 1) ^ (uint32_t)(x >> 31));
		return 0;
	}
	case PB_ENUM:
		if (v->type == JSON_STR) {
			for (i = 0; i < f->nenum; i++)
				if (f->enum_names[i] && !strcmp(f->enum_names[i], v->u.str.s))
					break;
			if (i == f->nenum)
				return -EINVAL;
		} else {
			i = (unsigned)num_of(v);
		}
		pb_tag(o, f->num, 0);
		pb_put_varint(o, i);
		return 0;
	case PB_MSG:
		return v->type == JSON_OBJ ? nested(o, f->num, f->msg, v, depth) : -EINVAL;
	case PB_TIMESTAMP: {
		struct tm tm = { 0 };
		uint8_t tb[16];
		struct pb_writer t = { tb, sizeof(tb), 0, 0 };
		const char *end;

		if (v->type != JSON_STR || !(end = strptime(v->u.str.s, "%Y-%m-%dT%H:%M:%S", &tm)))
			return -EINVAL;
		pb_tag(&t, 1, 0);
		pb_put_varint(&t, (uint64_t)(int64_t)timegm(&tm));
		pb_bytes(o, f->num, tb, t.len);
		return 0;
	}
	case PB_MAP: {
		const struct json *k;

		if (v->type != JSON_OBJ)
			return -EINVAL;
		for (k = v->u.kids.first; k; k = k->next) {
			uint8_t eb[8192];
			struct pb_writer e = { eb, sizeof(eb), 0, 0 };

			if (k->type != JSON_STR)
				return -EINVAL;
			pb_bytes(&e, 1, k->key, strlen(k->key));
			pb_bytes(&e, 2, k->u.str.s, k->u.str.len);
			if (e.err)
				return -E2BIG;
			pb_bytes(o, f->num, eb, e.len);
		}
		return 0;
	}
	}
	return -EINVAL;
}

static int from_json(const struct pb_msg *m, const struct json *j, struct pb_writer *o, unsigned depth)
{
	unsigned fi;

	if (depth > 8 || !j || j->type != JSON_OBJ)
		return -EINVAL;
	for (fi = 0; fi < m->n; fi++) {
		const struct pb_field *f = &m->f[fi];
		const struct json *v = json_get(j, f->json), *k;
		int r;

		if (!v || v->type == JSON_NULL)
			continue;
		if (f->repeated) {
			if (v->type != JSON_ARR)
				return -EINVAL;
			for (k = v->u.kids.first; k; k = k->next)
				if ((r = value_pb(f, k, o, depth)))
					return r;
			continue;
		}
		if ((r = value_pb(f, v, o, depth)))
			return r;
	}
	return o->err ? -E2BIG : 0;
}

long e2b_pb_from_json(const struct pb_msg *m, const struct json *j, uint8_t *out, size_t cap)
{
	struct pb_writer o = { out, cap, 0, 0 };
	int r = from_json(m, j, &o, 0);

	return r ? r : (long)o.len;
}
