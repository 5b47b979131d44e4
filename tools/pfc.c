// SPDX-License-Identifier: GPL-2.0
/* PFC frames and the switch's PFC decision; see pfc.h. */
#include "pfc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const uint8_t pfc_addr[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x01 };

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

size_t pfc_build(uint8_t *buf, size_t len, const struct pfc_frame *f)
{
	uint8_t full[PFC_FRAME_DATA];
	int i;

	memcpy(full, f->dst, 6);
	memcpy(full + 6, f->src, 6);
	put16(full + 12, f->ethertype);
	put16(full + 14, f->opcode);
	put16(full + 16, f->vector);
	for (i = 0; i < PFC_PRIOS; i++)
		put16(full + 18 + 2 * i, f->quanta[i]);
	memset(buf, 0, len);
	memcpy(buf, full, len < sizeof(full) ? len : sizeof(full));
	return len;
}

int pfc_parse(const uint8_t *buf, size_t len, struct pfc_frame *f,
	      const char **why)
{
	int i;

	memset(f, 0, sizeof(*f));
	*why = "short";
	if (len < 14)
		return -1;
	memcpy(f->dst, buf, 6);
	memcpy(f->src, buf + 6, 6);
	f->ethertype = get16(buf + 12);
	if (f->ethertype != PFC_ETHERTYPE) {
		*why = "ethertype";
		return -1;
	}
	if (len < 16)
		return -1;
	f->opcode = get16(buf + 14);
	if (f->opcode != PFC_OPCODE) {
		*why = "opcode";
		return -1;
	}
	if (len < PFC_FRAME_DATA)
		return -1;
	f->vector = get16(buf + 16);
	for (i = 0; i < PFC_PRIOS; i++)
		f->quanta[i] = get16(buf + 18 + 2 * i);
	if (memcmp(f->dst, pfc_addr, 6)) {
		*why = "destination";
		return -1;
	}
	*why = NULL;
	return 0;
}

double pfc_quanta_s(unsigned int quanta, unsigned int speed_mbps)
{
	return (double)quanta * PFC_QUANTUM_BITS / (speed_mbps * 1e6);
}

int pfc_engine_add_port(struct pfc_engine *e, const char *name,
			uint64_t xoff, uint64_t xon)
{
	struct pfc_port *p;
	int i;

	if (e->nports >= PFC_MAX_PORTS || xon > xoff ||
	    strlen(name) >= sizeof(p->name))
		return -1;
	p = &e->port[e->nports++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->xoff = xoff;
	p->xon = xon;
	for (i = 0; i < PFC_PRIOS; i++) {
		p->stalled_since[i] = -1;
		p->last_indication[i] = -1e9;
	}
	return 0;
}

static void event(struct pfc_engine *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void event(struct pfc_engine *e, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (!e->event)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	e->event(e->ctx, line);
}

/* The watchdog of port P's band b holding priority p, at now. */
static void watchdog(struct pfc_engine *e, struct pfc_port *P,
		     const struct pfc_sample *s, int p, unsigned int b,
		     double now)
{
	bool moving, pausing;

	if (P->have_last && s->indications[p] != P->last.indications[p])
		P->last_indication[p] = now;
	if (e->watchdog <= 0)
		return;
	moving = !P->have_last || s->backlog[b] == 0 ||
		 s->sent[b] != P->last.sent[b];
	pausing = now - P->last_indication[p] < e->watchdog;
	if (moving || !pausing)
		P->stalled_since[p] = -1;
	else if (P->stalled_since[p] < 0)
		P->stalled_since[p] = now;
	if (!P->stormed[p] && P->stalled_since[p] >= 0 &&
	    now - P->stalled_since[p] >= e->watchdog) {
		P->stormed[p] = true;
		P->storms[p]++;
		if (e->storm)
			e->storm(e->ctx, (unsigned int)(P - e->port), p, true);
		event(e, "%s: priority %d stormed: band %u sent nothing for "
		      "%.0f ms under pauses from its partner; dropping for it "
		      "instead of pausing", P->name, p, b + 1,
		      (now - P->stalled_since[p]) * 1e3);
	}
	if (P->stormed[p] && now - P->last_indication[p] >= e->restore) {
		P->stormed[p] = false;
		P->stalled_since[p] = -1;
		if (e->storm)
			e->storm(e->ctx, (unsigned int)(P - e->port), p, false);
		event(e, "%s: priority %d restored: no pause received for "
		      "%.0f ms", P->name, p, e->restore * 1e3);
	}
}

/* Port P's congestion for each priority, from its sample. */
static void congestion(struct pfc_engine *e, struct pfc_port *P,
		       const struct pfc_sample *s, double now)
{
	int p;

	for (p = 0; p < PFC_PRIOS; p++) {
		unsigned int b = s->band_of[p];
		bool was = P->congested[p];
		uint64_t bl;

		/* lossless: a priority PFC is enabled on at this port (or
		 * was, until the watchdog turned it off for a storm)
		 */
		if ((!(s->pfc_en & 1u << p) && !P->stormed[p]) ||
		    b == PFC_NO_BAND || b >= s->bands || b >= PFC_MAX_BANDS) {
			P->congested[p] = false;
			continue;
		}
		bl = s->backlog[b];
		watchdog(e, P, s, p, b, now);
		if (bl >= P->xoff)
			P->congested[p] = true;
		else if (bl <= P->xon)
			P->congested[p] = false;
		if (P->stormed[p])
			P->congested[p] = false;
		if (bl > P->peak_backlog[p])
			P->peak_backlog[p] = bl;
		if (!was && P->congested[p]) {
			P->episodes[p]++;
			P->episode_start[p] = P->episode_peak_at[p] = now;
			P->episode_peak[p] = bl;
		} else if (P->congested[p] && bl > P->episode_peak[p]) {
			P->episode_peak[p] = bl;
			P->episode_peak_at[p] = now;
		} else if (was && !P->congested[p]) {
			double r = P->episode_peak_at[p] - P->episode_start[p];

			if (r > P->reaction_s[p])
				P->reaction_s[p] = r;
		}
	}
}

void pfc_engine_step(struct pfc_engine *e, const struct pfc_sample *s,
		     double now)
{
	unsigned int i, j;
	int p;

	for (i = 0; i < e->nports; i++) {
		if (!s[i].valid)
			continue;
		congestion(e, &e->port[i], &s[i], now);
		e->port[i].last = s[i];
		e->port[i].have_last = true;
	}
	for (i = 0; i < e->nports; i++) {
		struct pfc_port *I = &e->port[i];
		uint16_t quanta[PFC_PRIOS] = { 0 };
		uint16_t vector = 0;

		/* not read: its pauses stay as they are */
		if (!s[i].valid)
			continue;
		for (p = 0; p < PFC_PRIOS; p++) {
			bool want = false;

			if (s[i].pfc_en & 1u << p)
				for (j = 0; j < e->nports && !want; j++)
					want = j != i &&
					       e->port[j].congested[p];
			if (want && !I->paused[p]) {
				event(e, "%s: XOFF priority %d", I->name, p);
				I->paused_since[p] = now;
			} else if (want && now - I->last_xoff[p] >=
				   e->refresh) {
				/* the pause goes on */
			} else if (!want && I->paused[p]) {
				event(e, "%s: XON priority %d", I->name, p);
				I->paused_s[p] += now - I->paused_since[p];
			} else {
				continue;
			}
			vector |= (uint16_t)(1u << p);
			if (want) {
				quanta[p] = e->quanta;
				I->last_xoff[p] = now;
				I->xoff_sent[p]++;
			} else {
				I->xon_sent[p]++;
			}
			I->paused[p] = want;
		}
		if (vector && e->send)
			e->send(e->ctx, i, vector, quanta);
	}
}

double pfc_paused_time(const struct pfc_port *P, int p, double now)
{
	return P->paused_s[p] + (P->paused[p] ? now - P->paused_since[p] : 0);
}

void pfc_engine_reset_figures(struct pfc_engine *e)
{
	for (unsigned int i = 0; i < e->nports; i++) {
		struct pfc_port *P = &e->port[i];

		memset(P->peak_backlog, 0, sizeof(P->peak_backlog));
		memset(P->episodes, 0, sizeof(P->episodes));
		memset(P->reaction_s, 0, sizeof(P->reaction_s));
	}
}

void pfc_engine_release(struct pfc_engine *e)
{
	uint16_t quanta[PFC_PRIOS] = { 0 };
	unsigned int i;
	int p;

	for (i = 0; i < e->nports; i++) {
		uint16_t vector = 0;

		for (p = 0; p < PFC_PRIOS; p++)
			if (e->port[i].paused[p]) {
				vector |= (uint16_t)(1u << p);
				e->port[i].paused[p] = false;
				e->port[i].xon_sent[p]++;
			}
		if (vector && e->send)
			e->send(e->ctx, i, vector, quanta);
	}
}

int pfc_parse_port_arg(const char *arg, char name[16], uint64_t *xoff,
		       uint64_t *xon, uint64_t *limit)
{
	const char *c1 = strchr(arg, ':'), *c2, *c3;
	char *end;

	if (!c1 || c1 == arg || c1 - arg >= 16)
		return -1;
	c2 = strchr(c1 + 1, ':');
	if (!c2)
		return -1;
	c3 = strchr(c2 + 1, ':');
	memcpy(name, arg, (size_t)(c1 - arg));
	name[c1 - arg] = '\0';
	if (c1[1] < '0' || c1[1] > '9' || c2[1] < '0' || c2[1] > '9' ||
	    (c3 && (c3[1] < '0' || c3[1] > '9')))
		return -1;
	*xoff = strtoull(c1 + 1, &end, 10);
	if (end != c2)
		return -1;
	*xon = strtoull(c2 + 1, &end, 10);
	if (end != (c3 ? c3 : c2 + strlen(c2)) || *xon > *xoff || *xoff == 0)
		return -1;
	*limit = 0;
	if (!c3)
		return 0;
	*limit = strtoull(c3 + 1, &end, 10);
	return *end || *limit < *xoff ? -1 : 0;
}
