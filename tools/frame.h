/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What priosink needs from one received Ethernet frame: its 802.1Q tag
 * (from PACKET_AUXDATA or still in the frame) and the payload.h payload of
 * an IPv4/UDP, IPv6/UDP or raw-ethertype frame.
 */
#ifndef DCBLAB_FRAME_H
#define DCBLAB_FRAME_H

#include "payload.h"

#include <stddef.h>
#include <stdint.h>

#define FRAME_UNTAGGED 8	/* pcp of a frame without a tag */

struct frame_match {
	uint16_t port;		/* UDP destination port */
	uint16_t ethertype;	/* raw mode */
};

struct frame_info {
	int pcp;		/* 0..7 or FRAME_UNTAGGED */
	int vid;		/* 0..4095, -1 when untagged */
	struct payload payload;
};

/*
 * 0 and *fi filled when frame (len bytes from the destination MAC on)
 * carries a payload matching m; -1 otherwise.  aux_tci is the TCI the
 * kernel stripped on receive, or -1 when it stripped none.
 */
int frame_parse(const uint8_t *frame, size_t len, int aux_tci,
		const struct frame_match *m, struct frame_info *fi);

#endif
