/* The egress proxy's HTTPS side: the CA and the leaves it mints, the
 * ClientHello's server name, the upstream's response head, and the request
 * loop of an intercepted tunnel, over memory streams and over real TLS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/egress/egress_http.h"
#include "cli/egress/egress_tls.h"
#include "cli/egress/egress_tunnel.h"

static char *fake_env(const char *name, void *ctx)
{
	(void)ctx;
	return !strcmp(name, "KEY") ? strdup("sk-secret") : NULL;
}

static char *no_file(const char *path, void *ctx)
{
	(void)path;
	(void)ctx;
	return NULL;
}

static const struct eg_cred_source src = { .env = fake_env, .file = no_file };

static const char policy_text[] =
	"{\"allow\": ["
	" {\"host\": \"api.example.com\", \"path_prefix\": \"/v1\", \"methods\": [\"GET\", \"POST\"],"
	"  \"inject\": {\"header\": \"Authorization\", \"value_env\": \"KEY\", \"prefix\": \"Bearer \"}}]}";

static char *tmpdir(void)
{
	char *d = strdup("/tmp/test_egress_tls.XXXXXX");

	assert_non_null(mkdtemp(d));
	return d;
}

static void rmtree(char *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", d);
	assert_int_equal(system(cmd), 0);
	free(d);
}

static X509 *pem_cert(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *c = PEM_read_bio_X509(b, NULL, NULL, NULL);

	BIO_free(b);
	assert_non_null(c);
	return c;
}

static int verify(X509 *ca, X509 *leaf)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	int ok;

	X509_STORE_add_cert(st, ca);
	X509_STORE_CTX_init(ctx, st, leaf, NULL);
	X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
	ok = X509_verify_cert(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok;
}

/* ---- the CA and its leaves ------------------------------------------------- */

static void ca_and_leaves(void **state)
{
	char *dir = tmpdir(), path[256];
	struct egtls_ca *ca, *again;
	X509 *cacert, *leaf, *leaf2, *ip, *other;
	struct stat st;
	time_t now = time(NULL);
	int days, secs;

	(void)state;
	assert_int_equal(egtls_ca_open(&ca, dir, "vmm egress CA (test)"), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, EGTLS_CA_FILE);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_null(strstr(egtls_ca_pem(ca), "PRIVATE"));
	cacert = pem_cert(egtls_ca_pem(ca));
	assert_int_equal(X509_check_ca(cacert), 1);
	assert_int_equal(EVP_PKEY_get_bits(X509_get0_pubkey(cacert)), 256);

	leaf = egtls_leaf(ca, "api.example.com", now);
	assert_non_null(leaf);
	assert_int_equal(verify(cacert, leaf), 1);
	assert_int_equal(X509_check_host(leaf, "api.example.com", 0, 0, NULL), 1);
	assert_int_not_equal(X509_check_host(leaf, "evil.example.com", 0, 0, NULL), 1);
	assert_int_equal(X509_check_ca(leaf), 0);
	/* valid from an hour ago for EGTLS_LEAF_DAYS */
	assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(leaf), X509_get0_notAfter(leaf)), 1);
	assert_int_equal(days * 86400 + secs, EGTLS_LEAF_DAYS * 86400);
	assert_int_equal(X509_cmp_time(X509_get0_notBefore(leaf), &now), -1);
	/* cached: the same certificate for the same host, until half its life */
	leaf2 = egtls_leaf(ca, "api.example.com", now + 60);
	assert_ptr_equal(leaf, leaf2);
	X509_free(leaf2);
	leaf2 = egtls_leaf(ca, "api.example.com", now + EGTLS_LEAF_DAYS * 86400 / 2 + 60);
	assert_ptr_not_equal(leaf, leaf2);
	X509_free(leaf2);
	/* an IPv4 literal gets an IP SAN */
	ip = egtls_leaf(ca, "10.0.0.1", now);
	assert_int_equal(X509_check_ip_asc(ip, "10.0.0.1", 0), 1);
	X509_free(ip);
	/* a CA opened again is the same CA (kept in the state directory) */
	assert_int_equal(egtls_ca_open(&again, dir, "ignored"), 0);
	assert_string_equal(egtls_ca_pem(again), egtls_ca_pem(ca));
	egtls_ca_free(again);
	/* another directory: another CA, which does not vouch for these leaves */
	{
		char *d2 = tmpdir();

		assert_int_equal(egtls_ca_open(&again, d2, "other"), 0);
		other = pem_cert(egtls_ca_pem(again));
		assert_int_not_equal(verify(other, leaf), 1);
		X509_free(other);
		egtls_ca_free(again);
		rmtree(d2);
	}
	/* a key file others can read is refused */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(egtls_ca_open(&again, dir, "x"), -EPERM);
	X509_free(leaf);
	X509_free(cacert);
	egtls_ca_free(ca);
	rmtree(dir);
}

/* ---- the ClientHello ---------------------------------------------------------- */

/* A ClientHello as OpenSSL's client writes it. */
static size_t record_hello(const char *sni, const char *alpn, unsigned char *out, size_t len)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *s = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	int n;

	SSL_set_bio(s, rb, wb);
	if (sni)
		SSL_set_tlsext_host_name(s, sni);
	if (alpn)
		SSL_set_alpn_protos(s, (const unsigned char *)alpn, (unsigned)strlen(alpn));
	assert_int_equal(SSL_connect(s), -1); /* wants to read the answer */
	n = BIO_read(wb, out, (int)len);
	assert_true(n > 0);
	SSL_free(s);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

static void client_hello(void **state)
{
	/* A minimal TLS 1.2 ClientHello by hand: one suite, no compression,
	 * server_name "a.Test". Offsets: 43 session id length, 44 suites,
	 * 48 compression, 50 extensions, 52 server_name, 61 the name. */
	static const unsigned char head[] = { 0x16, 0x03, 0x01, 0x00, 0x3e, /* record, 62 bytes */
					       0x01, 0x00, 0x00, 0x3a,       /* client_hello, 58 */
					       0x03, 0x03 };                 /* then 32 bytes of random */
	static const unsigned char tail[] = {
		0x00,                                                 /* session id */
		0x00, 0x02, 0xc0, 0x2f,                               /* one suite */
		0x01, 0x00,                                           /* null compression */
		0x00, 0x0f,                                           /* extensions, 15 */
		0x00, 0x00, 0x00, 0x0b,                               /* server_name, 11 */
		0x00, 0x09, 0x00, 0x00, 0x06, 'a', '.', 'T', 'e', 's', 't',
	};
	unsigned char by_hand[sizeof(head) + 32 + sizeof(tail)];
	unsigned char rec[EG_HELLO_MAX], bad[sizeof(by_hand)];
	char sni[EG_MAX_HOST + 1];
	size_t n, i;

	(void)state;
	memcpy(by_hand, head, sizeof(head));
	memset(by_hand + sizeof(head), 0x11, 32);
	memcpy(by_hand + sizeof(head) + 32, tail, sizeof(tail));
	assert_int_equal(eg_hello_sni(by_hand, sizeof(by_hand), sni), 0);
	assert_string_equal(sni, "a.test");
	n = record_hello("api.example.com", "\x02h2\x08http/1.1", rec, sizeof(rec));
	assert_int_equal(eg_hello_sni(rec, n, sni), 0);
	assert_string_equal(sni, "api.example.com");
	/* any prefix: wait for more, never a name */
	for (i = 0; i < n; i++) {
		int r = eg_hello_sni(rec, i, sni);

		if (r != -EAGAIN)
			fail_msg("prefix of %zu bytes: %d", i, r);
	}
	n = record_hello(NULL, NULL, rec, sizeof(rec));
	assert_int_equal(eg_hello_sni(rec, n, sni), -ENOENT);

	/* malformed: each one a byte off */
#define BAD(off, val) (memcpy(bad, by_hand, sizeof(bad)), bad[off] = (val), eg_hello_sni(bad, sizeof(bad), sni))
	assert_int_equal(BAD(0, 0x17), -EINVAL);           /* application data, not a handshake */
	assert_int_equal(BAD(1, 0x02), -EINVAL);           /* not TLS */
	assert_int_equal(BAD(5, 0x02), -EINVAL);           /* server_hello */
	assert_int_equal(BAD(8, 0x3b), -EINVAL);           /* handshake longer than the record */
	assert_int_equal(BAD(8, 0x39), -EINVAL);           /* shorter: the extensions overrun */
	assert_int_equal(BAD(43, 0x21), -EINVAL);          /* session id over 32 */
	assert_int_equal(BAD(45, 0x03), -EINVAL);          /* odd cipher suites length */
	assert_int_equal(BAD(48, 0x00), -EINVAL);          /* no compression method */
	assert_int_equal(BAD(51, 0x10), -EINVAL);          /* extensions overrun */
	assert_int_equal(BAD(55, 0x0c), -EINVAL);          /* server_name overruns */
	assert_int_equal(BAD(57, 0x0a), -EINVAL);          /* its list overruns */
	assert_int_equal(BAD(58, 0x01), -EINVAL);          /* not host_name */
	assert_int_equal(BAD(61, '/'), -EINVAL);           /* not a host name */
	assert_int_equal(BAD(61, '.'), -EINVAL);
	assert_int_equal(BAD(66, 0x00), -EINVAL);          /* a NUL in the name */
	assert_int_equal(BAD(3, 0x41), -EINVAL);           /* a record over 2^14 */
	assert_int_equal(BAD(4, 0x00) == -EINVAL || BAD(4, 0x00) == -EAGAIN, 1);
#undef BAD
	/* two server_name extensions */
	{
		static const unsigned char sn[] = { 0x00, 0x00, 0x00, 0x0b, 0x00, 0x09, 0x00, 0x00, 0x06,
						    'a', '.', 't', 'e', 's', 't' };
		unsigned char two[sizeof(by_hand) + sizeof(sn)];

		memcpy(two, by_hand, sizeof(by_hand));
		memcpy(two + sizeof(by_hand), sn, sizeof(sn));
		two[4] += sizeof(sn);
		two[8] += sizeof(sn);
		two[51] += sizeof(sn);
		assert_int_equal(eg_hello_sni(two, sizeof(two), sni), -EINVAL);
		two[sizeof(by_hand) + 1] = 0x17; /* another extension after it: fine */
		assert_int_equal(eg_hello_sni(two, sizeof(two), sni), 0);
	}
}

/* ---- response heads --------------------------------------------------------- */

static void response_heads(void **state)
{
	struct eg_response r;
	char out[512];
	long n;

	(void)state;
#define RP(s) eg_parse_response(s, strlen(s), &r)
	assert_int_equal(RP("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.content_length, 5);
	assert_int_equal(r.close, 1);
	assert_int_equal(eg_response_body("GET", &r), EG_BODY_LENGTH);
	assert_int_equal(eg_response_body("HEAD", &r), EG_BODY_NONE);
	n = eg_downstream_head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n", &r, 0, out,
			       sizeof(out));
	assert_int_equal(n, strlen("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"));
	assert_memory_equal(out, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", (size_t)n);
	assert_int_equal(RP("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nKeep-Alive: 5\r\n\r\n"), 0);
	assert_int_equal(eg_response_body("GET", &r), EG_BODY_CHUNKED);
	n = eg_downstream_head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nKeep-Alive: 5\r\n\r\n", &r, 1,
			       out, sizeof(out));
	out[n] = '\0';
	assert_string_equal(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n");
	assert_int_equal(RP("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), 0);
	assert_int_equal(eg_response_body("GET", &r), EG_BODY_CLOSE);
	assert_int_equal(RP("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"), 0);
	assert_int_equal(eg_response_body("GET", &r), EG_BODY_CHUNKED);
	assert_int_equal(r.close, 1);
	assert_int_equal(RP("HTTP/1.0 200 OK\r\n\r\n"), 0);
	assert_int_equal(eg_response_body("GET", &r), EG_BODY_CLOSE);
	assert_int_equal(RP("HTTP/1.1 204 No Content\r\n\r\n"), 0);
	assert_int_equal(eg_response_body("GET", &r), EG_BODY_NONE);
	assert_int_equal(RP("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"), -EAGAIN);
	assert_int_equal(RP("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), -EINVAL);
	assert_int_equal(RP("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), -EINVAL);
	assert_int_equal(RP("HTTP/1.1 20 OK\r\n\r\n"), -EINVAL);
	assert_int_equal(RP("HTTP/2 200 OK\r\n\r\n"), -EINVAL);
	assert_int_equal(RP("HTTP/1.1 200 OK\r\n folded: x\r\n\r\n"), -EINVAL);
	assert_int_equal(RP("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n"), -EINVAL);
#undef RP
}

/* ---- the request loop --------------------------------------------------------- */

/* The guest: its bytes, handed out `step` at a time; what it got back. */
struct fake_guest {
	const char *in;
	size_t len, off, step;
	char out[65536];
	size_t out_len;
};

static long guest_read(void *ctx, char *buf, size_t len)
{
	struct fake_guest *g = ctx;
	size_t n = g->len - g->off;

	n = n < g->step ? n : g->step;
	n = n < len ? n : len;
	memcpy(buf, g->in + g->off, n);
	g->off += n;
	return (long)n;
}

static int guest_write(void *ctx, const char *buf, size_t len)
{
	struct fake_guest *g = ctx;

	assert_true(len <= sizeof(g->out) - g->out_len);
	memcpy(g->out + g->out_len, buf, len);
	g->out_len += len;
	return 0;
}

/* The upstream: records requests, answers each with a canned response. */
struct fake_up {
	char got[16384];
	size_t got_len;
	const char *resp;
	size_t resp_off;
	unsigned opened;
	unsigned reused, kept; /* connections handed back again; kept: one is kept now */
	int dead_kept;         /* a kept connection turns out closed: 1 at the first read, 2 at the first write */
	int dead;              /* the current connection is */
	const struct eg_rule *rule; /* the current connection's (as the proxy, reused only for the same rule) */
	struct eg_logrec logs[16];
	char paths[16][64];
	unsigned nr_logs;
};

static long up_read(void *ctx, char *buf, size_t len)
{
	struct fake_up *u = ctx;
	size_t n = strlen(u->resp) - u->resp_off;

	if (u->dead)
		return 0;
	n = n < len ? n : len;
	n = n < 10 ? n : 10;
	memcpy(buf, u->resp + u->resp_off, n);
	u->resp_off += n;
	return (long)n;
}

static int up_write(void *ctx, const char *buf, size_t len)
{
	struct fake_up *u = ctx;

	if (u->dead == 2)
		return -EPIPE;
	assert_true(len <= sizeof(u->got) - u->got_len);
	memcpy(u->got + u->got_len, buf, len);
	u->got_len += len;
	return 0;
}

static int up_open(void *ctx, const struct eg_rule *rule, const struct eg_request *r, int fresh,
		   struct eg_stream *s, int *reused, const char **why)
{
	struct fake_up *u = ctx;

	(void)r;
	(void)why;
	if (u->kept && !fresh && rule == u->rule) {
		/* the same connection: what is left of the last response, or
		 * the next one */
		*reused = 1;
		u->reused++;
		u->dead = u->dead_kept;
		if (u->resp_off == strlen(u->resp))
			u->resp_off = 0;
	} else {
		u->opened++;
		u->dead = 0;
		u->resp_off = 0;
	}
	u->kept = 0;
	u->rule = rule;
	s->read = up_read;
	s->write = up_write;
	s->ctx = u;
	return 0;
}

static void up_close(void *ctx, struct eg_stream *s, int keep)
{
	struct fake_up *u = ctx;

	(void)s;
	u->kept = keep;
}

static void up_log(void *ctx, const struct eg_logrec *l)
{
	struct fake_up *u = ctx;

	assert_true(u->nr_logs < 16);
	u->logs[u->nr_logs] = *l;
	snprintf(u->paths[u->nr_logs], 64, "%.*s", (int)l->path_len, l->path);
	u->logs[u->nr_logs].path = u->paths[u->nr_logs];
	u->nr_logs++;
}

static size_t count(const char *hay, size_t n, const char *needle)
{
	size_t k = 0;
	const char *p = hay;

	while ((p = memmem(p, n - (size_t)(p - hay), needle, strlen(needle)))) {
		k++;
		p++;
	}
	return k;
}

static unsigned run_loop(struct eg_policy *p, struct fake_guest *g, struct fake_up *u)
{
	struct eg_tunnel t = {
		.policy = p, .host = "api.example.com", .port = 443,
		.guest = { .read = guest_read, .write = guest_write, .ctx = g },
		.open = up_open, .close = up_close, .log = up_log, .ctx = u,
	};

	return eg_tunnel_serve(&t);
}

static void tunnel_loop(void **state)
{
	/* four requests in a row, one refused; the guest's Authorization is
	 * replaced by the credential */
	static const char reqs[] =
		"GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer fake\r\n\r\n"
		"GET /admin HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
		"POST /v1/b HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 5\r\n\r\nhello"
		"GET /v1/c?secret=1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
	struct fake_guest *g = calloc(1, sizeof(*g));
	struct fake_up *u = calloc(1, sizeof(*u));
	struct eg_policy p;
	char why[256];
	size_t step;

	(void)state;
	assert_int_equal(eg_policy_parse(policy_text, strlen(policy_text), &src, &p, why, sizeof(why)), 0);
	for (step = 1; step <= sizeof(reqs); step += step < 8 ? 1 : 97) {
		memset(g, 0, sizeof(*g));
		memset(u, 0, sizeof(*u));
		g->in = reqs;
		g->len = sizeof(reqs) - 1;
		g->step = step;
		u->resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
		assert_int_equal(run_loop(&p, g, u), 4);
		assert_int_equal(u->opened, 3);
		assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 3);
		assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 403 Forbidden"), 1);
		assert_int_equal(count(g->out, g->out_len, "path not allowed"), 2);
		assert_int_equal(count(g->out, g->out_len, "Connection: close"), 0); /* keep-alive */
		assert_int_equal(count(u->got, u->got_len, "Authorization: Bearer sk-secret\r\n"), 3);
		assert_int_equal(count(u->got, u->got_len, "fake"), 0);
		assert_int_equal(count(u->got, u->got_len, "POST /v1/b HTTP/1.1\r\nHost: api.example.com\r\n"
					"Content-Length: 5\r\nAuthorization: Bearer sk-secret\r\n\r\nhello"),
				 1);
		/* kept alive upstream too; the upstream's close is honoured */
		assert_int_equal(count(u->got, u->got_len, "Connection"), 0);
		assert_int_equal(u->reused, 0);
		assert_int_equal(count(g->out, g->out_len, "sk-secret"), 0);
		assert_int_equal(u->nr_logs, 4);
		assert_string_equal(u->paths[1], "/admin");
		assert_int_equal(u->logs[1].status, 403);
		assert_int_equal(u->logs[1].injected, 0);
		assert_int_equal(u->logs[1].rule, -1);
		assert_int_equal(u->logs[2].status, 200);
		assert_int_equal(u->logs[2].bytes_up, 5);
		assert_int_equal(u->logs[2].injected, 1);
		assert_string_equal(u->paths[3], "/v1/c");
		assert_string_equal(u->logs[3].tls, "intercept");
	}
	/* a refused request with a body ends the tunnel (the body is not read) */
	memset(g, 0, sizeof(*g));
	memset(u, 0, sizeof(*u));
	g->in = "POST /admin HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 3\r\n\r\nabc"
		"GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
	g->len = strlen(g->in);
	g->step = 4096;
	u->resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	assert_int_equal(run_loop(&p, g, u), 1);
	assert_int_equal(u->opened, 0);
	assert_int_equal(count(g->out, g->out_len, "Connection: close"), 1);
	/* a bad request: 400, and the end */
	memset(g, 0, sizeof(*g));
	memset(u, 0, sizeof(*u));
	g->in = "GET /v1/a HTTP/1.1\r\nHost: evil.com\r\n\r\n";
	g->len = strlen(g->in);
	g->step = 4096;
	assert_int_equal(run_loop(&p, g, u), 1);
	assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 400 Bad Request"), 1);
	/* responses: chunked relayed as it is framed; none (close-delimited):
	 * the tunnel ends with it */
	memset(g, 0, sizeof(*g));
	memset(u, 0, sizeof(*u));
	g->in = "GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n\r\nGET /v1/b HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
	g->len = strlen(g->in);
	g->step = 4096;
	u->resp = "HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		  "2\r\nok\r\n0\r\n\r\nTRAILING-GARBAGE";
	assert_int_equal(run_loop(&p, g, u), 2);
	assert_int_equal(count(g->out, g->out_len, "TRAILING"), 0);
	assert_int_equal(count(g->out, g->out_len, "103 Early Hints"), 2);
	memset(g, 0, sizeof(*g));
	memset(u, 0, sizeof(*u));
	g->in = "GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n\r\nGET /v1/b HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
	g->len = strlen(g->in);
	g->step = 4096;
	u->resp = "HTTP/1.1 200 OK\r\n\r\nuntil the end";
	assert_int_equal(run_loop(&p, g, u), 1);
	assert_int_equal(count(g->out, g->out_len, "Connection: close\r\n\r\nuntil the end"), 1);
	eg_policy_free(&p);
	free(g);
	free(u);
}

/* The upstream connection kept for the tunnel's next request: reused
 * while the responses are framed and the upstream keeps it; not after a
 * response with bytes past its end; a kept connection found closed gets a
 * bodyless request sent again on a new one, but not a request whose body
 * it took. */
static void run_ka(struct eg_policy *p, struct fake_guest *g, struct fake_up *u, const char *in, const char *resp,
		   int dead_kept, unsigned served)
{
	memset(g, 0, sizeof(*g));
	memset(u, 0, sizeof(*u));
	g->in = in;
	g->len = strlen(in);
	g->step = 4096;
	u->resp = resp;
	u->dead_kept = dead_kept;
	assert_int_equal(run_loop(p, g, u), served);
}

static void tunnel_keepalive(void **state)
{
	static const char three[] = "GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
				    "POST /v1/b HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 5\r\n\r\nhello"
				    "GET /v1/c HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct fake_guest *g = calloc(1, sizeof(*g));
	struct fake_up *u = calloc(1, sizeof(*u));
	struct eg_policy p;
	char why[256];

	(void)state;
	assert_int_equal(eg_policy_parse(policy_text, strlen(policy_text), &src, &p, why, sizeof(why)), 0);
	/* one connection for all three, the credential on each request */
	run_ka(&p, g, u, three, ok, 0, 3);
	assert_int_equal(u->opened, 1);
	assert_int_equal(u->reused, 2);
	assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 3);
	assert_int_equal(count(u->got, u->got_len, "Authorization: Bearer sk-secret\r\n"), 3);
	assert_int_equal(count(u->got, u->got_len, "hello"), 1);
	/* chunked: kept too */
	run_ka(&p, g, u, three, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 0, 3);
	assert_int_equal(u->opened, 1);
	/* not after a chunked request body (relayed as the guest framed it) */
	run_ka(&p, g, u, "POST /v1/b HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
			 "5\r\nhello\r\n0\r\n\r\nGET /v1/c HTTP/1.1\r\nHost: api.example.com\r\n\r\n", ok, 0, 2);
	assert_int_equal(u->opened, 2);
	assert_int_equal(u->reused, 0);
	/* bytes after the framed body: that connection is not used again */
	run_ka(&p, g, u, three, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nokJUNK", 0, 3);
	assert_int_equal(u->opened, 3);
	assert_int_equal(u->reused, 0);
	assert_int_equal(count(g->out, g->out_len, "JUNK"), 0);
	/* an HTTP/1.0 answer, or Connection: close: not kept */
	run_ka(&p, g, u, three, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, 3);
	assert_int_equal(u->opened, 3);
	/* a kept connection that is closed when read: the GETs go again on a
	 * new one (the guest sees one answer each); the POST, whose body it
	 * took, gets a 502 and the tunnel ends */
	run_ka(&p, g, u, "GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
			 "GET /v1/c HTTP/1.1\r\nHost: api.example.com\r\n\r\n", ok, 1, 2);
	assert_int_equal(u->opened, 2);
	assert_int_equal(u->reused, 1);
	assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 200 OK"), 2);
	assert_int_equal(count(u->got, u->got_len, "GET /v1/c "), 2);
	assert_int_equal(u->logs[1].status, 200);
	run_ka(&p, g, u, three, ok, 1, 2);
	assert_int_equal(u->opened, 1);
	assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 200 OK"), 1);
	assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 502 Bad Gateway"), 1);
	assert_int_equal(u->logs[1].status, 502);
	/* one whose write fails: any request goes again, body and all */
	run_ka(&p, g, u, three, ok, 2, 3);
	assert_int_equal(u->opened, 3);
	assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 200 OK"), 3);
	assert_int_equal(count(u->got, u->got_len, "hello"), 1);
	eg_policy_free(&p);
	free(g);
	free(u);
}

/* A policy changed while a tunnel is open: each request is matched
 * against the policy in force when it starts (hold), released after it
 * (unhold); the first request here gets the old policy, the next ones the
 * new one, with its own credential. */
struct swap_ctx {
	struct fake_up u; /* first: the fake upstream's callbacks take ctx as it */
	const struct eg_policy *seq[2];
	unsigned holds, unholds;
	const struct eg_policy *held;
};

static const struct eg_policy *swap_hold(void *ctx, uint64_t *version)
{
	struct swap_ctx *s = ctx;

	assert_null(s->held); /* one request at a time, released before the next */
	s->held = s->seq[s->holds ? 1 : 0];
	*version = s->holds ? 2 : 1;
	s->holds++;
	return s->held;
}

static void swap_unhold(void *ctx, const struct eg_policy *p)
{
	struct swap_ctx *s = ctx;

	assert_ptr_equal(p, s->held);
	s->held = NULL;
	s->unholds++;
}

static char *fake_env2(const char *name, void *ctx)
{
	(void)ctx;
	return !strcmp(name, "KEY2") ? strdup("sk-second") : NULL;
}

static void tunnel_policy_swap(void **state)
{
	static const char v2[] =
		"{\"allow\": [{\"host\": \"api.example.com\", \"path_prefix\": \"/v2\","
		"  \"inject\": {\"header\": \"X-Key\", \"value_env\": \"KEY2\"}}]}";
	static const char reqs[] =
		"GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
		"GET /v1/b HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
		"GET /v2/c HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
	const struct eg_cred_source src2 = { .env = fake_env2, .file = no_file };
	struct fake_guest *g = calloc(1, sizeof(*g));
	struct swap_ctx *s = calloc(1, sizeof(*s));
	struct eg_policy p1, p2;
	char why[256];
	struct eg_tunnel t = {
		.hold = swap_hold, .unhold = swap_unhold, .host = "api.example.com", .port = 443,
		.guest = { .read = guest_read, .write = guest_write, .ctx = g },
		.open = up_open, .close = up_close, .log = up_log, .ctx = s,
	};

	(void)state;
	assert_int_equal(eg_policy_parse(policy_text, strlen(policy_text), &src, &p1, why, sizeof(why)), 0);
	assert_int_equal(eg_policy_parse(v2, strlen(v2), &src2, &p2, why, sizeof(why)), 0);
	s->seq[0] = &p1;
	s->seq[1] = &p2;
	g->in = reqs;
	g->len = sizeof(reqs) - 1;
	g->step = 4096;
	s->u.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	assert_int_equal(eg_tunnel_serve(&t), 3);
	assert_int_equal(s->holds, 3);
	assert_int_equal(s->unholds, 3);
	/* /v1/a under the old policy; /v1/b refused by the new one, in the
	 * tunnel, which goes on; /v2/c with the new credential */
	assert_int_equal(s->u.opened, 2);
	assert_int_equal(count(g->out, g->out_len, "HTTP/1.1 403 Forbidden"), 1);
	assert_int_equal(count(s->u.got, s->u.got_len, "GET /v1/a HTTP/1.1\r\n"), 1);
	assert_int_equal(count(s->u.got, s->u.got_len, "Authorization: Bearer sk-secret\r\n"), 1);
	assert_int_equal(count(s->u.got, s->u.got_len, "GET /v2/c HTTP/1.1\r\n"), 1);
	assert_int_equal(count(s->u.got, s->u.got_len, "X-Key: sk-second\r\n"), 1);
	assert_int_equal(s->u.nr_logs, 3);
	assert_int_equal(s->u.logs[0].version, 1);
	assert_int_equal(s->u.logs[1].version, 2);
	assert_int_equal(s->u.logs[1].status, 403);
	assert_int_equal(s->u.logs[2].version, 2);
	assert_int_equal(s->u.logs[2].injected, 1);
	eg_policy_free(&p1);
	eg_policy_free(&p2);
	free(g);
	free(s);
}

/* ---- the same over real TLS: the guest's client trusts the CA -------------------- */

struct server {
	struct egtls_ca *ca;
	struct eg_policy *p;
	struct fake_up *u;
	int fd;
	unsigned served;
	const char *why;
};

static void *serve_tls(void *arg)
{
	struct server *sv = arg;
	SSL *s = egtls_accept(sv->ca, sv->fd, "api.example.com", &sv->why);
	struct eg_tunnel t = {
		.policy = sv->p, .host = "api.example.com", .port = 443,
		.open = up_open, .close = up_close, .log = up_log, .ctx = sv->u,
	};

	if (s) {
		egtls_stream(s, &t.guest);
		sv->served = eg_tunnel_serve(&t);
		SSL_shutdown(s);
		SSL_free(s);
	}
	close(sv->fd);
	return NULL;
}

/* A TLS client on fd trusting ca_pem: what the server answered to req, or
 * NULL if the handshake failed. */
static char *tls_client(int fd, const char *ca_pem, const char *sni, const char *alpn, const char *req)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	X509 *ca = pem_cert(ca_pem);
	static char buf[8192];
	size_t got = 0;
	SSL *s;
	int n;

	X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
	X509_free(ca);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	s = SSL_new(ctx);
	SSL_set_fd(s, fd);
	SSL_set_tlsext_host_name(s, sni);
	SSL_set1_host(s, sni);
	SSL_set_alpn_protos(s, (const unsigned char *)alpn, (unsigned)strlen(alpn));
	if (SSL_connect(s) != 1) {
		ERR_clear_error();
		SSL_free(s);
		SSL_CTX_free(ctx);
		return NULL;
	}
	assert_int_equal(SSL_write(s, req, (int)strlen(req)), (int)strlen(req));
	while ((n = SSL_read(s, buf + got, (int)(sizeof(buf) - 1 - got))) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	SSL_free(s);
	SSL_CTX_free(ctx);
	return buf;
}

static char *through_tls(struct server *sv, const char *ca_pem, const char *sni, const char *alpn, const char *req)
{
	int sp[2];
	pthread_t th;
	char *r;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	sv->fd = sp[1];
	sv->served = 0;
	assert_int_equal(pthread_create(&th, NULL, serve_tls, sv), 0);
	r = tls_client(sp[0], ca_pem, sni, alpn, req);
	close(sp[0]);
	pthread_join(th, NULL);
	return r;
}

/* A TLS 1.2 client that asks to renegotiate once the tunnel is up: 1 if
 * the second handshake completed. */
static void *reneg_client(void *arg)
{
	struct server *sv = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	X509 *ca = pem_cert(egtls_ca_pem(sv->ca));
	struct timeval tv = { .tv_sec = 10 };
	long done;
	SSL *s;

	X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
	X509_free(ca);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	s = SSL_new(ctx);
	setsockopt(sv->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)); /* no hang if the server kept silent */
	SSL_set_fd(s, sv->fd);
	SSL_set_tlsext_host_name(s, "api.example.com");
	SSL_set_alpn_protos(s, (const unsigned char *)"\x08http/1.1", 9);
	done = SSL_connect(s) == 1 && SSL_renegotiate(s) == 1 && SSL_do_handshake(s) == 1;
	ERR_clear_error();
	SSL_free(s);
	SSL_CTX_free(ctx);
	return (void *)done;
}

/* Renegotiation (TLS 1.2; 1.3 has none) is refused: the client's second
 * handshake never completes, the tunnel serves nothing and ends. */
static void tunnel_no_renegotiation(void **state)
{
	char *dir = tmpdir(), why[256];
	struct fake_up *u = calloc(1, sizeof(*u));
	struct server sv, cl;
	struct egtls_ca *ca;
	struct eg_policy p;
	pthread_t th, tc;
	void *done;
	int sp[2];

	(void)state;
	assert_int_equal(eg_policy_parse(policy_text, strlen(policy_text), &src, &p, why, sizeof(why)), 0);
	assert_int_equal(egtls_ca_open(&ca, dir, "test"), 0);
	u->resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	sv = (struct server){ .ca = ca, .p = &p, .u = u };
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	sv.fd = sp[1];
	cl = (struct server){ .ca = ca, .fd = sp[0] };
	assert_int_equal(pthread_create(&th, NULL, serve_tls, &sv), 0);
	assert_int_equal(pthread_create(&tc, NULL, reneg_client, &cl), 0);
	pthread_join(tc, &done);
	close(sp[0]);
	pthread_join(th, NULL);
	assert_null(done);
	assert_int_equal(sv.served, 0);
	assert_int_equal(u->opened, 0);
	egtls_ca_free(ca);
	eg_policy_free(&p);
	free(u);
	rmtree(dir);
}

static void tunnel_over_tls(void **state)
{
	char *dir = tmpdir(), *dir2 = tmpdir(), why[256], *r;
	struct fake_up *u = calloc(1, sizeof(*u));
	struct egtls_ca *ca, *other;
	struct eg_policy p;
	struct server sv;

	(void)state;
	assert_int_equal(eg_policy_parse(policy_text, strlen(policy_text), &src, &p, why, sizeof(why)), 0);
	assert_int_equal(egtls_ca_open(&ca, dir, "test"), 0);
	assert_int_equal(egtls_ca_open(&other, dir2, "other"), 0);
	sv = (struct server){ .ca = ca, .p = &p, .u = u };
	u->resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	r = through_tls(&sv, egtls_ca_pem(ca), "api.example.com", "\x02h2\x08http/1.1",
			"GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
			"GET /nope HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
			"GET /v1/b HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n");
	assert_non_null(r);
	assert_int_equal(sv.served, 3);
	assert_int_equal(count(r, strlen(r), "HTTP/1.1 200 OK"), 2);
	assert_int_equal(count(r, strlen(r), "HTTP/1.1 403 Forbidden"), 1);
	assert_int_equal(count(u->got, u->got_len, "Authorization: Bearer sk-secret\r\n"), 2);
	/* a client that trusts another CA, names another host or speaks h2 only */
	assert_null(through_tls(&sv, egtls_ca_pem(other), "api.example.com", "\x08http/1.1", "GET / HTTP/1.1\r\n\r\n"));
	assert_non_null(sv.why);
	assert_null(through_tls(&sv, egtls_ca_pem(ca), "evil.example.com", "\x08http/1.1", "GET / HTTP/1.1\r\n\r\n"));
	assert_string_equal(sv.why, "the ClientHello names another host than the CONNECT");
	assert_null(through_tls(&sv, egtls_ca_pem(ca), "api.example.com", "\x02h2", "GET / HTTP/1.1\r\n\r\n"));
	assert_non_null(strstr(sv.why, "HTTP/2-only"));
	egtls_ca_free(ca);
	egtls_ca_free(other);
	eg_policy_free(&p);
	free(u);
	rmtree(dir);
	rmtree(dir2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ca_and_leaves),  cmocka_unit_test(client_hello),    cmocka_unit_test(response_heads),
		cmocka_unit_test(tunnel_loop),
		cmocka_unit_test(tunnel_keepalive),
		cmocka_unit_test(tunnel_policy_swap),
		cmocka_unit_test(tunnel_over_tls),
		cmocka_unit_test(tunnel_no_renegotiation),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
