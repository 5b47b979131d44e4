/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-flow sequence tracking: received, lost, duplicates, reordered.
 *
 * One bit per sequence number, in pages of SEQTRACK_PAGE_BITS allocated on
 * first use: 10^6 in-order numbers take 16 pages (128 KiB), and a stray
 * huge number costs one page, not a bitmap up to it.
 */
#ifndef DCBLAB_SEQTRACK_H
#define DCBLAB_SEQTRACK_H

#include <stdint.h>

#define SEQTRACK_PAGE_BITS (1u << 16)
/* Numbers from here on are refused (-ERANGE); priosend sends < 10^9. */
#define SEQTRACK_LIMIT (1ull << 32)

struct seqtrack {
	uint64_t **pages;	/* pages[seq / SEQTRACK_PAGE_BITS], or NULL */
	uint64_t npages;	/* entries in pages[] */
	uint64_t received;	/* distinct sequence numbers */
	uint64_t duplicates;
	uint64_t reordered;	/* below the highest seen, not a duplicate */
	uint64_t max_seq;	/* highest seen; 0 while received == 0 */
};

void seqtrack_init(struct seqtrack *t);
/* 0; -ERANGE for seq >= SEQTRACK_LIMIT, -ENOMEM: t is unchanged then. */
int seqtrack_add(struct seqtrack *t, uint64_t seq);
/* Sequence numbers in 0..max_seq never seen. */
uint64_t seqtrack_lost(const struct seqtrack *t);
void seqtrack_free(struct seqtrack *t);

#endif
