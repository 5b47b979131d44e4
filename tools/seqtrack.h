/* SPDX-License-Identifier: GPL-2.0 */
/* Per-flow sequence tracking: received, lost, duplicates, reordered. */
#ifndef DCBLAB_SEQTRACK_H
#define DCBLAB_SEQTRACK_H

#include <stdint.h>

struct seqtrack {
	uint64_t *bits;		/* one bit per sequence number seen */
	uint64_t nwords;
	uint64_t received;	/* distinct sequence numbers */
	uint64_t duplicates;
	uint64_t reordered;	/* below the highest seen, not a duplicate */
	uint64_t max_seq;
	int any;
};

void seqtrack_init(struct seqtrack *t);
/* 0, or -1 when memory ran out. */
int seqtrack_add(struct seqtrack *t, uint64_t seq);
/* Sequence numbers between 0 and max_seq never seen. */
uint64_t seqtrack_lost(const struct seqtrack *t);
void seqtrack_free(struct seqtrack *t);

#endif
