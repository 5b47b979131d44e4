/* SPDX-License-Identifier: GPL-2.0 */
/* Range-checked option parsing shared by the dcblab tools. */
#ifndef DCBLAB_PARSE_H
#define DCBLAB_PARSE_H

#include <stdint.h>

/*
 * Each returns 0 and fills *out, or -1 after a message on stderr that
 * names opt, the text and what would have been accepted.
 */

/* A whole number in [min, max]: decimal, or hex with 0x (strtoull base 0,
 * so a leading 0 means octal).  Signs and blanks are refused: strtoull
 * would silently negate "-1" into 2^64-1. */
int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
	      uint64_t *out);
/* Non-negative decimal seconds, e.g. "2.5"; at most max. */
int parse_seconds(const char *opt, const char *text, double max, double *out);
/* Exactly aa:bb:cc:dd:ee:ff, two hex digits per byte. */
int parse_mac(const char *opt, const char *text, uint8_t mac[6]);

#endif
