/* MMDS: the store (PUT, RFC 7396 PATCH, the size limit), the guest's HTTP
 * (IMDS and JSON formats, V1/V2 tokens, errors as Firecracker answers
 * them), and the ARP/TCP responder driven with frames as a guest's stack
 * sends them: handshake, a request split over segments, a response larger
 * than the window, FIN both ways, resets, a full queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/mmds.h"
#include "devices/mmds_net.h"

#define NS 1000000000ull
#define L(s) (s), strlen(s)

static struct mmds *new_store(const char *json)
{
	struct mmds *m = calloc(1, sizeof(*m));
	char why[256];

	assert_int_equal(mmds_init(m), 0);
	if (json)
		assert_int_equal(mmds_put(m, json, strlen(json), why, sizeof(why)), 0);
	return m;
}

static void free_store(struct mmds *m)
{
	mmds_destroy(m);
	free(m);
}

static void expect_store(struct mmds *m, const char *want)
{
	char *s = mmds_get(m);

	assert_string_equal(s, want);
	free(s);
}

static void store_put_patch_limit(void **state)
{
	struct mmds *m = new_store(NULL);
	char why[256];

	(void)state;
	expect_store(m, "{}");
	assert_int_equal(mmds_put(m, L("{\"b\": 1, \"a\": {\"y\": \"x\", \"x\": [1, 2.5, null, true]}, \"b\": 2}"),
				  why, sizeof(why)),
			 0);
	/* keys sorted, the last of a duplicate wins, no blanks */
	expect_store(m, "{\"a\":{\"x\":[1,2.5,null,true],\"y\":\"x\"},\"b\":2}");
	/* RFC 7396: null removes, objects merge, anything else replaces */
	assert_int_equal(mmds_patch(m, L("{\"a\":{\"y\":null,\"z\":{\"q\":\"w\"}},\"b\":[0],\"c\":\"new\"}"), why,
				    sizeof(why)),
			 0);
	expect_store(m, "{\"a\":{\"x\":[1,2.5,null,true],\"z\":{\"q\":\"w\"}},\"b\":[0],\"c\":\"new\"}");
	assert_int_equal(mmds_patch(m, L("\"scalar\""), why, sizeof(why)), 0);
	expect_store(m, "\"scalar\"");
	/* bad JSON and an oversize store leave it as it was */
	assert_int_equal(mmds_put(m, L("{\"a\":"), why, sizeof(why)), -EINVAL);
	m->limit = 20;
	assert_int_equal(mmds_put(m, L("{\"key\":\"a value that is too long\"}"), why, sizeof(why)), -EFBIG);
	assert_non_null(strstr(why, "limit"));
	expect_store(m, "\"scalar\"");
	free_store(m);
}

static void ipv4_rule(void **state)
{
	uint32_t ip;

	(void)state;
	assert_int_equal(mmds_parse_ipv4("169.254.169.254", &ip), 0);
	assert_int_equal(ip, MMDS_DEFAULT_IPV4);
	assert_int_equal(mmds_parse_ipv4("169.254.170.2", &ip), 0);
	assert_int_equal(mmds_parse_ipv4("169.254.0.1", &ip), -EINVAL);
	assert_int_equal(mmds_parse_ipv4("169.254.255.1", &ip), -EINVAL);
	assert_int_equal(mmds_parse_ipv4("10.0.0.1", &ip), -EINVAL);
	assert_int_equal(mmds_parse_ipv4("169.254.1.1x", &ip), -EINVAL);
}

/* One request; returns the body (static), status in *st. */
static const char *ask(struct mmds *m, const char *req, uint64_t now, int *st, int *close)
{
	static char body[8192];
	size_t n;
	int c;
	char *r = mmds_respond(m, req, strlen(req), now, &n, st, close ? close : &c);
	const char *b;

	assert_non_null(r);
	assert_int_equal(mmds_request_complete(req, strlen(req)), (long)strlen(req));
	b = strstr(r, "\r\n\r\n");
	assert_non_null(b);
	snprintf(body, sizeof(body), "%s", b + 4);
	/* the status line says the same */
	{
		char want[16];

		snprintf(want, sizeof(want), " %d ", *st);
		assert_non_null(strstr(r, want));
	}
	free(r);
	return body;
}

static const char *DATA = "{\"latest\":{\"meta-data\":{\"ami-id\":\"ami-87654321\",\"reservation-id\":\"r-79054aef\","
			  "\"n\":5,\"a/b\":\"slash\"}},\"age\":43}";

static void guest_v1(void **state)
{
	struct mmds *m = new_store(DATA);
	int st, cl;

	(void)state;
	assert_string_equal(ask(m, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, &st, NULL), "age\nlatest/");
	assert_int_equal(st, 200);
	assert_string_equal(ask(m, "GET /latest HTTP/1.1\r\n\r\n", 0, &st, NULL), "meta-data/");
	assert_string_equal(ask(m, "GET //latest//meta-data/ HTTP/1.1\r\n\r\n", 0, &st, NULL),
			    "a/b\nami-id\nn\nreservation-id");
	assert_string_equal(ask(m, "GET /latest/meta-data/ami-id HTTP/1.1\r\n\r\n", 0, &st, NULL), "ami-87654321");
	assert_string_equal(ask(m, "GET /latest/meta-data/a~1b HTTP/1.1\r\n\r\n", 0, &st, NULL), "slash");
	/* JSON with Accept, IMDS refuses what is neither object nor string */
	assert_string_equal(ask(m, "GET /latest/meta-data/ami-id HTTP/1.1\r\nAccept: application/json\r\n\r\n", 0, &st,
				NULL),
			    "\"ami-87654321\"");
	assert_string_equal(ask(m, "GET /age HTTP/1.1\r\naccept: application/json\r\n\r\n", 0, &st, NULL), "43");
	ask(m, "GET /age HTTP/1.1\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 501);
	m->imds_compat = 1;
	ask(m, "GET /age HTTP/1.1\r\nAccept: application/json\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 501);
	m->imds_compat = 0;
	ask(m, "GET /nope HTTP/1.1\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 404);
	ask(m, "GET /latest/meta-data/ami-id/deeper HTTP/1.1\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 404);
	/* absolute form, a query */
	assert_string_equal(ask(m, "GET http://169.254.169.254/latest/meta-data/n?x=1 HTTP/1.1\r\nAccept: "
				   "application/json\r\n\r\n",
				0, &st, NULL),
			    "5");
	/* V1 answers with a bad token too (counted) */
	ask(m, "GET /age HTTP/1.1\r\nX-metadata-token: bogus\r\nAccept: application/json\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 200);
	assert_int_equal(m->stats.rx_invalid_token, 1);
	/* methods, HTTP versions, closing */
	ask(m, "DELETE / HTTP/1.1\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 405);
	ask(m, "GET / HTTP/1.0\r\n\r\n", 0, &st, &cl);
	assert_int_equal(cl, 1);
	ask(m, "GET / HTTP/1.1\r\n\r\n", 0, &st, &cl);
	assert_int_equal(cl, 0);
	ask(m, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 0, &st, &cl);
	assert_int_equal(cl, 1);
	ask(m, "GET / HTTP/2.0\r\n\r\n", 0, &st, &cl);
	assert_int_equal(st, 400);
	free_store(m);
}

static void guest_v2_tokens(void **state)
{
	struct mmds *m = new_store(DATA);
	char tok[64], req[256];
	int st;

	(void)state;
	m->version = MMDS_V2;
	ask(m, "GET /age HTTP/1.1\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 401);
	ask(m, "PUT /latest/api/token HTTP/1.1\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 400);
	ask(m, "PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 0\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 400);
	ask(m, "PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 21601\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 400);
	ask(m, "PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 1x\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 400);
	ask(m, "PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 60\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
	    0, &st, NULL);
	assert_int_equal(st, 400);
	ask(m, "PUT /other HTTP/1.1\r\nX-metadata-token-ttl-seconds: 60\r\n\r\n", 0, &st, NULL);
	assert_int_equal(st, 404);
	snprintf(tok, sizeof(tok), "%s",
		 ask(m, "PUT /latest/api/token HTTP/1.1\r\nX-aws-ec2-metadata-token-ttl-seconds: 60\r\n\r\n", 10 * NS,
		     &st, NULL));
	assert_int_equal(st, 200);
	assert_int_equal(strlen(tok), 44);
	snprintf(req, sizeof(req), "GET /latest/meta-data/ami-id HTTP/1.1\r\nX-metadata-token: %s\r\n\r\n", tok);
	assert_string_equal(ask(m, req, 69 * NS, &st, NULL), "ami-87654321");
	/* expired */
	ask(m, req, 70 * NS, &st, NULL);
	assert_int_equal(st, 401);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nX-metadata-token: %.43s\r\n\r\n", tok);
	ask(m, req, 11 * NS, &st, NULL);
	assert_int_equal(st, 401);
	/* many tokens: the table keeps the newest, never grows */
	for (int i = 0; i < 3 * MMDS_MAX_TOKENS; i++) {
		ask(m, "PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 100\r\n\r\n", 20 * NS + (uint64_t)i,
		    &st, NULL);
		assert_int_equal(st, 200);
	}
	free_store(m);
}

static void request_framing(void **state)
{
	(void)state;
	assert_int_equal(mmds_request_complete(L("GET / HTTP/1.1\r\n")), 0);
	assert_int_equal(mmds_request_complete(L("PUT / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab")), 0);
	assert_int_equal(mmds_request_complete(L("PUT / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET")), 40);
	assert_int_equal(mmds_request_complete(L("PUT / HTTP/1.1\r\nContent-Length: -3\r\n\r\n")), -1);
	assert_int_equal(mmds_request_complete(L("PUT / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n")), -1);
	{
		char *big = malloc(MMDS_MAX_REQUEST + 10);

		memset(big, 'a', MMDS_MAX_REQUEST + 10);
		assert_int_equal(mmds_request_complete(big, MMDS_MAX_REQUEST + 10), -1);
		free(big);
	}
}

/* ---- the network side ----------------------------------------------------- */

static const uint8_t gmac[6] = { 0x52, 0x54, 0, 0x12, 0x34, 0x56 };
#define GIP 0x0a000002u

static void p16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void p32(uint8_t *p, uint32_t v) { p16(p, (uint16_t)(v >> 16)); p16(p + 2, (uint16_t)v); }
static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t g32(const uint8_t *p) { return (uint32_t)g16(p) << 16 | g16(p + 2); }

static uint16_t cksum(uint32_t sum, const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += g16(p + i);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* A guest TCP segment to the MMDS. */
static size_t seg(uint8_t *f, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack, uint8_t flags,
		  uint16_t wnd, const char *data, size_t dlen, int mss)
{
	uint8_t *ip = f + 14, *t = ip + 20;
	size_t thl = mss ? 24 : 20;

	memset(f, 0, 14 + 20 + thl);
	memcpy(f, (uint8_t[])MMDS_NET_MAC, 6);
	memcpy(f + 6, gmac, 6);
	p16(f + 12, 0x0800);
	ip[0] = 0x45;
	p16(ip + 2, (uint16_t)(20 + thl + dlen));
	ip[8] = 64;
	ip[9] = 6;
	p32(ip + 12, GIP);
	p32(ip + 16, MMDS_DEFAULT_IPV4);
	p16(t, sport);
	p16(t + 2, dport);
	p32(t + 4, seq);
	p32(t + 8, ack);
	t[12] = (uint8_t)((thl / 4) << 4);
	t[13] = flags;
	p16(t + 14, wnd);
	if (mss) {
		t[20] = 2;
		t[21] = 4;
		p16(t + 22, (uint16_t)mss);
	}
	if (dlen)
		memcpy(t + thl, data, dlen);
	return 14 + 20 + thl + dlen;
}

struct got {
	uint32_t seq, ack;
	uint8_t flags;
	uint16_t wnd, mss;
	size_t dlen;
	uint8_t data[2048];
};

/* The next frame for the guest, checked as a guest's stack would. */
static int next(struct mmds_net *s, struct got *g)
{
	uint8_t f[MMDS_NET_FRAME];
	size_t n = mmds_net_pop(s, f, sizeof(f)), thl;
	uint8_t *ip = f + 14, *t;
	uint32_t sum;

	if (!n)
		return 0;
	assert_memory_equal(f, gmac, 6);
	assert_int_equal(g16(f + 12), 0x0800);
	assert_int_equal(cksum(0, ip, 20), 0);
	assert_int_equal(g32(ip + 12), MMDS_DEFAULT_IPV4);
	assert_int_equal(g32(ip + 16), GIP);
	assert_int_equal(g16(ip + 2), n - 14);
	t = ip + 20;
	thl = (size_t)(t[12] >> 4) * 4;
	sum = (GIP >> 16) + (GIP & 0xffff) + (MMDS_DEFAULT_IPV4 >> 16) + (MMDS_DEFAULT_IPV4 & 0xffff) + 6 +
	      (uint32_t)(n - 34);
	assert_int_equal(cksum(sum, t, n - 34), 0);
	assert_int_equal(g16(t), 80);
	memset(g, 0, sizeof(*g));
	g->seq = g32(t + 4);
	g->ack = g32(t + 8);
	g->flags = t[13];
	g->wnd = g16(t + 14);
	if (thl == 24 && t[20] == 2)
		g->mss = g16(t + 22);
	g->dlen = n - 34 - thl;
	memcpy(g->data, t + thl, g->dlen);
	return 1;
}

static void arp(void **state)
{
	struct mmds *m = new_store(DATA);
	struct mmds_net s;
	uint8_t f[60] = { 0 }, o[64];

	(void)state;
	mmds_net_init(&s, m);
	memset(f, 0xff, 6);
	memcpy(f + 6, gmac, 6);
	p16(f + 12, 0x0806);
	p16(f + 14, 1);
	p16(f + 16, 0x0800);
	f[18] = 6;
	f[19] = 4;
	p16(f + 20, 1);
	memcpy(f + 22, gmac, 6);
	p32(f + 28, GIP);
	p32(f + 38, MMDS_DEFAULT_IPV4);
	assert_true(mmds_net_wants(&s, f, sizeof(f)));
	mmds_net_input(&s, f, sizeof(f), 0);
	assert_int_equal(mmds_net_pop(&s, o, sizeof(o)), 42);
	assert_memory_equal(o, gmac, 6);
	assert_int_equal(g16(o + 20), 2);
	assert_memory_equal(o + 22, (uint8_t[])MMDS_NET_MAC, 6);
	assert_int_equal(g32(o + 28), MMDS_DEFAULT_IPV4);
	assert_memory_equal(o + 32, gmac, 6);
	assert_int_equal(g32(o + 38), GIP);
	/* an ARP for anyone else, and other traffic, is not the MMDS's */
	p32(f + 38, 0x0a000001);
	assert_false(mmds_net_wants(&s, f, sizeof(f)));
	p16(f + 12, 0x86dd);
	assert_false(mmds_net_wants(&s, f, sizeof(f)));
	mmds_net_destroy(&s);
	free_store(m);
}

/* Handshake; returns the MMDS's next sequence number. */
static uint32_t connect_to(struct mmds_net *s, uint16_t port, uint32_t iss, uint16_t wnd, int mss)
{
	uint8_t f[2048];
	struct got g;

	mmds_net_input(s, f, seg(f, port, 80, iss, 0, 0x02, wnd, NULL, 0, mss), 1);
	assert_true(next(s, &g));
	assert_int_equal(g.flags, 0x12);
	assert_int_equal(g.ack, iss + 1);
	assert_int_equal(g.mss, MMDS_NET_MSS);
	mmds_net_input(s, f, seg(f, port, 80, iss + 1, g.seq + 1, 0x10, wnd, NULL, 0, 0), 2);
	assert_false(next(s, &g));
	return g.seq + 1;
}

static void tcp_conversation(void **state)
{
	struct mmds *m = new_store(DATA);
	struct mmds_net s;
	uint8_t f[2048];
	struct got g;
	const char *r1 = "GET /latest/meta-data/ami-id HTTP/1.1\r\n", *r2 = "Host: 169.254.169.254\r\n\r\n";
	uint32_t me, seq = 1000;
	char resp[4096] = "";

	(void)state;
	mmds_net_init(&s, m);
	me = connect_to(&s, 40000, 999, 65535, 1460);
	/* the request in two segments: an ACK for the first, the answer after the second */
	mmds_net_input(&s, f, seg(f, 40000, 80, seq, me, 0x18, 65535, r1, strlen(r1), 0), 3);
	seq += (uint32_t)strlen(r1);
	assert_true(next(&s, &g));
	assert_int_equal(g.flags, 0x10);
	assert_int_equal(g.ack, seq);
	assert_false(next(&s, &g));
	/* a retransmission of it is acknowledged again, not served twice */
	mmds_net_input(&s, f, seg(f, 40000, 80, seq - (uint32_t)strlen(r1), me, 0x18, 65535, r1, strlen(r1), 0), 3);
	assert_true(next(&s, &g));
	assert_int_equal(g.ack, seq);
	assert_int_equal(g.dlen, 0);
	mmds_net_input(&s, f, seg(f, 40000, 80, seq, me, 0x18, 65535, r2, strlen(r2), 0), 4);
	seq += (uint32_t)strlen(r2);
	while (next(&s, &g)) {
		assert_int_equal(g.seq, me);
		assert_int_equal(g.ack, seq);
		strncat(resp, (char *)g.data, g.dlen);
		me += (uint32_t)g.dlen;
	}
	assert_non_null(strstr(resp, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(resp, "\r\n\r\nami-87654321"));
	/* the guest closes: the MMDS acknowledges, sends its FIN; the last ACK ends it */
	mmds_net_input(&s, f, seg(f, 40000, 80, seq, me, 0x11, 65535, NULL, 0, 0), 5);
	assert_true(next(&s, &g));
	assert_true(g.flags & 0x01);
	assert_int_equal(g.ack, seq + 1);
	mmds_net_input(&s, f, seg(f, 40000, 80, seq + 1, me + 1, 0x10, 65535, NULL, 0, 0), 6);
	assert_false(next(&s, &g));
	assert_int_equal(s.conns[0].state, MT_FREE);
	/* a segment for a connection that is gone: reset */
	mmds_net_input(&s, f, seg(f, 40000, 80, seq + 1, me + 1, 0x10, 65535, NULL, 0, 0), 7);
	assert_true(next(&s, &g));
	assert_true(g.flags & 0x04);
	/* another port: reset, nothing kept */
	mmds_net_input(&s, f, seg(f, 40001, 81, 5, 0, 0x02, 65535, NULL, 0, 0), 8);
	assert_true(next(&s, &g));
	assert_int_equal(g.flags, 0x14);
	assert_int_equal(g.ack, 6);
	mmds_net_destroy(&s);
	free_store(m);
}

/* A 50 KB answer through a 4 KB window and a 536-byte MSS, and a queue
 * that fills: nothing lost, nothing sent outside the window. */
static void tcp_window_and_queue(void **state)
{
	struct mmds *m = new_store(NULL);
	struct mmds_net s;
	uint8_t f[2048];
	struct got g;
	char big[50008], why[128], *resp = calloc(1, 60000);
	const char *req = "GET /k HTTP/1.1\r\nConnection: close\r\n\r\n";
	uint32_t me, una, seq = 51;
	size_t got = 0;
	int fin = 0, rounds = 0;

	(void)state;
	memset(big, 'v', sizeof(big));
	memcpy(big, "{\"k\":\"", 6);
	memcpy(big + 50006, "\"}", 2);
	assert_int_equal(mmds_put(m, big, 50008, why, sizeof(why)), 0);
	mmds_net_init(&s, m);
	me = connect_to(&s, 40002, 50, 4096, 536);
	una = me;
	mmds_net_input(&s, f, seg(f, 40002, 80, seq, me, 0x18, 4096, req, strlen(req), 0), 3);
	seq += (uint32_t)strlen(req);
	while (!fin && rounds++ < 1000) {
		uint32_t top = una;

		while (next(&s, &g)) {
			assert_true(g.dlen <= 536);
			if (g.dlen) {
				assert_int_equal(g.seq, me + (uint32_t)got);
				memcpy(resp + got, g.data, g.dlen);
				got += g.dlen;
			}
			top = g.seq + (uint32_t)g.dlen;
			assert_true(top - una <= 4096);
			if (g.flags & 0x01) {
				fin = 1;
				top++;
			}
		}
		/* acknowledge everything so far */
		una = top;
		mmds_net_input(&s, f, seg(f, 40002, 80, seq, una, 0x10 | (fin ? 0x01 : 0), 4096, NULL, 0, 0), 4);
	}
	assert_true(fin);
	assert_non_null(strstr(resp, "Content-Length: 50000\r\n"));
	assert_true(got > 50000);
	assert_int_equal(resp[got - 1], 'v');
	/* the final ACK of our FIN (with the guest's FIN) ended it */
	while (next(&s, &g))
		;
	assert_int_equal(s.conns[0].state, MT_FREE);

	/* a queue the device does not drain: the MMDS waits, then goes on */
	me = connect_to(&s, 40003, 70, 65535, 536);
	mmds_net_input(&s, f, seg(f, 40003, 80, 71, me, 0x18, 65535, req, strlen(req), 0), 5);
	assert_int_equal(mmds_net_pending(&s), MMDS_NET_QUEUE);
	got = 0;
	while (next(&s, &g)) {
		assert_int_equal(g.seq, me + (uint32_t)got);
		got += g.dlen;
		mmds_net_pump(&s);
	}
	/* 65535 bytes of window: all of it, in order, once the device took some */
	assert_true(got > 50000);
	mmds_net_destroy(&s);
	free_store(m);
	free(resp);
}

/* Pipelined requests from a guest that never acknowledges: the MMDS holds
 * one answer per connection, not one per request (before, 800 requests in
 * one segment made it hold 800 answers, and the next segment as many
 * again). Acknowledged, the answers still come, each in order, then the
 * FIN the guest's own FIN asked for. */
static void tcp_pipelined_bounded(void **state)
{
	struct mmds *m = new_store(DATA);
	struct mmds_net s;
	uint8_t *f = malloc(MMDS_MAX_REQUEST + 100);
	const char *req = "GET /latest/meta-data/ami-id HTTP/1.1\r\n\r\n";
	size_t rl = strlen(req), n = (MMDS_MAX_REQUEST - 1) / rl, i, one;
	char *burst = malloc(n * rl), resp[8192] = "";
	uint32_t me, una, seq = 101;
	struct got g;
	int fin = 0, answers = 0, rounds = 0;
	const char *p;

	(void)state;
	for (i = 0; i < n; i++)
		memcpy(burst + i * rl, req, rl);
	mmds_net_init(&s, m);
	me = connect_to(&s, 40010, 100, 0, 1460);
	/* a zero window: nothing goes out, everything would wait in tx */
	mmds_net_input(&s, f, seg(f, 40010, 80, seq, me, 0x18, 0, burst, n * rl, 0), 3);
	one = s.conns[0].tx_len;
	assert_true(one > 0 && one < 1024);
	for (i = 0; i < 4; i++) /* its retransmissions: acknowledged, not served again */
		mmds_net_input(&s, f, seg(f, 40010, 80, seq, me, 0x18, 0, req, rl, 0), 4);
	assert_int_equal(s.conns[0].tx_len, one);
	while (next(&s, &g))
		;
	mmds_net_destroy(&s);

	/* three pipelined requests and a FIN, acknowledged as they come */
	mmds_net_init(&s, m);
	me = connect_to(&s, 40011, 200, 65535, 1460);
	una = me;
	seq = 201;
	memcpy(burst, req, rl);
	memcpy(burst + rl, req, rl);
	memcpy(burst + 2 * rl, req, rl);
	mmds_net_input(&s, f, seg(f, 40011, 80, seq, me, 0x19, 65535, burst, 3 * rl, 0), 5);
	seq += (uint32_t)(3 * rl) + 1;
	while (!fin && rounds++ < 100) {
		uint32_t top = una;

		while (next(&s, &g)) {
			if (g.dlen) {
				assert_int_equal(g.seq, top);
				assert_true(strlen(resp) + g.dlen < sizeof(resp));
				strncat(resp, (char *)g.data, g.dlen);
			}
			top = g.seq + (uint32_t)g.dlen;
			if (g.flags & 0x01) {
				fin = 1;
				top++;
			}
		}
		una = top;
		mmds_net_input(&s, f, seg(f, 40011, 80, seq, una, 0x10, 65535, NULL, 0, 0), 6);
	}
	assert_true(fin);
	for (p = resp; (p = strstr(p, "\r\n\r\nami-87654321")); p++)
		answers++;
	assert_int_equal(answers, 3);
	assert_int_equal(s.conns[0].state, MT_FREE);
	mmds_net_destroy(&s);
	free_store(m);
	free(burst);
	free(f);
}

/* A device reset forgets every connection and every queued frame: the
 * next driver gets none of the old one's segments, and a segment of an
 * old connection is answered with a reset. */
static void reset_forgets(void **state)
{
	struct mmds *m = new_store(DATA);
	struct mmds_net s;
	uint8_t f[2048];
	const char *req = "GET /latest/meta-data/ami-id HTTP/1.1\r\n\r\n";
	uint32_t me;
	struct got g;

	(void)state;
	mmds_net_init(&s, m);
	me = connect_to(&s, 40020, 300, 65535, 1460);
	mmds_net_input(&s, f, seg(f, 40020, 80, 301, me, 0x18, 65535, req, strlen(req), 0), 3);
	assert_true(mmds_net_pending(&s) > 0);
	mmds_net_reset(&s);
	assert_int_equal(mmds_net_pending(&s), 0);
	assert_int_equal(s.conns[0].state, MT_FREE);
	assert_null(s.conns[0].tx);
	mmds_net_input(&s, f, seg(f, 40020, 80, 301 + (uint32_t)strlen(req), me, 0x10, 65535, NULL, 0, 0), 4);
	assert_true(next(&s, &g));
	assert_true(g.flags & 0x04);
	assert_false(next(&s, &g));
	mmds_net_destroy(&s);
	free_store(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(store_put_patch_limit),
		cmocka_unit_test(ipv4_rule),
		cmocka_unit_test(guest_v1),
		cmocka_unit_test(guest_v2_tokens),
		cmocka_unit_test(request_framing),
		cmocka_unit_test(arp),
		cmocka_unit_test(tcp_conversation),
		cmocka_unit_test(tcp_window_and_queue),
		cmocka_unit_test(tcp_pipelined_bounded),
		cmocka_unit_test(reset_forgets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
