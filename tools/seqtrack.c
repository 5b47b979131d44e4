// SPDX-License-Identifier: GPL-2.0
#include "seqtrack.h"

#include <stdlib.h>
#include <string.h>

/* Sequence numbers above this are counted but not tracked bit by bit. */
#define SEQ_LIMIT (1ull << 32)

void seqtrack_init(struct seqtrack *t)
{
	memset(t, 0, sizeof(*t));
}

static int grow(struct seqtrack *t, uint64_t word)
{
	uint64_t n = t->nwords ? t->nwords : 1024;
	uint64_t *bits;

	while (n <= word)
		n *= 2;
	bits = realloc(t->bits, n * sizeof(*bits));
	if (!bits)
		return -1;
	memset(bits + t->nwords, 0, (n - t->nwords) * sizeof(*bits));
	t->bits = bits;
	t->nwords = n;
	return 0;
}

int seqtrack_add(struct seqtrack *t, uint64_t seq)
{
	uint64_t word = seq / 64, mask = 1ull << (seq % 64);

	if (seq >= SEQ_LIMIT)
		return -1;
	if (word >= t->nwords && grow(t, word) < 0)
		return -1;
	if (t->bits[word] & mask) {
		t->duplicates++;
		return 0;
	}
	t->bits[word] |= mask;
	t->received++;
	if (t->any && seq < t->max_seq)
		t->reordered++;
	if (!t->any || seq > t->max_seq)
		t->max_seq = seq;
	t->any = 1;
	return 0;
}

uint64_t seqtrack_lost(const struct seqtrack *t)
{
	return t->any ? t->max_seq + 1 - t->received : 0;
}

void seqtrack_free(struct seqtrack *t)
{
	free(t->bits);
	seqtrack_init(t);
}
