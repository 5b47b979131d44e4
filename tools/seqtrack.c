// SPDX-License-Identifier: GPL-2.0
#include "seqtrack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WORDS_PER_PAGE (SEQTRACK_PAGE_BITS / 64)

void seqtrack_init(struct seqtrack *t)
{
	memset(t, 0, sizeof(*t));
}

static int grow_dir(struct seqtrack *t, uint64_t page)
{
	uint64_t n = t->npages ? t->npages : 16;
	uint64_t **pages;

	while (n <= page)
		n *= 2;
	pages = realloc(t->pages, n * sizeof(*pages));
	if (!pages)
		return -ENOMEM;
	memset(pages + t->npages, 0, (n - t->npages) * sizeof(*pages));
	t->pages = pages;
	t->npages = n;
	return 0;
}

int seqtrack_add(struct seqtrack *t, uint64_t seq)
{
	uint64_t page = seq / SEQTRACK_PAGE_BITS;
	uint64_t bit = seq % SEQTRACK_PAGE_BITS;
	uint64_t mask = 1ull << (bit % 64);
	uint64_t *word;

	if (seq >= SEQTRACK_LIMIT)
		return -ERANGE;
	if (page >= t->npages && grow_dir(t, page) < 0)
		return -ENOMEM;
	if (!t->pages[page]) {
		t->pages[page] = calloc(WORDS_PER_PAGE, sizeof(uint64_t));
		if (!t->pages[page])
			return -ENOMEM;
	}
	word = &t->pages[page][bit / 64];
	if (*word & mask) {
		t->duplicates++;
		return 0;
	}
	*word |= mask;
	if (t->received && seq < t->max_seq)
		t->reordered++;
	if (!t->received || seq > t->max_seq)
		t->max_seq = seq;
	t->received++;
	return 0;
}

uint64_t seqtrack_lost(const struct seqtrack *t)
{
	return t->received ? t->max_seq + 1 - t->received : 0;
}

void seqtrack_free(struct seqtrack *t)
{
	for (uint64_t i = 0; i < t->npages; i++)
		free(t->pages[i]);
	free(t->pages);
	seqtrack_init(t);
}
