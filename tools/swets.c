// SPDX-License-Identifier: GPL-2.0
/* A switch port's ets qdisc from its DCB state; see swets.h. */
#include "swets.h"

#include <stdio.h>
#include <string.h>

void swets_plan(const uint8_t prio_tc[SWETS_TCS], const uint8_t tsa[SWETS_TCS],
		const uint8_t bw[SWETS_TCS], uint8_t pfc_en, struct swets *s)
{
	uint8_t band_of[SWETS_TCS] = { 0 };
	int tcs = 1, tc, p;

	memset(s, 0, sizeof(*s));
	for (p = 0; p < SWETS_TCS; p++)
		if (prio_tc[p] < SWETS_TCS && prio_tc[p] + 1 > tcs)
			tcs = prio_tc[p] + 1;
	for (tc = tcs - 1; tc >= 0; tc--)
		if (tsa[tc] != SWETS_TSA_ETS) {
			band_of[tc] = s->bands;
			s->tc_of_band[s->bands++] = (uint8_t)tc;
		}
	s->strict = s->bands;
	for (tc = 0; tc < tcs; tc++)
		if (tsa[tc] == SWETS_TSA_ETS) {
			band_of[tc] = s->bands;
			s->quanta[s->bands] = (bw[tc] ? bw[tc] : 1) * 100u;
			s->tc_of_band[s->bands++] = (uint8_t)tc;
		}
	for (p = 0; p < SWETS_PRIOMAP; p++) {
		/* a TC past the last one in use cannot be: prio_tc made tcs */
		tc = prio_tc[p % SWETS_TCS] < SWETS_TCS ?
		     prio_tc[p % SWETS_TCS] : 0;
		s->priomap[p] = band_of[tc];
		if (p < SWETS_TCS && pfc_en & 1u << p)
			s->lossless |= (uint16_t)(1u << band_of[tc]);
	}
}

bool swets_same_qdisc(const struct swets *a, const struct swets *b)
{
	/* a qdisc made by hand may have more bands than a plan can */
	if (a->bands > SWETS_TCS || b->bands > SWETS_TCS ||
	    a->strict > a->bands || b->strict > b->bands)
		return false;
	return a->bands == b->bands && a->strict == b->strict &&
	       !memcmp(a->quanta + a->strict, b->quanta + b->strict,
		       sizeof(a->quanta[0]) * (a->bands - a->strict)) &&
	       !memcmp(a->priomap, b->priomap, sizeof(a->priomap));
}

int swets_describe(const struct swets *s, char *buf, size_t len)
{
	size_t n;
	int b, p;

	n = (size_t)snprintf(buf, len, "%u bands, %u strict", s->bands,
			     s->strict);
	if (s->bands > s->strict && n < len)
		n += (size_t)snprintf(buf + n, len - n, ", quanta");
	for (b = s->strict; b < s->bands && n < len; b++)
		n += (size_t)snprintf(buf + n, len - n, " %u", s->quanta[b]);
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, ", priomap");
	for (p = 0; p < SWETS_TCS && n < len; p++)
		n += (size_t)snprintf(buf + n, len - n, " %u", s->priomap[p]);
	return (int)n;
}
