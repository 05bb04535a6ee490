/* The OCI distribution API client (registry.h). */
#include "cli/images/registry.h"
#include "cli/util/util.h"
#include "vmm/wire/json.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#define MANIFEST_MAX (4u << 20)
#define ATTEMPTS 4
#define ERRBODY_MAX (64u << 10) /* an error page's body: read and dropped up to this */

struct registry {
	CURL *curl;
	struct oci_ref ref;
	struct reg_opts o;
	char base[800];     /* scheme://host/v2/REPO */
	char auth[8192];    /* "Authorization: ..." or "" */
	char basic[1024];   /* "Basic ..." from the credentials, or "" */
	char *creds;        /* the credentials file's text, or NULL */
};


static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- credentials and challenges -------------------------------------------- */

int reg_parse_challenge(const char *h, char *scheme, size_t slen, char *realm, size_t rlen, char *service,
			size_t svlen, char *scope, size_t sclen)
{
	const char *p = h;
	size_t n;

	realm[0] = service[0] = scope[0] = '\0';
	while (*p == ' ')
		p++;
	n = strcspn(p, " ");
	if (n == 0 || n >= slen)
		return -EINVAL;
	memcpy(scheme, p, n);
	scheme[n] = '\0';
	p += n;
	while (*p) {
		char key[32], val[2048];
		size_t k = 0, v = 0;

		while (*p == ' ' || *p == ',')
			p++;
		if (!*p)
			break;
		while (*p && *p != '=' && *p != ',' && k + 1 < sizeof(key))
			key[k++] = *p++;
		key[k] = '\0';
		if (*p != '=')
			return -EINVAL;
		p++;
		if (*p == '"') {
			p++;
			while (*p && *p != '"' && v + 1 < sizeof(val)) {
				if (*p == '\\' && p[1])
					p++;
				val[v++] = *p++;
			}
			if (*p != '"')
				return -EINVAL;
			p++;
		} else {
			while (*p && *p != ',' && *p != ' ' && v + 1 < sizeof(val))
				val[v++] = *p++;
		}
		val[v] = '\0';
		if (!strcasecmp(key, "realm"))
			snprintf(realm, rlen, "%s", val);
		else if (!strcasecmp(key, "service"))
			snprintf(service, svlen, "%s", val);
		else if (!strcasecmp(key, "scope"))
			snprintf(scope, sclen, "%s", val);
	}
	return 0;
}

static int b64(const char *in, size_t n, char *out, size_t len)
{
	if (4 * ((n + 2) / 3) + 1 > len)
		return -E2BIG;
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)n);
	return 0;
}

int reg_creds_lookup(const char *text, const char *registry, char *out, size_t len)
{
	char arena_buf[65536], keys[4][300];
	struct json_arena a = { arena_buf, sizeof(arena_buf), 0 };
	const struct json *root, *auths, *e;
	const char *err, *s, *u, *pw;
	size_t tl = strlen(text);
	int i;

	out[0] = '\0';
	while (tl && (text[tl - 1] == '\n' || text[tl - 1] == '\r' || text[tl - 1] == ' '))
		tl--;
	if (tl && text[0] != '{') {
		/* USER:PASSWORD */
		if (!memchr(text, ':', tl) || memchr(text, '\n', tl) || len < 7)
			return -EINVAL;
		memcpy(out, "Basic ", 6);
		return b64(text, tl, out + 6, len - 6);
	}
	if (!(root = json_parse(text, tl, &a, &err)) || !(auths = json_get(root, "auths")) || auths->type != JSON_OBJ)
		return -ENOENT;
	snprintf(keys[0], sizeof(keys[0]), "%s", registry);
	snprintf(keys[1], sizeof(keys[1]), "https://%s", registry);
	snprintf(keys[2], sizeof(keys[2]), "http://%s", registry);
	snprintf(keys[3], sizeof(keys[3]), "%s", !strcmp(registry, "docker.io") ? "https://index.docker.io/v1/" : "");
	for (i = 0; i < 4; i++) {
		if (!keys[i][0] || !(e = json_get(auths, keys[i])) || e->type != JSON_OBJ)
			continue;
		if (!json_get_str(e, "auth", &s) && *s) {
			if (strlen(s) + 7 > len)
				return -E2BIG;
			snprintf(out, len, "Basic %s", s);
			return 0;
		}
		if (!json_get_str(e, "username", &u) && !json_get_str(e, "password", &pw)) {
			char up[1024];

			if (snprintf(up, sizeof(up), "%s:%s", u, pw) >= (int)sizeof(up) || len < 7)
				return -E2BIG;
			memcpy(out, "Basic ", 6);
			return b64(up, strlen(up), out + 6, len - 6);
		}
	}
	return -ENOENT;
}

int reg_url_host(const char *url, char *out, size_t len)
{
	const char *h;
	size_t n, i;
	int https;

	if (!strncasecmp(url, "https://", 8))
		https = 1, h = url + 8;
	else if (!strncasecmp(url, "http://", 7))
		https = 0, h = url + 7;
	else
		return -EINVAL;
	n = strcspn(h, "/?#");
	if (n == 0 || n >= len || memchr(h, '@', n) || memchr(h, '\\', n))
		return -EINVAL;
	for (i = 0; i < n; i++)
		out[i] = (char)((h[i] >= 'A' && h[i] <= 'Z') ? h[i] - 'A' + 'a' : h[i]);
	out[n] = '\0';
	{
		const char *dflt = https ? ":443" : ":80";
		size_t dl = strlen(dflt);

		if (n > dl && !strcmp(out + n - dl, dflt))
			out[n - dl] = '\0';
	}
	return 0;
}

/* host[:port] as reg_url_host gives it, for the registry's names. */
static void ref_host(const char *h, int http, char *out, size_t len)
{
	char url[300];

	snprintf(url, sizeof(url), "%s://%.255s", http ? "http" : "https", h);
	if (reg_url_host(url, out, len))
		out[0] = '\0';
}

static int same_host(const struct oci_ref *ref, const char *host)
{
	char a[260], b[260];

	ref_host(ref->api_host, ref->http, a, sizeof(a));
	ref_host(ref->registry, ref->http, b, sizeof(b));
	return (a[0] && !strcmp(host, a)) || (b[0] && !strcmp(host, b)) ||
	       (!strcmp(ref->registry, "docker.io") && !strcmp(host, "auth.docker.io")); /* Docker Hub's token service */
}

int reg_challenge_host_ok(const struct oci_ref *ref, const char *url)
{
	char host[260], a[260];

	ref_host(ref->api_host, ref->http, a, sizeof(a));
	return !reg_url_host(url, host, sizeof(host)) && a[0] && !strcmp(host, a);
}

int reg_realm_creds(const char *creds_text, const struct oci_ref *ref, const char *realm, char *out, size_t len)
{
	char host[260];

	out[0] = '\0';
	if (reg_url_host(realm, host, sizeof(host)))
		return -EINVAL;
	if (!creds_text)
		return 0;
	if (same_host(ref, host)) {
		(void)reg_creds_lookup(creds_text, ref->registry, out, len);
		return 0;
	}
	/* Another host: only what the file names for that host (a one-line
	 * USER:PASSWORD names none). */
	if (creds_text[strspn(creds_text, " \t\r\n")] == '{')
		(void)reg_creds_lookup(creds_text, host, out, len);
	return 0;
}

static void load_creds(struct registry *r)
{
	char path[4096], *text = NULL;
	const char *dc = getenv("DOCKER_CONFIG"), *home = getenv("HOME");
	size_t len;

	if (r->o.creds_file)
		snprintf(path, sizeof(path), "%s", r->o.creds_file);
	else if (dc && *dc)
		snprintf(path, sizeof(path), "%s/config.json", dc);
	else if (home && *home)
		snprintf(path, sizeof(path), "%s/.docker/config.json", home);
	else
		return;
	if (oci_read_file(AT_FDCWD, path, 1 << 20, &text, &len))
		return;
	reg_creds_lookup(text, r->ref.registry, r->basic, sizeof(r->basic));
	r->creds = text;
}

/* ---- one HTTP exchange ------------------------------------------------------ */

struct xfer {
	/* into memory */
	char *mem;
	size_t len, max;
	/* into a file, hashed */
	CURL *curl;           /* whose response it is (its status) */
	size_t junk;          /* bytes of a response that is not the blob (an error page) */
	int fd;
	struct oci_hash *h;
	uint64_t have, want;  /* bytes in the file; the blob's size */
	int over;             /* more than want */
	/* progress */
	const struct reg_opts *o;
	const char *label;
	double t0, last;
	/* response headers (of the last response of a redirect chain) */
	char www[2048], ctype[128], dcd[OCI_DIGEST_MAX];
	long retry_after;
};

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n, k;
	char *dst = NULL;
	size_t cap = 0;

	if (len > 5 && !strncmp(buf, "HTTP/", 5)) {
		/* A new response (after a redirect): nothing of the one before counts. */
		x->www[0] = x->ctype[0] = x->dcd[0] = '\0';
		x->retry_after = -1;
	} else if (len > 17 && !strncasecmp(buf, "WWW-Authenticate:", 17))
		dst = x->www, cap = sizeof(x->www), k = 17;
	else if (len > 13 && !strncasecmp(buf, "Content-Type:", 13))
		dst = x->ctype, cap = sizeof(x->ctype), k = 13;
	else if (len > 22 && !strncasecmp(buf, "Docker-Content-Digest:", 22))
		dst = x->dcd, cap = sizeof(x->dcd), k = 22;
	else if (len > 12 && !strncasecmp(buf, "Retry-After:", 12))
		x->retry_after = strtol(buf + 12, NULL, 10);
	if (dst) {
		while (k < len && buf[k] == ' ')
			k++;
		snprintf(dst, cap, "%.*s", (int)strcspn(buf + k, "\r\n"), buf + k);
	}
	return len;
}

static void note(const struct reg_opts *o, enum reg_event ev, const char *label, uint64_t have, uint64_t want,
		 double secs, const char *why, long wait_s)
{
	struct reg_note n = { ev, label, have, want, secs, why, wait_s };

	if (o && o->note)
		o->note(o->note_arg, &n);
}

static void progress(struct xfer *x, int done)
{
	double t = now_s();

	if (!x->label || (!done && t - x->last < 0.25))
		return;
	x->last = t;
	note(x->o, done ? REG_EV_DONE : REG_EV_BYTES, x->label, x->have, x->want, t - x->t0, NULL, 0);
}

static size_t on_data(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;

	if (x->fd >= 0 && x->curl) {
		long st = 0;

		/* Only a 200/206 is the blob: an error page never goes into the file. */
		curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &st);
		if (st != 200 && st != 206) {
			x->junk += len;
			return x->junk > ERRBODY_MAX ? 0 : len;
		}
	}
	if (x->fd < 0) {
		if (x->len + len > x->max)
			return 0; /* too large: abort */
		memcpy(x->mem + x->len, buf, len);
		x->len += len;
		return len;
	}
	if (x->have + len > x->want) {
		x->over = 1;
		return 0;
	}
	if (write(x->fd, buf, len) != (ssize_t)len)
		return 0;
	oci_hash_update(x->h, buf, len);
	x->have += len;
	progress(x, 0);
	return len;
}

static const char *status_text(long st)
{
	switch (st) {
	case 401: return "unauthorized (credentials: ~/.docker/config.json or --creds-file)";
	case 403: return "forbidden";
	case 404: return "not found";
	case 416: return "range not satisfiable";
	case 429: return "too many requests (rate limited)";
	default: return st >= 500 ? "server error" : "unexpected answer";
	}
}

/* The token for a Bearer challenge (Docker token auth: GET realm?service=&scope=). */
static int get_token(struct registry *r, const char *www, char *err, size_t errlen)
{
	char scheme[32], realm[1024], service[512], scope[1024], url[4096], hdr[1100], basic[1024], host[260];
	char *es = NULL, *esc = NULL, *body = NULL;
	struct xfer x = { .fd = -1, .max = 1 << 20 };
	struct curl_slist *hl = NULL;
	CURL *c = NULL;
	long st = 0;
	int rc;

	if (reg_parse_challenge(www, scheme, sizeof(scheme), realm, sizeof(realm), service, sizeof(service), scope,
				sizeof(scope)))
		return cli_seterr(err, errlen, -EPROTO, "malformed WWW-Authenticate challenge");
	if (!strcasecmp(scheme, "Basic")) {
		if (!r->basic[0])
			return cli_seterr(err, errlen, -EACCES, "the registry wants a user and password "
							    "(~/.docker/config.json or --creds-file)");
		snprintf(r->auth, sizeof(r->auth), "Authorization: %s", r->basic);
		return 0;
	}
	if (strcasecmp(scheme, "Bearer") || !realm[0])
		return cli_seterr(err, errlen, -EPROTO, "unsupported auth scheme '%s'", scheme);
	if (strncmp(realm, "https://", 8) && !(r->o.insecure && !strncmp(realm, "http://", 7)))
		return cli_seterr(err, errlen, -EPROTO, "token realm %.100s is not https", realm);
	if (reg_realm_creds(r->creds, &r->ref, realm, basic, sizeof(basic)) || reg_url_host(realm, host, sizeof(host)))
		return cli_seterr(err, errlen, -EPROTO, "token realm %.100s is not a URL", realm);
	if (!scope[0])
		snprintf(scope, sizeof(scope), "repository:%s:pull", r->ref.repo);
	if (!(c = curl_easy_init()) || !(body = malloc(x.max + 1)))
		goto nomem;
	x.mem = body;
	es = curl_easy_escape(c, service, 0);
	esc = curl_easy_escape(c, scope, 0);
	if (!es || !esc)
		goto nomem;
	snprintf(url, sizeof(url), "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?", es, esc);
	if (basic[0]) {
		snprintf(hdr, sizeof(hdr), "Authorization: %s", basic);
		hl = curl_slist_append(hl, hdr);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, r->o.insecure ? "http,https" : "https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, r->o.insecure ? "http,https" : "https");
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "vmm");
	{
		const char *ca = r->o.ca_file ? r->o.ca_file : getenv("SSL_CERT_FILE");

		if (ca && *ca)
			curl_easy_setopt(c, CURLOPT_CAINFO, ca);
	}
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	if (rc != CURLE_OK || st != 200) {
		rc = cli_seterr(err, errlen, st == 401 || st == 403 ? -EACCES : -EIO, "token server %.100s: %s%s%s%s", realm,
				rc != CURLE_OK ? curl_easy_strerror(rc) : status_text(st),
				r->basic[0] && !basic[0] ? " (asked anonymously: the registry's credentials go only to "
							   "its own host, not to " : "",
				r->basic[0] && !basic[0] ? host : "", r->basic[0] && !basic[0] ? ")" : "");
		goto out;
	}
	{
		char ab[1 << 16];
		struct json_arena a = { ab, sizeof(ab), 0 };
		const struct json *j;
		const char *e, *tok;

		body[x.len] = '\0';
		if (x.len * 3 > sizeof(ab) || !(j = json_parse(body, x.len, &a, &e)) ||
		    ((json_get_str(j, "token", &tok) || !*tok) && (json_get_str(j, "access_token", &tok) || !*tok)) ||
		    strlen(tok) + 40 > sizeof(r->auth)) {
			rc = cli_seterr(err, errlen, -EPROTO, "token server %.100s: no token in its answer", realm);
			goto out;
		}
		snprintf(r->auth, sizeof(r->auth), "Authorization: Bearer %s", tok);
	}
	rc = 0;
	goto out;
nomem:
	rc = -ENOMEM;
out:
	curl_free(es);
	curl_free(esc);
	curl_slist_free_all(hl);
	if (c)
		curl_easy_cleanup(c);
	free(body);
	return rc;
}

/* Resets x for an attempt (memory: empty; file: resume from what is there). */
typedef int (*rewind_fn)(struct xfer *x, uint64_t *range_from);

/* GET url (path under base) with auth and retries; *status the last answer. */
static int request(struct registry *r, const char *path, const char *accept, struct xfer *x, rewind_fn rw,
		   long *status, char *err, size_t errlen)
{
	char url[2048], hdr_accept[600], range[64];
	const char *eff = NULL;
	int attempt, authed = 0, rc;

	snprintf(url, sizeof(url), "%s/%s", r->base, path);
	for (attempt = 0; attempt < ATTEMPTS; attempt++) {
		struct curl_slist *hl = NULL;
		uint64_t from = 0;
		long st = 0;

		if ((rc = rw(x, &from)))
			return cli_seterr(err, errlen, rc, "cache: %s", strerror(-rc));
		x->www[0] = x->ctype[0] = x->dcd[0] = '\0';
		x->retry_after = -1;
		if (accept) {
			snprintf(hdr_accept, sizeof(hdr_accept), "Accept: %s", accept);
			hl = curl_slist_append(hl, hdr_accept);
		}
		if (r->auth[0])
			hl = curl_slist_append(hl, r->auth);
		curl_easy_reset(r->curl);
		curl_easy_setopt(r->curl, CURLOPT_URL, url);
		curl_easy_setopt(r->curl, CURLOPT_HTTPHEADER, hl);
		curl_easy_setopt(r->curl, CURLOPT_WRITEFUNCTION, on_data);
		curl_easy_setopt(r->curl, CURLOPT_WRITEDATA, x);
		curl_easy_setopt(r->curl, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(r->curl, CURLOPT_HEADERDATA, x);
		curl_easy_setopt(r->curl, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(r->curl, CURLOPT_MAXREDIRS, 5L);
		curl_easy_setopt(r->curl, CURLOPT_PROTOCOLS_STR, r->o.insecure ? "http,https" : "https");
		curl_easy_setopt(r->curl, CURLOPT_REDIR_PROTOCOLS_STR, r->o.insecure ? "http,https" : "https");
		curl_easy_setopt(r->curl, CURLOPT_CONNECTTIMEOUT, 30L);
		curl_easy_setopt(r->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(r->curl, CURLOPT_LOW_SPEED_TIME, 60L);
		curl_easy_setopt(r->curl, CURLOPT_USERAGENT, "vmm");
		{
			const char *ca = r->o.ca_file ? r->o.ca_file : getenv("SSL_CERT_FILE");

			if (ca && *ca)
				curl_easy_setopt(r->curl, CURLOPT_CAINFO, ca);
		}
		if (from) {
			snprintf(range, sizeof(range), "%llu-", (unsigned long long)from);
			curl_easy_setopt(r->curl, CURLOPT_RANGE, range);
		}
		/* A Content-Length past what may come fails before the body
		 * (on_data stops a body that announces none). */
		x->junk = 0;
		x->curl = r->curl;
		curl_easy_setopt(r->curl, CURLOPT_MAXFILESIZE_LARGE,
				 (curl_off_t)(x->fd < 0 ? x->max : x->want - from > ERRBODY_MAX ? x->want - from : ERRBODY_MAX));
		rc = curl_easy_perform(r->curl);
		curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &st);
		curl_easy_getinfo(r->curl, CURLINFO_EFFECTIVE_URL, &eff);
		curl_slist_free_all(hl);
		*status = st;
		if (x->over || rc == CURLE_FILESIZE_EXCEEDED) {
			if (x->fd < 0)
				return cli_seterr(err, errlen, -EFBIG, "the document is larger than %zu bytes", x->max);
			return cli_seterr(err, errlen, -EFBIG, "the registry %s more than the descriptor's %llu bytes",
					  x->over ? "sent" : "announced", (unsigned long long)x->want);
		}
		if (rc == CURLE_WRITE_ERROR && x->fd < 0)
			return cli_seterr(err, errlen, -EFBIG, "the document is larger than %zu bytes", x->max);
		if (st == 401 && x->www[0] && !reg_challenge_host_ok(&r->ref, eff ? eff : ""))
			return cli_seterr(err, errlen, -EACCES, "%.200s (reached by a redirect) answered 401: a challenge is "
					  "taken only from the registry's own host %s", eff ? eff : "?", r->ref.api_host);
		if (st == 401 && !authed && x->www[0]) {
			authed = 1;
			if ((rc = get_token(r, x->www, err, errlen)))
				return rc;
			attempt--;
			continue;
		}
		if (rc == CURLE_OK && (st == 200 || st == 206))
			return 0;
		if (rc == CURLE_OK && st != 429 && st < 500)
			return cli_seterr(err, errlen, st == 404 ? -ENOENT : st == 401 || st == 403 ? -EACCES : -EIO,
				      "the registry answered %ld: %s", st, status_text(st));
		if (attempt + 1 < ATTEMPTS) {
			long wait = x->retry_after >= 0 && x->retry_after <= 30 ? x->retry_after : 1L << attempt;

			note(&r->o, REG_EV_RETRY, x->label ? x->label : path, x->have, x->want, now_s() - x->t0,
			     rc != CURLE_OK ? curl_easy_strerror(rc) : status_text(st), wait);
			sleep((unsigned)wait);
			continue;
		}
		if (rc != CURLE_OK)
			return cli_seterr(err, errlen, -EIO, "%s (%s)", curl_easy_strerror(rc), r->ref.api_host);
		return cli_seterr(err, errlen, st == 429 ? -EAGAIN : -EIO, "the registry answered %ld: %s", st,
			      status_text(st));
	}
	return cli_seterr(err, errlen, -EIO, "gave up");
}

/* ---- the API ---------------------------------------------------------------- */

int reg_open(struct registry **out, const struct oci_ref *ref, const struct reg_opts *o, char *err, size_t errlen)
{
	struct registry *r;

	*out = NULL;
	if (o->insecure && !ref->http)
		return cli_seterr(err, errlen, -EINVAL, "--insecure is only for an explicit http:// registry");
	if (ref->http && !o->insecure)
		return cli_seterr(err, errlen, -EINVAL, "an http:// registry needs --insecure (plain HTTP, no TLS)");
	if (curl_global_init(CURL_GLOBAL_DEFAULT))
		return cli_seterr(err, errlen, -EIO, "libcurl failed to start");
	if (!(r = calloc(1, sizeof(*r))) || !(r->curl = curl_easy_init())) {
		free(r);
		return -ENOMEM;
	}
	r->ref = *ref;
	r->o = *o;
	if (!r->o.max_blob)
		r->o.max_blob = OCI_SIZE_ABSURD;
	snprintf(r->base, sizeof(r->base), "%s://%s/v2/%s", ref->http ? "http" : "https", ref->api_host, ref->repo);
	load_creds(r);
	*out = r;
	return 0;
}

void reg_close(struct registry *r)
{
	if (!r)
		return;
	curl_easy_cleanup(r->curl);
	free(r->creds);
	free(r);
}

static int rewind_mem(struct xfer *x, uint64_t *from)
{
	x->len = 0;
	*from = 0;
	return 0;
}

int reg_manifest(struct registry *r, const char *reference, char **body, size_t *len, char *ctype, size_t ctlen,
		 char digest[OCI_DIGEST_MAX], char *err, size_t errlen)
{
	struct xfer x = { .fd = -1, .max = MANIFEST_MAX };
	char path[400];
	long st;
	int rc;

	*body = NULL;
	if (!(x.mem = malloc(MANIFEST_MAX + 1)))
		return -ENOMEM;
	snprintf(path, sizeof(path), "manifests/%s", reference);
	rc = request(r, path, MT_OCI_INDEX ", " MT_OCI_MANIFEST ", " MT_DOCKER_LIST ", " MT_DOCKER_MANIFEST, &x,
		     rewind_mem, &st, err, errlen);
	if (rc) {
		free(x.mem);
		return rc;
	}
	x.mem[x.len] = '\0';
	oci_digest_buf(x.mem, x.len, digest);
	if ((oci_digest_ok(reference) && strcmp(digest, reference)) ||
	    (!oci_digest_ok(reference) && oci_digest_ok(x.dcd) && strcmp(digest, x.dcd))) {
		rc = cli_seterr(err, errlen, -EBADMSG, "manifest digest mismatch: got %.19s..., expected %.19s...", digest,
			    oci_digest_ok(reference) ? reference : x.dcd);
		free(x.mem);
		return rc;
	}
	snprintf(ctype, ctlen, "%s", x.ctype);
	*body = x.mem;
	*len = x.len;
	return 0;
}

/* Resume from the .partial: hash what is there (or start over). */
static int rewind_file(struct xfer *x, uint64_t *from)
{
	char buf[65536];
	struct stat st;
	uint64_t left;
	ssize_t n;

	oci_hash_free(x->h);
	if (oci_hash_init(x->h))
		return -ENOMEM;
	if (fstat(x->fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size > x->want && ftruncate(x->fd, 0) < 0)
		return -errno;
	left = (uint64_t)st.st_size > x->want ? 0 : (uint64_t)st.st_size;
	if (lseek(x->fd, 0, SEEK_SET) < 0)
		return -errno;
	x->have = 0;
	while (x->have < left && (n = read(x->fd, buf, left - x->have < sizeof(buf) ? left - x->have : sizeof(buf))) > 0) {
		oci_hash_update(x->h, buf, (size_t)n);
		x->have += (uint64_t)n;
	}
	if (x->have != left || ftruncate(x->fd, (off_t)x->have) < 0 || lseek(x->fd, (off_t)x->have, SEEK_SET) < 0)
		return -EIO;
	*from = x->have;
	x->t0 = now_s();
	return 0;
}

/* The cached blob at path is the descriptor's: a regular file of ours, of
 * its size, hashed again now (a file of the right size is not enough). 0,
 * -ENOENT (not there: fetch it) or -EBADMSG (something else is there). */
static int cache_check(const char *path, const struct oci_desc *d)
{
	char got[OCI_DIGEST_MAX];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), rc;

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EBADMSG;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size != d->size) {
		close(fd);
		return -EBADMSG;
	}
	if (st.st_mode & 077)
		(void)fchmod(fd, 0600); /* from an older vmm: 0644 */
	rc = oci_digest_fd(fd, got);
	close(fd);
	return rc ? rc : strcmp(got, d->digest) ? -EBADMSG : 0;
}

int reg_blob(struct registry *r, const struct oci_desc *d, const char *cache_dir, const char *label, char *err,
	     size_t errlen)
{
	char final[4200], part[4220], lock[4220], path[200], got[OCI_DIGEST_MAX], lbl[160];
	struct oci_hash h = { NULL };
	struct xfer x = { .fd = -1 };
	int lfd = -1, rc;
	long status = 0;

	if ((rc = oci_blob_path(cache_dir, d->digest, final, sizeof(final))))
		return cli_seterr(err, errlen, rc, "bad digest");
	snprintf(part, sizeof(part), "%s.partial", final);
	snprintf(lock, sizeof(lock), "%s.lock", final);
	snprintf(lbl, sizeof(lbl), "%s %.19s", label, d->digest);
	if (d->size < 0 || (uint64_t)d->size > r->o.max_blob) {
		unlink(part); /* nothing over a cap stays, not even to resume */
		return cli_seterr(err, errlen, -EFBIG, "it claims %lld bytes, over the blob cap of %llu MiB "
				  "(--max-blob, $VMM_PULL_MAX_BLOB)", (long long)d->size,
				  (unsigned long long)(r->o.max_blob >> 20));
	}
	if (!cache_check(final, d))
		goto cached;
	lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lfd < 0)
		return cli_seterr(err, errlen, -errno, "cache %s: %s", lock, strerror(errno));
	if (flock(lfd, LOCK_EX | LOCK_NB) < 0) {
		note(&r->o, REG_EV_WAITING, lbl, 0, (uint64_t)d->size, 0, NULL, 0);
		if (flock(lfd, LOCK_EX) < 0) {
			rc = cli_seterr(err, errlen, -errno, "cache lock: %s", strerror(errno));
			goto out;
		}
	}
	rc = cache_check(final, d);
	if (!rc) {
		close(lfd);
		goto cached;
	}
	if (rc != -ENOENT) {
		/* Not the blob (changed, or not a file of ours): fetch it again. */
		if (unlink(final) < 0 && errno != ENOENT) {
			rc = cli_seterr(err, errlen, -errno, "cache %s is not the blob and cannot be removed: %s", final,
					strerror(errno));
			goto out;
		}
		note(&r->o, REG_EV_REFETCH, lbl, 0, (uint64_t)d->size, 0, NULL, 0);
	}
	x.fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (x.fd < 0 || fchmod(x.fd, 0600) < 0) {
		rc = cli_seterr(err, errlen, -errno, "cache %s: %s", part, strerror(errno));
		goto out;
	}
	x.h = &h;
	x.want = (uint64_t)d->size;
	x.o = &r->o;
	x.label = lbl;
	x.t0 = now_s();
	snprintf(path, sizeof(path), "blobs/%s", d->digest);
	rc = request(r, path, NULL, &x, rewind_file, &status, err, errlen);
	if (rc) {
		if (rc == -EBADMSG || rc == -EFBIG)
			unlink(part); /* more than the descriptor says: nothing of it is kept */
		goto out;
	}
	if (x.have != (uint64_t)d->size) {
		rc = cli_seterr(err, errlen, -EPIPE, "truncated: %llu of %lld bytes (the next pull resumes)",
			    (unsigned long long)x.have, (long long)d->size);
		goto out;
	}
	oci_hash_final(&h, got);
	if (strcmp(got, d->digest)) {
		unlink(part);
		rc = cli_seterr(err, errlen, -EBADMSG, "digest mismatch: the data is %.19s...", got);
		goto out;
	}
	if (fsync(x.fd) < 0 || rename(part, final) < 0) {
		rc = cli_seterr(err, errlen, -errno, "cache %s: %s", final, strerror(errno));
		goto out;
	}
	progress(&x, 1);
	rc = 0;
out:
	oci_hash_free(&h);
	if (x.fd >= 0)
		close(x.fd);
	if (lfd >= 0)
		close(lfd);
	return rc;
cached:
	note(&r->o, REG_EV_CACHED, lbl, (uint64_t)d->size, (uint64_t)d->size, 0, NULL, 0);
	return 0;
}
