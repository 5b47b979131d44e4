// SPDX-License-Identifier: GPL-2.0
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
	      uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)text[0]))
		goto bad;
	errno = 0;
	v = strtoull(text, &end, 0);
	if (errno || *end || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr, "%s: '%s' is not a whole number in %" PRIu64 "..%"
		PRIu64 "\n", opt, text, min, max);
	return -1;
}

int parse_seconds(const char *opt, const char *text, double max, double *out)
{
	char *end;
	double v;

	/* strtod also takes "inf", "nan", "-1" and hex floats: refuse them. */
	if (!isdigit((unsigned char)text[0]) && text[0] != '.')
		goto bad;
	if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
		goto bad;
	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || *end || !isfinite(v) || v < 0 || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr, "%s: '%s' is not a number of seconds in 0..%g "
		"(e.g. 2.5)\n", opt, text, max);
	return -1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int parse_mac(const char *opt, const char *text, uint8_t mac[6])
{
	uint8_t m[6];

	for (int i = 0; i < 6; i++) {
		const char *p = text + 3 * i;
		int hi, lo;

		/* Each byte is checked before the next is read, so a short
		 * text ends the loop at its NUL and is never overrun. */
		hi = hexval(p[0]);
		lo = hi < 0 ? -1 : hexval(p[1]);
		if (lo < 0 || p[2] != (i == 5 ? '\0' : ':'))
			goto bad;
		m[i] = (uint8_t)(hi << 4 | lo);
	}
	for (int i = 0; i < 6; i++)
		mac[i] = m[i];
	return 0;
bad:
	fprintf(stderr, "%s: '%s' is not a MAC address (aa:bb:cc:dd:ee:ff)\n",
		opt, text);
	return -1;
}
