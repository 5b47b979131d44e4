/* SPDX-License-Identifier: GPL-2.0 */
/* The C unit tests' runner: one binary, one "N passed, M failed" line. */
#ifndef DCBLAB_CHECK_H
#define DCBLAB_CHECK_H

#include <stdio.h>

extern int checks_passed, checks_failed;

/* Counts instead of stopping, so one run shows every failure. */
#define CHECK(cond) do {						\
	if (cond) {							\
		checks_passed++;					\
	} else {							\
		checks_failed++;					\
		fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__,	\
			__LINE__, #cond);				\
	}								\
} while (0)

void test_seqtrack(void);
void test_util(void);

#endif
