/* The egress proxy's TLS interception: see egress_tls.h. */
#include "cli/egress/egress_tls.h"
#include "vmm/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct leaf {
	char host[EG_MAX_HOST + 1];
	X509 *cert;
	time_t not_after;
	uint64_t used;
};

struct egtls_ca {
	EVP_PKEY *key;       /* the CA's */
	X509 *cert;
	char *pem;           /* cert as PEM */
	EVP_PKEY *leaf_key;  /* every leaf's, in memory only */
	SSL_CTX *server;     /* the guest-facing side */
	pthread_mutex_t lock;
	struct leaf cache[EGTLS_CACHE];
	uint64_t tick;
};

static EVP_PKEY *new_p256(void)
{
	return EVP_EC_gen("P-256");
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ex;
	int r;

	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
	ex = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (!ex)
		return -1;
	r = X509_add_ext(cert, ex, -1) == 1 ? 0 : -1;
	X509_EXTENSION_free(ex);
	return r;
}

/* A certificate for key, signed by (issuer, ikey) or self-signed. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *ikey, time_t from, long secs)
{
	X509 *c = X509_new();
	X509_NAME *name = X509_NAME_new();
	unsigned char serial[16];
	BIGNUM *bn = NULL;

	if (!c || !name || RAND_bytes(serial, sizeof(serial)) != 1)
		goto fail;
	serial[0] &= 0x7f; /* positive (RFC 5280 section 4.1.2.2) */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) || X509_set_version(c, 2) != 1 ||
	    !X509_time_adj_ex(X509_getm_notBefore(c), 0, 0, &from) ||
	    !X509_time_adj_ex(X509_getm_notAfter(c), 0, secs, &from) || X509_set_pubkey(c, key) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) != 1 ||
	    X509_set_subject_name(c, name) != 1 ||
	    X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name) != 1)
		goto fail;
	if (add_ext(c, issuer ? issuer : c, NID_subject_key_identifier, "hash"))
		goto fail;
	if (!issuer) {
		if (add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
		    add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign"))
			goto fail;
	} else {
		char san[EG_MAX_HOST + 8];
		struct in_addr a;

		snprintf(san, sizeof(san), "%s:%s", inet_pton(AF_INET, cn, &a) == 1 ? "IP" : "DNS", cn);
		if (add_ext(c, issuer, NID_authority_key_identifier, "keyid:always") ||
		    add_ext(c, issuer, NID_basic_constraints, "critical,CA:FALSE") ||
		    add_ext(c, issuer, NID_key_usage, "critical,digitalSignature") ||
		    add_ext(c, issuer, NID_ext_key_usage, "serverAuth") ||
		    add_ext(c, issuer, NID_subject_alt_name, san))
			goto fail;
	}
	if (!X509_sign(c, issuer ? ikey : key, EVP_sha256()))
		goto fail;
	BN_free(bn);
	X509_NAME_free(name);
	return c;
fail:
	BN_free(bn);
	X509_NAME_free(name);
	X509_free(c);
	return NULL;
}

/* Writes a new CA to path, atomically: a private temporary file linked
 * into place, so two sandboxes sharing a host CA agree on one. */
static int create_ca(const char *dir, const char *path, const char *cn)
{
	char tmp[4096];
	EVP_PKEY *key = new_p256();
	X509 *cert = key ? make_cert(key, cn, NULL, NULL, time(NULL) - 86400, 3650L * 86400) : NULL;
	FILE *f = NULL;
	int fd = -1, r = -EIO;

	if (!cert)
		goto out;
	snprintf(tmp, sizeof(tmp), "%s/.egress-ca.%d.%lx", dir, getpid(), (unsigned long)pthread_self());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		r = -errno;
		goto out;
	}
	fd = -1;
	if (PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) != 1 || PEM_write_X509(f, cert) != 1 ||
	    fflush(f) || fsync(fileno(f))) {
		r = -EIO;
		goto out_unlink;
	}
	/* link fails if another process made one first: that one wins */
	r = link(tmp, path) < 0 && errno != EEXIST ? -errno : 0;
out_unlink:
	unlink(tmp);
out:
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	X509_free(cert);
	EVP_PKEY_free(key);
	return r;
}

static int load_ca(struct egtls_ca *ca, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	BIO *mem = NULL;
	FILE *f;
	char *p;
	long n;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) || st.st_uid != geteuid()) {
		log_err("egress: %s must be a file of this user's, mode 0600", path);
		close(fd);
		return -EPERM;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	ca->cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (!ca->key || !ca->cert || X509_check_private_key(ca->cert, ca->key) != 1) {
		log_err("egress: %s does not hold a CA key and its certificate", path);
		return -EINVAL;
	}
	mem = BIO_new(BIO_s_mem());
	if (!mem || PEM_write_bio_X509(mem, ca->cert) != 1 || (n = BIO_get_mem_data(mem, &p)) <= 0 ||
	    !(ca->pem = strndup(p, (size_t)n))) {
		BIO_free(mem);
		return -ENOMEM;
	}
	BIO_free(mem);
	return 0;
}

/* ALPN (RFC 7301): http/1.1 or nothing. A client that offers only h2
 * gets no_application_protocol: it cannot speak what the proxy reads. */
static int alpn_cb(SSL *s, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		   unsigned inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *o;

	(void)s;
	(void)arg;
	if (SSL_select_next_proto(&o, outlen, h11, sizeof(h11) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = o;
	return SSL_TLSEXT_ERR_OK;
}

/* The ClientHello's server_name, if any, must be the CONNECT's host. */
static int hello_cb(SSL *s, int *al, void *arg)
{
	const char *want = SSL_get_app_data(s);
	const unsigned char *p;
	char sni[EG_MAX_HOST + 1];
	size_t n;

	(void)arg;
	if (SSL_client_hello_get0_ext(s, TLSEXT_TYPE_server_name, &p, &n) &&
	    (eg_sni_ext(p, n, sni) || strcmp(sni, want))) {
		*al = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_CLIENT_HELLO_ERROR;
	}
	return SSL_CLIENT_HELLO_SUCCESS;
}

int egtls_ca_open(struct egtls_ca **out, const char *dir, const char *cn)
{
	struct egtls_ca *ca = calloc(1, sizeof(*ca));
	char path[4096];
	int r;

	*out = NULL;
	if (!ca)
		return -ENOMEM;
	pthread_mutex_init(&ca->lock, NULL);
	if (snprintf(path, sizeof(path), "%s/%s", dir, EGTLS_CA_FILE) >= (int)sizeof(path)) {
		r = -ENAMETOOLONG;
		goto fail;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		log_err("egress: %s: %s", dir, strerror(errno));
		goto fail;
	}
	if (access(path, F_OK) < 0 && (r = create_ca(dir, path, cn))) {
		log_err("egress: cannot make the CA in %s: %s", dir, strerror(-r));
		goto fail;
	}
	r = load_ca(ca, path);
	if (r)
		goto fail;
	ca->leaf_key = new_p256();
	ca->server = SSL_CTX_new(TLS_server_method());
	if (!ca->leaf_key || !ca->server) {
		r = -ENOMEM;
		goto fail;
	}
	SSL_CTX_set_min_proto_version(ca->server, TLS1_2_VERSION);
	/* No renegotiation (TLS 1.2; 1.3 has none), no session tickets:
	 * every tunnel is one full handshake with a checked name. */
	SSL_CTX_set_options(ca->server, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(ca->server, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_alpn_select_cb(ca->server, alpn_cb, NULL);
	SSL_CTX_set_client_hello_cb(ca->server, hello_cb, NULL);
	*out = ca;
	return 0;
fail:
	egtls_ca_free(ca);
	return r;
}

void egtls_ca_free(struct egtls_ca *ca)
{
	unsigned i;

	if (!ca)
		return;
	for (i = 0; i < EGTLS_CACHE; i++)
		X509_free(ca->cache[i].cert);
	SSL_CTX_free(ca->server);
	EVP_PKEY_free(ca->leaf_key);
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	free(ca->pem);
	pthread_mutex_destroy(&ca->lock);
	free(ca);
}

const char *egtls_ca_pem(const struct egtls_ca *ca)
{
	return ca->pem;
}

EVP_PKEY *egtls_leaf_key(const struct egtls_ca *ca)
{
	return ca->leaf_key;
}

X509 *egtls_leaf(struct egtls_ca *ca, const char *host, time_t now)
{
	const long life = EGTLS_LEAF_DAYS * 86400L;
	struct leaf *slot = NULL;
	X509 *c = NULL;
	unsigned i;

	pthread_mutex_lock(&ca->lock);
	ca->tick++;
	for (i = 0; i < EGTLS_CACHE; i++) {
		struct leaf *l = &ca->cache[i];

		if (l->cert && !strcmp(l->host, host)) {
			slot = l;
			if (l->not_after - now > life / 2) {
				c = l->cert;
				goto hit;
			}
			break;
		}
		if (!slot || (slot->cert && (!l->cert || l->used < slot->used)))
			slot = l; /* an empty one, else the least recently used */
	}
	c = make_cert(ca->leaf_key, host, ca->cert, ca->key, now - 3600, life);
	if (!c)
		goto out;
	X509_free(slot->cert);
	snprintf(slot->host, sizeof(slot->host), "%s", host);
	slot->cert = c;
	slot->not_after = now - 3600 + life;
hit:
	slot->used = ca->tick;
	X509_up_ref(c);
out:
	pthread_mutex_unlock(&ca->lock);
	return c;
}

SSL *egtls_accept(struct egtls_ca *ca, int fd, const char *host, const char **why)
{
	X509 *leaf = egtls_leaf(ca, host, time(NULL));
	SSL *s = leaf ? SSL_new(ca->server) : NULL;
	int ok;

	*why = NULL;
	if (!s) {
		*why = "cannot make a certificate for the host";
		goto fail;
	}
	/* host outlives s: it is the connection's */
	SSL_set_app_data(s, (void *)host);
	if (SSL_use_certificate(s, leaf) != 1 || SSL_use_PrivateKey(s, ca->leaf_key) != 1 || SSL_set_fd(s, fd) != 1) {
		*why = "cannot make a certificate for the host";
		goto fail;
	}
	X509_free(leaf);
	leaf = NULL;
	ERR_clear_error();
	ok = SSL_accept(s);
	if (ok != 1) {
		unsigned long e = ERR_peek_error();

		*why = ERR_GET_REASON(e) == SSL_R_CALLBACK_FAILED || ERR_GET_REASON(e) == SSL_R_CLIENTHELLO_TLSEXT ?
			       "the ClientHello names another host than the CONNECT" :
		       ERR_GET_REASON(e) == SSL_R_NO_APPLICATION_PROTOCOL ?
			       "the client offers no http/1.1 (ALPN): HTTP/2-only clients are not intercepted" :
		       ERR_GET_REASON(e) == SSL_R_TLSV1_ALERT_UNKNOWN_CA || ERR_GET_REASON(e) == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
				       ERR_GET_REASON(e) == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ?
			       "the sandbox's client does not trust the egress CA" :
			       "TLS handshake with the sandbox's client failed";
		ERR_clear_error();
		goto fail;
	}
	return s;
fail:
	X509_free(leaf);
	SSL_free(s);
	return NULL;
}

static long ssl_read(void *ctx, char *buf, size_t len)
{
	SSL *s = ctx;
	int n = SSL_read(s, buf, len > (1u << 30) ? 1 << 30 : (int)len);

	if (n > 0)
		return n;
	switch (SSL_get_error(s, n)) {
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : errno ? -errno : 0;
	default:
		ERR_clear_error();
		return -EIO;
	}
}

static int ssl_write(void *ctx, const char *buf, size_t len)
{
	SSL *s = ctx;

	while (len) {
		int k = SSL_write(s, buf, len > (1u << 30) ? 1 << 30 : (int)len);

		if (k <= 0) {
			ERR_clear_error();
			return -EIO;
		}
		buf += k;
		len -= (size_t)k;
	}
	return 0;
}

void egtls_stream(SSL *ssl, struct eg_stream *s)
{
	s->read = ssl_read;
	s->write = ssl_write;
	s->ctx = ssl;
}
