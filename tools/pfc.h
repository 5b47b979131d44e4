/* SPDX-License-Identifier: GPL-2.0 */
/*
 * IEEE 802.1Qbb Priority-based Flow Control without sockets: the frame
 * (built and parsed over bytes) and the switch's decision (an engine over
 * samples of its ports), shared by pfcsend (frames by hand) and pfcd (the
 * switch's PFC agent), and tested on the host by test_pfc.
 *
 * The frame: destination 01:80:C2:00:00:01, EtherType 0x8808 (MAC
 * control), opcode 0x0101, a 16-bit class-enable vector (bit n: priority
 * n), eight 16-bit pause times in quanta of 512 bit times at the link
 * speed, padded to 60 bytes (64 with the FCS the NIC adds).  A time of 0
 * is XON.
 *
 * The engine: a software switch has no ingress buffer, so congestion is
 * the backlog of an egress port's ETS band.  When the band that holds
 * priority p on port E, PFC enabled on p at E, reaches E's XOFF threshold
 * (bytes), every other
 * port with PFC enabled on p is paused for p: XOFF with pfc_engine.quanta,
 * sent again every refresh seconds while it lasts, and XON once every
 * band holding p is at or below its port's XON threshold.  A band that
 * holds backlog and sends nothing for watchdog seconds while its port
 * receives pauses for p is stormed (a PFC watchdog, as switches have):
 * its congestion no longer pauses anyone, and the agent (the storm
 * callback) stops honouring the partner's pauses for p and drops what
 * arrives for it, until its port has received no pause for p for restore
 * seconds.
 */
#ifndef DCBLAB_PFC_H
#define DCBLAB_PFC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PFC_PRIOS 8
#define PFC_ETHERTYPE 0x8808
#define PFC_OPCODE 0x0101
#define PFC_QUANTUM_BITS 512
/* destination, source, EtherType, opcode, vector, 8 times; padded */
#define PFC_FRAME_DATA 34
#define PFC_FRAME_MIN 60
#define PFC_MAX_PORTS 16
#define PFC_MAX_BANDS 16
/* band_of[] of a priority that no ETS band holds (no ets qdisc) */
#define PFC_NO_BAND 0xff

extern const uint8_t pfc_addr[6];

/* What a frame says, or what to put in one. */
struct pfc_frame {
	uint8_t dst[6], src[6];
	uint16_t ethertype, opcode;
	uint16_t vector;		/* class-enable vector, all 16 bits */
	uint16_t quanta[PFC_PRIOS];
};

/*
 * Writes f into buf (at least len bytes): the 34 bytes of a frame then
 * zeros up to len.  len below 34 cuts the frame short (for fuzzing);
 * returns len.
 */
size_t pfc_build(uint8_t *buf, size_t len, const struct pfc_frame *f);

/*
 * Reads a frame: 0 when buf holds a whole PFC frame (to the PFC address,
 * EtherType 0x8808, opcode 0x0101), else -1 with *why set to the first
 * thing wrong ("short", "ethertype", "opcode", "destination").  The
 * fields read so far are in f either way.
 */
int pfc_parse(const uint8_t *buf, size_t len, struct pfc_frame *f,
	      const char **why);

/* A pause of quanta at speed_mbps, in seconds. */
double pfc_quanta_s(unsigned int quanta, unsigned int speed_mbps);

/* One port's state read at one instant. */
struct pfc_sample {
	bool valid;			/* read; else ignored this step */
	uint8_t pfc_en;			/* PFC enable bits (dcbnl) */
	uint8_t band_of[PFC_PRIOS];	/* ETS band of each priority */
	unsigned int bands;
	uint64_t backlog[PFC_MAX_BANDS];	/* bytes queued */
	uint64_t sent[PFC_MAX_BANDS];		/* bytes sent, running */
	uint64_t drops[PFC_MAX_BANDS];		/* frames dropped, running */
	uint64_t indications[PFC_PRIOS];	/* pauses received, running */
};

struct pfc_port {
	char name[16];
	uint64_t xoff, xon;		/* band thresholds, bytes */
	/* state */
	bool congested[PFC_PRIOS];	/* its band of p is over XOFF */
	bool paused[PFC_PRIOS];		/* its partner is paused for p */
	double last_xoff[PFC_PRIOS];
	bool stormed[PFC_PRIOS];
	double stalled_since[PFC_PRIOS];	/* <0: its band moves */
	double last_indication[PFC_PRIOS];
	struct pfc_sample last;
	bool have_last;
	/* counters and figures */
	uint64_t xoff_sent[PFC_PRIOS], xon_sent[PFC_PRIOS];
	/* time its partner was paused for p: ended pauses (XOFF to XON),
	 * and when the one in effect began
	 */
	double paused_s[PFC_PRIOS], paused_since[PFC_PRIOS];
	uint64_t storms[PFC_PRIOS];
	uint64_t peak_backlog[PFC_PRIOS];	/* its band of p, bytes */
	uint64_t episodes[PFC_PRIOS];	/* times it went over XOFF */
	/* Reaction: from going over XOFF (the XOFFs go out in that step)
	 * to the band's highest backlog before it went under XON, the
	 * largest over the episodes.
	 */
	double reaction_s[PFC_PRIOS];
	double episode_start[PFC_PRIOS], episode_peak_at[PFC_PRIOS];
	uint64_t episode_peak[PFC_PRIOS];
};

struct pfc_engine {
	struct pfc_port port[PFC_MAX_PORTS];
	unsigned int nports;
	uint16_t quanta;		/* of an XOFF */
	double refresh;			/* s between XOFFs of one pause */
	double watchdog, restore;	/* s; watchdog 0: no watchdog */
	/* Send a frame on port: vector's priorities, their times. */
	void (*send)(void *ctx, unsigned int port, uint16_t vector,
		     const uint16_t quanta[PFC_PRIOS]);
	/* One line of what happened, without a newline. */
	void (*event)(void *ctx, const char *line);
	/* The watchdog found port's band of prio stormed, or restored it:
	 * the agent stops honouring the partner's pauses for prio there and
	 * drops what arrives for it, or undoes that.  May be NULL.
	 */
	void (*storm)(void *ctx, unsigned int port, int prio, bool stormed);
	void *ctx;
};

/* Port i's configuration: 0, or -1 when there is no room or xon > xoff. */
int pfc_engine_add_port(struct pfc_engine *e, const char *name,
			uint64_t xoff, uint64_t xon);

/* One step at time now (seconds) over one sample per port. */
void pfc_engine_step(struct pfc_engine *e, const struct pfc_sample *s,
		     double now);

/* Seconds port P's partner was paused for p up to now: a running count,
 * the pause in effect included.
 */
double pfc_paused_time(const struct pfc_port *P, int p, double now);

/* Figures (peaks, reactions, episodes) from now on: a new measurement. */
void pfc_engine_reset_figures(struct pfc_engine *e);

/* End: XON for every pause in effect. */
void pfc_engine_release(struct pfc_engine *e);

/*
 * "PORT:XOFF:XON[:LIMIT]" (bytes) of pfcd's command line into name, xoff,
 * xon and limit (0 without one; else at least XOFF): 0, or -1 when
 * malformed.
 */
int pfc_parse_port_arg(const char *arg, char name[16], uint64_t *xoff,
		       uint64_t *xon, uint64_t *limit);

#endif
