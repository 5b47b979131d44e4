/* SPDX-License-Identifier: GPL-2.0 */
/* Range-checked option parsing shared by the dcblab tools. */
#ifndef DCBLAB_PARSE_H
#define DCBLAB_PARSE_H

#include <stdint.h>

/* 0 on success; -1 (with a message on stderr naming opt and text) if text
 * is not a whole number in [min, max].  Base 0: 0x.. hex is accepted. */
int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
	      uint64_t *out);
/* Non-negative decimal seconds, e.g. "2.5". */
int parse_seconds(const char *opt, const char *text, double *out);
/* aa:bb:cc:dd:ee:ff */
int parse_mac(const char *opt, const char *text, uint8_t mac[6]);

#endif
