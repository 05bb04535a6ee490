/* multipart/form-data bodies (RFC 7578, on RFC 2046 section 5.1.1's
 * delimiters), as envd's POST /files takes the SDKs' uploads
 * (envd/envd.yaml: one part named "file" per file, its filename the path
 * when the query names none). Pure (cli/e2b/e2b_priv.h). */
#include "cli/e2b/e2b_priv.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

int mp_boundary(const char *ct, char *out, size_t len)
{
	const char *p = ct;
	size_t n;

	if (strncasecmp(ct, "multipart/form-data", 19))
		return -EINVAL;
	while ((p = strchr(p, ';'))) {
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, "boundary=", 9))
			continue;
		p += 9;
		if (*p == '"') {
			const char *q = strchr(++p, '"');

			if (!q)
				return -EINVAL;
			n = (size_t)(q - p);
		} else {
			n = strcspn(p, "; \t");
		}
		/* RFC 2046: 1 to 70 characters */
		if (n == 0 || n > 70 || n >= len)
			return -EINVAL;
		memcpy(out, p, n);
		out[n] = '\0';
		return 0;
	}
	return -EINVAL;
}

/* A parameter of a Content-Disposition value (name="x"), quoted or not,
 * with the HTML form encoding's escapes (%0A, %0D, %22) undone. */
static int disp_param(const char *v, size_t vlen, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key), i = 0, o = 0;

	while (i < vlen) {
		/* parameters follow a ';' */
		while (i < vlen && v[i] != ';')
			i++;
		if (i++ >= vlen)
			break;
		while (i < vlen && (v[i] == ' ' || v[i] == '\t'))
			i++;
		if (vlen - i <= klen || strncasecmp(v + i, key, klen) || v[i + klen] != '=')
			continue;
		i += klen + 1;
		if (i < vlen && v[i] == '"') {
			for (i++; i < vlen && v[i] != '"'; i++) {
				char ch = v[i];

				if (ch == '\\' && i + 1 < vlen)
					ch = v[++i];
				else if (ch == '%' && i + 2 < vlen && v[i + 1] == '2' && v[i + 2] == '2')
					ch = '"', i += 2;
				else if (ch == '%' && i + 2 < vlen && v[i + 1] == '0' && (v[i + 2] == 'A' || v[i + 2] == 'D'))
					ch = v[i + 2] == 'A' ? '\n' : '\r', i += 2;
				if (o + 1 >= len || ch == '\0')
					return -EINVAL;
				out[o++] = ch;
			}
			if (i >= vlen)
				return -EINVAL;
		} else {
			for (; i < vlen && v[i] != ';' && v[i] != ' '; i++) {
				if (o + 1 >= len)
					return -EINVAL;
				out[o++] = v[i];
			}
		}
		out[o] = '\0';
		return 0;
	}
	return -ENOENT;
}

/* The part's header lines at body[i..hend): name and filename from its
 * Content-Disposition (form-data). */
static int part_headers(const char *h, size_t n, struct mp_part *p)
{
	size_t i = 0;
	int seen = 0;

	while (i < n) {
		const char *eol = memmem(h + i, n - i, "\r\n", 2);
		size_t l = eol ? (size_t)(eol - (h + i)) : n - i;

		if (l > 20 && !strncasecmp(h + i, "Content-Disposition:", 20)) {
			const char *v = h + i + 20;
			size_t vl = l - 20;

			while (vl && (*v == ' ' || *v == '\t'))
				v++, vl--;
			if (vl < 9 || strncasecmp(v, "form-data", 9) || seen++)
				return -EPROTO;
			if (disp_param(v, vl, "name", p->name, sizeof(p->name)))
				return -EPROTO;
			if (disp_param(v, vl, "filename", p->filename, sizeof(p->filename)) == -EINVAL)
				return -EPROTO;
		}
		i += l + 2;
	}
	return seen ? 0 : -EPROTO;
}

int mp_next(const char *body, size_t len, const char *boundary, size_t *pos, struct mp_part *p)
{
	char delim[80];
	size_t dl = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary), i = *pos;
	const char *d, *hend, *next;

	memset(p, 0, sizeof(*p));
	if (i > len)
		return -EPROTO;
	if (i == 0) {
		/* the first delimiter: at the very start, or after a preamble */
		if (len >= dl - 2 && !memcmp(body, delim + 2, dl - 2)) {
			i = dl - 2;
		} else {
			d = memmem(body, len, delim, dl);
			if (!d)
				return -EPROTO;
			i = (size_t)(d - body) + dl;
		}
	}
	/* after a delimiter: "--" closes the body, else CRLF and a part */
	if (len - i >= 2 && body[i] == '-' && body[i + 1] == '-')
		return 0;
	while (i < len && (body[i] == ' ' || body[i] == '\t'))
		i++;
	if (len - i < 2 || body[i] != '\r' || body[i + 1] != '\n')
		return -EPROTO;
	i += 2;
	/* header lines (a part needs its Content-Disposition), an empty line */
	hend = memmem(body + i, len - i, "\r\n\r\n", 4);
	if (!hend || part_headers(body + i, (size_t)(hend - (body + i)), p))
		return -EPROTO;
	i = (size_t)(hend - body) + 4;
	next = memmem(body + i, len - i, delim, dl);
	if (!next)
		return -EPROTO;
	p->data = body + i;
	p->len = (size_t)(next - (body + i));
	*pos = (size_t)(next - body) + dl;
	return 1;
}
