// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of pfc.c: PFC frames built and read back byte by byte, broken in
 * each way pfc_parse() names, and the switch's decision (pfcd's engine)
 * over made-up samples of three ports.
 */
#include "check.h"
#include "pfc.h"

#include <string.h>

int checks_passed, checks_failed;

static void test_frame(void)
{
	struct pfc_frame f = { .ethertype = PFC_ETHERTYPE,
			       .opcode = PFC_OPCODE, .vector = 0x08 };
	struct pfc_frame g;
	const char *why;
	uint8_t buf[PFC_FRAME_MIN];

	memcpy(f.dst, pfc_addr, 6);
	memcpy(f.src, "\x02\x00\x00\x00\x00\x01", 6);
	f.quanta[3] = 0xffff;
	CHECK(pfc_build(buf, sizeof(buf), &f) == PFC_FRAME_MIN);
	/* as on the wire: big-endian, vector then the eight times */
	CHECK(!memcmp(buf, "\x01\x80\xc2\x00\x00\x01", 6));
	CHECK(buf[12] == 0x88 && buf[13] == 0x08);
	CHECK(buf[14] == 0x01 && buf[15] == 0x01);
	CHECK(buf[16] == 0x00 && buf[17] == 0x08);
	CHECK(buf[18 + 6] == 0xff && buf[18 + 7] == 0xff);
	CHECK(buf[18 + 5] == 0 && buf[33] == 0 && buf[59] == 0);
	CHECK(pfc_parse(buf, sizeof(buf), &g, &why) == 0 && !why);
	CHECK(g.vector == 0x08 && g.quanta[3] == 0xffff && g.quanta[2] == 0);

	CHECK(pfc_parse(buf, 33, &g, &why) == -1 && !strcmp(why, "short"));
	CHECK(pfc_parse(buf, 10, &g, &why) == -1 && !strcmp(why, "short"));
	buf[15] = 0x02;
	CHECK(pfc_parse(buf, sizeof(buf), &g, &why) == -1 &&
	      !strcmp(why, "opcode"));
	buf[15] = 0x01;
	buf[13] = 0x00;
	CHECK(pfc_parse(buf, sizeof(buf), &g, &why) == -1 &&
	      !strcmp(why, "ethertype"));
	buf[13] = 0x08;
	buf[5] = 0x02;
	CHECK(pfc_parse(buf, sizeof(buf), &g, &why) == -1 &&
	      !strcmp(why, "destination"));
	/* cut short on purpose: only what fits, nothing past it */
	memset(buf, 0xee, sizeof(buf));
	CHECK(pfc_build(buf, 20, &f) == 20 && buf[19] == 0x00 &&
	      buf[20] == 0xee);

	/* 65535 quanta of 512 bits at 1 Gbit/s: 33.55 ms */
	CHECK(pfc_quanta_s(65535, 1000) > 0.03355 &&
	      pfc_quanta_s(65535, 1000) < 0.03356);
	CHECK(pfc_quanta_s(1, 10) > 51.1e-6 && pfc_quanta_s(1, 10) < 51.3e-6);
}

struct sent {
	unsigned int storm_calls, storm_port;
	int storm_prio;
	bool stormed;
	unsigned int n;
	unsigned int port[16];
	uint16_t vector[16], quanta3[16];
};

static void on_send(void *ctx, unsigned int port, uint16_t vector,
		    const uint16_t quanta[PFC_PRIOS])
{
	struct sent *s = ctx;

	if (s->n < 16) {
		s->port[s->n] = port;
		s->vector[s->n] = vector;
		s->quanta3[s->n] = quanta[3];
	}
	s->n++;
}

static void on_storm(void *ctx, unsigned int port, int prio, bool stormed)
{
	struct sent *s = ctx;

	s->storm_calls++;
	s->storm_port = port;
	s->storm_prio = prio;
	s->stormed = stormed;
}

/* Three ports, PFC on priority 3 everywhere */
static void setup(struct pfc_engine *e, struct sent *out,
		  struct pfc_sample s[3])
{
	int i, p;

	memset(e, 0, sizeof(*e));
	memset(out, 0, sizeof(*out));
	e->quanta = 0xffff;
	e->refresh = 0.010;
	e->watchdog = 0.200;
	e->restore = 0.200;
	e->send = on_send;
	e->storm = on_storm;
	e->ctx = out;
	CHECK(pfc_engine_add_port(e, "swp1", 30000, 15000) == 0);
	CHECK(pfc_engine_add_port(e, "swp2", 30000, 15000) == 0);
	CHECK(pfc_engine_add_port(e, "swp3", 30000, 15000) == 0);
	memset(s, 0, 3 * sizeof(*s));
	for (i = 0; i < 3; i++) {
		s[i].valid = true;
		s[i].pfc_en = 0x08;
		s[i].bands = 4;
		for (p = 0; p < PFC_PRIOS; p++)
			s[i].band_of[p] = p == 3 ? 2 : 3;
	}
}

static void test_engine(void)
{
	struct pfc_engine e;
	struct pfc_sample s[3];
	struct sent out;

	CHECK(pfc_engine_add_port(&e, "x", 10, 20) == -1);

	setup(&e, &out, s);
	/* below XOFF: nothing */
	s[2].backlog[2] = 29999;
	pfc_engine_step(&e, s, 1.000);
	CHECK(out.n == 0);
	/* swp3's band of priority 3 reaches XOFF: swp1 and swp2 pause their
	 * partners, not swp3 itself
	 */
	s[2].backlog[2] = 30000;
	pfc_engine_step(&e, s, 1.001);
	CHECK(out.n == 2);
	CHECK(out.port[0] == 0 && out.port[1] == 1);
	CHECK(out.vector[0] == 0x08 && out.quanta3[0] == 0xffff);
	CHECK(e.port[0].paused[3] && e.port[1].paused[3]);
	CHECK(!e.port[2].paused[3]);
	CHECK(e.port[2].episodes[3] == 1);
	/* the pause goes on: XOFF again only after refresh */
	s[2].backlog[2] = 40000;
	pfc_engine_step(&e, s, 1.005);
	CHECK(out.n == 2);
	pfc_engine_step(&e, s, 1.012);
	CHECK(out.n == 4 && out.quanta3[2] == 0xffff);
	CHECK(e.port[0].xoff_sent[3] == 2);
	/* paused since 1.001: the pause in effect counts */
	CHECK(pfc_paused_time(&e.port[0], 3, 1.012) > 0.0109 &&
	      pfc_paused_time(&e.port[0], 3, 1.012) < 0.0111);
	/* between XON and XOFF: still paused (hysteresis) */
	s[2].backlog[2] = 20000;
	pfc_engine_step(&e, s, 1.015);
	CHECK(out.n == 4 && e.port[0].paused[3]);
	/* at XON: XON (quanta 0) to both */
	s[2].backlog[2] = 15000;
	pfc_engine_step(&e, s, 1.020);
	CHECK(out.n == 6 && out.vector[4] == 0x08 && out.quanta3[4] == 0);
	CHECK(!e.port[0].paused[3] && e.port[0].xon_sent[3] == 1);
	/* XOFF at 1.001, XON at 1.020: 19 ms, and no more after */
	CHECK(pfc_paused_time(&e.port[0], 3, 5.0) > 0.0189 &&
	      pfc_paused_time(&e.port[0], 3, 5.0) < 0.0191);
	CHECK(pfc_paused_time(&e.port[2], 3, 5.0) == 0);
	/* the figures: the peak 40000 seen 4 ms after going over XOFF */
	CHECK(e.port[2].peak_backlog[3] == 40000);
	CHECK(e.port[2].reaction_s[3] > 0.0039 &&
	      e.port[2].reaction_s[3] < 0.0041);

	/* a new measurement */
	pfc_engine_reset_figures(&e);
	CHECK(e.port[2].peak_backlog[3] == 0 && e.port[2].episodes[3] == 0);
	CHECK(e.port[2].reaction_s[3] == 0 && e.port[0].xoff_sent[3] == 2);

	/* a port without PFC on the priority is never paused */
	setup(&e, &out, s);
	s[2].pfc_en = 0;
	s[0].backlog[2] = 50000;
	pfc_engine_step(&e, s, 1.0);
	CHECK(out.n == 1 && out.port[0] == 1);
	CHECK(!e.port[2].paused[3]);
	/* a port not read this step keeps its pauses as they are */
	s[1].valid = false;
	s[0].backlog[2] = 0;
	pfc_engine_step(&e, s, 1.001);
	CHECK(out.n == 1 && e.port[1].paused[3]);
	/* the end releases every pause */
	pfc_engine_release(&e);
	CHECK(out.n == 2 && out.vector[1] == 0x08 && out.quanta3[1] == 0);
	CHECK(!e.port[1].paused[3]);

	/* a band of a priority without PFC at its port pauses no one */
	setup(&e, &out, s);
	s[2].pfc_en = 0;
	s[2].backlog[2] = 50000;
	pfc_engine_step(&e, s, 1.0);
	CHECK(out.n == 0 && !e.port[2].congested[3]);
	CHECK(e.port[2].episodes[3] == 0 && e.port[2].peak_backlog[3] == 0);

	/* the watchdog: swp3 is paused by its partner (its indications
	 * rise) and its band of priority 3 sends nothing
	 */
	setup(&e, &out, s);
	s[2].backlog[2] = 50000;
	s[2].sent[2] = 1000;
	pfc_engine_step(&e, s, 1.0);
	CHECK(e.port[0].paused[3]);
	for (int i = 1; i <= 30; i++) {
		s[2].indications[3] += 1;
		pfc_engine_step(&e, s, 1.0 + 0.01 * i);
	}
	CHECK(e.port[2].stormed[3] && e.port[2].storms[3] == 1);
	CHECK(out.storm_calls == 1 && out.stormed && out.storm_port == 2 &&
	      out.storm_prio == 3);
	/* stormed: its congestion pauses no one */
	CHECK(!e.port[0].paused[3] && !e.port[1].paused[3]);
	/* no pause received for restore: back to normal, paused for again */
	pfc_engine_step(&e, s, 1.50);
	pfc_engine_step(&e, s, 1.56);
	CHECK(!e.port[2].stormed[3]);
	CHECK(out.storm_calls == 2 && !out.stormed);
	CHECK(e.port[0].paused[3]);
	/* a band that moves is never stormed */
	setup(&e, &out, s);
	s[2].backlog[2] = 50000;
	for (int i = 0; i <= 30; i++) {
		s[2].indications[3] += 1;
		s[2].sent[2] += 1500;
		pfc_engine_step(&e, s, 1.0 + 0.01 * i);
	}
	CHECK(!e.port[2].stormed[3] && e.port[2].storms[3] == 0);
}

static void test_port_arg(void)
{
	char name[16];
	uint64_t xoff, xon, limit;

#define PARSE(arg) pfc_parse_port_arg(arg, name, &xoff, &xon, &limit)
	CHECK(PARSE("swp3:30000:15000") == 0);
	CHECK(!strcmp(name, "swp3") && xoff == 30000 && xon == 15000);
	CHECK(limit == 0);
	CHECK(PARSE("swp3:100:200") == -1);
	CHECK(PARSE("swp3:0:0") == -1);
	CHECK(PARSE("swp3:30000") == -1);
	CHECK(PARSE(":1:1") == -1);
	CHECK(PARSE("swp3:1x:1") == -1);
	CHECK(PARSE("swp3:-1:1") == -1);
	CHECK(PARSE("a-name-far-too-long:1:1") == -1);
	/* the lossless bands' limit, when given, holds XOFF at least */
	CHECK(PARSE("swp3:30000:15000:90000") == 0 && limit == 90000);
	CHECK(PARSE("swp3:30000:15000:100") == -1);
	CHECK(PARSE("swp3:30000:15000:") == -1);
	CHECK(PARSE("swp3:30000:15000:9e9") == -1);
	CHECK(PARSE("swp3:30000:15000:1:2") == -1);
	CHECK(PARSE("swp3:30000:1x:90000") == -1);
#undef PARSE
}

int main(void)
{
	test_frame();
	test_engine();
	test_port_arg();
	printf("test_pfc: %d passed, %d failed\n", checks_passed,
	       checks_failed);
	return checks_failed ? 1 : 0;
}
