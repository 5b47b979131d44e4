// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of swets.c: the ets qdisc a switch port's DCB state asks for, on
 * the configurations the lab ships and on the corners of the rules
 * (swets.h).  tests/test_pfc_host.py checks the same configurations give
 * what dcblab.lab.switch.ets_qdisc_args makes at setup.
 */
#include "check.h"
#include "swets.h"

#include <string.h>

int checks_passed, checks_failed;

enum { S = 0, E = SWETS_TSA_ETS };

/* topology/dcb-fabric.toml: TC3 strict (PCP 5), 20/30/50 on TC0-2 */
static void test_fabric(void)
{
	const uint8_t prio_tc[8] = { 0, 0, 1, 2, 0, 3, 0, 0 };
	const uint8_t tsa[8] = { E, E, E, S, S, S, S, S };
	const uint8_t bw[8] = { 20, 30, 50 };
	const uint8_t map[16] = { 1, 1, 2, 3, 1, 0, 1, 1,
				  1, 1, 2, 3, 1, 0, 1, 1 };
	struct swets s;
	char text[128];

	swets_plan(prio_tc, tsa, bw, 1u << 3, &s);
	CHECK(s.bands == 4 && s.strict == 1);
	CHECK(s.tc_of_band[0] == 3 && s.tc_of_band[1] == 0 &&
	      s.tc_of_band[2] == 1 && s.tc_of_band[3] == 2);
	CHECK(s.quanta[0] == 0 && s.quanta[1] == 2000 &&
	      s.quanta[2] == 3000 && s.quanta[3] == 5000);
	CHECK(!memcmp(s.priomap, map, sizeof(map)));
	/* priority 3 is TC2's, in band 3 */
	CHECK(s.lossless == 1u << 3);
	swets_describe(&s, text, sizeof(text));
	CHECK(!strcmp(text, "4 bands, 1 strict, quanta 2000 3000 5000, "
		      "priomap 1 1 2 3 1 0 1 1"));
}

/* Strict TCs first, the highest first; ETS TCs after, in TC order. */
static void test_mixed_order(void)
{
	const uint8_t prio_tc[8] = { 0, 1, 2, 3, 0, 0, 0, 0 };
	const uint8_t tsa[8] = { E, S, E, 1 /* CBS: strict */, S, S, S, S };
	const uint8_t bw[8] = { 60, 0, 0, 0 };
	struct swets s;

	swets_plan(prio_tc, tsa, bw, 0x06, &s);
	CHECK(s.bands == 4 && s.strict == 2);
	CHECK(s.tc_of_band[0] == 3 && s.tc_of_band[1] == 1 &&
	      s.tc_of_band[2] == 0 && s.tc_of_band[3] == 2);
	/* a 0 % share is served as 1 %: its band still moves */
	CHECK(s.quanta[2] == 6000 && s.quanta[3] == 100);
	CHECK(s.priomap[0] == 2 && s.priomap[1] == 1 && s.priomap[2] == 3 &&
	      s.priomap[3] == 0 && s.priomap[9] == 1);
	/* priorities 1 and 2: TC1 (band 1) and TC2 (band 3) */
	CHECK(s.lossless == ((1u << 1) | (1u << 3)));
}

/* Only the TCs priorities map to have bands: TC2-7 here have none. */
static void test_unused_tcs_have_no_band(void)
{
	const uint8_t prio_tc[8] = { 0, 0, 0, 1, 1, 0, 0, 0 };
	const uint8_t tsa[8] = { E, E, E, E, E, E, E, E };
	const uint8_t bw[8] = { 40, 30, 30 };
	struct swets s, t;

	swets_plan(prio_tc, tsa, bw, 0, &s);
	CHECK(s.bands == 2 && s.strict == 0 && s.lossless == 0);
	CHECK(s.quanta[0] == 4000 && s.quanta[1] == 3000);
	/* the same qdisc: PFC bits are not the qdisc's */
	swets_plan(prio_tc, tsa, bw, 0xff, &t);
	CHECK(swets_same_qdisc(&s, &t) && t.lossless == 0x3);
	/* a share changed is another qdisc */
	t = s;
	t.quanta[1] = 2000;
	CHECK(!swets_same_qdisc(&s, &t));
	t = s;
	t.priomap[12] = 0;
	CHECK(!swets_same_qdisc(&s, &t));
	/* a dumped qdisc of 16 bands is another, and read within bounds */
	t = s;
	t.bands = 16;
	CHECK(!swets_same_qdisc(&s, &t) && !swets_same_qdisc(&t, &t));
}

/* A single TC, strict: one band, no quanta. */
static void test_one_strict_tc(void)
{
	const uint8_t zero[8] = { 0 };
	struct swets s;
	char text[128];

	swets_plan(zero, zero, zero, 0, &s);
	CHECK(s.bands == 1 && s.strict == 1);
	swets_describe(&s, text, sizeof(text));
	CHECK(!strcmp(text, "1 bands, 1 strict, priomap 0 0 0 0 0 0 0 0"));
	/* a short buffer is cut, not overrun */
	CHECK(swets_describe(&s, text, 8) >= 8 && strlen(text) == 7);
}

int main(void)
{
	test_fabric();
	test_mixed_order();
	test_unused_tcs_have_no_band();
	test_one_strict_tc();
	printf("test_swets: %d passed, %d failed\n", checks_passed,
	       checks_failed);
	return checks_failed ? 1 : 0;
}
