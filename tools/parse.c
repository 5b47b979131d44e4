// SPDX-License-Identifier: GPL-2.0
#include "parse.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
	      uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	/* strtoull accepts a leading '-' and negates: refuse it ourselves. */
	for (const char *p = text; *p; p++) {
		if (*p == '-')
			goto bad;
		if (*p != ' ' && *p != '\t')
			break;
	}
	v = strtoull(text, &end, 0);
	if (errno || end == text || *end || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr, "%s: '%s' is not a number in %" PRIu64 "..%" PRIu64 "\n",
		opt, text, min, max);
	return -1;
}

int parse_seconds(const char *opt, const char *text, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || *end || !isfinite(v) || v < 0) {
		fprintf(stderr, "%s: '%s' is not a number of seconds >= 0\n",
			opt, text);
		return -1;
	}
	*out = v;
	return 0;
}

int parse_mac(const char *opt, const char *text, uint8_t mac[6])
{
	unsigned int b[6];
	char tail;

	if (sscanf(text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2],
		   &b[3], &b[4], &b[5], &tail) != 6) {
		fprintf(stderr, "%s: '%s' is not a MAC address "
			"(aa:bb:cc:dd:ee:ff)\n", opt, text);
		return -1;
	}
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}
