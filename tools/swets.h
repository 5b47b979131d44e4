/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a switch port's egress scheduler is, from the port's DCB state:
 * the ets qdisc (bands, strict bands, quanta, priomap) enforcing an IEEE
 * 802.1Qaz ETS configuration, and which of its bands hold a priority with
 * PFC on.  pfcd programs it whenever a port's DCB changes (by dcb,
 * lldptool or DCBX); the lab's setup makes the same qdisc from the
 * topology file (dcblab.lab.switch.ets_qdisc_args: the same rules), so a
 * port left as the file says is never touched.
 *
 * The rules:
 *  - the TCs in use are 0 to the highest TC a priority maps to;
 *  - strict TCs get the first bands, the highest TC first (among strict
 *    classes the higher TC wins, and ets serves band 0 first); the ETS
 *    TCs follow in TC order; a TSA other than ETS (strict, CBS, vendor)
 *    is served as strict;
 *  - an ETS band's quantum is 100 bytes per percent of its share (a 0 %
 *    share counts as 1 %);
 *  - priority p (0..15) goes to the band of the TC of priority p % 8.
 */
#ifndef DCBLAB_SWETS_H
#define DCBLAB_SWETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SWETS_TCS 8
#define SWETS_PRIOMAP 16
/* IEEE_8021QAZ_TSA_ETS */
#define SWETS_TSA_ETS 2

struct swets {
	uint8_t bands, strict;
	uint8_t tc_of_band[SWETS_TCS];
	uint32_t quanta[SWETS_TCS];	/* per band; 0 for a strict one */
	uint8_t priomap[SWETS_PRIOMAP];
	uint16_t lossless;		/* bit b: band b holds a PFC priority */
};

/* The scheduler of a port whose ETS is prio_tc (per priority), tsa and
 * bw (per TC, IEEE numbers and percents) and whose PFC enable bits are
 * pfc_en.
 */
void swets_plan(const uint8_t prio_tc[SWETS_TCS], const uint8_t tsa[SWETS_TCS],
		const uint8_t bw[SWETS_TCS], uint8_t pfc_en, struct swets *s);
/* The same ets qdisc (bands, strict, quanta, priomap)? */
bool swets_same_qdisc(const struct swets *a, const struct swets *b);
/* "3 bands, 1 strict, quanta 2000 3000 5000, priomap 1 1 2 0 0 0 0 0"
 * (the first 8 priorities; the 8 above repeat them); snprintf's return.
 */
int swets_describe(const struct swets *s, char *buf, size_t len);

#endif
