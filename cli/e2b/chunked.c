/* Chunked transfer coding (RFC 9112 section 7.1): a request body sent
 * without Content-Length decoded in place, and a response's chunk
 * headers (cli/e2b/e2b_priv.h). Pure: the unit tests and fuzz_e2b reach
 * every byte of it. */
#include "cli/e2b/e2b_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The CRLF-terminated line at buf[i..len): its end (the index of '\r'),
 * or -1 (incomplete), -2 (a bare LF or CR: malformed). */
static long line_end(const char *buf, size_t len, size_t i)
{
	for (; i < len; i++) {
		if (buf[i] == '\n')
			return -2;
		if (buf[i] == '\r')
			return i + 1 < len ? (buf[i + 1] == '\n' ? (long)i : -2) : -1;
	}
	return -1;
}

/* One pass over the body; with move, the data goes to the front (only
 * once a first pass found the body whole: a body still arriving is left
 * as it is). */
static long walk(char *buf, size_t len, size_t max, size_t *out, int move)
{
	size_t i = 0, o = 0;

	*out = 0;
	for (;;) {
		/* chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF */
		long e = line_end(buf, len, i);
		size_t size = 0, j = i, digits = 0;

		if (e == -1)
			return 0;
		if (e < 0)
			return -EPROTO;
		for (; j < (size_t)e; j++, digits++) {
			char ch = buf[j];
			unsigned v;

			if (ch >= '0' && ch <= '9')
				v = (unsigned)(ch - '0');
			else if (ch >= 'a' && ch <= 'f')
				v = (unsigned)(ch - 'a' + 10);
			else if (ch >= 'A' && ch <= 'F')
				v = (unsigned)(ch - 'A' + 10);
			else
				break;
			if (size > (max >> 4))
				return -E2BIG;
			size = size << 4 | v;
		}
		/* a chunk extension (";name=value"), or whitespace before it */
		if (!digits || (j < (size_t)e && buf[j] != ';' && buf[j] != ' ' && buf[j] != '\t'))
			return -EPROTO;
		i = (size_t)e + 2;
		if (size == 0)
			break;
		if (size > max - o)
			return -E2BIG;
		if (len - i < size + 2)
			return 0;
		if (buf[i + size] != '\r' || buf[i + size + 1] != '\n')
			return -EPROTO;
		if (move)
			memmove(buf + o, buf + i, size);
		o += size;
		i += size + 2;
	}
	/* trailer-section CRLF: fields to skip, then the empty line */
	for (;;) {
		long e = line_end(buf, len, i);

		if (e == -1)
			return 0;
		if (e < 0)
			return -EPROTO;
		if ((size_t)e == i) {
			*out = o;
			return (long)(i + 2);
		}
		i = (size_t)e + 2;
	}
}

long e2b_chunked_decode(char *buf, size_t len, size_t max, size_t *out)
{
	long r = walk(buf, len, max, out, 0);

	return r > 0 ? walk(buf, len, max, out, 1) : r;
}

size_t e2b_chunk_header(char *hdr, size_t n)
{
	return (size_t)snprintf(hdr, 20, "%zx\r\n", n);
}
